"""Pure evaluation statistics over per-problem sample counts: accuracy, pass@k curves, seed
aggregation, paired comparisons and the search-compression analysis (arXiv 2605.07689).

Inputs are counts: for each problem, n samples drawn and c of them correct. pass@k uses the
unbiased estimator of Chen et al. 2021 from `pgrpo.core.stats` (never re-implemented here).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pgrpo.core.stats import accuracy_ci, mean_ci, paired_bootstrap, pass_at_k, welch_t


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
        if any(ci > ni or ci < 0 for ni, ci in zip(self.n, self.c, strict=True)):
            raise ValueError(f"{self.name}: correct counts must lie in [0, n] for every problem")

    @property
    def accuracy(self) -> float:
        """Mean per-problem accuracy c / n (the unbiased pass@1)."""
        return float(np.mean(np.asarray(self.c) / np.asarray(self.n)))

    def summary(self, ks: Sequence[int] | None = None) -> dict[str, Any]:
        """accuracy with a Wilson interval over all samples, pass@k curve, counts."""
        ks = ks or default_ks(min(self.n))
        ci = accuracy_ci(int(sum(self.c)), int(sum(self.n)))
        return {
            "name": self.name,
            "model": self.model,
            "task": self.task,
            "split": self.split,
            "step": self.step,
            "seed": self.seed,
            "accuracy": self.accuracy,
            "accuracy_ci": [ci.low, ci.high],
            "n_problems": len(self.ids),
            "n_samples": int(min(self.n)),
            "pass_at_k": {str(k): v for k, v in pass_at_k_curve(self.n, self.c, ks).items()},
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
        return cls(
            name=str(rec["name"]),
            ids=[str(p["id"]) for p in probs],
            n=[int(p["n"]) for p in probs],
            c=[int(p["c"]) for p in probs],
            step=rec.get("step"),
            seed=int(rec.get("seed", 0)),
            task=str(rec.get("task", "")),
            split=str(rec.get("split", "")),
            model=str(rec.get("model", "")),
            metrics=dict(rec.get("metrics", {})),
        )


def aggregate(runs: Sequence[EvalRun]) -> dict[str, Any]:
    """Several seeds of one system: mean accuracy with a t interval over seeds, mean pass@k."""
    if not runs:
        raise ValueError("aggregate needs at least one eval run")
    accs = [r.accuracy for r in runs]
    ks = default_ks(min(min(r.n) for r in runs))
    curves = [pass_at_k_curve(r.n, r.c, ks) for r in runs]
    out: dict[str, Any] = {
        "seeds": len(runs),
        "accuracy_mean": float(np.mean(accs)),
        "pass_at_k": {str(k): float(np.mean([cv[k] for cv in curves])) for k in ks},
    }
    if len(runs) >= 2:
        ci = mean_ci(accs)
        out["accuracy_ci"] = [ci.low, ci.high]
    else:
        out["accuracy_ci"] = None
        out["note"] = "one seed: the interval over seeds needs >= 2 (see each run's Wilson CI)"
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

    "search compression": pass@1 rises while pass@k_max stays within `tol` of the base (the
    trained model finds in one try what the base found in k); "capacity expansion": pass@k_max
    rises by more than tol; tol = 2 standard errors of the per-problem pass@k_max difference."""
    k_max = min(min(r.n) for r in (*base, *trained))
    ks = default_ks(k_max)
    cb = {k: float(np.mean([pass_at_k_curve(r.n, r.c, [k])[k] for r in base])) for k in ks}
    ct = {k: float(np.mean([pass_at_k_curve(r.n, r.c, [k])[k] for r in trained])) for k in ks}
    pb, pt = _problem_pass(base, k_max), _problem_pass(trained, k_max)
    common = sorted(set(pb) & set(pt))
    d = np.array([pt[i] - pb[i] for i in common])
    se = float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else math.nan
    gain1, gain_k = ct[1] - cb[1], ct[k_max] - cb[k_max]
    tol = 2 * se if math.isfinite(se) else 0.0
    if gain_k > tol:
        verdict = "capacity expansion"
    elif gain1 > tol:
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
        "tolerance": tol,
        "verdict": verdict,
    }


def _problem_pass(runs: Sequence[EvalRun], k: int) -> dict[str, float]:
    vals: dict[str, list[float]] = {}
    for r in runs:
        per = pass_at_k(np.asarray(r.n), np.asarray(r.c), k)
        for i, v in zip(r.ids, np.atleast_1d(per), strict=True):
            vals.setdefault(i, []).append(float(v))
    return {i: float(np.mean(v)) for i, v in vals.items()}
