"""Training-log readers: `read_log(path, format=None) -> RewardLog`, auto-detecting pgrpo JSONL,
TRL trainer_state.json, verl JSONL, W&B CSV and generic CSV (registry `LOG_READERS`)."""

from pgrpo.logs.base import COLUMN_KEYS, LogFormatError, LogReader, RewardLog, assemble
from pgrpo.logs.readers import LOG_READERS, read_jsonl, read_log

__all__ = [
    "COLUMN_KEYS",
    "LOG_READERS",
    "LogFormatError",
    "LogReader",
    "RewardLog",
    "assemble",
    "read_jsonl",
    "read_log",
]
