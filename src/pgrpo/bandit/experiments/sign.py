"""`sign-vs-drgrpo`: the fixed-reference Sign advantage against group-mean advantages under heavy
gradient starvation (arXiv 2605.07689), with a learning-rate-matched control.

Why the control: on binary rewards the expected Sign gradient is 2G grad p per group, the
mean-centred (Dr. GRPO) one (G - 1) grad p (docs/reproductions.md, "sign-vs-drgrpo"). In the softmax
bandit both point along the same direction for every prompt, so Sign is Dr. GRPO with a
2G / (G - 1) larger step in expectation; only the noise differs. The arms:

- `sign`: A = 2r - 1, lr;
- `grpo`: std-normalised group mean ("normalised group-mean DrGRPO"), lr;
- `dr_grpo`: r - mean, lr;
- `dr_grpo_lr_matched`: r - mean, lr x 2G / (G - 1).

Accuracy = the mean exact success probability over all prompts of a run; each seed is an
independent run (every arm starts from the same prompts for a given seed). The gains (final -
initial accuracy per seed) are compared with Welch's t (`pgrpo.core.stats.welch_t`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pgrpo.bandit.experiments.base import ExperimentResult, check_seeds, config_dict
from pgrpo.bandit.policy import DifficultyConfig
from pgrpo.bandit.simulate import BanditConfig, simulate
from pgrpo.core.stats import welch_t


@dataclass(frozen=True)
class SignConfig:
    """Defaults: the documented run of `pgrpo reproduce sign-vs-drgrpo`."""

    group_size: int = 4
    num_prompts: int = 128
    batch_prompts: int = 32
    steps: int = 200
    lr: float = 2.0
    beta1: float = 0.9
    difficulty: DifficultyConfig = DifficultyConfig("beta", mean=0.05, concentration=1.0)
    """Heavy starvation: most prompts almost never solved at the start."""
    seeds: int = 8
    seed: int = 0


REFERENCE_ARM = "sign"
"""The arm every other arm is compared with (Welch t of the gains)."""


def arms(cfg: SignConfig) -> dict[str, tuple[str, float]]:
    """Arm name -> (estimator, lr)."""
    g = cfg.group_size
    return {
        "sign": ("sign", cfg.lr),
        "grpo": ("grpo", cfg.lr),
        "dr_grpo": ("dr_grpo", cfg.lr),
        "dr_grpo_lr_matched": ("dr_grpo", cfg.lr * 2 * g / (g - 1)),
    }


def run_sign(cfg: SignConfig) -> ExperimentResult:
    check_seeds(cfg.seeds)
    curves, finals, degeneracy = {}, {}, {}
    for name, (estimator, lr) in arms(cfg).items():
        res = simulate(
            BanditConfig(
                num_runs=cfg.seeds,
                num_prompts=cfg.num_prompts,
                batch_prompts=cfg.batch_prompts,
                group_size=cfg.group_size,
                steps=cfg.steps,
                estimator=estimator,
                optimizer="ema",
                lr=lr,
                beta1=cfg.beta1,
                difficulty=cfg.difficulty,
                seed=cfg.seed,  # same initial prompts for every arm, independent across seeds
            )
        )
        curves[name] = res.success  # [S + 1, seeds]
        # gain over the run's own start: removes the between-seed spread of initial difficulty
        finals[name] = res.success[-1] - res.success[0]
        degeneracy[name] = float((res.all_pass + res.all_fail)[0].mean())
    rows = []
    for name, (estimator, lr) in arms(cfg).items():
        row = {
            "arm": name,
            "estimator": estimator,
            "lr": lr,
            "initial_accuracy": float(curves[name][0].mean()),
            "final_accuracy": float(curves[name][-1].mean()),
            "gain": float(finals[name].mean()),
            "gain_std": float(finals[name].std(ddof=1)),
            "degeneracy_step0": degeneracy[name],
        }
        if name != REFERENCE_ARM:
            w = welch_t(finals[REFERENCE_ARM], finals[name])
            row.update(
                {
                    "sign_minus_arm": w.diff,
                    "welch_t": w.t,
                    "p_value": w.p_value,
                    "hedges_g": w.hedges_g,
                    "diff_low": w.diff_low,
                    "diff_high": w.diff_high,
                }
            )
        rows.append(row)
    series = {
        name: {"mean": c.mean(1).tolist(), "std": c.std(1, ddof=1).tolist()}
        for name, c in curves.items()
    }
    by = {r["arm"]: r for r in rows}
    metrics = {
        "sign_vs_dr_grpo_p": by["dr_grpo"]["p_value"],
        "sign_vs_lr_matched_p": by["dr_grpo_lr_matched"]["p_value"],
        "sign_vs_lr_matched_diff": by["dr_grpo_lr_matched"]["sign_minus_arm"],
        "lr_factor": 2 * cfg.group_size / (cfg.group_size - 1),
    }
    return ExperimentResult(
        name="sign-vs-drgrpo",
        columns=(
            "arm",
            "lr",
            "initial_accuracy",
            "final_accuracy",
            "gain",
            "gain_std",
            "sign_minus_arm",
            "welch_t",
            "p_value",
            "hedges_g",
        ),
        rows=rows,
        series=series,
        metrics=metrics,
        config=config_dict(cfg),
    )


__all__ = ["SignConfig", "run_sign"]
