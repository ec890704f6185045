"""Does `pgrpo predict` with the probed kappa track a realised run? On the tiny model:
1. probe kappa at the initial policy (`pgrpo probe`'s library call),
2. train the same configuration for --steps steps,
3. fit the ROM to the realised reward curve (kappa_fit = k / lr) and compare: kappa, the
   timescale tau, and the predicted trajectory (R0 = first logged reward, R_inf = the fitted
   plateau, the probed kappa) against the realised curve (R^2, RMSE).
Writes bench/results/probe_tiny.json.

    nice -n 10 python bench/probe_tiny.py [--steps 60] [--lr 3e-3]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from pgrpo.diagnose.probe import ProbeConfig, probe_run_config
from pgrpo.dynamics import fit_curve, predict
from pgrpo.logs import read_log
from pgrpo.train.config import load_config
from pgrpo.train.trainer import train


def r2(y: np.ndarray, f: np.ndarray) -> float:
    return float(1 - np.sum((y - f) ** 2) / np.sum((y - y.mean()) ** 2))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--out", default="bench/results/probe_tiny.json")
    args = ap.parse_args()
    torch.set_num_threads(2)
    out_dir = tempfile.mkdtemp(prefix="probe_tiny_")
    cfg = load_config(
        None,
        [
            "model.name=tiny",
            "model.tiny_hidden=32",
            "model.tiny_warmup_steps=60",
            "task.options={levels: [1], n: 200}",
            f"steps={args.steps}",
            "group_size=8",
            "batch_prompts=8",
            "max_new_tokens=4",
            f"lr={args.lr}",
            "forecast_every=0",
            "checkpoint_every=1000",
            f"run.output_dir={out_dir}",
            "run.name=probe_tiny",
        ],
    )
    t0 = time.time()
    probe = probe_run_config(cfg, ProbeConfig(epsilon=10.0, n_direction=4, n_pairs=args.pairs))
    t_probe = time.time() - t0
    kappa, se = probe["kappa"], probe["stderr"]
    print(f"probed kappa = {kappa:.4g} +- {se:.2g} ({t_probe:.0f} s)")
    train(cfg, overwrite=True)
    log = read_log(Path(out_dir) / "probe_tiny")
    step, reward = log.step, log.reward
    fit = fit_curve(step, reward, "rom", lr=log.learning_rate, beta1=cfg.optim.beta1)
    k_fit = fit.params["k"].value if "k" in fit.params else float("nan")
    kappa_fit = k_fit / args.lr
    r_inf = fit.params["R_inf"].value
    pred = predict(
        args.lr,
        cfg.optim.beta1,
        max(kappa, 1e-9),
        n_steps=int(step[-1] - step[0]),
        group_size=8,
        batch_prompts=8,
        R0=float(reward[:3].mean()),
        R_inf=r_inf,
    )
    predicted = np.interp(step - step[0], pred.step, pred.mean)
    res = {
        "kappa_probe": kappa,
        "kappa_probe_stderr": se,
        "kappa_fit": kappa_fit,
        "tau_probe": 1 / (args.lr * kappa) if kappa > 0 else None,
        "tau_fit": 1 / k_fit if k_fit > 0 else None,
        "fit_r2": fit.r2,
        "fit_model": fit.model,
        "R_inf_fit": r_inf,
        "predicted_r2": r2(reward, predicted),
        "predicted_rmse": float(np.sqrt(np.mean((reward - predicted) ** 2))),
        "reward_first": float(reward[:5].mean()),
        "reward_last": float(reward[-5:].mean()),
        "steps": int(step[-1]),
        "lr": args.lr,
        "probe_seconds": t_probe,
        "reward": reward.tolist(),
        "predicted": predicted.tolist(),
    }
    for k, v in res.items():
        if not isinstance(v, list):
            print(f"{k}: {v}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
