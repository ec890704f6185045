"""PNG figures for `pgrpo fit` and `pgrpo predict` (matplotlib, Agg backend, no display)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from pgrpo.dynamics.logfit import LogFit  # noqa: E402
from pgrpo.dynamics.predict import Prediction  # noqa: E402


def plot_log_fit(fit: LogFit, path: Path) -> Path:
    """Data, rom fit, baselines and (when present) the forecast band."""
    log = fit.log
    fig, ax = plt.subplots(figsize=(9, 5))
    ax.plot(log.step, log.reward, ".", ms=3, color="0.6", label="reward (log)")
    ax.plot(log.step, fit.rom.fitted, lw=2, label=f"{fit.rom.model} (R^2={fit.rom.r2:.3f})")
    for name, r in fit.baselines.items():
        ax.plot(log.step, r.fitted, "--", lw=1.2, label=f"{name} (R^2={r.r2:.3f})")
    fc = fit.forecast
    if fc is not None:
        ax.axvline(fc.cut_step, color="k", lw=0.8, ls=":")
        ax.plot(fc.future_step, fc.predicted, color="C3", lw=1.5, label="forecast")
        ax.fill_between(
            fc.future_step,
            fc.band_lo,
            fc.band_hi,
            color="C3",
            alpha=0.15,
            label=f"{int(fc.level * 100)}% band",
        )
        ax.hlines(
            fc.baselines["last_window_mean"],
            fc.future_step[0],
            fc.future_step[-1],
            colors="C4",
            linestyles="-.",
            label="last-window mean",
        )
    ax.set_xlabel("step")
    ax.set_ylabel(log.reward_key)
    ax.legend(fontsize=8)
    ax.set_title(Path(log.source).name)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_prediction(pred: Prediction, path: Path) -> Path:
    """The exact recursion's mean trajectory, the continuum closed form, +- stationary std."""
    m = pred.metrics
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(pred.step, pred.mean, lw=2, label="mean (exact recursion)")
    ax.plot(pred.step, pred.closed_form, "--", lw=1.2, label="closed form (continuum)")
    sd = m["stationary_std"]
    if sd == sd and sd < 1e3:
        ax.fill_between(
            pred.step, pred.mean - sd, pred.mean + sd, alpha=0.15, label="+- stationary std"
        )
    ax.set_xlabel("step")
    ax.set_ylabel("expected reward")
    ax.set_title(
        f"{m['regime']}, zeta={m['damping_ratio']:.3g}, tau={m['tau']:.3g}, "
        f"K*={m['refresh_threshold']}"
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
