"""`ifeval`: multi-constraint instruction following (IFEval prompts, reward = fraction met).

    task = get_task("ifeval", data="data/ifeval")  # folder with input_data.jsonl
    task.load("test")        # the 541 IFEval prompts (evaluation)
    task.load("generated")   # seeded multi-constraint training prompts (1-6 constraints each);
                             # "train" is the same (the IFEval prompts are for evaluation only)
    task.reward(response, example)      # fraction of the example's constraints followed
    task.num_constraints(example)       # C, for the dual_anchor advantage (`num_constraints=`)

Examples use IFEval's fields: `key`, `prompt`, `instruction_id_list`, `kwargs`. Constraints are
checked by if-verifiable's reference checkers on the response after its `<think>...</think>`
block, as the reference evaluator does (`loose=True`: the reference's loose variants), offline
(see `ifeval_checkers`). Empty response: 0. Unknown instruction ids count
as not followed (still in C) and are reported in `metrics` (`unknown_instruction_ids`).
Metrics: `ssr` = instruction-level accuracy (constraints followed / constraints), `hsr` =
prompt-level accuracy (all of a prompt's constraints followed), both from the rewards.

Generated prompts ("generated" split): a short writing request from `TOPICS`, plus 1-6 constraints
drawn without conflicts (the reference's `INSTRUCTION_CONFLICTS`, made symmetric) from the checker
registry, with kwargs drawn by the reference checkers themselves under a per-prompt seed; word
counts are capped at `max_words` so they fit a short generation, and "paragraph n must start with"
draws n <= the number of paragraphs (the reference's generator can ask for paragraph 3 of 2).
Prompt text = request + the checkers' own descriptions.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pgrpo.tasks.base import TASKS
from pgrpo.tasks.data import load_examples
from pgrpo.tasks.ifeval_checkers import (
    ConstraintCheck,
    check_response,
    seeded_global_random,
    use_offline_tokenizers,
)

TOPICS = (
    "Write a short poem about the sea.",
    "Describe your favorite food.",
    "Explain why the sky is blue.",
    "Write a short story about a lost cat.",
    "Give advice to a student starting university.",
    "Describe a busy market in the morning.",
    "Write a product description for a reusable water bottle.",
    "Explain how a bicycle works.",
    "Write a letter to a friend about your weekend.",
    "Summarize the benefits of regular exercise.",
    "Describe the life cycle of a butterfly.",
    "Write a short speech for a school graduation.",
    "Explain what a computer program is to a child.",
    "Write a review of an imaginary restaurant.",
    "Describe a walk through a forest in autumn.",
    "Give three tips for saving money.",
    "Write a short news report about a local festival.",
    "Explain why sleep is important.",
    "Describe your ideal holiday.",
    "Write a riddle and its answer.",
    "Explain how plants make food from sunlight.",
    "Write a short dialogue between a robot and a dog.",
    "Describe how to make a cup of tea.",
    "Write an invitation to a birthday party.",
    "Explain the rules of a simple game.",
    "Write a thank-you note to a teacher.",
    "Describe a city at night.",
    "Give reasons to learn a second language.",
    "Write a short fable with a moral.",
    "Explain what causes rain.",
)
# Not generated: they need a text the prompt does not contain or are never satisfiable alone.
_NOT_GENERATED = frozenset({"combination:repeat_prompt"})
GENERATED_SPLIT = "generated"


EXTRA_CONFLICTS = {
    "detectable_format:multiple_sections": {
        "change_case:english_lowercase",
        "change_case:english_capital",
    },
}
"""Pairs the reference's table misses that no response satisfies together: the sections
checker splits case-sensitively on its splitter ("SECTION" or "Section"), so an all-lowercase
response has no sections, and an all-capitals one none at a "Section" splitter (33 of 1,000
generated prompts could never be fully followed; a review, session 36)."""


def _conflicts() -> dict[str, set[str]]:
    """The reference conflict table with `EXTRA_CONFLICTS`, made symmetric (if A conflicts with
    B, B with A)."""
    from if_verifiable.ifeval.instructions_registry import INSTRUCTION_CONFLICTS

    table = {k: set(v) | {k} for k, v in INSTRUCTION_CONFLICTS.items()}
    for key, others in EXTRA_CONFLICTS.items():
        table.setdefault(key, {key}).update(others)
    for key, others in list(table.items()):
        for other in others:
            table.setdefault(other, {other}).add(key)
    return table


def generate_prompts(
    n: int,
    *,
    seed: int = 0,
    min_constraints: int = 1,
    max_constraints: int = 6,
    max_words: int = 150,
) -> list[dict[str, Any]]:
    """`n` seeded multi-constraint prompts in IFEval's fields (see the module docstring)."""
    if not 1 <= min_constraints <= max_constraints <= 6:
        raise ValueError(
            f"need 1 <= min_constraints <= max_constraints <= 6, got {min_constraints}, "
            f"{max_constraints}"
        )
    registry = use_offline_tokenizers()
    conflicts = _conflicts()
    ids = sorted(set(registry) - _NOT_GENERATED)
    out = []
    for i in range(n):
        rng = random.Random(f"pgrpo-ifeval-{seed}-{i}")
        topic = rng.choice(TOPICS)
        wanted = rng.randint(min_constraints, max_constraints)
        chosen: list[str] = []
        for candidate in rng.sample(ids, len(ids)):
            if len(chosen) == wanted:
                break
            if all(candidate not in conflicts.get(c, {c}) for c in chosen):
                chosen.append(candidate)
        descriptions, kwargs_list = [], []
        with seeded_global_random(rng.getrandbits(32)):
            for instruction_id in chosen:
                checker = registry[instruction_id](instruction_id)
                build: dict[str, Any] = {}
                if instruction_id == "length_constraints:number_words":
                    build["num_words"] = random.randint(10, max_words)
                elif instruction_id == "length_constraints:nth_paragraph_first_word":
                    # the reference draws nth in 1..num+1: paragraph num+1 of num is impossible
                    build["num_paragraphs"] = random.randint(1, 5)
                    build["nth_paragraph"] = random.randint(1, build["num_paragraphs"])
                descriptions.append(checker.build_description(**build))
                kwargs_list.append(copy.deepcopy(checker.get_instruction_args() or {}))
        out.append(
            {
                "key": f"gen-{seed}-{i}",
                "prompt": " ".join([topic, *descriptions]),
                "instruction_id_list": chosen,
                "kwargs": kwargs_list,
            }
        )
    return out


class IFEvalTask:
    """IFEval. Options: `data` (folder with input_data.jsonl or <split>.jsonl, a .jsonl file, or a
    HF dataset name; default the Hub's "google/IFEval"), `loose` (default False: strict),
    `n_generated` (1000), `seed` (0), `min_constraints` (1), `max_constraints` (6),
    `max_words` (150: cap on generated word-count constraints)."""

    name = "ifeval"
    reward_range = (0.0, 1.0)
    reward_is_fast = False  # langdetect / tokenizers on long text: scored in the worker process

    def __init__(
        self,
        data: str | Path | None = None,
        loose: bool = False,
        n_generated: int = 1000,
        seed: int = 0,
        min_constraints: int = 1,
        max_constraints: int = 6,
        max_words: int = 150,
    ) -> None:
        if n_generated < 1:
            raise ValueError(f"n_generated must be >= 1, got {n_generated}")
        if not 1 <= min_constraints <= max_constraints <= 6:
            raise ValueError("need 1 <= min_constraints <= max_constraints <= 6")
        self.data = data
        self.loose = bool(loose)
        self.n_generated, self.seed = int(n_generated), int(seed)
        self.min_constraints, self.max_constraints = int(min_constraints), int(max_constraints)
        self.max_words = int(max_words)

    def prepare(self) -> None:
        """Import the checkers and patch the tokenizers before the first timed call."""
        use_offline_tokenizers()
        check_response(
            "Hello there. This is a warm-up.", ["language:response_language"], [{"language": "en"}]
        )

    def load(self, split_or_path: str) -> list[dict[str, Any]]:
        if split_or_path in (GENERATED_SPLIT, "train"):  # IFEval's own prompts are for evaluation
            return generate_prompts(
                self.n_generated,
                seed=self.seed,
                min_constraints=self.min_constraints,
                max_constraints=self.max_constraints,
                max_words=self.max_words,
            )
        examples = load_examples(
            "ifeval",
            self.data,
            split_or_path,
            file_names=lambda split: [f"{split}.jsonl", "input_data.jsonl"],
            hub=("google/IFEval", None),
            required=("prompt", "instruction_id_list", "kwargs"),
        )
        for ex in examples:
            if len(ex["kwargs"]) != len(ex["instruction_id_list"]):
                raise ValueError(
                    f"ifeval example {ex.get('key')!r}: {len(ex['instruction_id_list'])} "
                    f"instruction ids but {len(ex['kwargs'])} kwargs dicts; they must pair up"
                )
        return examples

    def prompt(self, example: dict[str, Any]) -> str:
        return str(example["prompt"])

    def num_constraints(self, example: dict[str, Any]) -> int:
        """C: the number of constraints of the example (the dual-anchor's `num_constraints`)."""
        return len(example["instruction_id_list"])

    def check(self, completion: str, example: dict[str, Any]) -> list[ConstraintCheck]:
        """One `ConstraintCheck` per constraint (strict, or loose with `loose=True`)."""
        return check_response(
            completion,
            example["instruction_id_list"],
            example["kwargs"],
            example["prompt"],
            loose=self.loose,
        )

    def reward(self, completion: str, example: dict[str, Any]) -> float:
        checks = self.check(completion, example)
        return sum(c.followed for c in checks) / len(checks) if checks else 0.0

    def metrics(
        self,
        completions: Sequence[str],
        examples: Sequence[dict[str, Any]],
        rewards: Sequence[float],
    ) -> dict[str, float]:
        """`ssr` (instruction level), `hsr` (prompt level), `unknown_instruction_ids` (count of
        constraints whose id the checker registry lacks; scored as not followed)."""
        registry = use_offline_tokenizers()
        counts = [self.num_constraints(e) for e in examples]
        followed = sum(round(r * c) for r, c in zip(rewards, counts, strict=True))
        total = sum(counts)
        unknown = sum(i not in registry for e in examples for i in e["instruction_id_list"])
        return {
            "ssr": followed / total if total else 0.0,
            "hsr": sum(r >= 1.0 - 1e-9 for r in rewards) / max(len(rewards), 1),
            "unknown_instruction_ids": float(unknown),
            "constraints_per_prompt": total / max(len(counts), 1),
        }


TASKS.add("ifeval", IFEvalTask)
