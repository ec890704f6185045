"""Reward hacks and false negatives of the task rewards, counted on the real test sets.

    python bench/task_reward_checks.py                       # every check
    python bench/task_reward_checks.py --checks echo,solutions

Checks (docs/tasks.md quotes their output):
- `echo`: completions that only restate the question (GSM8K test, MATH-500, arithmetic level 1
  test split), in five forms; each count should be 0.
- `solutions`: reference solutions that must score 1 (GSM8K test gold solutions, as given and
  with "#### N" written "The answer is N."; the same after the question restated; MATH-500's
  reference solutions, alone and after the problem restated).
- `think`: IFEval prompt-level strict accuracy of responses that open with a `<think>` block,
  pgrpo against if-verifiable's own `evaluate_instructions`.
Prints a line per count and writes bench/results/task_reward_checks.json (the checks run).
Data: ../shared/data (gsm8k/test.jsonl, math500/test.jsonl, ifeval/input_data.jsonl). CPU only;
a few minutes (MATH-500 through math-verify dominates).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import re
import sys
from pathlib import Path

from pgrpo.tasks import get_task, score_completions

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
CHECKS = ("echo", "solutions", "think")
ROWS: list[dict] = []


def _row(check: str, task: str, form: str, count: str, note: str = "") -> None:
    ROWS.append({"check": check, "task": task, "form": form, "count": count, "note": note})
    print(f"{check:9} {task:15} {form:42} {count} {note}".rstrip(), flush=True)


def _last_sentence(text: str) -> str:
    return [p for p in re.split(r"(?<=[.?!])\s+", text.strip()) if p.strip()][-1]


ECHOES = {
    "the full prompt": lambda task, q, e: task.prompt(e),
    "the question": lambda task, q, e: q,
    "'Question: ' + question.rstrip('?. ')": lambda task, q, e: "Question: " + q.rstrip("?. "),
    "the question, whitespace as single spaces": lambda task, q, e: " ".join(q.split()),
    "its last sentence": lambda task, q, e: _last_sentence(q),
}


def _tasks():
    arithmetic = get_task("arithmetic", levels=[1])
    gsm8k = get_task("gsm8k", data=str(DATA / "gsm8k"))
    math = get_task("math", data=str(DATA / "math500"))
    yield "gsm8k", gsm8k, gsm8k.load("test"), lambda e: e["question"]
    yield "math", math, math.load("test"), lambda e: e["problem"]
    yield (
        "arithmetic [1]",
        arithmetic,
        arithmetic.load("test"),
        lambda e: f"What is {e['expression']}?",
    )


def _count(task, completions, examples) -> str:
    res = score_completions(task, completions, examples, timeout_s=10.0)
    extra = f" ({res.errors} errors, {res.timeouts} timeouts)" if res.errors + res.timeouts else ""
    return f"{sum(r > 0 for r in res.rewards)}/{len(examples)}{extra}"


def check_echo() -> None:
    for name, task, examples, question in _tasks():
        for form, echo in ECHOES.items():
            completions = [echo(task, question(e), e) for e in examples]
            _row("echo", name, form, _count(task, completions, examples), "scored > 0")


def check_solutions() -> None:
    gsm8k = get_task("gsm8k", data=str(DATA / "gsm8k"))
    examples = gsm8k.load("test")
    forms = {
        "gold solution": lambda e: e["answer"],
        "gold, 'The answer is N.'": lambda e: e["answer"].replace("#### ", "The answer is ") + ".",
        "question + gold solution": lambda e: e["question"] + "\n" + e["answer"],
    }
    for form, make in forms.items():
        completions = [make(e) for e in examples]
        _row("solutions", "gsm8k", form, _count(gsm8k, completions, examples), "scored 1")
    math = get_task("math", data=str(DATA / "math500"))
    examples = math.load("test")
    for form, make in {
        "reference solution": lambda e: e["solution"],
        "problem + reference solution": lambda e: e["problem"] + "\n" + e["solution"],
    }.items():
        res = score_completions(math, [make(e) for e in examples], examples, timeout_s=10.0)
        misses = [e["unique_id"] for e, r in zip(examples, res.rewards, strict=True) if r < 1]
        count = f"{sum(res.rewards):.0f}/{len(examples)}"
        _row("solutions", "math", form, count, f"scored 1; not: {', '.join(misses) or '-'}")


def check_think() -> None:
    from if_verifiable.common import evaluate_instructions

    from pgrpo.tasks.ifeval_checkers import use_offline_tokenizers

    registry = use_offline_tokenizers()
    task = get_task("ifeval", data=str(DATA / "ifeval"))
    examples = task.load("test")

    def think(e: dict) -> str:
        return "<think>Let me think, about this.</think>\n" + e["prompt"].lower().replace(",", "")

    ours = ref = 0
    for e in examples:
        response = think(e)
        ours += task.reward(response, e) >= 1.0
        _, scores = evaluate_instructions(
            response, e["instruction_id_list"], e["kwargs"], e["prompt"], registry
        )
        ref += bool(scores.binary_strict)
    form = "'<think>...</think>' + prompt lowercased, no commas"
    note = f"all constraints followed (strict); if-verifiable {ref}/{len(examples)}"
    _row("think", "ifeval", form, f"{ours}/{len(examples)}", note)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", default=",".join(CHECKS), help=f"any of {', '.join(CHECKS)}")
    args = parser.parse_args()
    for name in args.checks.split(","):
        if name not in CHECKS:
            parser.error(f"unknown check {name!r}; valid: {', '.join(CHECKS)}")
        globals()[f"check_{name}"]()
    meta = {
        "command": "python bench/task_reward_checks.py --checks " + args.checks,
        "date": dt.date.today().isoformat(),
        "machine": f"{platform.machine()} CPU, Python {sys.version.split()[0]}",
    }
    out = Path(__file__).resolve().parent / "results" / "task_reward_checks.json"
    out.write_text(json.dumps({"meta": meta, "rows": ROWS}, indent=1) + "\n")


if __name__ == "__main__":
    main()
