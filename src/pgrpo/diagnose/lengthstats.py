"""Completions cut at the length limit: the share a log shows (`truncation_reading`), and that
share over the last tenth of the run (`truncated_share_now`), the one reading of the
`truncated_completions` run check (`pgrpo.diagnose.truncation`) and of the advantage-degeneracy
rule's action (`pgrpo.diagnose.starvation.degeneracy_action`).

Why it matters: a completion cut at `max_completion_length` usually scores 0 (no final answer, no
EOS), so a group whose completions are all cut scores all-equal and has zero advantage; the run
looks flat or degenerate for a reason the reward curve does not show.

What it reads, strongest first:
1. `logged`: the share of completions cut, logged per step. pgrpo's trainer and TRL's
   GRPOTrainer log `completions/clipped_ratio` (TRL: the share of completions without EOS,
   trl/trainer/grpo_trainer.py, beside `completions/mean_terminated_length`); verl logs
   `response_length/clip_ratio` (mean of response_length == max_response_length,
   verl/trainer/ppo/metric_utils.py `compute_data_metrics`); OpenRLHF logs
   `response_clip_ratio` (response_length >= max_new_tokens, openrlhf/trainer/ppo_utils/
   experience_maker.py). `pgrpo.logs.base.COLUMN_KEYS` reads all three as
   `completions/clipped_ratio`.
2. `limit`: the mean completion length against a stated limit. A step whose mean is within
   LIMIT_TOLERANCE of the limit had every completion cut (1), any other step counts 0: a lower
   bound on the share. mean / limit bounds it from above (a cut completion is `limit` tokens
   long, the others at least 0). A mean near the limit is a hint, no count (NEAR_LIMIT).
3. `pinned`: without either, a mean-length column that repeats its own maximum exactly
   (`pinned_maximum`): the steps at it are read as every completion cut at a limit of that
   length, again a lower bound.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from pgrpo.logs.base import COLUMN_KEYS

CLIPPED = "completions/clipped_ratio"
"""The canonical column of the logged share cut (`COLUMN_KEYS`)."""
LENGTH_COLUMNS = tuple(dict.fromkeys(("completion_length", *COLUMN_KEYS["completion_length"])))
"""The mean completion length: the readers' canonical name, then the raw names a mapping of
columns may carry (`pgrpo.diagnose.signals.ALIASES` adds TRL's for the rules)."""
TRUNCATION_MAX = 0.1
"""Warn when more than this share of completions is cut over the last tenth of the run. DAPO
(arXiv 2503.14476, "overlong filtering" and "soft overlong punishment") shows that scoring cut
samples like wrong answers adds reward noise and destabilises training; a tenth of the
completions cut puts a cut one in 1 - 0.9^G of the groups (34% at G = 4, 65% at G = 10): a
bias of the advantages, not an accident. The same share for the lower bounds (steps with every
completion cut): their share above it puts the true one above it."""
LATE_SHARE = 0.1
"""The run's present: its last tenth of logged points (at least MIN_WINDOW)."""
MIN_WINDOW = 5
"""Points in the present window at least: with fewer, one step decides the share."""
MIN_POINTS = 5
"""Logged points a reading needs (one window)."""
LIMIT_TOLERANCE = 0.5
"""Tokens below the stated limit a mean length may be and still count as every completion cut:
lengths are whole tokens, so a mean within half a token of the limit is the limit as a log that
prints whole tokens rounds it, and N completions at most N / 2 tokens short of the limit in
all (never one finished early by more than half the batch's tokens)."""
NEAR_LIMIT = 0.9
"""A mean length at or above this share of the stated limit is a hint that many completions
are cut, not a count (a mean of 0.9 L is also every completion 10% short)."""
MIN_PINNED_LENGTH = 64.0
"""A repeated maximum below this many tokens is not read as a limit: a fixed-format answer
repeats its length too. econagent_qwen25_7b_verl_grpo answers with a JSON object of exactly 20
tokens on 565 of its 699 steps under a limit of 128 (its logged verl config); the smallest
limit pinned in the corpus is 96 (f1_strategy_grpo_v1_flat). Runs with a smaller limit (16 and
32 in the held-back corpus notes) need --max-completion-length or a logged clipped ratio."""
MIN_PINNED_STEPS = 3
"""Steps at the maximum at least: two equal means happen by chance in a rounded column."""
NEIGHBOURS = 20
"""The distinct values just below the maximum it is compared with: the column's density where
the wall would be (a long log's values recur everywhere, a short one's seldom)."""
PILEUP = 3.0
"""In a fine-grained column (the neighbours recur at most MAX_REPEAT times on average) the
maximum must be reached this many times as often as they are: means of completions of varying
length do not repeat a value, so a maximum that repeats where its neighbours do not is a
wall."""
MAX_REPEAT = 1.5
"""A column whose values just below the maximum recur more often than this on average is
coarse (whole tokens around a flat mean, or a long log that fills its grid) and needs
DENSE_PILEUP. In the corpus's columns with a wall they recur 1.0-1.45 times."""
DENSE_PILEUP = 10.0
"""In a coarse column the maximum must be reached this many times as often as its neighbours:
a wall at 512 on 15% of 200,000 steps printed to 2 decimals is 28,900 points at 512 against 2.5
at each value below it; a smooth column's top is its sparse tail.

False alarms of the three together (with MIN_PINNED_STEPS): 18 of 20,000 null columns read as
pinned (0.09%; AR(1) noise of 0.3-60 tokens, rho 0-0.9, around a level or a rise of 0.2-1
token a step, 20-2,000 points, printed to 0-2 decimals; 10 of the 18 take at most 3 values, a
flat mean with a noise under a token printed in whole tokens), none of 300 long ones
(5,000-200,000 points; tests/test_diagnose_truncation.py). A constant column (no other value)
is pinned: many points all at one mean of varying completions happen only at a wall (or with
every completion identical). Every wall of the corpus passes but one reached on 3 of 97 points
(segman_grpo_unsloth_llama31_8b_gsm8k_stopped99, none of them late)."""


@dataclass(frozen=True)
class TruncationReading:
    """step, share: [n] logged points; share: the share of completions cut (`logged`), or 1
    where every completion was cut and 0 elsewhere (`limit`, `pinned`: a lower bound on the
    share); source: 'logged' | 'limit' | 'pinned'; column: the column read; limit: the stated or
    pinned limit (NaN for `logged`); upper: [n] mean length / limit, an upper bound on the share
    (`limit` only, else None); near: [n] 1 where the mean length is >= NEAR_LIMIT x the limit
    (`limit` only); pinned, pinned_steps: a repeated maximum of the mean length below the
    stated limit (`pinned_maximum`) and the points at it (`limit` only, else NaN and 0): the
    stated limit may not be the run's."""

    step: np.ndarray
    share: np.ndarray
    source: str
    column: str
    limit: float = math.nan
    upper: np.ndarray | None = None
    near: np.ndarray | None = None
    pinned: float = math.nan
    pinned_steps: int = 0

    @property
    def lower_bound(self) -> bool:
        return self.source != "logged"


def window(n: int) -> int:
    """The number of points in the last tenth of n (at least MIN_WINDOW, at most n)."""
    return min(n, max(MIN_WINDOW, math.ceil(LATE_SHARE * n)))


def _first(
    columns: Mapping[str, np.ndarray], steps: np.ndarray, names: tuple[str, ...]
) -> tuple[np.ndarray, np.ndarray, str] | None:
    """(step, values, name) of the first of `names` with a finite value, finite points only."""
    for name in names:
        col = columns.get(name)
        if col is None:
            continue
        col = np.asarray(col, dtype=float)
        ok = np.isfinite(col)
        if ok.any():
            return np.asarray(steps, dtype=float)[ok], col[ok], name
    return None


def at_maximum(lengths: np.ndarray) -> np.ndarray:
    """lengths: [n] -> [n] bool: at the maximum, to 1e-9 of it (a bin mean of equal values,
    `pgrpo.logs.thin.bin_means`, may miss it by an ulp)."""
    top = float(np.max(lengths))
    return lengths >= top - 1e-9 * abs(top)


def pinned_maximum(lengths: np.ndarray) -> float | None:
    """lengths: [n] finite mean completion lengths -> the maximum they are pinned at, or None:
    the maximum is >= MIN_PINNED_LENGTH and reached on >= MIN_PINNED_STEPS points, PILEUP times
    as often as the NEIGHBOURS distinct values below it on average when those recur at most
    MAX_REPEAT times, else DENSE_PILEUP times (a constant column is pinned)."""
    top = float(np.max(lengths))
    at_top = at_maximum(lengths)
    k = int(at_top.sum())
    if top < MIN_PINNED_LENGTH or k < MIN_PINNED_STEPS:
        return None
    others = lengths[~at_top]
    if not others.size:
        return top
    near = float(np.mean(np.unique(others, return_counts=True)[1][-NEIGHBOURS:]))
    fine = near <= MAX_REPEAT and k >= PILEUP * near
    return top if fine or k >= DENSE_PILEUP * near else None


def truncation_reading(
    columns: Mapping[str, np.ndarray],
    steps: np.ndarray,
    max_completion_length: float | None = None,
) -> tuple[TruncationReading | None, str]:
    """columns: name -> [S] (NaN = not logged); steps: [S]; max_completion_length: the run's
    limit when known. -> (the reading, '') from the strongest source the columns allow (module
    docstring), or (None, why not); (the reading, a note) where a source was set aside (a stated
    limit the mean length exceeds, a clipped-ratio column outside [0, 1])."""
    clipped = _first(columns, steps, COLUMN_KEYS[CLIPPED])
    bad = ""
    if clipped is not None and clipped[1].size >= MIN_POINTS:
        step, share, name = clipped
        if share.min() >= 0 and share.max() <= 1:
            return TruncationReading(step, share, "logged", name), ""
        bad = f"{name} is not a share in [0, 1] (max {share.max():.4g}); "
    got = _first(columns, steps, LENGTH_COLUMNS)
    if got is None or got[1].size < MIN_POINTS:
        return None, (f"{bad}no {CLIPPED} (or response_length/clip_ratio) and no completion "
                      f"length column with >= {MIN_POINTS} points")  # fmt: skip
    step, length, name = got
    limit = math.nan if max_completion_length is None else float(max_completion_length)
    if length.max() > limit + LIMIT_TOLERANCE:  # not the run's limit: set aside, and said so
        # (a review, 2026-12-06: a stated limit below the lengths gave no evidence and took the
        # pinned reading's clause out of the degeneracy action)
        bad += (f"the mean completion length reaches {length.max():.4g}, above the stated "
                f"max_completion_length {limit:g}, which is set aside: give the run's limit (or "
                "the column counts more than the completion); ")  # fmt: skip
        limit = math.nan
    if math.isfinite(limit):
        cut = (length >= limit - LIMIT_TOLERANCE).astype(float)
        upper = np.minimum(length / limit, 1.0)
        near = (length >= NEAR_LIMIT * limit).astype(float)
        top = pinned_maximum(length)
        if top is None or top >= limit - LIMIT_TOLERANCE:
            return TruncationReading(step, cut, "limit", name, limit, upper, near), ""
        k = int(np.sum(at_maximum(length)))
        return TruncationReading(step, cut, "limit", name, limit, upper, near, top, k), ""
    top = pinned_maximum(length)
    if top is None:
        return None, (f"{bad}no {CLIPPED} column and no usable --max-completion-length, and "
                      f"the mean completion length never sits at a repeated maximum of >= "
                      f"{MIN_PINNED_LENGTH:.0f} tokens (the mark of every completion cut); give "
                      "--max-completion-length or log the clipped ratio")  # fmt: skip
    reading = TruncationReading(step, at_maximum(length).astype(float), "pinned", name, top)
    return reading, bad.removesuffix("; ")


def truncated_share_now(
    columns: Mapping[str, np.ndarray],
    steps: np.ndarray,
    max_completion_length: float | None = None,
) -> tuple[float, TruncationReading] | None:
    """The share cut over the last tenth of the run (`window`) and the reading, or None when the
    columns give none."""
    reading, _ = truncation_reading(columns, steps, max_completion_length)
    return None if reading is None else (late_share(reading), reading)


def late_share(reading: TruncationReading) -> float:
    """The reading's share over the last tenth of the run (`window`)."""
    return float(np.mean(reading.share[-window(reading.share.size) :]))


TRUNCATION_ACTION = (
    "raise max_completion_length, or penalise / mask overlong completions (DAPO's overlong "
    "filtering; TRL's `mask_truncated_completions=True`)"
)
"""What to do about completions cut at the limit (TRL GRPOConfig `mask_truncated_completions`:
cut completions leave the loss, as DAPO recommends)."""


def truncation_cause(share: float, reading: TruncationReading) -> str:
    """One clause: how much is cut over the run's last tenth (`share`), and what says so."""
    n, w = reading.share.size, window(reading.share.size)
    if reading.source == "logged":
        return (f"{share:.0%} of completions are cut at the length limit over the last {w} "
                f"points ({reading.column})")  # fmt: skip
    if reading.source == "limit":
        how = f"their mean length is within {LIMIT_TOLERANCE} token of it"
    else:
        how = (f"the mean length sits at exactly its maximum on {int(reading.share.sum())} of "
               f"{n} points, which means of completions of varying length never do: the limit "
               "read from the log")  # fmt: skip
    limit = f"the length limit ({reading.limit:.4g} tokens)"
    return (f"every completion was cut at {limit} on {share:.0%} of the last {w} points ({how}; "
            "a lower bound on the share cut)")  # fmt: skip


TRUNCATION_EFFECT = (
    "a cut completion usually scores 0 (no final answer, no EOS), so a group cut throughout "
    "scores all-equal and gives no gradient"
)
"""Why a cut completion matters to GRPO (the check's summary says it)."""
