"""pgrpo: predictable GRPO.

Public API (the rest lives in the subpackages named after what they hold):
- `compute_advantages(name, rewards, *, group_size=None, group_ids=None, **options)`
- `pass_at_k(n, c, k)`
"""

from __future__ import annotations

__version__ = "0.1.0"
