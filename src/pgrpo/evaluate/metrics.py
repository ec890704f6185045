"""Pure evaluation statistics over per-problem sample counts: accuracy, pass@k curves, seed
aggregation, paired comparisons and the search-compression analysis (arXiv 2605.07689).

Inputs are counts: for each problem, n samples drawn and c of them correct. pass@k uses the
unbiased estimator of Chen et al. 2021 from `pgrpo.core.stats` (never re-implemented here).

Intervals treat the problem, not the sample, as the unit (`pgrpo.evaluate.intervals`). Two
systems are compared on the problems both evaluated, matched by problem id (`pair_problems`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from pgrpo.core.stats import checked_counts, mean_ci, paired_bootstrap, pass_at_k, welch_t
from pgrpo.errors import UserError
from pgrpo.evaluate.intervals import problem_ci

ID_SOURCES = ("problem", "position")
"""What a run's ids are: "problem", the dataset's own problem identity (`pgrpo.tasks.problem_id`);
"position", row numbers of the split (eval JSONs written before 2026-12-04)."""


def default_ks(n: int) -> list[int]:
    """1, 2, 4, ... up to n, and n itself."""
    ks = [1]
    while ks[-1] * 2 <= n:
        ks.append(ks[-1] * 2)
    return ks if ks[-1] == n else [*ks, n]


def pass_at_k_curve(n: Sequence[int], c: Sequence[int], ks: Sequence[int]) -> dict[int, float]:
    """Mean unbiased pass@k over problems for each k. n, c: [P] counts."""
    n_arr, c_arr = np.asarray(n), np.asarray(c)
    return {int(k): float(np.mean(pass_at_k(n_arr, c_arr, int(k)))) for k in ks}


@dataclass(frozen=True)
class EvalRun:
    """One model evaluated once (one seed) on one task split.

    ids: [P] distinct problem ids; n, c: [P] samples and correct samples per problem; step: the
    training step of the checkpoint (0 = base model, None = unknown); metrics: what scoring
    counted (`reward_errors`, `reward_timeouts`); task_options: the task's options (None:
    unknown); problem_seed: the seed of the problem draw (None: unknown); id_source: what the
    ids are (`ID_SOURCES`)."""

    name: str
    ids: list[str]
    n: list[int]
    c: list[int]
    step: int | None = None
    seed: int = 0
    task: str = ""
    split: str = ""
    model: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    task_options: dict[str, Any] | None = None
    problem_seed: int | None = None
    id_source: str = "problem"

    def __post_init__(self) -> None:
        if not (len(self.ids) == len(self.n) == len(self.c)) or not self.ids:
            raise ValueError("an eval run needs one id, n and c per problem (and >= 1 problem)")
        if len(set(self.ids)) < len(self.ids):
            twice = next(i for i in self.ids if self.ids.count(i) > 1)
            raise ValueError(
                f"eval run {self.name!r} lists problem {twice!r} twice; give each problem one "
                "entry (its samples and correct samples summed)"
            )
        if self.id_source not in ID_SOURCES:
            raise ValueError(f"id_source must be one of {ID_SOURCES}, got {self.id_source!r}")
        checked_counts(self.n, self.c, self.name)

    @property
    def accuracy(self) -> float:
        """Mean per-problem accuracy c / n (the unbiased pass@1)."""
        return float(np.mean(np.asarray(self.c) / np.asarray(self.n)))

    def per_problem_accuracy(self) -> np.ndarray:
        """[P] c / n."""
        return np.asarray(self.c) / np.asarray(self.n)

    def summary(self, ks: Sequence[int] | None = None) -> dict[str, Any]:
        """accuracy and pass@k, each with an interval over problems (`problem_ci`), counts."""
        ks = ks or default_ks(min(self.n))
        n, c = np.asarray(self.n), np.asarray(self.c)
        lo, hi, method = problem_ci(self.per_problem_accuracy(), max_trials=int(n.sum()))
        per_k = {int(k): pass_at_k(n, c, int(k)) for k in ks}
        return {
            "name": self.name,
            "model": self.model,
            "task": self.task,
            "split": self.split,
            "task_options": self.task_options,
            "problem_seed": self.problem_seed,
            "step": self.step,
            "seed": self.seed,
            "accuracy": self.accuracy,
            "accuracy_ci": [lo, hi],
            "ci_method": method,
            "ci_unit": "problem",
            "n_problems": len(self.ids),
            "n_samples": int(min(self.n)),
            "pass_at_k": {str(k): float(np.mean(v)) for k, v in per_k.items()},
            "pass_at_k_ci": {
                str(k): list(problem_ci(v, max_trials=int((n // k).sum()))[:2])
                for k, v in per_k.items()
            },
            "id_source": self.id_source,
            "per_problem": [
                {"id": i, "n": int(n), "c": int(c)}
                for i, n, c in zip(self.ids, self.n, self.c, strict=True)
            ],
            "metrics": dict(self.metrics),
        }

    @classmethod
    def from_summary(cls, rec: dict[str, Any]) -> EvalRun:
        """The run of one `summary()` record. A problem listed twice is one problem with the
        samples of both entries; a record without `id_source` (written before 2026-12-04) has
        row numbers for ids ("position")."""
        probs = rec.get("per_problem")
        if not probs:
            raise ValueError(f"eval result {rec.get('name', '?')!r} has no per_problem counts")
        name = str(rec["name"])
        n, c = checked_counts([p["n"] for p in probs], [p["c"] for p in probs], name)
        merged: dict[str, list[int]] = {}
        for p, n_i, c_i in zip(probs, n, c, strict=True):
            counts = merged.setdefault(str(p["id"]), [0, 0])
            counts[0] += n_i
            counts[1] += c_i
        options = rec.get("task_options")
        if options is not None and not isinstance(options, dict):
            raise ValueError(f"eval result {name!r}: task_options must be a mapping or null")
        return cls(
            name=name,
            ids=list(merged),
            n=[v[0] for v in merged.values()],
            c=[v[1] for v in merged.values()],
            step=rec.get("step"),
            seed=int(rec.get("seed", 0)),
            task=str(rec.get("task", "")),
            split=str(rec.get("split", "")),
            model=str(rec.get("model", "")),
            metrics=dict(rec.get("metrics", {})),
            task_options=options,
            problem_seed=rec.get("problem_seed"),
            id_source=str(rec.get("id_source", "position")),
        )


def aggregate(runs: Sequence[EvalRun]) -> dict[str, Any]:
    """Several seeds of one system: mean accuracy and pass@k with intervals over problems (each
    problem's score averaged over the seeds that have it), and the seed-to-seed t interval
    (sampling noise only, the problems held fixed) when there are >= 2 seeds."""
    if not runs:
        raise UserError(
            "no eval results to aggregate",
            "give at least one result (an eval JSON that `pgrpo eval --out` wrote holds one per "
            "seed)",
        )
    accs = [r.accuracy for r in runs]
    ks = default_ks(min(min(r.n) for r in runs))
    curves = [pass_at_k_curve(r.n, r.c, ks) for r in runs]
    samples = sum(sum(r.n) for r in runs)
    lo, hi, method = problem_ci(list(_per_problem(runs).values()), max_trials=samples)
    out: dict[str, Any] = {
        "seeds": len(runs),
        "accuracy_mean": float(np.mean(accs)),
        "accuracy_ci": [lo, hi],
        "ci_method": method,
        "ci_unit": "problem",
        "pass_at_k": {str(k): float(np.mean([cv[k] for cv in curves])) for k in ks},
        "pass_at_k_ci": {
            str(k): list(
                problem_ci(
                    list(_problem_pass(runs, k).values()),
                    max_trials=sum(int((np.asarray(r.n) // k).sum()) for r in runs),
                )[:2]
            )
            for k in ks
        },
    }
    if len(runs) >= 2:
        ci = mean_ci(accs)
        out["seed_ci"] = [ci.low, ci.high]
    else:
        out["seed_ci"] = None
        out["note"] = "one seed: the seed-to-seed interval needs >= 2 seeds"
    return out


def _per_problem(runs: Sequence[EvalRun]) -> dict[str, float]:
    """Problem id -> accuracy averaged over the runs (seeds) that have it."""
    sums: dict[str, list[float]] = {}
    for r in runs:
        for i, n, c in zip(r.ids, r.n, r.c, strict=True):
            sums.setdefault(i, []).append(c / n)
    return {i: float(np.mean(v)) for i, v in sums.items()}


# ---------------------------------------------------------------------------------------------
# Two systems: which problems they share, the paired comparison, search compression
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pairing:
    """The problems two systems share. ids: [S] shared problem ids; problems_a, problems_b: how
    many each evaluated; by: "problem id", or "row number" (eval JSONs written before problem
    ids: rows of the split); warnings: what the numbers cannot show, each with what to do."""

    ids: list[str]
    problems_a: int
    problems_b: int
    by: str
    warnings: list[str]


def _setting(runs: Sequence[EvalRun], attr: str) -> set[str]:
    """The known values of a run attribute (task, split, task_options) as canonical text."""
    values = [getattr(r, attr) for r in runs]
    if attr == "task_options":
        return {json.dumps(v, sort_keys=True, default=str) for v in values if v is not None}
    return {str(v) for v in values if v}


def _check_setting(a: Sequence[EvalRun], b: Sequence[EvalRun], names: tuple[str, str]) -> None:
    """UserError unless a and b evaluated the same task, split and task options (where known)."""
    for attr, label, option in (("task", "task", "--task"), ("split", "split", "--split"),
                                ("task_options", "task options", "--task-options")):  # fmt: skip
        va, vb = _setting(a, attr), _setting(b, attr)
        for name, v in zip(names, (va, vb), strict=True):
            if len(v) > 1:
                raise UserError(
                    f"{name} mixes results of different {label} ({', '.join(sorted(v))})",
                    "give results of one evaluation setting (one `pgrpo eval --out` file)",
                )
        if va and vb and va != vb:
            raise UserError(
                f"{names[0]} used {label} {va.pop()}, {names[1]} {vb.pop()}: they are not the "
                "same problems",
                f"compare evaluations with the same --task, --split and --task-options (give "
                f"{option} as the baseline had it)",
            )


def pair_problems(
    a: Sequence[EvalRun],
    b: Sequence[EvalRun],
    *,
    names: tuple[str, str] = ("this evaluation", "the baseline"),
) -> Pairing:
    """The problems systems a and b both evaluated, matched by problem id, after checking that
    they evaluated the same task, split and task options; UserError (what differs, the fix)
    otherwise or with fewer than 2 shared problems. Two eval JSONs without problem ids (from
    before 2026-12-04) pair by row number, with a warning; one with ids and one without do not
    pair."""
    _check_setting(a, b, names)
    ia = {i for r in a for i in r.ids}
    ib = {i for r in b for i in r.ids}
    legacy = [any(r.id_source == "position" for r in runs) for runs in (a, b)]
    if legacy[0] != legacy[1]:
        old = names[legacy.index(True)]
        raise UserError(
            f"{old} has no problem ids (an eval JSON written before pgrpo recorded them: its ids "
            "are row numbers of the split), so its problems cannot be matched",
            f"evaluate {old} again with this version of `pgrpo eval`",
        )
    shared = sorted(ia & ib)
    if len(shared) < 2:
        raise UserError(
            f"{names[0]} and {names[1]} share {len(shared)} problem(s) ({len(ia)} and {len(ib)} "
            "evaluated): there is nothing to pair",
            "evaluate both on the same --task, --task-options, --split, --problems and "
            "--problem-seed",
        )
    warnings = []
    if legacy[0]:
        warnings.append(
            "no problem ids in the eval JSONs (written before pgrpo recorded them): problems are "
            "paired by row number of the split, right only if both drew from the same split "
            "with the same --task-options, --problems and --problem-seed; evaluate again to "
            "pair by problem"
        )
    if len(shared) < max(len(ia), len(ib)):
        warnings.append(
            f"only {len(shared)} problems are shared ({names[0]}: {len(ia)}, {names[1]}: "
            f"{len(ib)}); the comparison uses the shared ones alone; evaluate both with the "
            "same --problems and --problem-seed to pair them all"
        )
    by = "row number" if legacy[0] else "problem id"
    return Pairing(shared, len(ia), len(ib), by, warnings)


def _restrict(runs: Sequence[EvalRun], ids: Sequence[str]) -> list[EvalRun]:
    """The runs on the problems `ids` only (runs holding none of them are left out)."""
    keep = set(ids)
    out = []
    for r in runs:
        rows = [j for j, i in enumerate(r.ids) if i in keep]
        if rows:
            out.append(
                replace(
                    r,
                    ids=[r.ids[j] for j in rows],
                    n=[r.n[j] for j in rows],
                    c=[r.c[j] for j in rows],
                )  # fmt: skip
            )
    return out


def compare(
    a: Sequence[EvalRun], b: Sequence[EvalRun], *, seed: int = 0, pairing: Pairing | None = None
) -> dict[str, Any]:
    """System a vs b on the problems both evaluated (`pair_problems`): a paired bootstrap over
    them (per-problem accuracy averaged over seeds) and Welch's t on seed accuracies over them
    (>= 2 seeds each)."""
    pairing = pairing or pair_problems(a, b)
    a, b = _restrict(a, pairing.ids), _restrict(b, pairing.ids)
    pa, pb = _per_problem(a), _per_problem(b)
    common = pairing.ids
    boot = paired_bootstrap([pa[i] for i in common], [pb[i] for i in common], seed=seed)
    out: dict[str, Any] = {
        "problems": len(common),
        "problems_a": pairing.problems_a,
        "problems_b": pairing.problems_b,
        "paired_by": pairing.by,
        "diff": boot.diff,
        "bootstrap_ci": [boot.low, boot.high],
        "bootstrap_p": boot.p_value,
        "warnings": list(pairing.warnings),
    }
    if len(a) >= 2 and len(b) >= 2:
        w = welch_t([r.accuracy for r in a], [r.accuracy for r in b])
        out.update(
            welch_t=w.t, welch_dof=w.dof, welch_p=w.p_value, welch_ci=[w.diff_low, w.diff_high]
        )
    else:
        out["welch_note"] = "Welch's t needs >= 2 seeds per system"
    return out


def search_compression(
    base: Sequence[EvalRun], trained: Sequence[EvalRun], *, pairing: Pairing | None = None
) -> dict[str, Any]:
    """pass@k curves of base and trained on the problems both evaluated, and their gap at k = 1
    and the largest common k.

    "search compression": pass@1 rises by more than 2 standard errors of the per-problem pass@1
    difference while pass@k_max does not rise by more than 2 standard errors of the per-problem
    pass@k_max difference (the trained model finds in one try what the base found in k);
    "capacity expansion": pass@k_max rises by more than its 2 standard errors. Each gain is
    judged by its own spread: judged by pass@k_max's, a pass@1 gain of one sample in 400 was a
    "search compression" whenever every problem was solved at k_max by both (spread 0). With
    one sample per problem (k_max = 1: greedy decoding) pass@k_max is pass@1 and the two cannot
    be told apart: "not judged"."""
    pairing = pairing or pair_problems(trained, base)
    base, trained = _restrict(base, pairing.ids), _restrict(trained, pairing.ids)
    k_max = min(min(r.n) for r in (*base, *trained))
    ks = default_ks(k_max)
    cb = {k: float(np.mean([pass_at_k_curve(r.n, r.c, [k])[k] for r in base])) for k in ks}
    ct = {k: float(np.mean([pass_at_k_curve(r.n, r.c, [k])[k] for r in trained])) for k in ks}
    gain1, gain_k = ct[1] - cb[1], ct[k_max] - cb[k_max]
    tol1, tol_k = (_two_se(base, trained, k) for k in (1, k_max))
    out: dict[str, Any] = {"problems": len(pairing.ids)}
    if k_max < 2:
        verdict = "not judged"
        out["verdict_note"] = (
            "one sample per problem: pass@k for k > 1 is unknown, so a gain cannot be told "
            "capacity expansion or search compression; evaluate both with --samples >= 2 "
            "(e.g. 8) at temperature > 0"
        )
    elif gain_k > tol_k:
        verdict = "capacity expansion"
    elif gain1 > tol1:
        verdict = "search compression"
    else:
        verdict = "no clear gain"
    return out | {
        "ks": ks,
        "base": {str(k): v for k, v in cb.items()},
        "trained": {str(k): v for k, v in ct.items()},
        "gain_pass1": gain1,
        "gain_pass_kmax": gain_k,
        "k_max": k_max,
        "tolerance_pass1": tol1,
        "tolerance_pass_kmax": tol_k,
        "verdict": verdict,
    }


def _two_se(base: Sequence[EvalRun], trained: Sequence[EvalRun], k: int) -> float:
    """2 standard errors of the mean per-problem pass@k difference (trained - base) over the
    problems both evaluated (0 with fewer than 2 problems)."""
    pb, pt = _problem_pass(base, k), _problem_pass(trained, k)
    d = np.array([pt[i] - pb[i] for i in sorted(set(pb) & set(pt))])
    return 2 * float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else 0.0


def _problem_pass(runs: Sequence[EvalRun], k: int) -> dict[str, float]:
    vals: dict[str, list[float]] = {}
    for r in runs:
        per = pass_at_k(np.asarray(r.n), np.asarray(r.c), k)
        for i, v in zip(r.ids, np.atleast_1d(per), strict=True):
            vals.setdefault(i, []).append(float(v))
    return {i: float(np.mean(v)) for i, v in vals.items()}
