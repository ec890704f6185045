"""TensorBoard event files (`events.out.tfevents.*`) as a log reader, registered as
`tensorboard` in `LOG_READERS`.

Read with TensorBoard's own `EventAccumulator` (`pip install tensorboard==2.21.0`; imported only
when such a log is read). Scalars (`add_scalar`, as transformers' TensorBoardCallback writes
them: `train/reward`, `train/rewards/<func>/mean`, ...) and scalar tensors (TF2 summaries) are
turned into one record per step and cleaned by `assemble` like every other format. A directory
is searched recursively; when it holds several runs (event files in several folders) the run
with the newest event file is read and a warning says so. Hyperparameters come from a
`training_args.json` / `config.yaml` beside the run when present.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pgrpo.logs.base import LogFormatError, LogNotReadyError, LogReader, RewardLog, assemble
from pgrpo.logs.readers import LOG_READERS, _config_hyper

EVENT_GLOB = "events.out.tfevents.*"


def _event_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path] if path.name.startswith("events.out.tfevents.") else []
    return sorted(path.rglob(EVENT_GLOB)) if path.is_dir() else []


def detect_tensorboard(path: Path) -> bool:
    return bool(_event_files(path))


def _scalars(run_dir: Path) -> tuple[dict[float, dict[str, float]], int]:
    """(step -> {tag: value} for every scalar / scalar-tensor tag of one run folder, the most
    events any tag has on a step it already had: the last one is kept)."""
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
        from tensorboard.util import tensor_util
    except ImportError:
        raise LogFormatError(
            f"{run_dir}: reading TensorBoard event files needs the tensorboard package: "
            "pip install tensorboard==2.21.0"
        ) from None
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "tensors": 0})
    try:
        acc.Reload()
    except Exception as exc:  # a corrupt or truncated record file
        raise LogFormatError(f"{run_dir}: cannot read the event file(s) ({exc})") from None
    by_step: dict[float, dict[str, float]] = {}
    repeats = 0  # events on a step the tag already had (a run resumed into the same folder)
    tags = acc.Tags()
    for tag in tags.get("scalars", []):
        events = acc.Scalars(tag)
        repeats = max(repeats, len(events) - len({ev.step for ev in events}))
        for ev in events:
            by_step.setdefault(float(ev.step), {})[tag] = float(ev.value)
    for tag in tags.get("tensors", []):
        events = acc.Tensors(tag)
        repeats = max(repeats, len(events) - len({ev.step for ev in events}))
        for ev in events:
            arr = tensor_util.make_ndarray(ev.tensor_proto)
            if arr.size == 1 and arr.dtype.kind in "fiu":
                by_step.setdefault(float(ev.step), {})[tag] = float(arr.reshape(()))
    return by_step, repeats


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
    by_step, repeats = _scalars(run)
    if repeats:  # the words of the other readers' repeats (event files give no write order)
        warns.append(f"{repeats} repeated step(s) (a restart?): kept the last copy of each")
    records = [{**tags, "step": step} for step, tags in sorted(by_step.items())]
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
