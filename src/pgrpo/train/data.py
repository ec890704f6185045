"""The prompt stream: seeded epochs over the task's examples, with a position that checkpoints
save and resumes restore exactly."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


class PromptStream:
    """Yields batches of examples; epoch e visits every example once in the order
    permutation(seed, e). The state is just (epoch, index)."""

    def __init__(self, examples: Sequence[dict[str, Any]], seed: int) -> None:
        if not examples:
            raise ValueError("the task gave no examples: check task.split and task.options")
        self.examples = list(examples)
        self.seed = seed
        self.epoch = 0
        self.index = 0
        self._order = self._permutation(0)

    def _permutation(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(len(self.examples))

    def next_batch(self, size: int) -> list[dict[str, Any]]:
        out = []
        while len(out) < size:
            if self.index >= len(self.examples):
                self.epoch, self.index = self.epoch + 1, 0
                self._order = self._permutation(self.epoch)
            out.append(self.examples[int(self._order[self.index])])
            self.index += 1
        return out

    def position(self) -> dict[str, int]:
        return {"epoch": self.epoch, "index": self.index}

    def restore(self, position: dict[str, int]) -> None:
        self.epoch, self.index = int(position["epoch"]), int(position["index"])
        self._order = self._permutation(self.epoch)
