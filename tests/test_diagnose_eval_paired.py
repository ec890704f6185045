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
from pgrpo.diagnose import nullmodel as nm
from pgrpo.diagnose.signals import PAIRED_MIN_PROBLEMS, paired_eval_gain, read_eval_records

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


def test_the_paired_gain_and_error_are_those_of_the_differences(tmp_path):
    rng = np.random.default_rng(4)
    a, b = rng.integers(0, 5, 40), rng.integers(0, 5, 40)
    path = _write(tmp_path / "e.json", [_record(0, a, 4), _record(50, b, 4)])
    d = (b - a) / 4.0
    gain, se = paired_eval_gain(path)
    assert gain == pytest.approx(d.mean()) and se == pytest.approx(
        np.std(d, ddof=1) / math.sqrt(40)
    )


def test_seeds_are_averaged_per_problem_and_anything_else_is_not_paired(tmp_path):
    rng = np.random.default_rng(5)
    a1, a2, b = (rng.integers(0, 5, 30) for _ in range(3))
    recs = [_record(0, a1, 4), _record(0, a2, 4), _record(9, b, 4)]
    d = b / 4.0 - (a1 + a2) / 8.0
    _, se = paired_eval_gain(_write(tmp_path / "s.json", recs))
    assert se == pytest.approx(np.std(d, ddof=1) / math.sqrt(30))
    ids = [f"p{i}" for i in range(29)] + ["q"]
    other = [_record(0, a1, 4), _record(9, b, 4, ids=ids)]  # not the same problems
    no_ids = [_record(0, a1, 4), _record(9, b, 4)]
    for q in no_ids[1]["per_problem"]:
        del q["id"]
    twice = [_record(0, a1, 4), _record(9, b, 4, ids=["p0"] * 30)]  # an id twice in a record
    one = [_record(0, a1, 4), _record(0, a2, 4)]  # one step
    few = [_record(0, a1[:5], 4), _record(9, b[:5], 4)]  # too few problems to pair
    for name, r in [("o", other), ("n", no_ids), ("t", twice), ("1", one), ("f", few)]:
        assert all(map(math.isnan, paired_eval_gain(_write(tmp_path / f"{name}.json", r)))), name
    assert PAIRED_MIN_PROBLEMS == 30


def test_identical_evals_in_another_order_are_not_a_fall(tmp_path):
    """Review, 2026-12-03: the paired error of two identical evals is 0, and the gain was the
    records' accuracies' difference, which float rounding made -5.6e-17 when the second lists
    its problems in another order: z = inf, detected. The gain is now the mean per-problem
    change, exactly 0."""
    for seed in range(20):
        rng = np.random.default_rng(seed)
        c = rng.integers(0, 6, 40)
        order = rng.permutation(40)
        ids = [f"p{i}" for i in range(40)]
        second = _record(100, c[order], 5, ids=[ids[i] for i in order])
        path = _write(tmp_path / "same.json", [_record(0, c, 5, ids=ids), second])
        log = {"step": np.arange(1.0, 101), "reward": 0.5 + 0.01 * rng.standard_normal(100)}
        v = diagnose(log, eval_log=path).mode("reward_hacking")
        assert v.evidence["eval_gain"] == 0.0 and not v.detected, seed


def test_a_pooled_accuracy_is_not_divided_by_the_paired_error(tmp_path):
    """A record whose accuracy is pooled (sum c / sum n, unequal n) gains -0.50 while its mean
    per-problem rate gains -0.01: the paired error belongs to the latter, which is the gain
    tested (review, 2026-12-03: z = 50 before)."""
    rng = np.random.default_rng(6)
    p = rng.uniform(0.2, 0.8, 60)
    recs = []
    for step in (0, 100):
        n = np.where(np.arange(60) < 30, 2, 40) if step else np.where(np.arange(60) < 30, 40, 2)
        c = rng.binomial(n, p)
        pairs = enumerate(zip(n, c, strict=True))
        probs = [{"id": f"p{i}", "n": int(k), "c": int(j)} for i, (k, j) in pairs]
        recs.append({"name": "m", "step": step, "accuracy": float(c.sum() / n.sum()),
                     "per_problem": probs})  # fmt: skip
    path = _write(tmp_path / "pooled.json", recs)
    log = {"step": np.arange(1.0, 101), "reward": 0.5 + 0.01 * rng.standard_normal(100)}
    ev = diagnose(log, eval_log=path).mode("reward_hacking").evidence
    assert ev["eval_gain"] == pytest.approx(paired_eval_gain(path)[0])


def test_unit_scale_keeps_inf_and_nan():
    u = nm.unit_scale(np.array([0.2, np.inf, -np.inf, np.nan, 1.0]), (0.0, 1.0))
    assert u[0] == 0.2 and u[1] == np.inf and u[2] == -np.inf and np.isnan(u[3]) and u[4] == 1.0


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
        v = diagnose(log, eval_log=path).mode("reward_hacking")
        assert v.evidence["eval_gain_se_paired"] == 1.0
        fired += v.detected
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
