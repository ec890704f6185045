"""Follow a growing training log and assess it live: the library side of `pgrpo watch`.

`watch_log(path, config)` re-reads the log (any `pgrpo.logs` format: pgrpo JSONL, TRL
trainer_state.json, verl JSONL or console log, W&B CSV, TensorBoard events) whenever it changes,
runs `assess_live` every `every` new rows (points, and NaN / inf rewards after the last, `rows`)
and calls `on_status` with each `LiveStatus`: it assesses when the log reaches a new multiple of
`every` rows, at its newest row. A read that passes several multiples (a log written in chunks)
first makes, decisions only and without `on_status`, the assessments at the multiples in
between that the stop rules' patience needs (`_replay`, as `once` does from the start), so the
patience counts `every` rows, not reads. It
returns when a stop rule holds (`stop=True`), when `timeout_s` has passed, when the log has not
grown for `idle_s`, or after one assessment with `once=True`.

The log is read live (`read_log(..., live=True)`): a last line without its newline is left for
the next poll, and of several runs appended to one file only the newest is read (`newest_run`).
A log not readable yet (missing, empty, no complete record, a JSON file caught mid-write:
`LogNotReadyError`) or a file removed as it is read (OSError: a trainer deleting old
checkpoints) is read again at the next poll; any other `LogFormatError` (records but no reward
column, a format that does not match) ends the watch at once with `ended="error"`. When a read
does not continue the points read before (the file was cut back, rotated or rewritten, a run
resumed from a checkpoint with new values, a new run appended), the watcher starts afresh on the
new points (no earlier assessment counts towards a stop rule's patience) and tells `on_note` once.
Until the log is first read, each new reason it is not ready (no such file, an unrecognised
format, no record yet) goes to `on_note` once: a watch pointed at the wrong file says why it
waits instead of waiting in silence.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from pgrpo.diagnose.live import STOP_RULES, LiveConfig, LiveStatus, assess_live, rule_patience
from pgrpo.logs import LogFormatError, LogNotReadyError, RewardLog, read_log


@dataclass(frozen=True)
class WatchResult:
    """How following ended. ended: stop | timeout | idle | once | error; status: the last
    assessment (None when the log never had a usable point); points: the rows (`rows`: points,
    and NaN / inf rewards after the last) it was made on (of the newest run, after a restart);
    error: the last read error."""

    ended: str
    status: LiveStatus | None
    points: int
    error: str = ""
    metrics: dict[str, float] = field(default_factory=dict)


def _signature(path: Path) -> tuple[float, int] | None:
    """(newest mtime, total size) of the file, or of the files under a directory; None when the
    path is missing. OSError when a file goes while it looks (the caller polls again)."""
    if not path.exists():
        return None
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    stats = [p.stat() for p in files]
    return (max((s.st_mtime for s in stats), default=0.0), sum(s.st_size for s in stats))


def watch_log(
    path: str | Path,
    config: LiveConfig | None = None,
    *,
    log_format: str | None = None,
    read_options: dict[str, Any] | None = None,
    given: Mapping[str, Any] | None = None,
    every: int = 5,
    poll_s: float = 2.0,
    timeout_s: float | None = None,
    idle_s: float | None = None,
    once: bool = False,
    on_status: Callable[[LiveStatus, RewardLog], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> WatchResult:
    """Follow `path` until a stop rule holds or it times out (see the module docstring).
    given: the run's settings the log does not say (`settings.with_given`: group_size,
    batch_prompts, ...), over each read's hyperparameters, as `pgrpo diagnose` applies them."""
    from pgrpo.dynamics.settings import with_given

    cfg = config or LiveConfig()
    path = Path(path)
    opts = {**(read_options or {}), "live": True}
    start = last_growth = clock()
    seen = sig = None  # the log's signature at the last poll / at the last read
    assessed_at, grid, history, error = 0, 0, (), ""  # grid: the multiples of `every` assessed
    told: set[str] = set()  # the not-ready reasons told to on_note
    last: LiveStatus | None = None
    latest: RewardLog | None = None
    while True:
        now = clock()
        log = None
        try:
            new_sig = _signature(path)
            if new_sig != seen:
                seen, last_growth = new_sig, now
            if new_sig is None:
                _tell_wait(_missing(path, None), path, told, on_note if latest is None else None)
            if new_sig is not None and new_sig != sig:
                sig, error = new_sig, ""
                log = with_given(read_log(path, format=log_format, **opts), given)
        except LogNotReadyError as exc:  # not written yet / caught mid-write: next change
            error = str(exc)
            _tell_wait(error, path, told, on_note if latest is None else None)
        except OSError as exc:  # a file removed as it was read: read again at the next poll
            sig, error = None, f"{path}: {exc.strerror or exc}"
        except LogFormatError as exc:  # records that will never give a reward curve
            return WatchResult("error", last, assessed_at, str(exc), _m(start, clock))
        if log is not None:
            news = _news(latest, log)
            if news:  # not the points read before: start afresh on the new ones
                history, assessed_at, grid = (), 0, 0
                if on_note is not None:
                    on_note(news)
            latest = log
            if rows(log) // every > grid:
                # the assessments a watcher reading every row would have made since the last
                # one, at the multiples of `every` (as many as the patience needs), the last of
                # them at the newest row: a log written in chunks (a trainer_state.json at
                # checkpoints) grows by many rows at a read, and one assessment per read left
                # the patience counting reads (review, 2026-12-05)
                history = _replay(log, cfg, every, grid=grid, history=history)
                assessed_at, grid = rows(log), rows(log) // every
                last = assess_live(log, cfg, history)
                history = (*history, last)
                if on_status is not None:
                    on_status(last, log)
                if last.stop:
                    return WatchResult("stop", last, assessed_at, metrics=_m(start, clock))
        ended = "once" if once else None
        if timeout_s is not None and now - start >= timeout_s:
            ended = "timeout"
        if idle_s is not None and now - last_growth >= idle_s:
            ended = "idle"
        if ended is not None:
            if latest is not None and rows(latest) > assessed_at:  # the rows since the last one
                assessed_at = rows(latest)
                last = assess_live(latest, cfg, _replay(latest, cfg, every) if once else history)
                if on_status is not None:
                    on_status(last, latest)
                if last.stop:
                    return WatchResult("stop", last, assessed_at, metrics=_m(start, clock))
            if last is None:
                return WatchResult("error", None, 0, error or _missing(path, seen))
            return WatchResult(ended, last, assessed_at, error, _m(start, clock))
        time.sleep(poll_s)


def _news(before: RewardLog | None, log: RewardLog) -> str:
    """'' when `log` continues `before` (the log at the previous read: the same points, then
    maybe more); else what changed, naming the step from which the watcher starts afresh."""
    row = log.metrics.get("restart_row")
    if row is not None and (before is None or before.metrics.get("restart_row") != row):
        return (
            f"a new run starts at step {log.metrics['restart_step']:g} of the log, after "
            f"{row:.0f} row(s) of an earlier run: assessing the new run alone"
        )
    if before is None:
        return ""
    n = min(len(before), len(log))
    differ = (before.step[:n] != log.step[:n]) | (before.reward[:n] != log.reward[:n])
    same = int(np.argmax(differ)) if differ.any() else n
    if same == len(before):
        return ""
    if same == len(log):
        return (
            f"the log was cut back to step {log.step[-1]:g} (a resume from a checkpoint, or a "
            f"rewrite): assessing its {len(log)} point(s) afresh"
        )
    return (
        f"the log changed at step {log.step[same]:g} (a rotated or rewritten file, or a resume "
        f"that logged new values): assessing its {len(log)} point(s) afresh"
    )


def rows(log: RewardLog) -> int:
    """The rows a watcher has seen: the points, and the NaN / inf rewards logged after the last
    of them (`nonfinite_tail`). A run that diverged logs only those, and they are what makes it
    read `collapsed`: counting points alone, its watch never assessed again and never stopped
    (review, 2026-12-05)."""
    return len(log) + int(log.metrics.get("nonfinite_tail", 0))


def _prefix(log: RewardLog, k: int) -> RewardLog:
    """The log as its first k rows (`rows`) were (what a watcher would have seen then): k
    points and no non-finite tail (it came after them), or every point and the first k -
    len(log) rewards of the tail."""
    metrics = {
        m: v for m, v in log.metrics.items() if m not in ("nonfinite_tail", "nonfinite_from")
    }
    if k > len(log):
        metrics.update(nonfinite_tail=float(k - len(log)),
                       nonfinite_from=log.metrics["nonfinite_from"])  # fmt: skip
        return replace(log, metrics=metrics)
    cols = {name: col[:k] for name, col in log.columns.items()}
    return replace(log, step=log.step[:k], reward=log.reward[:k], columns=cols, metrics=metrics)


def _replay(
    log: RewardLog,
    cfg: LiveConfig,
    every: int,
    grid: int = 0,
    history: tuple[LiveStatus, ...] = (),
) -> tuple[LiveStatus, ...]:
    """`history` and the assessments (decisions only) a watcher reading every row would have
    made before the one at the log's last row (`rows`): at the multiples of `every` past the
    `grid`-th and below the last row's, at most the longest patience of the stop rules - 1 of
    them (none without a stop rule: nothing then reads them). A stop that one of them would have
    requested is not reported by itself: the decision is the last row's, as a watcher that
    read the rows only now can take it."""
    if not cfg.stop_on:
        return history
    need = max(rule_patience(cfg, r) for r in STOP_RULES)
    for g in range(grid + 1, rows(log) // every)[-(need - 1) :] if need > 1 else ():
        history = (*history, assess_live(_prefix(log, g * every), cfg, history,
                                         decision_only=True))  # fmt: skip
    return history


def _tell_wait(reason: str, path: Path, told: set[str], on_note) -> None:
    """Tell `on_note` (None: nobody) why the log is not read yet, once per kind of reason."""
    kind = "".join(c for c in reason if not c.isdigit())  # mid-write at line 3 or 4: one reason
    if on_note is None or kind in told:
        return
    told.add(kind)
    head = f"{path}: "  # the note names the log already
    reason = reason[len(head) :] if reason.startswith(head) else reason
    on_note(f"waiting: {reason}; read again when it changes (--timeout or --idle end the wait)")


def _missing(path: Path, sig: Any) -> str:
    return f"{path}: no such file or directory" if sig is None else f"{path}: no usable points"


def _m(start: float, clock: Callable[[], float]) -> dict[str, float]:
    return {"elapsed_s": clock() - start}
