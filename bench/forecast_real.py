"""Forecasts and fits on the real GRPO logs of ../shared/data/curves, leave-one-repository-out.

    python bench/forecast_real.py [--cuts 0.3 0.5 0.7] [--derive-prior] [--weights] [--no-nested]
                                  [--losses linear huber]

For each cut (a fraction of the logged points) every run's mean reward after the cut is
forecast from the points before it by `pgrpo.dynamics.forecast` (default method `level_gain`)
with a prior derived from the OTHER repositories' runs only (`corpus_prior`: the timescale
prior's centre from their whole-run fits, the gain fraction from their forecasts at the cut
fractions 0.2-0.8 with each repository counted once, the band scale at each cut); scored as
|error| / std (std of the run's whole reward curve) against the mean of the last 10 logged
points before the cut, per run and per repository (medians of per-repository medians), and
whether the 90% band of the mean covered the observed mean. The variants of
bench/forecast_stack.py (the old default, no timescale prior, stacking of seven candidate
forecasts incl. rom_blend) are scored the same way, and by nested LORO (the variant chosen by
an inner LORO on the training repositories only). Then the whole-run fits: R^2 of the free ROM
fit and of the optimizer-constrained one (m, c from beta1 and K; `rom_fixed`), which one AICc
prefers, and kappa with its 90% profile interval.

Hyperparameters come from index.json: lr (the logged column when there is one, else the
stated schedule when it is TRL's linear decay or cosine (`stated_lr`), else the stated peak,
constant), K = num_iterations, beta1 = 0.9 (torch AdamW's default: stated for the runs whose
optimizer is AdamW, assumed for the others; the "beta1" column says which).
--weights: level_gain's fit weights each step by 1 / (reward_std^2 / (G B) + median)
(`noise_weights`; G, B from index.json; off by default: it measured worse, docs/dynamics.md);
writes bench/results/forecast_real_weighted.json. Every variant is also run with the lr
ignored, the step as every run's clock ("(step clock)"), to measure what the schedule as the
clock does.
Own training loops log one row per rollout batch, so their clock is K optimizer steps per logged
step; TRL and verl log optimizer steps.
--losses: the default is also run with each of these losses for its level fit (soft_l1 is the
default's), and a nested LORO chooses among them ("losses"); `--losses` alone skips them.
--derive-prior prints the prior from all runs (the value stored in
`pgrpo.dynamics.levelgain.CORPUS_PRIOR`). Writes bench/results/forecast_real.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
import warnings
from itertools import product
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from pgrpo.dynamics import forecast
from pgrpo.dynamics.fitquality import BLOCK, block_r2, noise_ceiling
from pgrpo.dynamics.levelgain import ForecastPrior, log_tau_ratio, timescale_centre
from pgrpo.dynamics.runfit import fit_constrained, fit_run, noise_weights, run_inputs
from pgrpo.logs import read_log

sys.path.insert(0, str(Path(__file__).resolve().parent))
from forecast_stack import (  # noqa: E402
    CRITERIA,
    DERIVE_CUTS,
    VARIANTS,
    candidate_rows,
    loro_variant,
    nested_loro,
    on_twin,
    repo_median,
    score_row,
)

DEFAULT = "level_gain+tau"  # the variant `forecast` runs by default (levelgain.CORPUS_PRIOR)

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "data" / "curves"
OUT = ROOT / "bench" / "results" / "forecast_real.json"
OUT_WEIGHTED = ROOT / "bench" / "results" / "forecast_real_weighted.json"
RESEARCH = "ShibukiZero/assignment5-alignment"  # 32 prompts x 8 = 256 rollouts per step


def _number(value) -> float | None:  # noqa: ANN001
    """A number, or the first number in a collector's words ("warmup_ratio 0.03 (lr reaches 1e-4
    at step 9)" -> 0.03; round 12's entries stated the warmup so, and the float() of it stopped
    the benchmark), or None."""
    if isinstance(value, int | float):
        return float(value)
    found = re.search(r"\d+(\.\d+)?([eE][-+]?\d+)?", str(value))
    return float(found.group()) if found else None


def stated_lr(meta: dict, step: np.ndarray) -> np.ndarray | None:
    """The lr schedule index.json states ([n] at the logged steps) for a run that does not log
    its lr: TRL's linear decay or cosine over max_steps after a linear warmup (a fraction of
    max_steps when < 1); None when the schedule is not one of these or max_steps is unknown."""
    sched, peak, total = str(meta.get("lr_schedule") or ""), meta.get("learning_rate"), meta.get(
        "max_steps")  # fmt: skip
    if not peak or not total or not ("linear decay" in sched or "cosine" in sched):
        return None
    warm = _number(meta.get("warmup") or 0.0)
    if warm is None:  # a warmup stated in words without a number: the schedule is not known
        return None
    warm = warm * total if warm < 1 else warm
    t = np.asarray(step, dtype=float)
    prog = np.clip((t - warm) / max(total - warm, 1.0), 0.0, 1.0)
    decay = 0.5 * (1 + np.cos(np.pi * prog)) if "cosine" in sched else 1.0 - prog
    return float(peak) * np.where(t < warm, t / max(warm, 1.0), decay)


def load_corpus(
    weighted: bool = False, step_clock: bool = False, loss: str = "soft_l1", corpus: Path = CORPUS
) -> list[dict]:
    """[{meta, log, inputs, beta1_source, weights, log_tau_ratio}] for every run of index.json.
    step_clock: drop the lr (every run's clock is its step count; to measure the schedule's).
    loss: the whole-run fit's loss behind log_tau_ratio (the level fit's; `--losses`).
    corpus: a folder in the corpus layout (index.json with `runs`, one CSV per run)."""
    runs = []
    for meta in json.loads((corpus / "index.json").read_text())["runs"]:
        log = read_log(corpus / meta["csv"])
        k = int(meta.get("num_iterations") or 1)
        opt = str(meta.get("optimizer") or "")
        hyper = {"lr": meta.get("learning_rate"), "beta1": 0.9, "refresh_interval": k}
        cols = dict(log.columns)
        if str(meta.get("framework", "")).startswith("own") and k > 1:
            cols["optimizer_step"] = log.step * k  # one logged row per rollout batch
        if "learning_rate" not in cols and (lr := stated_lr(meta, log.step)) is not None:
            cols["learning_rate"] = lr  # the stated schedule is the clock
        inputs = run_inputs(log.step, cols, hyper)
        if step_clock:
            inputs = {**inputs, "lr": None, "lr_step": None}
        gb = {"group_size": meta.get("G"), "batch_prompts": meta.get("prompts_per_step")}
        weights = noise_weights(log.columns, gb) if weighted else None
        source = "stated" if "adam" in opt.lower() else "assumed"
        kw = {k: v for k, v in inputs.items() if k != "optimizer"}
        ratio = log_tau_ratio(log.step, log.reward, kw, loss)
        runs.append({"meta": meta, "log": log, "inputs": inputs, "beta1_source": source,
                     "weights": weights, "log_tau_ratio": ratio})  # fmt: skip
    return runs


def centres(runs: list[dict]) -> dict[str, float]:
    """Timescale-prior centres: from all runs ("all") and without each repository."""
    out = {"all": timescale_centre([r["log_tau_ratio"] for r in runs])}
    for repo in sorted({r["meta"]["repo"] for r in runs}):
        rest = [r["log_tau_ratio"] for r in runs if r["meta"]["repo"] != repo]
        out[repo] = timescale_centre(rest)
    return out


def corpus_prior(table: list[dict], centre: float, name: str = "all") -> ForecastPrior:
    """The default's prior from candidate rows: gamma from all DERIVE_CUTS (each repository
    once), the band scale at each cut (`band_scale_by_cut`; band_scale: the one at 0.5)."""
    info = {c: VARIANTS[DEFAULT](table, name, c)[1] for c in DERIVE_CUTS}
    by_cut = tuple((c, i["band_scale"]) for c, i in info.items())
    return ForecastPrior(info[0.5]["gain_fraction"], info[0.5]["band_scale"],
                         log_tau_ratio=centre, band_scale_by_cut=by_cut)  # fmt: skip


def loro_default(runs: list[dict], table: list[dict], cuts, cen: dict) -> list[dict]:
    """LORO of the default through the library: the prior from the other repositories' rows,
    the forecast by `forecast(prior=...)` on the held-out runs (checked against the table)."""
    rows = []
    for repo in sorted({r["meta"]["repo"] for r in runs}):
        train = [r for r in table if r["repo"] != repo]
        prior = corpus_prior(train, cen[repo], repo)
        for run in (r for r in runs if r["meta"]["repo"] == repo):
            log = run["log"]
            kw = {k: v for k, v in run["inputs"].items() if k != "optimizer"}
            for cut in cuts:
                fc = forecast(log.step, log.reward, cut, method="level_gain", prior=prior,
                              weights=run["weights"], **kw)  # fmt: skip
                cand = next(x for x in table if x["run"] == run["meta"]["name"] and x["cut"] == cut)
                half = fc.mean_band[1] - fc.predicted_mean
                row = score_row(cand, fc.predicted_mean, half)
                rom = abs(cand["rom_blend"] - cand["observed"]) / cand["std"]
                rows.append({**row, "gain_fraction": prior.gain_fraction,
                             "band_scale": prior.band_scale, "err_rom_blend": rom,
                             "covered_rom_blend": cand["covered_rom_blend"]})  # fmt: skip
    return rows


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


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
        "r2_ceiling": _finite(noise_ceiling(log.reward)),
        "r2_ceiling_block10": _finite(noise_ceiling(log.reward, BLOCK)),
        "r2_free_block10": _finite(block_r2(log.reward, free.fitted)),
        "r2_constrained_block10": None
        if fixed is None
        else _finite(block_r2(log.reward, fixed.fitted)),
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
    """Per run and per repository (each counted once: medians of per-repository medians; a
    repository wins when its median error is below its median last-10 error)."""
    err = np.array([r["err"] for r in rows])
    base = np.array([r["err_last10"] for r in rows])
    repos = sorted({r["repo"] for r in rows})
    by = {g: [r for r in rows if r["repo"] == g] for g in repos}
    out = {
        "runs": len(rows),
        "median_err": float(np.median(err)),
        "median_err_last10": float(np.median(base)),
        "wins_vs_last10": int(np.sum(err < base)),
        "coverage_90": float(np.mean([r["covered"] for r in rows])),
        "repos": len(repos),
        "repo_median_err": repo_median(rows),
        "repo_median_err_last10": repo_median(rows, "err_last10"),
        "repo_wins_vs_last10": int(
            sum(repo_median(v) < repo_median(v, "err_last10") for v in by.values())
        ),  # fmt: skip
        "repo_coverage_90": float(
            np.mean([np.mean([r["covered"] for r in v]) for v in by.values()])
        ),  # fmt: skip
    }
    if "err_rom_blend" in rows[0]:
        rom = np.array([r["err_rom_blend"] for r in rows])
        out["median_err_rom_blend"] = float(np.median(rom))
        out["rom_blend_wins_vs_last10"] = int(np.sum(rom < base))
        out["coverage_90_rom_blend"] = float(np.mean([r["covered_rom_blend"] for r in rows]))
    if "gain_fraction" in rows[0]:
        out["gain_fraction_range"] = [min(r["gain_fraction"] for r in rows),
                                      max(r["gain_fraction"] for r in rows)]  # fmt: skip
    return out


def _f(x, nd: int = 3) -> str:
    return "-" if x is None else (f"{x:.{nd}f}" if isinstance(x, float) else str(x))


def print_tables(console: Console, by_cut: dict, variants: dict, nested: dict) -> None:
    t = Table(title="default forecast of the mean after the cut, LORO (|err| / std; repo: each "
              "repository once)")  # fmt: skip
    for c in (
        "cut",
        "runs",
        "median err",
        "last-10",
        "rom_blend",
        "wins",
        "rom_blend wins",
        "coverage",
        "repo median",
        "repo last-10",
        "repo wins",
        "repo coverage",
        "gamma",
    ):
        t.add_column(c)  # fmt: skip
    for cut, s in by_cut.items():
        t.add_row(str(cut), str(s["runs"]), _f(s["median_err"]), _f(s["median_err_last10"]),
                  _f(s["median_err_rom_blend"]), f"{s['wins_vs_last10']}/{s['runs']}",
                  f"{s['rom_blend_wins_vs_last10']}/{s['runs']}", _f(s["coverage_90"], 2),
                  _f(s["repo_median_err"]), _f(s["repo_median_err_last10"]),
                  f"{s['repo_wins_vs_last10']}/{s['repos']}", _f(s["repo_coverage_90"], 2),
                  "-".join(_f(g, 2) for g in s["gain_fraction_range"]))  # fmt: skip
    console.print(t)
    v = Table(title="variants, LORO, and nested LORO (the variant chosen inside the training "
              "folds): median, wins, repo median, repo wins, coverage per cut")  # fmt: skip
    v.add_column("variant", no_wrap=True)
    for cut in by_cut:
        v.add_column(f"cut {cut}")
    for name, per in {**variants, **{f"nested ({k})": v for k, v in nested.items()}}.items():
        v.add_row(name, *(f"{_f(s['median_err'])}, {s['wins_vs_last10']}/{s['runs']}, "
                          f"{_f(s['repo_median_err'])}, {s['repo_wins_vs_last10']}/{s['repos']}"
                          f", {_f(s['coverage_90'], 2)}" for s in per.values()))  # fmt: skip
    console.print(v)


def print_fits(console: Console, fits: list[dict]) -> None:
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


def fit_summary(fits: list[dict]) -> dict:
    fitted = [r for r in fits if r["preferred"] is not None]
    research = [r for r in fits if r["repo"] == RESEARCH]
    out = {
        "constrained_preferred": sum(r["preferred"] == "constrained" for r in fitted),
        "closed_form_consistent": sum(r["closed_form"] == "consistent" for r in fitted),
        "runs_compared": len(fitted),
    }
    for key in (
        "r2_free",
        "r2_constrained",
        "r2_ceiling",
        "r2_ceiling_block10",
        "r2_free_block10",
        "r2_constrained_block10",
    ):
        out[f"research_scale_{key}"] = {r["run"]: r[key] for r in research}  # fmt: skip
    return out


def forecasts(
    runs: list[dict],
    cuts,
    nested: bool,
    step_runs: list[dict] | None = None,
    loss_runs: dict[str, list[dict]] | None = None,
) -> dict:
    """The default's LORO rows and summaries, every variant's, and the nested LORO's.
    step_runs: the corpus with the lr dropped; each variant is then also run with the step as
    the clock ("<variant> (step clock)"), and a second nested LORO chooses among both.
    loss_runs: loss -> the corpus loaded with that loss; the default is also run with each loss
    for its level fit ("level_gain+tau (loss)"), and a nested LORO chooses among the losses."""
    cen = centres(runs)
    table = [row for r in runs for row in candidate_rows(r, cen)]
    variants = dict(VARIANTS)
    if step_runs is not None:
        cen_s = centres(step_runs)
        twins = {(x["run"], x["cut"]): x for r in step_runs for x in candidate_rows(r, cen_s)}
        variants.update({f"{k} (step clock)": on_twin(v, twins) for k, v in VARIANTS.items()})
    by_loss = {f"{DEFAULT} (soft_l1)": VARIANTS[DEFAULT]}
    for loss, lruns in (loss_runs or {}).items():
        cen_l = centres(lruns)
        twins = {(x["run"], x["cut"]): x for r in lruns
                 for x in candidate_rows(r, cen_l, rom=False, loss=loss)}  # fmt: skip
        by_loss[f"{DEFAULT} ({loss})"] = on_twin(VARIANTS[DEFAULT], twins)
    plain = dict(variants)
    variants.update({k: v for k, v in by_loss.items() if k != f"{DEFAULT} (soft_l1)"})
    rows = loro_default(runs, table, cuts, cen)
    per_cut = {c: [r for r in rows if r["cut"] == c] for c in cuts}
    out = {"per_cut": per_cut, "by_cut": {c: summary(v) for c, v in per_cut.items()},
           "variants": {}, "variant_info": {}, "nested": {}, "nested_chosen": []}  # fmt: skip
    for name, fit in variants.items():
        vr = loro_variant(fit, table, cuts)
        out["variants"][name] = {c: summary([r for r in vr if r["cut"] == c]) for c in cuts}
        out["variant_info"][name] = fit(table, "all", 0.5)[1]  # fitted on all runs
    sets = {"lr clock": VARIANTS, "both clocks": plain} if step_runs else {"": VARIANTS}
    if loss_runs:
        sets["losses"] = by_loss
    for (label, vs), (crit, score) in product(sets.items(), CRITERIA.items() if nested else ()):
        key = f"{crit}, {label}" if label else crit
        nr, chosen = nested_loro(table, cuts, score, vs)
        out["nested"][key] = {c: summary([r for r in nr if r["cut"] == c]) for c in cuts}
        out["nested_chosen"] += [{**c, "criterion": key} for c in chosen]
    out["prior"] = corpus_prior(table, cen["all"])
    return out


def nested_counts(chosen: list[dict]) -> dict[str, dict[str, int]]:
    """criterion -> {variant: how many outer folds chose it}."""
    out: dict[str, dict[str, int]] = {}
    for c in chosen:
        d = out.setdefault(c["criterion"], {})
        d[c["chosen"]] = d.get(c["chosen"], 0) + 1
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cuts", type=float, nargs="+", default=[0.3, 0.5, 0.7])
    ap.add_argument("--derive-prior", action="store_true")
    ap.add_argument("--weights", action="store_true", help="weight level_gain's fit by noise")
    ap.add_argument("--no-nested", action="store_true", help="skip the nested LORO (~1 min)")
    ap.add_argument("--losses", nargs="*", default=["linear", "huber"],
                    help="also run the default with these level-fit losses (and nested LORO "
                    "among them and soft_l1); none: skip (~1 min)")  # fmt: skip
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    runs = load_corpus(args.weights)
    console = Console(width=200)
    if args.derive_prior:
        cen = centres(runs)
        table = [row for r in runs for row in candidate_rows(r, {"all": cen["all"]}, rom=False)]
        p = corpus_prior(table, cen["all"])
        by_cut = ", ".join(f"({c}, {q:.4f})" for c, q in p.band_scale_by_cut)
        console.print(f"gain_fraction={p.gain_fraction}, band_scale={p.band_scale:.4f}, "
                      f"log_tau_ratio={p.log_tau_ratio:.4f}, band_scale_by_cut=({by_cut}) "
                      f"({len(runs)} runs, cuts {DERIVE_CUTS})", soft_wrap=True)  # fmt: skip
        return 0
    bad = [c for c in args.cuts if c not in DERIVE_CUTS]
    if bad:
        ap.error(f"--cuts {bad}: each cut must be one of {DERIVE_CUTS}")
    step_runs = load_corpus(args.weights, step_clock=True)
    loss_runs = {loss: load_corpus(args.weights, loss=loss) for loss in args.losses}
    fc = forecasts(runs, args.cuts, not args.no_nested, step_runs, loss_runs)
    print_tables(console, fc["by_cut"], fc["variants"], fc["nested"] or {})
    console.print({"prior (all runs)": fc["prior"], "fitted on all runs": fc["variant_info"],
                   "nested chosen": nested_counts(fc["nested_chosen"])})  # fmt: skip
    fits = [fit_row(r) for r in runs]
    print_fits(console, fits)
    fsum = fit_summary(fits)
    console.print(fsum)
    out = OUT_WEIGHTED if args.weights else OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "command": "python bench/forecast_real.py "
        + " ".join(sys.argv[1:] if argv is None else argv),  # fmt: skip
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "forecast": {
            str(c): {"summary": fc["by_cut"][c], "runs": fc["per_cut"][c]} for c in args.cuts
        },  # fmt: skip
        "variants": {k: {str(c): s for c, s in v.items()} for k, v in fc["variants"].items()},
        "variant_fitted_on_all_runs": fc["variant_info"],
        "nested": {k: {str(c): s for c, s in v.items()} for k, v in fc["nested"].items()},
        "nested_chosen": fc["nested_chosen"],
        "nested_chosen_counts": nested_counts(fc["nested_chosen"]),
        "prior_all_runs": {
            "gain_fraction": fc["prior"].gain_fraction,
            "band_scale": fc["prior"].band_scale,
            "log_tau_ratio": fc["prior"].log_tau_ratio,
            "band_scale_by_cut": fc["prior"].band_scale_by_cut,
        },  # fmt: skip
        "fits": {"summary": fsum, "runs": fits},
    }
    out.write_text(json.dumps(doc, indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
