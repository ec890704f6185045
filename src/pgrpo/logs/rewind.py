"""Where a log's writer went back: a run resumed from an earlier checkpoint, or restarted
from scratch, into the same file (`superseded`: the rows the history after the rewind keeps;
`rewinds`, `restarts`, `newest_run`; `outlived`: the other records it keeps; `strays`; a step
counted within an epoch, `epoch_offsets`; `rewind_warnings`: what `logs.base.assemble` says of
it). Pure functions of the steps in file order: step [n] -> rows."""

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
    written out of order, a stray row), the last copy is kept; the caller sorts."""
    step = np.asarray(step, dtype=float)
    later = np.append(_goes_back_to(step)[1:], np.inf)
    keep = step < later  # below every step a later part of the file goes back to
    _, last_rev = np.unique(step[::-1], return_index=True)  # and the last copy of a step
    last = np.zeros(step.size, dtype=bool)
    last[step.size - 1 - last_rev] = True
    return keep & last


def _goes_back_to(step: np.ndarray) -> np.ndarray:
    """step: [n] in file order -> [n] the lowest step the file goes back to at or after each
    row: a rewind's step, -inf at a restart, inf where none comes."""
    rewind_to = np.full(step.size, np.inf)
    back = rewinds(step)
    rewind_to[back] = step[back]
    rewind_to[restarts(step)] = -np.inf
    return np.minimum.accumulate(rewind_to[::-1])[::-1]


def outlived(step: np.ndarray, rows: np.ndarray, at: np.ndarray, at_step: np.ndarray) -> np.ndarray:
    """The other records of a file (eval rows, rows without a reward number) that the history
    `superseded` keeps. step: [n] the history's steps at file rows `rows` [n] (increasing); at,
    at_step: [m] the other records' file rows and steps -> keep: [m] bool, False for a record
    written before a rewind of the history to its step or below, or before a restart."""
    step, at = np.asarray(step, dtype=float), np.asarray(at)
    later = np.append(_goes_back_to(step), np.inf)[np.searchsorted(rows, at, side="right")]
    return np.asarray(at_step, dtype=float) < later


def newest_rows(step: np.ndarray, hist: np.ndarray, good_step: np.ndarray):
    """The newest run of a file (several runs appended, a run resumed from a checkpoint). step:
    [n] every record's, in file order; hist: the rows with a reward number (NaN / inf too: a
    diverged run's last rows are its own), whose steps decide it (`superseded`) -> (newest: [n]
    bool, the records the newest run's history keeps: its reward rows, the other records written
    in it (`outlived`: an earlier run's eval rows went onto the newest run, review 41) and the
    rows without a step from its first row on; kept: [hist] bool; restart: where the newest run
    starts among hist)."""
    kept = superseded(step[hist])
    restart = newest_run(step[hist])
    newest = np.zeros(step.size, dtype=bool)
    newest[hist[kept]] = True
    other = np.setdiff1d(np.flatnonzero(good_step), hist)
    newest[other] = outlived(step[hist], hist, other, step[other])
    no_step = np.flatnonzero(~good_step)
    newest[no_step] = no_step >= (hist[restart] if hist.size else 0)
    return newest, kept, restart


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
    the one before and the rows from it to the next fall go back over what was logged: another
    step logged before, or REWIND_ROWS rows at or below the highest step so far (a run resumed
    or restarted at a step it had not logged; a resume re-logs its checkpoint's step and the
    steps after it). A step logged before is a rewind too unless it is a stray copy: one copy
    of a step the history holds (`_held`), below the highest so far, with rows after it that go
    on above that (review 41: one such row read as a resume dropped 30 rows; `strays`). A row
    written a place or two early or late (an asynchronous writer's swap, a file written newest
    first) is no rewind either. None in a file whose steps fall at more than a quarter of its
    rows (and more than twice) and repeat at few (`SCRAMBLED_REPEATS`): written in no order; the
    caller sorts it and keeps the last copy of a repeated step."""
    step = np.asarray(step, dtype=float)
    n = step.size
    if n < 2 or _scrambled(step):
        return np.zeros(0, dtype=int)
    d = np.diff(step)
    values, first = np.unique(step, return_index=True)
    first_at = first[np.searchsorted(values, step)]  # each row's step: the row it first came
    high = np.maximum.accumulate(step)
    falls = np.flatnonzero(d < 0) + 1
    back = np.flatnonzero(d <= 0) + 1
    ends = np.append(falls, n)[np.searchsorted(falls, back, side="right")]  # the next fall
    out: list[int] = []
    for b, e in zip(back, ends, strict=True):
        seen = first_at[b] < b
        if seen and (step[b] >= high[b - 1] or e == b + 1):  # logged again at the top, or
            out.append(b)  # nothing after it yet to show it is a stray
            continue
        # the part does not fall: its rows at or below the highest step so far come first
        low = b + int(np.searchsorted(step[b:e], high[b - 1], side="right"))
        again = np.any((first_at[b + 1 : low] < b) & (step[b + 1 : low] != step[b]))
        if again or low - b >= REWIND_ROWS or (seen and not _held(step, b, out)):
            out.append(b)
    return np.asarray(out, dtype=int)


def _held(step: np.ndarray, b: int, back: list[int]) -> bool:
    """Whether the history still holds the copy of row b's step logged before it: no rewind
    decided so far (`back`) went back to that step or below since (a step of a discarded
    trajectory logged again is a resume to it, not a stray copy)."""
    copy = int(np.flatnonzero(step[:b] == step[b])[-1])
    return all(step[r] > step[b] for r in back if r > copy)


def _scrambled(step: np.ndarray) -> bool:
    """Steps that fall at more than a quarter of the rows (and more than twice) and repeat at
    few (`SCRAMBLED_REPEATS`): a file written in no order, not resumed every few rows."""
    n, d = step.size, np.diff(step)
    few = n - np.unique(step).size <= max(2, int(SCRAMBLED_REPEATS * n))
    return bool(few and np.sum(d < 0) > max(2, d.size // 4))


def strays(step: np.ndarray) -> np.ndarray:
    """step: [n] in file order -> the rows whose step falls back to one logged before but that
    are no rewind (`rewinds`: the steps after go on above the highest so far): stray copies,
    kept as the last copy of their step. None in a file written in no order."""
    step = np.asarray(step, dtype=float)
    if step.size < 2 or _scrambled(step):
        return np.zeros(0, dtype=int)
    values, first = np.unique(step, return_index=True)
    seen = first[np.searchsorted(values, step)] < np.arange(step.size)  # a step logged before
    falls = np.flatnonzero(np.diff(step) < 0) + 1
    return np.setdiff1d(falls[seen[falls]], rewinds(step))


def epoch_offsets(step: np.ndarray, epoch: np.ndarray) -> np.ndarray:
    """step, epoch: [n] the rows with a reward, in file order -> [n] what to add to each step so
    that a step counted within an epoch counts on across epochs. Where the step falls back to
    about the lowest step logged (within one stride) while the logged epoch goes up to or past
    a whole epoch (review 41: three epochs of steps 0-39 read as three runs and kept the last),
    the step starts over each epoch: that epoch's steps (rows of that epoch or a later one)
    are moved on to follow the last step logged, one stride on. A resume or a restart takes
    the epoch back with the step, or (a restart on a smaller dataset) moves it on within the
    same epoch: no offset. Zeros when no such fall (a log without an epoch reads none)."""
    step, epoch = np.asarray(step, dtype=float), np.asarray(epoch, dtype=float)
    off = np.zeros(step.size)
    d = np.diff(step)
    stride = float(np.median(d[d > 0])) if np.any(d > 0) else 1.0
    with np.errstate(invalid="ignore"):
        # the epoch reaches a whole epoch (1.0 -> 1.025 and 0.975 -> 1.0 both do; 0.01 -> 0.05
        # does not: a restart on a smaller dataset, review 41 final)
        whole = np.floor(epoch[1:]) >= np.maximum(np.ceil(epoch[:-1]), 1)
        # and the step falls back to about the lowest logged before it (within one stride)
        low = np.fmin.accumulate(step)[:-1] + stride
        resets = np.flatnonzero((d < 0) & (np.diff(epoch) > 0) & whole & (step[1:] <= low)) + 1
    if not resets.size:
        return off
    rows = np.arange(step.size)
    for r in resets:
        with np.errstate(invalid="ignore"):
            this = (rows >= r) & ((epoch >= epoch[r]) | np.isnan(epoch))
        off[this] = step[r - 1] + off[r - 1] + stride - step[r]
    return off


def across_epochs(step, epoch, hist: np.ndarray, key: str, warns: list[str]) -> np.ndarray:
    """step, epoch: [n] every record's; hist: the rows with a reward -> the step counted on
    across epochs where it starts over at each (`epoch_offsets` over hist; a record without a
    reward takes the offset of the row with one before it), with a warning; else `step`."""
    off = epoch_offsets(step[hist], np.asarray(epoch, dtype=float)[hist])
    if not off.any():
        return step
    at = np.searchsorted(hist, np.arange(step.size), side="right") - 1
    warns.append(f"the step starts over where the {key!r} column goes up: read as a step "
                 "counted within each epoch, counted on across epochs (each epoch's steps "
                 "follow the last step of the one before); give --step-column a global step "
                 "if the log has one")  # fmt: skip
    return step + np.where(at >= 0, off[np.maximum(at, 0)], 0.0)


def rewind_warnings(step, keep, restart: int, live: bool, warns: list[str]) -> None:
    """What `superseded` dropped: the earlier run(s) of a file that holds several (not while
    watching: watch says it once, `_news`), the rows a resume replaced, and stray rows."""
    n = step.size
    if restart and not live:
        runs = 1 + int(restarts(step).size)
        warns.append(
            f"the file holds {runs} runs appended (the step goes back to {step[restart]:g} at "
            f"the {_ordinal(restart + 1)} of its {n} rows with a reward): read the newest alone "
            f"({n - restart} rows); to read an earlier one, cut the file where its step goes "
            "back; if the step instead starts over each epoch (and the log has no epoch column "
            "to tell), give --step-column @order to read the rows in file order as the steps"
        )
    replaced = int(np.sum(~keep[restart:]))
    back = rewinds(step)
    back = back[(back > restart) & (np.diff(step, prepend=np.inf)[back] < 0)]  # the newest
    stray = strays(step)  # run's own; a step written twice in a row is no resume, nor a stray
    stray = stray[stray > restart]
    if replaced > stray.size and not back.size:
        warns.append(f"{replaced} repeated step(s): kept the last copy of each")
    elif replaced and back.size:
        last = int(back[-1])
        warns.append(
            f"{replaced} row(s) replaced by a resume from an earlier checkpoint (the step goes "
            f"back from {step[last - 1]:g} to {step[last]:g} at the {_ordinal(last + 1)} row "
            "with a reward): kept the rows written after the resume"
        )
    if stray.size:
        b = int(stray[0])
        more = f" (and {stray.size - 1} more such row(s))" if stray.size > 1 else ""
        warns.append(
            f"step {step[b]:g} comes again at the {_ordinal(b + 1)} row with a reward, between "
            f"steps {step[b - 1]:g} and {step[b + 1]:g}{more}: read as a stray row, not a resume "
            "(the steps after it go on), so no row was dropped for it; its value is read at "
            f"step {step[b]:g} in place of the earlier copy's"
        )


def _ordinal(k: int) -> str:
    tail = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{tail}"
