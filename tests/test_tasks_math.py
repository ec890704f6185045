"""`math` (MATH-500 with math-verify): equivalence, binary reward, metrics, the timeout path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgrpo.tasks import get_task, score_completions

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
needs_data = pytest.mark.skipif(not (DATA / "math500").is_dir(), reason="shared/data absent")

ROWS = [
    {"problem": "Compute 1/2.", "answer": "\\frac{1}{2}", "level": 1},
    {"problem": "Solve x^2 = 4 for x > 0.", "answer": "2", "level": 2},
    {"problem": "Write the point.", "answer": "\\left( 3, \\frac{\\pi}{2} \\right)", "level": 2},
]


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    path = tmp_path_factory.mktemp("math") / "test.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return get_task("math", data=str(path.parent))


def test_load_prompt_and_equivalent_forms_score_one(task):
    examples = task.load("test")
    assert examples == ROWS
    assert task.prompt(examples[0]) == "Compute 1/2.\nGive the final answer in \\boxed{}."
    completions = [
        "So it is $\\boxed{0.5}$.",  # decimal vs fraction
        "The answer is $\\boxed{\\dfrac{2}{4}}$",  # unsimplified fraction
        "x = \\boxed{2}",
        "x = \\boxed{-2}",
        "$\\boxed{(3, \\frac{\\pi}{2})}$",
        "",
    ]
    chosen = [examples[0], examples[0], examples[1], examples[1], examples[2], examples[2]]
    res = score_completions(task, completions, chosen, timeout_s=10)
    assert res.isolation == "process"
    assert res.rewards == [1.0, 1.0, 1.0, 0.0, 1.0, 0.0]
    assert res.errors == res.timeouts == 0
    m = task.metrics(completions, chosen, res.rewards)
    assert m == {"accuracy": pytest.approx(4 / 6), "accuracy/level_1": 1.0, "accuracy/level_2": 0.5}


def test_math_verify_hang_is_a_counted_timeout_and_scoring_continues(task):
    # sympy evaluates the power tower in C: only killing the worker process stops it. Against
    # an expression gold it is compared (and hangs); against a number it is refused at once, as
    # an expression where MATH wants a simplified number (`simplified_enough`)
    examples = task.load("test")
    expression = {"problem": "Simplify $\\sqrt{242}$.", "answer": "11\\sqrt{2}"}
    completions = ["\\boxed{9^{9^{9^{9}}}}", "\\boxed{2}", "\\boxed{\\frac12}",
                   "\\boxed{9^{9^{9^{9}}}}"]  # fmt: skip
    chosen = [expression, examples[1], examples[0], examples[1]]
    res = score_completions(task, completions, chosen, timeout_s=2)
    assert res.timeouts == 1 and res.rewards == [0.0, 1.0, 1.0, 0.0]
    assert "timeout after 2 s" in res.error_messages[0]


def test_unparsable_gold_is_an_error_not_a_crash(task):
    bad = {"problem": "?", "answer": " "}
    res = score_completions(task, ["\\boxed{1}"], [bad], timeout_s=10)
    assert res.rewards == [0.0] and res.errors == 1
    assert "could not parse the gold answer" in res.error_messages[0]


@needs_data
def test_real_math500_gold_answers_verify_against_themselves():
    task = get_task("math", data=str(DATA / "math500"))
    examples = task.load("test")
    assert len(examples) == 500
    subset = examples[:40]
    res = score_completions(
        task, [f"The answer is $\\boxed{{{e['answer']}}}$." for e in subset], subset, timeout_s=10
    )
    assert res.rewards == [1.0] * len(subset)
    refs = [task.reference(e) for e in subset]
    assert score_completions(task, refs, subset, timeout_s=10).rewards == [1.0] * len(subset)


def _nest(depth):
    text = "2"
    for _ in range(depth):
        text = "\\frac{1}{" + text + "}"
    return text  # 1/2 for an odd depth


def test_deeply_nested_answers_are_counted_errors_not_scored_or_timed_out(task):
    """150 nested \\frac (= 1/2) scored 1.0 after seconds of sympy; now it is refused before
    math-verify: an error, reward 0, no timeout. A shallow nesting of the same number still
    scores 1 (the cap is far above MATH-500's answers, which nest at most 2 deep); three nested
    \\frac are parsed and scored 0 (an expression, not the simplified number MATH asks for)."""
    from pgrpo.tasks.math500 import MAX_NESTING

    gold = task.load("test")[0]  # 1/2
    completions = [f"$\\boxed{{{_nest(151)}}}$", "$\\boxed{((\\frac{1}{2}))}$", "(" * 5000 + "1",
                   f"$\\boxed{{{_nest(3)}}}$"]  # fmt: skip
    res = score_completions(task, completions, [gold] * 4, timeout_s=10.0)
    assert res.rewards == [0.0, 1.0, 0.0, 0.0]
    assert res.errors == 2 and res.timeouts == 0
    assert f"over the cap of {MAX_NESTING}" in res.error_messages[0]
    assert res.seconds < 8


# Percentages and two boxes with one answer scored 0 where math-verify alone gives 1 (review
# 2026-12-04): `simplified_enough` took the parsed 10 * (1/100) and {639/40} for expressions.
@pytest.mark.parametrize(
    ("gold", "completion", "reward"),
    [
        ("10", "\\boxed{10\\%}", 1.0),  # was 0
        ("10", "Thus the area decreased by $\\boxed{10}$ percent.", 1.0),  # was 0
        ("0.1", "\\boxed{10\\%}", 1.0),  # math-verify: X% equals X and X/100; was 0
        ("1000", "\\boxed{10\\%}", 0.0),
        ("10", "\\boxed{(5+5)\\%}", 0.0),  # still an expression, not the number
        ("\\frac{639}{40}", "$\\boxed{15\\frac{39}{40}}$, or $\\boxed{\\frac{639}{40}}$", 1.0),
        ("5", "\\boxed{5} or \\boxed{3}", 0.0),
        ("5", "\\boxed{2+3} or \\boxed{5}", 0.0),
    ],
)
def test_percentages_and_repeated_boxes_follow_math_verify(task, gold, completion, reward):
    assert task.reward(completion, {"problem": "Compute it.", "answer": gold}) == reward


# A numeral written as text parses as a symbol named by it (math-verify accepts it for the
# number); `simplified_enough` read that symbol as an expression and scored 0 (until session 38).
@pytest.mark.parametrize(
    ("gold", "completion", "reward"),
    [
        ("3", "\\boxed{\\text{3}}", 1.0),  # was 0
        ("3", "\\boxed{\\mathrm{3}}", 1.0),  # was 0
        ("3", "\\boxed{\\textbf{3}}", 1.0),  # was 0
        ("12", "\\boxed{\\text{12}}", 1.0),
        ("3", "\\boxed{\\text{4}}", 0.0),
        ("3", "\\boxed{\\text{x}}", 0.0),
        ("7", "\\boxed{\\text{3+4}}", 0.0),  # an expression in text is still not the number
        ("\\frac{1}{2}", "\\boxed{\\text{1/2}}", 1.0),  # was 0
    ],
)
def test_a_numeral_in_text_is_a_number(task, gold, completion, reward):
    assert task.reward(completion, {"problem": "Compute it.", "answer": gold}) == reward


def test_only_a_numeral_named_symbol_passes_the_simplified_gate():
    """math-verify's verify rejects most symbols for a numeric gold by their name alone, so the
    gate itself is checked here: a symbol named by a numeral is a number, one named by an
    expression, a word or a non-ASCII digit is not."""
    from sympy import Symbol

    from pgrpo.tasks.math500 import _is_number

    for name in ("3", "-2.5", ".5", "1/2", "18."):
        assert _is_number(Symbol(name)), name
    for name in ("3+4", "x", "3 cm", "\u0663", "1/2/3", "", "3^2"):
        assert not _is_number(Symbol(name)), name


@needs_data
def test_real_math500_reference_solutions_with_percent_and_two_boxes_score_one():
    task = get_task("math", data=str(DATA / "math500"))
    ids = {"test/prealgebra/1233.json", "test/number_theory/459.json"}  # both scored 0
    examples = [e for e in task.load("test") if e["unique_id"] in ids]
    res = score_completions(task, [e["solution"] for e in examples], examples, timeout_s=10)
    assert res.rewards == [1.0, 1.0]
