"""Does `pgrpo predict` with the probed kappa track a realised run? On the tiny model:
1. probe kappa at the initial policy (`pgrpo probe`'s library call),
2. train the same configuration, checkpointing; probe again at step --early-step and at the end,
3. fit the ROM to the realised reward curve (kappa_fit = k / lr) and compare: kappa, the
   timescale tau, and the predicted trajectory (R0 = first logged rewards, R_inf = the fitted
   plateau, each probed kappa, the run optimizer's reduction: adam for AdamW) against the
   realised curve (R^2, RMSE).
Writes bench/results/probe_tiny.json.

    nice -n 10 python bench/probe_tiny.py [--steps 60] [--lr 3e-3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from pgrpo.dynamics import fit_curve, predict
from pgrpo.logs import read_log
from pgrpo.measure.probe import ProbeConfig
from pgrpo.measure.probe_run import probe_run_config
from pgrpo.train.checkpoint import latest_checkpoint
from pgrpo.train.config import load_config
from pgrpo.train.optimizers import TRAIN_OPTIMIZERS
from pgrpo.train.trainer import train

OVERRIDES = [
    "model.name=tiny",
    "model.tiny_hidden=32",
    "model.tiny_warmup_steps=60",
    "task.options={levels: [1], n: 200}",
    "group_size=8",
    "batch_prompts=8",
    "max_new_tokens=4",
    "forecast_every=0",
    "checkpoint_every=5",
    "run.name=probe_tiny",
]


def r2(y: np.ndarray, f: np.ndarray) -> float:
    return float(1 - np.sum((y - f) ** 2) / np.sum((y - y.mean()) ** 2))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--early-step", type=int, default=15)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--out", default="bench/results/probe_tiny.json")
    args = ap.parse_args()
    torch.set_num_threads(2)
    out_dir = tempfile.mkdtemp(prefix="probe_tiny_")
    cfg = load_config(
        None, [*OVERRIDES, f"steps={args.steps}", f"lr={args.lr}", f"run.output_dir={out_dir}"]
    )
    run_dir = Path(out_dir) / "probe_tiny"
    probe_cfg = ProbeConfig(step_lrs=10.0, n_direction=3, n_pairs=args.pairs)
    t0 = time.time()
    probes = {"init": probe_run_config(cfg, probe_cfg)}
    print(f"kappa at init = {probes['init']['kappa']} +- {probes['init']['stderr']}")
    train(replace(cfg, run=replace(cfg.run, steps=args.early_step)), overwrite=True)
    name = f"step{args.early_step}"
    probes[name] = probe_run_config(cfg, probe_cfg, checkpoint=latest_checkpoint(run_dir))
    print(f"kappa at {name} = {probes[name]['kappa']} +- {probes[name]['stderr']}")
    train(cfg, resume=True)
    probes["final"] = probe_run_config(cfg, probe_cfg, checkpoint=latest_checkpoint(run_dir))
    print(f"kappa at the end = {probes['final']['kappa']} +- {probes['final']['stderr']}")

    log = read_log(run_dir)
    step, reward = log.step, log.reward
    fit = fit_curve(step, reward, "rom", lr=log.learning_rate, beta1=cfg.optim.beta1)
    k_fit = fit.params["k"].value if "k" in fit.params else float("nan")
    r_inf = fit.params["R_inf"].value

    reduction = TRAIN_OPTIMIZERS.get(cfg.optim.name).reduction  # the probe's units (adam: P)

    def tracked(kappa: float | None) -> dict:
        if kappa is None or not kappa > 0:  # None: every pair exactly 0 (no measurement)
            return {"predicted_r2": None, "predicted_rmse": None, "tau": None}
        pred = predict(
            args.lr,
            cfg.optim.beta1,
            kappa,
            n_steps=int(step[-1] - step[0]),
            group_size=8,
            batch_prompts=8,
            R0=float(reward[:3].mean()),
            R_inf=r_inf,
            optimizer=reduction,
            beta2=cfg.optim.beta2,
        )
        f = np.interp(step - step[0], pred.step, pred.mean)
        return {
            "predicted_r2": r2(reward, f),
            "tau": pred.metrics["tau"],  # the exact mean's decay time (-K / ln rho)
            "predicted_rmse": float(np.sqrt(np.mean((reward - f) ** 2))),
            "predicted": f.tolist(),
        }

    res = {
        "command": "nice -n 10 python bench/probe_tiny.py",
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": "2-core CPU shared with other jobs, no GPU",
        "optimizer": reduction,
        "kappa_fit": k_fit / args.lr,
        "tau_fit": 1 / k_fit if k_fit > 0 else None,
        "fit_r2": fit.r2,
        "fit_model": fit.model,
        "R_inf_fit": r_inf,
        "reward_first": float(reward[:5].mean()),
        "reward_last": float(reward[-5:].mean()),
        "steps": int(step[-1]),
        "lr": args.lr,
        "seconds": time.time() - t0,
        "reward": reward.tolist(),
    }
    for key, pr in probes.items():
        res[f"kappa_probe_{key}"] = pr["kappa"]
        res[f"kappa_probe_{key}_stderr"] = pr["stderr"]
        res[f"kappa_probe_{key}_zero_pairs"] = pr["zero_pairs"]
        res[f"kappa_probe_{key}_stderr_kind"] = pr["stderr_kind"]  # since session 39: jackknife
        res[f"kappa_probe_{key}_near_plateau"] = pr["near_plateau"]  # the run's log there
        res[f"kappa_probe_{key}_direction_snr"] = pr["metrics"].get("direction_snr")
        res[f"tracking_{key}"] = tracked(pr["kappa"])
    for k, v in res.items():
        if isinstance(v, dict):
            v = {a: b for a, b in v.items() if not isinstance(b, list)}
        if not isinstance(v, list):
            print(f"{k}: {v}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
