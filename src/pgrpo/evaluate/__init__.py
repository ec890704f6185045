"""Evaluation: accuracy and unbiased pass@k on a task split, seeds aggregated with intervals,
paired comparisons (Welch on seed means, the paired t over problems), and the
search-compression analysis (pass@k curves, base vs trained)."""

from __future__ import annotations

from pgrpo.evaluate.metrics import (
    EvalRun,
    aggregate,
    compare,
    default_ks,
    pass_at_k_curve,
    search_compression,
)
from pgrpo.evaluate.runner import EvalConfig, eval_document, evaluate, read_eval, write_eval

__all__ = [
    "EvalConfig",
    "EvalRun",
    "aggregate",
    "compare",
    "default_ks",
    "eval_document",
    "evaluate",
    "pass_at_k_curve",
    "read_eval",
    "search_compression",
    "write_eval",
]
