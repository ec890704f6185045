"""The dynamics model on real third-party sweeps (issue #15 item 3): does the closed form, given
each run's hyperparameters, order and explain the runs of a controlled sweep?

    python bench/corpus_dynamics.py

Reads ../shared/data/curves (index.json for G, prompts per step B, lr, num_iterations K and the
optimizer; the CSVs for step, reward, reward_std, learning_rate). Every run here is AdamW or
does not name its optimizer (CS336: then AdamW, the default the dynamics model assumes), so the
model is the `adam` reduction of `pgrpo.dynamics.optimizers`: mass and damping of the heavy-ball
continuum at the effective stiffness a = lr kappa / u, beta1 = 0.9 (AdamW's default; no log
states it), K = num_iterations optimizer steps per logged rollout batch (the clock). kappa is
the preconditioned curvature kappa / u that a fit of the curve measures. Tests:

(a) lr transfer: fit the constrained model (`rom_fixed`: only kappa, R_0, R_inf free) on one run
    of a sweep; predict every other run from its own lr schedule, K and clock alone (R_0, R_inf
    carried over: same model, same data); R^2 of prediction vs realised curve against the
    target's own constrained fit's R^2 (the best this model can do on that run).
(b) G-invariance: `fit_joint` with shared R_inf and k vs separate fits, likelihood ratio
    (Gaussian, each run's own variance; raw and with n shrunk for lag-1 autocorrelation), and
    the residual variance against the rollouts per step N = B G: log-log slope, -1 for batch
    sampling noise (and SGD's stationary variance), -1/2 for Adam's stationary variance
    (a_eff = lr kappa / u with u ~ N^-1/2, Var x ~ lr sigma / (2 kappa) ~ N^-1/2).
(c) inner updates / off-policy epochs: predict the mu = 3 run and the 16-epoch run from a K = 1
    run (K = num_iterations); what the Adam reduction says about a threshold there, and the
    heavy-ball K* at the same effective a as a counterfactual.
(d) std-normalisation ablations (no lr change): Adam divides the step by sqrt(v), so a global
    rescaling of the advantages (scale_rewards=batch against none) leaves a and the curve
    unchanged: predicted kappa ratio 1. Per-group std division is not a global rescaling (no
    prediction; the fitted ratio is reported).

Results: bench/results/corpus_dynamics.json (with the command and date); docs/dynamics_lm.md.
The text tables are bench/corpus_dynamics_show.py.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import math
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares
from scipy.stats import chi2, linregress

from pgrpo.dynamics import fit_curve, fit_joint
from pgrpo.dynamics.constrained import fixed_basis_batch
from pgrpo.dynamics.inputs import make_context
from pgrpo.dynamics.optimizers import OptimizerSettings, reduce_optimizer, run_optimizer

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling bench modules
from corpus_dynamics_show import _f, show  # noqa: E402, F401  (the tables; _f re-exported)

ROOT = Path(__file__).resolve().parents[1]
CURVES = ROOT.parent / "shared" / "data" / "curves"
RESULTS = ROOT / "bench" / "results" / "corpus_dynamics.json"
BETA1 = 0.9  # AdamW's default; none of these logs states beta1

TONY = "gsm8k_qwen3_1p7b_abl_"
SHIBUKI = "cs336_shibuki_"
LR_SWEEPS = {
    "tonywang1990 lr": [TONY + "lr_1em6", TONY + "baseline", TONY + "lr_2em5"],
    "ShibukiZero lr": [SHIBUKI + "onpolicy_lr1e-5", SHIBUKI + "ref_lr4e-5_stdnorm"],
}
G_SWEEPS = {
    "tonywang1990 G (B=8)": [TONY + "group_size_4", TONY + "baseline", TONY + "group_size_16"],
    "tonywang1990 B (G=8)": [TONY + "num_groups_4", TONY + "baseline"],
}
INNER = [  # (source with K = 1, target with K = num_iterations)
    (TONY + "baseline", TONY + "mu_3"),
    (SHIBUKI + "ref_lr4e-5_stdnorm", SHIBUKI + "offpolicy_e16_tb256"),
]
NORM_PAIRS = [  # (a, b, the Adam model's predicted kappa_a / kappa_b or None)
    ("grponorm_easy_batch_std", "grponorm_easy_no_std", 1.0),
    ("grponorm_easy_standard", "grponorm_easy_no_std", None),
    (SHIBUKI + "ref_lr4e-5_stdnorm", SHIBUKI + "no_std_norm", None),
]


@dataclass(frozen=True)
class Run:
    """One corpus run: step, reward, reward_std, lr: [n]; G, B, K; its optimizer reduction."""

    name: str
    step: np.ndarray
    reward: np.ndarray
    reward_std: np.ndarray | None
    lr: np.ndarray
    G: int
    B: int
    K: int
    optimizer: str


def load_run(name: str, meta: dict, curves: Path = CURVES) -> Run:
    """A corpus run with its hyperparameters from index.json (lr column when logged)."""
    with open(curves / meta["csv"], newline="") as f:
        rows = list(csv.DictReader(f))

    def col(key: str) -> np.ndarray | None:
        if key not in rows[0]:
            return None
        return np.array([float(r[key]) if r[key] not in ("", None) else np.nan for r in rows])

    step, reward = col("step"), col("reward")
    ok = np.isfinite(step) & np.isfinite(reward)
    lr = col("learning_rate")
    lr = np.full(step.size, float(meta["learning_rate"])) if lr is None else lr
    lr = np.where(np.isfinite(lr), lr, float(meta["learning_rate"]))
    sd = col("reward_std")
    return Run(
        name,
        step[ok],
        reward[ok],
        None if sd is None else sd[ok],
        lr[ok],
        int(meta["G"]),
        int(meta["prompts_per_step"]),
        int(meta.get("num_iterations") or 1),
        run_optimizer(meta.get("optimizer")),
    )


def load_corpus(names: list[str], curves: Path = CURVES) -> dict[str, Run]:
    index = {m["name"]: m for m in json.loads((curves / "index.json").read_text())["runs"]}
    return {n: load_run(n, index[n], curves) for n in names}


def _inputs(run: Run) -> dict:
    return {
        "lr": run.lr,
        "beta1": BETA1,
        "refresh_interval": run.K,
        "clock": float(run.K),
        "optimizer": run.optimizer,
    }


def fit_run_model(run: Run) -> dict:
    """Free `rom` fit (with the constrained one compared in its metrics) and the constrained
    `rom_fixed` fit: kappa with its 90% interval, R_0, R_inf, both R^2."""
    free = fit_curve(run.step, run.reward, "rom", **_inputs(run))
    fixed = fit_curve(run.step, run.reward, "rom_fixed", **_inputs(run))
    m = free.metrics
    keys = ("kappa_lo", "kappa_hi")
    return {"kappa": float(fixed.metrics["kappa"]), **{k: float(m[k]) for k in keys},
            "R_0": float(fixed.values["R_0"]), "R_inf": float(fixed.values["R_inf"]),
            "r2_constrained": float(fixed.r2), "r2_free": float(free.r2),
            "closed_form": str(m["closed_form"]), "residual": fixed.reward - fixed.fitted,
            "autocorr": float(fixed.residual_autocorr)}  # fmt: skip


def predict_curve(run: Run, kappa: float, r0: float, r_inf: float) -> np.ndarray:
    """The constrained model's mean for `run` from its own lr, K and clock: [n]."""
    ctx = make_context(
        run.step,
        lr=run.lr,
        beta1=BETA1,
        refresh_interval=run.K,
        optimizer=run.optimizer,
        clock=float(run.K),
    )
    t = (run.step - ctx.step0) * ctx.clock  # optimizer steps since the first logged point
    k = kappa * float(np.max(ctx.lr))  # the stiffness at the peak lr
    phi = fixed_basis_batch(t, np.array([k]), ctx)[0]
    return r_inf + (r0 - r_inf) * phi


def r2(y: np.ndarray, pred: np.ndarray) -> float:
    sst = float(((y - y.mean()) ** 2).sum())
    return 1.0 - float(((y - pred) ** 2).sum()) / sst if sst > 0 else math.nan


def transfer(runs: dict[str, Run], fits: dict[str, dict], names: list[str]) -> list[dict]:
    """(a) every ordered pair (source, target) of a sweep: R^2 of the prediction."""
    rows = []
    for src in names:
        f = fits[src]
        for tgt in names:
            if tgt == src:
                continue
            run = runs[tgt]
            pred = predict_curve(run, f["kappa"], f["R_0"], f["R_inf"])
            own = fits[tgt]
            rows.append({"source": src, "target": tgt, "lr_source": float(runs[src].lr.max()),
                         "lr_target": float(run.lr.max()), "K_target": run.K,
                         "r2_prediction": r2(run.reward, pred),
                         "r2_timescale_only": r2(run.reward, timescale_only(run, f["kappa"])),
                         "r2_own_fit": own["r2_constrained"], "kappa_source": f["kappa"],
                         "kappa_target": own["kappa"],
                         "kappa_target_in_source_interval":
                             bool(f["kappa_lo"] <= own["kappa"] <= f["kappa_hi"])})  # fmt: skip
    return rows


def lr_order(runs: dict[str, Run], fits: dict[str, dict], names: list[str]) -> dict:
    """Effective stiffness a = lr kappa per run (with kappa's interval) and the exponent of a in
    lr (the model: 1, one kappa per model and task)."""
    lr = np.array([runs[n].lr.max() for n in names])
    a = np.array([fits[n]["kappa"] for n in names]) * lr
    expo = np.polyfit(np.log(lr), np.log(a), 1)[0] if lr.size >= 2 else math.nan
    return {"lr": lr.tolist(), "a": a.tolist(), "exponent": float(expo),
            "a_lo": [fits[n]["kappa_lo"] * x for n, x in zip(names, lr, strict=True)],
            "a_hi": [fits[n]["kappa_hi"] * x for n, x in zip(names, lr, strict=True)]}  # fmt: skip


def timescale_only(run: Run, kappa: float) -> np.ndarray:
    """The transferred kappa with the levels R_0, R_inf least-squares fitted on the target: [n]
    (tests the timescale alone, not the carried-over levels)."""
    phi = predict_curve(run, kappa, 1.0, 0.0)  # R = R_inf (1 - phi) + R_0 phi
    X = np.stack([1.0 - phi, phi], axis=1)
    coef, *_ = np.linalg.lstsq(X, run.reward, rcond=None)
    return X @ coef


def g_invariance(runs: dict[str, Run], fits: dict[str, dict], names: list[str]) -> dict:
    """(b) joint fit (shared R_inf, k) vs separate, LR test, residual variance vs N = B G."""
    rs = [runs[n] for n in names]
    joint = fit_joint(
        [(r.step, r.reward) for r in rs],
        model="rom_fixed",
        shared=("R_inf", "k"),
        lr=[r.lr for r in rs],
        beta1=BETA1,
        group_sizes=[r.G for r in rs],
    )
    lr_raw = lr_eff = 0.0
    for r, sep, vals in zip(rs, joint.separate, joint.per_run, strict=True):
        res_j = r.reward - sep.predict(r.step, vals)
        ratio = max(float(res_j @ res_j), 1e-300) / max(sep.sse, 1e-300)
        rho = min(max(sep.residual_autocorr, 0.0), 0.95)
        lr_raw += r.step.size * math.log(ratio)
        lr_eff += r.step.size * (1.0 - rho) / (1.0 + rho) * math.log(ratio)
    df = 2 * (len(rs) - 1)
    var_rows = []
    for r in rs:
        res = fits[r.name]["residual"]
        meas = (
            float(np.nanmean(r.reward_std**2)) / (r.B * r.G) if r.reward_std is not None else None
        )
        var_rows.append(
            {
                "run": r.name,
                "G": r.G,
                "B": r.B,
                "N": r.B * r.G,
                "residual_var": float(np.var(res)),
                "sampling_var": meas,
            }
        )
    out = {
        "runs": names,
        "shared": joint.shared,
        "delta_aic": joint.delta_aic,
        "lr_stat": lr_raw,
        "lr_df": df,
        "lr_p": float(chi2.sf(max(lr_raw, 0.0), df)),
        "lr_stat_autocorr": lr_eff,
        "lr_p_autocorr": float(chi2.sf(max(lr_eff, 0.0), df)),
        "variance": var_rows,
    }
    n = np.array([v["N"] for v in var_rows], dtype=float)
    if np.unique(n).size >= 2:
        fit = linregress(np.log(n), np.log([v["residual_var"] for v in var_rows]))
        out["variance_slope"], out["variance_slope_se"] = float(fit.slope), float(fit.stderr)
    return out


def scaled_joint(runs: list[Run], fits: dict[str, dict], gamma: float) -> dict:
    """Shared R_inf and kappa_0 with kappa_i = kappa_0 (N_i / N_1)^gamma (N = B G rollouts per
    step; gamma = 0: the G-invariant model, 1/2: Adam with u ~ N^-1/2), R_0 per run; each run
    weighted by its own fit's residual variance. Returns the per-run SSE and the LR statistic
    against the separate constrained fits (2 (runs - 1) df)."""
    n_ref = runs[0].B * runs[0].G
    sig = [max(float(np.std(fits[r.name]["residual"])), 1e-9) for r in runs]

    def curves(x: np.ndarray) -> list[np.ndarray]:
        k0 = math.exp(x[1])
        return [
            predict_curve(r, k0 * (r.B * r.G / n_ref) ** gamma, float(x[2 + i]), float(x[0]))
            for i, r in enumerate(runs)
        ]

    def resid(x: np.ndarray) -> np.ndarray:
        return np.concatenate(
            [(c - r.reward) / s for c, r, s in zip(curves(x), runs, sig, strict=True)]
        )

    k_med = float(np.median([fits[r.name]["kappa"] for r in runs]))
    r_inf = float(np.median([fits[r.name]["R_inf"] for r in runs]))
    x0 = np.r_[r_inf, math.log(k_med), [fits[r.name]["R_0"] for r in runs]]
    best = None
    for logk in (math.log(k_med), math.log(k_med) + 1.5, math.log(k_med) - 1.5):
        x0[1] = logk
        res = least_squares(resid, x0, x_scale="jac")
        best = res if best is None or res.cost < best.cost else best
    sse = [float(((c - r.reward) ** 2).sum()) for c, r in zip(curves(best.x), runs, strict=True)]
    stat = sum(
        r.step.size * math.log(max(e, 1e-300) / max(float(fits[r.name]["residual"] @
        fits[r.name]["residual"]), 1e-300))
        for r, e in zip(runs, sse, strict=True)
    )  # fmt: skip
    return {"gamma": gamma, "kappa_0": math.exp(best.x[1]), "R_inf": float(best.x[0]),
            "sse": sse, "lr_stat": stat}  # fmt: skip


def adam_g_scaling(runs: dict[str, Run], fits: dict[str, dict], names: list[str]) -> dict:
    """(b') k's dependence on N = B G: gamma = 0 (G-invariant) vs 1/2 (Adam), and the profile
    over gamma (best value and its chi2_1 90% interval on the LR scale)."""
    rs = [runs[n] for n in names]
    df = 2 * (len(rs) - 1)
    grid = np.round(np.linspace(-1.0, 2.0, 31), 3)
    prof = [scaled_joint(rs, fits, float(g)) for g in grid]
    stats = np.array([p["lr_stat"] for p in prof])
    i = int(np.argmin(stats))
    inside = grid[stats - stats[i] <= chi2.ppf(0.9, 1)]
    at = {g: scaled_joint(rs, fits, g) for g in (0.0, 0.5)}
    return {
        "runs": names,
        "df": df,
        "lr_stat_gamma_0": at[0.0]["lr_stat"],
        "p_gamma_0": float(chi2.sf(max(at[0.0]["lr_stat"], 0.0), df)),
        "lr_stat_gamma_half": at[0.5]["lr_stat"],
        "p_gamma_half": float(chi2.sf(max(at[0.5]["lr_stat"], 0.0), df)),
        "gamma_best": float(grid[i]),
        "gamma_90": [float(inside.min()), float(inside.max())],
        "gamma_interval_hits_grid_end": bool(inside.min() == grid[0] or inside.max() == grid[-1]),
    }


def inner_updates(runs: dict[str, Run], fits: dict[str, dict], src: str, tgt: str) -> dict:
    """(c) predict the K > 1 run from the K = 1 run; the reductions' statements about K."""
    f, run = fits[src], runs[tgt]
    pred = predict_curve(run, f["kappa"], f["R_0"], f["R_inf"])
    one = replace(run, K=1)  # the same run read with K ignored (one optimizer step per batch)
    naive = predict_curve(one, f["kappa"], f["R_0"], f["R_inf"])
    settings = OptimizerSettings(
        lr=float(run.lr.max()), kappa=f["kappa"], beta1=BETA1, refresh_interval=run.K, closure=False
    )
    own = reduce_optimizer(run.optimizer, settings)
    heavy = reduce_optimizer("sgd_momentum", settings)
    y = run.reward
    sm = np.convolve(y, np.ones(5) / 5, mode="valid")
    peak = int(np.argmax(sm))
    return {
        "source": src,
        "target": tgt,
        "K": run.K,
        "r2_prediction": r2(y, pred),
        "r2_prediction_K_ignored": r2(y, naive),
        "r2_timescale_only": r2(y, timescale_only(run, f["kappa"])),
        "r2_timescale_only_K_ignored": r2(y, timescale_only(one, f["kappa"])),
        "r2_own_fit": fits[tgt]["r2_constrained"],
        "predicted_final": float(pred[-1]),
        "observed_final_mean5": float(y[-5:].mean()),
        "observed_peak_mean5": float(sm[peak]),
        "observed_peak_step": float(run.step[peak + 2]),
        "reduction": own.optimizer,
        "threshold_statement": own.K_statement,
        "K_star": own.K_star,
        "heavy_ball_K_star": heavy.K_star,
        "effective_a": own.a,
    }


def norm_pairs(fits: dict[str, dict], pairs: list) -> list[dict]:
    """(d) fitted kappa ratio with its interval (from the two 90% intervals, conservative)."""
    rows = []
    for a, b, expected in pairs:
        fa, fb = fits[a], fits[b]
        lo = fa["kappa_lo"] / fb["kappa_hi"] if fb["kappa_hi"] > 0 else 0.0
        hi = fa["kappa_hi"] / fb["kappa_lo"] if fb["kappa_lo"] > 0 else math.inf
        rows.append(
            {
                "a": a,
                "b": b,
                "kappa_ratio": fa["kappa"] / fb["kappa"],
                "ratio_lo": lo,
                "ratio_hi": hi,
                "predicted": expected,
                "consistent": None if expected is None else bool(lo <= expected <= hi),
            }
        )
    return rows


def analyse(curves: Path = CURVES) -> dict:
    """Every test above on the corpus at `curves`."""
    names = sorted(
        {n for v in (*LR_SWEEPS.values(), *G_SWEEPS.values()) for n in v}
        | {n for p in INNER for n in p}
        | {n for a, b, _ in NORM_PAIRS for n in (a, b)}
    )
    runs = load_corpus(names, curves)
    fits = {n: fit_run_model(runs[n]) for n in names}
    transfers = {k: transfer(runs, fits, v) for k, v in LR_SWEEPS.items()}
    order = {k: lr_order(runs, fits, v) for k, v in LR_SWEEPS.items()}
    held = [row["r2_prediction"] for rows in transfers.values() for row in rows]
    tau = [row["r2_timescale_only"] for rows in transfers.values() for row in rows]
    return {
        "fits": {n: {k: v for k, v in f.items() if k != "residual"} for n, f in fits.items()},
        "transfer": transfers,
        "lr_order": order,
        "transfer_median_r2": float(np.median(held)),
        "transfer_median_r2_timescale_only": float(np.median(tau)),
        "g_invariance": {k: g_invariance(runs, fits, v) for k, v in G_SWEEPS.items()},
        "g_scaling": {k: adam_g_scaling(runs, fits, v) for k, v in G_SWEEPS.items()},
        "inner_updates": [inner_updates(runs, fits, s, t) for s, t in INNER],
        "std_norm": norm_pairs(fits, NORM_PAIRS),
    }


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n")[0]).parse_args()
    t0 = time.time()
    res = analyse()
    show(res)
    print(f"{time.time() - t0:.0f} s")
    doc = {
        "command": "python bench/corpus_dynamics.py " + " ".join(sys.argv[1:]),
        "date": dt.date.today().isoformat(),
        "machine": "2-core CPU shared with other jobs, no GPU",
        **res,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(doc, indent=1, default=float))


if __name__ == "__main__":
    main()
