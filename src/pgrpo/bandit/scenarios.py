"""Runs deliberately driven into each failure mode, to calibrate and test the diagnosis.

A softmax bandit per prompt (the exact mean-field reduction of docs/dynamics.md) with A arms of
three kinds: correct (true reward 1; the proxy verifier pays it with probability
`proxy_correct`), wrong (0) and hack (the proxy always pays 1, the true reward is 0). Each step
draws G arms per prompt, takes advantages from the registry and the loss from
`pgrpo.core.losses.policy_loss` (so the bandit sees exactly the trainer's objective), and moves the
logits with EMA momentum (v <- beta1 v + (1 - beta1) g; z <- z - lr v), reusing each batch of
rollouts for `refresh_interval` steps. With A = 2, no hack arm and every prompt at the reference
this is the two-arm model of `pgrpo.bandit.kappa`, whose exact kappa fixes K*.

`SCENARIOS` is the catalogue (a registry of builders with the modes a correct diagnosis finds);
`pgrpo.diagnose.calibration` runs the diagnosis on it. A run is written in the pgrpo format
(metrics.jsonl, config.yaml, eval.json with the exact true accuracy at a few steps) so that
`read_log` and `pgrpo diagnose` read it like any trainer run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import yaml

from pgrpo._registry import Registry
from pgrpo.core.advantages import compute_advantages
from pgrpo.core.losses import LossConfig, policy_loss
from pgrpo.core.stats import iid_degeneracy


@dataclass(frozen=True)
class Scenario:
    """One bandit run. Arms are ordered: correct, hack, wrong."""

    name: str
    steps: int = 150
    n_prompts: int = 64
    """B, prompts per step (each prompt keeps its own logits)."""
    arms: int = 2
    correct_arms: int = 1
    hack_arms: int = 0
    proxy_correct: float = 1.0
    """Probability that the proxy reward pays a correct arm (< 1: a lenient/strict verifier gap)."""
    group_size: int = 8
    lr: float = 0.5
    beta1: float = 0.9
    refresh_interval: int = 1
    kl_coef: float = 0.0
    estimator: str = "grpo"
    difficulty: tuple[float, float] | None = (2.0, 2.0)
    """Beta(a, b) of each prompt's initial success probability; None: all start at p_start."""
    p_start: float = 0.5
    hack_start: float = 0.03
    """Initial probability mass of each hack arm."""
    lengths: tuple[float, float, float] = (120.0, 400.0, 100.0)
    """Completion length of a correct, hack and wrong arm (tokens), for the length signal."""
    eval_every: int = 25
    seed: int = 0

    def __post_init__(self) -> None:
        if self.correct_arms < 1 or self.correct_arms + self.hack_arms >= self.arms:
            raise ValueError("need >= 1 correct arm and >= 1 wrong arm: arms > correct + hack")
        for name in ("steps", "n_prompts", "group_size", "refresh_interval", "eval_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class ScenarioRun:
    """columns: name -> [steps]; eval_points: (step, exact true accuracy); config: run config."""

    scenario: Scenario
    columns: dict[str, np.ndarray]
    eval_points: tuple[tuple[float, float], ...]
    config: dict[str, float | str] = field(default_factory=dict)


def _initial_logits(sc: Scenario, gen: torch.Generator) -> torch.Tensor:
    """[P, A] logits with correct mass p0 ~ Beta split evenly, hacks at hack_start each."""
    if sc.difficulty is None:
        p0 = torch.full((sc.n_prompts,), sc.p_start, dtype=torch.float64)
    else:
        beta = torch.distributions.Beta(*map(float, sc.difficulty))
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
        p0 = beta.sample((sc.n_prompts,)).to(torch.float64).clamp(1e-3, 1 - 1e-3)
    hack = sc.hack_arms * sc.hack_start
    n_wrong = sc.arms - sc.correct_arms - sc.hack_arms
    probs = torch.cat(
        [
            (p0 * (1 - hack) / sc.correct_arms)[:, None].expand(-1, sc.correct_arms),
            torch.full((sc.n_prompts, sc.hack_arms), sc.hack_start, dtype=torch.float64),
            ((1 - p0) * (1 - hack) / n_wrong)[:, None].expand(-1, n_wrong),
        ],
        dim=1,
    )
    return probs.log()


def _arm_tables(sc: Scenario) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """kind per arm (0 correct, 1 hack, 2 wrong), true reward per arm, length per arm: [A]."""
    kind = torch.tensor(
        [0] * sc.correct_arms
        + [1] * sc.hack_arms
        + [2] * (sc.arms - sc.correct_arms - sc.hack_arms)
    )
    true = (kind == 0).to(torch.float64)
    length = torch.tensor(sc.lengths, dtype=torch.float64)[kind]
    return kind, true, length


def _step_metrics(rewards: torch.Tensor, g: int) -> dict[str, float]:
    """Group statistics of one batch of proxy rewards [P*G] (binary)."""
    r = rewards.view(-1, g)
    spread = r.std(1) if g > 1 else torch.zeros(r.shape[0], dtype=r.dtype)
    mean = float(rewards.mean())
    return {
        "reward": mean,
        "reward_std": float(rewards.std()),
        "frac_reward_zero_std": float((spread == 0).double().mean()),
        "degeneracy/all_pass": float((r.min(1).values == 1).double().mean()),
        "degeneracy/all_fail": float((r.max(1).values == 0).double().mean()),
        "degeneracy/iid_prediction": iid_degeneracy(mean, g),
    }


def _policy_metrics(z: torch.Tensor, ref: torch.Tensor, true: torch.Tensor) -> dict[str, float]:
    logp, ref_logp = torch.log_softmax(z, -1), torch.log_softmax(ref, -1)
    p = logp.exp()
    return {
        "entropy": float(-(p * logp).sum(-1).mean()),
        "kl": float((p * (logp - ref_logp)).sum(-1).mean()),
        "true_accuracy": float((p * true).sum(-1).mean()),
    }


def simulate(sc: Scenario) -> ScenarioRun:
    """Run the scenario; deterministic given `sc.seed`. Single-threaded: the tensors are tiny and
    torch's thread pool only adds overhead (10x on a busy 2-core machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _simulate(sc)
    finally:
        torch.set_num_threads(threads)


def _simulate(sc: Scenario) -> ScenarioRun:
    gen = torch.Generator().manual_seed(sc.seed)
    kind, true, length = _arm_tables(sc)
    z = _initial_logits(sc, gen).requires_grad_(True)
    ref = z.detach().clone()
    velocity = torch.zeros_like(z)
    # the textbook k3, uncapped (LossConfig.k3_max), as documented
    cfg = LossConfig(policy_loss="reinforce", kl_coef=sc.kl_coef, k3_max=None)
    p_, g_ = sc.n_prompts, sc.group_size
    rows, evals = [], []
    for step in range(sc.steps):
        if step % sc.refresh_interval == 0:  # draw new rollouts at the window start
            with torch.no_grad():
                probs = torch.softmax(z, -1)
            if not torch.isfinite(probs).all():  # diverged: log NaN from here on, like a real run
                rows += [dict.fromkeys(rows[-1], math.nan)] * (sc.steps - step)
                break
            with torch.no_grad():
                arms = torch.multinomial(probs, g_, replacement=True, generator=gen)  # [P, G]
                paid = torch.rand(arms.shape, generator=gen, dtype=torch.float64) < sc.proxy_correct
                k = kind[arms]
                rewards = ((k == 1) | ((k == 0) & paid)).to(torch.float64).flatten()
                old = torch.log_softmax(z, -1).gather(1, arms).flatten()[:, None]
            adv = compute_advantages(sc.estimator, rewards, group_size=g_).advantages
            step_rows = _step_metrics(rewards, g_)
            step_rows["completions/mean_length"] = float(length[arms].mean())
        if step % sc.eval_every == 0 or step == sc.steps - 1:
            evals.append((float(step), _policy_metrics(z.detach(), ref, true)["true_accuracy"]))
        logp = torch.log_softmax(z, -1)
        lp = logp.gather(1, arms).flatten()[:, None]
        ref_lp = torch.log_softmax(ref, -1).gather(1, arms).flatten()[:, None]
        mask = torch.ones_like(lp)
        res = policy_loss(lp, old, adv, mask, cfg, ref_log_probs=ref_lp if sc.kl_coef else None)
        (grad,) = torch.autograd.grad(res.loss * p_, z)  # sum over prompts of per-prompt means
        with torch.no_grad():
            velocity.mul_(sc.beta1).add_(grad, alpha=1 - sc.beta1)
            z -= sc.lr * velocity
        pol = _policy_metrics(z.detach(), ref, true)
        rows.append(
            {
                **step_rows,
                "entropy": pol["entropy"],
                "kl": pol["kl"],
                "grad_norm": float(grad.norm()),
            }
        )
    columns = {key: np.array([r[key] for r in rows]) for key in rows[0]}
    columns["step"] = np.arange(sc.steps, dtype=float)
    config = {
        "scenario": sc.name,
        "optimizer": "sgd_momentum",  # the EMA momentum update above
        "learning_rate": sc.lr,
        "beta1": sc.beta1,
        "refresh_interval": sc.refresh_interval,
        "group_size": sc.group_size,
        "batch_prompts": sc.n_prompts,
        "kl_coef": sc.kl_coef,
        "estimator": sc.estimator,
        "seed": sc.seed,
    }
    return ScenarioRun(sc, columns, tuple(evals), config)


def write_run(run: ScenarioRun, run_dir: str | Path) -> Path:
    """Write metrics.jsonl, config.yaml and (when the run has eval points) eval.json, the
    `pgrpo eval` format, into run_dir."""
    out = Path(run_dir)
    out.mkdir(parents=True, exist_ok=True)
    n = len(run.columns["step"])
    with (out / "metrics.jsonl").open("w") as fh:
        for i in range(n):
            rec = {k: (int(v[i]) if k == "step" else float(v[i])) for k, v in run.columns.items()}
            rec.update(
                {k: run.config[k] for k in ("group_size", "refresh_interval", "batch_prompts")}
            )
            rec["learning_rate"], rec["beta1"] = run.config["learning_rate"], run.config["beta1"]
            fh.write(json.dumps(rec) + "\n")
    scen = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(run.scenario).items()}
    (out / "config.yaml").write_text(yaml.safe_dump({**run.config, "bandit_scenario": scen}))
    results = [
        {
            "name": f"step{int(s)}",
            "step": s,
            "accuracy": a,
            "n_problems": run.scenario.n_prompts,
            "accuracy_se": 0.0,  # the exact true accuracy, not a sample of it
        }
        for s, a in run.eval_points
        if math.isfinite(a)  # a diverged policy's accuracy is NaN: no measurement to record
    ]
    if results:
        doc = {"kind": "pgrpo.eval", "results": results}
        (out / "eval.json").write_text(json.dumps(doc, indent=1))
    return out


def recursion_run(
    name: str,
    *,
    kappa: float,
    lr: float,
    beta1: float,
    refresh_interval: int,
    steps: int = 200,
    r_inf: float = 0.8,
    r_0: float = 0.2,
    noise: float = 0.02,
    force_noise: float = 0.01,
    seed: int = 0,
) -> ScenarioRun:
    """A reward curve from the linear ROM recursion (docs/dynamics.md, "The model"):
        x_{n+1} - x_n = beta1 (x_n - x_{n-1}) - (1 - beta1) (a x_{s(n)} + force noise),
    a = lr kappa, s(n) = K floor(n / K), R = clip(r_inf + x, 0, 1) + measurement `noise`.
    The cleanest run with K above (or below) the threshold K*; the config carries kappa, lr,
    beta1 and K so that the margin K / K* can be checked."""
    # Not `dynamics.simulate_recursion`: this run clips the state to [0, 1] at every step (a reward
    # cannot leave it), which the linear recursion deliberately does not.
    rng = np.random.default_rng(seed)
    a, k = lr * kappa, refresh_interval
    x = np.zeros(steps + 1)
    x[0] = x[1] = r_0 - r_inf
    for n in range(1, steps):
        force = -a * x[k * (n // k)] + force_noise * rng.normal()  # gradient noise, then EMA
        x[n + 1] = x[n] + beta1 * (x[n] - x[n - 1]) + (1 - beta1) * force
        x[n + 1] = np.clip(x[n + 1], -r_inf, 1 - r_inf)  # a reward cannot leave [0, 1]
    reward = r_inf + x[:steps] + noise * rng.normal(size=steps)
    columns = {"step": np.arange(steps, dtype=float), "reward": np.clip(reward, 0, 1)}
    sc = Scenario(name, steps=steps, lr=lr, beta1=beta1, refresh_interval=k, seed=seed)
    config = {
        "scenario": name,
        "optimizer": "sgd_momentum",  # the heavy-ball recursion above
        "learning_rate": lr,
        "beta1": beta1,
        "refresh_interval": k,
        "group_size": sc.group_size,
        "batch_prompts": sc.n_prompts,
        "kappa": kappa,
    }
    return ScenarioRun(sc, columns, (), config)


@dataclass(frozen=True)
class CatalogEntry:
    """builder(seed) -> run; expected: modes a correct diagnosis detects; allowed: modes that are
    also genuinely present (e.g. a policy that concentrates before it diverges), not errors."""

    builder: Callable[[int], ScenarioRun]
    expected: frozenset[str]
    allowed: frozenset[str] = frozenset()


SCENARIOS: Registry[CatalogEntry] = Registry("scenario")
"""The catalogue of runs driven into each failure mode (and healthy ones), by name."""
SCENARIOS.add(
    "healthy",
    CatalogEntry(
        lambda seed: simulate(
            Scenario("healthy", arms=6, correct_arms=2, kl_coef=0.05, lr=0.5, seed=seed)
        ),
        frozenset(),
    ),
)
SCENARIOS.add(
    "healthy_two_arm_kl",
    CatalogEntry(
        lambda seed: simulate(
            Scenario("healthy_two_arm_kl", kl_coef=0.2, lr=0.3, difficulty=(2, 3), seed=seed)
        ),
        frozenset(),
    ),
)
SCENARIOS.add(
    "healthy_lag_below_threshold",
    CatalogEntry(
        lambda seed: recursion_run(
            "healthy_lag_below_threshold",
            kappa=1.0,
            lr=0.015,
            beta1=0.9,
            refresh_interval=8,
            steps=600,
            seed=seed,
        ),
        frozenset(),
    ),
)
SCENARIOS.add(
    "reward_hacking",
    CatalogEntry(
        lambda seed: simulate(
            Scenario(
                "reward_hacking",
                arms=5,
                correct_arms=1,
                hack_arms=1,
                proxy_correct=0.5,
                hack_start=0.05,
                lr=0.5,
                kl_coef=0.01,
                steps=200,
                seed=seed,
            )
        ),
        frozenset({"reward_hacking"}),
        frozenset({"policy_concentration"}),  # some seeds collapse onto the hack arm
    ),
)
SCENARIOS.add(
    "hard_prompts_small_group",
    CatalogEntry(
        lambda seed: simulate(
            Scenario(
                "hard_prompts_small_group",
                difficulty=(0.3, 6.0),
                group_size=2,
                lr=0.3,
                kl_coef=0.02,
                seed=seed,
            )
        ),
        frozenset({"advantage_degeneracy"}),
    ),
)
SCENARIOS.add(
    "high_lr_no_kl",
    CatalogEntry(
        lambda seed: simulate(
            Scenario("high_lr_no_kl", arms=6, correct_arms=2, lr=8.0, kl_coef=0.0, seed=seed)
        ),
        frozenset({"policy_concentration"}),
    ),
)
SCENARIOS.add(
    "refresh_above_threshold",
    CatalogEntry(
        lambda seed: recursion_run(
            "refresh_above_threshold",
            kappa=1.0,
            lr=0.015,
            beta1=0.9,
            refresh_interval=250,
            steps=600,
            seed=seed,
        ),
        frozenset({"dynamical_instability"}),
    ),
)
SCENARIOS.add(
    "stale_kl_divergence",
    CatalogEntry(
        lambda seed: simulate(
            Scenario(
                "stale_kl_divergence",
                difficulty=None,
                kl_coef=0.2,
                lr=6.0,
                refresh_interval=10,
                steps=300,
                seed=seed,
            )
        ),
        frozenset({"dynamical_instability"}),
        frozenset({"policy_concentration"}),  # lr 6 sharpens the policy before it blows up
    ),
)


def build(name: str, seed: int = 0) -> ScenarioRun:
    """The catalogue run `name` at `seed` (unknown names list the valid ones)."""
    return SCENARIOS.get(name).builder(seed)
