"""The pure analysis of bench/reproduce_lm_mdp.py and bench/reproduce_lm_rank.py: sparsity
measures of a gradient (Hoyer, top share), intervals and Welch's t over seeds, SSR / HSR by
constraint count, the sparsity-growth test over layers, the zero-variance rate of a log. No model,
no I/O; tested in tests/test_bench_reproduce_lm_mdp.py."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats


def hoyer(x: np.ndarray) -> float:
    """Hoyer sparsity (sqrt(n) - |x|_1 / |x|_2) / (sqrt(n) - 1) of x: [n]; 0 for a constant-
    magnitude vector, 1 for a single non-zero entry; 0 for the zero vector (no direction)."""
    x = np.abs(np.asarray(x, dtype=np.float64).ravel())
    n, l2 = x.size, float(np.sqrt((x * x).sum()))
    if n < 2 or l2 == 0.0:
        return 0.0
    return float((np.sqrt(n) - x.sum() / l2) / (np.sqrt(n) - 1.0))


def top_share(x: np.ndarray, q: float = 0.01) -> float:
    """Share of the squared mass sum x^2 held by the ceil(q n) largest |x_j|. x: [n]; 0 for the
    zero vector. q n entries of equal magnitude give q; one non-zero entry gives 1."""
    x = np.asarray(x, dtype=np.float64).ravel()
    e = x * x
    total = float(e.sum())
    if total == 0.0:
        return 0.0
    k = max(1, int(np.ceil(q * e.size)))
    return float(np.partition(e, e.size - k)[e.size - k :].sum() / total)


def mean_interval(values: Sequence[float], level: float = 0.95) -> dict[str, Any]:
    """Mean and t interval over values: [n], pgrpo's one t interval (`core.stats.t_interval`);
    ci None where it is undefined: one value, or values with no spread (until session 40 this
    printed [m, m] there, a claim of certainty the seeds do not make)."""
    from pgrpo.core.stats import t_interval

    v = np.asarray(values, dtype=np.float64).reshape(-1)
    m = float(v.mean()) if v.size else math.nan
    if v.size < 2 or not np.all(np.isfinite(v)):  # a NaN cell: its mean is NaN, no interval
        return {"mean": m, "ci": None, "n": int(v.size)}
    t = t_interval(v, level=level)
    ci = None if math.isnan(t.halfwidth) else [m - t.halfwidth, m + t.halfwidth]
    return {"mean": m, "ci": ci, "n": int(v.size)}


def show_ci(ci: Sequence[float] | None, fmt: str = ".3f") -> str:
    """'[lo, hi]' or 'n/a' (undefined: one seed, or no spread)."""
    return "n/a" if ci is None else f"[{ci[0]:{fmt}}, {ci[1]:{fmt}}]"


def welch(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """Welch's t test of mean(a) vs mean(b) (seed means); nan when either has < 2 values or both
    have zero variance."""
    from pgrpo.core.stats import welch_t

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    diff = float(a.mean() - b.mean()) if a.size and b.size else float("nan")
    if a.size < 2 or b.size < 2 or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return {"diff": diff, "t": float("nan"), "p": float("nan")}
    res = welch_t(a, b)  # pgrpo's one Welch test (no spread in both, up to rounding: nan)
    return {"diff": diff, "t": res.t, "p": res.p_value}


def ssr_hsr(rewards: Sequence[float], counts: Sequence[int]) -> dict[str, float]:
    """SSR (constraints followed / constraints) and HSR (share of prompts with all followed) of
    per-prompt rewards r = followed / C. rewards, counts: [P]."""
    r, c = np.asarray(rewards, dtype=np.float64), np.asarray(counts, dtype=np.int64)
    followed = np.round(r * c)
    return {
        "ssr": float(followed.sum() / c.sum()) if c.sum() else float("nan"),
        "hsr": float(np.mean(r >= 1.0 - 1e-9)) if r.size else float("nan"),
        "prompts": int(r.size),
    }


def by_count(rewards: Sequence[float], counts: Sequence[int]) -> dict[str, dict[str, float]]:
    """ssr_hsr per constraint count C (keys 'C=1'..) and over all prompts ('all')."""
    r, c = np.asarray(rewards, dtype=np.float64), np.asarray(counts, dtype=np.int64)
    out = {f"C={k}": ssr_hsr(r[c == k], c[c == k]) for k in sorted(set(c.tolist()))}
    out["all"] = ssr_hsr(r, c)
    return out


def prompt_interval(per_prompt: np.ndarray, level: float = 0.95) -> list[float]:
    """t interval over prompts of the mean of per_prompt: [P] (the per-prompt value averaged over
    seeds), the 'interval over prompts'."""
    return mean_interval(per_prompt, level)["ci"]


def sparsity_growth(cells: dict[str, Any], stage_a: str, stage_b: str) -> dict[str, Any]:
    """Per estimator and measure: per-layer change b - a averaged over seeds, the layers where it
    grows, and a Wilcoxon signed-rank test over layers of the seed-mean changes (layers are not
    independent: read p as descriptive), plus per-seed mean changes.

    cells: "seed{s}/{stage}" -> {"sparsity": {estimator: {measure: {layer: value}}}}."""
    seeds = sorted({k.split("/")[0] for k in cells if k.endswith("/" + stage_a)})
    seeds = [s for s in seeds if f"{s}/{stage_b}" in cells]
    out: dict[str, Any] = {"seeds": seeds}
    if not seeds:
        return out
    first = cells[f"{seeds[0]}/{stage_a}"]["sparsity"]
    for est, measures in first.items():
        for measure, layers in measures.items():
            names = sorted(layers)
            deltas = np.array(
                [
                    [
                        cells[f"{s}/{stage_b}"]["sparsity"][est][measure][n]
                        - cells[f"{s}/{stage_a}"]["sparsity"][est][measure][n]
                        for n in names
                    ]
                    for s in seeds
                ]
            )  # [S, L]
            mean = deltas.mean(0)
            nz = mean[mean != 0]
            p = float(stats.wilcoxon(nz).pvalue) if nz.size >= 6 else float("nan")
            out[f"{est}/{measure}"] = {
                "layers": len(names),
                "layers_growing": int((mean > 0).sum()),
                "median_change": float(np.median(mean)),
                "wilcoxon_p": p,
                "per_seed_mean_change": deltas.mean(1).tolist(),
                "seeds_growing": int((deltas.mean(1) > 0).sum()),
            }
    return out


def zero_variance_rate(history: Sequence[dict[str, Any]]) -> float:
    """Mean over steps of the logged share of groups with zero reward spread."""
    return float(np.mean([h["frac_reward_zero_std"] for h in history]))
