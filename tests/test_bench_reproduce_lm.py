"""bench/reproduce_lm.py: the pure analysis on synthetic data, the run order, resume and the
driver's bad-input exits (no model is loaded)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up; the parts import each other
    spec.loader.exec_module(module)
    return module


an = _load("reproduce_lm_sign_analysis")
rl = _load("reproduce_lm_sign")  # the sign part: settings, arms, model work, the driver
driver = _load("reproduce_lm")  # --part dispatch

from pgrpo.core.degeneracy import group_stats  # noqa: E402
from pgrpo.core.stats import iid_degeneracy  # noqa: E402
from pgrpo.evaluate import EvalRun  # noqa: E402


@given(st.integers(2, 16))
def test_lr_matched_arm_is_2g_over_g_minus_1(g):
    arms = rl.sign_arms(g)
    assert [a.advantage for a in arms] == ["sign", "dr_grpo", "dr_grpo"]
    assert len({a.name for a in arms}) == 3
    assert arms[2].lr_factor == pytest.approx(2 * g / (g - 1))
    assert arms[0].lr_factor == arms[1].lr_factor == 1.0


@given(st.integers(1, 8), st.integers(0, 30))
def test_run_order_every_prefix_is_balanced(seeds, cut):
    arms = rl.sign_arms(4)
    order = rl.run_order(arms, seeds)
    assert len(order) == len(set((a.name, s) for a, s in order)) == 3 * seeds
    done = order[: min(cut, len(order))]
    counts = [sum(a.name == arm.name for a, _ in done) for arm in arms]
    assert max(counts) - min(counts) <= 1
    # seeds finish in order: a prefix holds seeds 0..k-1 for every arm, plus part of seed k
    assert all(s <= len(done) // 3 for _, s in done)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(2, 8), st.integers(1, 6))
def test_degeneracy_series_gap_is_observed_minus_iid(seed, g, steps):
    """The series reads the trainer's group_stats metrics; the gap is observed - f_G(pbar)."""
    rng = np.random.default_rng(seed)
    history = []
    for step in range(1, steps + 1):
        p = rng.beta(0.3, 2.0, size=8)  # prompts of varying difficulty
        rewards = (rng.random((8, g)) < p[:, None]).astype(float).reshape(-1)
        history.append({"step": step, **group_stats(rewards, group_size=g).metrics})
    series = an.degeneracy_series(history)
    assert series["step"] == list(range(1, steps + 1))
    for i, h in enumerate(history):
        pbar = float(np.mean(h["reward"]))
        assert series["iid_prediction"][i] == pytest.approx(iid_degeneracy(pbar, g))
        assert series["jensen_gap"][i] == pytest.approx(
            series["observed"][i] - series["iid_prediction"][i]
        )
        assert series["observed"][i] == pytest.approx(series["all_fail"][i] + series["all_pass"][i])


@given(
    st.lists(st.floats(0, 1), min_size=2, max_size=8),
    st.lists(st.floats(0, 1), min_size=2, max_size=8),
)
def test_welch_is_scipys_unequal_variance_t(a, b):
    if np.std(a) == 0 and np.std(b) == 0:
        return  # undefined: both samples constant
    w = an.welch(a, b)
    ref = stats.ttest_ind(a, b, equal_var=False)
    assert w["diff"] == pytest.approx(np.mean(a) - np.mean(b), abs=1e-12)
    if np.isfinite(ref.statistic):
        assert w["t"] == pytest.approx(ref.statistic, rel=1e-9, abs=1e-9)
        assert w["p"] == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-12)


def test_welch_needs_two_seeds_each():
    assert an.welch([0.1], [0.2, 0.3]) is None


def test_seeds_of_one_value_have_no_interval():
    """Greedy accuracies of several seeds are one value (no seed changes greedy decoding): the
    seed interval read [0.700, 0.700] until session 40; it is undefined, printed "n/a"."""
    same = an.seed_summary([0.7, 0.7, 0.7])
    assert same["ci"] is None and same["mean"] == pytest.approx(0.7) and same["n"] == 3
    assert an._ci(same["ci"]) == "n/a"
    assert an.seed_summary([0.6, 0.7, 0.8])["ci"][0] < 0.6


def _summary(name, c, n, seed=0):
    ids = [f"p{i}" for i in range(len(c))]
    return EvalRun(name=name, ids=ids, n=[n] * len(c), c=list(c), seed=seed).summary()


def _run(arm, seed, greedy_c, sampled_c, steps=3):
    obs = [0.9, 0.8, 0.7][:steps]
    return {
        "arm": arm,
        "seed": seed,
        "eval_greedy": _summary(f"{arm}/g", greedy_c, 1, seed),
        "eval_sampled": _summary(f"{arm}/s", sampled_c, 4, seed),
        "degeneracy": {
            "step": list(range(1, steps + 1)),
            "reward": [0.05 * (seed + 1)] * steps,
            "observed": obs,
            "all_fail": obs,
            "all_pass": [0.0] * steps,
            "iid_prediction": [0.8] * steps,
            "jensen_gap": [o - 0.8 for o in obs],
        },
        "seconds": {"train": 10.0, "eval": 2.0, "total": 12.0},
    }


def test_analyse_search_compression_and_paired_comparisons():
    """Base: half the problems solved once in 4 samples (pass@1 0.125, pass@4 0.5). The 'sign'
    arm solves the same problems in all 4 samples (pass@1 up, pass@4 unchanged): search
    compression. The 'dr_grpo' arm is the base. Only seeds both arms finished are compared."""
    rng = np.random.default_rng(0)
    p = 40
    base_c = [1] * (p // 2) + [0] * (p // 2)
    baseline = {"eval_sampled": _summary("base", base_c, 4)}
    runs = {}
    for seed in range(3):
        greedy = [1] * (p // 2 + seed) + [0] * (p // 2 - seed)  # 20, 21, 22 of 40
        runs[f"sign/seed{seed}"] = _run("sign", seed, greedy, [4] * (p // 2) + [0] * (p // 2))
    for seed in range(2):
        greedy = list(rng.permutation([1] * (5 + 3 * seed) + [0] * (p - 5 - 3 * seed)))
        runs[f"dr_grpo/seed{seed}"] = _run("dr_grpo", seed, greedy, base_c)
    arms = rl.sign_arms(4)
    out = an.analyse(runs, baseline, arms)
    sign, dr = out["arms"]["sign"], out["arms"]["dr_grpo"]
    assert "dr_grpo_lr_matched" not in out["arms"]  # no runs: no entry
    assert sign["search_compression"]["verdict"] == "search compression"
    assert sign["sampled"]["pass_at_k"]["1"] == pytest.approx(0.5)
    assert sign["sampled"]["pass_at_k"]["4"] == pytest.approx(0.5)
    assert dr["search_compression"]["verdict"] == "no clear gain"
    cmp = out["comparisons"]["sign_vs_dr_grpo"]
    assert cmp["seeds"] == [0, 1]
    assert cmp["sample_accuracy"]["diff"] == pytest.approx(0.5 - 0.125)
    g_sign = [runs[f"sign/seed{s}"]["eval_greedy"]["accuracy"] for s in (0, 1)]
    g_dr = [runs[f"dr_grpo/seed{s}"]["eval_greedy"]["accuracy"] for s in (0, 1)]
    ref = stats.ttest_ind(g_sign, g_dr, equal_var=False)
    assert cmp["greedy_accuracy"]["t"] == pytest.approx(ref.statistic)
    assert sign["jensen_gap"]["mean"] == pytest.approx(np.mean([0.1, 0.0, -0.1]))
    assert sign["degeneracy_by_step"]["observed"] == pytest.approx([0.9, 0.8, 0.7])
    assert sign["greedy_accuracy"]["n"] == 3 and len(sign["greedy_accuracy"]["ci"]) == 2
    assert "sign_vs_dr_grpo_lr_matched" not in out["comparisons"]
    # paired over problems: sign solves the base's half in all 4 samples, dr_grpo 1 in 4
    paired = cmp["paired_problems"]["eval_sampled"]
    assert paired["problems"] == p and paired["diff"] == pytest.approx(0.5 - 0.125)
    assert paired["paired_ci"][0] > 0 and paired["paired_p"] < 0.01
    pooled = out["jensen_gap_pooled"]  # every synthetic run: gaps +0.1, 0, -0.1 -> mean 0
    assert pooled["n"] == 5 and pooled["mean"] == pytest.approx(0.0, abs=1e-12)
    mean_gaps = [np.mean(r["degeneracy"]["jensen_gap"]) for r in runs.values()]
    assert pooled["positive_runs"] == sum(g > 0 for g in mean_gaps)
    assert pooled["t_test_p"] == pytest.approx(
        stats.ttest_1samp(mean_gaps, 0.0).pvalue, nan_ok=True
    )


def test_by_level_splits_accuracy_by_the_problems_levels():
    base_c = [1, 0, 0, 1]  # p0, p1 level 1; p2, p3 level 2
    doc = {
        "baseline": {
            "eval_greedy": _summary("b", base_c, 1),
            "eval_sampled": _summary("b", base_c, 4),
        },
        "runs": {f"sign/seed{s}": _run("sign", s, [1, 1, s, 0], [4, 2, 0, 4 * s]) for s in (0, 1)},
    }
    out = an.by_level(doc, {"p0": 1, "p1": 1, "p2": 2, "p3": 2})
    assert out["problems"] == {"1": 2, "2": 2}
    assert out["base"]["greedy"] == {"1": 0.5, "2": 0.5}
    assert out["base"]["sampled"] == {"1": 0.125, "2": 0.125}
    assert out["sign"]["greedy"] == {"1": 1.0, "2": 0.25}
    assert out["sign"]["sampled"] == {"1": 0.75, "2": 0.25}


def test_driver_resumes_and_skips_finished_runs(tmp_path, monkeypatch):
    """The model work is replaced by fakes: the second invocation runs nothing new, and the
    results JSON holds every run once with the analysis."""
    calls = []
    base_c = [1, 0, 0, 1]

    def fake_baseline(settings, scratch):
        calls.append("base")
        return {"eval_greedy": _summary("b", base_c, 1), "eval_sampled": _summary("b", base_c, 4)}

    def fake_run(settings, arm, seed, scratch, logs):
        calls.append(rl.run_key(arm, seed))
        return _run(arm.name, seed, base_c, [2, 1, 0, 4], steps=settings.steps)

    monkeypatch.setattr(rl, "baseline_eval", fake_baseline)
    monkeypatch.setattr(rl, "train_and_evaluate", fake_run)
    monkeypatch.setattr(
        rl, "held_out_levels", lambda settings: {f"p{i}": 1 + i % 2 for i in range(4)}
    )
    out = tmp_path / "r.json"
    argv = ["--seeds", "2", "--steps", "3", "--out", str(out), "--logs", str(tmp_path)]
    assert driver.main(["--part", "sign", *argv]) == 0
    assert calls[0] == "base" and len(calls) == 7
    assert calls[1:4] == ["sign/seed0", "dr_grpo/seed0", "dr_grpo_lr_matched/seed0"]
    calls.clear()
    assert driver.main(["--part", "sign", *argv]) == 0
    assert calls == []
    doc = json.loads(out.read_text())
    assert len(doc["runs"]) == 6 and set(doc["analysis"]["arms"]) == {
        a.name for a in rl.sign_arms(4)
    }
    # the docs tables come from the JSON: one row per arm, one per comparison x metric, per step
    md = an.markdown(doc).splitlines()
    rows = [line for line in md if line.startswith("| ") and not line.startswith("| arm")]
    assert sum(r.startswith("| sign |") or r.startswith("| dr_grpo") for r in rows) >= 3
    base = doc["baseline"]["eval_greedy"]["accuracy"]
    assert any(r.startswith(f"| base model | | | {base:.3f} |") for r in rows)
    assert sum("sign_vs_" in r for r in rows) == 2 * 4 + 2 * 2  # Welch x 4 metrics, paired x 2
    assert sum(r.startswith(("| 1 |", "| 2 |", "| 3 |")) for r in rows) == 3
    # more seeds on the same file: only the new seed runs, balanced across the arms
    more = [*argv, "--seeds", "3"]
    assert driver.main(["--part", "sign", *more]) == 0
    assert calls == ["sign/seed2", "dr_grpo/seed2", "dr_grpo_lr_matched/seed2"]
    doc = json.loads(out.read_text())
    assert doc["settings"]["seeds"] == 3 and len(doc["runs"]) == 9
    assert doc["resumed_with"][0]["command"].endswith("--seeds 3")
    # --reanalyse rewrites the analysis from the per-run records and runs nothing
    doc["analysis"] = {}
    out.write_text(json.dumps(doc))
    assert driver.main(["--part", "sign", *more, "--reanalyse"]) == 0 and calls[3:] == []
    doc = json.loads(out.read_text())
    assert "sign_vs_dr_grpo" in doc["analysis"]["comparisons"] and "reanalysed" in doc
    # other settings on the same file: refused, exit 2, file unchanged
    before = out.read_text()
    with pytest.raises(SystemExit) as exc:
        driver.main(["--part", "sign", "--seeds", "3", "--steps", "4", "--out", str(out)])
    assert exc.value.code == 2 and out.read_text() == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--part", "nope"], "invalid choice: 'nope'"),
        (["--part", "sign", "--seeds", "0"], "--seeds must be >= 1"),
        (["--part", "sign", "--group-size", "1"], "--group-size must be >= 2"),
        (["--part", "sign", "--lr", "-1"], "--lr must be > 0"),
        (["--part", "sign", "--markdown"], "does not exist; run the part first"),
        (["--part", "sign", "--levels", "1,9"], "--levels must be arithmetic levels in 1..6"),
    ],
)
def test_bad_input_exits_2_naming_the_problem(args, message, tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "reproduce_lm.py"), *args,
         *(["--out", str(tmp_path / "r.json")] if "sign" in args else [])],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert message in proc.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "r.json").exists()


def test_deadline_stops_before_a_run_that_would_end_late():
    done = [{"seconds": {"total": 3600.0}}]
    assert rl._past_deadline(None, done) is False
    assert rl._past_deadline("00:00", []) is False  # nothing measured yet: run
    import datetime as dt

    soon = (dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)).strftime("%H:%M")
    assert rl._past_deadline(soon, done) is True
    assert rl._past_deadline(soon, [{"seconds": {"total": 1.0}}]) is False


def test_the_held_out_eval_counts_correct_answers_not_full_rewards(monkeypatch):
    """With a format weight a correct answer in words earns less than 1: it is still correct
    (`tasks.base.is_correct`; the bench counted reward >= 1, the same only at format_weight 0)."""
    import types

    import pgrpo.train.rollout as rollout_mod
    from pgrpo.tasks import TASKS

    task = TASKS.get("arithmetic")(levels=[1], format_weight=0.5)
    examples = rl.eval_problems(task, 2)
    texts = [str(examples[0]["answer"]), f"The answer is {examples[0]['answer']}.", "no", "none"]

    def fake(policy, task, batch, *, group_size, **_):
        return types.SimpleNamespace(rollout=types.SimpleNamespace(texts=texts[: 2 * len(batch)]))

    monkeypatch.setattr(rollout_mod, "sample_and_score", fake)
    out = rl.evaluate_policy(None, task, examples, samples=2, temperature=1.0,
                             max_new_tokens=8, seed=0, name="t", step=0)  # fmt: skip
    assert task.reward(texts[1], examples[0]) == 0.5  # correct, not a bare number
    assert out["accuracy"] == 0.5  # 2 of 4 samples; reward >= 1 counted 1
