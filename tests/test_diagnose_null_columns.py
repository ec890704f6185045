"""False alarms of the alarms that read the columns beside the reward, on healthy-but-boring runs
whose every column is stationary noise (bench/null_rates.py, cell `columns`): the format-share
branch of `reward_hacking` read its share without the functions' noise and fired on 24-31% of
such runs; it now needs a format-like function's gain beyond its own AR(1) window-mean error."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ar1
from scipy.stats import norm

from pgrpo.diagnose import diagnose
from pgrpo.diagnose.checks import CheckOptions
from pgrpo.diagnose.entropy import entropy_floor
from pgrpo.diagnose.gaming import length_vs_reward, reward_function_divergence
from pgrpo.diagnose.rules import ALPHA_MODE, Z_MODE
from pgrpo.logs.base import RewardLog

FMT, ACC = "rewards/format_reward/mean", "rewards/accuracy_reward/mean"
SKIP = ("healthy", "dynamical_instability")


def _functions(rng: np.random.Generator, n: int, rho: float) -> dict[str, np.ndarray]:
    """A flat format reward (0.3, sd 0.03) and a flat accuracy reward (0.2, sd 0.095), the
    reward their sum: TRL's per-function columns with nothing moving."""
    fmt, acc = 0.3 + 0.03 * ar1(rng, n, rho), 0.2 + 0.095 * ar1(rng, n, rho)
    return {"step": np.arange(n, dtype=float), "reward": fmt + acc, FMT: fmt, ACC: acc}


@pytest.mark.parametrize("rho", [0.0, 0.5, 0.9])
def test_flat_reward_functions_are_not_format_hacking(rho):
    """A flat format reward that ends up by chance while the flat content one ends down has a
    format share of 1: the share alone fired on about a quarter of such runs at every rho and
    length (bench/null_rates.py, cell columns). With the format gain tested against its noise
    (one-sided ALPHA_MODE) the rate is near that level, highest at rho 0.9 (the rho bound's grid
    top)."""
    rng = np.random.default_rng([21, int(rho * 10)])
    fired = sum(
        diagnose(_functions(rng, 200, rho)).mode("reward_hacking").detected for _ in range(150)
    )
    assert fired <= 3  # 2%; the old code: 41, 46, 35 of 150 at rho 0, 0.5, 0.9


def test_format_gain_beyond_its_noise_is_still_hacking():
    """A format reward that rises 0.1 -> 0.5 through AR(0.5) noise while the content reward
    stays flat is found on every seed, its gain many standard errors above the bar."""
    t = np.arange(120, dtype=float)
    for seed in range(20):
        rng = np.random.default_rng(seed)
        fmt = 0.1 + 0.4 * (1 - np.exp(-t / 25)) + 0.03 * ar1(rng, t.size, 0.5)
        acc = 0.2 + 0.01 * ar1(rng, t.size, 0.5)
        v = diagnose({"step": t, "reward": fmt + acc, FMT: fmt, ACC: acc}).mode("reward_hacking")
        assert v.detected, seed
        assert v.evidence["format_gain_z"] > v.evidence["format_gain_z_crit"]


def test_noiseless_format_rise_and_the_bonferroni_bar():
    """A noiseless linear format rise is hacking (its noise scale, from the differences' mean
    square, is the slope: z ~ 19). Two format-like functions share the level: each is tested
    at ALPHA_MODE / 2."""
    t = np.arange(60, dtype=float)
    cols = {"step": t, "reward": 0.2 + 0.01 * t, FMT: 0.01 * t, ACC: np.full(t.size, 0.2)}
    v = diagnose(cols).mode("reward_hacking")
    assert v.detected and v.evidence["format_gain_z"] > 10
    assert v.evidence["format_gain_z_crit"] == pytest.approx(Z_MODE, abs=1e-3)
    cols["rewards/style_reward/mean"] = np.full(t.size, 0.1)
    v = diagnose(cols).mode("reward_hacking")
    assert v.detected
    assert v.evidence["format_gain_z_crit"] == pytest.approx(norm.isf(ALPHA_MODE / 2))


def test_flat_run_with_every_trl_column_raises_no_column_alarm():
    """Every diagnostic column of a TRL log as stationary AR(0.5) noise around a plausible
    level (the bench's `columns` cell, smaller): column-driven modes and column checks fire on
    at most 2 of 30 runs (one format-gain z of 2.86 on this seed; the old share: 14)."""
    rng = np.random.default_rng(22)
    n, rho = 100, 0.5
    bad: list[str] = []
    for _ in range(30):
        m = _functions(rng, n, rho)
        frac = 0.2 + 0.03 * ar1(rng, n, rho)
        cols = {
            FMT: m[FMT],
            ACC: m[ACC],
            "entropy": rng.uniform(0.5, 1.5) * np.exp(0.1 * ar1(rng, n, rho)),
            "kl": rng.uniform(0.01, 0.05) * np.exp(0.3 * ar1(rng, n, rho)),
            "completion_length": 200 * np.exp(0.1 * ar1(rng, n, rho)),
            "clip_ratio/region_mean": 0.03 * np.exp(0.3 * ar1(rng, n, rho)),
            "grad_norm": 0.6 * np.exp(0.3 * ar1(rng, n, rho)),
            "frac_reward_zero_std": frac,
            "reward_std": (1 - frac) * 0.35,
        }
        log = RewardLog(m["step"] + 1, m["reward"], cols, {}, (), "t", "t", "reward")
        d = diagnose(log)
        # dynamical_instability's reward-curve tests are the ar1 cell's; its grad_norm branch:
        assert d.mode("dynamical_instability").evidence["grad_norm_growth"] < 2
        bad += [v.name for v in d.modes if v.detected and v.name not in SKIP]
        checks = (entropy_floor, length_vs_reward, reward_function_divergence)
        bad += [f.__name__ for f in checks if f(log, CheckOptions()).status == "warn"]
    assert len(bad) <= 2, bad  # the old format share: 14 reward_hacking (seed 22)
