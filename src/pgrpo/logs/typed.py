"""A typed fast path for the JSONL lines of a pgrpo log.

orjson builds a dict of every key of every line (29 on a pgrpo log) for `ColumnStore.add` to
turn into columns. With msgspec installed, once the first chunk of lines has been read the
usual way, the following chunks are decoded against a struct of exactly that chunk's keys: the
stored keys (every key; or the few a reader asked for, `read_log(..., columns=FIT_COLUMNS)`)
typed `float`, the others left as plain Python values, every key required and no other key
allowed. A chunk decodes only where each line is one JSON object with exactly those keys and a
JSON number (int or float, finite) under every stored key, which is the case in which the
record-by-record reader stores the same float for each stored key, under the same key set
(duplicate keys: both keep the last value). Any other chunk (a missing, extra or non-numeric
value, a malformed or blank line, NaN) raises inside msgspec and is read the usual way
(`ColumnStore.add`), and the fast path is not tried again. `tests/test_logs_typed.py` checks by
property test that both give identical stores, for a few columns and for all of them.
`read_log(..., columns=FIT_COLUMNS)` of the 200,000-step, 29-key log of bench/cli_speed.py:
0.59-0.63 -> 0.38-0.41 s CPU (2026-12-02, load ~3); its chunks with every column stored (as
`pgrpo diagnose` and `pgrpo report` read it): 0.96 -> 0.56 s CPU (2026-12-07, load ~4).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import chain
from operator import attrgetter
from typing import Any

import numpy as np

try:
    import msgspec
    import msgspec.json
except ImportError:  # optional accelerator: without it every chunk takes the usual way
    msgspec = None

from pgrpo.logs.columns import ColumnStore


class TypedChunks:
    """Decodes chunks of JSONL lines into `store` by the keys of the first records it is shown
    (`learn`); `add(lines)` is False (nothing stored) when a chunk does not fit them."""

    def __init__(self, store: ColumnStore, keep: Callable[[str], bool]) -> None:
        self.store, self._keep = store, keep
        self._decode: Callable[[bytes], Any] | None = None
        self._keys: tuple[str, ...] = ()
        self._get: Callable[[Any], tuple] | None = None
        self.failed = msgspec is None

    @property
    def ready(self) -> bool:
        return self._decode is not None and not self.failed

    def learn(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Take the key tuple of `records` (a chunk read the usual way) when all share it."""
        if self.failed or self._decode is not None or not records:
            return
        keys = tuple(records[0])
        stored = [i for i, k in enumerate(keys) if self._keep(str(k))]
        if not stored or any(tuple(r) != keys for r in records[1:]):
            self.failed = True  # keys that vary: the usual way throughout
            return
        fields = [
            (f"f{i}", float if i in stored else Any, msgspec.field(name=k))
            for i, k in enumerate(keys)
        ]
        row = msgspec.defstruct("Row", fields, forbid_unknown_fields=True, gc=False)
        self._decode = msgspec.json.Decoder(row).decode
        self._keys = keys
        self._get = attrgetter(*(f"f{i}" for i in stored))
        self._width = len(stored)

    def add(self, lines: list[bytes]) -> bool:
        """Decode and store a chunk of lines; False (nothing stored) when it does not fit."""
        if not self.ready or not lines:
            return False
        try:
            rows = list(map(self._decode, lines))
        except (msgspec.DecodeError, msgspec.ValidationError):
            self.failed = True
            return False
        get = self._get if self._width > 1 else (lambda r: (self._get(r),))
        flat = np.fromiter(chain.from_iterable(map(get, rows)), dtype=float,
                           count=len(rows) * self._width)  # fmt: skip
        if not np.isfinite(flat).all():  # an int too large for a float: the usual way decides
            self.failed = True
            return False
        self.store.add_numbers(self._keys, flat.reshape(len(rows), self._width))
        return True
