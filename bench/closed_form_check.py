"""How often the closed-form check of `pgrpo fit` rejects the closed form when it holds, and on
real runs.

    python bench/closed_form_check.py [DIR ...] [--curves 100] [--seed 0] [--out PATH]

With lr and beta1 known, `fit_curve` fits `rom_fixed` (m, c from the optimizer) beside the free
rom and tests the constraint (`constrained.compare_constrained`): a likelihood-ratio test with the
sample shrunk by n (1 - rho) / (1 + rho), "rejected" at p < CLOSED_FORM_P. Which rho: the free
fit's residual lag-1 point estimate (`point`, before 2026-12-05 and still `fit_curve`'s default)
or the diagnosis' one-sided 90% upper bound on it (`bound`, `nullmodel.lag1_autocorr`: what
`pgrpo fit` and the report pass since 2026-12-05). Two tables:

- **Curves drawn from the closed form** (the false-rejection rate): R_0 0.2, R_inf 0.7, the adam
  reduction at beta1 0.9 and a constant lr (K 1), k such that the slow timescale is a fifth to a
  half of the run, Gaussian AR(1) noise of sd 0.1 at rho in {0, 0.5, 0.8}, n in {30, 100, 300}
  logged points. Each rule's share of "rejected" should be at most its level. Beside them, the
  same curves with a mass MASS_FACTOR times the optimizer's (the power to see a run that does not
  follow the optimizer's m).
- **Real runs** (each DIR a corpus folder with index.json; default ../shared/data/curves): per
  run with lr and beta1 known, the test's rho and p under both rules and the verdict.

Writes bench/results/closed_form_check.json (the command and date with it).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from pgrpo.diagnose.nullmodel import lag1_autocorr
from pgrpo.dynamics import fit_curve, trajectory
from pgrpo.dynamics.constrained import CLOSED_FORM_P, likelihood_ratio
from pgrpo.dynamics.logfit import fit_inputs, log_rom, thin_log
from pgrpo.dynamics.optimizers import fit_reduction
from pgrpo.logs import read_log

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_results  # noqa: E402
from corpus_entry import synthetic_and_corpus_args, with_metadata  # noqa: E402
from null_rates import _ar1_unit as ar1  # noqa: E402  (the null table's AR(1) noise)

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "closed_form_check.json"
CURVES = ROOT.parent / "shared" / "data" / "curves"
LENGTHS = (30, 100, 300)
RHOS = (0.0, 0.5, 0.8)
NOISE_SD = 0.1
BETA1, LR = 0.9, 1e-5
MASS_FACTOR = 10.0
RULES = ("point", "bound", "bound_0.01")
"""`point`: p < CLOSED_FORM_P with the residuals' point estimate of rho; `bound`: the same level
with the rho bound (what `pgrpo fit` does); `bound_0.01`: the bound at p < 0.01 (reported)."""


def closed_form_curve(n: int, rng: np.random.Generator, mass_factor: float = 1.0) -> np.ndarray:
    """The closed form's mean reward [n]: R_0 0.2 -> R_inf 0.7 with m, c from the adam
    reduction at BETA1 (the mass times mass_factor) and k = 1 / tau, tau a fifth to a half of
    the run."""
    t = np.arange(float(n))
    k = 1.0 / (rng.uniform(0.2, 0.5) * n)
    red = fit_reduction("adam", k, BETA1, 1)
    return trajectory(t, 0.2, 0.7, mass_factor * red.mass, red.damping, k)


def decisions(step: np.ndarray, reward: np.ndarray) -> dict[str, bool] | None:
    """Each of RULES' "rejected" on one curve, or None where nothing was compared."""
    res = fit_curve(step, reward, lr=np.full(step.size, LR), beta1=BETA1, noise_rho=lag1_autocorr)
    if res.constrained is None or "lr_test_p" not in res.metrics:
        return None
    point = likelihood_ratio(res, res.constrained)[1]  # rho: the residuals' point estimate
    bound = res.metrics["lr_test_p"]
    assert res.metrics["lr_test_rho_source"] == "bound"
    return {"point": point < CLOSED_FORM_P, "bound": bound < CLOSED_FORM_P,
            "bound_0.01": bound < 0.01}  # fmt: skip


def synthetic_rates(curves: int, seed: int) -> list[dict]:
    """Per (shape, n, rho): how many of `curves` curves each rule calls "rejected"."""
    rng = np.random.default_rng(seed)
    rows = []
    for shape, factor in (("closed_form", 1.0), ("heavier", MASS_FACTOR)):
        for n in LENGTHS:
            for rho in RHOS:
                said, compared = dict.fromkeys(RULES, 0), 0
                for _ in range(curves):
                    y = closed_form_curve(n, rng, factor) + NOISE_SD * ar1(n, rho, rng)
                    d = decisions(np.arange(float(n)), y)
                    if d is None:
                        continue
                    compared += 1
                    for rule in RULES:
                        said[rule] += d[rule]
                rows.append({"shape": shape, "n": n, "rho": rho, "curves": curves,
                             "compared": compared, "rejected": said})  # fmt: skip
                counts = ", ".join(f"{said[r]}/{compared} ({r})" for r in RULES)
                print(f"  {shape:11s} n {n:4d} rho {rho:.1f}: rejected on {counts}", flush=True)
    return rows


def real_rows(folders: list[Path]) -> list[dict]:
    """Per run with lr and beta1 known: the closed-form test under both rules (`logfit.log_rom`,
    the fit `pgrpo fit` reports, with and without the rho bound)."""
    rows = []
    for folder in folders:
        for meta in json.loads((folder / "index.json").read_text())["runs"]:
            log = thin_log(with_metadata(read_log(folder / meta["csv"]), meta))
            kw = fit_inputs(log)
            both = {"point": log_rom(log, kw, None).metrics,
                    "bound": log_rom(log, kw, lag1_autocorr).metrics}  # fmt: skip
            if "lr_test_p" not in both["bound"]:
                continue  # no lr or beta1: nothing compared
            rows.append({"folder": str(folder), "run": meta["name"], "repo": meta.get("repo"),
                         "n": len(log), "preferred": both["bound"]["preferred"],
                         "delta_aicc": both["bound"]["delta_aicc"],
                         **{f"{k}_{f}": both[k][m] for k in both
                            for f, m in (("rho", "lr_test_rho"), ("p", "lr_test_p"),
                                         ("closed_form", "closed_form"))}})  # fmt: skip
    return rows


def main() -> None:
    args = synthetic_and_corpus_args(__doc__, OUT, CURVES)
    t0 = time.time()
    synth = synthetic_rates(args.curves, args.seed) if args.curves > 0 else []
    worst = {rule: max((r["rejected"][rule] / r["compared"] for r in synth
                        if r["shape"] == "closed_form" and r["compared"]), default=None)
             for rule in RULES}  # fmt: skip
    if synth:
        print("worst false-rejection rate: "
              + ", ".join(f"{r} {worst[r]:.1%}" for r in RULES))  # fmt: skip
        heavy = [r for r in synth if r["shape"] == "heavier"]
        print("power on heavier runs (mean over cells): "
              + ", ".join(f"{r} {np.mean([h['rejected'][r] / h['compared'] for h in heavy]):.1%}"
                          for r in RULES))  # fmt: skip
    rows = real_rows([f.resolve() for f in args.folders])
    print("\nreal runs: | run | n | preferred | dAICc | rho point | p point | rho bound | p bound |"
          " closed form (point -> bound) |")  # fmt: skip
    for r in rows:
        print(f"| {r['run'][:44]} | {r['n']} | {r['preferred']} | {r['delta_aicc']:.1f} | "
              f"{r['point_rho']:.2f} | {r['point_p']:.3g} | {r['bound_rho']:.2f} | "
              f"{r['bound_p']:.3g} | {r['point_closed_form']} -> "
              f"{r['bound_closed_form']} |")  # fmt: skip
    consistent = {k: sum(r[f"{k}_closed_form"] == "consistent" for r in rows)
                  for k in ("point", "bound")}  # fmt: skip
    print(f"\nclosed form consistent on {consistent['point']} of {len(rows)} runs with the point "
          f"estimate, {consistent['bound']} with the bound")  # fmt: skip
    write_results(args.out, "closed_form_check.py", None, synthetic=synth,
                  worst_false_rejection=worst if synth else None,
                  runs=rows, consistent=consistent, compared=len(rows),
                  seconds=round(time.time() - t0, 1))  # fmt: skip


if __name__ == "__main__":
    main()
