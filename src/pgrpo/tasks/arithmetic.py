"""`arithmetic`: the trainer's default task, generated in code (no data files).

Difficulty levels, chosen so that a group of prompts spans easy to impossible for a 135M model
(SmolLM2-135M-Instruct gets roughly 0.16 on single-digit additions with 32 new tokens):

    1  single-digit addition          7 + 5
    2  two-digit +/- one-digit        47 - 8
    3  two-digit +/- two-digit        47 + 38    (differences are non-negative)
    4  single-digit multiplication    7 * 8
    5  three terms, precedence        3 + 4 * 5  or  6 * 7 - 9
    6  two-digit multiplication       47 * 38

Splits: every problem (its expression string) belongs to exactly one split by a stable hash
(crc32 % 5 == 0 -> "test", about 20%), so `load("train")` and `load("test")` are disjoint for any
seed; each split is drawn with its own seeded generator, levels in equal shares, shuffled.
The test split holds distinct problems while a level's test pool allows (level 1 has only ~20
test problems: then they repeat; `pgrpo eval` evaluates a repeated problem once, its id being the
expression: `problem_id`).

Reward: 1.0 when the final number of the completion (see `pgrpo.tasks.answers`: \\boxed{},
"answer is", else the last number) equals the answer exactly. With `format_weight` w > 0 the
reward is (1 - w) * correct + w * bare, where bare = the completion is only a number, so it stays
in [0, 1]. `correct` is the first term alone: what `pgrpo eval` counts, whatever the weight.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence
from typing import Any

from pgrpo.tasks.answers import (
    extract_final_number,
    is_bare_number,
    numbers_equal,
    without_prompt,
)
from pgrpo.tasks.base import TASKS

LEVELS = {
    1: "single-digit addition",
    2: "two-digit +/- one-digit",
    3: "two-digit +/- two-digit",
    4: "single-digit multiplication",
    5: "three terms with precedence",
    6: "two-digit multiplication",
}
SPLITS = ("train", "test")
PROMPT = "What is {expression}? Answer with the number only."


def _operands(level: int, rng: random.Random) -> str:
    """One random expression of the given level, as text with spaces around operators."""
    r = rng.randint
    if level == 1:
        return f"{r(0, 9)} + {r(0, 9)}"
    if level == 2:
        return f"{r(10, 99)} {rng.choice('+-')} {r(0, 9)}"
    if level == 3:
        a, b = r(10, 99), r(10, 99)
        op = rng.choice("+-")
        return f"{max(a, b)} - {min(a, b)}" if op == "-" else f"{a} + {b}"
    if level == 4:
        return f"{r(2, 9)} * {r(2, 9)}"
    if level == 5:
        if rng.random() < 0.5:
            return f"{r(1, 9)} + {r(2, 9)} * {r(2, 9)}"
        return f"{r(2, 9)} * {r(2, 9)} - {r(1, 9)}"
    if level == 6:
        return f"{r(10, 99)} * {r(10, 99)}"
    raise ValueError(f"unknown arithmetic level {level}; valid levels: {sorted(LEVELS)}")


def _evaluate(expression: str) -> int:
    """Integer value of an expression made of ints and + - * (standard precedence)."""
    terms, sign, product = 0, 1, None
    tokens = expression.split()
    i = 0
    while i < len(tokens):
        value = int(tokens[i])
        product = value if product is None else product * value
        op = tokens[i + 1] if i + 1 < len(tokens) else "+"
        if op != "*":
            terms += sign * product
            sign, product = (1 if op == "+" else -1), None
        i += 2
    return terms


def split_of(expression: str) -> str:
    """The split a problem belongs to (stable across runs, machines and seeds)."""
    return "test" if zlib.crc32(expression.encode()) % 5 == 0 else "train"


class ArithmeticTask:
    """Seeded arithmetic problems with difficulty levels; see the module docstring.

    Options: `n` train examples (default 1000), `n_test` test examples (default 200), `levels`
    (default all six), `seed` (default 0), `format_weight` in [0, 1] (default 0).
    """

    name = "arithmetic"
    reward_range = (0.0, 1.0)
    reward_is_fast = True
    reward_only_options = ("format_weight",)
    """Options that change the reward alone: `load` and `correct` never read format_weight, so
    evaluations that differ only in it are of the same problems, graded alike (`pgrpo eval
    --baseline` compares them, with a note)."""

    def __init__(
        self,
        n: int = 1000,
        n_test: int = 200,
        levels: Sequence[int] = tuple(LEVELS),
        seed: int = 0,
        format_weight: float = 0.0,
    ) -> None:
        if isinstance(levels, int):
            levels = (levels,)
        elif isinstance(levels, str):  # "1,2,3" from a command line
            levels = tuple(int(x) for x in levels.replace(" ", "").split(",") if x)
        bad = [lv for lv in levels if lv not in LEVELS]
        if bad or not levels:
            raise ValueError(f"arithmetic levels must be a non-empty subset of {sorted(LEVELS)}")
        if n < 1 or n_test < 1:
            raise ValueError(f"n and n_test must be >= 1, got n={n}, n_test={n_test}")
        if not 0.0 <= format_weight <= 1.0:
            raise ValueError(f"format_weight must be in [0, 1], got {format_weight}")
        self.n, self.n_test, self.seed = int(n), int(n_test), int(seed)
        self.levels = tuple(sorted(set(int(lv) for lv in levels)))
        self.format_weight = float(format_weight)

    def load(self, split_or_path: str) -> list[dict[str, Any]]:
        if split_or_path not in SPLITS:
            raise ValueError(
                f"arithmetic has splits {SPLITS}, got {split_or_path!r} (it generates its problems "
                "in code; there is no file to load)"
            )
        split = split_or_path
        n = self.n if split == "train" else self.n_test
        rng = random.Random(f"pgrpo-arithmetic-{split}-{self.seed}")
        seen: set[str] = set()
        out = []
        for k in range(n):
            level = self.levels[k % len(self.levels)]
            for attempt in range(200):
                expression = _operands(level, rng)
                fresh = split == "train" or expression not in seen or attempt >= 100
                if split_of(expression) == split and fresh:
                    break
            else:  # pragma: no cover - every level has problems in both splits
                raise RuntimeError(f"could not draw a {split} problem at level {level}")
            seen.add(expression)
            out.append({"expression": expression, "answer": _evaluate(expression), "level": level})
        rng.shuffle(out)
        return out

    def prompt(self, example: dict[str, Any]) -> str:
        return PROMPT.format(expression=example["expression"])

    def reference(self, example: dict[str, Any]) -> str:
        """A completion that earns the full reward (the tiny model's supervised warm-up)."""
        return str(example["answer"])

    def problem_id(self, example: dict[str, Any]) -> str:
        """The expression: a problem the split holds twice is one problem."""
        return str(example["expression"])

    def correct(self, completion: str, example: dict[str, Any]) -> bool:
        """The final number equals the answer (the reward without its format share)."""
        answer = extract_final_number(without_prompt(completion, self.prompt, example))
        return numbers_equal(answer, example["answer"])

    def reward(self, completion: str, example: dict[str, Any]) -> float:
        correct = float(self.correct(completion, example))
        if self.format_weight == 0.0:
            return correct
        w = self.format_weight
        return (1.0 - w) * correct + w * float(is_bare_number(completion))

    def metrics(
        self,
        completions: Sequence[str],
        examples: Sequence[dict[str, Any]],
        rewards: Sequence[float],
    ) -> dict[str, float]:
        """`accuracy`, `format_rate` and `accuracy/level_<k>` for each level present."""
        hits = [self.correct(c, e) for c, e in zip(completions, examples, strict=True)]
        out: dict[str, float] = {
            "accuracy": sum(hits) / len(hits) if hits else 0.0,
            "format_rate": sum(map(is_bare_number, completions)) / max(len(completions), 1),
        }
        for level in sorted({e["level"] for e in examples}):
            level_hits = [h for h, e in zip(hits, examples, strict=True) if e["level"] == level]
            out[f"accuracy/level_{level}"] = sum(level_hits) / len(level_hits)
        return out


TASKS.add("arithmetic", ArithmeticTask)
