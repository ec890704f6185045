"""Handing the heap's free pages back to the operating system after a large parse.

Reading a long JSONL log builds and frees millions of small Python objects (one dict per line,
a float per value) chunk by chunk; glibc keeps the pages they occupied, interleaved with the
column blocks that survive, so the process stays larger than the log it holds (a 200,000-step
pgrpo log, 27 columns: 125 MB resident after `read_log` for 44 MB of data, 54 MB after
`release_free_heap`, session 38). `malloc_trim(0)` returns those pages. Elsewhere than glibc
(macOS, musl, Windows, a Python without ctypes) it does nothing.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def _trim() -> Any:
    """glibc's malloc_trim, or None where there is none: looked up in the symbols the process
    has loaded (the C library's among them; `ctypes.util.find_library` needs ldconfig or a
    compiler, which slim images lack), then by the C library's name."""
    try:
        import ctypes
        import ctypes.util
    except ImportError:  # a Python built without _ctypes
        return None
    for name in (None, ctypes.util.find_library("c")):
        try:
            trim = getattr(ctypes.CDLL(name), "malloc_trim", None)
        except OSError:
            continue
        if trim is not None:
            trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
            return trim
    return None


def release_free_heap() -> bool:
    """Return the heap's free pages to the OS (glibc); False where that cannot be done."""
    trim = _trim()
    if trim is None:
        return False
    trim(0)
    return True
