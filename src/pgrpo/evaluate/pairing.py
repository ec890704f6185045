"""What may be compared with what: the problems two systems share (matched by problem id), after
checking that they evaluated the same task, split and task options and sampled alike, and that
the seeds of each system evaluated one problem set.

A refusal is a `UserError` naming what differs and the fix; what the numbers cannot show (files
without problem ids or without decoding settings, partly shared problems, options that change
only the reward) is a warning in `Pairing.warnings`, each with what to do.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pgrpo.errors import UserError

if TYPE_CHECKING:
    from pgrpo.evaluate.metrics import EvalRun


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


def check_one_problem_set(runs: Sequence[EvalRun], label: str = "the results") -> None:
    """UserError unless every run (seed) of one system evaluated the same problems: averaged
    over seeds with different problems, the mean of the seed accuracies and the interval of the
    per-problem means are of different populations (a file with 2 easy problems in one seed and
    98 hard ones in another gave a mean of 0.5 outside its interval [0.002, 0.070])."""
    first = runs[0] if runs else None
    for r in runs[1:]:
        if set(r.ids) != set(first.ids):
            shared = len(set(r.ids) & set(first.ids))
            raise UserError(
                f"{label} are of different problem sets: {first.name} evaluated "
                f"{len(first.ids)} problems, {r.name} {len(r.ids)} ({shared} shared), so their "
                "seeds cannot be averaged",
                "give the seeds of one evaluation (one `pgrpo eval --out` file, same "
                "--task-options, --split, --problems and --problem-seed); compare two problem "
                "sets with --baseline",
            )


def check_one_decoding(runs: Sequence[EvalRun], label: str = "the results") -> None:
    """UserError unless every run (seed) of one system that records its decoding settings
    records the same: averaged over seeds drawn at different temperatures or length limits, the
    mean accuracy is of no one way of sampling (until session 40 a `--from` file mixing greedy
    and temperature 2 was averaged without a word). Runs that record none (written before
    2026-12-06) are not checked (`unchecked_decoding` says so)."""
    known = [r for r in runs if r.decoding is not None]
    other = next((r for r in known if r.decoding != known[0].decoding), None)
    if other is not None:
        first = known[0]
        raise UserError(
            f"{label} mix decoding settings: {first.name} sampled at {first.decoding.text()}, "
            f"{other.name} at {other.decoding.text()}, so their seeds cannot be averaged",
            "split the file by decoding setting (one `pgrpo eval --out` file each), or keep "
            "only the results of one setting in it",
        )


def unchecked_decoding(runs: Sequence[EvalRun], label: str) -> str | None:
    """A warning when several runs (seeds) of one system are averaged and some record no
    decoding settings: whether they sampled alike cannot be checked (`check_one_decoding`)."""
    unknown = sum(r.decoding is None for r in runs)
    if len(runs) < 2 or not unknown:
        return None
    return (
        f"{label}: {unknown} of its {len(runs)} results do not record their decoding settings "
        "(written before 2026-12-06): whether its seeds sampled alike cannot be checked; "
        "averaged regardless: evaluate again to have them checked"
    )


def reward_only(task: str) -> frozenset[str]:
    """The options of task `task` that change only its reward, not its problems nor which
    answers are correct (the task's `reward_only_options`; none for a task not registered)."""
    import pgrpo.tasks  # noqa: F401  (registers the built-in tasks)
    from pgrpo.tasks.base import TASKS

    try:
        factory = TASKS.get(task)
    except KeyError:
        return frozenset()
    return frozenset(getattr(factory, "reward_only_options", ()))


def _options(run: EvalRun, ignore: frozenset[str]) -> str | None:
    """A run's task options as canonical text without the `ignore`d keys (None: unknown)."""
    if run.task_options is None:
        return None
    kept = {k: v for k, v in run.task_options.items() if k not in ignore}
    return json.dumps(kept, sort_keys=True, default=str)


def _values(runs: Sequence[EvalRun], attr: str, ignore: frozenset[str]) -> set[str]:
    """The known values of a run setting (task, split, task options) as canonical text."""
    if attr == "task_options":
        return {t for r in runs if (t := _options(r, ignore)) is not None}
    return {str(v) for r in runs if (v := getattr(r, attr))}


SETTINGS = (
    ("task", "task", "they are not the same problems", "--task"),
    ("split", "split", "they are not the same problems", "--split"),
    ("task_options", "task options", "the options differ", "--task-options"),
)
"""(attribute, label, what a difference means, the option that sets it)."""


def check_settings(a: Sequence[EvalRun], b: Sequence[EvalRun], names: tuple[str, str]) -> list[str]:
    """UserError unless a and b evaluated the same task, split and task options (options that
    change only the reward aside: `reward_only`) and sampled alike (`check_decoding`), where
    known; returns the warnings: decoding a file did not record, reward-only options that
    differ."""
    tasks = {r.task for r in (*a, *b) if r.task}
    ignore = frozenset().union(*(reward_only(t) for t in tasks))
    for attr, label, meaning, option in SETTINGS:
        va, vb = _values(a, attr, ignore), _values(b, attr, ignore)
        _one_value(va, vb, names, label)
        if va and vb and va != vb:
            raise UserError(
                f"{names[0]} used {label} {va.pop()}, {names[1]} {vb.pop()}: {meaning}",
                f"compare evaluations with the same --task, --split and --task-options (give "
                f"{option} as the baseline had it)",
            )
    check_decoding(a, b, names)
    return _unrecorded(a, b, names) + _reward_only_note(a, b, names, ignore)


def _one_value(va: set[str], vb: set[str], names: tuple[str, str], label: str) -> None:
    """UserError when one side's results (seeds) hold more than one value of a setting."""
    for name, v in zip(names, (va, vb), strict=True):
        if len(v) > 1:
            raise UserError(
                f"{name} mixes results of different {label} ({'; '.join(sorted(v))})",
                "give results of one evaluation setting (one `pgrpo eval --out` file)",
            )


def check_decoding(a: Sequence[EvalRun], b: Sequence[EvalRun], names: tuple[str, str]) -> None:
    """UserError when the two sides drew their samples with different decoding settings
    (temperature, max_new_tokens): greedy accuracy against accuracy at temperature 2 is a
    difference of sampling, not of the models; first each side's seeds among themselves
    (`check_one_decoding`). Runs that record none are not checked."""
    for name, runs in zip(names, (a, b), strict=True):
        check_one_decoding(runs, f"{name}'s results")
    da = {r.decoding for r in a if r.decoding is not None}
    db = {r.decoding for r in b if r.decoding is not None}
    if da and db and da != db:
        mine, theirs = da.pop(), db.pop()
        raise UserError(
            f"{names[0]} sampled at {mine.text()}, {names[1]} at {theirs.text()}: accuracies "
            "drawn at different decoding settings are not comparable",
            f"evaluate both alike (e.g. {theirs.options()}, as {names[1]} was)",
        )


def _unrecorded(a: Sequence[EvalRun], b: Sequence[EvalRun], names: tuple[str, str]) -> list[str]:
    """A warning for each side whose results do not record their decoding settings."""
    return [
        f"{name} does not record its decoding settings (an eval JSON written before "
        "2026-12-06): whether both sampled at the same temperature and max_new_tokens cannot be "
        "checked; compared regardless: evaluate it again to have them checked"
        for name, runs in zip(names, (a, b), strict=True)
        if any(r.decoding is None for r in runs)
    ]


def _reward_only_note(
    a: Sequence[EvalRun], b: Sequence[EvalRun], names: tuple[str, str], ignore: frozenset[str]
) -> list[str]:
    """A note when the two sides' task options differ only in options that change the reward."""
    if not ignore:
        return []
    differ = sorted(
        key
        for key in ignore
        if {_value(r, key) for r in a if r.task_options is not None}
        != {_value(r, key) for r in b if r.task_options is not None}
    )
    if not differ:
        return []
    return [
        f"{names[0]} and {names[1]} differ in task option(s) {', '.join(differ)}, which change "
        "the reward but neither the problems nor which answers are correct (the task's "
        "reward_only_options): accuracy and pass@k are compared as they stand"
    ]


def _value(run: EvalRun, key: str) -> str:
    return json.dumps((run.task_options or {}).get(key), sort_keys=True, default=str)


def pair_problems(
    a: Sequence[EvalRun],
    b: Sequence[EvalRun],
    *,
    names: tuple[str, str] = ("this evaluation", "the baseline"),
) -> Pairing:
    """The problems systems a and b both evaluated, matched by problem id, after checking that
    each side's seeds share one problem set and both evaluated the same task, split and task
    options and sampled alike (`check_settings`); UserError (what differs, the fix) otherwise or
    with fewer than 2 shared problems. Two eval JSONs without problem ids (from before
    2026-12-04) pair by row number, with a warning; one with ids and one without do not pair."""
    for name, runs in zip(names, (a, b), strict=True):
        check_one_problem_set(runs, f"{name}'s results")
    warnings = check_settings(a, b, names)
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


def on_problems(runs: Sequence[EvalRun], ids: Sequence[str]) -> list[EvalRun]:
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
