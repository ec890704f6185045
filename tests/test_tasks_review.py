"""Rewards a hostile review of the tasks found wrong (2026-12-03); each test failed before its
fix. Restating the question scored 1 (MATH on 32 of 500 problems, GSM8K on 30 of 1,319, every
`0 + x` arithmetic problem), MATH paid for an expression that evaluates to the number it asks
for (`\\boxed{99^2+99+1}`), a markdown heading `#### Step 2` outranked "The answer is", and LaTeX
thousands separators (`70{,}000`, `10\\,080`) read as other numbers."""

from __future__ import annotations

import json

import pytest

from pgrpo.tasks import get_task
from pgrpo.tasks.answers import extract_final_number

MATH_ROWS = [
    {"problem": "Compute $99^2+99+1$ in your head.", "answer": "9901"},
    {"problem": "What is $\\dbinom{31}{28}$?", "answer": "4495"},
    {"problem": "Simplify $\\sqrt{242}$.", "answer": "11\\sqrt2"},
    {"problem": "How many ways?", "answer": "10,\\!080"},
]


@pytest.fixture(scope="module")
def math_task(tmp_path_factory):
    path = tmp_path_factory.mktemp("math") / "test.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in MATH_ROWS))
    return get_task("math", data=str(path.parent))


def test_math_pays_for_the_simplified_answer_not_the_question(math_task):
    q, binom, root, big = math_task.load("test")
    assert math_task.reward(math_task.prompt(q), q) == 0.0  # the question echoed: was 1
    assert math_task.reward("We need $99^2+99+1$, so \\boxed{99^2+99+1}", q) == 0.0  # was 1
    assert math_task.reward("\\boxed{\\dbinom{31}{28}}", binom) == 0.0  # was 1
    for right in ("\\boxed{9901}", "\\boxed{9,901}", "\\boxed{9\\,901}", "$x = 9901$, so "
                  "\\boxed{x = 9901}", "The final answer is $9901$."):  # fmt: skip
        assert math_task.reward(right, q) == 1.0, right
    assert math_task.reward("\\boxed{11\\sqrt{2}}", root) == 1.0  # an expression gold: as before
    assert math_task.reward("\\boxed{10\\,080}", big) == 1.0  # math-verify read 10\,080 as 90


def test_gsm8k_and_arithmetic_read_the_answer_not_the_question(tmp_path):
    rows = [{"question": "Wendi feeds 20 cups to each of 3 flocks; how many cups are left of 20?",
             "answer": "... #### 20"}]  # fmt: skip
    (tmp_path / "test.jsonl").write_text(json.dumps(rows[0]) + "\n")
    gsm = get_task("gsm8k", data=str(tmp_path))
    ex = gsm.load("test")[0]
    assert gsm.reward(gsm.prompt(ex), ex) == 0.0  # its last number is the answer: was 1
    assert gsm.reward(gsm.prompt(ex) + "\nThe answer is 20.", ex) == 1.0
    arith = get_task("arithmetic")
    zero = {"expression": "0 + 5", "answer": 5, "level": 1}
    assert arith.reward(arith.prompt(zero), zero) == 0.0
    assert arith.reward("5", zero) == 1.0


@pytest.mark.parametrize(
    ("text", "answer"),
    [("#### Step 1: Eggs left\n16 - 3 - 4 = 9\n#### Step 2: Money\n9 * 2 = 18\nThe answer is 18.",
      "18"),
     ("The answer is $70{,}000$.", "70000"), ("\\boxed{70{,}000}", "70000"),
     ("So 70\\,000 in all", "70000"), ("total 70\u202f000", "70000"), ("#### 42", "42"),
     ("so #### $1,200", "1200"), ("1,2,3", "3")],
)  # fmt: skip
def test_final_number_headings_and_thousands_separators(text, answer):
    assert extract_final_number(text) == answer


@pytest.mark.parametrize("isolation", ["inline", "fork"])
def test_a_string_or_overflowing_reward_is_a_counted_error(isolation):
    """A reward function returning "0.7" scored 0.7 (the docs: a non-number scores 0 and is
    counted), and one returning 10**400 raised OverflowError out of score_completions in the
    inline and signal modes (review 2026-12-03)."""
    from pgrpo.tasks import FunctionTask, score_completions

    values = {"a": "0.7", "b": 10**400, "c": 0.5}
    task = FunctionTask("review_values", examples=[{}], prompt=lambda example: "?",
                        reward=lambda completion, example: values[completion])  # fmt: skip
    res = score_completions(task, ["a", "b", "c"], [{}, {}, {}], isolation=isolation)
    assert res.rewards == [0.0, 0.0, 0.5] and res.errors == 2


def test_an_example_without_the_prompts_fields_is_still_scored():
    """A TRL dataset row may carry only the answer: the prompt echo cannot be built, and the
    reward must score the completion as it is (the GPU bench's TRL variant failed on KeyError)."""
    arith = get_task("arithmetic")
    assert arith.reward("The answer is 5", {"answer": 5}) == 1.0
