"""Log records streamed into columns, so a 200,000-step log never sits in memory as dicts.

Readers feed records in chunks (`ColumnStore.add`); each chunk is turned into one float array
and one code array per key (code ABSENT / NUMBER / OTHER, so `assemble` can tell a missing
reward from a non-numeric one from a NaN one, exactly as it does record by record) and the dicts
are dropped. Rows that share their key order (nearly all rows of a log) are converted a column at
a time; `as_number` decides the value of anything that is not a plain int or float.
"""

from __future__ import annotations

import gc
import numbers
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import chain
from operator import itemgetter, methodcaller
from typing import Any

import numpy as np

ABSENT, NUMBER, OTHER = 0, 1, 2


def as_number(value: Any) -> float | None:
    """float(value) for numbers (numpy scalars included), 0-d arrays and tensors (a trainer that
    logs `torch.tensor(x)` or `np.float32(x)`) and numeric strings; None for anything else
    (bool included). Duck-typed: a 0-d value is read with `.item()`, torch is never imported."""
    if isinstance(value, bool | np.bool_) or value is None:
        return None
    if isinstance(value, numbers.Real):
        try:
            return float(value)
        except OverflowError:  # an int too large for a float
            return None
    if getattr(value, "ndim", None) == 0 and callable(getattr(value, "item", None)):
        try:
            return as_number(value.item())
        except (TypeError, ValueError, RuntimeError):
            return None
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


_PLAIN = {int, float}
_values = methodcaller("values")


def _convert(values: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """values: [m] any -> (float [m], code [m]); NaN where the code is not NUMBER."""
    types = set(map(type, values))
    if types <= _PLAIN or types == {str}:  # plain numbers, or CSV cells that all parse
        try:
            out = np.fromiter(values, dtype=float, count=len(values))
            return out, np.full(len(values), NUMBER, np.uint8)
        except (OverflowError, ValueError):
            pass
    nums = [as_number(v) for v in values]
    code = np.array([OTHER if x is None else NUMBER for x in nums], dtype=np.uint8)
    return np.array([np.nan if x is None else x for x in nums], dtype=float), code


def _block_columns(
    block: list[Mapping[str, Any]], keys: tuple[str, ...], every: bool = False
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(values, codes) per key of `keys` for rows that all hold them (every: `keys` is each
    row's whole key tuple, in its order): all plain numbers in one conversion (the common case),
    else one key at a time."""
    k = len(keys)
    if every:
        rows = map(_values, block)
    else:
        get = itemgetter(*keys)
        rows = map(get, block) if k > 1 else ((get(r),) for r in block)
    flat = list(chain.from_iterable(rows))
    if set(map(type, flat)) <= _PLAIN:
        try:
            arr = np.fromiter(flat, dtype=float, count=len(flat)).reshape(len(block), k)
        except OverflowError:
            pass
        else:
            codes = np.full(len(block), NUMBER, np.uint8)
            for j in range(k):
                yield np.ascontiguousarray(arr[:, j]), codes.copy()
            return
    for j in range(k):  # the values of one key down the block
        yield _convert(flat[j::k])


class ColumnStore:
    """Columns of a stream of records. keys: the stored keys, first-appearance order; seen: every
    key met (stored or not); n: records seen. keep: which keys to store (None: all); a reader
    asked for a few columns skips converting the rest."""

    def __init__(self, keep: Callable[[str], bool] | None = None) -> None:
        self.n = 0
        self._keep = keep
        self._wanted: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._seen: dict[str, None] = {}
        self._chunks: dict[str, list[tuple[int, np.ndarray, np.ndarray]]] = {}

    @property
    def keys(self) -> list[str]:
        return list(self._chunks)

    @property
    def seen(self) -> list[str]:
        return list(self._seen)

    def add(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Append a chunk of records (dicts; their keys are taken as strings)."""
        rows = records if isinstance(records, list) else list(records)
        if not rows:
            return
        with _no_gc():
            self._add(rows)

    def _stored(self, keys: tuple[str, ...]) -> tuple[str, ...]:
        """The keys of a key tuple to store (cached per tuple)."""
        got = self._wanted.get(keys)
        if got is None:
            self._seen.update(dict.fromkeys(map(str, keys)))
            got = keys if self._keep is None else tuple(k for k in keys if self._keep(str(k)))
            self._wanted[keys] = got
        return got

    def _add(self, rows: list[Mapping[str, Any]]) -> None:
        m, start = len(rows), self.n
        key_rows = list(map(tuple, rows))
        groups: dict[tuple[str, ...], list[int]] = {}
        if key_rows.count(key_rows[0]) == m:  # the common case: one key order throughout
            groups[key_rows[0]] = list(range(m))
        else:
            for i, keys in enumerate(key_rows):
                groups.setdefault(keys, []).append(i)
        dense: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for keys, idx in groups.items():
            stored = self._stored(keys)
            if not stored:
                continue
            block = rows if len(idx) == m else [rows[i] for i in idx]
            columns = _block_columns(block, stored, every=stored is keys)
            for key, (vals, code) in zip(stored, columns, strict=True):
                if len(idx) == m:
                    dense[key] = (vals, code)
                    continue
                if key not in dense:
                    dense[key] = (np.full(m, np.nan), np.zeros(m, np.uint8))
                dense[key][0][idx], dense[key][1][idx] = vals, code
        for key, (vals, code) in dense.items():
            self._chunks.setdefault(str(key), []).append((start, vals, code))
        self.n += m

    def add_numbers(self, keys: tuple[str, ...], values: np.ndarray) -> None:
        """Append m records that each hold exactly `keys`, with a plain number under every
        stored one: values [m, s], the stored keys' values in key order (what `add` stores for
        such records; `pgrpo.logs.typed` decodes them)."""
        stored = self._stored(keys)
        m, start = values.shape[0], self.n
        codes = np.full(m, NUMBER, np.uint8)
        for j, key in enumerate(stored):
            column = np.ascontiguousarray(values[:, j])
            self._chunks.setdefault(str(key), []).append((start, column, codes.copy()))
        self.n += m

    def column(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(values [n] float, NaN unless NUMBER; codes [n] uint8) of `key`."""
        vals, code = np.full(self.n, np.nan), np.zeros(self.n, np.uint8)
        for start, v, c in self._chunks.get(key, []):
            vals[start : start + v.size], code[start : start + v.size] = v, c
        return vals, code


@contextmanager
def _no_gc() -> Iterator[None]:
    """The cyclic garbage collector paused: converting a chunk allocates ~10^5 containers that
    hold no cycles, and each allocation burst would otherwise trigger a full-heap scan."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def store_of(
    records: Iterable[Mapping[str, Any]],
    chunk: int = 8192,
    keep: Callable[[str], bool] | None = None,
) -> ColumnStore:
    """A ColumnStore of `records` (storing the keys `keep` accepts), `chunk` records at a time."""
    store, buf = ColumnStore(keep), []
    for rec in records:
        buf.append(rec)
        if len(buf) >= chunk:
            store.add(buf)
            buf = []
    store.add(buf)
    return store
