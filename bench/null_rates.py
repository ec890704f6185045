"""False-alarm rates of `pgrpo diagnose` on null curves: reward logs with no trend and no
failure, of kinds the reward-curve tests' null models must cover.

    python bench/null_rates.py [--curves 200] [--only ar1,t3,sparse,sparse_std]

Cells (each `--curves` seeded curves; "not flat" = a progress verdict other than `flat`,
"instability" = `dynamical_instability` detected, "degeneracy" = `advantage_degeneracy`
detected (a true finding on sparse 0/1 rewards with N known: most groups get no spread), "other
modes" = any failure mode but those two):
- ar1: Gaussian AR(1) noise, rho in {0, 0.3, 0.6, 0.9, 0.95}, n in {20, 50, 100, 200, 500}, with
  no group size in the log (the AR(1) null with the curve's own rho, `nullmodel.lag1_autocorr`);
- t3: i.i.d. Student-t noise with 3 degrees of freedom (heavy tails), n in {50, 200, 1000}, no
  group size;
- sparse: batch means of N = 8 0/1 rewards (1 prompt x G = 8) at a rare success p in {0.005,
  0.02, 0.05}, n in {50, 200, 1000}, with the group size logged ("N known": the binomial null)
  and without it ("N unknown"); sparse64: the same at N = 64 (8 prompts x 8) and p in {0.003,
  0.01}, where the binomial null's p was floored at 0.01; sparse_std: N = 8 with TRL's
  reward_std and frac_reward_zero_std columns, n in {15, 20, 50}, p in {0.02, 0.05, 0.1} (short
  runs stuck at 0 by chance: the `collapsed` verdict's stuck-at-the-floor rule); eval: a flat
  100-step run with two evals of 100, 300 or 500 problems at the same true accuracy, given as
  a `pgrpo eval` JSON with n_problems (`reward_hacking` is an "other mode"); eval_paired: the
  same with 100, 200 or 500 problems of 4 samples each, per-problem counts and ids (the paired
  error, `signals.paired_eval_gain`), pass rates 0.95 or 0.05; gaming: the run
  checks `reward_function_divergence` and `length_vs_reward` on independent AR(1) columns
  (rho 0, 0.5, 0.9; n 30, 100, 300): "other modes" is the share where either warns.
The progress verdict is tested at 5%, each failure mode at 0.5% per test (docs/diagnostics.md).
Prints one table and writes bench/results/null_rates.json with the command and date
(`--only` a subset: bench/results/null_rates_<cells>.json, the full results left alone).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.signal import lfilter

from pgrpo.diagnose import diagnose
from pgrpo.diagnose.checks import CheckOptions
from pgrpo.diagnose.gaming import length_vs_reward, reward_function_divergence
from pgrpo.logs.base import RewardLog

OUT = Path(__file__).resolve().parents[1] / "bench" / "results" / "null_rates.json"


def _log(y: np.ndarray, cols: dict, group_size: int | None) -> RewardLog:
    """A log of y; group_size: N rollouts per step, stated as G = N x 1 prompt (None: not
    stated)."""
    hp = {} if group_size is None else {"group_size": float(group_size), "batch_prompts": 1.0}
    steps = np.arange(1, y.size + 1, dtype=float)
    return RewardLog(steps, y, cols, hp, (), "null", "null", "reward")


def _curve(kind: str, n: int, arg: float, rng: np.random.Generator) -> tuple[np.ndarray, dict]:
    """(reward [n], other columns): sparse_std adds TRL's reward_std (the group's sample sd)
    and frac_reward_zero_std (1 where the group's 8 rewards are all equal)."""
    if kind == "ar1":
        return 0.5 + 0.1 * lfilter([1.0], [1.0, -arg], rng.standard_normal(n + 300))[300:], {}
    if kind == "t3":
        return 0.5 + 0.1 * rng.standard_t(3, size=n), {}
    if kind == "sparse64":
        return rng.binomial(64, arg, size=n) / 64.0, {}
    draws = (rng.random((n, 8)) < arg).astype(float)
    if kind == "sparse":
        return draws.mean(axis=1), {}
    std = draws.std(axis=1, ddof=1)
    return draws.mean(axis=1), {"reward_std": std, "frac_reward_zero_std": (std == 0) * 1.0}


CELLS = {
    "ar1": [(rho, n, None) for rho in (0.0, 0.3, 0.6, 0.9, 0.95) for n in (20, 50, 100, 200, 500)],
    "t3": [(3.0, n, None) for n in (50, 200, 1000)],
    "sparse": [(p, n, g) for p in (0.005, 0.02, 0.05) for n in (50, 200, 1000) for g in (8, None)],
    "sparse64": [(p, n, g) for p in (0.003, 0.01) for n in (200, 1000) for g in (64, None)],
    "eval": [(problems, 100, None) for problems in (100, 300, 500)],
    "eval_paired": [(problems, 100, None) for problems in (100, 200, 500)],
    "gaming": [(rho, n, None) for rho in (0.0, 0.5, 0.9) for n in (30, 100, 300)],
    "sparse_std": [(p, n, g) for p in (0.02, 0.05, 0.1) for n in (15, 20, 50) for g in (8, None)],
}


def _eval_file(rng: np.random.Generator, problems: int, n: int, folder: Path) -> Path:
    """A `pgrpo eval` JSON of two evals (steps n/10 and 9n/10) of `problems` problems at the
    same true accuracy 0.5: any change between them is noise."""
    acc = rng.binomial(problems, 0.5, 2) / problems
    results = [
        {"name": f"e{i}", "step": float(step), "accuracy": float(a), "n_problems": problems}
        for i, (step, a) in enumerate(zip((n // 10, 9 * n // 10), acc, strict=True))
    ]
    path = folder / "eval.json"
    path.write_text(json.dumps({"kind": "pgrpo.eval", "results": results}))
    return path


def _paired_eval_file(rng: np.random.Generator, problems: int, n: int, folder: Path) -> Path:
    """A `pgrpo eval` JSON of two evals (steps n/10 and 9n/10) of the same `problems` problems,
    4 samples each, with per-problem counts and ids; problems mostly always or never solved
    (pass rate 0.95 or 0.05) and unchanged between the evals: the paired error's null."""
    p = np.where(rng.random(problems) < 0.5, 0.95, 0.05)
    results = []
    for i, step in enumerate((n // 10, 9 * n // 10)):
        c = rng.binomial(4, p)
        probs = [{"id": f"q{j}", "n": 4, "c": int(k)} for j, k in enumerate(c)]
        results.append({"name": f"e{i}", "step": float(step), "accuracy": float(np.mean(c / 4)),
                        "per_problem": probs})  # fmt: skip
    path = folder / "eval.json"
    path.write_text(json.dumps({"kind": "pgrpo.eval", "results": results}))
    return path


def _gaming_warnings(rng: np.random.Generator, n: int, rho: float) -> list[str]:
    """The two gaming run checks on a log whose reward, two reward functions and completion
    length are independent AR(1) null columns (nothing games anything): the checks that warn."""
    a, b, c = (_curve("ar1", n, rho, rng)[0] for _ in range(3))
    cols = {"rewards/format/mean": b, "rewards/accuracy/mean": c}
    cols["completion_length"] = 200 + 100 * b
    log = _log(a, cols, None)
    checks = (reward_function_divergence, length_vs_reward)
    return [f.__name__ for f in checks if f(log, CheckOptions()).status == "warn"]


def rates(kind: str, arg: float, n: int, group_size: int | None, curves: int) -> dict:
    rng = np.random.default_rng([11, len(kind), int(round(arg * 1000)), n, group_size or 0])
    with tempfile.TemporaryDirectory(prefix="null_rates_") as tmp:
        return _rates(kind, arg, n, group_size, curves, rng, Path(tmp))


def _rates(
    kind: str,
    arg: float,
    n: int,
    group_size: int | None,
    curves: int,
    rng: np.random.Generator,
    folder: Path,
) -> dict:
    not_flat = instability = degeneracy = other = 0
    labels: dict[str, int] = {}
    modes: dict[str, int] = {}
    for _ in range(curves):
        if kind == "gaming":
            fired = _gaming_warnings(rng, n, arg)
            for m in fired:
                modes[m] = modes.get(m, 0) + 1
            other += bool(fired)
            continue
        if kind in ("eval", "eval_paired"):
            y = 0.5 + 0.05 * rng.standard_normal(n)
            make = _eval_file if kind == "eval" else _paired_eval_file
            d = diagnose(_log(y, {}, None), eval_log=make(rng, int(arg), n, folder))
        else:
            d = diagnose(_log(*_curve(kind, n, arg, rng), group_size))
        label = d.progress.label if d.progress is not None else "none"
        labels[label] = labels.get(label, 0) + 1
        fired = [m.name for m in d.modes if m.detected and m.name != "healthy"]
        for m in fired:
            modes[m] = modes.get(m, 0) + 1
        not_flat += label != "flat"
        instability += "dynamical_instability" in fired
        degeneracy += "advantage_degeneracy" in fired
        other += bool(set(fired) - {"dynamical_instability", "advantage_degeneracy"})
    return {
        "kind": kind,
        "arg": arg,
        "n": n,
        "n_known": group_size is not None,
        "curves": curves,
        "not_flat": not_flat / curves,
        "instability": instability / curves,
        "degeneracy": degeneracy / curves,
        "other_modes": other / curves,
        "labels": labels,
        "modes": modes,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--curves", type=int, default=200)
    ap.add_argument("--only", default=",".join(CELLS))
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    rows = []
    t0 = time.time()
    print("| kind | param | n | N known | not flat | instability | degeneracy | other modes |")
    print("|---|---|---|---|---|---|---|---|")
    for kind in args.only.split(","):
        for arg, n, g in CELLS[kind]:
            r = rates(kind, arg, n, g, args.curves)
            rows.append(r)
            name = {"ar1": "rho", "gaming": "rho", "t3": "df", "eval": "problems",
                    "eval_paired": "problems"}.get(kind, "p")  # fmt: skip
            print(
                f"| {kind} | {name} {arg:g} | {n} | {'yes' if g else 'no'} | {r['not_flat']:.3f} "
                f"| {r['instability']:.3f} | {r['degeneracy']:.3f} | {r['other_modes']:.3f} |",
                flush=True,
            )
    # a subset of the cells goes beside the full results, not over them
    out = (
        OUT
        if set(args.only.split(",")) == set(CELLS)
        else OUT.with_name(f"null_rates_{args.only.replace(',', '_')}.json")
    )
    out.write_text(
        json.dumps(
            {
                "command": "python " + " ".join(sys.argv),
                "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                "seconds": round(time.time() - t0, 1),
                "rows": rows,
            },
            indent=1,
        )
        + "\n"
    )
    print(f"wrote {out} ({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
