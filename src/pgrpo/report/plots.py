"""The report's figures: one function per panel, each drawing on a given matplotlib Axes from
arrays (no I/O), returning False when the run lacks the signal (the caller then says so)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pgrpo.dynamics.plots import forecast_label  # the words fit.png and the report share

__all__ = ["forecast_label"]

REWARD = "#1f77b4"
MODEL = "#d62728"
BAND = "#ff9896"
GREY = "#7f7f7f"


def _finite(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ok = np.isfinite(x) & np.isfinite(y)
    return x[ok], y[ok]


def reward_panel(
    ax: Any,
    step: np.ndarray,
    reward: np.ndarray,
    fit: Any,
    fc: Any,
    eval_points: tuple[tuple[float, float], ...],
) -> bool:
    """Reward, the rom fit to all steps, the forecast as the report states it (its predicted
    curve after the cut, and the band of its predicted mean over those steps: the number the
    report prints, not a per-step band), and eval accuracy points."""
    ax.plot(step, reward, ".", ms=3, color=REWARD, alpha=0.6, label="train reward")
    if fit is not None:
        ax.plot(fit.step, fit.fitted, "-", color=GREY, lw=1.2,
                label=f"{fit.model} fit to all steps (R$^2$={_r2(fit.r2)})")  # fmt: skip
    if fc is not None:
        words = forecast_label(fc)
        x0, x1 = float(fc.future_step[0]), float(fc.future_step[-1])
        ax.plot(fc.future_step, fc.predicted, "--", color=MODEL, lw=1.4, label=words["line"])
        ax.fill_between([x0, x1], *fc.mean_band, color=BAND, alpha=0.35, label=words["band"])
        ax.hlines(fc.predicted_mean, x0, x1, color=MODEL, lw=1.0)
        if words["observed"]:
            ax.hlines(fc.observed_mean, x0, x1, color="#2ca02c", lw=1.4, ls="-.",
                      label=words["observed"])  # fmt: skip
        ax.axvline(fc.cut_step, color=GREY, ls=":", lw=1)
    if eval_points:
        es, ea = zip(*eval_points, strict=True)
        ax.plot(es, ea, "s-", color="#2ca02c", ms=5, label="eval accuracy")
    r = np.asarray(reward, dtype=float)
    r = r[np.isfinite(r)]
    if r.size and np.ptp(r) <= 1e-9 * float(np.abs(r).max()):
        pad = 0.05 * max(abs(float(r[0])), 1.0)  # a reward that never moved: no 1e-13 offset axis
        ax.set_ylim(float(r[0]) - pad, float(r[0]) + pad)
    ax.set_xlabel("step")
    ax.set_ylabel("reward")
    ax.set_title("Reward, fit and forecast")
    ax.legend(fontsize=7, loc="best")
    return True


def degeneracy_panel(
    ax: Any,
    step: np.ndarray,
    cols: dict[str, np.ndarray],
    iid: np.ndarray | None,
    zero_std: np.ndarray | None = None,
    window: int = 1,
) -> bool:
    """Observed fraction of zero-spread groups (all-pass / all-fail) vs the i.i.d. prediction;
    zero_std: [S] the share of steps whose reward_std is 0 over the last `window` logged steps,
    where the verdict read it (a lower bound on the zero-spread share: such a step had no
    spread in any group)."""
    drawn = False
    if zero_std is not None and np.isfinite(zero_std).any():
        of = f"share of the last {window} logged steps" if window > 1 else "steps"
        ax.plot(*_finite(step, zero_std), "-", lw=1.2, color="#9467bd",
                label=f"{of} with reward_std == 0\n(a lower bound on the share of groups "
                "without spread)")  # fmt: skip
        drawn = True
    for name, label, color in (
        ("frac_reward_zero_std", "degenerate groups (observed)", "#9467bd"),
        ("degeneracy/all_fail", "all fail", "#8c564b"),
        ("degeneracy/all_pass", "all pass", "#17becf"),
    ):
        if name in cols and np.isfinite(cols[name]).any():
            ax.plot(*_finite(step, cols[name]), "-", lw=1.2, color=color, label=label)
            drawn = True
    if iid is not None and np.isfinite(iid).any():
        ax.plot(
            *_finite(step, iid),
            "--",
            color="black",
            lw=1.2,
            label="i.i.d. prediction p$^G$+(1-p)$^G$",
        )
        drawn = True
    if drawn:
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("step")
        ax.set_ylabel("fraction of groups")
        ax.set_title("Advantage degeneracy vs i.i.d. prediction")
        ax.legend(fontsize=8, loc="best")
    return drawn


def series_panel(
    ax: Any,
    step: np.ndarray,
    values: np.ndarray | None,
    title: str,
    ylabel: str,
    color: str = REWARD,
) -> bool:
    if values is None or not np.isfinite(values).any():
        return False
    x, y = _finite(step, values)
    ax.plot(x, y, "-", color=color, lw=1.2)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    return True


def margin_panel(
    ax: Any, step: np.ndarray, margin: np.ndarray | None, k: float | None, source: str
) -> bool:
    """K / K*(n) with the unstable region above 1."""
    if margin is None or not np.isfinite(margin).any():
        return False
    x, y = _finite(step, margin)
    ax.plot(x, y, "-", color=MODEL if np.nanmax(y) >= 1 else REWARD, lw=1.5)
    ax.axhline(1.0, color="black", ls="--", lw=1)
    top = max(1.5, float(np.nanmax(y)) * 1.2)
    ax.axhspan(1.0, top, color=BAND, alpha=0.25, label="unstable (K >= K*)")
    ax.set_ylim(0, top)
    ax.set_xlabel("step")
    ax.set_ylabel("K / K*")
    kk = f"K={k:g}" if k else "K=1 assumed"  # no K given: the diagnosis' K = 1
    ax.set_title(f"Stability margin ({kk}, kappa from {source})")
    ax.legend(fontsize=8, loc="best")
    return True


def pass_at_k_panel(ax: Any, curves: dict[str, dict[str, float]]) -> bool:
    """pass@k against k (log2 axis), one line per system."""
    if not curves:
        return False
    for name, curve in curves.items():
        ks = sorted(int(k) for k in curve)
        ax.plot(ks, [curve[str(k)] for k in ks], "o-", ms=4, label=name)
    ax.set_xscale("log", base=2)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("k")
    ax.set_ylabel("pass@k")
    ax.set_title("pass@k (unbiased)")
    ax.legend(fontsize=8, loc="best")
    return True


def _r2(r2: float) -> str:
    """R^2 for a label: "n/a" when undefined (a reward without variance)."""
    return f"{r2:.2f}" if math.isfinite(r2) else "n/a"
