"""`reward_hacking`'s eval criterion against the eval's own noise. Before, a flat run whose eval
accuracy fell by more than 0.05 between two evals fired, whatever the eval's size: on flat
runs with two evals of 100-500 problems that is 14-27% of runs (2026-12-03 review). Each test
failed on that code."""

from __future__ import annotations

import json
import math
import re

import numpy as np
from typer.testing import CliRunner

from pgrpo.diagnose import diagnose
from pgrpo.diagnose.signals import eval_record_se, read_eval_records


def _flat(rng: np.random.Generator, n: int = 100) -> dict:
    return {"step": np.arange(1.0, n + 1), "reward": 0.5 + 0.05 * rng.standard_normal(n)}


def test_a_flat_run_with_two_noisy_evals_is_not_hacking():
    rng = np.random.default_rng(0)
    fired = 0
    for _ in range(60):
        accs = rng.binomial(100, 0.5, 2) / 100.0  # two evals of 100 problems, no change
        se = [math.sqrt(a * (1 - a) / 100) for a in accs]
        evals = [(10.0, accs[0], se[0]), (90.0, accs[1], se[1])]
        fired += diagnose(_flat(rng), eval_log=evals).mode("reward_hacking").detected
    assert fired <= 1  # one-sided 0.5% test; the old rule fired on ~24%


def test_a_real_fall_of_a_large_eval_is_still_found():
    rng = np.random.default_rng(1)
    evals = [(10.0, 0.62, 0.011), (90.0, 0.48, 0.011)]  # 2,000 problems: z ~ 9
    v = diagnose(_flat(rng), eval_log=evals).mode("reward_hacking")
    assert v.detected and v.evidence["eval_fall_z"] > 5


def test_eval_lagging_a_rising_reward_beyond_noise_is_hacking_and_within_it_is_not():
    rng = np.random.default_rng(2)
    n = 100
    log = {"step": np.arange(1.0, n + 1), "reward": np.linspace(0.2, 0.8, n)}
    log["reward"] = log["reward"] + 0.02 * rng.standard_normal(n)
    hacked = diagnose(log, eval_log=[(10.0, 0.40, 0.01), (90.0, 0.41, 0.01)])
    assert hacked.mode("reward_hacking").detected
    noisy = diagnose(log, eval_log=[(10.0, 0.40, 0.2), (90.0, 0.41, 0.2)])  # 6 problems
    assert not noisy.mode("reward_hacking").detected
    assert noisy.mode("reward_hacking").evidence["eval_gap_z"] < 2.58


def test_two_evals_of_unknown_size_say_what_is_missing():
    rng = np.random.default_rng(3)
    v = diagnose(_flat(rng), eval_log=[(10.0, 0.6), (90.0, 0.3)]).mode("reward_hacking")
    assert not v.detected and not v.judged  # nothing else to judge it by in this log
    assert any("eval's size" in m for m in v.missing)


def test_record_standard_errors():
    assert eval_record_se({"accuracy": 0.5, "accuracy_se": 0.02}) == 0.02
    assert math.isclose(
        eval_record_se({"accuracy": 0.5, "accuracy_ci": [0.4, 0.6]}), 0.2 / 3.919928
    )
    probs = [{"id": str(i), "n": 4, "c": c} for i, c in enumerate([0, 4, 2, 4])]
    rates = np.array([0, 1, 0.5, 1])
    assert math.isclose(
        eval_record_se({"accuracy": 0.625, "per_problem": probs}), rates.std(ddof=1) / 2
    )
    assert math.isclose(eval_record_se({"accuracy": 0.5, "n_problems": 100}), 0.05)
    assert math.isnan(eval_record_se({"accuracy": 0.5}))


def test_seeds_at_one_step_are_averaged_with_their_errors(tmp_path):
    path = tmp_path / "eval.jsonl"
    rows = [
        {"step": 0, "accuracy": 0.4, "n_problems": 100},
        {"step": 0, "accuracy": 0.5, "n_problems": 100},
        {"step": 50, "accuracy": 0.45},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    points, se = read_eval_records(path)
    assert points == ((0.0, 0.45), (50.0, 0.45))
    expect = math.sqrt(0.4 * 0.6 / 100 + 0.5 * 0.5 / 100) / 2
    assert math.isclose(se[0], expect) and math.isnan(se[1])


def test_cli_reads_the_eval_size_from_a_pgrpo_eval_json(tmp_path):
    """Through the CLI: a `pgrpo eval` JSON with n_problems gives the eval's noise; a fall of
    0.06 on 100 problems is noise, not hacking."""
    from pgrpo.cli import _load_commands, app

    _load_commands()
    rng = np.random.default_rng(4)
    log = tmp_path / "log.csv"
    lines = ["step,reward"] + [
        f"{i + 1},{0.5 + 0.05 * rng.standard_normal():.5f}" for i in range(100)
    ]
    log.write_text("\n".join(lines) + "\n")
    evals = tmp_path / "eval.json"
    results = [
        {"name": "a", "step": 10, "accuracy": 0.53, "n_problems": 100},
        {"name": "b", "step": 90, "accuracy": 0.47, "n_problems": 100},
    ]
    evals.write_text(json.dumps({"kind": "pgrpo.eval", "results": results}))
    res = CliRunner().invoke(app, ["diagnose", str(log), "--eval-log", str(evals), "--json"])
    assert res.exit_code == 0, res.output
    mode = next(m for m in json.loads(res.stdout)["modes"] if m["name"] == "reward_hacking")
    assert not mode["detected"]
    assert math.isclose(mode["evidence"]["eval_gain_se"], math.hypot(0.0499, 0.0499), rel_tol=0.01)


def test_exact_evals_with_no_change_are_not_hacking():
    """With no noise at all (exact evals, a constant reward) a zero gap or fall is no evidence:
    it read as an infinite z."""
    log = {"step": np.arange(1.0, 41.0), "reward": np.full(40, 0.5)}
    v = diagnose(log, eval_log=[(5.0, 0.6, 0.0), (35.0, 0.6, 0.0)]).mode("reward_hacking")
    assert not v.detected and v.evidence["eval_fall_z"] == 0.0
    v = diagnose(log, eval_log=[(5.0, 0.6, 0.0), (35.0, 0.5, 0.0)]).mode("reward_hacking")
    assert v.detected  # an exact fall of 0.1 is certain


def test_an_autocorrelated_flat_reward_is_not_hacking():
    """The train gain's error ignored autocorrelation and the half-width windows at the run's
    ends: on a flat AR(1) reward (rho 0.5, sd 0.1) with two exact-size evals, 11% of runs fired
    (review 2026-12-03); now the rho bound and each window's real count."""
    from scipy.signal import lfilter

    rng = np.random.default_rng(9)
    fired = 0
    for _ in range(100):
        e = lfilter([1.0], [1.0, -0.5], rng.standard_normal(400))[200:]
        log = {"step": np.arange(1.0, 201.0), "reward": 0.5 + 0.1 * e / e.std()}
        accs = rng.binomial(1000, 0.5, 2) / 1000
        evals = [(1.0, accs[0], 0.0158), (200.0, accs[1], 0.0158)]
        fired += diagnose(log, eval_log=evals).mode("reward_hacking").detected
    assert fired <= 4


def test_bad_eval_points_and_records_are_refused_in_one_line(tmp_path):
    import pytest

    from pgrpo.cli import _load_commands, app

    log = {"step": np.arange(1.0, 41.0), "reward": np.full(40, 0.5)}
    for bad, words in (([(1,), (2, 0.3)], "give (step, accuracy)"),
                       ([(1, 5.0), (2, 0.3)], "[0, 1]"),
                       ([(1, 0.5, -0.1), (2, 0.3)], "must be >= 0"),
                       ([(float("nan"), 0.5), (2, 0.3)], "step is nan")):  # fmt: skip
        with pytest.raises(ValueError, match=re.escape(words)):
            diagnose(log, eval_log=bad)
    # two seeds at one step are one point (their mean), as from a file
    v = diagnose(log, eval_log=[(100, 0.3, 0.01), (100, 0.1, 0.01), (10, 0.2, 0.01)])
    assert v.mode("reward_hacking").evidence["eval_gain"] == pytest.approx(0.0)
    _load_commands()
    path = tmp_path / "log.csv"
    path.write_text("step,reward\n" + "".join(f"{i},{0.5 + 0.01 * (i % 3)}\n" for i in range(40)))
    for rec, words in (({"accuracy": 5, "n_problems": 10}, "accuracy is 5"),
                       ({"accuracy": 0.3, "accuracy_ci": [0.35, 0.25]}, "low end is above"),
                       ({"accuracy": 0.3, "n_problems": -5}, "n_problems is -5")):  # fmt: skip
        evals = tmp_path / "eval.json"
        evals.write_text(json.dumps({"results": [{**rec, "step": 1}, {**rec, "step": 30}]}))
        res = CliRunner().invoke(app, ["diagnose", str(path), "--eval-log", str(evals)])
        assert res.exit_code == 2 and words in res.output, res.output
        assert len(res.output.strip().splitlines()) == 1
