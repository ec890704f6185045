"""Handing the heap's free pages back to the operating system after a large parse.

Reading a long JSONL log builds and frees millions of small Python objects (one dict per line,
a float per value) chunk by chunk; glibc keeps the pages they occupied, interleaved with the
column blocks that survive, so the process stays ~70 MB larger than the log it holds (a
200,000-step pgrpo log, 27 columns: 125 MB resident after `read_log` for 44 MB of data,
session 38). `malloc_trim(0)` returns those pages. Elsewhere than glibc (macOS, musl, Windows)
it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import lru_cache


@lru_cache(maxsize=1)
def _trim():  # noqa: ANN202
    """glibc's malloc_trim, or None where the C library has none."""
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


def release_free_heap() -> bool:
    """Return the heap's free pages to the OS (glibc); False where that cannot be done."""
    trim = _trim()
    if trim is None:
        return False
    trim(0)
    return True
