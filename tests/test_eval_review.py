"""`pgrpo eval` review fixes (2026-12-04): problems paired by identity, repeats evaluated once,
correctness apart from reward, scoring failures counted, checks before sampling, the tiny
model's warm-up with the evaluation's options, no verdict from one sample, one-line errors.

Sampling is replaced by a stub (`fake_sampling` in conftest.py: each completion a function of its
prompt), so these tests check what `evaluate` and the CLI do with completions, without a model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.evaluate import EvalConfig, EvalRun, eval_document, write_eval
from pgrpo.evaluate.metrics import pair_problems, search_compression
from pgrpo.evaluate.runner import plan_eval
from pgrpo.tasks import TASKS, get_task, register_task
from pgrpo.tasks.arithmetic import _evaluate
from pgrpo.tasks.base import problem_id

_load_commands()


def _cli(*args: str):
    return CliRunner().invoke(app, ["eval", *args])


def _arithmetic_answer(prompt: str) -> str:
    """The right answer to an arithmetic prompt ("What is 3 + 4? ...")."""
    return str(_evaluate(prompt.split("What is ", 1)[1].split("?", 1)[0]))


def _doc(path: Path, runs: list[EvalRun]) -> Path:
    return write_eval(eval_document(runs), path)


L1, L6 = {"levels": [1]}, {"levels": [6]}


def _runs(ids, c, n=4, seeds=(0,), **kw) -> list[EvalRun]:
    return [
        EvalRun(f"r{s}", list(ids), [n] * len(ids), list(c), seed=s, task="arithmetic",
                split="test", **kw)
        for s in seeds
    ]  # fmt: skip


# --------------------------------------------------------------------------- 1. identity


def test_problem_ids_are_the_datasets_own():
    """arithmetic: the expression; MATH-500: unique_id; IFEval: key; GSM8K (no id): a hash of
    the prompt, stable and distinct per question."""
    assert problem_id(get_task("arithmetic"), {"expression": "3 + 4", "answer": 7}) == "3 + 4"
    assert problem_id(get_task("math"), {"problem": "p", "answer": "1", "unique_id": "u/1"}) == (
        "u/1"
    )
    assert problem_id(get_task("ifeval"), {"key": 1001, "prompt": "x"}) == "1001"
    gsm = get_task("gsm8k")
    a, b = ({"question": q, "answer": "#### 1"} for q in ("How many?", "How few?"))
    assert problem_id(gsm, a) == problem_id(gsm, dict(a)) != problem_id(gsm, b)
    assert problem_id(gsm, a).startswith("prompt:")


def test_different_task_options_are_refused(tmp_path):
    """Review: levels [1] vs [6] (different problems) gave a 'paired' result."""
    l1 = _doc(tmp_path / "l1.json", _runs(["1 + 2", "3 + 4"], [1, 2], task_options=L1))
    l6 = _doc(tmp_path / "l6.json", _runs(["12 * 34", "56 * 78"], [0, 0], task_options=L6))
    res = _cli("--from", str(l1), "--baseline", str(l6))
    assert res.exit_code == 2, res.output
    assert 'task options {"levels": [1]}' in res.output and "--task-options" in res.output
    other = _doc(tmp_path / "s.json", [EvalRun("x", ["1 + 2", "3 + 4"], [4, 4], [0, 0],
                                               task="arithmetic", split="train")])  # fmt: skip
    res = _cli("--from", str(l1), "--baseline", str(other))
    assert res.exit_code == 2 and "used split test, the baseline train" in res.output


def test_partly_shared_problems_are_counted_and_gains_use_them_alone(tmp_path):
    """Review: 2 shared problems of 20 reported a 'paired' diff without saying so, and the
    pass@1 gain was over all problems of each side. Now: the shared count, a warning, and the
    gains on the shared problems."""
    ids_a = [f"{i} + 1" for i in range(20)]
    ids_b = ids_a[:2] + [f"{i} + 2" for i in range(18)]
    a = _doc(tmp_path / "a.json", _runs(ids_a, [4, 4] + [0] * 18))
    b = _doc(tmp_path / "b.json", _runs(ids_b, [0, 0] + [4] * 18))
    res = _cli("--from", str(a), "--baseline", str(b))
    assert res.exit_code == 0, res.output
    assert "on 2 shared problems (of 20 and 20)" in res.stdout.replace("\n", " ")
    assert "warning: only 2 problems are shared" in res.output
    doc = json.loads(_cli("--from", str(a), "--baseline", str(b), "--json").stdout)
    assert doc["comparison"]["problems"] == 2 and doc["comparison"]["diff"] == 1.0
    # over all problems each side the gain was 0.1 - 0.9 = -0.8; on the shared ones it is +1
    assert doc["search_compression"]["gain_pass1"] == 1.0
    assert doc["search_compression"]["problems"] == 2


def test_eval_jsons_without_ids_pair_by_row_with_a_warning(tmp_path):
    """Files written before ids (no id_source) are still read, paired by row number, and said
    so; one such file against one with ids is refused (their ids cannot match)."""
    old = [EvalRun("old", ["3", "7", "9"], [4] * 3, [1, 2, 3], id_source="position")]
    new = _doc(tmp_path / "new.json", _runs(["1 + 2", "3 + 4", "5 + 6"], [1, 1, 1]))
    doc = eval_document(old)
    for rec in doc["results"]:
        del rec["id_source"]  # as written before 2026-12-04
    (tmp_path / "old.json").write_text(json.dumps(doc))
    res = _cli("--from", str(tmp_path / "old.json"), "--baseline", str(tmp_path / "old.json"))
    assert res.exit_code == 0 and "paired by row number" in res.output, res.output
    res = _cli("--from", str(new), "--baseline", str(tmp_path / "old.json"))
    assert res.exit_code == 2 and "has no problem ids" in res.output, res.output


def test_no_shared_problems_names_the_problem_seed_option():
    a = _runs(["1 + 2", "3 + 4"], [1, 1])
    with pytest.raises(ValueError, match="share 0 problem.*--problem-seed"):
        pair_problems(a, _runs(["5 + 6", "7 + 8"], [1, 1]))


# --------------------------------------------------------------------------- 2. repeats


def test_a_repeated_problem_is_evaluated_once():
    """Review: at level 1 the test split's 200 rows hold 21 expressions, and 50 drawn rows were
    20 distinct problems counted as 50 independent ones."""
    plan = plan_eval(EvalConfig(model="tiny", task_options={"levels": [1]}, problems=50))
    rows = get_task("arithmetic", levels=[1]).load("test")
    distinct = {e["expression"] for e in rows}
    assert len(plan.ids) == len(set(plan.ids)) == len(distinct) < len(rows)
    assert any("repeats problems" in note for note in plan.notes)
    assert any(f"holds {len(distinct)} distinct problems" in note for note in plan.notes)


# ------------------------------------------------------------------- 3. checks before sampling


def test_an_incompatible_baseline_is_refused_before_sampling(tmp_path, fake_sampling):
    calls = fake_sampling(_arithmetic_answer)
    base = _doc(tmp_path / "l6.json", _runs(["12 * 34", "56 * 78"], [0, 0], task_options=L6))
    out = tmp_path / "out.json"
    args = ["--model", "tiny", "--task-options", "{levels: [1]}", "--problems", "3"]
    res = _cli(*args, "--baseline", str(base), "--out", str(out))
    assert res.exit_code == 2 and "task options" in res.output, res.output
    assert calls == [] and not out.exists()  # nothing sampled, nothing written
    ids = plan_eval(EvalConfig(model="tiny", task_options=L1, problems=3)).ids
    ok = _doc(tmp_path / "l1.json", _runs(ids, [0, 0, 0], task_options=L1))
    res = _cli(*args, "--samples", "2", "--baseline", str(ok), "--out", str(out))
    assert res.exit_code == 0, res.output
    written = json.loads(out.read_text())
    assert written["comparison"]["problems"] == 3 and written["comparison"]["diff"] == 1.0


def test_an_unwritable_out_fails_before_sampling(fake_sampling):
    calls = fake_sampling(_arithmetic_answer)
    if Path("/proc").is_dir():
        res = _cli("--model", "tiny", "--problems", "2", "--out", "/proc/x.json")
        assert res.exit_code == 2 and "cannot write there" in res.output, res.output
        assert calls == []


# ------------------------------------------------------------------------- 4. Welch undefined


def test_an_undefined_welch_test_prints(tmp_path):
    """Review: two seeds each, no spread: the table crashed on welch_p None."""
    ids = ["1 + 2", "3 + 4"]
    a = _doc(tmp_path / "a.json", _runs(ids, [0, 0], seeds=(0, 1)))
    b = _doc(tmp_path / "b.json", _runs(ids, [0, 0], seeds=(2, 3)))
    res = _cli("--from", str(a), "--baseline", str(b))
    assert res.exit_code == 0, res.output
    assert "Welch: undefined (no spread between seeds)" in " ".join(res.stdout.split())


# ------------------------------------------------------------------- 6. and 7. what is counted


def _register(name: str, **kw) -> None:
    if name not in TASKS:
        register_task(name, **kw)


def _bad_gold(completion, example):
    raise ValueError("gold answer is empty")


def test_reward_errors_are_counted_and_warned(fake_sampling):
    """Review: a reward that raised on every call scored 0 with no note and metrics {}."""
    _register(
        "eval_review_raising",
        examples=[{"q": "one", "answer": "1"}, {"q": "two", "answer": "2"}],
        prompt=lambda e: f"Say {e['q']}.",
        reward=_bad_gold,
    )
    fake_sampling(lambda p: "1")
    res = _cli("--model", "tiny", "--task", "eval_review_raising", "--samples", "2", "--json")
    assert res.exit_code == 0, res.output
    assert "warning:" in res.output and "4 of 4 scoring calls raised" in res.output
    assert "gold answer is empty" in res.output
    metrics = json.loads(res.stdout)["results"][0]["metrics"]
    assert metrics == {"reward_errors": 4.0, "reward_timeouts": 0.0}


def test_correct_answers_count_whatever_the_format_weight(fake_sampling):
    """Review: accuracy was reward >= 1, so with format_weight 0.5 a right answer in words
    ("The answer is 7.") scored 0.5 and counted as wrong."""
    fake_sampling(lambda p: f"The answer is {_arithmetic_answer(p)}.")
    for weight in (0, 0.5):
        opts = f"{{levels: [1], format_weight: {weight}}}"
        res = _cli("--model", "tiny", "--task-options", opts, "--problems", "4", "--samples",
                   "2", "--json")  # fmt: skip
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout)["results"][0]["accuracy"] == 1.0, weight


# ------------------------------------------------------------------------ 8. tiny warm-up


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_the_tiny_model_warms_up_with_the_evaluations_options(tmp_path, fake_sampling):
    """Review: --model tiny on gsm8k or math with --task-options '{data: ...}' loaded the train
    split from the Hub (the warm-up built the task without the options); MATH-500 has no train
    split at all. gsm8k: the warm-up gets the data folder; math: no warm-up, and a note."""
    gsm = tmp_path / "gsm"
    gsm.mkdir()
    for split in ("train", "test"):
        _jsonl(gsm / f"{split}.jsonl", [{"question": f"{split} {i}?", "answer": f"x\n#### {i}"}
                                        for i in range(3)])  # fmt: skip
    plan = plan_eval(EvalConfig(model="tiny", task="gsm8k", task_options={"data": str(gsm)}))
    assert plan.warm_up and plan.config.task.options == {"data": str(gsm)}
    math = tmp_path / "math"
    math.mkdir()
    _jsonl(math / "test.jsonl", [{"problem": f"{i}+0?", "answer": str(i)} for i in range(3)])
    fake_sampling(lambda p: "\\boxed{1}")
    res = _cli("--model", "tiny", "--task", "math", "--task-options", f"{{data: {math}}}",
               "--samples", "1", "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "the tiny model is not warmed up" in res.output
    assert json.loads(res.stdout)["results"][0]["accuracy"] == pytest.approx(1 / 3)


def test_offline_and_warm_up_errors_use_evals_options(tmp_path):
    """The fixes name `pgrpo eval`'s options, not `pgrpo train`'s (task.options.data,
    model.name=smollm2, model.tiny_warmup_steps=0)."""
    res = _cli("--model", "tiny", "--task", "gsm8k", "--problems", "1")  # offline (conftest)
    assert res.exit_code == 2 and "--task-options '{data:" in res.output, res.output
    assert "task.options.data" not in res.output
    _register(
        "eval_review_no_answer",
        examples=[{"prompt": "Write a haiku."}],
        prompt=lambda e: e["prompt"],
        reward=lambda c, e: 1.0,
    )
    res = _cli("--model", "tiny", "--task", "eval_review_no_answer")
    assert res.exit_code == 2 and "--tiny-warmup-steps 0" in res.output, res.output
    assert "model.name" not in res.output


# -------------------------------------------------------------------------- 9. one sample


def test_greedy_evals_get_no_compression_verdict(tmp_path):
    """Review: with one sample per problem pass@k_max is pass@1, so every significant gain
    read 'capacity expansion'."""
    ids = [str(i) for i in range(50)]
    base = _runs(ids, [0] * 50, n=1)
    trained = _runs(ids, [1] * 40 + [0] * 10, n=1)
    sc = search_compression(base, trained)
    assert sc["verdict"] == "not judged" and "--samples >= 2" in sc["verdict_note"]
    a, b = _doc(tmp_path / "t.json", trained), _doc(tmp_path / "b.json", base)
    res = _cli("--from", str(a), "--baseline", str(b))
    assert res.exit_code == 0 and "not judged" in res.stdout, res.output
    assert ": capacity expansion" not in res.stdout


# ----------------------------------------------------------------------------- 10. inputs


def test_an_eval_json_without_results_says_what_to_give(tmp_path):
    (tmp_path / "e.json").write_text('{"kind": "pgrpo.eval", "results": []}')
    res = _cli("--from", str(tmp_path / "e.json"))
    assert res.exit_code == 2, res.output
    assert "holds no eval results" in res.output and "pgrpo eval --out" in res.output


def test_a_problem_listed_twice_in_a_file_is_one_problem(tmp_path):
    run = EvalRun("x", ["a", "b"], [2, 2], [1, 2])
    doc = eval_document([run])
    doc["results"][0]["per_problem"].append({"id": "a", "n": 2, "c": 2})
    (tmp_path / "d.json").write_text(json.dumps(doc))
    res = _cli("--from", str(tmp_path / "d.json"), "--json")
    assert res.exit_code == 0, res.output
    per = json.loads(res.stdout)["results"][0]["per_problem"]
    assert per == [{"id": "a", "n": 4, "c": 3}, {"id": "b", "n": 2, "c": 2}]
    assert np.isclose(json.loads(res.stdout)["results"][0]["accuracy"], (3 / 4 + 1) / 2)
