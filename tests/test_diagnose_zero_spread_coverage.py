"""advantage_degeneracy judges the run now, so its zero-spread share must be logged in the run's
second half: a reward_std logged as 0 on the first 6 of 120 rows, then not at all, read "100% of
groups have no reward spread" at confidence 1.00 (2026-12-05). A source logged early only is
passed over (the next one is read, or the i.i.d. bound, or nothing), a share logged on part of
the run says on how many steps, and the second-half share is of the run's second half, not of
the second half of the logged values."""

from __future__ import annotations

import numpy as np
from cli_checks import csv_log, diagnose_json
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.diagnose import diagnose
from pgrpo.diagnose.starvation import MIN_LATE_POINTS, ZERO_STD_SOURCE

_load_commands()
runner = CliRunner()


def _cols(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"step": np.arange(1.0, n + 1), "reward": rng.binomial(8, 0.4, n) / 8.0}


def _only(n: int, rows: slice, value: float = 0.0) -> np.ndarray:
    col = np.full(n, np.nan)
    col[rows] = value
    return col


@settings(max_examples=30, deadline=None)
@given(n=st.integers(40, 300), data=st.data())
def test_a_share_logged_early_only_judges_nothing(n, data):
    k = data.draw(st.integers(4, n // 2 + MIN_LATE_POINTS - 1))  # < 3 in the second half
    name = data.draw(st.sampled_from(["reward_std", "frac_reward_zero_std"]))
    cols = _cols(n, seed=k) | {name: _only(n, slice(0, k), 0.0 if name == "reward_std" else 1.0)}
    mode = diagnose(cols).mode("advantage_degeneracy")
    assert not mode.detected
    assert any(f"{name} is logged on {k} of the {n} judged steps" in m for m in mode.missing)


@settings(max_examples=20, deadline=None)
@given(n=st.integers(40, 300), data=st.data())
def test_a_share_logged_late_judges_and_says_on_how_many_steps(n, data):
    k = data.draw(st.integers(MIN_LATE_POINTS + 1, n // 2))
    cols = _cols(n, seed=k) | {"frac_reward_zero_std": _only(n, slice(n - k, n), 1.0)}
    d = diagnose(cols)
    mode = d.mode("advantage_degeneracy")
    assert mode.detected and mode.evidence["degeneracy_steps_logged"] == k
    sentence = next(f["sentence"] for f in d.findings() if "Advantage degeneracy" in f["sentence"])
    assert f"on the {k} of {n} judged steps that log it" in sentence


def test_an_early_share_gives_way_to_a_reward_std_logged_throughout():
    n = 120
    cols = _cols(n) | {
        "frac_reward_zero_std": _only(n, slice(0, 6), 1.0),
        "reward_std": np.full(n, 0.45),
    }
    mode = diagnose(cols).mode("advantage_degeneracy")
    assert not mode.detected
    assert mode.evidence["degeneracy_source"] == ZERO_STD_SOURCE
    assert mode.evidence["degeneracy"] == 0.0
    assert any("frac_reward_zero_std is logged on 6 of the 120" in m for m in mode.missing)


def test_the_late_share_is_of_the_runs_second_half():
    # 0 over a fully logged first half, 1 on every 4th step of the second half: the second
    # half of the logged values (the code before) mixed in first-half zeros and read 0.2
    n = 200
    share = np.zeros(n)
    share[n // 2 :] = np.nan
    share[n // 2 :: 4] = 1.0
    mode = diagnose(_cols(n) | {"frac_reward_zero_std": share}).mode("advantage_degeneracy")
    assert mode.evidence["degeneracy_late"] == 1.0
    assert mode.detected


def test_the_cli_reads_a_reward_std_logged_on_the_first_rows_as_no_evidence(tmp_path):
    n = 120
    log = csv_log(tmp_path, _cols(n) | {"reward_std": _only(n, slice(0, 6), 0.0)})
    out, mode = diagnose_json(runner, app, log, "advantage_degeneracy")
    assert not mode["detected"]
    assert any("logged on 6 of the 120 judged steps (steps 1-6)" in m for m in mode["missing"])
    assert not any("Advantage degeneracy" in f["sentence"] for f in out["findings"])


def test_a_passed_over_source_keeps_the_next_ones_reason():
    """frac_reward_zero_std on the first 6 rows, then a reward_std rounded to 0.001: both reasons
    are named (the rounding's was dropped once a source had been passed over; a review)."""
    n, rng = 120, np.random.default_rng(0)
    cols = _cols(n) | {
        "frac_reward_zero_std": _only(n, slice(0, 6), 1.0),
        "reward_std": np.round(np.abs(rng.normal(0.002, 0.01, n)), 3),
    }
    missing = " ".join(diagnose(cols).mode("advantage_degeneracy").missing)
    assert "frac_reward_zero_std is logged on 6 of the 120" in missing
    assert "rounded to steps of 0.001" in missing
