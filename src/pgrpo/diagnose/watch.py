"""Follow a growing training log and assess it live: the library side of `pgrpo watch`.

`watch_log(path, config)` re-reads the log (any `pgrpo.logs` format: pgrpo JSONL, TRL
trainer_state.json, verl JSONL or console log, W&B CSV, TensorBoard events) whenever it changes,
runs `assess_live` every `every` new points and calls `on_status` with each `LiveStatus`. It
returns when a stop rule holds (`stop=True`), when `timeout_s` has passed, when the log has not
grown for `idle_s`, or after one assessment with `once=True`. A log being rewritten (a partial
JSON line, a trainer_state.json caught mid-write) is read again at the next poll, not fatal;
a log that never becomes readable is reported in `error`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pgrpo.diagnose.live import STOP_RULES, LiveConfig, LiveStatus, assess_live, rule_patience
from pgrpo.logs import LogFormatError, RewardLog, read_log


@dataclass(frozen=True)
class WatchResult:
    """How following ended. ended: stop | timeout | idle | once | error; status: the last
    assessment (None when the log never had a usable point); error: the last read error."""

    ended: str
    status: LiveStatus | None
    points: int
    error: str = ""
    metrics: dict[str, float] = field(default_factory=dict)


def _signature(path: Path) -> tuple[float, int]:
    """(mtime, size) of the file, or of the newest file under a directory."""
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    stats = [p.stat() for p in files if p.exists()]
    return (max((s.st_mtime for s in stats), default=0.0), sum(s.st_size for s in stats))


def watch_log(
    path: str | Path,
    config: LiveConfig | None = None,
    *,
    log_format: str | None = None,
    read_options: dict[str, Any] | None = None,
    every: int = 5,
    poll_s: float = 2.0,
    timeout_s: float | None = None,
    idle_s: float | None = None,
    once: bool = False,
    on_status: Callable[[LiveStatus, RewardLog], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> WatchResult:
    """Follow `path` until a stop rule holds or it times out (see the module docstring)."""
    cfg = config or LiveConfig()
    path = Path(path)
    start = last_growth = clock()
    sig, assessed_at, history, error = None, 0, (), ""
    last: LiveStatus | None = None
    latest: RewardLog | None = None
    while True:
        now = clock()
        new_sig = _signature(path) if path.exists() else None
        if new_sig is not None and new_sig != sig:
            sig, last_growth = new_sig, now
            try:
                log = read_log(path, format=log_format, **(read_options or {}))
                error = ""
            except LogFormatError as exc:  # not written yet / caught mid-write: retry
                log, error = None, str(exc)
            latest = log or latest
            if log is not None and len(log) >= assessed_at + every:
                if once:  # replay the assessments the patience needs, ending at the last point
                    history = _replay(log, cfg, every)
                assessed_at = len(log)
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
            if latest is not None and len(latest) > assessed_at:  # the points since the last one
                assessed_at = len(latest)
                last = assess_live(latest, cfg, _replay(latest, cfg, every) if once else history)
                if on_status is not None:
                    on_status(last, latest)
                if last.stop:
                    return WatchResult("stop", last, assessed_at, metrics=_m(start, clock))
            if last is None:
                return WatchResult("error", None, 0, error or _missing(path, new_sig))
            return WatchResult(ended, last, assessed_at, error, _m(start, clock))
        time.sleep(poll_s)


def _prefix(log: RewardLog, k: int) -> RewardLog:
    """The first k points of a log (what a watcher would have seen then)."""
    cols = {name: col[:k] for name, col in log.columns.items()}
    return replace(log, step=log.step[:k], reward=log.reward[:k], columns=cols)


def _replay(log: RewardLog, cfg: LiveConfig, every: int) -> tuple[LiveStatus, ...]:
    """Assessments at the patience - 1 earlier sizes (every `every` points) before the last
    (the longest patience of the stop rules)."""
    need = max(rule_patience(cfg, r) for r in STOP_RULES)
    sizes = [len(log) - j * every for j in range(need - 1, 0, -1)]
    history: tuple[LiveStatus, ...] = ()
    for k in sizes:
        if k >= 1:
            history = (*history, assess_live(_prefix(log, k), cfg, history))
    return history


def _missing(path: Path, sig: Any) -> str:
    return f"{path}: no such file or directory" if sig is None else f"{path}: no usable points"


def _m(start: float, clock: Callable[[], float]) -> dict[str, float]:
    return {"elapsed_s": clock() - start}
