"""`pgrpo eval` review fixes (2026-12-06, session 39), each through the CLI where a user meets
it: the paired t instead of the percentile bootstrap (and the verdict's t tolerance), decoding
settings recorded and checked, a refused baseline loses nothing, seeds of one problem set with a
seed-to-seed interval inside [0, 1], absurd counts and bad fields of a --from file as one line,
options that change only the reward compared with a note.

Sampling is the stub `fake_sampling` (conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_checks import one_line_error
from hypothesis import given, settings
from hypothesis import strategies as st
from test_eval_review import _arithmetic_answer, _cli

from pgrpo.evaluate import EvalRun, compare, eval_document, search_compression, write_eval
from pgrpo.evaluate.records import Decoding
from pgrpo.tasks import get_task


def _record(ids, c, *, n=8, seed=0, options=None, decoding=None, **extra) -> dict:
    """One result record as `pgrpo eval --out` writes it (decoding None: an older file)."""
    run = EvalRun(f"m/seed{seed}", list(ids), [n] * len(ids), list(c), seed=seed,
                  task="arithmetic", split="test", task_options=options or {}, step=0,
                  decoding=decoding)  # fmt: skip
    rec = run.summary()
    if decoding is None:
        del rec["decoding"]  # as written before 2026-12-06
    return rec | extra


def _file(path: Path, *records: dict) -> Path:
    path.write_text(json.dumps({"kind": "pgrpo.eval", "results": list(records)}))
    return path


GREEDY, HOT = Decoding(0.0, 64), Decoding(2.0, 64)
IDS = [f"p{i}" for i in range(10)]


# ------------------------------------------------------------------- 1. the paired comparison


def test_two_shared_problems_are_not_significant(tmp_path):
    """Review: 2 shared problems gave the "95%" interval [min d, max d] = [+0.125, +0.250] and
    p=0.0001 (the bootstrap's floor, 1 / (n_boot + 1), printed as if exact)."""
    a = _file(tmp_path / "a.json", _record(["p1", "p2"], [5, 6]))
    b = _file(tmp_path / "b.json", _record(["p1", "p2"], [4, 4]))
    res = _cli("--from", str(a), "--baseline", str(b))
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    assert "paired t 95% CI [-" in text and "p=0.0001" not in text and "p=0.2" in text
    cmp = json.loads(_cli("--from", str(a), "--baseline", str(b), "--json").stdout)["comparison"]
    assert cmp["paired_ci"][0] < 0 < cmp["paired_ci"][1] and cmp["paired_dof"] == 1.0


def _null_runs(rng, problems: int) -> tuple[list[EvalRun], list[EvalRun]]:
    """Two systems that solve each problem at the same rate p ~ Beta(1, 1), 8 samples each."""
    p, ids = rng.beta(1, 1, problems), [str(i) for i in range(problems)]
    return tuple([EvalRun(name, ids, [8] * problems, rng.binomial(8, p).tolist())] for name in "ab")


@pytest.mark.parametrize(("problems", "bound"), [(2, 0.03), (3, 0.06), (5, 0.08), (10, 0.08)])
def test_no_change_is_rarely_significant(problems, bound):
    """Simulation (400 seeded comparisons of two equal systems): the bootstrap called 22%,
    19%, 13% and 8.6% of them significant at 0.05 with 2, 3, 5 and 10 problems; the paired t
    keeps its level (bench/eval_paired.py: 0.000, 0.018, 0.043, 0.050 in 2,000)."""
    rng = np.random.default_rng(problems)
    hits = 0
    for _ in range(400):
        a, b = _null_runs(rng, problems)
        p = compare(a, b)["paired_p"]
        hits += p == p and p < 0.05  # NaN (no spread): not significant
    assert hits / 400 <= bound, hits / 400


def test_the_verdict_needs_more_than_two_standard_errors_of_two_problems():
    """The search-compression verdict's 2-standard-error rule called 10.6% of no-change
    comparisons of 2 problems a gain; with the t interval's half-width (1 dof: 12.7 standard
    errors) and no verdict from a gain without spread, none."""
    rng = np.random.default_rng(0)
    gains = sum(
        search_compression(*_null_runs(rng, 2))["verdict"]
        in ("search compression", "capacity expansion")
        for _ in range(400)
    )
    assert gains <= 4, gains / 400
    ids = ["a", "b"]  # both problems rose by exactly one sample in 8: no spread, not judged
    sc = search_compression(
        [EvalRun("b", ids, [8, 8], [2, 5])], [EvalRun("t", ids, [8, 8], [3, 6])]
    )
    assert sc["verdict"] == "not judged" and "no spread" in sc["verdict_note"]


# ---------------------------------------------------------------- 3. decoding settings


def test_decoding_settings_are_recorded(fake_sampling):
    fake_sampling(_arithmetic_answer)
    res = _cli("--model", "tiny", "--problems", "3", "--samples", "2", "--temperature", "0.7",
               "--max-new-tokens", "9", "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    rec = json.loads(res.stdout)["results"][0]
    assert rec["decoding"] == {"temperature": 0.7, "max_new_tokens": 9}
    assert rec["n_samples"] == 2 and {p["n"] for p in rec["per_problem"]} == {2}


def test_a_baseline_sampled_otherwise_is_refused(tmp_path, fake_sampling):
    """Review: greedy against temperature 2.0 was compared silently. --from: one line naming
    both settings and the fix; sampling: refused before anything is sampled."""
    hot = _file(tmp_path / "hot.json", _record(IDS, [5] * 10, n=1 * 8, decoding=HOT))
    greedy = _file(tmp_path / "greedy.json", _record(IDS, [1] * 10, n=1, decoding=GREEDY))
    res = _cli("--from", str(hot), "--baseline", str(greedy))
    one_line_error(
        res, "this evaluation sampled at temperature 2, max_new_tokens 64",
        "the baseline at temperature 0, max_new_tokens 64",
        "--temperature 0 --max-new-tokens 64",
    )  # fmt: skip
    calls = fake_sampling(_arithmetic_answer)
    res = _cli("--model", "tiny", "--problems", "3", "--samples", "1", "--temperature", "2",
               "--baseline", str(greedy))  # fmt: skip
    one_line_error(res, "sampled at temperature 2, max_new_tokens 64")
    assert calls == []


def test_a_baseline_without_decoding_settings_is_compared_with_a_warning(tmp_path):
    new = _file(tmp_path / "new.json", _record(IDS, [5] * 9 + [6], decoding=HOT))
    old = _file(tmp_path / "old.json", _record(IDS, [4] * 10))
    res = _cli("--from", str(new), "--baseline", str(old))
    assert res.exit_code == 0, res.output
    assert "warning: the baseline does not record its decoding settings" in res.output
    assert "compared regardless" in res.output


# ------------------------------------------------------------ 4. a refused baseline loses nothing


def test_a_refused_baseline_leaves_the_out_file_alone(tmp_path):
    """Review: with --from, --out was written (without the comparison) before the baseline was
    checked, so a rejected --baseline destroyed the comparison stored there."""
    a = _file(tmp_path / "a.json", _record(IDS, [5] * 10))
    b = _file(tmp_path / "b.json", _record(IDS, [4] * 10))
    other = _file(tmp_path / "o.json", _record(IDS, [4] * 10, options={"levels": [6]}))
    out = tmp_path / "cmp.json"
    assert _cli("--from", str(a), "--baseline", str(b), "--out", str(out)).exit_code == 0
    stored = out.read_text()
    assert "comparison" in json.loads(stored)
    res = _cli("--from", str(a), "--baseline", str(other), "--out", str(out))
    assert res.exit_code == 2 and out.read_text() == stored
    one_line_error(res, "the options differ")


# --------------------------------------------------------------------- 5. seeds and their interval


def test_seeds_of_different_problem_sets_are_refused(tmp_path):
    """Review: 2 easy problems in one seed and 98 hard ones in another gave a mean of 0.5
    outside its own interval [0.002, 0.070]."""
    mixed = _file(
        tmp_path / "mixed.json",
        _record(["a", "b"], [8, 8], seed=0),
        _record([f"q{i}" for i in range(98)], [0] * 98, seed=1),
    )
    one_line_error(
        _cli("--from", str(mixed)),
        str(mixed),
        "its results are of different problem "
        "sets: m/seed0 evaluated 2 problems, m/seed1 98 (0 shared)",
        "--problem-seed",
    )
    base = _file(tmp_path / "b.json", _record(["a", "b"], [1, 2]))
    one_line_error(_cli("--from", str(base), "--baseline", str(mixed)), f"--baseline {mixed}")
    runs = [EvalRun("x", ["a", "b"], [8, 8], [1, 2]), EvalRun("y", ["a", "c"], [8, 8], [1, 2])]
    with pytest.raises(ValueError, match="the baseline's results are of different problem sets"):
        compare(runs[:1], runs)


def test_the_seed_to_seed_interval_stays_in_the_unit_range(tmp_path):
    """Review: two seeds at 0.021 and 0.042 gave seed_ci [-0.101, 0.164]."""
    ids = [str(i) for i in range(12)]
    doc = _file(tmp_path / "a.json", _record(ids, [1] + [0] * 11, n=4, seed=0),
                _record(ids, [0, 1] + [0] * 9 + [1], n=4, seed=1))  # fmt: skip
    res = _cli("--from", str(doc), "--json")
    agg = json.loads(res.stdout)["aggregate"]
    assert agg["seed_ci"][0] == 0.0 and agg["seed_ci"][1] < 1 and agg["seed_ci_clipped"]
    assert agg["seed_ci"][0] <= agg["accuracy_mean"] <= agg["seed_ci"][1]
    text = " ".join(_cli("--from", str(doc)).stdout.split())
    assert "seed-to-seed [0.000, 0.164] (t interval clipped to [0, 1])" in text


# ------------------------------------------------------------ 6. and 7. what a --from file holds


@pytest.mark.parametrize(
    ("n", "shown"), [(10**10, "n=10000000000 samples"), (10**300, "n=~1e300 samples")]
)
def test_absurd_sample_counts_are_one_line(tmp_path, n, shown):
    """Review: n = 10**10 went on to a 74.5 GiB allocation traceback, 10**300 to a garbled
    error."""
    doc = _record(["p1", "p2"], [3, 1])
    doc["per_problem"][0]["n"] = n
    path = _file(tmp_path / "big.json", doc)
    one_line_error(_cli("--from", str(path)), str(path), shown, "more than the 1,000,000",
                   "give the file `pgrpo eval --out` wrote")  # fmt: skip


@pytest.mark.parametrize(
    ("change", "needles"),
    [
        ({"metrics": {"reward_errors": "x"}}, ['metrics.reward_errors is "x"', "not a count"]),
        ({"metrics": [1, 2]}, ["metrics is [1, 2]", "not a mapping of counts"]),
        ({"step": {"x": 1}}, ['step is {"x": 1}', "not a whole number >= 0 or null"]),
        ({"seed": "one"}, ['seed is "one"']),
        ({"step": -(10**400)}, ["step is -1000", "not a whole number >= 0"]),
        ({"metrics": {"reward_errors": 1e309 * 0}}, ["metrics.reward_errors is NaN"]),
        ({"decoding": {"temperature": -1}}, ["decoding is", "temperature: a number >= 0"]),
    ],
)
def test_a_bad_field_is_one_line_naming_the_file_and_field(tmp_path, change, needles):
    """Review: metrics "x" or [1, 2] gave context-free errors; a step {"x": 1} was taken."""
    path = _file(tmp_path / "bad.json", _record(IDS, [3] * 10) | change)
    one_line_error(_cli("--from", str(path)), str(path), "eval result 'm/seed0'", *needles,
                   "give the file `pgrpo eval --out` wrote")  # fmt: skip


def test_a_null_problem_id_and_a_bad_record_are_one_line(tmp_path):
    """Review: a per_problem id null became the problem "None"; a result 5 gave "'int' object
    has no attribute 'get'"."""
    rec = _record(IDS, [3] * 10)
    rec["per_problem"][1]["id"] = None
    path = _file(tmp_path / "none.json", rec)
    one_line_error(_cli("--from", str(path)), str(path), "per_problem[1].id is null")
    path = _file(tmp_path / "five.json", _record(IDS, [3] * 10), 5)
    one_line_error(_cli("--from", str(path)), str(path), "result 1 is 5, not a result record")


# ----------------------------------------------------------- 8. options that change the reward


def test_options_that_change_only_the_reward_are_compared_with_a_note(tmp_path):
    """Review: format_weight 0.5 against none was refused as "not the same problems"; it
    changes neither the problems nor which answers count as correct."""
    a = _file(tmp_path / "a.json", _record(IDS, [5] * 10, options={"format_weight": 0.5}))
    b = _file(tmp_path / "b.json", _record(IDS, [4] * 10))
    res = _cli("--from", str(a), "--baseline", str(b))
    assert res.exit_code == 0, res.output
    assert "warning: this evaluation and the baseline differ in task option(s) format_weight" in (
        " ".join(res.output.split())
    )
    levels = _file(tmp_path / "l.json", _record(IDS, [4] * 10, options={"levels": [1]}))
    line = one_line_error(_cli("--from", str(a), "--baseline", str(levels)), "the options differ")
    assert "not the same problems" not in line


@settings(max_examples=25, deadline=None)
@given(
    st.floats(0.0, 1.0),
    st.lists(st.sampled_from(["7", " 7 ", "The answer is 12.", "x", "", "3.0", "\\boxed{9}"]),
             min_size=1, max_size=5),
)  # fmt: skip
def test_format_weight_changes_neither_the_problems_nor_correctness(weight, completions):
    """What `reward_only_options` claims for arithmetic: the splits and `correct` are the same
    whatever format_weight; the reward is not."""
    plain, weighted = (
        get_task("arithmetic", n=30),
        get_task("arithmetic", n=30, format_weight=weight),
    )
    for split in ("train", "test"):
        assert plain.load(split) == weighted.load(split)
    for example in plain.load("test")[:4]:
        for text in completions:
            assert plain.correct(text, example) == weighted.correct(text, example)


def test_write_eval_round_trips_the_decoding(tmp_path):
    run = EvalRun("r", IDS, [8] * 10, [3] * 10, decoding=HOT)
    back = json.loads(write_eval(eval_document([run]), tmp_path / "e.json").read_text())
    assert back["results"][0]["decoding"] == {"temperature": 2.0, "max_new_tokens": 64}
    assert EvalRun.from_summary(back["results"][0]).decoding == HOT
