"""One PNG per reproduction (matplotlib, Agg backend; no display needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pgrpo.bandit.experiments.base import ExperimentResult


def _figure(ncols: int = 1, nrows: int = 1, size: tuple[float, float] = (6.0, 4.0)):
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows))
    return plt, fig, np.atleast_1d(axes).ravel()


def _save(plt, fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_threshold(result: ExperimentResult, path: Path) -> None:
    """Window growth of the mean deviation vs K / K*_pred, one panel per (optimizer, ratio)."""
    keys = list(dict.fromkeys((r["optimizer"], r["importance_ratio"]) for r in result.rows))
    plt, fig, axes = _figure(len(keys), 1, (4.5, 3.8))
    for ax, (opt, ratio) in zip(axes, keys, strict=False):
        for r in result.rows:
            if (r["optimizer"], r["importance_ratio"]) != (opt, ratio):
                continue
            k = np.asarray(r["sweep_K"], dtype=float) / r["predicted_K"]
            ax.plot(k, r["sweep_growth"], "o-", ms=3, label=f"beta1={r['beta1']}")
        ax.axvline(1.0, color="k", lw=0.8, ls="--")
        ax.axhline(0.0, color="gray", lw=0.6)
        ax.set_title(f"{opt}, ratio={ratio}")
        ax.set_xlabel("K / predicted K*")
        ax.set_ylabel("log growth of |mean deviation|")
        ax.legend(fontsize=7)
    _save(plt, fig, path)


def plot_transition(result: ExperimentResult, path: Path) -> None:
    plt, fig, axes = _figure(2, 1, (5.0, 3.8))
    grid = np.asarray(result.series["grid_a_over_onset"])
    for r in result.rows:
        axes[0].step(
            grid, np.asarray(r["oscillates"], dtype=float), where="mid", label=f"beta1={r['beta1']}"
        )
    axes[0].axvline(1.0, color="k", lw=0.8, ls="--")
    axes[0].set_xscale("log")
    axes[0].set_xlabel("a / predicted onset")
    axes[0].set_ylabel("measured oscillation (AR(2) complex roots)")
    axes[0].legend(fontsize=7)
    for label, x in result.series["trajectories"].items():
        axes[1].plot(x, label=label)
    axes[1].axhline(0.0, color="gray", lw=0.6)
    axes[1].set_xlabel("step")
    axes[1].set_ylabel("mean logit gap - d*")
    axes[1].legend(fontsize=6)
    _save(plt, fig, path)


def plot_group_size(result: ExperimentResult, path: Path) -> None:
    ests = list(dict.fromkeys(r["estimator"] for r in result.rows))
    plt, fig, axes = _figure(len(ests) + 1, 1, (4.8, 3.8))
    for ax, est in zip(axes, ests, strict=False):
        for label, s in result.series.items():
            if label.startswith(est + " "):
                (line,) = ax.plot(s["mean"], label=label.split(" ", 1)[1])
                ax.plot(s["mean_field"], ls="--", color=line.get_color(), lw=0.8)
        ax.set_title(f"{est}: mean R (solid) vs exact-force mean field (dashed)", fontsize=8)
        ax.set_xlabel("step")
        ax.set_ylabel("expected reward R")
        ax.legend(fontsize=7)
    ax = axes[-1]
    for est in ests:
        rows = [r for r in result.rows if r["estimator"] == est]
        g = [r["G"] for r in rows]
        ax.plot(g, [r["var_obs_x_G_over_pq"] for r in rows], "o-", label=f"{est}: Var(obs) G / pq")
        ax.plot(g, [1e3 * r["var_R_x_G"] for r in rows], "s--", label=f"{est}: 1e3 Var(R) G")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("G")
    ax.legend(fontsize=6)
    _save(plt, fig, path)


def plot_degeneracy(result: ExperimentResult, path: Path) -> None:
    plt, fig, axes = _figure(1, 1, (7.0, 4.0))
    ax = axes[0]
    x = np.arange(len(result.rows))
    for off, key, label in (
        (-0.25, "observed_step0", "observed"),
        (0.0, "iid_step0", "i.i.d. f_G(pbar)"),
        (0.25, "jensen_heldout", "Jensen (held-out)"),
    ):
        ax.bar(x + off, [r[key] for r in result.rows], width=0.25, label=label)
    ax.set_xticks(x, [r["setting"] for r in result.rows], rotation=20, fontsize=8)
    ax.set_ylabel("degenerate groups (initial policy)")
    ax.legend(fontsize=8)
    _save(plt, fig, path)


def plot_sign(result: ExperimentResult, path: Path) -> None:
    plt, fig, axes = _figure(1, 1, (6.5, 4.0))
    ax = axes[0]
    for name, s in result.series.items():
        m, sd = np.asarray(s["mean"]), np.asarray(s["std"])
        (line,) = ax.plot(m, label=name)
        ax.fill_between(np.arange(m.size), m - sd, m + sd, color=line.get_color(), alpha=0.15)
    ax.set_xlabel("step")
    ax.set_ylabel("accuracy (mean exact success probability)")
    ax.legend(fontsize=8)
    _save(plt, fig, path)
