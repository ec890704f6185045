"""The streamed, columnar `assemble` equals the record-by-record definition (hypothesis), and
readers do not hold a large log as dicts."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pgrpo.logs import LogFormatError, assemble, read_log
from pgrpo.logs.base import STEP_KEYS, resolve_reward_key, superseded
from pgrpo.logs.columns import as_number, store_of
from pgrpo.logs.rewind import restarts, rewinds

SRC = Path(__file__).resolve().parents[1] / "src"


def _reference(records, reward_key=None):
    """The definition, one record at a time: (step, reward, record index) of the rows read
    (the newest run's history, each step's last copy), the drop counts of the newest run's rows,
    and whether the log is refused (no such row, or 3 or more rows with a reward, all at one
    step). The runs are decided over the rows with a reward number, NaN / inf included
    (`superseded`, `rewinds`, `restarts`; tests/test_logs_rewind.py checks them against a
    replay); a record without one is the newest run's unless a later rewind of those rows goes
    back to its step or below, or a later restart comes (review 41)."""
    keys = list(dict.fromkeys(k for r in records for k in r))
    rkey = resolve_reward_key(keys, reward_key)
    rkeys = [rkey] if isinstance(rkey, str) else rkey
    skey = next((k for k in STEP_KEYS if k in keys), None)
    kinds = []  # (record index, kind, step, reward)
    for i, rec in enumerate(records):
        if not any(k in rec for k in rkeys):
            continue
        s = float(i) if skey is None else as_number(rec.get(skey))
        vals = [as_number(rec.get(k)) for k in rkeys]
        if s is None or not math.isfinite(s):
            kinds.append((i, "bad_step", math.nan, math.nan))
        elif any(v is None for v in vals):
            kinds.append((i, "missing", s, math.nan))
        else:
            kinds.append((i, "ok" if math.isfinite(sum(vals)) else "nan", s, float(sum(vals))))
    hist = [k for k in kinds if k[1] in ("ok", "nan")]
    hsteps = np.array([k[2] for k in hist], dtype=float)
    keep = superseded(hsteps)
    starts = restarts(hsteps)
    start = hist[starts[-1]][0] if starts.size else -1

    def replaced(i, s):
        return any(hist[j][0] > i and (hsteps[j] <= s or j in starts) for j in rewinds(hsteps))

    counts = {
        "nan": sum(1 for k, kk in zip(hist, keep, strict=True) if kk and k[1] == "nan"),
        "missing": sum(1 for k in kinds if k[1] == "missing" and not replaced(k[0], k[2])),
        "bad_step": sum(1 for k in kinds if k[1] == "bad_step" and k[0] >= start),
    }
    read = [(k[2], k[3], k[0]) for k, kk in zip(hist, keep, strict=True) if kk and k[1] == "ok"]
    every = [k[2] for k in hist if k[1] == "ok"]
    refused = not read or (len(every) >= 3 and len(set(every)) == 1)
    return read, counts, refused


values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 50),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["0.5", " 2 ", "nan", "abc", "", "1e3"]),
    st.lists(st.integers(), max_size=2),
)
record = st.dictionaries(
    st.sampled_from(["step", "reward", "entropy", "lr", "rewards/a/mean", "rewards/b/mean", "x"]),
    values,
    max_size=5,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(record, min_size=1, max_size=30), st.integers(1, 7))
def test_columnar_assemble_equals_the_record_by_record_definition(records, chunk):
    try:
        ref = _reference(records)
    except LogFormatError:
        ref = None
    try:
        log = assemble(store_of(records, chunk=chunk), fmt="t", source="s")
    except LogFormatError:
        assert ref is None or ref[2]
        return
    assert ref is not None and not ref[2]
    read, counts, _ = ref
    last = {s: r for s, r, _ in read}
    row_of = {s: i for s, _, i in read}
    np.testing.assert_array_equal(log.step, sorted(last))
    np.testing.assert_array_equal(log.reward, [last[s] for s in sorted(last)])
    assert log.metrics["dropped_nan"] == counts["nan"]
    assert log.metrics["dropped_missing"] == counts["missing"]
    # a column is the value of the kept row's record (NaN when absent or not a number)
    if "entropy" in log.columns:
        kept = [as_number(records[row_of[s]].get("entropy")) for s in log.step]
        want = [np.nan if v is None else v for v in kept]
        np.testing.assert_array_equal(log.columns["entropy"], want)


def test_a_large_log_is_read_in_bounded_memory(tmp_path):
    """50,000 steps of 20 keys (~25 MB of JSONL): the reader's peak stays near the columns'
    size, not the ~400 MB the same records take as dicts."""
    path = tmp_path / "metrics.jsonl"
    rng = np.random.default_rng(0)
    with path.open("w") as fh:
        for s in range(1, 50_001):
            rec = {"step": s, "reward": float(rng.random())}
            rec.update({f"m{j}": float(rng.random()) for j in range(18)})
            fh.write(json.dumps(rec) + "\n")
    code = (
        "import resource; from pgrpo.logs import read_log; "
        "peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; "
        f"base = peak(); log = read_log({str(path)!r}); print(len(log), peak() - base)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    n, grown_kb = map(int, out.stdout.split())
    assert n == 50_000
    assert grown_kb < 80_000, f"reading grew the peak RSS by {grown_kb / 1024:.0f} MB"
    assert read_log(path).columns["m3"].size == 50_000


def test_the_json_module_reads_what_orjson_reads(tmp_path, monkeypatch):
    """Without orjson (an optional accelerator) the reader gives the same log; NaN literals,
    which orjson refuses, are read either way."""
    import pgrpo.logs.readers as readers

    path = tmp_path / "metrics.jsonl"
    lines = [json.dumps({"step": s, "reward": s / 10, "kl": 0.1}) for s in range(1, 9)]
    lines[3] = '{"step": 4, "reward": 0.4, "kl": NaN}'
    lines[5] = "not json"
    path.write_text("\n".join(lines) + "\n")
    fast = read_log(path)
    monkeypatch.setattr(readers, "_orjson", None)
    slow = read_log(path)
    np.testing.assert_array_equal(fast.step, slow.step)
    np.testing.assert_array_equal(fast.columns["kl"], slow.columns["kl"])
    assert fast.warnings == slow.warnings and "1 malformed line(s)" in fast.warnings[0]
    assert np.isnan(fast.columns["kl"][3]) and fast.step.size == 7


@settings(max_examples=200, deadline=None)
@given(st.lists(record, min_size=1, max_size=30), st.integers(1, 7))
def test_reading_a_few_columns_equals_reading_all_then_selecting(records, chunk):
    """`columns=` (what `pgrpo fit` asks for) skips converting the other keys and changes
    nothing else: step, reward, repairs, hyperparameters and the selected columns."""
    from pgrpo.dynamics.logfit import FIT_COLUMNS
    from pgrpo.logs.base import wanted_keys

    cols = (*FIT_COLUMNS, "entropy")
    try:
        full = assemble(store_of(records, chunk=chunk), fmt="t", source="s")
    except LogFormatError as exc:
        try:
            assemble(store_of(records, chunk, wanted_keys(cols)), fmt="t", source="s", columns=cols)
        except LogFormatError as again:
            assert str(again) == str(exc)
            return
        raise AssertionError("the selective read accepted what the full read refused") from None
    part = assemble(store_of(records, chunk, wanted_keys(cols)), fmt="t", source="s", columns=cols)
    np.testing.assert_array_equal(part.step, full.step)
    np.testing.assert_array_equal(part.reward, full.reward)
    assert (part.warnings, part.metrics, part.reward_key) == (
        full.warnings, full.metrics, full.reward_key
    )  # fmt: skip
    assert part.hyperparameters == full.hyperparameters
    assert sorted(part.columns) == sorted(k for k in full.columns if k in cols)
    for k, v in part.columns.items():
        np.testing.assert_array_equal(v, full.columns[k])


def test_fit_reads_only_the_columns_it_uses(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(
        "".join(
            json.dumps({"step": s, "reward": s / 10, "kl": 0.1, "learning_rate": 1e-6}) + "\n"
            for s in range(1, 20)
        )
    )
    from pgrpo.dynamics.logfit import FIT_COLUMNS

    log = read_log(path, columns=FIT_COLUMNS)
    assert sorted(log.columns) == ["learning_rate"] and log.hyperparameters["lr"] == 1e-6
    assert "kl" in read_log(path).columns
