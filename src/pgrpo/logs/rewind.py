"""Where a log's writer went back: a run resumed from an earlier checkpoint, or restarted
from scratch, into the same file (`superseded`: the rows the history after the rewind keeps;
`rewinds`, `restarts`, `newest_run`; `rewind_warnings`: what `logs.base.assemble` says of it).
Pure functions of the steps in file order: step [n] -> rows."""

from __future__ import annotations

import numpy as np


def newest_run(step: np.ndarray) -> int:
    """step: [n] in file order -> where the newest run in the file begins (0: one run): the last
    of `restarts`. A step that goes back to a later one is the same run resumed from a
    checkpoint, whose rows replace the earlier ones from that step on (`superseded`)."""
    starts = restarts(step)
    return int(starts[-1]) if starts.size else 0


def restarts(step: np.ndarray) -> np.ndarray:
    """step: [n] in file order -> the rows where a new run appended to the file begins: a
    rewind (`rewinds`) below the step before it to at most every step logged so far (a job
    restarted from scratch). Everything written before such a row is an earlier run."""
    step = np.asarray(step, dtype=float)
    back = rewinds(step)
    if not back.size:
        return back
    low = np.minimum.accumulate(step)
    return back[(step[back] < step[back - 1]) & (step[back] <= low[back - 1])]


def superseded(step: np.ndarray) -> np.ndarray:
    """step: [n] in file order -> keep: [n] bool, False for the rows a later part of the file
    supersedes. At a rewind (`rewinds`) the writer went back to a checkpoint and the rows it
    wrote before, from that step on, belong to a trajectory it discarded: they are dropped,
    whatever their steps beyond the point the new part has reached (keeping them mixed two
    runs: a run rolled back from step 100 to 60 read, at its step 70, the old rows 71-100 as its
    newest). At a restart (`restarts`) every earlier row goes: an earlier run. A repeated step
    is a rewind where the new part starts at that step; of a step repeated otherwise (rows
    written out of order), the last copy is kept; the caller sorts."""
    step = np.asarray(step, dtype=float)
    rewind_to = np.full(step.size, np.inf)
    back = rewinds(step)
    rewind_to[back] = step[back]
    rewind_to[restarts(step)] = -np.inf
    later = np.append(np.minimum.accumulate(rewind_to[::-1])[::-1][1:], np.inf)
    keep = step < later  # below every step a later part of the file goes back to
    _, last_rev = np.unique(step[::-1], return_index=True)  # and the last copy of a step
    last = np.zeros(step.size, dtype=bool)
    last[step.size - 1 - last_rev] = True
    return keep & last


REWIND_ROWS = 3
"""Rows at or below the highest step so far that make a fall to a step never logged a rewind:
a row written up to two places early or late (an asynchronous writer) leaves at most two."""


SCRAMBLED_REPEATS = 0.1
"""The share of repeated steps up to which a file whose steps fall at every other row is read as
written in no order (newest first, shuffled, merged exports with a re-logged row). One repeated
row in a newest-first file once made every fall a rewind, and the file was read as its last row
(review, 2026-12-05); a job preempted every few steps and resumed a step or two back repeats a
third of its rows and keeps its rewinds."""


def rewinds(step: np.ndarray) -> np.ndarray:
    """step: [n] in file order -> the rows where the writer went back: the step is not above
    the one before and either was logged already (a resume re-logs its checkpoint's step), or
    the rows from it to the next fall go back over what was logged: a step logged before, or
    REWIND_ROWS rows at or below the highest step so far (a run resumed or restarted at a step it
    had not logged). A row written a place or two early or late (an asynchronous writer's swap,
    a file written newest first) is no rewind. None in a file whose steps fall at more than a
    quarter of its rows (and more than twice) and repeat at few (`SCRAMBLED_REPEATS`): written
    in no order; the caller sorts it and keeps the last copy of a repeated step."""
    step = np.asarray(step, dtype=float)
    n = step.size
    if n < 2:
        return np.zeros(0, dtype=int)
    d = np.diff(step)
    values, first = np.unique(step, return_index=True)
    few = n - values.size <= max(2, int(SCRAMBLED_REPEATS * n))  # not a resume every few rows
    if few and np.sum(d < 0) > max(2, d.size // 4):
        return np.zeros(0, dtype=int)
    first_at = first[np.searchsorted(values, step)]  # each row's step: the row it first came
    high = np.maximum.accumulate(step)
    falls = np.flatnonzero(d < 0) + 1
    back = np.flatnonzero(d <= 0) + 1
    seen = first_at[back] < back  # a step logged before
    nxt = np.searchsorted(falls, back, side="right")  # the next fall ends the part
    ends = np.append(falls, n)[nxt]
    out = list(back[seen])
    for b, e in zip(back[~seen], ends[~seen], strict=True):
        if np.any(first_at[b:e] < b) or np.sum(step[b:e] <= high[b - 1]) >= REWIND_ROWS:
            out.append(b)
    return np.sort(np.asarray(out, dtype=int))


def rewind_warnings(step, keep, restart: int, live: bool, warns: list[str]) -> None:
    """What `superseded` dropped: the earlier run(s) of a file that holds several (not while
    watching: watch says it once, `_news`), and the rows a resume replaced."""
    n = step.size
    if restart and not live:
        runs = 1 + int(restarts(step).size)
        warns.append(
            f"the file holds {runs} runs appended (the step goes back to {step[restart]:g} at "
            f"the {_ordinal(restart + 1)} of its {n} rows with a reward): read the newest alone "
            f"({n - restart} rows); to read an earlier one, cut the file where its step goes back"
        )
    replaced = int(np.sum(~keep[restart:]))
    back = rewinds(step)
    back = back[(back > restart) & (np.diff(step, prepend=np.inf)[back] < 0)]  # the newest
    if replaced and not back.size:  # run's own; a step written twice in a row is no resume
        warns.append(f"{replaced} repeated step(s): kept the last copy of each")
    elif replaced:
        last = int(back[-1])
        warns.append(
            f"{replaced} row(s) replaced by a resume from an earlier checkpoint (the step goes "
            f"back from {step[last - 1]:g} to {step[last]:g} at the {_ordinal(last + 1)} row "
            "with a reward): kept the rows written after the resume"
        )


def _ordinal(k: int) -> str:
    tail = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{tail}"
