"""pgrpo: predictable GRPO.

Public API (the rest lives in the subpackages named after what they hold):
- `compute_advantages(name, rewards, *, group_size=None, group_ids=None, **options)`
- `get_task(name, **options)`

The names below are loaded on first use (PEP 562 module `__getattr__`), so that `import pgrpo`
and the log-analysis commands (`pgrpo fit`, `predict`, `diagnose`, `report`) never import torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_LAZY = {
    "ADVANTAGE_ESTIMATORS": "pgrpo.core.advantages",
    "ADVANTAGE_TRANSFORMS": "pgrpo.core.advantages",
    "AdvantageResult": "pgrpo.core.advantages",
    "compute_advantages": "pgrpo.core.advantages",
    "pass_at_k": "pgrpo.core.stats",
    "TASKS": "pgrpo.tasks",
    "get_task": "pgrpo.tasks",
}

if TYPE_CHECKING:
    from pgrpo.core.advantages import (
        ADVANTAGE_ESTIMATORS,
        ADVANTAGE_TRANSFORMS,
        AdvantageResult,
        compute_advantages,
    )
    from pgrpo.core.stats import pass_at_k
    from pgrpo.tasks import TASKS, get_task


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pgrpo' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "ADVANTAGE_TRANSFORMS",
    "TASKS",
    "AdvantageResult",
    "__version__",
    "compute_advantages",
    "get_task",
    "pass_at_k",
]
