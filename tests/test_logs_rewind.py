"""A log file a writer went back in: a run resumed from an earlier checkpoint or restarted from
scratch into the same file (`pgrpo.logs.rewind.superseded`). The rows written before the rewind,
from its step on, belong to a discarded trajectory; every command reads what the run's history
is after the rewind. Before 2026-12-04 the reader kept the last copy of each step, so a run
rolled back from step 100 to 51 read, while at its step 70, the old rows 71-100 as its newest,
and a file with a run appended from scratch mixed both runs into one curve (a falling first run
and a rising second read 'Declining')."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.logs import read_log
from pgrpo.logs.base import assemble, superseded

_load_commands()
runner = CliRunner()


def _history(segments: list[list[int]]) -> list[tuple[int, int]]:
    """The oracle: (step, segment) of the run's history once every segment is written; a
    segment that starts at step s replaces everything the history held from s on."""
    hist: list[tuple[int, int]] = []
    for k, seg in enumerate(segments):
        hist = [h for h in hist if h[0] < seg[0]] + [(s, k) for s in seg]
    return hist


@st.composite
def rewound_files(draw):
    """Segments of strictly increasing steps; each after the first starts at a step an earlier
    segment logged (a resume) or at or below the file's first step (a restart), and has at least
    4 rows (a file whose steps fall at more than a quarter of its rows reads as written out of
    order: `rewinds`)."""
    first = draw(st.integers(0, 5))
    stride = draw(st.integers(1, 3))
    segments = [list(range(first, first + stride * draw(st.integers(4, 30)), stride))]
    for _ in range(draw(st.integers(0, 4))):
        logged = sorted({s for seg in segments for s in seg})
        start = draw(st.one_of(st.sampled_from(logged), st.integers(max(first - 3, 0), first)))
        segments.append(list(range(start, start + stride * draw(st.integers(4, 30)), stride)))
    return segments


@settings(max_examples=300, deadline=None)
@given(rewound_files())
def test_the_reader_keeps_the_history_the_last_rewind_leaves(segments):
    rows = [(s, k) for k, seg in enumerate(segments) for s in seg]
    step = np.array([r[0] for r in rows], dtype=float)
    want = _history(segments)
    assert [rows[i] for i in np.flatnonzero(superseded(step))] == want
    log = assemble([{"step": s, "reward": k + s / 1000} for s, k in rows], fmt="t", source="t")
    assert log.step.tolist() == [float(s) for s, _ in want]
    np.testing.assert_allclose(log.reward, [k + s / 1000 for s, k in want])
    dropped = len(rows) - len(want)
    assert log.metrics["repeated_steps"] == dropped
    assert bool(dropped) == bool(log.warnings and any(
        "replaced by a resume" in w or "runs appended" in w or "repeated step" in w
        for w in log.warnings))  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.integers(3, 60), st.data())
def test_rows_written_out_of_order_are_sorted_not_dropped(n, data):
    """Rows written a place or two early or late (an asynchronous writer; `REWIND_ROWS`), the
    first row included, lose nothing."""
    step = list(range(1, n + 1))
    free = 0  # windows do not overlap: each row moves at most two places
    for i, k, back in data.draw(st.lists(st.tuples(st.integers(0, n - 2), st.integers(1, 2),
                                                   st.booleans()), max_size=5)):  # fmt: skip
        if i < free or i + k >= n:
            continue
        w = step[i : i + k + 1]
        step[i : i + k + 1] = w[1:] + w[:1] if back else w[-1:] + w[:-1]
        free = i + k + 1
    assert superseded(np.array(step, dtype=float)).all()
    log = assemble([{"step": s, "reward": s / n} for s in step], fmt="t", source="t")
    assert log.step.tolist() == list(map(float, range(1, n + 1)))
    assert log.metrics["repeated_steps"] == 0


def test_a_file_written_newest_first_or_shuffled_is_sorted_not_cut():
    """Steps that fall at most rows are no rewinds: every row is kept (each read as a restart
    below the first step, a newest-first file kept its last row alone)."""
    steps = np.arange(10, 1010, 10, dtype=float)
    for order in (steps[::-1], np.random.default_rng(0).permutation(steps)):
        assert superseded(order).all()
        log = assemble([{"step": s, "reward": s / 1e3} for s in order], fmt="t", source="t")
        assert log.step.tolist() == steps.tolist()
        assert log.warnings[0] == "steps out of order in the file: sorted by step"


@settings(max_examples=100, deadline=None)
@given(st.integers(20, 200), st.integers(1, 2), st.booleans(), st.data())
def test_a_scrambled_file_with_a_row_logged_twice_is_sorted_not_cut(n, dups, newest_first, data):
    """One re-logged row in a newest-first or shuffled file made every fall a rewind: 49 rows
    read as 1 (review, 2026-12-05). The distinct steps are all kept, the repeat counted once."""
    steps = np.arange(1.0, n + 1)
    order = steps[::-1] if newest_first else np.random.default_rng(n).permutation(steps)
    at = data.draw(st.lists(st.integers(0, n - 1), min_size=dups, max_size=dups, unique=True))
    rows = list(order)
    for i in at:
        rows.insert(data.draw(st.integers(0, len(rows))), order[i])
    log = assemble([{"step": s, "reward": s / n} for s in rows], fmt="t", source="t")
    assert log.step.tolist() == steps.tolist()
    assert log.metrics["repeated_steps"] == dups
    assert f"{dups} repeated step(s): kept the last copy of each" in log.warnings


@pytest.mark.parametrize(
    ("steps", "read"),
    [
        ([3, 2, 1], [1, 2, 3]),  # newest first, too short for the unordered rule
        ([2, 1], [1, 2]),
        ([2, 1, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 5, 6, 7, 8]),  # the first two rows swapped
        ([5, 6, 7, 4, 5, 6, 7, 8, 5, 6], [4, 5, 6]),  # a restart below all, then a resume
        ([1, 2, 3, 4, 5, 6, 1, 2, 1, 2, 1, 2, 3, 4], [1, 2, 3, 4]),  # three quick restarts
    ],
)
def test_the_review_cases(steps, read):
    """A hostile review's inputs (2026-12-04): short descending files and a swap of the first
    two rows lost rows (read as restarts); quick restarts counted as disorder mixed the runs;
    the warning named a newest run that was not the one read."""
    log = assemble([{"step": s, "reward": i} for i, s in enumerate(steps)], fmt="t", source="t")
    assert log.step.tolist() == [float(x) for x in read]
    if steps[:3] == [5, 6, 7]:
        assert any("newest alone (7 rows)" in w for w in log.warnings), log.warnings


def test_every_prefix_of_quick_restarts_reads_the_newest_run():
    """Read live row by row, three restarts in quick succession: each prefix reads the newest
    run's rows only (at 11-12 rows the dead first run's steps 3-6 came back)."""
    steps = [1, 2, 3, 4, 5, 6, 1, 2, 1, 2, 1, 2, 3, 4]
    for m in range(1, len(steps) + 1):
        part = steps[:m]
        segs: list[list[int]] = [[part[0]]]
        for a, b in zip(part, part[1:], strict=False):
            if b > a:
                segs[-1].append(b)
            else:
                segs.append([b])
        want = [float(s) for s, _ in _history(segs)]
        log = assemble([{"step": s, "reward": 0.5} for s in part], fmt="t", source="t", live=True)
        assert log.step.tolist() == want, (m, log.step.tolist(), want)


def test_a_step_written_twice_in_a_row_keeps_the_later_copy():
    log = assemble([{"step": s, "reward": r} for s, r in ((1, 0.1), (1, 0.2), (2, 0.3), (2, 0.4))],
                   fmt="t", source="t")  # fmt: skip
    assert log.reward.tolist() == [0.2, 0.4]
    assert log.warnings == ("2 repeated step(s): kept the last copy of each",)


def _write(path, rows):
    path.write_text("".join(json.dumps({"step": s, "reward": r}) + "\n" for s, r in rows))
    return path


def test_diagnose_reads_the_run_after_a_rollback_not_the_discarded_rows(tmp_path):
    """Rolled back from step 100 to 60 (as a 'declining' verdict advises) and now at step 80:
    the discarded rows 81-100 fell from 0.8 to 0.2; the resumed run rises. Before: 'Declining'."""
    rng = np.random.default_rng(0)
    rise = [(s, 0.2 + 0.006 * s + rng.normal(0, 0.02)) for s in range(1, 61)]
    fall = [(s, 0.56 - 0.018 * (s - 60) + rng.normal(0, 0.02)) for s in range(61, 101)]
    again = [(s, 0.2 + 0.006 * s + rng.normal(0, 0.02)) for s in range(60, 81)]
    path = _write(tmp_path / "metrics.jsonl", rise + fall + again)
    log = read_log(path)
    assert log.step.tolist() == list(map(float, range(1, 81)))
    out = runner.invoke(app, ["diagnose", str(path), "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    progress = doc["progress"]["label"] if isinstance(doc["progress"], dict) else doc["progress"]
    assert progress == "learning"
    assert any("41 row(s) replaced by a resume" in w and "from 100 to 60" in w
               for w in doc["warnings"])  # fmt: skip


def test_fit_and_diagnose_read_only_the_newest_of_two_appended_runs(tmp_path):
    rng = np.random.default_rng(1)
    old = [(s, 0.8 - 0.004 * s + rng.normal(0, 0.03)) for s in range(1, 101)]
    new = [(s, 0.2 + 0.006 * s + rng.normal(0, 0.03)) for s in range(1, 61)]
    path = _write(tmp_path / "metrics.jsonl", old + new)
    out = runner.invoke(app, ["diagnose", str(path)])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "the file holds 2 runs appended" in text and "read the newest alone (60 rows)" in text
    assert "Still learning" in text and "Declining" not in text
    out = runner.invoke(app, ["fit", str(path), "--json", "--no-plot", "--out", str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["n_logged"] == 60
