"""GSM8K: answer extraction on tricky strings, loading (files, folders, Hub fallback), failures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgrpo.errors import UserError
from pgrpo.tasks import get_task, score_completions
from pgrpo.tasks.answers import extract_final_number, numbers_equal
from pgrpo.tasks.gsm8k import gold_answer

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
needs_data = pytest.mark.skipif(not (DATA / "gsm8k").is_dir(), reason="shared/data absent")


@pytest.mark.parametrize(
    "text, number",
    [
        ("She has 1,234 apples.", "1234"),
        ("It costs $18.", "18"),
        ("The total is $1,200.50 today", "1200.50"),
        ("The answer is 18.00", "18.00"),
        ("So the answer is -5.", "-5"),
        ("8-3=5", "5"),
        ("\\boxed{42} and later 7", "42"),
        ("first \\boxed{1} then \\boxed{ 2 }", "2"),
        ("\\boxed{\\frac{3}{4}}", "0.75"),
        ("The answer is: 7 apples, not 9", "7"),
        ("The final answer is 3. I checked it with 2 methods", "3"),
        ("Step 1: 2 + 2 = 4\n#### 4", "4"),
        ("#### 1,000\n", "1000"),
        ("I think it is 12 or 13", "13"),
        ("x = 3.5.", "3.5"),
        ("values 1,2,3", "3"),
        ("Temperature was \u22123 degrees", "-3"),
        ("no digits here", None),
        ("", None),
    ],
)
def test_extract_final_number(text, number):
    assert extract_final_number(text) == number


def test_numbers_equal_is_exact_decimal():
    assert numbers_equal("18.00", "18") and numbers_equal("1200", "1,200")
    assert numbers_equal("-5", -5) and numbers_equal(".5", "0.5")
    assert not numbers_equal("18.01", "18") and not numbers_equal(None, "1")
    assert not numbers_equal("abc", "1")


def _write(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


ROWS = [
    {"question": "2 + 2?", "answer": "2 + 2 = <<2+2=4>>4\n#### 4"},
    {"question": "Debt?", "answer": "She owes it.\n#### -1,500"},
]


def test_reward_prompt_and_metrics_on_a_local_file(tmp_path):
    task = get_task("gsm8k", data=str(_write(tmp_path / "test.jsonl", ROWS)))
    examples = task.load("test")
    assert examples == ROWS  # the dataset's own fields
    assert gold_answer(examples[1]) == "-1500"
    prompt = task.prompt(examples[0])
    assert prompt.startswith("2 + 2?\n") and "The answer is" in prompt
    completions = ["2 + 2 = 4. The answer is 4.", "The answer is -$1,500.00", "", "I owe 1500"]
    res = score_completions(task, completions, examples * 2)
    assert res.rewards == [1.0, 1.0, 0.0, 0.0] and res.errors == 0
    m = task.metrics(completions, examples * 2, res.rewards)
    assert m == {"accuracy": 0.5, "answer_rate": 0.75}


def test_load_accepts_folder_with_split_files_and_file_paths(tmp_path):
    _write(tmp_path / "train.jsonl", ROWS[:1])
    _write(tmp_path / "test.jsonl", ROWS)
    task = get_task("gsm8k", data=str(tmp_path))
    assert len(task.load("train")) == 1 and len(task.load("test")) == 2
    assert len(get_task("gsm8k").load(str(tmp_path / "test.jsonl"))) == 2


def test_missing_file_names_the_path_and_the_fix(tmp_path):
    missing = tmp_path / "nope" / "test.jsonl"
    with pytest.raises(FileNotFoundError, match="nope/test.jsonl.*Pass an existing JSONL"):
        get_task("gsm8k").load(str(missing))
    with pytest.raises(FileNotFoundError, match=r"no gsm8k file for split 'dev'.*dev\.jsonl"):
        get_task("gsm8k", data=str(tmp_path)).load("dev")
    with pytest.raises(ValueError, match="is a folder: pass a split name"):
        get_task("gsm8k").load(str(tmp_path))


def test_malformed_line_reports_file_and_line_number(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n\n" + '{"question": "x", "answer": \n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:3: malformed JSON"):
        get_task("gsm8k").load(str(path))
    _write(path, [{"question": "no answer field"}])
    with pytest.raises(ValueError, match=r"bad\.jsonl:1: missing field\(s\) answer"):
        get_task("gsm8k").load(str(path))
    _write(path, [{"question": "q", "answer": "no marker"}])
    with pytest.raises(ValueError, match="no '####' marker"):
        get_task("gsm8k").load(str(path))
    path.write_text("[1, 2]\n")
    with pytest.raises(ValueError, match="expected a JSON object"):
        get_task("gsm8k").load(str(path))


def test_hub_failure_says_to_pass_a_local_path(monkeypatch):
    import datasets

    calls = []

    def offline(name, config=None, split=None, **kw):
        calls.append((name, config, split))
        raise ConnectionError("no internet")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(UserError, match="Offline\\? Pass a local path") as info:
        get_task("gsm8k").load("test")
    assert "openai/gsm8k" in str(info.value) and calls == [("openai/gsm8k", "main", "test")]


def test_hub_rows_are_used_when_available(monkeypatch):
    import datasets

    monkeypatch.setattr(datasets, "load_dataset", lambda name, config=None, split=None: ROWS)
    assert get_task("gsm8k").load("test") == ROWS


@needs_data
def test_every_reference_solution_scores_one_on_the_real_test_set():
    task = get_task("gsm8k", data=str(DATA / "gsm8k"))
    examples = task.load("test")
    assert len(examples) == 1319
    res = score_completions(task, [e["answer"] for e in examples], examples)
    assert res.rewards == [1.0] * 1319 and res.errors == res.timeouts == 0
    short = [task.reference(e) for e in examples]
    assert score_completions(task, short, examples).rewards == [1.0] * 1319
    # a solution that stops before its final line scores 0 on most problems
    truncated = [e["answer"].rsplit("####", 1)[0] + " The answer is 0.5" for e in examples]
    assert sum(score_completions(task, truncated, examples).rewards) == 0.0


@settings(max_examples=300, deadline=None)
@given(
    st.integers(-(10**9), 10**9),
    st.sampled_from(["{}", "${}", "{:,}", "${:,}", "{}.00", "\\boxed{{{}}}"]),
    st.sampled_from(["The answer is {}.", "So we get {}", "#### {}", "Total: {} dollars."]),
    st.sampled_from(["", "First 3 + 4 = 7 and 12 - 2 = 10. ", "Step 1, 2, 3. "]),
)
def test_final_number_survives_formatting(value, number_fmt, sentence, preamble):
    formatted = number_fmt.format(value)
    if formatted.startswith("$-"):  # written "-$5" in practice
        formatted = "-$" + formatted[2:]
    text = preamble + sentence.format(formatted)
    assert numbers_equal(extract_final_number(text), value), text


def test_data_option_as_a_single_file_serves_every_split(tmp_path):
    path = _write(tmp_path / "mine.jsonl", ROWS)
    task = get_task("gsm8k", data=str(path))
    assert task.load("train") == task.load("test") == ROWS
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        get_task("gsm8k", data=str(tmp_path / "missing.jsonl")).load("test")


def test_math_and_ifeval_hub_fallbacks_name_their_datasets(monkeypatch):
    import datasets

    def offline(name, config=None, split=None, **kw):
        raise ConnectionError("no internet")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(UserError, match="HuggingFaceH4/MATH-500.*Pass a local path"):
        get_task("math").load("test")
    with pytest.raises(UserError, match="google/IFEval.*Pass a local path"):
        get_task("ifeval").load("test")


# A numbered markdown heading was read as GSM8K's '####' answer marker (review 2026-12-04):
# "#### 1. Eggs sold ... #### 2. Money ... The answer is 18." extracted 2.
@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("#### 1. Eggs sold\n9 eggs.\n#### 2. Money\n9 * 2 = 18\nThe answer is 18.", "18"),
        ("#### 2) Final\nShe makes 9 * 2 = 18 dollars.", "18"),
        ("#### 3: Total\nThe answer is 18", "18"),
        ("#### 18.", "18"),
        ("#### 18 dollars\n", "18"),
        ("#### **18**", "18"),
        ("#### 18\nI hope this helps with your 2 questions.", "18"),
    ],
)
def test_hash_marker_is_a_number_ending_its_line(text, number):
    assert extract_final_number(text) == number


_TITLE = st.from_regex(r"[A-Z][a-z]{1,8}( [A-Za-z]{1,8}){0,2}", fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 20), st.sampled_from([".", ")", ":"]), _TITLE), max_size=4),
    st.integers(-(10**6), 10**6),
    st.sampled_from(["The answer is {}.", "#### {}", "\\boxed{{{}}}", "Answer: {}"]),
)
def test_numbered_headings_never_outrank_the_answer(headings, value, answer_fmt):
    body = "".join(
        f"#### {n}{mark} {title}\nSome work: 3 + 4 = 7.\n" for n, mark, title in headings
    )
    assert numbers_equal(extract_final_number(body + answer_fmt.format(value)), value)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(-(10**6), 10**6),
    st.sampled_from(["", ".", " dollars", " %", "  "]),
    st.sampled_from(["", "\nHope this helps: 2 more checks.", "\n#### 1. Check\n3 + 4 = 7"]),
)
def test_the_last_hash_answer_line_wins(value, suffix, after):
    text = f"Work: 1 + 2 = 3.\n#### {value}{suffix}{after}"
    assert numbers_equal(extract_final_number(text), value), text
