"""What `pgrpo probe` measures before a run, on the exact two-arm bandit: the local slope -dF/dd
of the restoring force at the probed policy, not the fixed-point stiffness kappa(d*) the dynamics
model needs. For G = 8, kl_coef 0.2 / 0.05 (k3 KL to p_ref = 0.5, REINFORCE loss, dr_grpo
advantages: `ForceModel`'s defaults) and an initial success probability p0 = 0.1 / 0.3, plain SGD
(lr 0.05, no momentum, K = 1) on the exact expected force for 3000 steps. Per case: kappa(d*)
(`pgrpo.bandit.kappa.curvature`); the probe with the exact expected gradient at the initial
policy and at the policy the run reached after 100, 300 and 1000 steps; the kappa the reward
curve implies (1 / (lr tau) of a single exponential fitted to R(t)); and how well the model's
mean (`pgrpo.dynamics.predict`, sgd_momentum with beta1 = 0, R0 and R_inf the run's) tracks the
realised curve with kappa(d*) and with the probe at step 1000 (R^2). Writes
bench/results/probe_init_bandit.json (12 s on one core).

    python bench/probe_init_bandit.py
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import torch
from scipy.optimize import curve_fit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_results  # noqa: E402

from pgrpo.bandit.kappa import ForceModel, curvature, force
from pgrpo.core.losses import LossConfig
from pgrpo.dynamics import predict
from pgrpo.measure.config import ProbeConfig
from pgrpo.measure.probe import bandit_exact_gradient, probe_curvature

LR, STEPS, PROBED_AT = 0.05, 3000, (0, 100, 300, 1000)


def probe_at(model: ForceModel, d: float) -> float:
    """The probe with the exact expected gradient at logit gap d (no sampling noise)."""
    theta = torch.tensor([d / 2, -d / 2], dtype=torch.float64)
    cfg = ProbeConfig(epsilon=1e-4, preconditioner="sgd", n_pairs=2, n_direction=1)
    return probe_curvature(bandit_exact_gradient(model), theta, cfg).kappa


def r_squared(predicted: np.ndarray, realised: np.ndarray) -> float:
    return float(
        1 - np.sum((realised - predicted) ** 2) / np.sum((realised - realised.mean()) ** 2)
    )


def case(group_size: int, kl: float, p0: float) -> dict:
    loss = LossConfig(policy_loss="reinforce", kl_coef=kl, k3_max=None)  # uncapped k3
    model = ForceModel(group_size=group_size, loss=loss)
    exact = curvature(model)
    d = torch.tensor(math.log(p0 / (1 - p0)), dtype=torch.float64)
    gaps, rewards = [], []
    for _ in range(STEPS + 1):
        gaps.append(float(d))
        rewards.append(float(torch.sigmoid(d)))
        d = d + LR * force(model, d)
    r = np.asarray(rewards)
    t = np.arange(r.size, dtype=float)
    (r_inf, tau), _ = curve_fit(
        lambda t, ri, tau: ri - (ri - r[0]) * np.exp(-t / tau), t, r, p0=[r[-1], 100.0]
    )
    probes = {str(n): probe_at(model, gaps[n]) for n in PROBED_AT}
    fits = {}
    for name, kappa in (("kappa_fixed_point", exact.kappa), ("probe_step_1000", probes["1000"])):
        pred = predict(LR, 0.0, kappa, n_steps=STEPS, R0=r[0], R_inf=float(torch.sigmoid(
            torch.tensor(exact.d_star))), optimizer="sgd_momentum")  # fmt: skip
        fits[name] = r_squared(pred.mean, r)
    return {
        "G": group_size,
        "kl_coef": kl,
        "p0": p0,
        "d_star": exact.d_star,
        "kappa_fixed_point": exact.kappa,
        "probe_at_step": probes,
        "reward_at_step": {str(n): rewards[n] for n in PROBED_AT},
        "curve_kappa": 1.0 / (LR * tau),
        "curve_r_inf": float(r_inf),
        "prediction_r2": fits,
    }


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    torch.set_num_threads(1)
    rows = [case(8, kl, p0) for kl in (0.2, 0.05) for p0 in (0.1, 0.3)]
    print(
        "| kl_coef | p0 | kappa(d*) | probe at step 0 / 100 / 300 / 1000 (reward there) | "
        "curve 1/(lr tau) | R^2 of the mean with kappa(d*) / probe at 1000 |"
    )
    print("|---|---|---|---|---|---|")
    for row in rows:
        at = " / ".join(
            f"{row['probe_at_step'][n]:+.3f} ({row['reward_at_step'][n]:.2f})"
            for n in row["probe_at_step"]
        )
        fit = row["prediction_r2"]
        print(
            f"| {row['kl_coef']} | {row['p0']} | {row['kappa_fixed_point']:.3f} | {at} | "
            f"{row['curve_kappa']:.3f} | {fit['kappa_fixed_point']:.3f} / "
            f"{fit['probe_step_1000']:.3f} |"
        )
    write_results(
        Path("bench/results/probe_init_bandit.json"),
        "probe_init_bandit.py",
        None,
        settings={"lr": LR, "steps": STEPS, "optimizer": "sgd (no momentum), K = 1"},
        rows=rows,
    )


if __name__ == "__main__":
    main()
