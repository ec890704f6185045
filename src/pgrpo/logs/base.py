"""The reward log every reader produces and the cleaning they share (a run config's settings:
`pgrpo.logs.runconfig`).

Readers turn a file into records (one dict per logged step, in file order); `assemble` turns the
records into a `RewardLog`: it resolves the reward and the optional columns by name, drops
missing / NaN / non-numeric rewards, drops the rows a later part of the file supersedes (a run
resumed from an earlier checkpoint or restarted from scratch into the same file: `superseded`),
sorts, detects a logging stride, and says what it repaired in `warnings`. It never raises on
bad rows; it raises `LogFormatError` (a ValueError naming the file and the fix) only when nothing
usable is left, `LogNotReadyError` when that may change as the file is written (no record yet).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pgrpo.errors import UserError
from pgrpo.logs.columns import ABSENT, NUMBER, ColumnStore, store_of
from pgrpo.logs.repairs import canon as _canon
from pgrpo.logs.repairs import check_config, check_settings, eval_rows, eval_values
from pgrpo.logs.rewind import (  # noqa: F401 (newest_run, superseded re-exported)
    across_epochs,
    newest_rows,
    newest_run,
    rewind_warnings,
    superseded,
)


class LogFormatError(UserError):
    """A log that cannot be read; the message names the file, the problem and the fix."""


class LogNotReadyError(LogFormatError):
    """A log that cannot be read yet but may be once its writer gets further: missing, empty, a
    header only, no complete record, a JSON file caught mid-write, a folder with no log in it yet.
    `pgrpo watch` reads it again at the next poll; any other LogFormatError is final."""


@dataclass(frozen=True)
class RewardLog:
    """A cleaned reward curve. step, reward: [n] (float, strictly increasing steps); columns:
    canonical name -> [n] (NaN where missing; the names of COLUMN_KEYS, then every other numeric
    key under its own name with "train/" stripped); hyperparameters: lr (peak), beta1,
    refresh_interval, group_size, batch_prompts when found; warnings: what was repaired."""

    step: np.ndarray
    reward: np.ndarray
    columns: dict[str, np.ndarray]
    hyperparameters: dict[str, float]
    warnings: tuple[str, ...]
    format: str
    source: str
    reward_key: str
    metrics: dict[str, float] = field(default_factory=dict)
    reward_words: str = ""
    """The reward column read, in words (`reward_words`): the commands print it after "reward:"
    (empty for a log built by hand: `reward_key` is printed)."""

    def __len__(self) -> int:
        return int(self.step.size)

    @property
    def reward_read(self) -> str:
        """The reward column read, in words: what fit, diagnose and report print."""
        return self.reward_words or self.reward_key

    @property
    def learning_rate(self) -> np.ndarray | None:
        """[n] logged learning rate, or None when the log has none."""
        lr = self.columns.get("learning_rate")
        return lr if lr is not None and np.isfinite(lr).any() else None


# canonical column -> candidate keys (after stripping a leading "train/"), first match wins
COLUMN_KEYS: dict[str, tuple[str, ...]] = {
    # OpenRLHF logs its actor's lr as `actor_lr` (train/actor_lr in W&B; ppo_actor.py)
    "learning_rate": ("learning_rate", "lr", "actor/lr", "actor_lr"),
    "group_size": ("group_size", "num_generations"),
    "frac_reward_zero_std": ("frac_reward_zero_std",),
    "reward_std": ("reward_std", "critic/score/std"),
    "entropy": ("entropy", "actor/entropy"),
    "kl": ("kl", "actor/kl_loss"),
    # TRL, older TRL, verl. Not a bare `response_length` (OpenRLHF's mean, but the same name holds
    # per-step maxima and character counts in other logs: read as a mean, a maximum pinned at the
    # limit reads "every completion was cut"; review s34)
    "completion_length": ("completions/mean_length", "completion_length", "response_length/mean"),
    # the share of completions cut at the length limit (read by the truncated_completions check,
    # pgrpo.diagnose.lengthstats): pgrpo's trainer and TRL GRPOTrainer (no EOS), verl
    # (response_length == max_response_length, metric_utils.compute_data_metrics), OpenRLHF
    # (response_length >= max_new_tokens, experience info logged under train/)
    "completions/clipped_ratio": (
        "completions/clipped_ratio",
        "response_length/clip_ratio",
        "response_clip_ratio",
    ),
    "refresh_interval": ("refresh_interval",),
    "beta1": ("beta1",),
    "batch_prompts": ("batch_prompts",),
    # read by pgrpo.diagnose (failure-mode evidence)
    "grad_norm": ("grad_norm", "actor/grad_norm"),
    "loss": ("loss", "actor/pg_loss"),
    "clip_ratio/region_mean": ("clip_ratio/region_mean", "actor/pg_clipfrac"),
    "degeneracy/all_pass": ("degeneracy/all_pass",),
    "degeneracy/all_fail": ("degeneracy/all_fail",),
    "degeneracy/iid_prediction": ("degeneracy/iid_prediction",),
    "frac_gradient_tokens": ("frac_gradient_tokens", "actor/pgrpo/frac_gradient_tokens"),
}
REWARD_KEYS = ("reward", "rewards/mean", "critic/score/mean", "critic/rewards/mean", "score")
REWARD_PATTERN = re.compile(r"^rewards/.+/mean$")
OLD_REWARD_PATTERN = re.compile(r"^rewards/([^/]+)$")
"""Older TRL's per-function key, read as `rewards/<name>/mean` (`_column_keys`)."""
STEP_KEYS = ("step", "global_step", "train/global_step", "trainer/global_step", "_step", "Step")
"""In order of preference: W&B's own `_step` counts its log calls (train and eval rows alike)
and comes after the trainer's step (`trainer/global_step`: Lightning / HF in W&B)."""
ROW_ORDER = "@order"
"""The step_key (`--step-column @order`) that reads the records in file order as the steps: for a
log whose step starts over each epoch and that logs no epoch to tell (`rewind.epoch_offsets`).
Only the rows with a reward are counted; a row without one (an eval row) takes the step of the
reward row before it (or, before the first, of the first)."""
EPOCH_KEYS = ("epoch", "train/epoch")
"""The columns that tell a step counted within each epoch from a restart (`rewind.epoch_offsets`).
"""
HYPER_NAMES = ("lr", "beta1", "refresh_interval", "group_size", "batch_prompts")
TEXT_ROWS = 5
"""Rows whose reward cell holds something other than a number (and none that holds one) that
make the reward column a final error, not a log still being written: a CSV's empty cells read
as such, and a few first rows without a reward must not end `pgrpo watch`."""
NONFINITE_ROWS = 3
"""NaN / inf rewards, with no finite one before them, that make a log a final error (a run that
diverged from its start) rather than one whose first numbers are still to come; the same count
as the progress verdict's `NONFINITE_TAIL`."""


def _twin(key: str, keys: Iterable[str]) -> str | None:
    """The other of `name` / `train/name` when the log has both, else None."""
    other = key[len("train/") :] if key.startswith("train/") else f"train/{key}"
    return other if other in set(keys) else None


def _canon_map(keys: Iterable[str]) -> dict[str, str]:
    """Canonical name -> the key read for it: the key of that exact name where the log has
    both it and its "train/" form, whatever their order in the file (the rightmost was read,
    so two exports of one run with the columns in another order read different rewards;
    review, 2026-12-05)."""
    out: dict[str, str] = {}
    for k in keys:
        c = _canon(k)
        if c not in out or k == c:
            out[c] = k
    return out


def resolve_reward_key(
    keys: Iterable[str], override: str | None = None, source: str = "the log"
) -> str | list[str]:
    """The reward key among `keys`: `override`, else the first of REWARD_KEYS, else every
    `rewards/<name>/mean` (summed, one reward function each). Raises LogFormatError naming
    `source` (the file) if none."""
    keys = list(dict.fromkeys(keys))
    if override is not None:
        if override not in keys:
            raise LogFormatError(
                f"{source}: reward column {override!r} not found",
                f"give --reward-column one of the columns present: {', '.join(sorted(keys))}",
            )
        return override
    canon = _canon_map(keys)
    for cand in REWARD_KEYS:
        if cand in canon:
            return canon[cand]
    parts = [k for c, k in canon.items() if REWARD_PATTERN.match(c)]
    if parts:
        return parts[0] if len(parts) == 1 else parts
    shown = ", ".join(sorted(keys)[:30]) or "(none)"
    raise LogFormatError(
        f"{source}: no reward column found (looked for {', '.join(REWARD_KEYS)} and "
        f"rewards/<name>/mean); keys present: {shown}",
        "name it explicitly (`--reward-column NAME` on fit, diagnose, report and watch; "
        "read_log(..., reward_key=...) in Python)",
    )


def reward_words(keys: Iterable[str], rkey: str | list[str], override: str | None = None) -> str:
    """The reward column `resolve_reward_key` chose among `keys`, in words: the columns summed,
    or the other reward columns present and how to read one of them (review rev41, F7: a sum of
    per-function rewards, `reward` over `score` and verl's critic/score/mean over
    critic/rewards/mean were read without a word)."""
    if isinstance(rkey, list):
        return (f"{' + '.join(rkey)} (summed: one column per reward function; "
                "--reward-column NAME reads one alone)")  # fmt: skip
    if override is not None:
        return f"{rkey} (named with --reward-column)"
    canon = _canon_map(keys)
    others = [canon[c] for c in REWARD_KEYS if c in canon and canon[c] != rkey]
    if not others:
        return rkey
    how = (f"--reward-column {others[0]} reads it" if len(others) == 1
           else "--reward-column NAME reads another")  # fmt: skip
    return f"{rkey} (also present: {', '.join(others)}; {how})"


def assemble(
    records: Iterable[Mapping[str, Any]] | ColumnStore,
    *,
    fmt: str,
    source: str,
    warnings: list[str] | None = None,
    hyperparameters: Mapping[str, float] | None = None,
    reward_key: str | None = None,
    step_key: str | None = None,
    columns: Collection[str] | None = None,
    live: bool = False,
) -> RewardLog:
    """Records (file order, or a ColumnStore of them) -> RewardLog; see the module docstring
    for the repairs. columns: the canonical column names to keep (None: all; step and reward
    are always read); a ColumnStore built with `wanted_keys(columns, ...)` skips the rest.
    live: a log still being written (`pgrpo watch`); the rows kept are the same as for a finished
    log (`superseded`: the newest run of several appended to one file), and the warnings leave
    out the earlier run's rows (watch reports a new run once, from metrics restart_step and
    restart_row, which say where the newest run starts when an earlier one is dropped)."""
    want = wanted_keys(columns, reward_key, step_key)
    store = records if isinstance(records, ColumnStore) else store_of(records, keep=want)
    warns = list(warnings or [])
    if not store.n:
        raise LogNotReadyError(f"{source}: no records ({fmt} format); is the file empty?")
    all_keys = store.seen
    rkey = resolve_reward_key(all_keys, reward_key, source)
    if isinstance(rkey, str) and (twin := _twin(rkey, all_keys)) is not None:
        warns.append(f"the log has both {rkey!r} and {twin!r}: read {rkey!r}; give "
                     f"--reward-column {twin} to read the other")  # fmt: skip
    in_order = step_key == ROW_ORDER
    if step_key is not None and not in_order and step_key not in set(all_keys):
        shown = ", ".join(sorted(all_keys)[:30])
        raise LogFormatError(
            f"{source}: step column {step_key!r} not found",
            f"give one of the columns present: {shown}",
        )
    skey = None if in_order else step_key or next((k for k in STEP_KEYS if k in all_keys), None)
    if skey is not None and skey in _as_list(rkey):  # a review, session 36: a fit of the reward
        raise LogFormatError(  # against itself read R^2 0.999
            f"{source}: the step column and the reward column are both {skey!r}",
            "give --step-column the column that counts steps (step, global_step) and "
            "--reward-column the reward",
        )
    if skey is None and not in_order:
        warns.append("no step column: using the record order as the step")
    reward, r_present, r_number = _reward_column(store, rkey)
    if in_order:  # the reward rows are counted; a row without one (eval) takes the count of
        step = np.maximum(np.cumsum(r_present) - 1.0, 0.0)  # the one before (or the next)
    elif skey is None:
        step = np.arange(store.n, dtype=float)
    else:
        step = store.column(skey)[0]
    # the record-by-record order of checks: absent reward, bad step, missing reward, NaN reward
    good_step = np.isfinite(step)
    bad_step = r_present & ~good_step
    missing = r_present & good_step & ~r_number
    nan = r_present & good_step & r_number & ~np.isfinite(reward)
    ok = r_present & good_step & r_number & np.isfinite(reward)
    hist = np.flatnonzero(ok | nan)  # the rows with a reward number decide the runs
    if skey is not None and (ekey := next((k for k in EPOCH_KEYS if k in all_keys), None)):
        step = across_epochs(step, store.column(ekey)[0], hist, ekey, warns)
    # what is dropped, counted and read as a diverged tail is the newest run's own (`newest_rows`):
    # a NaN of a trajectory a resume or restart replaced read as its collapse (review 41)
    newest, kept, restart = newest_rows(step, hist, good_step)
    old_nan, nan = int(np.sum(nan & ~newest)), nan & newest
    # a row with no reward number but an eval value is an eval row (a W&B export's empty
    # train/reward cell there): `eval_rows` reads it, and it is no dropped training row
    evals = eval_values(store)
    counts = {"missing": int((missing & ~evals & newest).sum()), "nan": int(nan.sum()),
              "bad_step": int((bad_step & newest).sum())}  # fmt: skip
    _count_warnings(counts, warns)
    if int(missing.sum()) >= TEXT_ROWS and int(missing.sum()) == int(r_present.sum()):
        raise LogFormatError(  # text in every reward cell: no wait makes it numbers
            f"{source}: the reward column {rkey!r} holds no numbers in any of its "
            f"{int(missing.sum())} rows ({fmt} format)",
            "name the reward column with --reward-column (reward_key= in Python), or fix "
            "the values (a decimal comma? write 0.5, not 0,5)",
        )
    whose = f" of the newest run in the file (from reward row {restart + 1})" if restart else ""
    if not (ok & newest).any() and int(nan.sum()) >= NONFINITE_ROWS:  # diverged from its start
        raise LogFormatError(
            f"{source}: every logged reward{whose} ({int(nan.sum())} rows) is NaN or inf: the "
            "run diverged from its first logged step, or the reward column is not the reward",
            "stop the run and look for an inf or NaN in its loss and rewards; name the reward "
            "column with --reward-column if it is another one",
        )
    if not (ok & newest).any():  # a reward column with no number yet (NaN first rows): may come
        raise LogNotReadyError(
            f"{source}: no usable (step, reward) rows{whose} ({fmt} format, reward key "
            f"{rkey!r}); check the file is a training log and not empty"
        )
    step_all, lone = step, newest & good_step & ~(r_present & r_number)  # eval rows, say
    rows = np.flatnonzero(ok & newest)
    tail = nan & (step > np.max(step[rows]))  # NaN/inf rewards after the last finite one
    if tail.any():
        warns.append(f"the last {int(tail.sum())} logged reward(s) are NaN or inf (from step "
                     f"{np.min(step[tail]):g}): read up to step {step[rows].max():g}")  # fmt: skip
    restart_step = float(step[hist[restart]])
    rewind_warnings(step[hist], kept, restart, live, warns)
    if old_nan:
        warns.append(f"{old_nan} NaN/inf reward(s) in rows a later resume or restart "
                     "replaced: the history of a discarded trajectory, not read as the newest "
                     "run's")  # fmt: skip
    n_rep = int(np.sum(~kept))
    every = np.flatnonzero(ok)  # every row with a reward, whichever run: one step is no curve
    if every.size >= 3 and np.all(step[every] == step[every[0]]):  # not "need more points" (a
        # review, session 36); a live log (`pgrpo watch`) is warned and read on
        problem = (f"all {every.size} rows with a reward have the same step {step[every[0]]:g} "
                   f"(step column {skey!r})")  # fmt: skip
        fix = "give --step-column the column that counts the steps"
        if not live:
            raise LogFormatError(f"{source}: {problem}", fix)
        warns.append(f"{problem}: {fix}")
    order = np.argsort(step[rows], kind="stable")
    if np.any(np.diff(order) < 0):
        warns.append("steps out of order in the file: sorted by step")
    rows = rows[order]
    step, reward = step[rows], reward[rows]
    _fractional_steps(step, skey, step_key is not None, warns)
    col_keys = _column_keys(store.keys)
    if columns is not None:
        col_keys = {name: key for name, key in col_keys.items() if name in columns}
    cols = {name: store.column(key)[0][rows] for name, key in col_keys.items()}
    used = {*col_keys.values(), skey, *_as_list(rkey)}
    others = _other_columns(store, rows, used, set(cols))
    cols.update({k: v for k, v in others.items() if columns is None or k in columns})
    eval_rows(store, lone, step_all, step, cols, columns, warns)
    check_settings(cols, warns)
    if skey == "_step":  # W&B's log calls: eval and other rows take steps too
        warns.append("the step is W&B's `_step`, which counts log calls (eval rows too), not "
                     "optimizer steps: give --step-column NAME if the export has the trainer's "
                     "step (trainer/global_step, train/global_step)")  # fmt: skip
    stride = _stride(step, warns, lone.any() and skey == "_step")
    config = {k: v for k, v in (hyperparameters or {}).items() if v is not None}
    check_config(config, warns)
    hyper = hyperparameters_from_columns(cols)
    hyper.update(config)
    if "steps_per_logged_point" in hyper:  # a trainer's logging_steps, as far as the logged
        # steps bear it out: a log whose steps are rows (a console log) or 1 apart counts 1
        every = min(float(hyper.pop("steps_per_logged_point")), float(stride))
        if every > 1:
            hyper["steps_per_logged_point"] = every
    metrics = {
        "n_rows": float(step.size),
        "dropped_nan": float(counts["nan"]),
        "dropped_missing": float(counts["missing"]),
        "repeated_steps": float(n_rep),
        "log_every": float(stride),
    }
    if restart:
        metrics.update(restart_row=float(restart), restart_step=restart_step)
    if tail.any():  # a run that diverged: the progress verdict reads it (`nonfinite_tail`)
        metrics.update(
            nonfinite_tail=float(tail.sum()), nonfinite_from=float(np.min(step_all[tail]))
        )
    key_name = rkey if isinstance(rkey, str) else "+".join(rkey)
    words = reward_words(all_keys, rkey, reward_key)
    return RewardLog(step, reward, cols, hyper, tuple(warns), fmt, source, key_name, metrics, words)


def wanted_keys(
    columns: Collection[str] | None, reward_key: str | None = None, step_key: str | None = None
) -> Callable[[str], bool] | None:
    """Which raw keys a reader must store to give the canonical `columns` (None: all): the step
    and reward candidates (or the named ones), the COLUMN_KEYS candidates of those columns and
    any key named like one of them (with "train/" stripped)."""
    if columns is None:
        return None
    names = set(columns)
    for name in columns:
        names.update(COLUMN_KEYS.get(name, ()))
    names.update(REWARD_KEYS)
    exact = {*STEP_KEYS, *EPOCH_KEYS, *(k for k in (reward_key, step_key) if k is not None)}

    def keep(key: str) -> bool:
        c = _canon(key)
        return key in exact or c in names or REWARD_PATTERN.match(c) is not None

    return keep


def _as_list(rkey: str | list[str]) -> list[str]:
    return [rkey] if isinstance(rkey, str) else list(rkey)


def _reward_column(store: ColumnStore, rkey: str | list[str]):
    """(reward [n], present [n], numeric [n]): a row's reward is present when any of the reward
    keys is in it; it is numeric when every key is there with a number (then their sum)."""
    total = np.zeros(store.n)
    present = np.zeros(store.n, dtype=bool)
    number = np.ones(store.n, dtype=bool)
    for key in _as_list(rkey):
        vals, code = store.column(key)
        present |= code != ABSENT
        number &= code == NUMBER
        total = total + np.where(code == NUMBER, vals, 0.0)
    return np.where(number, total, np.nan), present, number


def _other_columns(store: ColumnStore, rows: np.ndarray, used, taken) -> dict[str, np.ndarray]:
    """Every other numeric key under its own name ("train/" stripped), for the diagnostics."""
    out = {}
    for key in store.keys:
        name = _canon(key)
        if key in used or name in taken or name in out:
            continue
        col = store.column(key)[0][rows]
        if np.isfinite(col).any():
            out[name] = col
    return out


def _column_keys(all_keys: list[str]) -> dict[str, str]:
    canon = _canon_map(dict.fromkeys(all_keys))
    found = {}
    for name, cands in COLUMN_KEYS.items():
        for c in cands:
            if c in canon:
                found[name] = canon[c]
                break
    for c, key in canon.items():  # per-function rewards (TRL rewards/<name>/mean), for diagnose
        if REWARD_PATTERN.match(c):
            found.setdefault(c, key)
    for c, key in canon.items():  # TRL <= 0.16 and Unsloth of its time: rewards/<name>
        if (m := OLD_REWARD_PATTERN.match(c)) and m.group(1) not in ("mean", "std", "min", "max"):
            found.setdefault(f"rewards/{m.group(1)}/mean", key)
    return found


def _fractional_steps(step: np.ndarray, skey: str | None, named: bool, warns: list[str]) -> None:
    """A warning when the step column holds numbers that are not whole, whether it was named
    with --step-column or found by its name (review rev41, L2: only a named one was warned,
    and a `step` of epoch fractions read "about 0 more steps")."""
    frac = step[step != np.round(step)]
    if skey is None or not frac.size:
        return
    how = "check that --step-column names the steps"
    if not named:
        how = ("if it does not count optimizer steps (an epoch fraction?), give --step-column "
               "the one that does")  # fmt: skip
    warns.append(f"the step column {skey!r} holds numbers that are not whole (e.g. "
                 f"{frac[0]:g}): {how}")  # fmt: skip


def _count_warnings(counts: dict[str, int], warns: list[str]) -> None:
    if counts["nan"]:
        warns.append(f"{counts['nan']} NaN/inf reward(s) dropped")
    if counts["missing"]:
        warns.append(f"{counts['missing']} row(s) with a missing or non-numeric reward dropped")
    if counts["bad_step"]:
        warns.append(f"{counts['bad_step']} row(s) with a missing or non-numeric step dropped")


def _stride(step: np.ndarray, warns: list[str], other_rows: bool = False) -> int:
    """The logging stride, with warnings on it and on gaps; other_rows: the step counts rows
    without a reward too (W&B's `_step`), so a gap is one of them, not a missing row."""
    if step.size < 2:
        return 1
    d = np.diff(step)
    stride = int(np.median(d))
    if stride > 1:
        warns.append(f"logged every {stride} steps: fits use the logged steps as they are")
    irregular = int(np.sum(d > 1.5 * max(stride, 1)))
    if irregular:
        why = "rows without a reward between them" if other_rows else "missing rows"
        warns.append(f"{irregular} gap(s) in the logged steps ({why})")
    return max(stride, 1)


def hyperparameters_from_columns(columns: Mapping[str, np.ndarray]) -> dict[str, float]:
    """lr (peak of the logged schedule) and constant columns (group_size, beta1, ...)."""
    out: dict[str, float] = {}
    lr = columns.get("learning_rate")
    if lr is not None and np.isfinite(lr).any():
        out["lr"] = float(np.nanmax(lr))
    for name in ("group_size", "refresh_interval", "beta1", "batch_prompts"):
        col = columns.get(name)
        if col is not None and np.isfinite(col).any():
            out[name] = float(np.nanmedian(col))
    return out


@dataclass(frozen=True)
class LogReader:
    """A registered log format: `detect(path) -> bool` and `read(path, **options) -> RewardLog`."""

    name: str
    detect: Callable[[Path], bool]
    read: Callable[..., RewardLog]
    description: str = ""
