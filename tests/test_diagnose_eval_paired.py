"""`reward_hacking`'s eval error paired by problem: two evals of the same problems share their
difficulty, and the error of the gain is sd(per-problem differences) / sqrt(P), not the two
accuracies' errors combined as independent (which, on problems that are mostly always or never
solved, is several times larger and hid real falls)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.diagnose import diagnose
from pgrpo.diagnose.signals import paired_eval_gain_se, read_eval_records

runner = CliRunner()


def _record(step: float, counts: np.ndarray, n: int, ids=None, name: str = "m") -> dict:
    ids = [f"p{i}" for i in range(counts.size)] if ids is None else ids
    acc = float(np.mean(counts / n))
    probs = [{"id": i, "n": n, "c": int(c)} for i, c in zip(ids, counts, strict=True)]
    return {"name": name, "step": step, "accuracy": acc, "per_problem": probs}


def _bimodal_evals(rng, drop: float, problems: int = 200, n: int = 8):
    """Problems mostly always or never solved (p 0.95 or 0.05); the later eval loses `drop` of
    the accuracy on problems it used to solve."""
    p0 = np.where(rng.random(problems) < 0.5, 0.95, 0.05)
    p1 = np.clip(p0 - np.where(p0 > 0.5, 2 * drop, 0.0), 0, 1)
    return rng.binomial(n, p0), rng.binomial(n, p1), n


def _write(path, records):
    path.write_text(json.dumps({"results": records}))
    return path


def test_the_paired_error_is_the_sd_of_the_differences(tmp_path):
    a, b = np.array([4, 0, 2, 4, 1]), np.array([3, 0, 2, 4, 0])
    path = _write(tmp_path / "e.json", [_record(0, a, 4), _record(50, b, 4)])
    d = (b - a) / 4.0
    assert paired_eval_gain_se(path) == pytest.approx(np.std(d, ddof=1) / math.sqrt(5))


def test_seeds_are_averaged_per_problem_and_other_problems_unpair(tmp_path):
    a1, a2, b = np.array([4, 0, 2]), np.array([2, 0, 4]), np.array([3, 1, 2])
    recs = [_record(0, a1, 4), _record(0, a2, 4), _record(9, b, 4)]
    d = b / 4.0 - (a1 + a2) / 8.0
    se = paired_eval_gain_se(_write(tmp_path / "s.json", recs))
    assert se == pytest.approx(np.std(d, ddof=1) / math.sqrt(3))
    other = [_record(0, a1, 4), _record(9, b, 4, ids=["p0", "p1", "q2"])]
    assert math.isnan(paired_eval_gain_se(_write(tmp_path / "o.json", other)))
    no_ids = [_record(0, a1, 4), _record(9, b, 4)]
    for q in no_ids[1]["per_problem"]:
        del q["id"]
    assert math.isnan(paired_eval_gain_se(_write(tmp_path / "n.json", no_ids)))
    one = [_record(0, a1, 4), _record(0, a2, 4)]
    assert math.isnan(paired_eval_gain_se(_write(tmp_path / "1.json", one)))


def test_a_real_fall_on_bimodal_problems_is_found_only_paired(tmp_path):
    """A flat train reward; the eval falls by 0.05 on 200 problems of 8 samples each that are
    mostly always or never solved. Unpaired (each accuracy's error from its per-problem
    scatter) the fall is within the noise on every seed; paired it is found (z about 5)."""
    found = missed_unpaired = 0
    for seed in range(10):
        rng = np.random.default_rng(seed)
        c0, c1, n = _bimodal_evals(rng, drop=0.05, n=8)
        path = _write(tmp_path / "eval.json", [_record(0, c0, n), _record(100, c1, n)])
        log = {"step": np.arange(1.0, 101), "reward": 0.5 + 0.01 * rng.standard_normal(100)}
        paired = diagnose(log, eval_log=path).mode("reward_hacking")
        points, se = read_eval_records(path)
        triples = [(*p, e) for p, e in zip(points, se, strict=True)]
        unpaired = diagnose(log, eval_log=triples).mode("reward_hacking")
        assert paired.evidence["eval_gain_se_paired"] == 1.0
        assert paired.evidence["eval_gain_se"] < 0.5 * unpaired.evidence["eval_gain_se"]
        found += paired.detected
        missed_unpaired += not unpaired.detected
    assert found >= 9 and missed_unpaired == 10


def test_paired_evals_of_a_flat_run_keep_the_false_alarm_rate(tmp_path):
    """No change between the evals: the paired test fires at about its level (one-sided 0.5%)."""
    rng = np.random.default_rng(1)
    fired = 0
    for k in range(100):
        c0, c1, n = _bimodal_evals(rng, drop=0.0)
        path = _write(tmp_path / f"e{k}.json", [_record(0, c0, n), _record(100, c1, n)])
        log = {"step": np.arange(1.0, 101), "reward": 0.5 + 0.01 * rng.standard_normal(100)}
        fired += diagnose(log, eval_log=path).mode("reward_hacking").detected
    assert fired <= 3


def test_the_cli_pairs_the_eval_log(tmp_path):
    _load_commands()
    rng = np.random.default_rng(0)
    c0, c1, n = _bimodal_evals(rng, drop=0.05)
    ev = _write(tmp_path / "eval.json", [_record(0, c0, n), _record(100, c1, n)])
    log = tmp_path / "log.csv"
    y = 0.5 + 0.01 * rng.standard_normal(100)
    log.write_text("step,reward\n" + "".join(f"{i + 1},{v:.5f}\n" for i, v in enumerate(y)))
    res = runner.invoke(app, ["diagnose", str(log), "--eval-log", str(ev), "--json"])
    assert res.exit_code == 0, res.output
    modes = {m["name"]: m for m in json.loads(res.stdout)["modes"]}
    hacking = modes["reward_hacking"]
    assert hacking["evidence"]["eval_gain_se_paired"] == 1.0 and hacking["detected"]
