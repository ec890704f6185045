"""`math`: MATH-500 style problems (`problem`, `answer`), binary reward by math-verify equivalence.

    task = get_task("math", data="data/math500")   # folder with test.jsonl
    task.reward("... so the answer is $\\boxed{\\frac{1}{2}}$", {"answer": "0.5", ...})  # 1.0

The gold `answer` is parsed as LaTeX (`$answer$`); the completion with math-verify's default
extraction (the last \\boxed{} first, then LaTeX and plain expressions). math-verify's own
signal-based timeouts are disabled here (they only work in the main thread): the timeout comes from
`pgrpo.tasks.scoring.score_completions`, which runs this task in a worker process that it kills on a
timeout. math-verify can hang in C code on pathological input (e.g. `\\boxed{9^{9^{9^{9}}}}`, a
power tower sympy tries to evaluate): only that process kill stops it, so call `task.reward`
through `score_completions`, not directly, on untrusted completions. Before math-verify a
completion loses every restatement of the problem (`answers.without_prompt`), has its LaTeX
thousands separators read as commas (`10\\,080` parsed as 90), is cut to its last `MAX_CHARS`
characters and refused (a counted error, reward 0) when nested more than `MAX_NESTING` brackets
deep; a numeric gold answer needs a number (a literal, `x = 5`, a percentage `10\\%`, a set
of those), not an expression that evaluates to it (`simplified_enough`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pgrpo.tasks.answers import normalise_separators, without_prompt
from pgrpo.tasks.base import TASKS
from pgrpo.tasks.data import load_examples

PROMPT = "{problem}\nGive the final answer in \\boxed{{}}."
MAX_NESTING = 24
"""Deepest bracket nesting ({[( together) math-verify is asked to parse; MATH-500's gold answers
reach 2 and its reference solutions 7. Deeper input makes sympy recurse for seconds (or hang):
it raises, so it is counted as a reward error and scores 0, instead of timing out."""
MAX_CHARS = 20_000
"""A completion is parsed on its last 20,000 characters (the final answer is at the end)."""


def _nesting(text: str) -> int:
    """Maximum depth of nested brackets in `text` (unbalanced closers are ignored)."""
    depth = deepest = 0
    for ch in text:
        if ch in "{[(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "}])" and depth:
            depth -= 1
    return deepest


def bounded(text: str) -> str:
    """`text` cut to its last MAX_CHARS characters; ValueError when nested deeper than
    MAX_NESTING (the caps that keep math-verify from recursing for seconds)."""
    text = text[-MAX_CHARS:]
    depth = _nesting(text)
    if depth > MAX_NESTING:
        raise ValueError(
            f"answer nested {depth} brackets deep, over the cap of {MAX_NESTING}: not parsed"
        )
    return text


def simplified_enough(gold: Any, predicted: Any, latex: str = "") -> bool:
    """MATH wants simplified answers: when the gold answer is a number, so must the prediction
    be (a number literal, `x = <number>`, a percentage: `_is_number`), not an expression that
    evaluates to it.
    math-verify compares values, so `\\boxed{99^2+99+1}` and a completion that only restated
    the problem (`Compute $99^2+99+1$`, its last expression) scored 1 on 32 of the 500 problems.
    gold, predicted: math-verify's parsed (unevaluated) sympy objects; latex: the prediction's
    extracted text, which must use no command but a fraction's, brackets and text (the parser
    evaluates `\\dbinom{31}{28}` to 4495 itself)."""
    if not getattr(gold, "is_Number", False) or getattr(gold, "is_infinite", False):
        # an expression, an interval, a set, text, an infinity (sympy's oo is a Number, and
        # the reference's own `\\boxed{\\infty}` scored 0: a review, session 36): math-verify
        return True
    return _is_number(predicted) and set(_COMMAND.findall(str(latex))) <= _NUMBER_COMMANDS


def _is_number(value: Any) -> bool:
    """A number literal as math-verify parses one: a Number, `x = <number>`, a percentage
    (`10\\%` and "10 percent" parse as 10 * UnevaluatedExpr(1/100); math-verify then accepts it
    for gold 10 and for gold 0.1, so do we), or a set of those (two boxes with one answer,
    `\\boxed{15\\frac{39}{40}}` or `\\boxed{\\frac{639}{40}}`, parse as {639/40}), or a numeral
    in text (`\\text{3}`, a symbol named 3: `_NUMERAL`)."""
    if getattr(value, "is_Relational", False):
        value = value.rhs
    if getattr(value, "is_FiniteSet", False):
        return len(value.args) > 0 and all(_is_number(v) for v in value.args)
    if getattr(value, "is_Symbol", False):  # `\\text{3}`, `\\mathrm{3}`: a symbol named 3
        return _NUMERAL.fullmatch(value.name.strip()) is not None
    if getattr(value, "is_Mul", False) and len(value.args) == 2:
        from sympy import Rational, UnevaluatedExpr

        percent = UnevaluatedExpr(Rational(1, 100))
        rest = [a for a in value.args if a != percent]
        return len(rest) == 1 and getattr(rest[0], "is_Number", False)
    return bool(getattr(value, "is_Number", False))


_NUMERAL = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+|\d+/\d+)", re.ASCII)
"""A number written as text (a decimal or a fraction a/b, ASCII digits), which math-verify
parses as a symbol of that name: until session 38 `\\boxed{\\text{3}}` scored 0 for the gold
answer 3 and `\\boxed{\\text{1/2}}` for 1/2, which math-verify's own comparison accepts."""

_COMMAND = re.compile(r"\\([A-Za-z]+)")
_NUMBER_COMMANDS = {"frac", "dfrac", "tfrac", "left", "right", "text", "textbf", "mathrm",
                    "mbox", "circ", "degree", "displaystyle", "mathbf", "quad", "qquad",
                    "over"}  # fmt: skip
"""Commands a number may be written with: a fraction's, brackets, text and spacing (`{1 \\over
2}` and `\\quad 3` scored 0 before session 36)."""


@functools.lru_cache(maxsize=4096)
def _parse_gold(answer: str) -> list:
    from math_verify import parse

    return parse(f"${answer}$", parsing_timeout=None)


def _silence_timeout_warnings() -> None:
    """math-verify warns once that its timeouts are off; here the caller provides the timeout."""
    import math_verify.grader
    import math_verify.parser

    math_verify.grader.TIMEOUT_WARNING_SHOWN = True
    math_verify.parser.TIMEOUT_WARNING_SHOWN = True


class MathTask:
    """MATH-500. Options: `data` (folder with <split>.jsonl, a .jsonl file or a HF dataset name;
    default the Hub's "HuggingFaceH4/MATH-500"), `prompt_template` (with `{problem}`)."""

    name = "math"
    reward_range = (0.0, 1.0)
    reward_is_fast = False  # sympy can hang: scored in the reward worker process

    def __init__(self, data: str | Path | None = None, prompt_template: str = PROMPT) -> None:
        if "{problem}" not in prompt_template:
            raise ValueError("math prompt_template must contain '{problem}'")
        self.data = data
        self.prompt_template = prompt_template

    def prepare(self) -> None:
        """Import math-verify and sympy before the first timed call (the worker calls this)."""
        _silence_timeout_warnings()
        _parse_gold("1")

    def load(self, split_or_path: str) -> list[dict[str, Any]]:
        return load_examples(
            "math",
            self.data,
            split_or_path,
            file_names=lambda split: [f"{split}.jsonl"],
            hub=("HuggingFaceH4/MATH-500", None),
            required=("problem", "answer"),
        )

    def prompt(self, example: dict[str, Any]) -> str:
        return self.prompt_template.format(problem=example["problem"])

    def reference(self, example: dict[str, Any]) -> str:
        """A completion that earns reward 1 (the tiny model's supervised warm-up)."""
        return f"\\boxed{{{example['answer']}}}"

    def reward(self, completion: str, example: dict[str, Any]) -> float:
        from math_verify import parse, verify

        _silence_timeout_warnings()
        gold = _parse_gold(str(example["answer"]))
        if not gold:
            raise ValueError(f"math-verify could not parse the gold answer {example['answer']!r}")
        text = normalise_separators(without_prompt(completion, self.prompt, example))
        predicted = parse(bounded(text), parsing_timeout=None)
        if not predicted or not simplified_enough(gold[0], *predicted[:2]):
            return 0.0
        return float(verify(gold, predicted, timeout_seconds=None))

    def metrics(
        self,
        completions: Sequence[str],
        examples: Sequence[dict[str, Any]],
        rewards: Sequence[float],
    ) -> dict[str, float]:
        """`accuracy` and `accuracy/level_<k>` when examples carry MATH's `level` (1-5)."""
        out = {"accuracy": float(sum(rewards)) / max(len(rewards), 1)}
        levels = sorted({e["level"] for e in examples if "level" in e})
        for level in levels:
            rs = [r for r, e in zip(rewards, examples, strict=True) if e.get("level") == level]
            out[f"accuracy/level_{level}"] = float(sum(rs)) / len(rs)
        return out


TASKS.add("math", MathTask)
