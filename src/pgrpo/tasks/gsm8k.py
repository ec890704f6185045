"""`gsm8k`: grade-school math word problems (Cobbe et al. 2021), binary exact-number reward.

    task = get_task("gsm8k", data="data/gsm8k")   # folder with test.jsonl/train.jsonl
    task.load("test")                 # or task.load("path/to/file.jsonl"); data=None: the HF Hub
    task.reward(completion, example)  # 1.0 iff the final number equals the gold answer

Examples keep the dataset's fields (`question`, `answer`); the gold number is what follows the last
`####` in `answer`. The model's number is extracted by `pgrpo.tasks.answers.extract_final_number`
(\\boxed{}, "####", "The answer is", else the last number; commas, "$" and "18.00" handled).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pgrpo.tasks.answers import extract_final_number, numbers_equal, without_prompt
from pgrpo.tasks.base import TASKS
from pgrpo.tasks.data import load_examples

PROMPT = (
    '{question}\nSolve the problem step by step, then give the final answer after "The answer is".'
)


def gold_answer(example: dict[str, Any]) -> str:
    """The gold number of a GSM8K example: the text after the last '####' in `answer`."""
    answer = str(example["answer"])
    if "####" not in answer:
        raise ValueError(
            f"GSM8K answer has no '####' marker: {answer[-80:]!r}; the gold number must follow "
            "'#### ' at the end of the answer field"
        )
    gold = answer.rsplit("####", 1)[1].strip().replace(",", "").replace("$", "")
    return gold


class GSM8KTask:
    """GSM8K. Options: `data` (folder with <split>.jsonl, a .jsonl file, or a HF dataset name;
    default the Hub's "openai/gsm8k" config "main"), `prompt_template` (with `{question}`)."""

    name = "gsm8k"
    reward_range = (0.0, 1.0)
    reward_is_fast = True

    def __init__(self, data: str | Path | None = None, prompt_template: str = PROMPT) -> None:
        if "{question}" not in prompt_template:
            raise ValueError("gsm8k prompt_template must contain '{question}'")
        self.data = data
        self.prompt_template = prompt_template

    def load(self, split_or_path: str) -> list[dict[str, Any]]:
        examples = load_examples(
            "gsm8k",
            self.data,
            split_or_path,
            file_names=lambda split: [f"{split}.jsonl"],
            hub=("openai/gsm8k", "main"),
            required=("question", "answer"),
        )
        for ex in examples:
            gold_answer(ex)  # fail at load time, not in the middle of training
        return examples

    def prompt(self, example: dict[str, Any]) -> str:
        return self.prompt_template.format(question=example["question"])

    def reference(self, example: dict[str, Any]) -> str:
        """A short completion that earns reward 1 (the tiny model's supervised warm-up)."""
        return f"The answer is {gold_answer(example)}."

    def reward(self, completion: str, example: dict[str, Any]) -> float:
        answer = extract_final_number(without_prompt(completion, self.prompt, example))
        return float(numbers_equal(answer, gold_answer(example)))

    def metrics(
        self,
        completions: Sequence[str],
        examples: Sequence[dict[str, Any]],
        rewards: Sequence[float],
    ) -> dict[str, float]:
        """`accuracy` (mean binary reward) and `answer_rate` (a number could be extracted)."""
        n = max(len(completions), 1)
        found = sum(extract_final_number(c) is not None for c in completions)
        return {"accuracy": float(sum(rewards)) / n, "answer_rate": found / n}


TASKS.add("gsm8k", GSM8KTask)
