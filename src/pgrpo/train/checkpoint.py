"""Atomic, safe checkpoints and exact resume.

A checkpoint is a folder `RUN_DIR/checkpoints/step-<n>/` holding `state.pt` and `metrics.jsonl`.
`state.pt` has only tensors and plain values (loaded with `torch.load(weights_only=True)`, so a
checkpoint can never run code): the trainable weights (all parameters for a full fine-tune, the
adapter for LoRA), optimizer and scheduler states, the RNG states (python, numpy, torch), the data
position, the step, the byte offset and SHA-256 of metrics.jsonl at that step, and a digest of the
frozen weights (the base of a LoRA run, e.g. the tiny model's warm-up), which resume checks.
`metrics.jsonl` is the run's log up to that step, so a log lost or cut after the checkpoint can be
restored. The folder is written under `.tmp-step-<n>-<pid>` and moved into place with
`os.replace`; then `checkpoints/latest` (a one-line file, itself replaced atomically) names it,
and older checkpoints are deleted. A run killed at any instant leaves either the previous or the
new checkpoint, never a torn one; the next start removes the leftover temporary folders.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import pickle
import random
import re
import shutil
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

import numpy as np
import torch

CHECKPOINT_DIR = "checkpoints"
STATE_FILE = "state.pt"
LOG_COPY = "metrics.jsonl"
_STEP_NAME = re.compile(r"step-\d+")


class UnsafeCheckpointError(ValueError):
    """A checkpoint that holds more than tensors and plain values, or lies outside its run."""


class DiskFullError(OSError):
    """No space left while writing a run's files; the message names the file and the fix."""


@dataclass(frozen=True)
class Checkpoint:
    """What `load_checkpoint` returns: the step done, the data position and the log's state."""

    step: int
    data_position: dict[str, int]
    metrics_offset: int
    metrics_sha256: str
    path: Path


# ---------------------------------------------------------------------------------------------
# State as tensors and plain values
# ---------------------------------------------------------------------------------------------


def rng_state() -> dict[str, Any]:
    """python / numpy / torch RNG states as lists, ints, floats and tensors (weights_only-safe)."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "python": [int(version), [int(x) for x in internal], gauss],
        "numpy": {
            "kind": str(kind),
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch": torch.get_rng_state(),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((int(version), tuple(int(x) for x in internal), gauss))
    n = state["numpy"]
    keys = n["keys"].numpy().astype(np.uint32)
    np.random.set_state((n["kind"], keys, n["pos"], n["has_gauss"], n["cached_gaussian"]))
    torch.set_rng_state(state["torch"])


def trainable_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The parameters that training changes (LoRA: only the adapter)."""
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def frozen_digest(model: torch.nn.Module) -> str:
    """SHA-256 over the names, shapes and bytes of the parameters training does not change (the
    base of a LoRA run; empty for a full fine-tune). Resume refuses a base that differs."""
    h = hashlib.sha256()
    for name, p in model.named_parameters():
        if not p.requires_grad:
            h.update(f"{name}:{tuple(p.shape)}:{p.dtype}".encode())
            h.update(p.detach().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _sha256_prefix(path: Path, size: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read(size))
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------
# Save
# ---------------------------------------------------------------------------------------------


def disk_full(path: Path, what: str) -> DiskFullError:
    """The one-line error for ENOSPC/EDQUOT while writing `path`."""
    return DiskFullError(
        errno.ENOSPC,
        f"no space left on the device writing {what} ({path}): free space there, then continue "
        "with --resume (the last complete checkpoint is kept)",
    )


def is_disk_full(exc: BaseException, where: Path | None = None) -> bool:
    """ENOSPC/EDQUOT, or an error of a C++ writer (torch's zip writer reports a short write as
    RuntimeError "unexpected pos") while `where`'s device has less than 1 MiB free."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    if "No space left on device" in str(exc) or "(os error 28)" in str(exc):
        return True  # a Rust writer's (safetensors' SafetensorError) ENOSPC
    if where is None or not isinstance(exc, (OSError, RuntimeError)):
        return False
    probe = Path(where)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return shutil.disk_usage(probe).free < 1 << 20
    except OSError:
        return False


@contextlib.contextmanager
def disk_full_is_one_line(path: Path, what: str) -> Iterator[None]:
    """Turn running out of space while writing `what` at `path` into DiskFullError."""
    try:
        yield
    except Exception as exc:
        if is_disk_full(exc, path):
            raise disk_full(path, what) from None
        raise


def save_checkpoint(
    run_dir: Path,
    *,
    step: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    data_position: dict[str, int],
    metrics_offset: int,
    base_digest: str | None = None,
) -> Path:
    """Write checkpoint `step` atomically and make it the latest; returns its folder.

    Raises DiskFullError (the previous checkpoint intact, the partial folder removed) when the
    device is full."""
    root = Path(run_dir) / CHECKPOINT_DIR
    final = root / f"step-{step}"
    tmp = root / f".tmp-step-{step}-{os.getpid()}"
    log = Path(run_dir) / LOG_COPY
    state = {
        "format": 2,
        "step": int(step),
        "model": trainable_state(model),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "rng": rng_state(),
        "data_position": {k: int(v) for k, v in data_position.items()},
        "metrics_offset": int(metrics_offset),
        "metrics_sha256": _sha256_prefix(log, metrics_offset) if log.exists() else "",
        "base_digest": base_digest if base_digest is not None else frozen_digest(model),
    }
    try:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        with open(tmp / STATE_FILE, "wb") as f:  # a file object: ENOSPC arrives as OSError
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        config = Path(run_dir) / CONFIG_COPY
        if config.is_file():  # the settings this checkpoint was trained with (resume checks)
            shutil.copyfile(config, tmp / CONFIG_COPY)
        with open(log, "rb") if log.exists() else open(os.devnull, "rb") as src:
            with open(tmp / LOG_COPY, "wb") as dst:
                dst.write(src.read(metrics_offset))
                dst.flush()
                os.fsync(dst.fileno())
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        pointer = root / f".latest-{os.getpid()}"
        pointer.write_text(final.name + "\n")
        os.replace(pointer, root / "latest")
    except (OSError, RuntimeError) as exc:
        full = is_disk_full(exc, root)  # before the partial folder frees its space
        shutil.rmtree(tmp, ignore_errors=True)
        if full:
            raise disk_full(tmp, f"checkpoint step-{step}") from None
        raise
    for old in root.iterdir():
        if old.name.startswith("step-") and old != final:
            shutil.rmtree(old, ignore_errors=True)
    return final


def remove_partial(run_dir: Path) -> list[str]:
    """Delete `.tmp-step-*` folders, `.latest-*` files and a `.tmp-final-*` folder a killed or
    disk-full save left behind;
    returns their names. Call only while holding the run's lock."""
    root = Path(run_dir) / CHECKPOINT_DIR
    removed = []
    for p in Path(run_dir).glob(".tmp-final-*"):  # a final/ being written (`_save_final`)
        shutil.rmtree(p, ignore_errors=True)
        removed.append(p.name)
    if not root.is_dir():
        return sorted(removed)
    for p in root.iterdir():
        if p.name.startswith((".tmp-step-", ".latest-")):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
            removed.append(p.name)
    return sorted(removed)


# ---------------------------------------------------------------------------------------------
# Load
# ---------------------------------------------------------------------------------------------


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The folder `checkpoints/latest` names, or None when there is none. Raises
    UnsafeCheckpointError when it names anything but a `step-<n>` folder inside checkpoints/, or
    one without its state file."""
    root = Path(run_dir) / CHECKPOINT_DIR
    pointer = root / "latest"
    if not pointer.is_file():
        return None
    name = pointer.read_text(errors="replace").strip()
    path = root / name
    inside = root.resolve()
    if (
        not _STEP_NAME.fullmatch(name)
        or path.resolve().parent != inside
        or (path / STATE_FILE).resolve().parent != path.resolve()
    ):
        raise UnsafeCheckpointError(
            f"{pointer} names {name[:80]!r}, which is not a step-<n> folder inside {root}: "
            "refused; write the name of a checkpoint folder there, or delete the file to start "
            "the run afresh"
        )
    if not (path / STATE_FILE).is_file():  # save_checkpoint never leaves a dangling pointer
        raise UnsafeCheckpointError(
            f"{pointer} names {name}, which has no {STATE_FILE} (deleted or moved): restore "
            f"that folder, or start the run afresh with --overwrite"
        )
    return path


def _unreadable(file: Path, exc: BaseException) -> NoReturn:
    """Raise the UnsafeCheckpointError for the zip archive `file` that torch.load refused."""
    if isinstance(exc, pickle.UnpicklingError):
        reason = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else "not a tensor"
        raise UnsafeCheckpointError(
            f"{file} holds objects other than tensors and plain values ({reason}): refused, "
            "loading it could run code. Load only checkpoints written by this pgrpo version "
            "(older ones stored numpy objects: retrain, or resume with the pgrpo that wrote it)"
        ) from None
    if isinstance(exc, OSError):
        raise UnsafeCheckpointError(
            f"could not read {file} ({type(exc).__name__}: {str(exc)[:120]}); if a run is "
            "writing this folder it may have just replaced that checkpoint: try again"
        ) from None
    raise UnsafeCheckpointError(
        f"{file} is damaged ({type(exc).__name__}: {str(exc)[:120]}): restore it from a "
        "backup, or start the run afresh with --overwrite"
    ) from None


def _failing_member(file: Path | BinaryIO) -> str | None:
    """The first member of the zip archive `file` (a path or an open binary file) whose CRC
    does not match, else None."""
    try:
        with zipfile.ZipFile(file) as archive:
            return archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        return f"the archive ({type(exc).__name__})"


def _crc_damaged(file: Path, member: str) -> NoReturn:
    raise UnsafeCheckpointError(
        f"{file} is damaged ({member} fails its CRC check: the bytes changed after torch.save "
        "wrote them): restore it from a backup, or start the run afresh with --overwrite"
    ) from None


def read_state(path: Path) -> dict[str, Any]:
    """`state.pt` of checkpoint folder `path`, loaded with weights_only=True (tensors and plain
    values only: a pickled object is refused before it can run). Every member's CRC-32, which
    torch.save writes and torch.load does not check, is checked after the load: bytes changed
    inside a tensor loaded silently before (~0.2 s per 400 MB)."""
    file = Path(path) / STATE_FILE
    try:
        with open(file, "rb") as f:  # one handle for both reads: a file replaced in between
            state = torch.load(f, weights_only=True, map_location="cpu")
            f.seek(0)
            bad = _failing_member(f)
    except Exception as exc:  # a damaged pickle fails in any way (IndexError, UnicodeError, ...)
        if file.is_file() and not zipfile.is_zipfile(file):  # torch.save writes a zip archive
            raise UnsafeCheckpointError(
                f"{file} is damaged (truncated or overwritten: not the zip archive torch.save "
                "writes): restore it from a backup, or start the run afresh with --overwrite"
            ) from None
        bad = _failing_member(file)
        if bad is not None:  # corruption, not foreign objects: the CRCs of the writer disagree
            _crc_damaged(file, bad)
        _unreadable(file, exc)
    if bad is not None:
        _crc_damaged(file, bad)
    if not isinstance(state, dict) or state.get("format") != 2:
        raise UnsafeCheckpointError(
            f"{file} is not a pgrpo checkpoint of this version (format 2): retrain, or resume "
            "with the pgrpo version that wrote it"
        )
    lacking = [k for k in STATE_KEYS if k not in state]
    if lacking:  # `error: model` was all a KeyError said
        raise UnsafeCheckpointError(
            f"{file} lacks {', '.join(lacking)} (a format-2 checkpoint holds "
            f"{', '.join(STATE_KEYS)}): restore it from a backup, or start the run afresh with "
            "--overwrite"
        )
    return state


CONFIG_COPY = "config.yaml"
"""The run's config.yaml, copied into each checkpoint folder (`resume.check_checkpoint_config`)."""

FINAL_STEP_FILE = "pgrpo_final.json"
"""In RUN_DIR/final: {"step": n}, the step whose model final/ holds (since session 37)."""


def final_step(run_dir: Path) -> int | None:
    """The step whose model RUN_DIR/final holds, from its FINAL_STEP_FILE; None without one (no
    final/, or one written before pgrpo recorded its step)."""
    import json

    try:
        step = json.loads((Path(run_dir) / "final" / FINAL_STEP_FILE).read_text()).get("step")
    except (OSError, ValueError, AttributeError):
        return None
    return step if isinstance(step, int) else None


STATE_KEYS = (
    "model",
    "base_digest",
    "optimizer",
    "scheduler",
    "rng",
    "step",
    "data_position",
    "metrics_offset",
    "metrics_sha256",
)


def load_weights(
    model: torch.nn.Module, state: dict[str, Any], path: Path, base_digest: str | None = None
) -> None:
    """Copy the checkpoint's trainable weights into `model` after checking its frozen base
    (`base_digest`: `frozen_digest(model)` if the caller has it)."""
    params = dict(model.named_parameters())
    missing = sorted(set(state["model"]) - set(params))
    if missing:
        raise ValueError(
            f"checkpoint {path} has weights the model lacks ({missing[:3]}...): use the same "
            "model.name and model.lora_rank as the run that wrote it"
        )
    trainable = {n for n, p in params.items() if p.requires_grad}
    absent = sorted(trainable - set(state["model"]))
    wrong = [
        f"{n} {tuple(v.shape)} vs {tuple(params[n].shape)}"
        for n, v in state["model"].items()
        if not isinstance(v, torch.Tensor) or v.shape != params[n].shape
    ]
    if absent or wrong:  # copy_ broadcast a wrong shape, then fused AdamW corrupted memory
        what = f"shapes differ ({', '.join(wrong[:2])})" if wrong else f"lacks {absent[:3]}"
        raise ValueError(
            f"checkpoint {path} does not fit the model loaded now: {what}. The model settings "
            "(model.name, model.lora_rank, model.tiny_*) differ from the run that wrote it, "
            "e.g. an edited config.yaml: restore them, or start afresh with --overwrite"
        )
    digest = base_digest if base_digest is not None else frozen_digest(model)
    if digest != state["base_digest"]:
        raise ValueError(
            f"checkpoint {path} was trained on a different frozen base model than the one loaded "
            "now (weights digest differs): use the same model.name, model options and seed as "
            "the run that wrote it (for the tiny model, the same task and warm-up settings)"
        )
    with torch.no_grad():
        for name, value in state["model"].items():
            params[name].copy_(value)


def load_checkpoint(
    path: Path,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    base_digest: str | None = None,
) -> Checkpoint:
    """Restore weights, optimizer, scheduler and RNG states in place."""
    state = read_state(path)
    load_weights(model, state, path, base_digest)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    set_rng_state(state["rng"])
    return Checkpoint(
        step=int(state["step"]),
        data_position={k: int(v) for k, v in state["data_position"].items()},
        metrics_offset=int(state["metrics_offset"]),
        metrics_sha256=str(state["metrics_sha256"]),
        path=Path(path),
    )
