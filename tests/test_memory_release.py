"""`pgrpo._memory.release_free_heap` after a long log is read: glibc's malloc_trim where there
is one, nothing elsewhere; `read_log` calls it only past RELEASE_ROWS rows."""

from __future__ import annotations

import platform

import pytest

import pgrpo._memory as memory
import pgrpo.logs.readers as readers
from pgrpo.logs import read_log


def test_release_is_a_no_op_without_malloc_trim(monkeypatch):
    monkeypatch.setattr(memory, "_trim", lambda: None)
    assert memory.release_free_heap() is False


def test_release_calls_malloc_trim_where_the_c_library_has_it(monkeypatch):
    calls = []
    monkeypatch.setattr(memory, "_trim", lambda: calls.append)
    assert memory.release_free_heap() is True and calls == [0]


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_glibc_has_malloc_trim_found_without_find_library(monkeypatch):
    """Looked up in the loaded symbols first: ctypes.util.find_library needs ldconfig or a
    compiler, which slim images lack (a review, session 38: the release never ran there)."""
    import ctypes.util

    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    memory._trim.cache_clear()
    try:
        assert memory._trim() is not None and memory.release_free_heap() is True
    finally:
        memory._trim.cache_clear()


def _csv(path, n):
    path.write_text("step,reward\n" + "".join(f"{i},{(i % 7) / 7:.3f}\n" for i in range(1, n + 1)))
    return path


def test_read_log_releases_only_after_a_long_log(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(readers, "release_free_heap", lambda: calls.append(1) or True)
    monkeypatch.setattr(readers, "RELEASE_ROWS", 50)
    short = read_log(_csv(tmp_path / "short.csv", 49))
    assert len(short) == 49 and calls == []
    long = read_log(_csv(tmp_path / "long.csv", 50), format="csv")
    assert len(long) == 50 and calls == [1]
