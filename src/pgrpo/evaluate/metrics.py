"""Pure evaluation statistics over per-problem sample counts: accuracy, pass@k curves, seed
aggregation, paired comparisons and the search-compression analysis (arXiv 2605.07689).

Inputs are counts: for each problem, n samples drawn and c of them correct. pass@k uses the
unbiased estimator of Chen et al. 2021 from `pgrpo.core.stats` (never re-implemented here).

Intervals treat the problem, not the sample, as the unit (`pgrpo.evaluate.intervals`). Two
systems are compared on the problems both evaluated, matched by problem id, once
`pgrpo.evaluate.pairing` has checked that they may be compared.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pgrpo.core.stats import checked_counts, mean_ci, paired_t, pass_at_k, t_halfwidth, welch_t
from pgrpo.errors import UserError
from pgrpo.evaluate.intervals import problem_ci
from pgrpo.evaluate.pairing import (
    Pairing,
    check_one_decoding,
    check_one_problem_set,
    on_problems,
    pair_problems,
)
from pgrpo.evaluate.records import Decoding, checked_record

ID_SOURCES = ("problem", "position")
"""What a run's ids are: "problem", the dataset's own problem identity (`pgrpo.tasks.problem_id`);
"position", row numbers of the split (eval JSONs written before 2026-12-04)."""


def default_ks(n: int) -> list[int]:
    """1, 2, 4, ... up to n, and n itself."""
    ks = [1]
    while ks[-1] * 2 <= n:
        ks.append(ks[-1] * 2)
    return ks if ks[-1] == n else [*ks, n]


def pass_at_k_curve(n: Sequence[int], c: Sequence[int], ks: Sequence[int]) -> dict[int, float]:
    """Mean unbiased pass@k over problems for each k. n, c: [P] counts."""
    n_arr, c_arr = np.asarray(n), np.asarray(c)
    return {int(k): float(np.mean(pass_at_k(n_arr, c_arr, int(k)))) for k in ks}


@dataclass(frozen=True)
class EvalRun:
    """One model evaluated once (one seed) on one task split.

    ids: [P] distinct problem ids; n, c: [P] samples and correct samples per problem; step: the
    training step of the checkpoint (0 = base model, None = unknown); metrics: what scoring
    counted (`reward_errors`, `reward_timeouts`); task_options: the task's options (None:
    unknown); problem_seed: the seed of the problem draw (None: unknown); id_source: what the
    ids are (`ID_SOURCES`); decoding: how the samples were drawn (None: unknown, files written
    before 2026-12-06)."""

    name: str
    ids: list[str]
    n: list[int]
    c: list[int]
    step: int | None = None
    seed: int = 0
    task: str = ""
    split: str = ""
    model: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    task_options: dict[str, Any] | None = None
    problem_seed: int | None = None
    id_source: str = "problem"
    decoding: Decoding | None = None

    def __post_init__(self) -> None:
        if not (len(self.ids) == len(self.n) == len(self.c)) or not self.ids:
            raise ValueError("an eval run needs one id, n and c per problem (and >= 1 problem)")
        if len(set(self.ids)) < len(self.ids):
            twice = next(i for i in self.ids if self.ids.count(i) > 1)
            raise ValueError(
                f"eval run {self.name!r} lists problem {twice!r} twice; give each problem one "
                "entry (its samples and correct samples summed)"
            )
        if self.id_source not in ID_SOURCES:
            raise ValueError(f"id_source must be one of {ID_SOURCES}, got {self.id_source!r}")
        checked_counts(self.n, self.c, self.name)

    @property
    def accuracy(self) -> float:
        """Mean per-problem accuracy c / n (the unbiased pass@1)."""
        return float(np.mean(np.asarray(self.c) / np.asarray(self.n)))

    def per_problem_accuracy(self) -> np.ndarray:
        """[P] c / n."""
        return np.asarray(self.c) / np.asarray(self.n)

    def summary(self, ks: Sequence[int] | None = None) -> dict[str, Any]:
        """accuracy and pass@k, each with an interval over problems (`problem_ci`), counts."""
        ks = ks or default_ks(min(self.n))
        n, c = np.asarray(self.n), np.asarray(self.c)
        lo, hi, method = problem_ci(self.per_problem_accuracy(), max_trials=int(n.sum()))
        per_k = {int(k): pass_at_k(n, c, int(k)) for k in ks}
        return {
            "name": self.name,
            "model": self.model,
            "task": self.task,
            "split": self.split,
            "task_options": self.task_options,
            "problem_seed": self.problem_seed,
            "step": self.step,
            "seed": self.seed,
            "accuracy": self.accuracy,
            "accuracy_ci": [lo, hi],
            "ci_method": method,
            "ci_unit": "problem",
            "n_problems": len(self.ids),
            "n_samples": int(min(self.n)),
            "pass_at_k": {str(k): float(np.mean(v)) for k, v in per_k.items()},
            "pass_at_k_ci": {
                str(k): list(problem_ci(v, max_trials=int((n // k).sum()))[:2])
                for k, v in per_k.items()
            },
            "id_source": self.id_source,
            "decoding": None if self.decoding is None else self.decoding.record(),
            "per_problem": [
                {"id": i, "n": int(n), "c": int(c)}
                for i, n, c in zip(self.ids, self.n, self.c, strict=True)
            ],
            "metrics": dict(self.metrics),
        }

    @classmethod
    def from_summary(cls, rec: Any, index: int = 0) -> EvalRun:
        """The run of one `summary()` record, the `index`th of its file, each field checked
        (`pgrpo.evaluate.records.checked_record`: ValueError naming the result and field)."""
        return cls(**checked_record(rec, index))


def aggregate(runs: Sequence[EvalRun]) -> dict[str, Any]:
    """Several seeds of one system on one problem set, sampled alike (UserError otherwise:
    `check_one_problem_set`, `check_one_decoding`): mean accuracy and pass@k with intervals
    over problems (each problem's score averaged over the seeds), and the seed-to-seed t
    interval (sampling noise only, the problems held fixed) when there are >= 2 seeds, clipped
    to [0, 1] (`seed_ci_clipped` says when it was). Seeds that all gave the same accuracy have no
    seed-to-seed interval (`core.stats.t_interval`: undefined, not zero-width): `seed_ci` is None
    and `note` says why, as with one seed."""
    if not runs:
        raise UserError(
            "no eval results to aggregate",
            "give at least one result (an eval JSON that `pgrpo eval --out` wrote holds one per "
            "seed)",
        )
    check_one_problem_set(runs)
    check_one_decoding(runs)
    accs = [r.accuracy for r in runs]
    ks = default_ks(min(min(r.n) for r in runs))
    curves = [pass_at_k_curve(r.n, r.c, ks) for r in runs]
    samples = sum(sum(r.n) for r in runs)
    lo, hi, method = problem_ci(list(_per_problem(runs).values()), max_trials=samples)
    out: dict[str, Any] = {
        "seeds": len(runs),
        "accuracy_mean": float(np.mean(accs)),
        "accuracy_ci": [lo, hi],
        "ci_method": method,
        "ci_unit": "problem",
        "pass_at_k": {str(k): float(np.mean([cv[k] for cv in curves])) for k in ks},
        "pass_at_k_ci": {
            str(k): list(
                problem_ci(
                    list(_problem_pass(runs, k).values()),
                    max_trials=sum(int((np.asarray(r.n) // k).sum()) for r in runs),
                )[:2]
            )
            for k in ks
        },
    }
    if len(runs) < 2:
        out["seed_ci"] = None
        out["note"] = "one seed: the seed-to-seed interval needs >= 2 seeds"
    elif math.isnan((ci := mean_ci(accs)).low):
        out["seed_ci"] = None
        out["note"] = (
            f"all {len(runs)} seeds gave the same accuracy ({accs[0]:.3f}): with no spread "
            "between seeds the seed-to-seed t interval is undefined (the interval over problems "
            "stands); seeds differ only when sampling at temperature > 0"
        )
    else:
        out["seed_ci"] = [max(0.0, ci.low), min(1.0, ci.high)]
        out["seed_ci_clipped"] = bool(ci.low < 0.0 or ci.high > 1.0)
    return out


def _per_problem(runs: Sequence[EvalRun]) -> dict[str, float]:
    """Problem id -> accuracy averaged over the runs (seeds) that have it."""
    sums: dict[str, list[float]] = {}
    for r in runs:
        for i, n, c in zip(r.ids, r.n, r.c, strict=True):
            sums.setdefault(i, []).append(c / n)
    return {i: float(np.mean(v)) for i, v in sums.items()}


# ---------------------------------------------------------------------------------------------
# Two systems on the problems they share (`pgrpo.evaluate.pairing`)
# ---------------------------------------------------------------------------------------------


def compare(
    a: Sequence[EvalRun], b: Sequence[EvalRun], *, pairing: Pairing | None = None
) -> dict[str, Any]:
    """System a vs b on the problems both evaluated (`pair_problems`): the paired t over them
    (`core.stats.paired_t` on each problem's accuracy averaged over seeds, dof = problems - 1)
    and Welch's t on seed accuracies over them (>= 2 seeds each). Until 2026-12-06 the paired
    comparison was a percentile bootstrap: with 2 problems its "95%" interval was [min d, max
    d] and it called 24% of comparisons of two equal systems significant (bench/eval_paired.py)."""
    pairing = pairing or pair_problems(a, b)
    a, b = on_problems(a, pairing.ids), on_problems(b, pairing.ids)
    pa, pb = _per_problem(a), _per_problem(b)
    common = pairing.ids
    pt = paired_t([pa[i] for i in common], [pb[i] for i in common])
    defined = not math.isnan(pt.low)  # no spread in the differences: undefined
    out: dict[str, Any] = {
        "problems": len(common),
        "problems_a": pairing.problems_a,
        "problems_b": pairing.problems_b,
        "paired_by": pairing.by,
        "diff": pt.diff,
        # a difference of accuracies, in [-1, 1]; NaN (JSON null) where undefined
        "paired_ci": [max(pt.low, -1.0), min(pt.high, 1.0)] if defined else [math.nan] * 2,
        "paired_ci_clipped": defined and bool(pt.low < -1.0 or pt.high > 1.0),
        "paired_p": pt.p_value,
        "paired_t": pt.t,
        "paired_dof": pt.dof,
        "paired_method": "paired t on per-problem accuracy differences, dof = problems - 1",
        "warnings": list(pairing.warnings),
    }
    if not defined:
        out["paired_note"] = (
            f"every shared problem's accuracy changed by the same amount ({pt.diff:+.3f}): with "
            "no spread the paired t is undefined; evaluate more problems or samples"
        )
    if len(a) >= 2 and len(b) >= 2:
        w = welch_t([r.accuracy for r in a], [r.accuracy for r in b])
        out.update(
            welch_t=w.t, welch_dof=w.dof, welch_p=w.p_value, welch_ci=[w.diff_low, w.diff_high]
        )
    else:
        out["welch_note"] = "Welch's t needs >= 2 seeds per system"
    return out


def search_compression(
    base: Sequence[EvalRun], trained: Sequence[EvalRun], *, pairing: Pairing | None = None
) -> dict[str, Any]:
    """pass@k curves of base and trained on the problems both evaluated, and their gap at k = 1
    and the largest common k.

    "search compression": pass@1 rises by more than the half-width of the 95% t interval of
    the mean per-problem pass@1 difference (dof = problems - 1) while pass@k_max does not rise
    by more than its own (the trained model finds in one try what the base found in k);
    "capacity expansion": pass@k_max rises by more than its half-width. Each gain is judged by
    its own spread: judged by pass@k_max's, a pass@1 gain of one sample in 400 was a "search
    compression" whenever every problem was solved at k_max by both (spread 0). Until
    2026-12-06 the tolerance was 2 standard errors (a normal rule: too narrow for a handful of
    problems). With one sample per problem (k_max = 1: greedy decoding) pass@k_max is pass@1
    and the two cannot be told apart: "not judged"; so too a non-zero gain with no spread (every
    problem changed alike; the paired t of 19% of no-change comparisons of 2 problems has no
    spread, bench/results/eval_paired.json): its tolerance is undefined (NaN, JSON null), and
    an undefined tolerance never passes for a zero one. A gain of exactly 0 needs none: every
    problem's pass@k_max unchanged is no rise (the compression case of all problems solved at
    k_max by both)."""
    pairing = pairing or pair_problems(trained, base)
    base, trained = on_problems(base, pairing.ids), on_problems(trained, pairing.ids)
    k_max = min(min(r.n) for r in (*base, *trained))
    ks = default_ks(k_max)
    cb = {k: float(np.mean([pass_at_k_curve(r.n, r.c, [k])[k] for r in base])) for k in ks}
    ct = {k: float(np.mean([pass_at_k_curve(r.n, r.c, [k])[k] for r in trained])) for k in ks}
    # a difference of means in [0, 1] within 1e-12 of 0 is rounding (the same seeds averaged in
    # another order gave 1.1e-16, "not judged"), read as no gain
    gain1, gain_k = (0.0 if abs(g) <= 1e-12 else g for g in (ct[1] - cb[1], ct[k_max] - cb[k_max]))
    tol1, tol_k = (_tolerance(base, trained, k) for k in (1, k_max))
    out: dict[str, Any] = {"problems": len(pairing.ids)}
    if k_max < 2:
        verdict = "not judged"
        out["verdict_note"] = (
            "one sample per problem: pass@k for k > 1 is unknown, so a gain cannot be told "
            "capacity expansion or search compression; evaluate both with --samples >= 2 "
            "(e.g. 8) at temperature > 0"
        )
    elif flat := [
        k for k, g, t in ((1, gain1, tol1), (k_max, gain_k, tol_k)) if g and math.isnan(t)
    ]:
        verdict = "not judged"
        out["verdict_note"] = (
            f"every shared problem's pass@{flat[0]} changed by the same amount: with no spread "
            "there is no tolerance to judge the gain by; evaluate more problems"
        )
    elif gain_k > tol_k:
        verdict = "capacity expansion"
    elif gain1 > tol1:
        verdict = "search compression"
    else:
        verdict = "no clear gain"
    return out | {
        "ks": ks,
        "base": {str(k): v for k, v in cb.items()},
        "trained": {str(k): v for k, v in ct.items()},
        "gain_pass1": gain1,
        "gain_pass_kmax": gain_k,
        "k_max": k_max,
        "tolerance_pass1": tol1,
        "tolerance_pass_kmax": tol_k,
        "verdict": verdict,
    }


def _tolerance(base: Sequence[EvalRun], trained: Sequence[EvalRun], k: int) -> float:
    """Half-width of the 95% t interval of the mean per-problem pass@k difference (trained -
    base) over the problems both evaluated (>= 2: `pair_problems`; `core.stats.t_halfwidth`):
    NaN (undefined) when every problem's difference is the same."""
    pb, pt = _problem_pass(base, k), _problem_pass(trained, k)
    return t_halfwidth([pt[i] - pb[i] for i in sorted(set(pb) & set(pt))])


def _problem_pass(runs: Sequence[EvalRun], k: int) -> dict[str, float]:
    vals: dict[str, list[float]] = {}
    for r in runs:
        per = pass_at_k(np.asarray(r.n), np.asarray(r.c), k)
        for i, v in zip(r.ids, np.atleast_1d(per), strict=True):
            vals.setdefault(i, []).append(float(v))
    return {i: float(np.mean(v)) for i, v in vals.items()}
