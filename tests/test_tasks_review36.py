"""A hostile review of the task rewards (session 36): a wrong reward silently ruins a GRPO run.
Each test failed before its fix."""

from __future__ import annotations

import time

import pytest

from pgrpo.tasks.answers import MAX_BOXES, extract_final_number
from pgrpo.tasks.gsm8k import GSM8KTask

GSM = GSM8KTask()


def _reward(completion: str, gold) -> float:
    return GSM.reward(completion, {"question": "Janet has some apples. How many?",
                                   "answer": f"#### {gold}"})  # fmt: skip


@pytest.mark.parametrize("blank", [" ", "\t", " \t"])
def test_the_answer_line_is_read_in_linear_time_after_a_long_run_of_blanks(blank):
    """The `####` pattern's adjacent optional blank runs backtracked in cubic time: 1,500
    spaces and a '!' took 5 s (20,000 would take hours), inside the trainer's metrics step."""
    text = "3 + 15 = 18\n#### 18" + blank * 6000 + "!"
    start = time.perf_counter()
    assert extract_final_number(text) is not None
    assert GSM.metrics([text], [{"question": "q", "answer": "#### 18"}], [0.0])
    assert time.perf_counter() - start < 2.0  # was minutes


def test_thousands_of_unclosed_boxes_are_read_in_linear_time():
    start = time.perf_counter()
    assert extract_final_number("\\boxed{" * 5000) is None
    assert extract_final_number("\\boxed{" * 5000 + "18") == "18"
    assert time.perf_counter() - start < 2.0  # was 7.6 s at 2,858 boxes
    assert MAX_BOXES >= 8


@pytest.mark.parametrize(
    ("completion", "gold"),
    [
        ("\\boxed{1/2}", 2),
        ("\\boxed{2\\frac{1}{2}}", 2),
        ("\\boxed{18\\frac{1}{2}}", 2),
        ("\\boxed{\\frac{1}{2}\\text{ hour}}", 2),
        ("\\boxed{\\sqrt{18}}", 18),
        ("\\boxed{18^2}", 2),
        ("The answer is 18/5", 18),
        ("The answer isn't 17; it's 18.", 17),
        ("The answer is \u20135", 5),
        ("\\boxed{3 + 15}", 15),
        ("\\boxed{18 \\text{ and } 20}", 1820),  # two numbers, not one glued together
        ("\\boxed{18 \\text{ and } 20}", 20),
    ],
)
def test_a_wrong_answer_is_not_rewarded(completion, gold):
    assert _reward(completion, gold) == 0.0


@pytest.mark.parametrize(
    ("completion", "gold"),
    [
        ("\\boxed{1/2}", 0.5),
        ("\\boxed{2\\frac{1}{2}}", 2.5),
        ("\\boxed{-\\frac{3}{4}}", -0.75),
        ("\\boxed{\\frac{1}{2}\\text{ hour}}", 0.5),
        ("\\boxed{18 \\text{ apples}}", 18),
        ("\\boxed{\\textbf{18}}", 18),
        ("\\boxed{x = 18}", 18),
        ("\\boxed{\\$1{,}200}", 1200),
        ("\\boxed{18\\%}", 18),
        ("\\boxed{18.}", 18),
        ("The answer is 18/5", 3.6),
        ("The answer isn't 17; it's 18.", 18),
        ("The answer is 3 + 15 = 18.", 18),
        ("The answer is \u20135", -5),
        ("#### 18" + " " * 300, 18),
        ("\\boxed{18} \\boxed{}", 18),  # a box with no digit: the one before
        ("\\boxed{(18)}", 18),
        ("\\boxed{\\left(18\\right)}", 18),
        ("\\boxed{18 \\text{ ft}^2}", 18),
        ("\\boxed{18\\,\\mathrm{m}}", 18),
        ("\\boxed{2 \\frac{1}{2}}", 2.5),
        ("\\boxed{\\$ 18}", 18),
    ],
)
def test_a_right_answer_is_rewarded(completion, gold):
    assert _reward(completion, gold) == 1.0


def test_no_generated_ifeval_prompt_asks_for_sections_in_one_case_only():
    """33 of 1,000 generated prompts paired multiple_sections with an all-lowercase (or, at a
    'Section' splitter, all-capitals) response, which no response satisfies."""
    from pgrpo.tasks.ifeval import EXTRA_CONFLICTS, generate_prompts

    for prompt in generate_prompts(1000):
        ids = set(prompt["instruction_id_list"])
        for key, others in EXTRA_CONFLICTS.items():
            assert not (key in ids and ids & others), prompt["key"]


@pytest.mark.parametrize("gold", ["\\infty", "-\\infty"])
def test_the_math_task_s_own_reference_scores_1_on_an_infinite_answer(gold):
    from pgrpo.tasks.math500 import MathTask

    task = MathTask()
    example = {"problem": "Find the limit.", "answer": gold}
    assert task.reward(task.reference(example), example) == 1.0


@pytest.mark.parametrize(("boxed", "gold"), [("\\quad 3", "3"), ("{1 \\over 2}", "\\frac{1}{2}")])
def test_a_number_written_with_spacing_or_over_scores_1(boxed, gold):
    from pgrpo.tasks.math500 import MathTask

    completion = f"The final answer is $\\boxed{{{boxed}}}$."
    assert MathTask().reward(completion, {"problem": "Compute.", "answer": gold}) == 1.0
