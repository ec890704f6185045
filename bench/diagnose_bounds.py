"""How sure the progress verdict's bounds are, and false-alarm rates that docs/diagnostics.md
quotes: the figures a review measured with scripts that were not kept, measured again here.

    python bench/diagnose_bounds.py [--curves 1000] [--seed 0]
                                   [--out bench/results/diagnose_bounds.json]

Each row is `--curves` seeded curves (seed: [--seed, cell, row]). "Coverage" is the share of
curves whose true quantity lies within the bound: for `recent_rise_hi` (an upper bound) the true
rise over the second half is at most the bound; for the interval `trend_change_lo` /
`trend_change_hi` the true change over the run lies within it. The true quantity is the one the
bounds are about: the straight-line (least-squares) change of the noiseless mean curve over the
logged points of the segment (the second half: points n // 2 onwards, as `progress` splits it),
in the point index. The progress cells call `assess_progress(..., fit=False)` (the label does
not use the fit); the mode cells call `pgrpo.diagnose.diagnose`.

Cells:
- bounds (docs: the plateau / flat bounds beyond the rho grid's top 0.9): stationary Gaussian
  AR(1) noise of marginal sd 0.05, rho 0.5, 0.9 and 0.95, n = 24, 60 and 150 points, no group
  size (the AR(1) null). "rise cov": a flat first half at p0 ~ U(0.2, 0.6), then a line of
  total rise delta ~ U(-0.1, 0.3) over the second half (as in
  tests/test_diagnose_progress_bounds.py), covered when `recent_rise_hi` >= delta, over all
  curves whatever their label; "change cov": a line of total change delta over the run,
  covered when `trend_change_lo` <= delta <= `trend_change_hi`; "flat" and "drift | flat": on
  pure noise (delta = 0), the share read `flat` and, among those, the share whose interval
  excludes 0 (the summary names "a slow rise / fall at the 95% level").
- plateau (docs: coverage among the curves read as plateaus): batch means of N = 64 0/1 rewards
  (8 prompts x G = 8 at the step's rate, N stated), n = 60 and 150, a rise of 0.3 from 0.2.
  "stopped": a line from 0.2 to 0.5 over the first 40% of the points, then constant (true rise
  over the second half 0). The rise "went on": "creep": a line from 0.2 to 0.47 over the first
  half, then a line of +0.03 (a tenth of the gain) over the second; "exp n/4" and "exp n/3":
  0.2 + 0.3 (1 - exp(-t / tau)) / (1 - exp(-(n - 1) / tau)), tau = (n - 1) / 4 or (n - 1) / 3
  (true rise over the second half 0.033 and 0.052). Shown: the share read `plateau`,
  `recent_rise_hi`'s coverage among them and over all curves, and the share of plateaus with
  `plateau_stopped` 1 ("has stopped"). flat rows: the same noise, a line of total change 0,
  +0.03 or +0.06 from 0.4 over the run; `trend_change`'s coverage among the curves read `flat`.
- prompts (docs: null curves of several prompts): n = 100 steps of 4 prompts x G = 8 0/1
  rollouts, every prompt at p = 0.5, or each prompt's rate at each step drawn from Beta(5, 5)
  or Beta(0.5, 0.5); the log has reward, TRL's reward_std and frac_reward_zero_std (means over
  the 4 groups), group_size 8 and batch_prompts 4 (as tests/test_diagnose_progress.py's
  `binomial_groups`). "not flat": a progress label other than `flat`; "instability" /
  "degeneracy": `dynamical_instability` / `advantage_degeneracy` detected; "other": any other
  mode.
- hacking (docs: `reward_hacking` on a flat autocorrelated reward): a flat reward 0.5 + AR(1)
  noise (stationary, marginal sd 0.1, rho 0.5 or 0.8), n = 50 or 200 steps, no group size, and
  two evals of 1000 problems at the same true accuracy 0.5 given as (step, accuracy, se) with
  se = sqrt(0.25 / 1000) (exact-size evals), at the run's first and last steps ("ends") or at
  steps n / 10 and 9 n / 10 ("inner"). Shown: the share with `reward_hacking` detected (the
  mode's tests are at one-sided 0.5%) and with the train gain above 0.05 (the gap branch).

Prints one table per cell and writes the results JSON with the command and date (UTC).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from pgrpo.diagnose import diagnose
from pgrpo.diagnose.progress import assess_progress

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling bench modules
from null_rates import _ar1_unit  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "bench" / "results" / "diagnose_bounds.json"
MODES_SHOWN = ("dynamical_instability", "advantage_degeneracy")


def ar1(rng: np.random.Generator, n: int, rho: float, sd: float) -> np.ndarray:
    """Stationary AR(1) noise [n] of marginal sd `sd` (bench/null_rates.py's generator)."""
    return sd * _ar1_unit(n, rho, rng)


def line_change(mean: np.ndarray) -> float:
    """The least-squares line's change over the points of `mean` (in the point index)."""
    return float(np.polyfit(np.arange(mean.size, dtype=float), mean, 1)[0]) * (mean.size - 1)


def _progress(y: np.ndarray, n_rollouts: float | None = None) -> tuple[str, dict]:
    v = assess_progress(np.arange(y.size, dtype=float), y, n_rollouts=n_rollouts, fit=False)
    return v.label, v.evidence


# ---------------------------------------------------------------------------------------------
# bounds: AR(1) noise up to and beyond the rho grid's top
# ---------------------------------------------------------------------------------------------


def bounds_row(rng: np.random.Generator, rho: float, n: int, curves: int) -> dict:
    rise = change = flat = drift = 0
    step = np.arange(n, dtype=float)
    h = n // 2
    for _ in range(curves):
        delta, p0 = rng.uniform(-0.1, 0.3), rng.uniform(0.2, 0.6)
        bent = p0 + np.where(step >= h, delta * (step - h) / (n - 1 - h), 0.0)
        rise += _progress(bent + ar1(rng, n, rho, 0.05))[1]["recent_rise_hi"] >= delta
        ev = _progress(p0 + delta * step / (n - 1) + ar1(rng, n, rho, 0.05))[1]
        change += ev["trend_change_lo"] <= delta <= ev["trend_change_hi"]
        label, ev = _progress(p0 + ar1(rng, n, rho, 0.05))
        if label == "flat":
            flat += 1
            drift += not ev["trend_change_lo"] <= 0.0 <= ev["trend_change_hi"]
    return {
        "rho": rho,
        "n": n,
        "curves": curves,
        "rise_coverage": rise / curves,
        "change_coverage": change / curves,
        "flat": flat / curves,
        "flat_curves": flat,
        "drift_given_flat": drift / flat if flat else math.nan,
    }


# ---------------------------------------------------------------------------------------------
# plateau: coverage among the curves read as plateaus (and flat verdicts)
# ---------------------------------------------------------------------------------------------


def plateau_mean(shape: str, n: int) -> np.ndarray:
    t = np.arange(n, dtype=float)
    if shape == "stopped":
        k = int(0.4 * n)
        return np.where(t < k, 0.2 + 0.3 * t / k, 0.5)
    if shape == "creep":
        h = n // 2
        return np.where(t < h, 0.2 + 0.27 * t / h, 0.47 + 0.03 * (t - h) / (n - 1 - h))
    tau = (n - 1) / (4.0 if shape == "exp n/4" else 3.0)
    return 0.2 + 0.3 * (1.0 - np.exp(-t / tau)) / (1.0 - math.exp(-(n - 1) / tau))


def plateau_row(rng: np.random.Generator, shape: str, n: int, curves: int) -> dict:
    mean = plateau_mean(shape, n)
    true = line_change(mean[n // 2 :])
    plateaus = covered = covered_all = stopped = 0
    for _ in range(curves):
        label, ev = _progress(rng.binomial(64, mean) / 64.0, 64)
        hit = ev["recent_rise_hi"] >= true - 1e-12
        covered_all += hit
        if label == "plateau":
            plateaus += 1
            covered += hit
            stopped += ev["plateau_stopped"] == 1.0
    return {
        "shape": shape,
        "n": n,
        "curves": curves,
        "true_recent_rise": true,
        "went_on": shape != "stopped",
        "plateau": plateaus / curves,
        "plateau_curves": plateaus,
        "coverage_given_plateau": covered / plateaus if plateaus else math.nan,
        "coverage_all": covered_all / curves,
        "stopped_given_plateau": stopped / plateaus if plateaus else math.nan,
    }


def flat_row(rng: np.random.Generator, change: float, n: int, curves: int) -> dict:
    mean = 0.4 + change * np.arange(n, dtype=float) / (n - 1)
    flats = covered = covered_all = 0
    for _ in range(curves):
        label, ev = _progress(rng.binomial(64, mean) / 64.0, 64)
        hit = ev["trend_change_lo"] <= change <= ev["trend_change_hi"]
        covered_all += hit
        if label == "flat":
            flats += 1
            covered += hit
    return {
        "change": change,
        "n": n,
        "curves": curves,
        "flat": flats / curves,
        "flat_curves": flats,
        "coverage_given_flat": covered / flats if flats else math.nan,
        "coverage_all": covered_all / curves,
    }


# ---------------------------------------------------------------------------------------------
# prompts: null curves of 4 prompts x G = 8
# ---------------------------------------------------------------------------------------------


def prompts_row(rng: np.random.Generator, difficulty: str, curves: int) -> dict:
    n, b, g = 100, 4, 8
    not_flat = instability = degeneracy = other = 0
    labels: dict[str, int] = {}
    for _ in range(curves):
        if difficulty == "p = 0.5":
            p = np.full((n, b, 1), 0.5)
        else:
            a = 5.0 if difficulty == "Beta(5, 5)" else 0.5
            p = rng.beta(a, a, size=(n, b, 1))
        x = rng.random((n, b, g)) < p
        std = x.std(axis=2, ddof=1)
        cols = {
            "reward": x.mean(axis=(1, 2)),
            "reward_std": std.mean(axis=1),
            "frac_reward_zero_std": (std == 0).mean(axis=1),
            "group_size": np.full(n, float(g)),
            "batch_prompts": np.full(n, float(b)),
        }
        d = diagnose(cols)
        label = d.progress.label
        labels[label] = labels.get(label, 0) + 1
        fired = {m.name for m in d.modes if m.detected and m.name != "healthy"}
        not_flat += label != "flat"
        instability += "dynamical_instability" in fired
        degeneracy += "advantage_degeneracy" in fired
        other += bool(fired - set(MODES_SHOWN))
    return {
        "difficulty": difficulty,
        "n": n,
        "prompts": b,
        "group_size": g,
        "curves": curves,
        "not_flat": not_flat / curves,
        "instability": instability / curves,
        "degeneracy": degeneracy / curves,
        "other_modes": other / curves,
        "labels": labels,
    }


# ---------------------------------------------------------------------------------------------
# hacking: reward_hacking on a flat AR(1) reward with exact-size evals
# ---------------------------------------------------------------------------------------------


def hacking_row(rng: np.random.Generator, rho: float, n: int, where: str, curves: int) -> dict:
    steps = (1.0, float(n)) if where == "ends" else (float(n // 10), float(9 * n // 10))
    se = math.sqrt(0.25 / 1000)
    fired = gap_branch = 0
    for _ in range(curves):
        log = {"step": np.arange(1.0, n + 1), "reward": 0.5 + ar1(rng, n, rho, 0.1)}
        accs = rng.binomial(1000, 0.5, 2) / 1000
        evals = [(steps[0], accs[0], se), (steps[1], accs[1], se)]
        v = diagnose(log, eval_log=evals).mode("reward_hacking")
        fired += v.detected
        gap_branch += "eval_gap_z" in v.evidence
    return {
        "rho": rho,
        "n": n,
        "evals_at": list(steps),
        "eval_problems": 1000,
        "curves": curves,
        "reward_hacking": fired / curves,
        "train_gain_over_0.05": gap_branch / curves,
    }


# ---------------------------------------------------------------------------------------------


def _f(v: float) -> str:
    return "-" if not math.isfinite(v) else f"{v:.3f}"


def _table(title: str, heads: list[str], rows: list[list[str]]) -> None:
    console = Console(width=140)
    console.print(f"\n[bold]{title}[/bold]")
    t = Table()
    for h in heads:
        t.add_column(h, justify="right")
    for r in rows:
        t.add_row(*r)
    console.print(t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--curves", type=int, default=1000, help="seeded curves per row")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    t0 = time.time()
    m = args.curves

    def rng(cell: int, row: int) -> np.random.Generator:
        return np.random.default_rng([args.seed, cell, row])

    rows = [(rho, n) for rho in (0.5, 0.9, 0.95) for n in (24, 60, 150)]
    bounds = [bounds_row(rng(0, i), rho, n, m) for i, (rho, n) in enumerate(rows)]
    _table(
        "bounds: AR(1) noise, sd 0.05, no group size (grid top rho 0.9)",
        ["rho", "n", "rise cov", "change cov", "flat", "flats", "drift | flat"],
        [[f"{r['rho']:g}", str(r["n"]), _f(r["rise_coverage"]), _f(r["change_coverage"]),
          _f(r["flat"]), str(r["flat_curves"]), _f(r["drift_given_flat"])] for r in bounds],
    )  # fmt: skip

    shapes = ("stopped", "creep", "exp n/4", "exp n/3")
    rows = [(s, n) for s in shapes for n in (60, 150)]
    plateau = [plateau_row(rng(1, i), s, n, m) for i, (s, n) in enumerate(rows)]
    _table(
        "plateau: means of N = 64 0/1 rewards, rise 0.2 -> 0.5",
        ["shape", "n", "true rise 2nd half", "plateau", "plateaus", "cov | plateau", "cov all",
         "stopped | plateau"],
        [[r["shape"], str(r["n"]), f"{r['true_recent_rise']:+.4f}", _f(r["plateau"]),
          str(r["plateau_curves"]),
          _f(r["coverage_given_plateau"]), _f(r["coverage_all"]),
          _f(r["stopped_given_plateau"])] for r in plateau],
    )  # fmt: skip
    rows = [(c, n) for c in (0.0, 0.03, 0.06) for n in (60, 150)]
    flat = [flat_row(rng(2, i), c, n, m) for i, (c, n) in enumerate(rows)]
    _table(
        "flat: means of N = 64 0/1 rewards, a line from 0.4",
        ["change", "n", "flat", "flats", "cov | flat", "cov all"],
        [[f"{r['change']:+g}", str(r["n"]), _f(r["flat"]), str(r["flat_curves"]),
          _f(r["coverage_given_flat"]),
          _f(r["coverage_all"])] for r in flat],
    )  # fmt: skip

    diffs = ("p = 0.5", "Beta(5, 5)", "Beta(0.5, 0.5)")
    prompts = [prompts_row(rng(3, i), d, m) for i, d in enumerate(diffs)]
    _table(
        "prompts: 100 steps of 4 prompts x G = 8, no trend (diagnose)",
        ["difficulty", "not flat", "instability", "degeneracy", "other", "labels"],
        [[r["difficulty"], _f(r["not_flat"]), _f(r["instability"]), _f(r["degeneracy"]),
          _f(r["other_modes"]), json.dumps(r["labels"])] for r in prompts],
    )  # fmt: skip

    rows = [(rho, n, w) for rho in (0.5, 0.8) for n in (50, 200) for w in ("ends", "inner")]
    hacking = [hacking_row(rng(4, i), *r, m) for i, r in enumerate(rows)]
    _table(
        "hacking: flat AR(1) reward (sd 0.1), two exact evals of 1000 problems (diagnose)",
        ["rho", "n", "evals at", "reward_hacking", "train gain > 0.05"],
        [[f"{r['rho']:g}", str(r["n"]), ", ".join(f"{s:g}" for s in r["evals_at"]),
          _f(r["reward_hacking"]), _f(r["train_gain_over_0.05"])] for r in hacking],
    )  # fmt: skip

    seconds = round(time.time() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "command": "python " + " ".join(sys.argv),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "seconds": seconds,
        "curves_per_row": m,
        "seed": args.seed,
        "bounds": bounds,
        "plateau": plateau,
        "flat": flat,
        "prompts": prompts,
        "hacking": hacking,
    }
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out} ({seconds:.0f} s)")


if __name__ == "__main__":
    main()
