"""Issue #15 (d) for bench/lm_dynamics.py: `pgrpo probe` at a sweep cell's initial policy, its
kappa against the kappa fitted from the cell's reward curve, and the lr transfer (a) redone with
the probe's kappa in place of the fitted one.

Units. The probe measures kappa = -g^T P H P g / g^T P g along the update direction u = P g, per
unit lr (src/pgrpo/measure/probe.py). With P = Adam's 1 / (sqrt(E g^2) + eps) that is the
preconditioned curvature kappa / u the `adam` reduction's fit measures (a = lr kappa / u); with
P = I it is the curvature the `sgd_momentum` fit measures (a = lr kappa). So each probe names the
preconditioner of its cell's optimizer, and the two numbers compare directly.

The probe is one subprocess (`python -m pgrpo.cli probe ... --json`, one torch thread); its JSON
with the wall and CPU seconds goes to bench/results/lm_dynamics_runs/<probe name>/probe.json;
an existing probe.json is not redone (resumable per probe, not within one).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import norm

from pgrpo.dynamics.optimizers import OptimizerSettings, reduce_optimizer

cd = sys.modules["corpus_dynamics"]  # loaded by lm_dynamics (the fits and predictions)

Z90 = float(norm.ppf(0.95))  # two-sided 90% normal quantile


@dataclass(frozen=True)
class Probe:
    """One `pgrpo probe` at a cell's initial policy (the cell's own run config)."""

    cell: Any
    """The lm_dynamics `Cell` whose config is probed (its overrides, at step 0)."""
    preconditioner: str
    """The probe's P for the cell's optimizer: 'adam' for AdamW, 'sgd' (P = I) for SGD momentum."""
    pairs: int = 16
    """Finite-difference pairs (2 gradient batches each; their spread gives the stderr)."""
    direction_batches: int = 4
    """Gradient batches averaged for the direction g (and Adam's second moment)."""
    seed: int = 0
    """Seed of the probe's batches (prompts and samples)."""
    step_lrs: float = 10.0
    """Probe step along u in multiples of the cell's lr (`pgrpo probe --step-lrs`; 10: its
    default). It must stay inside the linear regime: an SGD step at lr 0.05 moves this task's
    reward by ~0.3 (docs/dynamics_lm.md (d)), so ten of them leave it."""
    at_step: int = 0
    """0: probe the initial policy. N > 0: first train the cell's own config (same seed, so the
    same first N steps) for N rollout steps into the probe's folder, then probe its final
    checkpoint (`pgrpo probe --run`): kappa inside the relaxation instead of at its start."""

    @property
    def name(self) -> str:
        at = f"_at{self.at_step}" if self.at_step else ""
        e = f"_e{self.step_lrs:g}" if self.step_lrs != 10.0 else ""
        base = f"probe_{self.cell.name}_P{self.pairs}D{self.direction_batches}_s{self.seed}"
        return base + e + at

    def train_command(self, runs_dir: Path) -> list[str] | None:
        """The short training run whose checkpoint is probed (None at the initial policy)."""
        if not self.at_step:
            return None
        over = [o for o in self.cell.overrides(runs_dir) if not o.startswith("run.")]
        over += [f"run.seed={self.cell.seed}", f"run.steps={self.at_step}", "run.name=train"]
        over += [f"run.output_dir={runs_dir / self.name}", "run.torch_threads=1"]
        over += ["run.checkpoint_every=0", "run.forecast_every=0"]  # 0: a checkpoint at the end
        return [sys.executable, "-m", "pgrpo.cli", "train", *over]

    def command(self, runs_dir: Path) -> list[str]:
        opts = ["--pairs", str(self.pairs), "--direction-batches", str(self.direction_batches)]
        opts += ["--preconditioner", self.preconditioner, "--seed", str(self.seed), "--json"]
        opts += ["--step-lrs", f"{self.step_lrs:g}"]
        if self.at_step:  # the run's config.yaml and its final checkpoint
            opts += ["--run", str(runs_dir / self.name / "train")]
            return [sys.executable, "-m", "pgrpo.cli", "probe", *opts]
        return [sys.executable, "-m", "pgrpo.cli", "probe", *opts, *self.cell.overrides(runs_dir)]


def run_probe(probe: Probe, runs_dir: Path) -> dict:
    """Run one probe unless its probe.json exists; returns its status (and the JSON written)."""
    out_dir = runs_dir / probe.name
    path = out_dir / "probe.json"
    if path.exists():
        return {"status": "finished earlier"}
    cmd = probe.command(runs_dir)
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    train = probe.train_command(runs_dir)
    if train:  # the checkpoint to probe (rerun from step 1 if an earlier try left one)
        shutil.rmtree(out_dir / "train", ignore_errors=True)
        proc = subprocess.run(train, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            return {"status": "ran", "rc": proc.returncode, "stderr_tail": proc.stderr[-1500:]}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    info = {
        "status": "ran",
        "rc": proc.returncode,
        "wall_s": time.time() - t0,
        "cpu_s": (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime),
        "load_average_after": os.getloadavg()[0],
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python", *cmd[1:]]).replace(sys.executable, "python"),
    }
    if proc.returncode != 0:
        return {**info, "stderr_tail": proc.stderr[-1500:]}
    out_dir.mkdir(parents=True, exist_ok=True)
    doc = {**info, "result": json.loads(proc.stdout)}
    if train:  # keep the short run's log and config; its checkpoint is 1 GB
        doc["train_command"] = " ".join(["python", *train[1:]])
        shutil.rmtree(out_dir / "train" / "checkpoints", ignore_errors=True)
        shutil.rmtree(out_dir / "train" / "final", ignore_errors=True)
    path.write_text(json.dumps(doc, indent=1))
    return info


def load_probes(probes: list[Probe], runs_dir: Path) -> dict[str, dict]:
    """The finished probes' probe.json, by probe name."""
    paths = {p.name: runs_dir / p.name / "probe.json" for p in probes}
    return {n: json.loads(f.read_text()) for n, f in paths.items() if f.exists()}


def probe_vs_fit(kappa: float, stderr: float, fit: dict, samples: tuple = ()) -> dict:
    """The probe's kappa (mean over pairs, stderr; samples: the per-pair values [pairs]) against
    a fit's kappa and its 90% profile interval [kappa_lo, kappa_hi]. Probe interval: kappa +-
    1.645 stderr (normal; the pair mean). Verdict, in this order: 'not enough evidence (most pairs
    degenerate)' when more than half the samples are exactly 0 (the gradient equal at both ends:
    zero, every group all-pass or all-fail: the step left the linear regime); 'disagree
    (negative ...)' when the whole probe interval is below 0 (no restoring force where probed,
    while a fit's kappa is >= 0); 'disagree' when the two 90% intervals do not overlap (for one
    true kappa and two independent 90% intervals, probability below 1%); 'not enough evidence
    (noise-dominated probe)' when they overlap but stderr > |kappa| / 2 (as `pgrpo probe`
    warns); else 'consistent'."""
    lo, hi = kappa - Z90 * stderr, kappa + Z90 * stderr
    overlap = lo <= fit["kappa_hi"] and fit["kappa_lo"] <= hi
    noisy = not stderr <= 0.5 * abs(kappa)
    zeros = float(np.mean(np.asarray(samples) == 0.0)) if len(samples) else 0.0
    verdict = (
        "not enough evidence (most pairs degenerate: gradient zero at both ends)"
        if zeros > 0.5
        else "disagree (negative curvature: no restoring force where probed)"
        if hi < 0
        else "disagree"
        if not overlap
        else "not enough evidence (noise-dominated probe)"
        if noisy
        else "consistent"
    )
    return {
        "kappa_probe": kappa,
        "stderr_probe": stderr,
        "probe_90": [lo, hi],
        "kappa_fit": fit["kappa"],
        "fit_90": [fit["kappa_lo"], fit["kappa_hi"]],
        "ratio_probe_over_fit": kappa / fit["kappa"] if fit["kappa"] else math.nan,
        "intervals_overlap": bool(overlap),
        "noise_dominated": bool(noisy),
        "zero_samples_fraction": zeros,
        "verdict": verdict,
    }


def levels(run: Any, kappa: float) -> tuple[float, float]:
    """(R_0, R_inf) least-squares fitted on `run` with kappa held fixed: the levels a probe's
    kappa needs from the source run before it predicts another run."""
    phi = cd.predict_curve(run, kappa, 1.0, 0.0)  # R = R_inf (1 - phi) + R_0 phi
    X = np.stack([1.0 - phi, phi], axis=1)
    (r_inf, r0), *_ = np.linalg.lstsq(X, run.reward, rcond=None)
    return float(r0), float(r_inf)


def probe_transfer(
    runs: dict, fits: dict[str, dict], source: str, targets: list[dict], kappa: float
) -> dict:
    """(a) with the probe's kappa: the levels R_0, R_inf from the source run at that kappa
    (`levels`), then every target row of the fit-based transfer (`targets`, as
    lm_dynamics.transfer_rows makes them) predicted from its own lr, K and clock. Each row keeps
    the fit-kappa R^2 beside the probe-kappa one; the summary is the median over held-out-lr
    targets (lr the only change), as for the fitted kappa."""
    src = runs[source]
    r0, r_inf = levels(src, kappa)
    rows = []
    for t in targets:
        run = runs[t["target"]]
        pred = cd.predict_curve(run, kappa, r0, r_inf)
        rows.append(
            {
                "target": t["target"],
                "differs_in": t["differs_in"],
                "r2_prediction_probe": cd.r2(run.reward, pred),
                "r2_timescale_only_probe": cd.r2(run.reward, cd.timescale_only(run, kappa)),
                "r2_prediction_fit": t["r2_prediction"],
                "r2_own_fit": t["r2_own_fit"],
            }
        )
    held = [r for r in rows if r["differs_in"] == "lr"]
    med = lambda k: float(np.median([r[k] for r in held])) if held else None  # noqa: E731
    src_fit = cd.predict_curve(src, kappa, r0, r_inf)
    return {
        "source": source,
        "kappa": kappa,
        "R_0": r0,
        "R_inf": r_inf,
        "r2_source_at_probe_kappa": cd.r2(src.reward, src_fit),
        "r2_source_own_fit": fits[source]["r2_constrained"],
        "rows": rows,
        "held_out_lr_runs": len(held),
        "median_r2_held_out_lr_probe": med("r2_prediction_probe"),
        "median_r2_held_out_lr_fit": med("r2_prediction_fit"),
        "median_r2_held_out_lr_own_fit": med("r2_own_fit"),
    }


def probe_analysis(
    runs: dict, fits: dict[str, dict], transfer: dict, probes: list, runs_dir: Path
) -> dict:
    """(d) per finished probe: its kappa vs the cell's fitted kappa (`probe_vs_fit`), the K*
    its kappa predicts (the cell optimizer's reduction at the cell's lr), and, for a transfer
    source, the lr transfer (a) from the probe's kappa (`probe_transfer`)."""
    out = {}
    done = load_probes(probes, runs_dir)
    for p in probes:
        name = p.cell.name
        if p.name not in done or name not in fits:
            continue
        res = done[p.name]["result"]
        kappa, se = float(res["kappa"]), float(res["stderr"])
        row = {
            "cell": name,
            "pairs": p.pairs,
            "direction_batches": p.direction_batches,
            "preconditioner": p.preconditioner,
            "step_lrs": p.step_lrs,
            "at_step": p.at_step,
            **{k: done[p.name][k] for k in ("command", "date", "wall_s", "cpu_s")},
            "load_average_after": done[p.name]["load_average_after"],
            "probe_metrics": res["metrics"],
            **probe_vs_fit(kappa, se, fits[name], tuple(res["samples"])),
        }
        if kappa > 0:
            lr = float(runs[name].lr.max())
            settings = OptimizerSettings(lr=lr, kappa=kappa, beta1=cd.BETA1, closure=False)
            red = reduce_optimizer(runs[name].optimizer, settings)
            row |= {"K_star_probe": red.K_star, "effective_a_probe": red.a}
            rows = [r for rs in transfer.values() for r in rs if r["source"] == name]
            if rows:  # the cell is its optimizer's transfer source
                row["transfer"] = probe_transfer(runs, fits, name, rows, kappa)
        out[p.name] = row
    return out
