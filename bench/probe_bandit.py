"""The curvature probe on the two-arm softmax bandit vs the exact kappa of pgrpo.bandit.kappa.
For several (G, kl_coef): the exact fixed-point kappa, and at points d below d* the exact
-dF/dd, the probe with the exact expected gradient, and the probe with sampled gradients
(1000 groups per gradient, 12 pairs, common random numbers) with its standard error.
Writes bench/results/probe_bandit.json.

    python bench/probe_bandit.py
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

import torch

from pgrpo.bandit.kappa import ForceModel, curvature, force
from pgrpo.core.losses import LossConfig
from pgrpo.measure.probe import (
    ProbeConfig,
    bandit_exact_gradient,
    bandit_sampled_gradient,
    probe_curvature,
)


def slope(model: ForceModel, d: float) -> float:
    dd = torch.tensor(d, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(force(model, dd), dd)
    return -float(g)


def main() -> None:
    argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0]
    ).parse_args()  # no options: --help only
    torch.set_num_threads(1)
    rows = []
    print(
        "| G | kl_coef | kappa(d*) | d - d* | -dF/dd exact | probe (exact grad) | probe (sampled) |"
    )
    print("|---|---|---|---|---|---|---|")
    for g, kl in ((4, 0.1), (8, 0.2), (16, 0.5)):
        loss = LossConfig(policy_loss="reinforce", kl_coef=kl, k3_max=None)  # uncapped k3
        model = ForceModel(group_size=g, loss=loss)
        c = curvature(model)
        for offset in (-1.0, -0.3, -0.05):
            d = c.d_star + offset
            theta = torch.tensor([d / 2, -d / 2], dtype=torch.float64)
            ex = probe_curvature(
                bandit_exact_gradient(model),
                theta,
                ProbeConfig(epsilon=1e-4, preconditioner="sgd", n_pairs=2, n_direction=1),
            )
            sm = probe_curvature(
                bandit_sampled_gradient(model, 1000),
                theta,
                ProbeConfig(epsilon=0.5, preconditioner="sgd", n_pairs=12, n_direction=4, seed=1),
            )
            row = {
                "G": g,
                "kl_coef": kl,
                "kappa_fixed_point": c.kappa,
                "offset": offset,
                "slope_exact": slope(model, d),
                "probe_exact": ex.kappa,
                "probe_sampled": sm.kappa,
                "probe_sampled_stderr": sm.stderr,
            }
            rows.append(row)
            print(
                f"| {g} | {kl} | {c.kappa:.4f} | {offset:+.2f} | {row['slope_exact']:.4f} | "
                f"{ex.kappa:.4f} | {sm.kappa:.4f} +- {sm.stderr:.4f} |"
            )
    Path("bench/results").mkdir(parents=True, exist_ok=True)
    meta = {
        "command": "python bench/probe_bandit.py",
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": "2-core CPU shared with other jobs, no GPU",
    }
    out = {"meta": meta, "rows": rows}
    Path("bench/results/probe_bandit.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
