"""Forecasts and fits on the real GRPO logs of ../shared/data/curves, leave-one-repository-out.

    python bench/forecast_real.py [--cuts 0.3 0.5 0.7] [--derive-prior] [--weights]
                                  [--timescale-prior]

For each cut (a fraction of the logged points) every run's mean reward after the cut is
forecast from the points before it by `pgrpo.dynamics.forecast` (default method `level_gain`)
with the prior over the gain fraction and the band scale derived (`levelgain.derive_prior`)
from the OTHER 12 repositories' runs; scored as |error| / std (std of the run's whole reward
curve) against the mean of the last 10 logged points before the cut, and whether the 90% band
of the mean covered the observed mean. The ROM forecaster (`method="rom_blend"`) is scored
beside it. Then the whole-run fits: R^2 of the free ROM fit and of the optimizer-constrained
one (m, c from beta1 and K; `rom_fixed`), which one AICc prefers, and kappa with its 90%
profile interval.

Hyperparameters come from index.json: lr (the logged column when there is one, else the
stated peak, constant), K = num_iterations, beta1 = 0.9 (torch AdamW's default: stated for
the runs whose optimizer is AdamW, assumed for the others; the "beta1" column says which).
--weights: level_gain's fit weights each step by 1 / (reward_std^2 / (G B) + median)
(`noise_weights`; G, B from index.json; off by default: it measured worse, docs/dynamics.md).
Own training loops log one row per rollout batch, so their clock is K optimizer steps per logged
step; TRL and verl log optimizer steps.
--timescale-prior adds a prior on the curve's timescale, tau ~ N(c, c^2) with c = exp(median
log(tau / clock time of the run)) from the training runs' whole-run fits (off by default: it
measured better at cuts 0.3 and 0.7 but worse at 0.5, docs/dynamics.md).
--derive-prior prints the prior from all runs at cut 0.5 (the value stored in
`pgrpo.dynamics.levelgain.CORPUS_PRIOR`). Writes bench/results/forecast_real.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import warnings
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from pgrpo.dynamics import forecast, noise_scale
from pgrpo.dynamics.levelgain import ForecastPrior, derive_prior, log_tau_ratio, timescale_centre
from pgrpo.dynamics.runfit import fit_constrained, fit_run, noise_weights, run_inputs
from pgrpo.logs import read_log

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "data" / "curves"
OUT = ROOT / "bench" / "results" / "forecast_real.json"
OUT_WEIGHTED = ROOT / "bench" / "results" / "forecast_real_weighted.json"
OUT_TAU = ROOT / "bench" / "results" / "forecast_real_timescale_prior.json"
RESEARCH = "ShibukiZero/assignment5-alignment"  # 32 prompts x 8 = 256 rollouts per step


def load_corpus(weighted: bool = False) -> list[dict]:
    """[{meta, log, inputs, beta1_source, weights}] for every run of index.json."""
    runs = []
    for meta in json.loads((CORPUS / "index.json").read_text())["runs"]:
        log = read_log(CORPUS / meta["csv"])
        k = int(meta.get("num_iterations") or 1)
        opt = str(meta.get("optimizer") or "")
        hyper = {"lr": meta.get("learning_rate"), "beta1": 0.9, "refresh_interval": k}
        cols = dict(log.columns)
        if str(meta.get("framework", "")).startswith("own") and k > 1:
            cols["optimizer_step"] = log.step * k  # one logged row per rollout batch
        inputs = run_inputs(log.step, cols, hyper)
        gb = {"group_size": meta.get("G"), "batch_prompts": meta.get("prompts_per_step")}
        weights = noise_weights(log.columns, gb) if weighted else None
        source = "stated" if "adam" in opt.lower() else "assumed"
        kw = {k: v for k, v in inputs.items() if k != "optimizer"}
        ratio = log_tau_ratio(log.step, log.reward, kw)
        runs.append({"meta": meta, "log": log, "inputs": inputs, "beta1_source": source,
                     "weights": weights, "log_tau_ratio": ratio})  # fmt: skip
    return runs


def forecast_parts(
    run: dict, cut: float, prior: ForecastPrior | None = None, with_rom: bool = True
) -> dict:
    """One forecast of the run's mean after `cut` (level_gain with `prior`, default the stored
    one) and the naive and ROM baselines (`with_rom`), all in |error| / std."""
    log, inputs = run["log"], run["inputs"]
    y = log.reward
    i = int(round(cut * y.size))
    kw = {k: v for k, v in inputs.items() if k != "optimizer"}
    kw_lg = {**kw, "weights": run["weights"]}
    fc = forecast(log.step, y, cut, **kw_lg) if prior is None else forecast(
        log.step, y, cut, prior=prior, **kw_lg)  # fmt: skip
    std = float(np.std(y)) or 1.0
    obs = fc.observed_mean
    out = {
        "level": fc.metrics["level_at_cut"],
        "model_mean": fc.metrics["model_mean"],
        "band_unit": fc.metrics["band_unit"],
        "observed": obs,
        "std": std,
        "predicted": fc.predicted_mean,
        "err": abs(fc.predicted_mean - obs) / std,
        "err_last10": abs(float(np.mean(y[max(i - 10, 0) : i])) - obs) / std,
        "covered": bool(fc.mean_band[0] <= obs <= fc.mean_band[1]),
    }
    if not with_rom:
        return out
    try:
        rom = forecast(log.step, y, cut, method="rom_blend", **kw)
        out["err_rom_blend"] = abs(rom.predicted_mean - obs) / std
        out["covered_rom_blend"] = bool(rom.mean_band[0] <= obs <= rom.mean_band[1])
    except ValueError:
        out["err_rom_blend"], out["covered_rom_blend"] = None, None
    return out


def _prior(parts: list[dict], mu: float | None = None) -> ForecastPrior:
    cols = {k: np.array([p[k] for p in parts]) for k in ("level", "model_mean", "band_unit",
                                                          "observed", "std")}  # fmt: skip
    return derive_prior(**cols, log_tau_ratio=mu)


def fold_prior(train: list[dict], cut: float, timescale: bool) -> ForecastPrior:
    """The prior from training runs only: the timescale prior's centre from their whole-run
    fits, then gamma and the band scale from their forecasts made with that centre."""
    mu = timescale_centre([r["log_tau_ratio"] for r in train]) if timescale else None
    base = ForecastPrior(0.0, 1.0, log_tau_ratio=mu)
    return _prior([forecast_parts(r, cut, base, with_rom=False) for r in train], mu)


def loro(runs: list[dict], cut: float, timescale: bool = True) -> list[dict]:
    """Leave-one-repository-out: the prior from the other repositories, scored on this one."""
    rows = []
    for repo in sorted({r["meta"]["repo"] for r in runs}):
        prior = fold_prior([r for r in runs if r["meta"]["repo"] != repo], cut, timescale)
        for r in runs:
            if r["meta"]["repo"] == repo:
                held = forecast_parts(r, cut, prior)
                rows.append({"run": r["meta"]["name"], "repo": repo, **held,
                             "gain_fraction": prior.gain_fraction,
                             "band_scale": prior.band_scale})  # fmt: skip
    return rows


def block_r2(reward: np.ndarray, fitted: np.ndarray, block: int = 10) -> float | None:
    """R^2 of the fit against means of `block` consecutive points (the smoothed curve a paper
    plots); None when fewer than 4 blocks."""
    nb = reward.size // block
    if nb < 4:
        return None
    yb = reward[: nb * block].reshape(nb, block).mean(1)
    fb = fitted[: nb * block].reshape(nb, block).mean(1)
    sst = float(((yb - yb.mean()) ** 2).sum())
    return 1.0 - float(((yb - fb) ** 2).sum()) / sst if sst > 0 else None


def noise_ceiling(reward: np.ndarray) -> float:
    """The R^2 a perfect mean curve would reach under the log's white batch noise:
    1 - sigma^2 / var(reward), sigma from first differences (`noise_scale`)."""
    var = float(np.var(reward))
    return 1.0 - min(noise_scale(reward) ** 2, var) / var if var > 0 else 0.0


def fit_row(run: dict) -> dict:
    """Whole-run fits: free vs optimizer-constrained."""
    log, inputs = run["log"], run["inputs"]
    free = fit_run(log.step, log.reward, **inputs)
    fixed = fit_constrained(log.step, log.reward, **inputs)
    m = free.metrics
    return {
        "run": run["meta"]["name"],
        "repo": run["meta"]["repo"],
        "note": str(run["meta"].get("notes", ""))[:60],
        "beta1": run["beta1_source"],
        "r2_free": free.r2,
        "r2_constrained": None if fixed is None else fixed.r2,
        "r2_ceiling": noise_ceiling(log.reward),
        "r2_free_block10": block_r2(log.reward, free.fitted),
        "r2_constrained_block10": None if fixed is None else block_r2(log.reward, fixed.fitted),
        "delta_aicc": m.get("delta_aicc"),
        "preferred": m.get("preferred"),
        "closed_form": m.get("closed_form"),
        "lr_test_p": m.get("lr_test_p"),
        "kappa": m.get("kappa_constrained"),
        "kappa_lo": m.get("kappa_lo"),
        "kappa_hi": m.get("kappa_hi"),
        "tau_free": m.get("tau"),
    }


def summary(rows: list[dict]) -> dict:
    err = np.array([r["err"] for r in rows])
    base = np.array([r["err_last10"] for r in rows])
    rom = np.array([r["err_rom_blend"] for r in rows if r["err_rom_blend"] is not None])
    return {
        "runs": len(rows),
        "median_err": float(np.median(err)),
        "median_err_last10": float(np.median(base)),
        "median_err_rom_blend": float(np.median(rom)) if rom.size else None,
        "wins_vs_last10": int(np.sum(err < base)),
        "rom_blend_wins_vs_last10": int(
            sum(
                r["err_rom_blend"] < r["err_last10"] for r in rows if r["err_rom_blend"] is not None
            )
        ),  # fmt: skip
        "coverage_90": float(np.mean([r["covered"] for r in rows])),
        "coverage_90_rom_blend": float(np.mean([bool(r["covered_rom_blend"]) for r in rows])),
        "gain_fraction_range": [
            min(r["gain_fraction"] for r in rows),
            max(r["gain_fraction"] for r in rows),
        ],  # fmt: skip
    }


def _f(x, nd: int = 3) -> str:
    return "-" if x is None else (f"{x:.{nd}f}" if isinstance(x, float) else str(x))


def print_tables(console: Console, by_cut: dict, fits: list[dict]) -> None:
    t = Table(title="forecast of the mean after the cut, leave-one-repository-out (|err| / std)")
    for c in (
        "cut",
        "runs",
        "median err",
        "last-10",
        "rom_blend",
        "wins vs last-10",
        "rom_blend wins",
        "90% band coverage",
        "rom_blend coverage",
        "gain fraction",
    ):
        t.add_column(c)  # fmt: skip
    for cut, s in by_cut.items():
        t.add_row(str(cut), str(s["runs"]), _f(s["median_err"]), _f(s["median_err_last10"]),
                  _f(s["median_err_rom_blend"]), f"{s['wins_vs_last10']}/{s['runs']}",
                  f"{s['rom_blend_wins_vs_last10']}/{s['runs']}", _f(s["coverage_90"], 2),
                  _f(s["coverage_90_rom_blend"], 2),
                  "-".join(_f(g, 2) for g in s["gain_fraction_range"]))  # fmt: skip
    console.print(t)
    f = Table(title="whole-run fits: free ROM vs m, c fixed by the optimizer (AICc)")
    for c in (
        "run",
        "beta1",
        "R^2 free",
        "R^2 constr.",
        "ceiling",
        "R^2 10-step means",
        "dAICc",
        "preferred",
        "LR p",
        "kappa [90%]",
    ):
        f.add_column(c)  # fmt: skip
    for r in fits:
        k = "-" if r["kappa"] is None else (
            f"{r['kappa']:.3g} [{r['kappa_lo']:.3g}, {r['kappa_hi']:.3g}]")  # fmt: skip
        f.add_row(r["run"], r["beta1"], _f(r["r2_free"]), _f(r["r2_constrained"]),
                  _f(r["r2_ceiling"]), f"{_f(r['r2_free_block10'])} / "
                  f"{_f(r['r2_constrained_block10'])}", _f(r["delta_aicc"], 1),
                  str(r["preferred"]), _f(r["lr_test_p"]), k)  # fmt: skip
    console.print(f)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cuts", type=float, nargs="+", default=[0.3, 0.5, 0.7])
    ap.add_argument("--derive-prior", action="store_true")
    ap.add_argument("--weights", action="store_true", help="weight level_gain's fit by noise")
    ap.add_argument("--timescale-prior", action="store_true",
                    help="also a prior on tau, centred by the training runs")  # fmt: skip
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    runs = load_corpus(args.weights)
    console = Console()
    timescale = args.timescale_prior
    if args.derive_prior:
        prior = fold_prior(runs, 0.5, timescale)
        console.print(f"gain_fraction={prior.gain_fraction}, band_scale={prior.band_scale:.3f}, "
                      f"log_tau_ratio={prior.log_tau_ratio} ({len(runs)} runs, cut 0.5)",
                      soft_wrap=True)  # fmt: skip
        return 0
    per_cut = {cut: loro(runs, cut, timescale) for cut in args.cuts}
    by_cut = {cut: summary(rows) for cut, rows in per_cut.items()}
    fits = [fit_row(r) for r in runs]
    print_tables(console, by_cut, fits)
    fitted = [r for r in fits if r["preferred"] is not None]
    research = [r for r in fits if r["repo"] == RESEARCH]
    fit_summary = {
        "constrained_preferred": sum(r["preferred"] == "constrained" for r in fitted),
        "closed_form_consistent": sum(r["closed_form"] == "consistent" for r in fitted),
        "runs_compared": len(fitted),
        "research_scale_r2_free": {r["run"]: r["r2_free"] for r in research},
        "research_scale_r2_constrained": {r["run"]: r["r2_constrained"] for r in research},
        "research_scale_r2_ceiling": {r["run"]: r["r2_ceiling"] for r in research},
        "research_scale_r2_free_block10": {r["run"]: r["r2_free_block10"] for r in research},
        "research_scale_r2_constrained_block10": {
            r["run"]: r["r2_constrained_block10"] for r in research
        },
    }
    console.print(fit_summary)
    out = OUT_WEIGHTED if args.weights else (OUT_TAU if timescale else OUT)
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "command": "python bench/forecast_real.py "
        + " ".join(sys.argv[1:] if argv is None else argv),  # fmt: skip
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "forecast": {str(c): {"summary": by_cut[c], "runs": per_cut[c]} for c in args.cuts},
        "fits": {"summary": fit_summary, "runs": fits},
    }
    out.write_text(json.dumps(doc, indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
