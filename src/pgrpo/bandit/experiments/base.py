"""The experiment registry and the result every reproduction returns.

An experiment is a frozen config (defaults = the documented run), a `run(config)` function that
returns an `ExperimentResult` (table rows, plot series, summary metrics; all JSON-able), and a
`plot(result, path)` function that writes a PNG. `pgrpo reproduce NAME` calls `run_experiment`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pgrpo._registry import Registry


@dataclass(frozen=True)
class ExperimentResult:
    """rows: the table (one dict per row, keys = columns); series: data behind the figure;
    metrics: the headline numbers (e.g. the fraction of rows within tolerance); config: the
    settings that produced it."""

    name: str
    columns: tuple[str, ...]
    rows: list[dict[str, Any]]
    series: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON types (NaN/inf become None)."""
        return _jsonable(
            {
                "experiment": self.name,
                "columns": list(self.columns),
                "rows": self.rows,
                "metrics": self.metrics,
                "config": self.config,
                "series": self.series,
            }
        )


@dataclass(frozen=True)
class Experiment:
    """A registered reproduction."""

    config_cls: type
    run: Callable[[Any], ExperimentResult]
    plot: Callable[[ExperimentResult, Path], None]
    description: str


EXPERIMENTS: Registry[Experiment] = Registry("bandit experiment")


def run_experiment(name: str, *, seeds: int | None = None, **overrides: Any) -> ExperimentResult:
    """Run the registered experiment `name` with its default config, `seeds` independent runs per
    configuration when given, and any other config field overridden by keyword."""
    exp = EXPERIMENTS.get(name)
    fields = {f.name for f in dataclasses.fields(exp.config_cls)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(
            f"unknown option(s) {unknown} for experiment {name!r}; valid: {sorted(fields)}"
        )
    if seeds is not None:
        overrides["seeds"] = seeds
    config = exp.config_cls(**overrides)
    with single_thread():
        return exp.run(config)


@contextmanager
def single_thread() -> Iterator[None]:
    """Run torch on one thread: the bandit's many small kernels are slower with two threads
    contending on a shared 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def config_dict(config: Any) -> dict[str, Any]:
    """A frozen config as plain data for the result."""
    return _jsonable(dataclasses.asdict(config))


def check_seeds(seeds: int, minimum: int = 2) -> None:
    if int(seeds) != seeds or seeds < minimum:
        raise ValueError(
            f"seeds must be an integer >= {minimum}, got {seeds!r}; a spread across runs "
            f"needs {minimum} or more (--seeds {max(minimum, 4)})"
        )


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, np.generic):
        return _jsonable(x.item())
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x
