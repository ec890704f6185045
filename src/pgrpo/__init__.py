"""pgrpo: predictable GRPO.

Public API (the rest lives in the subpackages named after what they hold):
- `compute_advantages(name, rewards, *, group_size=None, group_ids=None, **options)`
- `get_task(name, **options)`
"""

from __future__ import annotations

__version__ = "0.1.0"

from pgrpo.core.advantages import (  # noqa: E402
    ADVANTAGE_ESTIMATORS,
    ADVANTAGE_TRANSFORMS,
    AdvantageResult,
    compute_advantages,
)
from pgrpo.core.stats import pass_at_k  # noqa: E402
from pgrpo.tasks import TASKS, get_task  # noqa: E402

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
