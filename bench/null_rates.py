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
  (rho 0, 0.5, 0.9; n 30, 100, 300): "other modes" is the share where either warns;
  columns: a healthy-but-boring run (`_columns_log`): the reward flat AR(1) noise (rho 0, 0.5,
  0.9; n 50, 200, 1000) and every other diagnostic column a TRL / verl log carries stationary
  noise around a constant level, each its own AR(1) at the same rho; per row, "modes" counts
  each failure mode detected, "branches" each alarm alone (the rule on that column and the
  reward only, `_BRANCHES`), "checks" each run check's warnings (`run_checks`).
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
from pgrpo.diagnose.checks import CheckOptions, check_names, run_checks
from pgrpo.diagnose.concentration import policy_concentration
from pgrpo.diagnose.gaming import length_vs_reward, reward_function_divergence
from pgrpo.diagnose.instability import dynamical_instability
from pgrpo.diagnose.rules import reward_hacking
from pgrpo.diagnose.signals import signals_from_log
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
    "columns": [(rho, n, None) for rho in (0.0, 0.5, 0.9) for n in (50, 200, 1000)],
}


def _ar1_unit(n: int, rho: float, rng: np.random.Generator) -> np.ndarray:
    """Stationary Gaussian AR(1) noise at lag-1 autocorrelation rho, marginal sd 1: [n]."""
    return lfilter([1.0], [1.0, -rho], rng.standard_normal(n + 300))[300:] * np.sqrt(1 - rho**2)


def _columns_log(n: int, rho: float, rng: np.random.Generator) -> RewardLog:
    """A healthy-but-boring TRL-style log: nothing trends, every column is its own AR(1) at rho.
    Levels drawn per run from the ranges real runs show (uniform), noise as a coefficient of
    variation (multiplicative, log-normal, for the positive columns):
    rewards/format_reward/mean 0.3 (sd 0.03) and rewards/accuracy_reward/mean 0.2 (sd 0.095),
    the reward their sum (TRL's: 0.5, sd 0.1, AR(1) at rho too); entropy U(0.5, 1.5) nats, CV
    0.1; kl U(0.01, 0.05), CV 0.3; completion_length U(150, 250) tokens, CV 0.1; clip ratios
    (region U(0.01, 0.05), CV 0.3, low / high half of it each); grad_norm U(0.3, 1), CV 0.3;
    loss 0 +- 0.02; frac_reward_zero_std logistic around U(0.1, 0.3) (sd 0.4 on the logit
    scale) and reward_std consistent with it, (1 - frac) x the mean sd of the groups with
    spread (0.35, CV 0.1: TRL's reward_std averages the groups' sds, zero ones included);
    learning_rate constant 1e-6."""
    fmt = 0.3 + 0.03 * _ar1_unit(n, rho, rng)
    acc = 0.2 + 0.095 * _ar1_unit(n, rho, rng)

    def pos(lo: float, hi: float, cv: float) -> np.ndarray:
        return rng.uniform(lo, hi) * np.exp(cv * _ar1_unit(n, rho, rng))

    clip = pos(0.01, 0.05, 0.3)
    level = rng.uniform(0.1, 0.3)
    frac = 1 / (1 + np.exp(-(np.log(level / (1 - level)) + 0.4 * _ar1_unit(n, rho, rng))))
    cols = {
        "rewards/format_reward/mean": fmt,
        "rewards/accuracy_reward/mean": acc,
        "entropy": pos(0.5, 1.5, 0.1),
        "kl": pos(0.01, 0.05, 0.3),
        "completion_length": pos(150, 250, 0.1),
        "clip_ratio/region_mean": clip,
        "clip_ratio/low_mean": clip / 2,
        "clip_ratio/high_mean": clip / 2,
        "grad_norm": pos(0.3, 1.0, 0.3),
        "loss": 0.02 * _ar1_unit(n, rho, rng),
        "frac_reward_zero_std": frac,
        "reward_std": (1 - frac) * pos(0.35, 0.35, 0.1),
        "learning_rate": np.full(n, 1e-6),
    }
    return _log(fmt + acc, cols, None)


# each alarm alone: (its rule, the columns it reads, whether the reward goes with them)
_BRANCHES = {
    "reward_hacking/length": (reward_hacking, ("completion_length",), True),
    "reward_hacking/format_share": (
        reward_hacking,
        ("rewards/format_reward/mean", "rewards/accuracy_reward/mean"),
        True,
    ),
    "policy_concentration/entropy": (policy_concentration, ("entropy",), False),
    "policy_concentration/kl": (policy_concentration, ("kl",), False),  # no entropy: cap 0.65
    "policy_concentration/clip": (policy_concentration, ("clip_ratio/region_mean",), False),
    "dynamical_instability/grad_norm": (dynamical_instability, ("grad_norm",), False),
}


def _columns_alarms(log: RewardLog) -> tuple[list[str], list[str]]:
    """(the alarms of `_BRANCHES` that fire, the run checks that warn)."""
    fired = []
    for name, (rule, cols, with_reward) in _BRANCHES.items():
        m = {"step": log.step, **{c: log.columns[c] for c in cols}}
        if with_reward:
            m["reward"] = log.reward
        fired += [name] * rule(signals_from_log(m)).detected
    warned = [c.name for c in run_checks(log, CheckOptions()) if c.status == "warn"]
    return fired, warned


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
    branches: dict[str, int] = dict.fromkeys(_BRANCHES, 0) if kind == "columns" else {}
    checks: dict[str, int] = dict.fromkeys(check_names(), 0) if kind == "columns" else {}
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
        elif kind == "columns":
            log = _columns_log(n, arg, rng)
            d = diagnose(log)
            fired_b, warned = _columns_alarms(log)
            for m in fired_b:
                branches[m] += 1
            for c in warned:
                checks[c] += 1
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
    row = {
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
    if kind == "columns":  # counts of the `curves`
        row.update(branches=branches, checks=checks)
    return row


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
            name = {"ar1": "rho", "gaming": "rho", "columns": "rho", "t3": "df", "eval": "problems",
                    "eval_paired": "problems"}.get(kind, "p")  # fmt: skip
            print(
                f"| {kind} | {name} {arg:g} | {n} | {'yes' if g else 'no'} | {r['not_flat']:.3f} "
                f"| {r['instability']:.3f} | {r['degeneracy']:.3f} | {r['other_modes']:.3f} |",
                flush=True,
            )
            if kind == "columns":
                fired = {**r["branches"], **r["checks"]}
                print("|  | " + ", ".join(f"{k} {v}" for k, v in fired.items() if v), flush=True)
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
