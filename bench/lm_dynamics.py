"""The dynamics model on SmolLM2 GRPO runs (issue #15 item 2): sweeps over lr, G and the refresh
interval K for AdamW and SGD with momentum, and the tests of the closed form on them.

    python bench/lm_dynamics.py                 # train the unfinished cells by priority, analyse
    python bench/lm_dynamics.py --analyse-only  # analyse the finished cells only
    python bench/lm_dynamics.py --max-cells 3   # run at most 3 cells this time

Every cell is `pgrpo train` (a subprocess, one torch thread): SmolLM2-135M-Instruct, arithmetic
level 1, B = 8 prompts per step, <= 16 new tokens, bf16 autocast, constant lr, no KL. Its folder
under bench/results/lm_dynamics_runs/ keeps only metrics.jsonl and config.yaml. Resumable: a
folder with every step logged is skipped, a partial one with a checkpoint (written on SIGINT /
SIGTERM) is continued with `--resume`, one without is rerun. bench/results/lm_dynamics.json is
rewritten after every cell and after the analysis (command, date, machine, wall times).

CELLS is the priority order (the most informative first). A K cell takes its K optimizer steps
on M = K minibatches of the B G rollouts (one pass, TRL's steps_per_generation): a step costs
about a K = 1 step and K is the rollouts' staleness alone. SGD runs unclipped
(`optim.max_grad_norm=0`: clipping would make each step a normalised one, not the heavy-ball
recursion its reduction is exact for), at its own lr (docs/dynamics_lm.md: the pilots).

Analyses (pure functions on `Run`s, tested on synthetic logs in tests/test_bench_lm_dynamics.py;
the fits and the joint test are bench/corpus_dynamics.py's, reused):
- transfer: kappa, R_0, R_inf from the constrained fit (`rom_fixed`) of the source run (the
  middle-lr cell of each optimizer); every other run of that optimizer predicted from its own lr,
  K and clock alone; R^2 against the target's own constrained fit;
- G-invariance: `fit_joint` with shared R_inf and k vs separate fits (likelihood ratio), k ~
  N^gamma, and the stationary variance (late-run reward variance; reward_std^2 / (B G)) vs 1/G;
- refresh interval (bench/lm_dynamics_refresh.py): the reduction's K* (sgd_momentum: exact
  heavy-ball; adam: none) from the source's kappa against the observed instability of each K
  cell (pgrpo.diagnose's reward tests, calibrated at level 0.005 each on null curves), with the
  grid's resolution;
- probe vs fit (bench/lm_dynamics_probe.py): `pgrpo probe` at a source cell's initial policy or
  at a checkpoint inside it (`PROBES`), its kappa against the fitted one, and the transfer and
  K* from the probe's kappa.
The text tables are bench/lm_dynamics_show.py.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pgrpo.dynamics.optimizers import run_optimizer

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "lm_dynamics.json"
RUNS = ROOT / "bench" / "results" / "lm_dynamics_runs"


def _load(name: str):  # noqa: ANN202
    """A sibling bench module, registered under its name (dataclasses look their module up)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


cd = _load("corpus_dynamics")  # the fits and predictions
Run = cd.Run
pr = _load("lm_dynamics_probe")  # issue #15 (d): the curvature probe at a cell's initial policy
rf = _load("lm_dynamics_refresh")  # issue #15 (c): K* against the observed onset
collapse, observed_instability, refresh_test = rf.collapse, rf.observed_instability, rf.refresh_test
_differs, _k_star, _within_one_step = rf.differs, rf._k_star, rf._within_one_step
show = _load("lm_dynamics_show").show  # the tables of docs/dynamics_lm.md, as text

B = 8  # prompts per rollout batch, every cell
BASE = [
    "model.name=smollm2",
    "task.name=arithmetic",
    "task.options={levels: [1]}",
    f"grpo.batch_prompts={B}",
    "generation.max_new_tokens=16",
    "run.torch_threads=1",
    "run.checkpoint_every=0",
    "run.forecast_every=0",
]
LR_MID = {"adamw": 5e-6, "sgd_momentum": 0.05}
"""The middle lr per optimizer (AdamW: from the pilot; SGD: its own pilot, docs/dynamics_lm.md)."""
EXTRA = {"sgd_momentum": ["optim.max_grad_norm=0"]}
"""Per-optimizer overrides: SGD unclipped (the heavy-ball recursion its reduction is exact for)."""


@dataclass(frozen=True)
class Cell:
    """One training run of the sweep."""

    optimizer: str
    """The trainer's `optim.name`: adamw or sgd_momentum."""
    lr: float
    G: int = 4
    K: int = 1
    seed: int = 0
    minibatches: int = 1
    """M: the K steps cycle through M minibatches of the B G rollouts (M = K: one pass over the
    batch, TRL's steps_per_generation; a step then costs about what K = 1 costs)."""
    steps: int = 30
    """Rollout batches (logged steps); K optimizer steps each."""

    @property
    def name(self) -> str:
        m = f"M{self.minibatches}" if self.minibatches > 1 else ""
        return f"{self.optimizer}_lr{self.lr:g}_G{self.G}_K{self.K}{m}_s{self.seed}"

    def overrides(self, runs_dir: Path) -> list[str]:
        extra = EXTRA.get(self.optimizer, [])
        return [
            *BASE,
            *extra,
            f"optim.name={self.optimizer}",
            f"optim.lr={self.lr:g}",
            f"grpo.group_size={self.G}",
            f"grpo.refresh_interval={self.K}",
            f"grpo.num_minibatches={self.minibatches}",
            f"run.seed={self.seed}",
            f"run.steps={self.steps}",
            f"run.output_dir={runs_dir}",
            f"run.name={self.name}",
        ]


def k_steps(K: int, steps_k1: int = 30) -> int:
    """Rollout steps of a K cell: the K = 1 cell's over K, at least 10 (the diagnosis's reward
    tests need 8)."""
    return max(10, steps_k1 // K)


def _k_cell(opt: str, K: int) -> Cell:
    return Cell(opt, LR_MID[opt], K=K, minibatches=K, steps=k_steps(K))


A, S = "adamw", "sgd_momentum"
CELLS = [
    Cell(A, LR_MID[A]),
    Cell(A, 2 * LR_MID[A]),
    Cell(A, LR_MID[A] / 2),
    Cell(A, LR_MID[A], G=8, steps=24),
    Cell(S, LR_MID[S]),
    _k_cell(S, 8),
    _k_cell(A, 32),
    Cell(S, LR_MID[S], K=2, minibatches=2, steps=20),
    Cell(S, LR_MID[S], K=4, minibatches=4, steps=20),
    Cell(S, LR_MID[S], K=2, steps=20),  # control: K = 2 passes over the whole batch (M = 1)
    Cell(S, LR_MID[S], K=4, steps=10),  # the whole-batch grid (M = 1): the model's own setting
    Cell(S, LR_MID[S], K=8, steps=8),
    Cell(S, LR_MID[S], K=16, steps=8),
    Cell(S, LR_MID[S], K=8, steps=16, seed=1),  # a second seed on both sides of the onset
    Cell(S, LR_MID[S], K=16, steps=8, seed=1),
    Cell(A, LR_MID[A], seed=1),
    _k_cell(A, 8),
    _k_cell(S, 16),
    _k_cell(S, 32),
    Cell(S, LR_MID[S], seed=1),
    _k_cell(A, 4),
]
"""Priority order, the most informative first. Changed twice during the 2026-12-01 sweep: after
SGD collapsed at K = 8 (below its predicted K* = 12) the K < 8 cells that bracket the onset moved
ahead of K = 16 and 32; after SGD at K = 4 and K = 2 fell to 0.0 in their last steps (one and two
zero steps: short of the collapse rule's three), both were lengthened to 20 steps (rerun from
step 1: the same seed repeats the logged steps); after K = 2 collapsed, a control at K = 2 with
M = 1 (two passes over the whole batch: staleness without the smaller minibatches) was added;
then, since the M = K grid confounds K with the minibatch size, a whole-batch grid (M = 1, K = 4,
8, 16: K passes over the same B G rollouts, the setting the heavy-ball K* is derived for) was run
on 2026-12-01 22:50 and is tested on its own (`refresh_whole_batch`). On 2026-12-01 23:27-00:10
the seed-1 K = 1 SGD source ran (the seed-1 whole-batch cells' own K* prediction) and the seed-1
whole-batch K = 8 cell, which had not learned in 8 rollout batches, was lengthened to 16 (rerun
from step 1)."""

PROBES = [
    pr.Probe(Cell(A, LR_MID[A]), "adam"),
    pr.Probe(Cell(S, LR_MID[S]), "sgd"),
    pr.Probe(Cell(S, LR_MID[S]), "sgd", pairs=12, step_lrs=1.0),
    pr.Probe(Cell(A, LR_MID[A]), "adam", pairs=12, step_lrs=1.0),
    pr.Probe(Cell(A, LR_MID[A]), "adam", pairs=12, at_step=10),
    pr.Probe(Cell(S, LR_MID[S]), "sgd", pairs=12, step_lrs=1.0, at_step=5),
]
"""(d): `pgrpo probe` at the initial policy of each optimizer's K = 1 source cell, with the
preconditioner of its optimizer (bench/lm_dynamics_probe.py: the units). 16 pairs and 4 direction
batches: 36 rollout-batch gradients in fp32, ~15 min at one thread on the shared machine
(2026-12-01: 554 CPU s, 874 s wall for AdamW). The AdamW probe at the initial policy measured a
negative kappa; the SGD probe's pairs were exactly 0 in 15 of 16 (the gradient identical at both
ends: at 10 steps of lr 0.05 the groups go degenerate), so both were redone one lr step wide
(step_lrs = 1, 12 pairs: ~9 min each): SGD's stays negative, AdamW's is noise-dominated at that
step (its standard error 20x the 10-lr one), so the last probe, AdamW at the same cell's checkpoint
after 10 of its 30 steps (reward ~0.45 of 0.81: inside the relaxation the fit describes), is back
at 10 lr; then SGD at its cell's checkpoint after 5 steps (reward 0.5-0.7 of 0.87), one lr step."""


# ---------------------------------------------------------------- running the cells


def logged_steps(run_dir: Path) -> int:
    """Distinct steps in run_dir/metrics.jsonl (0 when there is none)."""
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return 0
    steps = set()
    for line in path.read_text().splitlines():
        try:
            steps.add(int(json.loads(line)["step"]))
        except (ValueError, KeyError, TypeError):
            continue  # a torn last line of a killed run
    return len(steps)


def run_cell(cell: Cell, runs_dir: Path = RUNS) -> dict:
    """Train one cell unless it is finished; returns its status and wall time."""
    run_dir = runs_dir / cell.name
    if logged_steps(run_dir) >= cell.steps:
        return {"status": "finished earlier"}
    resume = (run_dir / "checkpoints" / "latest").exists()
    if run_dir.exists() and not resume:
        shutil.rmtree(run_dir)  # killed before any checkpoint: the trainer would restart anyway
    cmd = [sys.executable, "-m", "pgrpo.cli", "train", *cell.overrides(runs_dir)]
    cmd += ["--resume"] if resume else []
    t0 = time.time()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.time() - t0
    if proc.returncode == 0:  # keep only the log and config; a failed run keeps its checkpoint
        for big in ("checkpoints", "final"):  # the state to resume from; the trained model
            shutil.rmtree(run_dir / big, ignore_errors=True)
    out = {"status": "ran", "resumed": resume, "wall_s": wall, "rc": proc.returncode}
    if proc.returncode != 0:
        out["stderr_tail"] = proc.stderr[-1500:]
    return out


# ---------------------------------------------------------------- reading and analysing


def load_cell(run_dir: Path, cell: Cell) -> Run:
    """A finished cell's log as a corpus `Run` (step, reward, reward_std, learning_rate)."""
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x]
    by_step = {int(r["step"]): r for r in rows}

    def col(key: str) -> np.ndarray:
        return np.array([_num(by_step[s].get(key)) for s in sorted(by_step)], dtype=float)

    return Run(
        cell.name,
        col("step"),
        col("reward"),
        col("reward_std"),
        np.where(np.isfinite(col("learning_rate")), col("learning_rate"), cell.lr),
        cell.G,
        B,
        cell.K,
        run_optimizer(cell.optimizer),
    )


def log_seconds(run_dir: Path) -> dict:
    """Per-step time from the log (time/generate_s + score_s + update_s): median and sum."""
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x]
    keys = ("time/generate_s", "time/score_s", "time/update_s")
    t = np.array([sum(_num(r.get(k)) for k in keys if k in r) for r in rows])
    return {"median_step_s": float(np.nanmedian(t)), "total_step_s": float(np.nansum(t))}


def _num(v) -> float:
    return float(v) if isinstance(v, int | float) else math.nan


def late_variance(run: Run, fraction: float = 1 / 3) -> dict:
    """Stationary variance estimates from the last `fraction` of the run: the reward's variance
    there, and the within-batch sampling part mean(reward_std^2) / (B G) (both [scalar])."""
    n = max(3, int(round(run.reward.size * fraction)))
    tail = slice(run.reward.size - n, None)
    sd = run.reward_std[tail] if run.reward_std is not None else np.array([math.nan])
    return {
        "points": n,
        "reward_var": float(np.var(run.reward[tail], ddof=1)),
        "sampling_var": float(np.nanmean(sd**2) / (run.B * run.G)),
        "mean": float(np.mean(run.reward[tail])),
    }


def transfer_rows(runs: dict[str, Run], fits: dict[str, dict], source: str) -> list[dict]:
    """Every other run of the source's optimizer predicted from the source's fit (kappa, R_0,
    R_inf) and the target's own lr, K and clock: R^2 vs the target's own fit."""
    targets = [n for n, r in runs.items() if n != source and r.optimizer == runs[source].optimizer]
    rows = []
    for tgt in targets:
        (row,) = cd.transfer(runs, fits, [source, tgt])[:1]
        r = runs[tgt]
        same = _differs(runs[source], r)
        rows.append({**row, "G_target": r.G, "differs_in": same})
    return rows


def transfer_summary(rows: list[dict]) -> dict:
    """Median R^2 of the prediction on held-out-lr runs (lr the only change) and on all targets."""
    held = [r["r2_prediction"] for r in rows if r["differs_in"] == "lr"]
    tau = [r["r2_timescale_only"] for r in rows if r["differs_in"] == "lr"]
    own = [r["r2_own_fit"] for r in rows if r["differs_in"] == "lr"]
    med = lambda v: float(np.median(v)) if v else None  # noqa: E731
    return {
        "held_out_lr_runs": len(held),
        "median_r2_held_out_lr": med(held),
        "median_r2_held_out_lr_timescale_only": med(tau),
        "median_r2_held_out_lr_own_fit": med(own),
        "median_r2_all_targets": med([r["r2_prediction"] for r in rows]),
    }


def g_test(runs: dict[str, Run], fits: dict[str, dict], source: str) -> dict | None:
    """G-invariance at the source's lr, K and seed: the joint fit's LR test, k ~ N^gamma, and
    the late-run variance against 1/G (the SGD law: reward_var x G constant)."""
    src = runs[source]
    names = [source] + [
        n for n, r in runs.items() if _differs(src, r) == "G" and r.optimizer == src.optimizer
    ]
    if len(names) < 2:
        return None
    out = {
        "joint": _no_resid(cd.g_invariance(runs, fits, names)),
        "gamma": cd.adam_g_scaling(runs, fits, names),
    }
    late = {}
    for n, r in runs.items():  # every run at the source's lr and K (seeds too)
        if r.optimizer == src.optimizer and _differs(src, r) in ("G", "seed"):
            late[n] = {"G": r.G, **late_variance(r)}
    out["late_variance"] = late
    return out


def _no_resid(d: dict) -> dict:
    return {k: v for k, v in d.items() if k != "residual"}


def analyse(cells: list[Cell] = CELLS, runs_dir: Path = RUNS, probes: list = PROBES) -> dict:
    """Every test on the finished cells (a run needs all its steps and >= 6 points)."""
    done = [c for c in cells if logged_steps(runs_dir / c.name) >= max(c.steps, 6)]
    runs = {c.name: load_cell(runs_dir / c.name, c) for c in done}
    fits = {n: cd.fit_run_model(r) for n, r in runs.items()}
    unstable = {
        n: observed_instability(runs_dir / n / "metrics.jsonl", r.reward) for n, r in runs.items()
    }
    out: dict = {
        "finished": [c.name for c in done],
        "fits": {n: _no_resid(f) for n, f in fits.items()},
        "observed_instability": unstable,
        "step_seconds": {c.name: log_seconds(runs_dir / c.name) for c in done},
        "transfer": {},
        "transfer_summary": {},
        "lr_order": {},
        "g_invariance": {},
        "refresh": {},
    }
    for opt in (A, S):
        source = Cell(opt, LR_MID[opt]).name
        if source not in runs:
            continue
        rows = transfer_rows(runs, fits, source)
        out["transfer"][opt] = rows
        out["transfer_summary"][opt] = transfer_summary(rows)
        lrs = [source] + [r["target"] for r in rows if r["differs_in"] == "lr"]
        out["lr_order"][opt] = cd.lr_order(runs, fits, lrs)  # a = lr kappa: exponent 1?
        out["g_invariance"][opt] = g_test(runs, fits, source)
        grid = {
            c.name: unstable[c.name]
            for c in done
            if c.minibatches in (1, c.K) and c.K in (1, c.minibatches)
        }  # the K cells on M = K minibatches, and K = 1
        out["refresh"][opt] = refresh_test(runs, fits, source, grid)
        out["refresh"][opt]["controls"] = {  # K > 1 on the whole batch (M = 1)
            c.name: unstable[c.name] for c in done if c.optimizer == opt and c.name not in grid
        }
        k_cells = [c for c in done if c.minibatches == 1 and c.K > 1 and c.optimizer == opt]
        for seed in sorted({c.seed for c in k_cells}):  # one grid per seed
            grid_s = [c for c in k_cells if c.seed == seed]
            own = Cell(opt, LR_MID[opt], seed=seed).name  # K = 1 at this seed, if it ran
            src = own if own in runs else source
            whole = {c.name: unstable[c.name] for c in grid_s} | {src: unstable[src]}
            key = opt if seed == 0 else f"{opt}_seed{seed}"
            if len(grid_s) >= 2:
                whole_batch = out.setdefault("refresh_whole_batch", {})
                whole_batch[key] = refresh_test(runs, fits, src, whole)
    out["probe"] = pr.probe_analysis(runs, fits, out["transfer"], probes, runs_dir)
    return out


# ---------------------------------------------------------------- report


def _write(doc: dict) -> None:
    """Write the results; cells another job (`--only`) finished meanwhile are kept."""
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    if RESULTS.exists():
        disk = json.loads(RESULTS.read_text())
        doc["cells"] = {**disk.get("cells", {}), **doc["cells"]}
        doc["probes"] = {**disk.get("probes", {}), **doc.get("probes", {})}
        seen = {(h["command"], h["date"]) for h in doc["history"]}
        new = [h for h in disk.get("history", []) if (h["command"], h["date"]) not in seen]
        doc["history"] = sorted([*doc["history"], *new], key=lambda h: h["date"])
    tmp = RESULTS.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=float))
    os.replace(tmp, RESULTS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--analyse-only", action="store_true", help="train nothing")
    ap.add_argument("--max-cells", type=int, default=len(CELLS), help="cells to train this time")
    ap.add_argument("--only", default="", help="comma-separated cell names to train (one job)")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    if only - {c.name for c in [*CELLS, *PROBES]}:
        unknown = sorted(only - {c.name for c in [*CELLS, *PROBES]})
        sys.exit(f"--only: no such cell or probe {unknown}; see CELLS and PROBES")
    old = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    doc = {
        "command": "python bench/lm_dynamics.py " + " ".join(sys.argv[1:]),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs shared with other jobs, no GPU",
        "cells": old.get("cells", {}),
        "probes": old.get("probes", {}),
    }
    earlier = old.get("history", [{k: old[k] for k in ("command", "date")}] if old else [])
    doc["history"] = [*earlier, {k: doc[k] for k in ("command", "date")}]  # every invocation
    todo = [c for c in CELLS if c.name in only] if only else CELLS[: args.max_cells]
    for cell in [] if args.analyse_only else todo:
        print(f"{cell.name} ...", flush=True)
        info = run_cell(cell)
        info["load_average_after"] = os.getloadavg()[0]
        if info["status"] == "ran" or cell.name not in doc["cells"]:
            doc["cells"][cell.name] = {"overrides": cell.overrides(RUNS.relative_to(ROOT)), **info}
        print(f"   {info}", flush=True)
        _write(doc)
    for probe in [] if args.analyse_only else [p for p in PROBES if p.name in only or not only]:
        print(f"{probe.name} ...", flush=True)
        info = pr.run_probe(probe, RUNS)
        if info["status"] == "ran" or probe.name not in doc.setdefault("probes", {}):
            doc["probes"][probe.name] = info
        print(f"   {info}", flush=True)
        _write(doc)
    doc["analysis"] = analyse()
    show(doc["analysis"])
    _write(doc)


if __name__ == "__main__":
    main()
