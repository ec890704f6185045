"""The `kl_level` check: a KL to the reference that sits high is named even when it never grows
(a review, 2026-12-06: a run at 1.8-5.7 per token read "policy_concentration: no"), at a level
measured on real logs (`bench/kl_levels.py`)."""

from __future__ import annotations

import json
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.diagnose.checks import CheckOptions, run_checks
from pgrpo.diagnose.kllevel import KL_HIGH, MIN_POINTS, kl_level
from pgrpo.logs import read_log


def _log(tmp_path, kl: np.ndarray):
    n = kl.size
    rows = "".join(f"{i},{0.1 + 0.001 * i},{float(k)!r}\n" for i, k in enumerate(kl, 1))
    path = tmp_path / "log.csv"
    path.write_text("step,reward,kl\n" + rows)
    return read_log(path), path, n


@settings(max_examples=40, deadline=None)
@given(n=st.integers(MIN_POINTS, 300), level=st.floats(1e-4, 50.0), seed=st.integers(0, 999))
def test_it_warns_exactly_when_the_last_tenth_averages_at_least_the_level(tmp_path_factory, n,
                                                                          level, seed):  # fmt: skip
    rng = np.random.default_rng(seed)
    kl = level * np.exp(0.1 * rng.standard_normal(n))
    log, _, _ = _log(tmp_path_factory.mktemp("kl"), kl)
    res = kl_level(log, CheckOptions())
    late = float(np.mean(kl[-max(5, math.ceil(0.1 * n)) :]))  # the last tenth, >= 5 points
    assert abs(res.evidence["kl_last_tenth"] - late) <= 1e-12 * late
    assert res.status == ("warn" if late >= KL_HIGH else "ok")


def test_a_kl_that_sits_high_from_the_start_warns_and_names_the_step(tmp_path):
    kl = np.r_[np.full(3, 0.01), np.full(90, 2.5)]  # high from step 4 on, never growing
    log, _, _ = _log(tmp_path, kl)
    res = kl_level(log, CheckOptions())
    assert res.status == "warn" and res.evidence["kl_first_above_step"] == 4.0
    assert "averaged 2.5 per token over the last tenth" in res.summary
    assert "per token, not per sequence" in res.summary


def test_no_kl_column_or_too_few_points_is_not_enough_evidence(tmp_path):
    log, _, _ = _log(tmp_path, np.full(MIN_POINTS - 1, 3.0))
    assert kl_level(log, CheckOptions()).status == "not_enough_evidence"
    (tmp_path / "nokl.csv").write_text("step,reward\n" + "".join(f"{i},0.5\n" for i in range(40)))
    res = kl_level(read_log(tmp_path / "nokl.csv"), CheckOptions())
    assert res.status == "not_enough_evidence" and "no KL column" in res.summary


def test_one_late_spike_on_a_short_log_does_not_warn(tmp_path):
    kl = np.r_[np.full(11, 0.05), 4.0]  # 12 points: the last tenth is 5 of them (0.84), not 1
    log, _, _ = _log(tmp_path, kl)
    assert kl_level(log, CheckOptions()).status == "ok"
    assert "kl_level" in [c.name for c in run_checks(log, CheckOptions())]


def test_the_cli_shows_the_check(tmp_path):
    _, path, _ = _log(tmp_path, np.full(40, 4.0))
    _load_commands()
    out = CliRunner().invoke(app, ["diagnose", str(path), "--json"])
    assert out.exit_code == 0, out.output
    check = next(c for c in json.loads(out.stdout)["checks"] if c["name"] == "kl_level")
    assert check["status"] == "warn" and "per token" in check["false_alarm"]
