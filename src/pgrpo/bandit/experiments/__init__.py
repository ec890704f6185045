"""Softmax-bandit reproductions behind the `EXPERIMENTS` registry (see `pgrpo reproduce`)."""

from __future__ import annotations

from pgrpo.bandit.experiments.base import (
    EXPERIMENTS,
    Experiment,
    ExperimentResult,
    run_experiment,
)
from pgrpo.bandit.experiments.degeneracy import DegeneracyConfig, run_degeneracy
from pgrpo.bandit.experiments.groupsize import GroupSizeConfig, run_group_size
from pgrpo.bandit.experiments.plots import (
    plot_degeneracy,
    plot_group_size,
    plot_sign,
    plot_threshold,
    plot_transition,
)
from pgrpo.bandit.experiments.sign import SignConfig, run_sign
from pgrpo.bandit.experiments.threshold import (
    ThresholdConfig,
    TransitionConfig,
    run_threshold,
    run_transition,
)

EXPERIMENTS.add(
    "threshold",
    Experiment(
        ThresholdConfig,
        run_threshold,
        plot_threshold,
        "refresh-interval threshold K*: measured vs predicted from the exact-force kappa",
    ),
)
EXPERIMENTS.add(
    "transition",
    Experiment(
        TransitionConfig,
        run_transition,
        plot_transition,
        "overdamped-to-oscillatory transition in lr at fixed beta1: measured vs predicted onset",
    ),
)
EXPERIMENTS.add(
    "group-size",
    Experiment(
        GroupSizeConfig,
        run_group_size,
        plot_group_size,
        "G in {2,4,8,16}: mean trajectories, plateau variance x G, exact finite-G force",
    ),
)
EXPERIMENTS.add(
    "degeneracy",
    Experiment(
        DegeneracyConfig,
        run_degeneracy,
        plot_degeneracy,
        "observed degeneracy vs i.i.d. prediction vs Jensen estimate as heterogeneity grows",
    ),
)
EXPERIMENTS.add(
    "sign-vs-drgrpo",
    Experiment(
        SignConfig,
        run_sign,
        plot_sign,
        "Sign vs group-mean advantages under starvation at G=4, with an lr-matched control",
    ),
)

__all__ = ["EXPERIMENTS", "Experiment", "ExperimentResult", "run_experiment"]
