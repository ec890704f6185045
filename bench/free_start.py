"""How often `fit_log` describes a run with a free start (`rom_v0`), on real runs and on curves
that start from rest.

    python bench/free_start.py [DIR ...] [--curves 100] [--out PATH]

`fit_log` fits the rom (from rest: x'(0) = 0) and, beside it, `rom_v0` (x'(0) = u x(0)), and
`constrained.compare_start` prefers the free start only when its AICc is lower than the reported
rom's by more than FREE_START_AICC and the likelihood-ratio test of the constant-lr rom from
rest (nested in rom_v0), with the sample size shrunk by the diagnosis' upper bound on the
residuals' lag-1 rho, rejects the start from rest at FREE_START_P. Two tables:

- **Curves that start from rest** (the false-selection rate): the closed form from rest, or pure
  noise, at n in {30, 100, 300} logged points with Gaussian AR(1) noise at rho in {0, 0.5, 0.8}.
  A from-rest curve has R_0 0.2, R_inf 0.7, m drawn log-uniform in [0.5, 20] and k such that
  the slow timescale is a fifth to a half of the run; the noise sd is 0.1 (the rise is 5 sd).
  The share of curves read as a free start is the rate at which `pgrpo fit` would tell a user
  that the first steps moved otherwise than a start from rest allows when they did not; beside
  the rule, two weaker ones (RULES) that the rule replaced.
- **Real runs** (each DIR a corpus folder with index.json; default ../shared/data/curves): per
  run, the rom's and rom_v0's R^2, delta AICc, the test's p and the description chosen; the
  research-scale learning runs (>= RESEARCH_ROLLOUTS rollouts a step) with the described fit's
  R^2 beside the noise ceiling, which is issue #13's R^2 bar.

Writes bench/results/free_start.json (the command and date with it).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from pgrpo.diagnose.nullmodel import lag1_autocorr
from pgrpo.dynamics.constrained import FREE_START_AICC, likelihood_ratio
from pgrpo.dynamics.fitquality import noise_ceiling
from pgrpo.dynamics.logfit import fit_log
from pgrpo.dynamics.model import _unit_response
from pgrpo.logs import read_log
from pgrpo.logs.base import RewardLog

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_results  # noqa: E402
from corpus_entry import (  # noqa: E402
    RESEARCH_ROLLOUTS,
    n_rollouts,
    references,
    synthetic_and_corpus_args,
    with_metadata,
)
from null_rates import _ar1_unit as ar1  # noqa: E402  (the null table's AR(1) noise)

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "free_start.json"
CURVES = ROOT.parent / "shared" / "data" / "curves"
LENGTHS = (30, 100, 300)
RHOS = (0.0, 0.5, 0.8)
NOISE_SD = 0.1


def from_rest(n: int, rng: np.random.Generator) -> np.ndarray:
    """The closed form from rest, R_inf - (R_inf - R_0) x(t), x(0) = 1, x'(0) = 0, c = 1: [n],
    with m log-uniform in [0.5, 20] and k = 1 / tau, tau a fifth to a half of the run."""
    t = np.arange(n, dtype=float)
    m = float(np.exp(rng.uniform(np.log(0.5), np.log(20.0))))
    tau = rng.uniform(0.2, 0.5) * n
    x = _unit_response(t, m, 1.0, 1.0 / tau, 1.0, 0.0)
    return 0.7 - 0.5 * x


RULES = ("point_0.05", "bound_0.05", "rule")
"""The free-start rules the null table compares: AICc lower by > FREE_START_AICC and the
likelihood-ratio p < 0.05 with the sample shrunk by the free fit's residual lag-1 point
estimate (`point_0.05`) or by the diagnosis' upper bound on it (`bound_0.05`), and the rule
`fit_log` uses (`rule`: the bound, p < FREE_START_P, u inside its bound)."""


def rule_decisions(lf) -> dict[str, bool]:
    """Each of RULES' decision on one fit of a log without an lr schedule or G (its rom is the
    constant-lr rom from rest, the model nested in rom_v0)."""
    s, free, rom = lf.start, lf.baselines["rom_v0"], lf.rom
    assert rom.model == "rom", rom.model  # the synthetic logs state neither lr nor G
    beats = s.delta_aicc > FREE_START_AICC
    point = likelihood_ratio(free, rom)[1]  # rho: the residuals' point estimate
    return {"point_0.05": bool(beats and point < 0.05),
            "bound_0.05": bool(beats and s.lr_test_p < 0.05), "rule": lf.free_start}  # fmt: skip


def synthetic_rates(curves: int, seed: int) -> list[dict]:
    """Per (shape, n, rho): how many of `curves` curves each of RULES reads as a free start."""
    rng = np.random.default_rng(seed)
    rows = []
    for shape in ("from_rest", "noise"):
        for n in LENGTHS:
            for rho in RHOS:
                free = dict.fromkeys(RULES, 0)
                for _ in range(curves):
                    mean = from_rest(n, rng) if shape == "from_rest" else np.full(n, 0.5)
                    y = mean + NOISE_SD * ar1(n, rho, rng)
                    step = np.arange(1, n + 1, dtype=float)
                    log = RewardLog(step, y, {}, {}, (), "synthetic", "synthetic", "reward")
                    for rule, said in rule_decisions(fit_log(log, noise_rho=lag1_autocorr)).items():
                        free[rule] += said
                rows.append({"shape": shape, "n": n, "rho": rho, "curves": curves,
                             "free": free["rule"], "rate": free["rule"] / curves,
                             "free_by_rule": free})  # fmt: skip
                print(f"  {shape:9s} n {n:4d} rho {rho:.1f}: free start on "
                      + ", ".join(f"{free[r]}/{curves} ({r})" for r in RULES),
                      flush=True)  # fmt: skip
    return rows


def real_rows(folders: list[Path]) -> list[dict]:
    """One row per corpus run: the two fits, the comparison and the described fit's R^2."""
    rows = []
    for folder in folders:
        for meta in json.loads((folder / "index.json").read_text())["runs"]:
            log = with_metadata(read_log(folder / meta["csv"]), meta)
            accepted, _ = references(meta)
            lf = fit_log(log, noise_rho=lag1_autocorr)
            s = None if lf.start is None else lf.start.to_dict()
            rows.append({
                "folder": str(folder), "run": meta["name"], "repo": meta.get("repo"),
                "n": len(log), "n_rollouts": n_rollouts(meta),
                "reference": sorted(accepted) if accepted else None,
                "rom_model": lf.rom.model, "r2_rest": lf.rom.r2,
                "r2_free": None if s is None else s["r2_free"],
                "delta_aicc": None if s is None else s["delta_aicc"],
                "lr_test_p": None if s is None else s["lr_test_p"],
                "preferred": None if s is None else s["preferred"],
                "reason": None if s is None else s["reason"],
                "r2_described": lf.described.r2, "noise_ceiling": noise_ceiling(lf.log.reward),
            })  # fmt: skip
    return rows


def main() -> None:
    args = synthetic_and_corpus_args(__doc__, OUT, CURVES)
    t0 = time.time()
    synth, worst = [], None
    if args.curves > 0:  # --curves 0: the real runs only
        print("curves that start from rest (false free-start rate):")
        synth = synthetic_rates(args.curves, args.seed)
        worst = max(synth, key=lambda r: r["rate"])
        for rule in RULES:
            w = max(synth, key=lambda r, rule=rule: r["free_by_rule"][rule])
            print(f"  worst cell, {rule}: {w['shape']} n {w['n']} rho {w['rho']}: "
                  f"{w['free_by_rule'][rule] / w['curves']:.1%}")  # fmt: skip
    rows = real_rows([f.resolve() for f in args.folders])
    print("\nreal runs: | run | n | rollouts | rom | R^2 rest | R^2 free | dAICc | p | described |"
          " R^2 described | ceiling |")  # fmt: skip
    for r in rows:
        f = "-" if r["r2_free"] is None else f"{r['r2_free']:.3f}"
        d = "-" if r["delta_aicc"] is None else f"{r['delta_aicc']:.1f}"
        p = "-" if r["lr_test_p"] is None else f"{r['lr_test_p']:.3g}"
        print(f"| {r['run'][:44]} | {r['n']} | {r['n_rollouts']} | {r['rom_model']} | "
              f"{r['r2_rest']:.3f} | {f} | {d} | {p} | {r['preferred']} | "
              f"{r['r2_described']:.3f} | {r['noise_ceiling']:.3f} |")  # fmt: skip
    free = sum(r["preferred"] == "free" for r in rows)
    research = [r for r in rows if (r["n_rollouts"] or 0) >= RESEARCH_ROLLOUTS
                and "learning" in (r["reference"] or [])]  # fmt: skip
    print(f"\nfree start on {free} of {len(rows)} runs; research-scale learning runs "
          f"{len(research)}: R^2 from rest "
          + ", ".join(f"{r['r2_rest']:.3f}" for r in research)
          + "; described "
          + ", ".join(f"{r['r2_described']:.3f}" for r in research)
          + "; ceilings "
          + ", ".join(f"{r['noise_ceiling']:.3f}" for r in research))  # fmt: skip
    worst_by_rule = {rule: max(r["free_by_rule"][rule] / r["curves"] for r in synth)
                     for rule in RULES} if synth else None  # fmt: skip
    write_results(args.out, "free_start.py", None, synthetic=synth,
                  worst_synthetic_rate=None if worst is None else worst["rate"],
                  worst_synthetic_rate_by_rule=worst_by_rule, runs=rows,
                  free_runs=free,
                  seconds=round(time.time() - t0, 1))  # fmt: skip


if __name__ == "__main__":
    main()
