"""The columns a diagnosis reads, taken from any `RewardLog` (pgrpo, TRL, verl, W&B, CSV).

`Signals` is the one view the rules see: per-step arrays aligned on `steps` (NaN where a step did
not log a value), the run's hyperparameters, and optional eval points (step -> accuracy). A column
absent from the log is simply absent from `columns`, so every rule can say which signal it missed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from pgrpo.diagnose.lengthstats import truncated_share_now
from pgrpo.diagnose.nullmodel import unit_scale
from pgrpo.errors import check_magnitude
from pgrpo.logs.thin import bin_means, bin_plan

# Framework-specific names for the same quantity, mapped to pgrpo's (TRL's) names. The log readers
# normally translate already; this is the fallback for generic CSV/W&B exports.
ALIASES: dict[str, tuple[str, ...]] = {
    "reward": ("critic/score/mean", "train/reward", "rewards/mean", "reward_mean"),
    "entropy": ("actor/entropy", "train/entropy"),
    "kl": ("actor/kl_loss", "actor/ppo_kl", "train/kl", "objective/kl"),
    "clip_ratio/region_mean": ("actor/pg_clipfrac", "train/clip_ratio/region_mean"),
    "completions/mean_length": ("completion_length", "response_length/mean"),
    "grad_norm": ("actor/grad_norm", "train/grad_norm"),
    "frac_reward_zero_std": ("train/frac_reward_zero_std",),
    "loss": ("train/loss", "actor/pg_loss"),
}
HYPER_NAMES = ("refresh_interval", "learning_rate", "beta1", "group_size", "batch_prompts", "kappa")
MAX_POINTS = 2000
"""Logs longer than this are analysed as means of b consecutive steps (`thin_signals`)."""


@dataclass(frozen=True)
class Signals:
    """steps: [S]; columns: name -> [S] float (NaN = not logged at that step); config: scalars;
    eval_points: [(step, accuracy)] sorted by step (empty without an eval log); eval_se: the
    standard error of each eval point's accuracy (NaN: unknown; empty: none known);
    eval_gain, eval_gain_se: the last minus the first and its error, paired by problem
    (`paired_eval_gain`; NaN: not paired, the points' errors are then combined as
    independent)."""

    steps: np.ndarray
    columns: dict[str, np.ndarray]
    config: dict[str, Any] = field(default_factory=dict)
    eval_points: tuple[tuple[float, float], ...] = ()
    source: str = ""
    eval_se: tuple[float, ...] = ()
    eval_gain_se: float = math.nan
    eval_gain: float = math.nan
    truncation: tuple[float, Any] | None = None
    """A binned log's truncation reading, taken per step before binning (`truncation_per_step`;
    None there: none); read only where `binned` says so."""
    binned: bool = False
    """Whether the columns are bin means (`thin_signals`)."""

    def has(self, name: str, min_points: int = 1) -> bool:
        col = self.columns.get(name)
        return col is not None and int(np.isfinite(col).sum()) >= min_points

    def get(self, name: str) -> np.ndarray:
        return self.columns[name]

    def reward_range(self) -> tuple[float, float] | None:
        """The reward's known (lo, hi) from reward_min / reward_max (a task's range,
        `--reward-range`), or None."""
        from pgrpo.dynamics.runfit import reward_range

        return reward_range({k: self.hyper(k) for k in ("reward_min", "reward_max")})

    def unit_reward(self) -> np.ndarray:
        """The reward on the 0/1 scale of its known range (`nullmodel.unit_scale`): [S]."""
        return unit_scale(self.get("reward"), self.reward_range())

    def hyper(self, name: str) -> float | None:
        """A hyperparameter from the config, or from a constant logged column of that name."""
        value = self.config.get(name)
        if value is None and self.has(name):
            col = self.columns[name]
            value = col[np.isfinite(col)][-1]
        try:
            value = float(value) if value is not None else None
        except (TypeError, ValueError):
            return None
        return value if value is not None and math.isfinite(value) else None


def _log_parts(log: Any) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, Any], str]:
    """steps, columns, config and a source name from a RewardLog or a plain mapping."""
    if isinstance(log, Mapping):
        cols = {k: np.asarray(v, dtype=float) for k, v in log.items() if k != "step"}
        n = len(next(iter(cols.values()))) if cols else 0
        steps = np.asarray(log.get("step", np.arange(n)), dtype=float)
        return steps, cols, {}, "mapping"
    steps = np.asarray(getattr(log, "step", None) if hasattr(log, "step") else log.steps, float)
    raw = getattr(log, "columns", None)
    if raw is None:
        raise TypeError(
            f"cannot read columns from a {type(log).__name__}; pass a RewardLog from "
            "pgrpo.logs.read_log or a mapping of column name -> per-step values"
        )
    cols = {k: np.asarray(v, dtype=float) for k, v in dict(raw).items()}
    if getattr(log, "reward", None) is not None:
        cols["reward"] = np.asarray(log.reward, dtype=float)
    config = dict(getattr(log, "hyperparameters", None) or getattr(log, "config", None) or {})
    got = getattr(log, "metrics", None) or {}
    for key in ("nonfinite_tail", "nonfinite_from"):  # a diverged tail: the progress verdict
        if key in got:
            config[key] = float(got[key])
    dropped = got.get("dropped_nan", 0.0)
    if dropped:  # the reader drops NaN/inf reward rows; the diagnosis still needs to know
        config["dropped_nonfinite_rewards"] = float(dropped)
    return steps, cols, config, str(getattr(log, "source", "") or getattr(log, "format", ""))


def signals_from_log(
    log: Any, eval_points: tuple[tuple[float, float], ...] = (), eval_se: tuple[float, ...] = ()
) -> Signals:
    """Build the rules' view of a log, resolving framework aliases to pgrpo names."""
    steps, cols, config, source = _log_parts(log)
    for name, alternatives in ALIASES.items():
        if name not in cols:
            for alt in alternatives:
                if alt in cols:
                    cols[name] = cols[alt]
                    break
    for name, col in cols.items():
        if col.shape != steps.shape:
            raise ValueError(
                f"column {name!r} has {col.shape[0]} values but the log has {steps.shape[0]} "
                "steps; align columns on steps (NaN where a step did not log the value)"
            )
    if "reward" in cols:
        check_magnitude(cols["reward"], "reward", source)
    check_magnitude(steps, "step", source)
    if "lr" in config and "learning_rate" not in config:
        config["learning_rate"] = config["lr"]
    if not eval_points and "eval/accuracy" in cols:
        acc = cols["eval/accuracy"]
        ok = np.isfinite(acc)
        eval_points, eval_se = tuple(zip(steps[ok].tolist(), acc[ok].tolist(), strict=True)), ()
    order = sorted(range(len(eval_points)), key=lambda i: eval_points[i])
    se = tuple(eval_se[i] for i in order) if len(eval_se) == len(eval_points) else ()
    return Signals(steps, cols, config, tuple(eval_points[i] for i in order), source, se)


def read_eval_points(path: str | Path) -> tuple[tuple[float, float], ...]:
    """Eval accuracy by training step (`read_eval_records` without the standard errors)."""
    return read_eval_records(path)[0]


def _number(value: Any, what: str, low: float = -math.inf, high: float = math.inf) -> float:
    """value as a finite float in [low, high], or a ValueError naming `what`."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} is {value!r}, not a number") from None
    if not (math.isfinite(x) and low <= x <= high):
        raise ValueError(f"{what} is {value!r}; it must be a finite number in [{low:g}, {high:g}]")
    return x


def eval_record_se(rec: dict, where: str = "eval record") -> float:
    """Standard error of one eval record's accuracy: its `accuracy_se`; else its 95%
    `accuracy_ci` width / 3.92; else the sd of its per-problem pass rates / sqrt(problems);
    else binomial at its `n_problems`; NaN when the record says nothing of its size. A value
    that cannot be one (an accuracy outside [0, 1], a negative error or count, a reversed or
    non-finite interval) is a ValueError naming `where`."""
    acc = _number(rec.get("accuracy"), f"{where}: accuracy", 0.0, 1.0)
    if rec.get("accuracy_se") is not None:
        return _number(rec["accuracy_se"], f"{where}: accuracy_se", 0.0)
    ci = rec.get("accuracy_ci")
    if ci is not None:
        if not isinstance(ci, list | tuple) or len(ci) != 2:
            raise ValueError(f"{where}: accuracy_ci is {ci!r}; it must be [low, high]")
        lo, hi = (_number(v, f"{where}: accuracy_ci", 0.0, 1.0) for v in ci)
        if lo > hi:
            raise ValueError(f"{where}: accuracy_ci is {ci!r}; its low end is above its high end")
        return (hi - lo) / (2.0 * 1.959964)
    probs = rec.get("per_problem")
    if probs is not None and len(probs) >= 2:
        rates = np.array([p["c"] / p["n"] for p in probs], dtype=float)
        return float(np.std(rates, ddof=1) / np.sqrt(rates.size))
    if rec.get("n_problems") is not None:
        n = _number(rec["n_problems"], f"{where}: n_problems", 1.0)
        return float(np.sqrt(acc * (1.0 - acc) / n))
    return math.nan


def merged_evals(
    rows: list[tuple[float, float, float]],
) -> tuple[tuple[tuple[float, float], ...], tuple[float, ...]]:
    """(step, accuracy) sorted by step and their standard errors from (step, accuracy, se)
    rows: several rows at one step (seeds) are their mean, with the standard error of a mean
    of independent ones (NaN if any is unknown)."""
    by_step: dict[float, list[tuple[float, float]]] = {}
    for step, acc, se in rows:
        by_step.setdefault(step, []).append((acc, se))
    merged = sorted(by_step.items())
    means = tuple((step, float(np.mean([a for a, _ in v]))) for step, v in merged)
    ses = tuple(float(np.sqrt(sum(e * e for _, e in v))) / len(v) for _, v in merged)
    return means, ses


def eval_rows(rows: Any) -> tuple[tuple[tuple[float, float], ...], tuple[float, ...]]:
    """`merged_evals` of (step, accuracy) pairs or (step, accuracy, standard error) triples
    given in code (a NaN error: unknown), each checked like a record of `read_eval_records`."""
    out = []
    for i, row in enumerate(list(rows) if rows is not None else []):
        if not isinstance(row, list | tuple | np.ndarray) or len(row) not in (2, 3):
            raise ValueError(f"eval point {i} is {row!r}; give (step, accuracy) or "
                             "(step, accuracy, standard error)")  # fmt: skip
        step = _number(row[0], f"eval point {i}: step")
        acc = _number(row[1], f"eval point {i}: accuracy", 0.0, 1.0)
        se = math.nan if len(row) < 3 or row[2] is None else float(row[2])
        if not (math.isnan(se) or (math.isfinite(se) and se >= 0)):
            raise ValueError(
                f"eval point {i}: standard error {row[2]!r} must be >= 0 (NaN: unknown)"
            )
        out.append((step, acc, se))
    return merged_evals(out)


def found_eval_log(run_dir: str | Path) -> tuple[Path | None, str]:
    """(RUN_DIR/eval.json, "") when it is there and readable; (None, why) for one that is not,
    (None, "") for none. The user did not ask for it, so a bad one is skipped with a warning:
    it blocked diagnose and report, blaming an --eval-log they never gave (review,
    2026-12-05)."""
    path = Path(run_dir) / "eval.json"
    if not (Path(run_dir).is_dir() and path.is_file()):
        return None, ""
    try:
        read_eval_records(path)
    except (OSError, UnicodeDecodeError, TypeError, KeyError, AttributeError, ValueError) as exc:
        return None, (f"{path} (found in the run folder) is not used: {exc}; pass --eval-log "
                      "FILE to give an eval log")  # fmt: skip
    return path, ""


def _eval_records(path: Path) -> list:
    """The records of a `pgrpo eval` JSON (baseline, then results) or of a JSONL file."""
    if not path.is_file():
        raise FileNotFoundError(f"eval log {path} not found; write one with `pgrpo eval --out`")
    text = path.read_text()
    try:
        data = json.loads(text)
        if isinstance(data, dict) and "baseline" not in data and "results" not in data:
            return [data]  # one record: a JSONL file of one line so far
        if isinstance(data, dict):
            return list(data.get("baseline", [])) + list(data.get("results", []))
        return data
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


PAIRED_MIN_PROBLEMS = 30
"""Fewer shared problems than this are not paired: the paired z is read against a normal, and
sd(d) over P problems has P - 1 degrees of freedom (at P = 3 it fired on 2.4% of null evals
against 0.5%, at 50 on 0.52%; review, 2026-12-03)."""


def paired_eval_gain(path: str | Path) -> tuple[float, float]:
    """(gain, standard error) of the eval accuracy from the first eval step to the last, paired
    by problem: the mean and sd(d) / sqrt(P) of the P per-problem differences d of pass rates
    (each step's rate of a problem averaged over its records, i.e. seeds), when every record at
    both steps carries per-problem counts with ids (no id twice in a record) and the two steps
    evaluated the same P >= PAIRED_MIN_PROBLEMS problems. The gain is the mean of per-problem
    rates' change, the statistic the error belongs to (a record's `accuracy` may be pooled,
    sum c / sum n). Problems of unequal difficulty cancel from the error, so it is at most, and
    usually far below, the unpaired error of two independent accuracies. (NaN, NaN) otherwise
    (read `read_eval_records` first: this one assumes records it has checked)."""
    nan = (math.nan, math.nan)
    by_step: dict[float, list] = {}
    for rec in _eval_records(Path(path)):
        if isinstance(rec, dict) and rec.get("step") is not None:
            by_step.setdefault(float(rec["step"]), []).append(rec.get("per_problem"))
    if len(by_step) < 2:
        return nan
    ends = [by_step[min(by_step)], by_step[max(by_step)]]
    rates = []
    for recs in ends:
        sums: dict[str, list[float]] = {}
        for probs in recs:
            if not isinstance(probs, list) or not all(
                isinstance(q, dict) and "id" in q for q in probs
            ):
                return nan
            ids = [str(q["id"]) for q in probs]
            if len(set(ids)) != len(ids):  # an id twice in one record: not a problem set
                return nan
            for k, q in zip(ids, probs, strict=True):
                sums.setdefault(k, []).append(float(q["c"]) / float(q["n"]))
        rates.append({k: float(np.mean(v)) for k, v in sums.items()})
    if set(rates[0]) != set(rates[1]) or len(rates[0]) < PAIRED_MIN_PROBLEMS:
        return nan
    d = np.array([rates[1][k] - rates[0][k] for k in sorted(rates[0])])
    return float(np.mean(d)), float(np.std(d, ddof=1) / math.sqrt(d.size))


def read_eval_records(
    path: str | Path,
) -> tuple[tuple[tuple[float, float], ...], tuple[float, ...]]:
    """(eval accuracy by training step, its standard errors: `eval_record_se`) from a `pgrpo
    eval` JSON (each result's `step` and `accuracy`) or a JSONL file of {"step": ...,
    "accuracy": ...} records. A record's per-problem counts, when it has them, must pass
    `checked_counts` (as `pgrpo eval --from`). Several records at one step (seeds): their mean,
    with the standard error of a mean of independent ones. Records that give their `decoding`
    (`pgrpo eval` since 2026-12-06) must give one: seeds drawn at different temperatures or
    length limits are not one accuracy, nor is a gain from greedy at step 0 to temperature 1
    later (ValueError naming both; until session 40 they were averaged and compared silently)."""
    path = Path(path)
    records = _eval_records(path)
    from pgrpo.core.stats import checked_counts

    _one_decoding(path, records)
    points = []
    for i, rec in enumerate(records):
        if not isinstance(rec, dict) or "accuracy" not in rec:
            raise ValueError(f"{path}: eval record {i} has no 'accuracy' field: {rec!r}")
        if rec.get("per_problem") is not None:  # the counts `pgrpo eval --from` checks too
            probs = rec["per_problem"]
            checked_counts([p["n"] for p in probs], [p["c"] for p in probs],
                           f"{path}: eval record {i} ({rec.get('name', '?')})")  # fmt: skip
        if rec.get("step") is None:
            raise ValueError(
                f"{path}: eval record {i} ({rec.get('name', '?')}) has no training 'step'; "
                "pass --step to `pgrpo eval` (0 for the base model) so the diagnosis can align it"
            )
        where = f"{path}: eval record {i} ({rec.get('name', '?')})"
        step = _number(rec["step"], f"{where}: step")
        points.append((step, _number(rec["accuracy"], f"{where}: accuracy", 0.0, 1.0),
                       eval_record_se(rec, where)))  # fmt: skip
    if not points:
        raise ValueError(f"{path} holds no eval results")
    return merged_evals(points)


def _one_decoding(path: Path, records: list[Any]) -> None:
    """ValueError when the records that give a `decoding` do not all give the same one."""
    seen = [(i, r) for i, r in enumerate(records) if isinstance(r, dict) and r.get("decoding")]
    for i, rec in seen[1:]:
        if rec["decoding"] != seen[0][1]["decoding"]:
            j, first = seen[0]
            raise ValueError(
                f"{path}: eval records {j} ({first.get('name', '?')}) and {i} "
                f"({rec.get('name', '?')}) were sampled differently ({first['decoding']} and "
                f"{rec['decoding']}), so their accuracies are not one measure along the run; "
                "give --eval-log a file of one decoding setting"
            )


# ---------------------------------------------------------------------------------------------
# Long logs: one binned time axis for every detector
# ---------------------------------------------------------------------------------------------
#
# Every statistic of a diagnosis works on the scale of the whole run (windows of a fifth of the
# points, a moving average over a tenth, trend slopes, spectral periods of 3 points to a third of
# the run), and its null model is simulated at the analysed length (2,000 curves per length), so
# its cost grows with n while a 200,000-step log holds no information these statistics use that
# 2,000 bin means of 100 steps lack. Past MAX_POINTS the log is therefore analysed as bin means
# (`pgrpo.logs.thin`, the thinning `pgrpo fit` uses too): b = ceil(n / MAX_POINTS) consecutive
# steps per bin, m = floor(n / b) bins, the first n - m b (< b) steps left out so that every bin
# holds exactly b steps (the latest steps are never dropped). The noise model follows exactly:
# the mean of b batch means of N 0/1 rewards is a batch mean of b N draws (batch_prompts is
# multiplied by b), and the AR(1) null is fitted to the bin means themselves. A prefix of
# j x MAX_POINTS steps is binned into exactly MAX_POINTS bins of j steps, which is what lets the
# live replay share one null model across its polls (`pgrpo.diagnose.costs.plateau_step`). What
# is lost: changes faster than a bin and oscillations with a period under 3 bins (3 b steps).


def binned_config(config: dict[str, Any], b: int, n: int, head: int) -> dict[str, Any]:
    """The config of a log binned b steps to a point: batch_prompts (and a logged
    completions_per_step) times b, so N = B x G counts the draws behind each bin mean; the bin
    plan is recorded (bin_steps, binned_from_steps, unbinned_head_steps)."""
    out = dict(config)
    for name in ("batch_prompts", "completions_per_step"):
        value = out.get(name)
        if isinstance(value, int | float) and math.isfinite(value) and value > 0:
            out[name] = float(value) * b
    out.update(bin_steps=b, binned_from_steps=n, unbinned_head_steps=head)
    return out


def thin_signals(signals: Signals, max_points: int = MAX_POINTS) -> Signals:
    """`signals` as bin means past max_points steps (see above): steps, every column and the
    config binned by one `bin_plan`; unchanged when the log is short."""
    n = int(signals.steps.size)
    b, head = bin_plan(n, max_points)
    if b == 1:
        return signals
    config = dict(signals.config)
    for name in ("batch_prompts", "completions_per_step"):
        value = signals.hyper(name)  # the config's (as a number) or a constant logged column
        if value is not None:
            config[name] = value  # scaled by binned_config
    cols = {k: bin_means(v, b, head) for k, v in signals.columns.items()}
    return Signals(
        bin_means(signals.steps, b, head),
        cols,
        binned_config(config, b, n, head),
        signals.eval_points,
        signals.source,
        signals.eval_se,
        signals.eval_gain_se,
        signals.eval_gain,
        truncation_per_step(signals),
        binned=True,
    )


def truncation_per_step(signals: Signals) -> tuple[float, Any] | None:
    """The share of completions cut over the last tenth and its reading
    (`lengthstats.truncated_share_now`), read per step: what `thin_signals` keeps, since a bin
    mean of the lengths sits at the limit only where every step of the bin did (a review,
    2026-12-06: 30% of steps cut read 0.5% on bin means beside the check's 29.7%)."""
    if signals.binned:
        return signals.truncation
    limit = signals.hyper("max_completion_length")
    return truncated_share_now(signals.columns, signals.steps, limit)


def thin_log(log: Any, max_points: int = MAX_POINTS, keep: tuple[str, ...] | None = None) -> Any:
    """A RewardLog as bin means past max_points steps (the `thin_signals` plan): step, reward,
    the columns (only those in `keep` when given) and hyperparameters (batch_prompts x b);
    metrics bin_steps / binned_from_steps say so. Unchanged when the log is short."""
    n = len(log)
    b, head = bin_plan(n, max_points)
    if b == 1:
        return log
    cols = {k: bin_means(v, b, head) for k, v in log.columns.items() if keep is None or k in keep}
    hp = dict(log.hyperparameters)
    if "batch_prompts" not in hp and "batch_prompts" in log.columns:
        col = log.columns["batch_prompts"]
        if np.isfinite(col).any():
            hp["batch_prompts"] = float(col[np.isfinite(col)][-1])
    hp = binned_config(hp, b, n, head)
    metrics = {**log.metrics, "bin_steps": float(b), "binned_from_steps": float(n)}
    return replace(log, step=bin_means(log.step, b, head), reward=bin_means(log.reward, b, head),
                   columns=cols, hyperparameters=hp, metrics=metrics)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Window statistics shared by the rules
# ---------------------------------------------------------------------------------------------


def finite(x: np.ndarray) -> np.ndarray:
    return x[np.isfinite(x)]


def window_bounds(m: int, start: float, stop: float) -> tuple[int, int]:
    """(lo, hi): the indices of the fraction [start, stop) of m values, at least one."""
    lo = int(start * m)
    return lo, max(int(math.ceil(stop * m)), lo + 1)


def window_mean(x: np.ndarray, start: float, stop: float) -> float:
    """Mean of the finite values in the fraction [start, stop) of the run (by index)."""
    vals = finite(x)
    if vals.size == 0:
        return math.nan
    lo, hi = window_bounds(vals.size, start, stop)
    return float(np.mean(vals[lo:hi]))


def smooth(x: np.ndarray, width: int) -> np.ndarray:
    """Centred moving average of the finite values (edges use the available points). [S] -> [S'].

    Running sums, O(S): the same windows as `np.convolve(vals, ones(width), "same")` divided by
    the window's point count (that convolution is O(S width): minutes on a 200,000-step log)."""
    vals = finite(x)
    n = vals.size
    width = max(1, min(width, n))
    csum = np.concatenate(([0.0], np.cumsum(vals)))
    i = np.arange(n)
    off = (width - 1) // 2
    lo, hi = np.maximum(i + off - width + 1, 0), np.minimum(i + off, n - 1) + 1
    return (csum[hi] - csum[lo]) / (hi - lo)
