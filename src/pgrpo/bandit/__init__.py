"""The softmax-bandit testbed: vectorised GRPO runs on the trainer's own advantage and loss
pieces, the exact expected force and curvature (`force.finite_group_force`: the two-arm force at
any G for binary rewards; `kappa`: force and curvature with KL and clipping), and the
`pgrpo reproduce` experiments.

    from pgrpo.bandit import BanditConfig, simulate, ForceModel, curvature
    result = simulate(BanditConfig(num_runs=64, refresh_interval=4, lr=0.3, beta1=0.9))
    kappa = curvature(ForceModel("dr_grpo", 8, kl_reward_coef=0.5, p_ref=0.12)).kappa
"""

from pgrpo.bandit.kappa import Curvature, ForceModel, curvature, force
from pgrpo.bandit.policy import DifficultyConfig
from pgrpo.bandit.simulate import BanditConfig, BanditResult, simulate

__all__ = [
    "BanditConfig",
    "BanditResult",
    "Curvature",
    "DifficultyConfig",
    "ForceModel",
    "curvature",
    "force",
    "simulate",
]
