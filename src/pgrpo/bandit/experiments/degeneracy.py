"""`degeneracy`: observed degeneracy vs the i.i.d. prediction vs the Jensen estimate as the
difficulty heterogeneity of the prompts grows (arXiv 2605.07689; docs/reproductions.md,
"degeneracy").

For each difficulty setting (same mean success probability, growing spread), R runs of P prompts
train with Dr. GRPO; every step draws B prompts x G samples. Per step:
- observed: the fraction of groups whose G rewards are all equal (all-pass + all-fail);
- i.i.d. prediction: f_G(pbar) = pbar^G + (1 - pbar)^G, pbar = the mean exact success
  probability of the drawn prompts (`pgrpo.core.degeneracy.iid_degeneracy`);
- Jensen estimate: `pgrpo.core.degeneracy.jensen_estimate` on held-out samples (n per prompt,
  the unbiased form), from the initial policy.
The claim: observed >= i.i.d. whenever the prompts differ (f_G is convex), equal for the
homogeneous control. Step 0 (the initial policy) is reported separately from the average over
training, because training itself spreads the prompts' success probabilities (each prompt learns
from its own samples), so a homogeneous start does not stay homogeneous.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pgrpo.bandit.experiments.base import ExperimentResult, check_seeds, config_dict
from pgrpo.bandit.policy import DifficultyConfig
from pgrpo.bandit.simulate import BanditConfig, simulate
from pgrpo.core.degeneracy import iid_degeneracy, jensen_estimate

DEFAULT_SETTINGS = (
    ("homogeneous", DifficultyConfig("homogeneous", mean=0.25)),
    ("beta c=20", DifficultyConfig("beta", mean=0.25, concentration=20.0)),
    ("beta c=5", DifficultyConfig("beta", mean=0.25, concentration=5.0)),
    ("beta c=2", DifficultyConfig("beta", mean=0.25, concentration=2.0)),
    ("beta c=0.5", DifficultyConfig("beta", mean=0.25, concentration=0.5)),
    ("bimodal", DifficultyConfig("bimodal", p_low=0.05, p_high=0.9, high_frac=0.23)),
)


@dataclass(frozen=True)
class DegeneracyConfig:
    """Defaults: the documented run of `pgrpo reproduce degeneracy`."""

    settings: tuple[tuple[str, DifficultyConfig], ...] = DEFAULT_SETTINGS
    group_size: int = 4
    num_prompts: int = 256
    batch_prompts: int = 64
    steps: int = 40
    lr: float = 0.5
    heldout_samples: int = 16
    """Held-out samples per prompt for the Jensen estimate (n >= G)."""
    seeds: int = 64
    seed: int = 0


def _setting_row(cfg: DegeneracyConfig, label: str, diff: DifficultyConfig) -> dict:
    res = simulate(
        BanditConfig(
            num_runs=cfg.seeds,
            num_prompts=cfg.num_prompts,
            batch_prompts=cfg.batch_prompts,
            group_size=cfg.group_size,
            steps=cfg.steps,
            estimator="dr_grpo",
            lr=cfg.lr,
            difficulty=diff,
            seed=cfg.seed,
        )
    )
    g = cfg.group_size
    observed = res.all_pass + res.all_fail  # [S, R]
    iid = iid_degeneracy(np.clip(res.batch_success, 0, 1), g)
    groups0 = cfg.seeds * cfg.batch_prompts
    obs0, iid0 = float(observed[0].mean()), float(iid[0].mean())
    se0 = float(np.sqrt(max(obs0 * (1 - obs0), 1e-12) / groups0))
    rng = np.random.default_rng(cfg.seed)
    p0 = res.initial_success.reshape(-1)
    n = cfg.heldout_samples
    jensen = jensen_estimate(rng.binomial(n, p0) / n, g, num_samples=n)
    return {
        "setting": label,
        "var_p": float(p0.var()),
        "observed_step0": obs0,
        "iid_step0": iid0,
        "excess_step0": obs0 - iid0,
        "z_step0": (obs0 - iid0) / se0,
        "expected_step0": float(res.expected_degeneracy[0].mean()),
        "jensen_heldout": jensen.d_true,
        "jensen_gap_approx": jensen.gap_approx,
        "observed_train": float(observed.mean()),
        "iid_train": float(iid.mean()),
        "excess_train": float((observed - iid).mean()),
        "all_fail_train": float(res.all_fail.mean()),
        "all_pass_train": float(res.all_pass.mean()),
    }


def run_degeneracy(cfg: DegeneracyConfig) -> ExperimentResult:
    check_seeds(cfg.seeds)
    if cfg.heldout_samples < cfg.group_size:
        raise ValueError("heldout_samples must be >= group_size for the unbiased Jensen estimate")
    rows = [_setting_row(cfg, label, diff) for label, diff in cfg.settings]
    hetero = [r for r in rows if r["setting"] != "homogeneous"]
    homo = [r for r in rows if r["setting"] == "homogeneous"]
    metrics = {
        "heterogeneous_all_above_iid": all(r["z_step0"] > 2 for r in hetero),
        "homogeneous_equal_within_2se": all(abs(r["z_step0"]) < 2 for r in homo),
    }
    return ExperimentResult(
        name="degeneracy",
        columns=(
            "setting",
            "var_p",
            "observed_step0",
            "iid_step0",
            "z_step0",
            "jensen_heldout",
            "observed_train",
            "iid_train",
            "excess_train",
        ),
        rows=rows,
        metrics=metrics,
        config=config_dict(cfg),
    )
