"""The probe's direction noise on a quadratic of known curvature: bias of kappa and calibration of
its standard error (a jackknife over the direction batches, since 2026-12-06, session 39).

The review's construction (/tmp/rev39_rank/probe_quad.py): a 6-d quadratic, Hessian eigenvalues
0.1-10 in a random basis (torch seed 0), ascent gradient -H (theta - t) plus `noise` x N(0, I)
from each batch's seed; the probe at theta = 0 with the SGD preconditioner, eps = 0.01. Common
random numbers cancel the noise in every pair exactly, so all the noise is in the direction
g = the mean of n_direction batches. True kappa along the expected gradient: 7.43. Per setting,
200 probe seeds: the mean kappa and its bias, the spread over seeds, the median reported standard
error, how often kappa +- 1.96 SE covers the truth and the mean over seeds, the median
direction_snr and the share flagged noise-dominated. Also, as an experiment (not what
`pgrpo probe` reports), the cross-batch estimate
-sum_{j != k} u_j . H u_k / sum_{j != k} g_j . u_k, which leaves out the diagonal terms that carry
the noise's own curvature. Writes
bench/results/probe_direction_noise.json (about 10 s).

    python bench/probe_direction_noise.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_results  # noqa: E402

from pgrpo.measure.config import ProbeConfig
from pgrpo.measure.probe import probe_curvature, probe_seeds

EPS, SEEDS = 0.01, 200


def quadratic() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    q, _ = torch.linalg.qr(torch.randn(6, 6, dtype=torch.float64))
    lam = torch.tensor([0.1, 0.5, 1, 2, 5, 10.0], dtype=torch.float64)
    return q @ torch.diag(lam) @ q.T, torch.randn(6, dtype=torch.float64)


def cross_batch(grad_fn, theta: torch.Tensor, cfg: ProbeConfig) -> float:
    """The diagonal-free estimate from the same batches and pairs as `probe_curvature`."""
    dirs, pairs = probe_seeds(cfg.seed, cfg.n_direction, cfg.n_pairs)
    grads = torch.stack([grad_fn(theta, s) for s in dirs])
    hus = torch.zeros_like(grads)
    for i, s in enumerate(pairs):
        k = i % len(dirs)
        hus[k] += (grad_fn(theta + EPS * grads[k], s) - grad_fn(theta - EPS * grads[k], s)) / (
            2 * EPS * (cfg.n_pairs // cfg.n_direction)
        )
    off = ~torch.eye(len(dirs), dtype=torch.bool)
    return -float((grads @ hus.T)[off].sum() / (grads @ grads.T)[off].sum())


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    torch.set_num_threads(1)
    h, target = quadratic()
    theta = torch.zeros(6, dtype=torch.float64)
    g_true = h @ target
    truth = float(g_true @ h @ g_true / (g_true @ g_true))
    rows = []
    print(f"true kappa {truth:.3f}")
    print(
        "| noise | direction batches / pairs | mean kappa (bias) | sd over seeds | median SE | "
        "covers truth / the seeds' mean (1.96 SE) | median direction_snr | noise-dominated | "
        "cross-batch mean / median / sd |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for noise in (1.0, 4.0, 8.0):

        def grad_fn(th: torch.Tensor, seed: int, noise: float = noise) -> torch.Tensor:
            z = torch.randn(6, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
            return -h @ (th - target) + noise * z

        for nd in (4, 8):
            k, se, snr, dom, cb = [], [], [], [], []
            for seed in range(SEEDS):
                cfg = ProbeConfig(
                    epsilon=EPS, preconditioner="sgd", n_direction=nd, n_pairs=2 * nd, seed=seed
                )
                res = probe_curvature(grad_fn, theta, cfg)
                k.append(res.kappa)
                se.append(res.stderr)
                snr.append(res.metrics["direction_snr"])
                dom.append(res.stderr >= 0.5 * abs(res.kappa))
                cb.append(cross_batch(grad_fn, theta, cfg))
            k, se, cb = np.array(k), np.array(se), np.array(cb)
            row = {
                "noise": noise,
                "n_direction": nd,
                "n_pairs": 2 * nd,
                "kappa_mean": float(k.mean()),
                "bias_pct": float(100 * (k.mean() / truth - 1)),
                "kappa_sd": float(k.std(ddof=1)),
                "stderr_median": float(np.median(se)),
                "coverage_1_96": float(np.mean(np.abs(k - truth) <= 1.96 * se)),
                "coverage_of_mean_1_96": float(np.mean(np.abs(k - k.mean()) <= 1.96 * se)),
                "direction_snr_median": float(np.median(snr)),
                "noise_dominated_share": float(np.mean(dom)),
                "cross_batch_mean": float(cb.mean()),
                "cross_batch_median": float(np.median(cb)),
                "cross_batch_sd": float(cb.std(ddof=1)),
            }
            rows.append(row)
            print(
                f"| {noise:g} | {nd} / {2 * nd} | {row['kappa_mean']:.2f} "
                f"({row['bias_pct']:+.0f}%) | {row['kappa_sd']:.2f} | {row['stderr_median']:.2f} "
                f"| {row['coverage_1_96']:.2f} / {row['coverage_of_mean_1_96']:.2f} | "
                f"{row['direction_snr_median']:.1f} | "
                f"{row['noise_dominated_share']:.2f} | {row['cross_batch_mean']:.2f} / "
                f"{row['cross_batch_median']:.2f} / {row['cross_batch_sd']:.2f} |"
            )
    write_results(
        Path("bench/results/probe_direction_noise.json"),
        "probe_direction_noise.py",
        None,
        truth=truth,
        seeds=SEEDS,
        epsilon=EPS,
        rows=rows,
    )


if __name__ == "__main__":
    main()
