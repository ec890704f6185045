"""95% bounds on the change a progress verdict did not call (`recent_rise_hi`, `trend_change_lo`
/ `_hi`): their coverage on curves with a known line added, and the words they give a plateau
and a flat run, through the function and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.diagnose.nullmodel import fmt_p
from pgrpo.diagnose.progress import PLATEAU_SHARE, assess_progress
from pgrpo.diagnose.progresstext import POSSIBLE_P

LENGTHS = (24, 60, 150)


def _noise(rng, kind: str, mean: np.ndarray) -> tuple[np.ndarray, int | None]:
    if kind == "binomial":  # batch means of 64 rollouts at the curve's rate
        return rng.binomial(64, np.clip(mean, 0.0, 1.0)) / 64, 64
    e = np.zeros(mean.size)
    for k in range(1, mean.size):  # AR(1), rho 0.4
        e[k] = 0.4 * e[k - 1] + rng.normal(0.0, 0.05)
    return mean + e, None


def _coverage(kind: str, lengths: tuple[int, ...], m: int, seed: int) -> tuple[float, float]:
    """Shares of m curves whose upper bound covers a known rise over the second half, and whose
    interval covers a known change over the run."""
    rng = np.random.default_rng(seed)
    rise_hits = change_hits = 0
    for i in range(m):
        n = lengths[i % len(lengths)]
        step = np.arange(n, dtype=float)
        delta, p0 = rng.uniform(-0.1, 0.3), rng.uniform(0.2, 0.6)
        h = n // 2  # flat first half, a line of total rise delta over the second
        bent = p0 + np.where(step >= h, delta * (step - h) / (n - 1 - h), 0.0)
        y, n_roll = _noise(rng, kind, bent)
        ev = assess_progress(step, y, n_rollouts=n_roll, fit=False).evidence
        rise_hits += ev["recent_rise_hi"] >= delta
        y, n_roll = _noise(rng, kind, p0 + delta * step / (n - 1))  # a line over the run
        ev = assess_progress(step, y, n_rollouts=n_roll, fit=False).evidence
        change_hits += ev["trend_change_lo"] <= delta <= ev["trend_change_hi"]
    return rise_hits / m, change_hits / m


@pytest.mark.parametrize(("kind", "band"), [("binomial", (0.93, 0.97)), ("ar1", (0.94, 0.985))])
def test_the_bounds_cover_the_true_change_at_their_level(kind, band):
    """Nominal 0.95 (measured 0.946 / 0.948 binomial, 0.972 / 0.964 AR(1), where the null takes
    an upper bound on rho); the binomial sd of a share over 500 curves is ~0.01, so a 90% or a
    97.5% bound fails here."""
    rise, change = _coverage(kind, LENGTHS, 500, seed=7)
    assert band[0] <= rise <= band[1]
    assert band[0] <= change <= band[1]


def test_the_bounds_hold_on_short_curves():
    """8-12 points: the second half has 4-6 (measured 0.94-0.99 in a review)."""
    for kind in ("binomial", "ar1"):
        rise, change = _coverage(kind, (8, 10, 12), 300, seed=11)
        assert 0.90 <= rise <= 0.995 and 0.90 <= change <= 0.995, (kind, rise, change)


def test_the_bounds_are_in_the_rewards_units_and_move_with_them():
    rng = np.random.default_rng(3)
    step = np.arange(80, dtype=float)
    y = 0.3 + 0.002 * step + rng.normal(0, 0.05, 80)
    ev = assess_progress(step, y, fit=False).evidence
    ev2 = assess_progress(step * 5, 10 * y - 4, fit=False).evidence  # step unit and scale
    for key in ("recent_rise", "recent_rise_hi", "trend_change", "trend_change_lo"):
        assert ev2[key] == pytest.approx(10 * ev[key], rel=1e-9, abs=1e-12)
    assert ev["trend_change_lo"] < ev["trend_change"] < ev["trend_change_hi"]
    assert ev["recent_rise"] < ev["recent_rise_hi"]


def _plateau(n_flat: int, noise: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    rise = np.linspace(0.1, 0.8, 20)
    y = np.concatenate([rise, np.full(n_flat, 0.8)]) + rng.normal(0, noise, 20 + n_flat)
    return np.arange(y.size, dtype=float), y


def test_a_long_quiet_plateau_has_stopped_and_a_short_noisy_one_only_probably():
    v = assess_progress(*_plateau(300, 0.03), fit=False)
    assert v.label == "plateau"
    gain = v.evidence["end_level"] - v.evidence["start_level"]
    assert v.evidence["recent_rise_hi"] <= PLATEAU_SHARE * gain
    assert v.summary.startswith("Plateaued:") and "has stopped" in v.summary
    assert v.action.startswith("more steps at this setting are unlikely to help")

    v = assess_progress(*_plateau(30, 0.15, seed=2), fit=False)
    assert v.label == "plateau"
    gain = v.evidence["end_level"] - v.evidence["start_level"]
    hi = v.evidence["recent_rise_hi"]
    assert PLATEAU_SHARE * gain < hi <= gain and v.evidence["plateau_stopped"] == 0.0
    assert v.summary.startswith("Probably plateaued:")
    assert (
        f"only rises of more than {hi:+.3g} over it are rejected at the 5% level "
        f"({hi / gain:.0%} of the gain so far)" in v.summary
    )
    assert v.action.startswith("not yet clear that it has stopped")


def test_a_plateau_says_when_it_turned_down_or_when_the_noise_hides_everything():
    rng = np.random.default_rng(0)
    step = np.arange(60.0)  # a rise, then a slow fall over the second half
    y = np.concatenate([np.linspace(0.1, 0.9, 30), np.linspace(0.9, 0.85, 30)])
    y = y + rng.normal(0, 0.01, 60)
    v = assess_progress(step, y, fit=False)
    assert v.label == "plateau" and v.evidence["recent_rise_hi"] < 0
    assert v.evidence["plateau_stopped"] == 1.0
    assert "has turned down" in v.summary and "a fall at the 95% level" in v.summary

    y = np.concatenate([np.linspace(0.1, 0.5, 12), 0.5 + rng.normal(0, 0.4, 12)])
    for seed in range(100):  # a noisy second half after a clear rise: bound beyond the gain
        y[12:] = 0.5 + np.random.default_rng(seed).normal(0, 0.3, 12)
        v = assess_progress(np.arange(24.0), y, fit=False)
        gain = v.evidence["end_level"] - v.evidence["start_level"]
        if v.label == "plateau" and v.evidence["recent_rise_hi"] > gain:
            break
    else:
        pytest.fail("no seed gave a plateau whose bound exceeds its gain")
    assert v.summary.startswith("Rose, then no significant rise:")
    assert "too noisy to tell whether it has stopped" in v.summary
    assert v.evidence["plateau_stopped"] == 0.0


def test_a_second_half_without_spread_still_gets_a_bound_of_some_width():
    """A discrete reward that did not move over the second half has a HAC error of 0; the bound
    was the point estimate, "a rise of at most +0" (review, 2026-12-04)."""
    rng = np.random.default_rng(1)
    first = rng.binomial(4, np.linspace(0.2, 0.75, 8)) / 4
    y = np.concatenate([first, np.full(10, 0.75)])  # the second half: points 9-17
    ev = assess_progress(np.arange(18.0), y, n_rollouts=4, fit=False).evidence
    assert ev["recent_rise"] == 0.0 and ev["recent_rise_hi"] > 0.05


def test_a_flat_verdict_gives_the_interval_and_names_a_drift_it_did_not_call():
    rng = np.random.default_rng(0)
    step = np.arange(60, dtype=float)
    v = assess_progress(step, 0.5 + rng.normal(0, 0.1, 60), fit=False)
    assert v.label == "flat"
    lo, hi = v.evidence["trend_change_lo"], v.evidence["trend_change_hi"]
    assert lo < 0 < hi and f"the change over the run is {lo:+.3g} to {hi:+.3g} (95%)." in v.summary
    assert "log more steps" not in v.action
    assert v.summary.startswith("Flat: no change beyond batch noise (")
    assert v.action.startswith("nothing is being learned")
    for seed in range(200):  # a slow rise: significant at 5%, not at 0.5%
        y = 0.5 + 0.0025 * step + np.random.default_rng(seed).normal(0, 0.1, 60)
        v = assess_progress(step, y, fit=False)
        if v.label == "flat" and v.evidence["trend_change_lo"] > 0:
            break
    else:
        pytest.fail("no seed gave a flat verdict with a 95% interval above 0")
    assert v.summary.startswith("Flat at the verdict's level, with a possible slow rise:")
    assert "a rise at the 95% level, not at the 99.5% this verdict asks for" in v.summary
    # an interval that leaves out 0 is not "no change", and a rise is not "nothing learned"
    assert "no change beyond batch noise" not in v.summary
    assert "nothing is being learned" not in v.action
    assert v.action.startswith("not yet a clear rise: log more steps or more rollouts per step")


def test_a_flat_verdict_names_a_rise_of_the_end_window_it_did_not_call():
    """The line's 95% interval holds 0 but the end window is above the start at 5% (the gain
    test): "no change beyond batch noise" beside that was a held-back run's words (session 35:
    gain p 0.0095). The words name the rise and its p; the label stays `flat`."""
    step = np.arange(40, dtype=float)
    for seed in range(400):  # a late step up: the window test sees it, the line hardly
        y = 0.5 + np.where(step >= 34, 0.08, 0.0) + np.random.default_rng(seed).normal(0, 0.1, 40)
        v = assess_progress(step, y, fit=False)
        ev = v.evidence
        if v.label == "flat" and ev["trend_change_lo"] <= 0 <= ev["trend_change_hi"]:
            if ev["gain_p"] < POSSIBLE_P:
                break
    else:
        pytest.fail("no seed gave a flat verdict with a gain at 5% and a line holding 0")
    assert v.summary.startswith("Flat at the verdict's level, with a possible rise:")
    assert f"its end window is above its start window ({fmt_p(ev['gain_p'])})" in v.summary
    lo, hi = ev["trend_change_lo"], ev["trend_change_hi"]
    assert f"the straight-line change over the run is {lo:+.3g} to {hi:+.3g} (95%)" in v.summary
    assert "no change beyond batch noise" not in v.summary
    assert v.action.startswith("not yet a clear rise")
    assert "check the learning rate" in v.action and "decline" not in v.action
    quiet = assess_progress(step, 0.5 + np.random.default_rng(0).normal(0, 0.1, 40), fit=False)
    assert quiet.label == "flat" and quiet.evidence["gain_p"] >= POSSIBLE_P
    assert quiet.summary.startswith("Flat: no change beyond batch noise (")


def test_the_cli_says_how_sure_a_plateau_is(tmp_path):
    _load_commands()
    step, y = _plateau(30, 0.15, seed=2)
    path = tmp_path / "log.csv"
    path.write_text(
        "step,reward\n" + "".join(f"{s:g},{float(r)!r}\n" for s, r in zip(step, y, strict=True))
    )
    res = CliRunner().invoke(app, ["diagnose", str(path)])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "Probably plateaued:" in text and "are rejected at the 5% level" in text
    res = CliRunner().invoke(app, ["diagnose", str(path), "--json"])
    prog = json.loads(res.output)["progress"]
    assert prog["label"] == "plateau" and prog["evidence"]["recent_rise_hi"] > 0
