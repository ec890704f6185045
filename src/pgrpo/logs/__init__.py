"""Training-log readers: `read_log(path, format=None) -> RewardLog`, auto-detecting pgrpo JSONL,
TRL trainer_state.json and console output, verl JSONL, W&B CSV, generic CSV and TensorBoard
event files (registry
`LOG_READERS`)."""

from pgrpo.logs import csvlog as _csvlog  # noqa: F401  (registers the CSV readers)
from pgrpo.logs import tensorboard as _tensorboard  # noqa: F401  (registers the reader)
from pgrpo.logs import trl_console as _trl_console  # noqa: F401  (registers the reader)
from pgrpo.logs import trl_state as _trl_state  # noqa: F401  (registers the reader)
from pgrpo.logs import verl as _verl  # noqa: F401  (registers the verl readers)
from pgrpo.logs import wandb_run as _wandb_run  # noqa: F401  (registers the reader)
from pgrpo.logs.base import (
    COLUMN_KEYS,
    LogFormatError,
    LogNotReadyError,
    LogReader,
    RewardLog,
    assemble,
)
from pgrpo.logs.readers import LOG_READERS, read_jsonl, read_log

__all__ = [
    "COLUMN_KEYS",
    "LOG_READERS",
    "LogFormatError",
    "LogNotReadyError",
    "LogReader",
    "RewardLog",
    "assemble",
    "read_jsonl",
    "read_log",
]
