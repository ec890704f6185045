"""The built-in `arithmetic` task: generator, splits, reward, format reward, metrics."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pgrpo
from pgrpo.tasks.arithmetic import LEVELS, ArithmeticTask, _evaluate, split_of


def test_registered_and_default_options():
    task = pgrpo.get_task("arithmetic")
    assert isinstance(task, pgrpo.tasks.Task)
    assert task.levels == tuple(LEVELS) and task.reward_is_fast
    assert len(task.load("train")) == 1000 and len(task.load("test")) == 200


def test_deterministic_and_seeded():
    a = ArithmeticTask(n=200, seed=3).load("train")
    assert a == ArithmeticTask(n=200, seed=3).load("train")
    assert a != ArithmeticTask(n=200, seed=4).load("train")


def test_train_and_test_are_disjoint_for_any_seed():
    for seed in range(3):
        task = ArithmeticTask(n=600, n_test=300, seed=seed)
        train = {e["expression"] for e in task.load("train")}
        test = {e["expression"] for e in task.load("test")}
        assert train and test and not train & test
        assert all(split_of(x) == "test" for x in test)


def test_levels_in_equal_shares_and_answers_match_python():
    examples = ArithmeticTask(n=600).load("train")
    counts = {lv: sum(e["level"] == lv for e in examples) for lv in LEVELS}
    assert counts == {lv: 100 for lv in LEVELS}
    for e in examples:
        assert e["answer"] == eval(e["expression"])  # equivalence with Python's precedence
    level1 = [e for e in examples if e["level"] == 1]
    assert all(len(e["expression"]) == 5 and "+" in e["expression"] for e in level1)
    assert any(e["answer"] >= 1000 for e in examples if e["level"] == 6)
    task = ArithmeticTask()
    assert all(task.reward(task.reference(e), e) == 1.0 for e in examples)


def test_test_split_prefers_distinct_problems():
    test = ArithmeticTask(n_test=60, levels=[3]).load("test")
    assert len({e["expression"] for e in test}) == 60
    # level 1 has only ~20 test problems: they repeat instead of failing
    small = ArithmeticTask(n_test=50, levels=[1]).load("test")
    assert len(small) == 50 and len({e["expression"] for e in small}) < 50


def test_prompt_asks_for_the_number_only():
    task = ArithmeticTask()
    ex = {"expression": "7 + 5", "answer": 12, "level": 1}
    assert task.prompt(ex) == "What is 7 + 5? Answer with the number only."


@pytest.mark.parametrize(
    "completion, reward",
    [
        ("12", 1.0),
        (" 12.", 1.0),
        ("7 + 5 = 12", 1.0),
        ("The answer is 12.", 1.0),
        ("\\boxed{12}", 1.0),
        ("12.0", 1.0),
        ("13", 0.0),
        ("", 0.0),
        ("twelve", 0.0),
        ("12, because 5 + 7", 0.0),  # the last number is taken: rambling after the answer fails
        ("12, because 7 + 5", 1.0),  # ... but the question restated is not read (was 0)
    ],
)
def test_exact_numeric_reward(completion, reward):
    assert ArithmeticTask().reward(completion, {"expression": "7 + 5", "answer": 12}) == reward


def test_format_reward_mixes_and_stays_in_unit_interval():
    task = ArithmeticTask(format_weight=0.2)
    ex = {"expression": "7 + 5", "answer": 12, "level": 1}
    assert task.reward("12", ex) == pytest.approx(1.0)
    assert task.reward("The answer is 12", ex) == pytest.approx(0.8)
    assert task.reward("13", ex) == pytest.approx(0.2)
    assert task.reward("I do not know", ex) == 0.0


def test_metrics_accuracy_per_level():
    task = ArithmeticTask()
    examples = [
        {"expression": "1 + 1", "answer": 2, "level": 1},
        {"expression": "2 + 2", "answer": 4, "level": 1},
        {"expression": "11 * 11", "answer": 121, "level": 6},
    ]
    completions = ["2", "5", "The answer is 121"]
    rewards = [task.reward(c, e) for c, e in zip(completions, examples, strict=True)]
    m = task.metrics(completions, examples, rewards)
    assert m == {
        "accuracy": pytest.approx(2 / 3),
        "format_rate": pytest.approx(2 / 3),
        "accuracy/level_1": 0.5,
        "accuracy/level_6": 1.0,
    }


def test_bad_options_fail_clearly():
    with pytest.raises(ValueError, match="levels"):
        ArithmeticTask(levels=[0, 7])
    with pytest.raises(ValueError, match="format_weight"):
        ArithmeticTask(format_weight=1.5)
    with pytest.raises(ValueError, match="n and n_test"):
        ArithmeticTask(n=0)
    with pytest.raises(ValueError, match="no file to load"):
        ArithmeticTask().load("validation")
    assert ArithmeticTask(levels="1, 2").levels == (1, 2)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**6), st.integers(0, 10**6), st.sampled_from(["+", "-", "*"]))
def test_evaluate_matches_python_and_reward_accepts_the_true_answer(a, b, op):
    expression = f"{a} {op} {b}"
    value = eval(expression)
    assert _evaluate(expression) == value
    ex = {"expression": expression, "answer": value, "level": 1}
    assert ArithmeticTask().reward(f"{value:,}" if value > 0 else str(value), ex) == 1.0
    assert ArithmeticTask().reward(str(value + 1), ex) == 0.0
