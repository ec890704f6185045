"""95% bounds on the change a progress verdict did not call (`recent_rise_hi`, `trend_change_lo`
/ `_hi`): their coverage on curves with a known line added, and the words they give a plateau
and a flat run, through the function and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.diagnose.progress import PLATEAU_SHARE, assess_progress

LENGTHS = (24, 60, 150)


def _noise(rng, kind: str, mean: np.ndarray) -> tuple[np.ndarray, int | None]:
    if kind == "binomial":  # batch means of 64 rollouts at the curve's rate
        return rng.binomial(64, np.clip(mean, 0.0, 1.0)) / 64, 64
    e = np.zeros(mean.size)
    for k in range(1, mean.size):  # AR(1), rho 0.4
        e[k] = 0.4 * e[k - 1] + rng.normal(0.0, 0.05)
    return mean + e, None


@pytest.mark.parametrize("kind", ["binomial", "ar1"])
def test_the_bounds_cover_the_true_change_at_their_level(kind):
    rng = np.random.default_rng(7)
    rise_hits = change_hits = 0
    m = 200
    for i in range(m):
        n = LENGTHS[i % len(LENGTHS)]
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
    # nominal 0.95; binomial sd of the share over 200 curves ~0.015
    assert 0.90 <= rise_hits / m <= 0.995
    assert 0.90 <= change_hits / m <= 0.995


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
    assert hi > PLATEAU_SHARE * gain
    assert v.summary.startswith("Probably plateaued:")
    assert f"up to {hi:+.3g} (95% bound; {hi / gain:.0%} of the gain so far)" in v.summary
    assert v.action.startswith("not yet clear that it has stopped")


def test_a_flat_verdict_gives_the_interval_and_names_a_drift_it_did_not_call():
    rng = np.random.default_rng(0)
    step = np.arange(60, dtype=float)
    v = assess_progress(step, 0.5 + rng.normal(0, 0.1, 60), fit=False)
    assert v.label == "flat"
    lo, hi = v.evidence["trend_change_lo"], v.evidence["trend_change_hi"]
    assert lo < 0 < hi and f"the change over the run is {lo:+.3g} to {hi:+.3g} (95%)." in v.summary
    assert "log more steps" not in v.action
    for seed in range(200):  # a slow rise: significant at 5%, not at 0.5%
        y = 0.5 + 0.0025 * step + np.random.default_rng(seed).normal(0, 0.1, 60)
        v = assess_progress(step, y, fit=False)
        if v.label == "flat" and v.evidence["trend_change_lo"] > 0:
            break
    else:
        pytest.fail("no seed gave a flat verdict with a 95% interval above 0")
    assert "a slow rise at the 95% level, not at the 99.5% this verdict asks for" in v.summary
    assert v.action.endswith(
        "log more steps or more rollouts per step to tell the drift from noise"
    )


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
    assert "Probably plateaued:" in text and "of the gain so far) is within the noise" in text
    res = CliRunner().invoke(app, ["diagnose", str(path), "--json"])
    prog = json.loads(res.output)["progress"]
    assert prog["label"] == "plateau" and prog["evidence"]["recent_rise_hi"] > 0
