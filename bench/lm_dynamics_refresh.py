"""The refresh-interval test of bench/lm_dynamics.py (issue #15 (c), (c')): predicted K* against
the observed onset of instability over a grid of K cells, and what counts as observed
instability (the absorbing collapse of a 0/1-reward run, or pgrpo.diagnose's evidence without its
K / K* margin, which would be the prediction under test). Loaded by bench/lm_dynamics.py, which
re-exports these functions.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

from pgrpo.diagnose import diagnose
from pgrpo.diagnose.instability import GRAD_BLOWUP
from pgrpo.diagnose.rules import ALPHA_MODE
from pgrpo.dynamics.optimizers import OptimizerSettings, reduce_optimizer
from pgrpo.logs import read_log

cd = sys.modules["corpus_dynamics"]  # loaded by lm_dynamics (the fits and predictions)
Run = cd.Run


def differs(a: Run, b: Run) -> str:
    """Which hyperparameter distinguishes b from a: lr, G, K, or seed (same hyperparameters)."""
    parts = [
        name
        for name, x, y in (("lr", a.lr.max(), b.lr.max()), ("G", a.G, b.G), ("K", a.K, b.K))
        if not math.isclose(float(x), float(y), rel_tol=1e-9)
    ]
    return "+".join(parts) or "seed"


def collapse(reward: np.ndarray, risen: float = 0.3, dead_steps: int = 3) -> dict:
    """The absorbing failure of a 0/1-reward GRPO run: after the batch mean reached `risen`, the
    run ends with >= dead_steps steps at exactly 0 (every group all-fail: zero advantages, no
    gradient, nothing left to learn from). reward: [n]. zero_steps_after_rise counts every step
    at 0 after the rise (on stable runs: the false alarms such a rule would see)."""
    up = np.flatnonzero(reward >= risen)
    after = reward[up[0] :] if up.size else reward[:0]
    alive = np.flatnonzero(after != 0)
    trailing = after.size - (alive[-1] + 1 if alive.size else 0)
    dead = bool(up.size and trailing >= dead_steps)
    return {
        "collapsed": dead,
        "dead_from_index": int(up[0] + after.size - trailing) if dead else None,
        "zero_steps_after_rise": int((after == 0).sum()),
        "steps_after_rise": int(after.size),
    }


def observed_instability(path: Path, reward: np.ndarray) -> dict:
    """Observed instability of a run: `collapse`, or pgrpo.diagnose's evidence without its K/K*
    margin (that would be the prediction under test): non-finite values, the three reward tests
    (each at level ALPHA_MODE on null curves of the same length; together ~1.5% false alarms on
    pure noise), and grad-norm growth >= GRAD_BLOWUP."""
    mode = next(m for m in diagnose(read_log(path)).modes if m.name == "dynamical_instability")
    ev = mode.evidence
    keys = ("oscillation_growth_p", "spectral_peak_p", "peak_drop_p")
    ps = {k: float(ev[k]) for k in keys if k in ev}
    nonfinite = sorted(k for k in ev if k.startswith("nonfinite"))
    growth = float(ev.get("grad_norm_growth", math.nan))
    flagged = bool(nonfinite) or any(p < ALPHA_MODE for p in ps.values()) or growth >= GRAD_BLOWUP
    dead = collapse(reward)
    return {
        "unstable": flagged or dead["collapsed"],
        "diagnose_flagged": flagged,
        **dead,
        "p_values": ps,
        "nonfinite": nonfinite,
        "grad_norm_growth": growth,
    }


def refresh_test(
    runs: dict[str, Run], fits: dict[str, dict], source: str, unstable: dict[str, dict]
) -> dict:
    """Predicted K* (the source optimizer's reduction at the source's fitted kappa and lr) vs
    the observed onset of instability over the K cells of that optimizer (same lr, G, seed)."""
    src = runs[source]
    settings = OptimizerSettings(
        lr=float(src.lr.max()),
        kappa=fits[source]["kappa"],
        beta1=cd.BETA1,
        refresh_interval=1,
        closure=False,
    )
    red = reduce_optimizer(src.optimizer, settings)
    f = fits[source]  # K* falls as kappa rises: the interval's ends swap
    k_star_90 = [_k_star(src, f["kappa_hi"]), _k_star(src, f["kappa_lo"])]
    ks = sorted(
        {
            r.K: n
            for n, r in runs.items()
            if differs(src, r) in ("K", "seed")
            and r.G == src.G
            and r.optimizer == src.optimizer
            and n in unstable
            and (r.K != src.K or n == source)
        }.items()
    )
    grid = [{"K": k, "run": n, **unstable[n]} for k, n in ks]
    first = next((g["K"] for g in grid if g["unstable"]), None)
    below = [g["K"] for g in grid if first is None or g["K"] < first]
    onset = (
        f"first unstable K between {max(below)} and {first}"
        if first and below
        else f"unstable at K = {first}, the smallest K run"
        if first
        else f"no instability up to K = {max(below)}"
        if below
        else "no K cells"
    )
    inner = [cd.inner_updates(runs, fits, source, n) for k, n in ks if k != src.K]
    return {
        "source": source,
        "optimizer": src.optimizer,
        "K_star": red.K_star,
        "K_statement": red.K_statement,
        "K_star_90": k_star_90,
        "effective_a": red.a,
        "grid": grid,
        "first_unstable_K": first,
        "onset": onset,
        "inner_updates": inner,
        "within_one_grid_step": _within_one_step(red.K_star, first, [g["K"] for g in grid]),
    }


def _k_star(run: Run, kappa: float) -> int | None:
    """K* of the run optimizer's reduction at the run's lr and this kappa; None where it predicts
    no threshold, or kappa <= 0 (no restoring force: no threshold to cross)."""
    if not kappa > 0:
        return None
    s = OptimizerSettings(lr=float(run.lr.max()), kappa=kappa, beta1=cd.BETA1, closure=False)
    return reduce_optimizer(run.optimizer, s).K_star


def _within_one_step(k_star: int | None, first: int | None, grid: list[int]) -> bool | None:
    """Whether the observed threshold agrees with K* to one grid step. The first unstable K =
    grid[i] puts the threshold in (grid[i-1], grid[i]]; agreement: grid[i-2] < K* <= grid[i+1]
    (grid[-1] = 0 below the grid, inf above it). No instability seen: agreement when K* is None
    (no threshold predicted) or above the grid's largest K (not tested past the grid)."""
    if not grid:
        return None
    if first is None:
        return k_star is None or k_star > max(grid)
    if k_star is None:
        return False
    i = grid.index(first)
    lo = grid[i - 2] if i >= 2 else 0
    hi = grid[i + 1] if i + 1 < len(grid) else math.inf
    return lo < k_star <= hi
