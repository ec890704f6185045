"""Pure analysis of the Sign-vs-Dr.GRPO experiment (`bench/reproduce_lm_sign.py`): degeneracy
series, seed summaries, Welch's t, pass@k and search compression per arm, accuracy per level, the
printed table and the docs' markdown tables. No model, no I/O; tested on synthetic data in
tests/test_bench_reproduce_lm.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np


def degeneracy_series(history: Sequence[dict[str, Any]]) -> dict[str, list[float]]:
    """Per step of one run's metrics.jsonl: the observed zero-variance share, its all-fail and
    all-pass parts, the i.i.d. prediction f_G(pbar) at the batch-mean reward, and the Jensen gap
    (observed - predicted; > 0 when prompts differ in difficulty)."""
    obs = [float(h["frac_reward_zero_std"]) for h in history]
    iid = [float(h["degeneracy/iid_prediction"]) for h in history]
    return {
        "step": [int(h["step"]) for h in history],
        "reward": [float(h["reward"]) for h in history],
        "observed": obs,
        "all_fail": [float(h["degeneracy/all_fail"]) for h in history],
        "all_pass": [float(h["degeneracy/all_pass"]) for h in history],
        "iid_prediction": iid,
        "jensen_gap": [o - p for o, p in zip(obs, iid, strict=True)],
    }


def seed_summary(values: Sequence[float]) -> dict[str, Any]:
    """Mean, sd and the t interval over seeds (`pgrpo.core.stats.mean_ci`; None with one seed,
    or where every seed gave the same value: greedy accuracies, which no seed changes, have no
    seed-to-seed interval, and it is undefined rather than [mean, mean])."""
    from pgrpo.core.stats import mean_ci

    x = np.asarray(values, dtype=float)
    out: dict[str, Any] = {"n": int(x.size), "mean": float(x.mean()), "values": x.tolist()}
    out["sd"] = float(x.std(ddof=1)) if x.size >= 2 else None
    ci = mean_ci(x) if x.size >= 2 else None
    out["ci"] = None if ci is None or math.isnan(ci.low) else [ci.low, ci.high]
    return out


def welch(a: Sequence[float], b: Sequence[float]) -> dict[str, Any] | None:
    """Welch's t of mean(a) - mean(b) over seeds (`pgrpo.core.stats.welch_t`, scipy); None with
    fewer than two seeds in either."""
    from pgrpo.core.stats import welch_t

    if len(a) < 2 or len(b) < 2:
        return None
    w = welch_t(list(a), list(b))
    return {
        "diff": w.diff,
        "ci": [w.diff_low, w.diff_high],
        "t": w.t,
        "dof": w.dof,
        "p": w.p_value,
        "hedges_g": w.hedges_g,
    }


def _eval_runs(records: Sequence[dict[str, Any]]) -> list[Any]:
    from pgrpo.evaluate import EvalRun

    return [EvalRun.from_summary(r) for r in records]


def arm_analysis(runs: Sequence[dict[str, Any]], baseline: dict[str, Any]) -> dict[str, Any]:
    """One arm's finished runs (each: greedy and sampled eval summaries, degeneracy series,
    seconds) against the base model's evaluation."""
    from pgrpo.evaluate import aggregate, search_compression

    greedy = _eval_runs([r["eval_greedy"] for r in runs])
    sampled = _eval_runs([r["eval_sampled"] for r in runs])
    base_sampled = _eval_runs([baseline["eval_sampled"]])
    gaps = [float(np.mean(r["degeneracy"]["jensen_gap"])) for r in runs]
    return {
        "seeds": [r["seed"] for r in runs],
        "greedy_accuracy": seed_summary([g.accuracy for g in greedy]),
        "greedy_accuracy_problems": aggregate(greedy),
        "sample_accuracy": seed_summary([s.accuracy for s in sampled]),
        "sampled": aggregate(sampled),
        "search_compression": search_compression(base_sampled, sampled),
        "final_train_reward": seed_summary([r["degeneracy"]["reward"][-1] for r in runs]),
        "mean_train_reward": seed_summary(
            [float(np.mean(r["degeneracy"]["reward"])) for r in runs]
        ),
        "degeneracy_observed": seed_summary(
            [float(np.mean(r["degeneracy"]["observed"])) for r in runs]
        ),
        "degeneracy_iid": seed_summary(
            [float(np.mean(r["degeneracy"]["iid_prediction"])) for r in runs]
        ),
        "jensen_gap": seed_summary(gaps),
        "degeneracy_by_step": _mean_by_step(runs),
        "seconds": seed_summary([r["seconds"]["total"] for r in runs]),
        "train_seconds": seed_summary([r["seconds"]["train"] for r in runs]),
    }


def _mean_by_step(runs: Sequence[dict[str, Any]]) -> dict[str, list[float]]:
    """Each degeneracy column averaged over seeds, step by step (runs of equal length)."""
    length = min(len(r["degeneracy"]["step"]) for r in runs)
    cols = ("reward", "observed", "iid_prediction", "jensen_gap", "all_fail", "all_pass")
    out: dict[str, list[float]] = {"step": runs[0]["degeneracy"]["step"][:length]}
    for col in cols:
        out[col] = np.mean([r["degeneracy"][col][:length] for r in runs], axis=0).tolist()
    return out


def analyse(
    runs: dict[str, dict[str, Any]], baseline: dict[str, Any], arms: Sequence[Any]
) -> dict[str, Any]:
    """Per arm `arm_analysis`; Welch's t on seed means of greedy and sampled accuracy for the
    first arm (sign) against each other arm, on the seeds both finished."""
    from pgrpo.evaluate import aggregate

    by_arm = {a.name: [r for r in runs.values() if r["arm"] == a.name] for a in arms}
    out: dict[str, Any] = {"arms": {}, "comparisons": {}}
    # the base model's interval over problems by the arms' method (its record's own is the
    # interval of the day it was evaluated)
    if "eval_greedy" in baseline:
        out["base_greedy_problems"] = aggregate(_eval_runs([baseline["eval_greedy"]]))
    for name, rs in by_arm.items():
        if rs:
            out["arms"][name] = arm_analysis(sorted(rs, key=lambda r: r["seed"]), baseline)
    done = list(runs.values())
    if done:  # every run's mean per-step gap, pooled over arms: is the gap > 0 (Jensen)?
        gaps = [float(np.mean(r["degeneracy"]["jensen_gap"])) for r in done]
        out["jensen_gap_pooled"] = seed_summary(gaps)
        if len(gaps) >= 2:
            from scipy.stats import ttest_1samp, wilcoxon

            out["jensen_gap_pooled"]["t_test_p"] = float(ttest_1samp(gaps, 0.0).pvalue)
            out["jensen_gap_pooled"]["positive_runs"] = int(np.sum(np.asarray(gaps) > 0))
            if np.any(np.asarray(gaps) != 0):
                out["jensen_gap_pooled"]["wilcoxon_p"] = float(wilcoxon(gaps).pvalue)
    first = arms[0].name
    for other in arms[1:]:
        a, b = _paired_seeds(by_arm[first], by_arm[other.name])
        if not a:
            continue
        out["comparisons"][f"{first}_vs_{other.name}"] = {
            "seeds": [r["seed"] for r in a],
            **{
                metric: welch([_metric(r, metric) for r in a], [_metric(r, metric) for r in b])
                for metric in (
                    "greedy_accuracy",
                    "sample_accuracy",
                    "pass_at_G",
                    "mean_train_reward",
                )
            },
            "paired_problems": _paired_problems(a, b),
        }
    return out


def by_level(doc: dict[str, Any], level_of: dict[str, int]) -> dict[str, Any]:
    """Greedy and sampled accuracy per task level (seed mean) for the base model and each arm;
    level_of: problem id -> level (from the held-out examples themselves)."""

    def acc(summary: dict[str, Any]) -> dict[str, float]:
        per: dict[int, list[float]] = {}
        for p in summary["per_problem"]:
            per.setdefault(level_of[p["id"]], []).append(p["c"] / p["n"])
        return {str(lv): float(np.mean(v)) for lv, v in sorted(per.items())}

    def mean(dicts: list[dict[str, float]]) -> dict[str, float]:
        return {k: float(np.mean([d[k] for d in dicts])) for k in dicts[0]}

    base = doc["baseline"]
    counts: dict[str, int] = {}
    for p in base["eval_greedy"]["per_problem"]:
        counts[str(level_of[p["id"]])] = counts.get(str(level_of[p["id"]]), 0) + 1
    out: dict[str, Any] = {
        "problems": dict(sorted(counts.items())),
        "base": {"greedy": acc(base["eval_greedy"]), "sampled": acc(base["eval_sampled"])},
    }
    for arm in sorted({r["arm"] for r in doc["runs"].values()}):
        rs = [r for r in doc["runs"].values() if r["arm"] == arm]
        out[arm] = {
            "greedy": mean([acc(r["eval_greedy"]) for r in rs]),
            "sampled": mean([acc(r["eval_sampled"]) for r in rs]),
        }
    return out


def _paired_problems(a: list[dict], b: list[dict]) -> dict[str, Any]:
    """Paired t over the held-out problems (`pgrpo.evaluate.compare`: each problem's accuracy
    averaged over the arm's seeds; a percentile bootstrap until 2026-12-06), greedy and
    sampled."""
    from pgrpo.evaluate import compare

    out = {}
    for kind in ("eval_greedy", "eval_sampled"):
        c = compare(_eval_runs([r[kind] for r in a]), _eval_runs([r[kind] for r in b]))
        out[kind] = {k: c[k] for k in ("problems", "diff", "paired_ci", "paired_p")}
    return out


def _paired_seeds(a: list[dict], b: list[dict]) -> tuple[list[dict], list[dict]]:
    seeds = sorted({r["seed"] for r in a} & {r["seed"] for r in b})
    pick = lambda rs: [next(r for r in rs if r["seed"] == s) for s in seeds]  # noqa: E731
    return pick(a), pick(b)


def _metric(run: dict[str, Any], name: str) -> float:
    if name == "greedy_accuracy":
        return float(run["eval_greedy"]["accuracy"])
    if name == "sample_accuracy":
        return float(run["eval_sampled"]["accuracy"])
    if name == "pass_at_G":
        curve = run["eval_sampled"]["pass_at_k"]
        return float(curve[str(max(int(k) for k in curve))])
    return float(np.mean(run["degeneracy"]["reward"]))


def print_table(doc: dict[str, Any]) -> None:
    base = doc["baseline"]
    print(f"\nbase: greedy {base['eval_greedy']['accuracy']:.3f}", end=", ")
    print(f"pass@k {base['eval_sampled']['pass_at_k']}")
    head = ("arm", "seeds", "greedy acc", "sample acc", "pass@G", "degen obs/iid", "s/run")
    print("{:<20} {:>5} {:>18} {:>18} {:>7} {:>14} {:>6}".format(*head))
    for name, a in doc["analysis"]["arms"].items():
        g, s = a["greedy_accuracy"], a["sample_accuracy"]
        kmax = str(a["search_compression"]["k_max"])
        print(
            f"{name:<20} {g['n']:>5} {_fmt(g):>18} {_fmt(s):>18} "
            f"{a['sampled']['pass_at_k'][kmax]:>7.3f} "
            f"{a['degeneracy_observed']['mean']:>6.3f}/{a['degeneracy_iid']['mean']:.3f} "
            f"{a['seconds']['mean']:>6.0f}"
        )
    for name, cmp in doc["analysis"]["comparisons"].items():
        w = cmp["greedy_accuracy"]
        if w:  # t and p are null (NaN) when both arms' seeds are constant
            t, pv = (f"{w[k]:.3g}" if w[k] is not None else "undefined" for k in ("t", "p"))
            print(f"{name}: greedy diff {w['diff']:+.3f} t {t} p {pv}")


def _ci(x: Sequence[float | None] | None) -> str:
    return "n/a" if not x or None in x else f"[{x[0]:.3f}, {x[1]:.3f}]"


def _num(x: float | None, spec: str = ".3f") -> str:
    return "n/a" if x is None else format(x, spec)


def markdown(doc: dict[str, Any]) -> str:
    """The docs tables (docs/reproductions_lm.md) from a results JSON: accuracy and pass@k per
    arm, Welch's t per comparison, the degeneracy rate along training."""
    base, analysis = doc["baseline"], doc["analysis"]
    lrs = {a["name"]: doc["settings"]["lr"] * a["lr_factor"] for a in doc["arms"]}
    ks = list(base["eval_sampled"]["pass_at_k"])
    lines = [
        "| arm | lr | seeds | greedy accuracy (seed mean, t 95% CI) | CI over problems | "
        + " | ".join(f"pass@{k}" for k in ks)
        + " | verdict | wall s/run |",
        "|---" * (7 + len(ks)) + "|",
        f"| base model | | | {base['eval_greedy']['accuracy']:.3f} | "
        f"{_ci(analysis.get('base_greedy_problems', base['eval_greedy'])['accuracy_ci'])} | "
        + " | ".join(f"{base['eval_sampled']['pass_at_k'][k]:.3f}" for k in ks)
        + " | | |",
    ]
    for name, a in analysis["arms"].items():
        g, sc = a["greedy_accuracy"], a["search_compression"]
        lines.append(
            f"| {name} | {lrs[name]:.3g} | {g['n']} | {g['mean']:.3f} {_ci(g['ci'])} | "
            f"{_ci(a['greedy_accuracy_problems']['accuracy_ci'])} | "
            + " | ".join(f"{a['sampled']['pass_at_k'][k]:.3f}" for k in ks)
            + f" | {sc['verdict']} | {a['seconds']['mean']:.0f} |"
        )
    lines += ["", "| comparison | metric | diff | 95% CI | Welch t | dof | p | Hedges g |"]
    lines.append("|---" * 8 + "|")
    for name, cmp in analysis["comparisons"].items():
        for metric in ("greedy_accuracy", "sample_accuracy", "pass_at_G", "mean_train_reward"):
            w = cmp[metric]
            if w:
                lines.append(
                    f"| {name} ({len(cmp['seeds'])} seeds) | {metric} | {w['diff']:+.3f} | "
                    f"{_ci(w['ci'])} | {_num(w['t'], '.2f')} | {_num(w['dof'], '.1f')} | "
                    f"{_num(w['p'], '.3g')} | {_num(w['hedges_g'], '.2f')} |"
                )
    paired = {n: c["paired_problems"] for n, c in analysis["comparisons"].items()}
    if paired:
        lines += ["", "| comparison | held-out metric | diff | paired t 95% CI | p |"]
        lines.append("|---" * 5 + "|")
        for name, pp in paired.items():
            for kind, label in (("eval_greedy", "greedy"), ("eval_sampled", "one sample")):
                c = pp[kind]
                lines.append(
                    f"| {name} ({c['problems']} problems) | {label} accuracy | "
                    f"{c['diff']:+.3f} | {_ci(c['paired_ci'])} | "
                    f"{_num(c['paired_p'], '.3g')} |"
                )
    pooled = analysis.get("jensen_gap_pooled")
    if pooled and pooled.get("ci"):
        lines += [
            "",
            f"Jensen gap (observed zero-std share - f_G(batch-mean reward)), each run's mean over "
            f"its steps, pooled over {pooled['n']} runs: {pooled['mean']:+.3f} "
            f"{_ci(pooled['ci'])}, {pooled['positive_runs']} of {pooled['n']} runs > 0, "
            f"t-test p = {pooled['t_test_p']:.3g}, "
            f"Wilcoxon p = {_num(pooled.get('wilcoxon_p'), '.3g')}.",
        ]
    levels = analysis.get("by_level")
    if levels:
        lv = list(levels["problems"])
        head = " | ".join(f"level {k} ({levels['problems'][k]} problems)" for k in lv)
        lines += ["", f"| greedy / sampled accuracy | {head} |", "|---" * (1 + len(lv)) + "|"]
        for name in ["base", *analysis["arms"]]:
            g, smp = levels[name]["greedy"], levels[name]["sampled"]
            cells = " | ".join(f"{g[k]:.3f} / {smp[k]:.3f}" for k in lv)
            lines.append(f"| {name} | {cells} |")
    names = list(analysis["arms"])
    lines += [
        "",
        "| step | " + " | ".join(f"{n}: reward, zero-std / iid / gap" for n in names) + " |",
    ]
    lines.append("|---" * (1 + len(names)) + "|")
    steps = analysis["arms"][names[0]]["degeneracy_by_step"]["step"]
    for i, step in enumerate(steps):
        cells = []
        for n in names:
            d = analysis["arms"][n]["degeneracy_by_step"]
            if i < len(d["step"]):
                cells.append(
                    f"{d['reward'][i]:.3f}, {d['observed'][i]:.3f} / "
                    f"{d['iid_prediction'][i]:.3f} / {d['jensen_gap'][i]:+.3f}"
                )
            else:
                cells.append("")
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _fmt(s: dict[str, Any]) -> str:
    ci = s["ci"]
    return f"{s['mean']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci and None not in ci else "")
