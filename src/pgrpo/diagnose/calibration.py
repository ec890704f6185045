"""The diagnosis on the bandit scenarios (`pgrpo.bandit.scenarios.SCENARIOS`): each run read as
a log, and the detection rate of every mode on every scenario over seeds (docs/benchmarks.md)."""

from __future__ import annotations

from dataclasses import replace

from pgrpo.bandit.scenarios import SCENARIOS, ScenarioRun
from pgrpo.diagnose import MODES, diagnose
from pgrpo.diagnose.signals import Signals


def signals_of(run: ScenarioRun) -> Signals:
    """The diagnosis view of a run without going through files."""
    cols = {k: v for k, v in run.columns.items() if k != "step"}
    exact = (0.0,) * len(run.eval_points)  # the scenario's eval is its exact true accuracy
    return Signals(run.columns["step"], cols, dict(run.config), run.eval_points, "scenario", exact)


def calibration_table(
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4), drop_config: tuple[str, ...] = ()
) -> dict[str, dict[str, float]]:
    """scenario -> mode -> fraction of seeds where the mode was detected (the confusion matrix),
    plus 'correct': the fraction of seeds whose detected set is the expected set, allowing the
    entry's `allowed` modes. drop_config: config keys hidden from the diagnosis (e.g. 'kappa',
    to judge instability from the reward curve alone)."""
    table: dict[str, dict[str, float]] = {}
    for name in SCENARIOS:
        entry = SCENARIOS.get(name)
        counts = dict.fromkeys(MODES, 0.0)
        correct = 0
        for seed in seeds:
            run = entry.builder(seed)
            if drop_config:
                config = {k: v for k, v in run.config.items() if k not in drop_config}
                run = replace(run, config=config)
            d = diagnose(signals_of(run))
            got = {v.name for v in d.modes if v.detected and v.name in MODES}
            for mode in got:
                counts[mode] += 1
            correct += entry.expected <= got <= entry.expected | entry.allowed
        table[name] = {m: c / len(seeds) for m, c in counts.items()}
        table[name]["correct"] = correct / len(seeds)
    return table
