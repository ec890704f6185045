"""A run that rose early and creeps on reads `plateau` (still creeping), not `learning`: the
second half's rise is significant but bounded (one-sided 95%) at PLATEAU_SHARE of the gain. A
rise still under way reads `learning`. Through the function and the CLI."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.diagnose.progress import ALPHA_RECENT, PLATEAU_SHARE, assess_progress

N_ROLL = 512  # 64 prompts x 8 rollouts: a research-scale step


def _creep(seed: int, n: int = 400, creep: float = 0.07) -> tuple[np.ndarray, np.ndarray]:
    """Batch means of N_ROLL 0/1 rewards: 0.2 -> 0.86 over the first tenth, then a straight
    creep of `creep` over the rest (the shape of the held-back cfw20 runs)."""
    t = np.arange(n, dtype=float)
    head = n // 10
    p = np.where(t < head, 0.2 + 0.66 * t / head, 0.86 + creep * (t - head) / (n - head))
    y = np.random.default_rng(seed).binomial(N_ROLL, p) / N_ROLL
    return t + 1, y


def test_an_early_rise_that_creeps_on_is_a_plateau_still_creeping():
    step, y = _creep(seed=1)
    v = assess_progress(step, y, n_rollouts=N_ROLL, fit=False)
    ev = v.evidence
    gain = ev["end_level"] - ev["start_level"]
    assert ev["recent_p_up"] < ALPHA_RECENT  # the creep is significant ...
    assert ev["recent_rise_hi"] <= PLATEAU_SHARE * gain  # ... and bounded at a quarter
    assert v.label == "plateau" and ev["plateau_creeping"] == 1.0
    assert v.summary.startswith("Plateaued, still creeping:")
    assert f"it rose only {ev['recent_rise']:+.3g}" in v.summary
    assert "most of the rise is behind it" in v.summary
    assert v.action.startswith("more steps bring little at this rate")


def test_a_rise_still_under_way_is_learning():
    t = np.arange(200, dtype=float)
    p = 0.2 + 0.6 * t / 199  # a straight rise: half of the gain comes in the second half
    y = np.random.default_rng(2).binomial(N_ROLL, p) / N_ROLL
    v = assess_progress(t, y, n_rollouts=N_ROLL, fit=False)
    gain = v.evidence["end_level"] - v.evidence["start_level"]
    assert v.label == "learning" and "plateau_creeping" not in v.evidence
    assert v.evidence["recent_rise_hi"] > PLATEAU_SHARE * gain


def test_a_plateau_that_stopped_is_not_creeping():
    t = np.arange(300, dtype=float)
    p = np.where(t < 30, 0.2 + 0.6 * t / 30, 0.8)
    y = np.random.default_rng(3).binomial(N_ROLL, p) / N_ROLL
    v = assess_progress(t, y, n_rollouts=N_ROLL, fit=False)
    assert v.label == "plateau" and v.evidence["plateau_creeping"] == 0.0
    assert "still creeping" not in v.summary


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), creep=st.floats(-0.05, 0.14), n=st.integers(40, 400))
def test_learning_is_a_significant_rise_over_the_second_half_that_is_not_bounded_small(
    seed, creep, n
):
    step, y = _creep(seed, n, creep)
    v = assess_progress(step, y, n_rollouts=N_ROLL, fit=False)
    ev = v.evidence
    gain = ev["end_level"] - ev.get("head_level", ev["start_level"])  # from the head where the
    bounded = gain > 0 and ev["recent_rise_hi"] <= PLATEAU_SHARE * gain  # rise started in it
    if v.label == "learning":
        assert ev["recent_p_up"] < ALPHA_RECENT and not bounded
    if v.label == "plateau":
        assert ev["plateau_creeping"] == float(ev["recent_p_up"] < ALPHA_RECENT)
        assert ev["recent_p_up"] >= ALPHA_RECENT or bounded


def test_the_cli_reads_a_creeping_plateau(tmp_path):
    _load_commands()
    step, y = _creep(seed=1)
    path = tmp_path / "log.csv"
    path.write_text(
        "step,reward\n" + "".join(f"{s:g},{float(r)!r}\n" for s, r in zip(step, y, strict=True))
    )
    args = ["diagnose", str(path), "--group-size", "8", "--batch-prompts", "64"]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "Plateaued, still creeping:" in " ".join(res.output.split())
    res = CliRunner().invoke(app, [*args, "--json"])
    prog = json.loads(res.output)["progress"]
    assert prog["label"] == "plateau" and prog["evidence"]["plateau_creeping"] == 1.0
