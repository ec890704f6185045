"""Run logs: `RUN_DIR/metrics.jsonl` (one JSON object per step), `RUN_DIR/config.yaml`, and
optional TensorBoard / W&B reporting through their own libraries.

Metric names follow TRL where the quantity is the same (`reward`, `frac_reward_zero_std`, `kl`,
`clip_ratio/*`, ...); see the brief's list and docs/trainer.md. Non-finite floats are written as
null so that every JSON reader can load the file. Each line is flushed and fsync'ed: a killed run
loses at most the step in flight, and resuming truncates the file back to the checkpoint's offset
so that no step is missing or duplicated.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from pathlib import Path
from typing import Any

METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "config.yaml"


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return value


class MetricsLog:
    """Append-only JSONL metrics file with a byte offset for exact resume."""

    def __init__(self, run_dir: str | Path, *, truncate_at: int | None = None) -> None:
        self.path = Path(run_dir) / METRICS_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if truncate_at is None:
            self.path.write_text("")  # a fresh run starts an empty log
            return
        size = self.path.stat().st_size if self.path.exists() else 0
        if truncate_at > size:  # truncate() would pad with NUL bytes
            raise ValueError(
                f"{self.path} has {size} bytes, fewer than the {truncate_at} to keep: "
                "repair it first (pgrpo.train.resume.restore_log)"
            )
        with open(self.path, "r+b") as f:
            f.truncate(truncate_at)

    def append(self, metrics: dict[str, Any]) -> None:
        """Write one line, flushed and fsync'ed; a failed write (disk full) is cut back off, so
        the file never ends in a torn line."""
        from pgrpo.train.checkpoint import disk_full, is_disk_full

        line = (json.dumps(_clean(metrics), sort_keys=False, allow_nan=False) + "\n").encode()
        size = self.offset()
        try:
            with open(self.path, "ab") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            with contextlib.suppress(OSError), open(self.path, "r+b") as f:
                f.truncate(size)
            if is_disk_full(exc, self.path):
                raise disk_full(self.path, f"step {metrics.get('step')} of the log") from None
            raise

    def offset(self) -> int:
        """Bytes written so far (saved in each checkpoint)."""
        return self.path.stat().st_size if self.path.exists() else 0


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The per-step dicts of a run's metrics.jsonl (skips a torn last line of a killed run)."""
    out = []
    for line in (Path(run_dir) / METRICS_FILE).read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return out


class Reporters:
    """Optional TensorBoard / W&B sinks; each needs its own package and says how to get it."""

    def __init__(self, names: tuple[str, ...], run_dir: Path, config: dict[str, Any]) -> None:
        self.tb: Any = None
        self.wandb: Any = None
        if "tensorboard" in names:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                raise ImportError(
                    "run.report_to has 'tensorboard' but the tensorboard package is missing: "
                    "pip install tensorboard (or drop it from run.report_to)"
                ) from None
            self.tb = SummaryWriter(log_dir=str(run_dir / "tensorboard"))
        if "wandb" in names:
            try:
                import wandb
            except ImportError:
                raise ImportError(
                    "run.report_to has 'wandb' but wandb is missing: pip install wandb "
                    "(or drop it from run.report_to)"
                ) from None
            self.wandb = wandb.init(project="pgrpo", name=run_dir.name, config=config)

    def log(self, metrics: dict[str, Any]) -> None:
        step = int(metrics["step"])
        numbers = {
            k: float(v)
            for k, v in metrics.items()
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        }
        if self.tb is not None:
            for k, v in numbers.items():
                self.tb.add_scalar(k, v, step)
        if self.wandb is not None:
            self.wandb.log(numbers, step=step)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()
