"""A user-defined task in a few lines, without touching pgrpo's code.

    python docs/examples/custom_task.py

Defines a dataset, a prompt and a reward as plain top-level functions (so the task can be pickled
into pgrpo's reward worker process, where each call gets a real timeout), registers them as the
task "letter_count", and scores a few completions the way the trainer does.
"""

from __future__ import annotations

import pgrpo
from pgrpo.tasks import register_task, score_completions

WORDS = ["apple", "river", "stone", "cloud", "tiger", "lemon", "banana", "orange"]


def load(split: str) -> list[dict]:
    """`task.load(split)`: a list of example dicts (any fields you like)."""
    words = WORDS[:6] if split == "train" else WORDS[6:]
    return [{"word": w, "length": len(w)} for w in words]


def prompt(example: dict) -> str:
    """The user message; the trainer applies the model's chat template."""
    return f"How many letters are in the word '{example['word']}'? Answer with the number only."


def reward(completion: str, example: dict) -> float:
    """1.0 for the right count. May raise or hang: score_completions contains it."""
    if completion.strip() == "hang":
        while True:  # a buggy reward: the worker is killed after the timeout
            pass
    return float(completion.strip().rstrip(".") == str(example["length"]))


if __name__ == "__main__":  # needed: the reward worker process imports this file
    register_task("letter_count", examples=load, prompt=prompt, reward=reward)
    task = pgrpo.get_task("letter_count")
    examples = task.load("test")
    print(task.prompt(examples[0]))
    completions = ["6", "hang"]
    result = score_completions(task, completions, examples, timeout_s=2.0)
    print("rewards", result.rewards, "errors", result.errors, "timeouts", result.timeouts)
    print(
        "isolation",
        result.isolation,
        "metrics",
        task.metrics(completions, examples, result.rewards),
    )
