"""TensorBoard event files (`events.out.tfevents.*`) as a log reader, registered as
`tensorboard` in `LOG_READERS`.

Read with TensorBoard's own `EventAccumulator` (`pip install tensorboard==2.21.0`; imported only
when such a log is read), one event file at a time. Scalars (`add_scalar`, as transformers'
TensorBoardCallback writes them: `train/reward`, `train/rewards/<func>/mean`, ...) and scalar
tensors (TF2 summaries) are turned into one record per step, in the order they were written
(`_run_records`: a run resumed into the same folder writes a new event file), and cleaned by
`assemble` like every other format. A directory is searched recursively; when it holds several
runs (event files in several folders) the run with the newest event file is read and a warning
says so. Hyperparameters come from a `training_args.json` / `config.yaml` beside the run when
present.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pgrpo.logs.base import LogFormatError, LogNotReadyError, LogReader, RewardLog, assemble
from pgrpo.logs.readers import LOG_READERS, _config_hyper

EVENT_GLOB = "events.out.tfevents.*"


def _event_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path] if path.name.startswith("events.out.tfevents.") else []
    return sorted(path.rglob(EVENT_GLOB)) if path.is_dir() else []


def detect_tensorboard(path: Path) -> bool:
    return bool(_event_files(path))


def _accumulator(path: Path):
    """TensorBoard's EventAccumulator over one event file, loaded, and tensor_util."""
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
        from tensorboard.util import tensor_util
    except ImportError:
        raise LogFormatError(
            f"{path}: reading TensorBoard event files needs the tensorboard package: "
            "pip install tensorboard==2.21.0"
        ) from None
    acc = EventAccumulator(str(path), size_guidance={"scalars": 0, "tensors": 0})
    try:
        acc.Reload()
    except Exception as exc:  # a corrupt or truncated record file
        raise LogFormatError(f"{path}: cannot read the event file ({exc})") from None
    return acc, tensor_util


def _file_records(path: Path) -> list[tuple[float, dict[str, float]]]:
    """One event file's records as written: (wall time, {"step": step, tag: value, ...}) per
    step, in write order (the first wall time of its events; a step a tag logs again in the same
    file starts a record of its own). Scalars and scalar tensors (TF2 summaries)."""
    acc, tensor_util = _accumulator(path)
    by_key: dict[tuple[float, int], dict[str, float]] = {}
    wall: dict[tuple[float, int], float] = {}
    tags = acc.Tags()
    events = [(t, ev, float(ev.value)) for t in tags.get("scalars", []) for ev in acc.Scalars(t)]
    for tag in tags.get("tensors", []):
        for ev in acc.Tensors(tag):
            arr = tensor_util.make_ndarray(ev.tensor_proto)
            if arr.size == 1 and arr.dtype.kind in "fiu":
                events.append((tag, ev, float(arr.reshape(()))))
    times: dict[tuple[str, float], int] = {}  # a tag's copies of a step so far
    for tag, ev, value in events:
        k = times[tag, float(ev.step)] = times.get((tag, float(ev.step)), -1) + 1
        key = (float(ev.step), k)
        by_key.setdefault(key, {"step": float(ev.step)})[tag] = value
        wall[key] = min(wall.get(key, np.inf), float(ev.wall_time))
    return sorted(((wall[k], rec) for k, rec in by_key.items()), key=lambda w: (w[0], w[1]["step"]))


def _run_records(files: list[Path]) -> list[dict[str, float]]:
    """The records of a run's event files in write order: the files by their first wall time
    (a run resumed from a checkpoint writes a new file, which re-logs the steps from its
    checkpoint on), each file's records in its own order. `assemble` then drops the steps the
    resume superseded, as it does a CSV's (review 41: the files' steps were merged and sorted,
    so the discarded trajectory's steps beyond the resume's last were read as its newest)."""
    per_file = [recs for f in files if (recs := _file_records(f))]
    per_file.sort(key=lambda recs: recs[0][0])
    return [rec for recs in per_file for _, rec in recs]


def read_tensorboard(path: Path, **options: Any) -> RewardLog:
    files = _event_files(path)
    if not files:
        raise LogNotReadyError(f"{path}: no {EVENT_GLOB} file here or below")
    runs = sorted({f.parent for f in files}, key=lambda d: max(
        f.stat().st_mtime for f in files if f.parent == d))  # fmt: skip
    run = runs[-1] if path.is_dir() else path
    warns = []
    if len(runs) > 1:
        warns.append(f"{len(runs)} TensorBoard runs under {path}; read the newest, {run} "
                     "(point at one run's folder to read another)")  # fmt: skip
    records = _run_records(sorted(f for f in files if f.parent == run) if run.is_dir() else [run])
    folder = run if run.is_dir() else run.parent
    names = ("training_args.json", "args.json", "config.yaml", "config.json")
    cands = [d / n for d in (folder, folder.parent, folder.parent.parent) for n in names]
    hyper = _config_hyper(cands, warns)
    return assemble(records, fmt="tensorboard", source=str(run), warnings=warns,
                    hyperparameters=hyper, **options)  # fmt: skip


LOG_READERS.add(
    "tensorboard",
    LogReader("tensorboard", detect_tensorboard, read_tensorboard, "TensorBoard event files"),
)
