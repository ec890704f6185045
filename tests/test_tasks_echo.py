"""Restating the question is not answering it (review 2026-12-04). Only a verbatim copy of the
whole prompt was removed, so a completion that echoed the question text alone scored 1 whenever
the question's last number was the answer: GSM8K 30 of 1,319 test questions, MATH-500 17 of 500,
arithmetic level 1 11 of 200 (`What is 0 + 5?`). Each test here failed before the fix."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pgrpo.tasks import get_task, score_completions
from pgrpo.tasks.answers import prompt_slots, without_prompt

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
needs_data = pytest.mark.skipif(not (DATA / "gsm8k").is_dir(), reason="shared/data absent")

QUESTION = (
    "Wendi feeds 3 cups to each chicken.\nShe has 20 chickens. "
    "How many cups does she need for 20 chickens?"
)


def _last_sentence(text: str) -> str:
    return re.split(r"(?<=[.?!])\s+", text.strip())[-1]


@pytest.fixture(scope="module")
def gsm(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gsm8k")
    row = {"question": QUESTION, "answer": "3 * 20 = 60\n#### 20"}  # gold 20: the last number
    (folder / "test.jsonl").write_text(json.dumps(row) + "\n")
    task = get_task("gsm8k", data=str(folder))
    return task, task.load("test")[0]


@pytest.mark.parametrize(
    "echo",
    [
        lambda q: q,  # the question alone (was 1)
        lambda q: "Question: " + q.rstrip("?. "),  # its final punctuation dropped (was 1)
        lambda q: " ".join(q.split()),  # its line breaks as spaces (was 1)
        lambda q: "Let me restate: " + _last_sentence(q),  # its last sentence (was 1)
    ],
)
def test_gsm8k_echo_of_the_question_scores_zero(gsm, echo):
    task, example = gsm
    assert task.reward(echo(QUESTION), example) == 0.0


def test_restating_then_answering_still_scores(gsm):
    task, example = gsm
    assert task.reward(QUESTION + "\nSo 3 * 20 = 60.\nThe answer is 20.", example) == 1.0
    assert task.reward(_last_sentence(QUESTION) + " 20", example) == 1.0


def test_arithmetic_echo_scores_zero_and_is_not_stripped_inside_other_numbers():
    task = get_task("arithmetic")
    zero = {"expression": "0 + 5", "answer": 5, "level": 1}
    assert task.reward("What is 0 + 5?", zero) == 0.0  # was 1
    assert task.reward("0 + 5", zero) == 0.0  # was 1
    assert task.reward("0 + 5 = 5", zero) == 1.0
    assert without_prompt("10 + 56 and 0 + 5.5", task.prompt, zero) == "10 + 56 and 0 + 5.5"


def test_prompt_slots_are_fields_the_prompt_inserts_not_fields_that_occur_in_it():
    math = get_task("math")
    example = {"problem": "What is 2 + 3? Answer 5 or 6.", "answer": "5", "subject": "Algebra"}
    assert prompt_slots(math.prompt, example) == [example["problem"]]
    assert without_prompt("\\boxed{5}", math.prompt, example) == "\\boxed{5}"  # not stripped


def test_math_echo_of_the_problem_scores_zero(tmp_path):
    row = {"problem": "Find $x$.\nThe value is $x = 4$. What is $x$?", "answer": "4"}
    (tmp_path / "test.jsonl").write_text(json.dumps(row) + "\n")
    task = get_task("math", data=str(tmp_path))
    example = task.load("test")[0]
    assert task.reward(row["problem"], example) == 0.0  # was 1
    assert task.reward("The value is $x = 4$.", example) == 0.0  # one sentence of it: was 1
    assert task.reward(row["problem"] + "\nSo \\boxed{4}.", example) == 1.0


@needs_data
def test_no_echo_scores_on_the_real_test_sets():
    """Counts before the fix: GSM8K 30 (question), 15 (last sentence); arithmetic 11."""
    gsm = get_task("gsm8k", data=str(DATA / "gsm8k"))
    examples = gsm.load("test")
    for echo in (lambda e: e["question"], lambda e: _last_sentence(e["question"])):
        rewards = score_completions(gsm, [echo(e) for e in examples], examples).rewards
        assert sum(rewards) == 0.0
    solved = [e["question"] + "\n" + e["answer"] for e in examples]
    assert score_completions(gsm, solved, examples).rewards == [1.0] * len(examples)
    arith = get_task("arithmetic", levels=[1])
    examples = arith.load("test")
    echoes = [f"What is {e['expression']}?" for e in examples]
    assert sum(score_completions(arith, echoes, examples).rewards) == 0.0


# The 17 MATH-500 problems whose text (or last sentence) alone scored 1 before the fix.
MATH_ECHO_HITS = {
    "test/algebra/1098.json", "test/algebra/1275.json", "test/algebra/1519.json",
    "test/algebra/2680.json", "test/algebra/2735.json", "test/algebra/634.json",
    "test/counting_and_probability/190.json", "test/geometry/254.json",
    "test/intermediate_algebra/431.json", "test/number_theory/410.json",
    "test/number_theory/737.json", "test/prealgebra/1302.json", "test/prealgebra/1834.json",
    "test/prealgebra/1924.json", "test/prealgebra/2019.json", "test/prealgebra/572.json",
    "test/prealgebra/65.json",
}  # fmt: skip


@pytest.mark.skipif(not (DATA / "math500").is_dir(), reason="shared/data absent")
def test_math500_problems_whose_echo_scored_now_score_zero():
    task = get_task("math", data=str(DATA / "math500"))
    examples = [e for e in task.load("test") if e["unique_id"] in MATH_ECHO_HITS]
    assert len(examples) == len(MATH_ECHO_HITS)
    for echo in (lambda e: e["problem"], lambda e: _last_sentence(e["problem"])):
        res = score_completions(task, [echo(e) for e in examples], examples, timeout_s=10)
        assert sum(res.rewards) == 0.0
    solved = [e["problem"] + "\n" + e["solution"] for e in examples]
    res = score_completions(task, solved, examples, timeout_s=10)
    assert res.rewards == [1.0] * len(examples)
