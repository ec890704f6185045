"""Pure evaluation statistics over per-problem sample counts: accuracy, pass@k curves, seed
aggregation, paired comparisons and the search-compression analysis (arXiv 2605.07689).

Inputs are counts: for each problem, n samples drawn and c of them correct. pass@k uses the
unbiased estimator of Chen et al. 2021 from `pgrpo.core.stats` (never re-implemented here).

Intervals treat the problem, not the sample, as the unit: 50 problems x 8 samples are 50 draws
from the problem population, whose 8 samples are correlated (a hard problem fails all 8), not 400
independent trials. `problem_ci` is a cluster bootstrap (problems resampled with replacement,
BCa, `scipy.stats.bootstrap`) of the mean of per-problem scores (accuracy c/n or pass@k).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pgrpo.core.stats import checked_counts, mean_ci, paired_bootstrap, pass_at_k, welch_t


def default_ks(n: int) -> list[int]:
    """1, 2, 4, ... up to n, and n itself."""
    ks = [1]
    while ks[-1] * 2 <= n:
        ks.append(ks[-1] * 2)
    return ks if ks[-1] == n else [*ks, n]


N_RESAMPLES = 4000
"""Bootstrap resamples of `problem_ci` (Monte-Carlo error of an endpoint ~0.1 x its stderr)."""


def problem_ci(
    values: Sequence[float],
    *,
    level: float = 0.95,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float, str]:
    """(low, high, method): interval for the mean over problems of per-problem scores.

    values: [P] one score per problem in [0, 1] (accuracy c/n, or unbiased pass@k). method
    'cluster_bootstrap_bca': problems resampled with replacement (seeded), BCa (Efron 1987).
    When the bootstrap is degenerate (P < 2 or all scores equal, e.g. 0 of 50 problems solved)
    it is 'wilson_problems': Wilson's interval with P trials at the observed mean, the worst
    case of perfect within-problem correlation (never narrower than the problems support).
    """
    x = np.asarray(values, dtype=float).reshape(-1)
    if x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError(f"problem_ci needs >= 1 finite per-problem score, got {x!r}")
    mean = float(x.mean())
    if x.size >= 2 and np.ptp(x) > 0:
        from scipy.stats import bootstrap

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # BCa's degenerate-jackknife warning: handled below
            res = bootstrap(
                (x,), np.mean, n_resamples=n_resamples, confidence_level=level,
                method="BCa", rng=np.random.default_rng(seed), vectorized=True,
            )  # fmt: skip
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(lo) and math.isfinite(hi):
            return max(0.0, min(lo, mean)), min(1.0, max(hi, mean)), "cluster_bootstrap_bca"
    z = float(_norm_ppf(0.5 + level / 2))
    m = x.size
    denom = 1 + z * z / m
    centre = (mean + z * z / (2 * m)) / denom
    half = z * math.sqrt(max(mean * (1 - mean), 0.0) / m + z * z / (4 * m * m)) / denom
    lo = 0.0 if mean <= 0.0 else max(0.0, centre - half)  # exact ends at 0 and 1, not 1e-17
    hi = 1.0 if mean >= 1.0 else min(1.0, centre + half)
    return lo, hi, "wilson_problems"


def _norm_ppf(q: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(q))


def pass_at_k_curve(n: Sequence[int], c: Sequence[int], ks: Sequence[int]) -> dict[int, float]:
    """Mean unbiased pass@k over problems for each k. n, c: [P] counts."""
    n_arr, c_arr = np.asarray(n), np.asarray(c)
    return {int(k): float(np.mean(pass_at_k(n_arr, c_arr, int(k)))) for k in ks}


@dataclass(frozen=True)
class EvalRun:
    """One model evaluated once (one seed) on one task split.

    ids: [P] problem ids; n, c: [P] samples and correct samples per problem; step: the training
    step of the checkpoint (0 = base model, None = unknown)."""

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

    def __post_init__(self) -> None:
        if not (len(self.ids) == len(self.n) == len(self.c)) or not self.ids:
            raise ValueError("an eval run needs one id, n and c per problem (and >= 1 problem)")
        checked_counts(self.n, self.c, self.name)

    @property
    def accuracy(self) -> float:
        """Mean per-problem accuracy c / n (the unbiased pass@1)."""
        return float(np.mean(np.asarray(self.c) / np.asarray(self.n)))

    def per_problem_accuracy(self) -> np.ndarray:
        """[P] c / n."""
        return np.asarray(self.c) / np.asarray(self.n)

    def summary(self, ks: Sequence[int] | None = None, *, seed: int = 0) -> dict[str, Any]:
        """accuracy and pass@k, each with an interval over problems (`problem_ci`), counts."""
        ks = ks or default_ks(min(self.n))
        lo, hi, method = problem_ci(self.per_problem_accuracy(), seed=seed)
        per_k = {int(k): pass_at_k(np.asarray(self.n), np.asarray(self.c), int(k)) for k in ks}
        return {
            "name": self.name,
            "model": self.model,
            "task": self.task,
            "split": self.split,
            "step": self.step,
            "seed": self.seed,
            "accuracy": self.accuracy,
            "accuracy_ci": [lo, hi],
            "ci_method": method,
            "ci_unit": "problem",
            "n_problems": len(self.ids),
            "n_samples": int(min(self.n)),
            "pass_at_k": {str(k): float(np.mean(v)) for k, v in per_k.items()},
            "pass_at_k_ci": {str(k): list(problem_ci(v, seed=seed)[:2]) for k, v in per_k.items()},
            "per_problem": [
                {"id": i, "n": int(n), "c": int(c)}
                for i, n, c in zip(self.ids, self.n, self.c, strict=True)
            ],
            "metrics": dict(self.metrics),
        }

    @classmethod
    def from_summary(cls, rec: dict[str, Any]) -> EvalRun:
        probs = rec.get("per_problem")
        if not probs:
            raise ValueError(f"eval result {rec.get('name', '?')!r} has no per_problem counts")
        name = str(rec["name"])
        n, c = checked_counts([p["n"] for p in probs], [p["c"] for p in probs], name)
        return cls(
            name=name,
            ids=[str(p["id"]) for p in probs],
            n=n,
            c=c,
            step=rec.get("step"),
            seed=int(rec.get("seed", 0)),
            task=str(rec.get("task", "")),
            split=str(rec.get("split", "")),
            model=str(rec.get("model", "")),
            metrics=dict(rec.get("metrics", {})),
        )


def aggregate(runs: Sequence[EvalRun], *, seed: int = 0) -> dict[str, Any]:
    """Several seeds of one system: mean accuracy and pass@k with intervals over problems (each
    problem's score averaged over the seeds that have it), and the seed-to-seed t interval
    (sampling noise only, the problems held fixed) when there are >= 2 seeds."""
    if not runs:
        raise ValueError("aggregate needs at least one eval run")
    accs = [r.accuracy for r in runs]
    ks = default_ks(min(min(r.n) for r in runs))
    curves = [pass_at_k_curve(r.n, r.c, ks) for r in runs]
    lo, hi, method = problem_ci(list(_per_problem(runs).values()), seed=seed)
    out: dict[str, Any] = {
        "seeds": len(runs),
        "accuracy_mean": float(np.mean(accs)),
        "accuracy_ci": [lo, hi],
        "ci_method": method,
        "ci_unit": "problem",
        "pass_at_k": {str(k): float(np.mean([cv[k] for cv in curves])) for k in ks},
        "pass_at_k_ci": {
            str(k): list(problem_ci(list(_problem_pass(runs, k).values()), seed=seed)[:2])
            for k in ks
        },
    }
    if len(runs) >= 2:
        ci = mean_ci(accs)
        out["seed_ci"] = [ci.low, ci.high]
    else:
        out["seed_ci"] = None
        out["note"] = "one seed: the seed-to-seed interval needs >= 2 seeds"
    return out


def _per_problem(runs: Sequence[EvalRun]) -> dict[str, float]:
    """Problem id -> accuracy averaged over the runs (seeds) that have it."""
    sums: dict[str, list[float]] = {}
    for r in runs:
        for i, n, c in zip(r.ids, r.n, r.c, strict=True):
            sums.setdefault(i, []).append(c / n)
    return {i: float(np.mean(v)) for i, v in sums.items()}


def compare(a: Sequence[EvalRun], b: Sequence[EvalRun], *, seed: int = 0) -> dict[str, Any]:
    """System a vs b: Welch's t on seed accuracies (>= 2 seeds each) and a paired bootstrap over
    the problems both evaluated (per-problem accuracy averaged over seeds)."""
    pa, pb = _per_problem(a), _per_problem(b)
    common = sorted(set(pa) & set(pb))
    if len(common) < 2:
        raise ValueError(
            f"the two systems share {len(common)} problems; evaluate both on the same split "
            "and problem subset (same --problems and --seed of the problem draw)"
        )
    boot = paired_bootstrap([pa[i] for i in common], [pb[i] for i in common], seed=seed)
    out: dict[str, Any] = {
        "problems": len(common),
        "diff": boot.diff,
        "bootstrap_ci": [boot.low, boot.high],
        "bootstrap_p": boot.p_value,
    }
    if len(a) >= 2 and len(b) >= 2:
        w = welch_t([r.accuracy for r in a], [r.accuracy for r in b])
        out.update(
            welch_t=w.t, welch_dof=w.dof, welch_p=w.p_value, welch_ci=[w.diff_low, w.diff_high]
        )
    else:
        out["welch_note"] = "Welch's t needs >= 2 seeds per system"
    return out


def search_compression(base: Sequence[EvalRun], trained: Sequence[EvalRun]) -> dict[str, Any]:
    """pass@k curves of base and trained and their gap at k = 1 and the largest common k.

    "search compression": pass@1 rises by more than 2 standard errors of the per-problem pass@1
    difference while pass@k_max does not rise by more than 2 standard errors of the per-problem
    pass@k_max difference (the trained model finds in one try what the base found in k);
    "capacity expansion": pass@k_max rises by more than its 2 standard errors. Each gain is
    judged by its own spread: judged by pass@k_max's, a pass@1 gain of one sample in 400 was a
    "search compression" whenever every problem was solved at k_max by both (spread 0)."""
    k_max = min(min(r.n) for r in (*base, *trained))
    ks = default_ks(k_max)
    cb = {k: float(np.mean([pass_at_k_curve(r.n, r.c, [k])[k] for r in base])) for k in ks}
    ct = {k: float(np.mean([pass_at_k_curve(r.n, r.c, [k])[k] for r in trained])) for k in ks}
    gain1, gain_k = ct[1] - cb[1], ct[k_max] - cb[k_max]
    tol1, tol_k = (_two_se(base, trained, k) for k in (1, k_max))
    if gain_k > tol_k:
        verdict = "capacity expansion"
    elif gain1 > tol1:
        verdict = "search compression"
    else:
        verdict = "no clear gain"
    return {
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


def _two_se(base: Sequence[EvalRun], trained: Sequence[EvalRun], k: int) -> float:
    """2 standard errors of the mean per-problem pass@k difference (trained - base) over the
    problems both evaluated (0 with fewer than 2 problems)."""
    pb, pt = _problem_pass(base, k), _problem_pass(trained, k)
    d = np.array([pt[i] - pb[i] for i in sorted(set(pb) & set(pt))])
    return 2 * float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else 0.0


def _problem_pass(runs: Sequence[EvalRun], k: int) -> dict[str, float]:
    vals: dict[str, list[float]] = {}
    for r in runs:
        per = pass_at_k(np.asarray(r.n), np.asarray(r.c), k)
        for i, v in zip(r.ids, np.atleast_1d(per), strict=True):
            vals.setdefault(i, []).append(float(v))
    return {i: float(np.mean(v)) for i, v in vals.items()}
