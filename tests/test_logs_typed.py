"""The typed fast path of the JSONL reader (`pgrpo.logs.typed`, msgspec) gives exactly what the
record-by-record way gives, on logs that fit it and on logs that break it anywhere."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import pgrpo.logs.readers as readers
import pgrpo.logs.typed as typed
from pgrpo.dynamics.logfit import FIT_COLUMNS
from pgrpo.logs import read_log
from pgrpo.logs.base import LogFormatError

pytest.importorskip("msgspec")

KEYS = ("step", "reward", "learning_rate", "loss", "entropy", "beta1")
NUMBER = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-(10**30), 10**30),
    st.floats(-1e-300, 1e-300),
)
ODD = st.one_of(
    st.booleans(), st.none(), st.text(max_size=3), st.just("0.5"), st.lists(NUMBER, max_size=2),
    st.integers(10**308, 10**309),
)  # fmt: skip


@st.composite
def lines(draw) -> list[bytes]:
    """A log of uniform numeric records with a few breaks anywhere (or none)."""
    n = draw(st.integers(1, 60))
    out = []
    for i in range(n):
        rec = {k: draw(NUMBER) for k in KEYS}
        rec["step"] = i + 1
        line = json.dumps(rec)
        if draw(st.integers(0, 8)) == 0:  # a break: one of the ways a line can differ
            kind = draw(st.integers(0, 6))
            if kind == 0:
                del rec[draw(st.sampled_from(KEYS))]
            elif kind == 1:
                rec[draw(st.sampled_from(["extra", "reward_std", "lr"]))] = 1.0
            elif kind == 2:
                rec[draw(st.sampled_from(KEYS))] = draw(ODD)
            line = json.dumps(rec)
            if kind == 3:
                line = ""
            elif kind == 4:
                line = line[: draw(st.integers(0, len(line) - 1))]
            elif kind == 5:
                line = line.replace("1", "NaN", 1) if "1" in line else "[1]"
            elif kind == 6:  # a duplicate key: both ways keep the last value
                line = line[:-1] + ', "reward": 0.25}'
        out.append(line.encode() + b"\n")
    return out


def _read(path, fast: bool, monkeypatch, columns=FIT_COLUMNS):
    """(the RewardLog or the error, the ColumnStore's keys, seen keys, size and columns)."""
    stores = []
    assemble = readers.assemble

    def spy(records, **kw):
        stores.append(records)
        return assemble(records, **kw)

    monkeypatch.setattr(readers, "assemble", spy)
    monkeypatch.setattr(typed, "msgspec", MSGSPEC if fast else None)
    try:
        got = read_log(path, columns=columns)
    except LogFormatError as exc:
        got = str(exc)
    if not stores:  # refused before any line was parsed (a whitespace-only file): the same
        return got, None, {}  # error both ways is all there is to compare
    store = stores[0]
    cols = {k: store.column(k) for k in store.keys}
    return got, (store.keys, store.seen, store.n), cols


MSGSPEC = typed.msgspec


def _same(a, b) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, dict):
            if x.keys() != y.keys() or not all(_same_value(x[k], y[k]) for k in x):
                return False
        elif not _same_value(x, y):
            return False
    return True


def _same_value(x, y) -> bool:
    if isinstance(x, np.ndarray):
        return x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True)
    if isinstance(x, float) and math.isnan(x):
        return isinstance(y, float) and math.isnan(y)
    return x == y


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
# a whitespace-only file is refused before parsing (was an error)
@example(log=[b"\n"], chunk=64, columns=None)
@given(
    log=lines(),
    chunk=st.sampled_from([64, 300, 1 << 22]),
    columns=st.sampled_from([FIT_COLUMNS, None]),  # `pgrpo fit`'s few, every column
)
def test_the_typed_path_reads_exactly_what_the_usual_way_reads(
    log, chunk, columns, tmp_path, monkeypatch
):
    monkeypatch.setattr(readers, "CHUNK_BYTES", chunk)  # several chunks: breaks in later ones
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b"".join(log))
    fast = _read(path, True, monkeypatch, columns)
    usual = _read(path, False, monkeypatch, columns)
    assert (fast[1] is None) == (usual[1] is None)
    assert _same(fast[0], usual[0]) and fast[1] == usual[1]
    assert fast[2].keys() == usual[2].keys()
    for key, (vals, codes) in fast[2].items():
        assert np.array_equal(vals, usual[2][key][0], equal_nan=True), key
        assert np.array_equal(codes, usual[2][key][1]), key


@pytest.mark.parametrize("columns", [FIT_COLUMNS, None])
def test_the_typed_path_is_taken_on_a_uniform_log(columns, tmp_path, monkeypatch):
    """After the first chunk, a uniform log is decoded by msgspec (not by the usual way)."""
    monkeypatch.setattr(readers, "CHUNK_BYTES", 256)
    path = tmp_path / "metrics.jsonl"
    rows = [
        {"step": i, "reward": i / 100, "learning_rate": 1e-6, "loss": 0.1} for i in range(1, 300)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    calls = []
    original = typed.TypedChunks.add

    def spy(self, lines):
        done = original(self, lines)
        calls.append(done)
        return done

    monkeypatch.setattr(typed.TypedChunks, "add", spy)
    log = read_log(path, columns=columns)
    assert calls and all(calls[1:]) and sum(calls) > 10
    np.testing.assert_array_equal(log.reward, [r["reward"] for r in rows])
