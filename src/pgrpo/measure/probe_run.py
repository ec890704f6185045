"""`pgrpo probe` for a run config: probe kappa at the run's initial policy (or a checkpoint), say
what was measured, and what the ROM predicts with it, where that prediction is supported.

The probe measures the local slope of the restoring force at the probed policy
(`pgrpo.measure.probe`). The model's kappa is that slope at the fixed point, so a prediction from
a probe is supported only near the run's plateau: on the exact bandit the probe at the initial
policy reads -0.126 to -0.063 where the fixed-point kappa is 0.047-0.164 and the reward curve
implies 0.117-0.255 (bench/probe_init_bandit.py; docs/diagnostics.md, `pgrpo probe`). A checkpoint
counts as near its plateau when the run's own log up to it reads `plateau` or `saturated`
(`pgrpo.diagnose.progress`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pgrpo.core.schedules import LRHorizon
from pgrpo.errors import UserError
from pgrpo.measure.config import ProbeConfig
from pgrpo.measure.probe import ProbeResult, StepTooLarge, probe_curvature

MEASURED = "the local slope of the restoring force at the probed policy (-u.Hu / g.u per unit lr)"
INIT_CAVEAT = (
    "a prediction from this kappa is not supported by this measurement: the model needs the "
    "stiffness at the run's plateau, and the probed policy is {where}; on the exact bandit "
    "(G 8, kl 0.2 / 0.05, p0 0.1 / 0.3) the probe at the initial policy read -0.126 to -0.063 "
    "where the plateau's kappa is 0.047-0.164 and the reward curve implies 0.117-0.255 "
    "(bench/probe_init_bandit.py); probe near the plateau (--run RUN_DIR once `pgrpo diagnose` "
    "reads plateau) or fit the curve (`pgrpo fit`)"
)
KNOBS = (
    "raise grpo.group_size, grpo.batch_prompts, generation.max_new_tokens or --direction-batches"
)
NEAR_PLATEAU = ("plateau", "saturated")

PLATEAU_CAVEAT = (
    "the probe measured the plateau's stiffness, the quantity the model needs; the linear model "
    "may still miss the climb to it: on the exact bandit the plateau's own kappa predicts the "
    "reward curve at R^2 0.96 / 0.88 with KL 0.2 but 0.38 / -1.10 with KL 0.05, where the force "
    "is far from linear (bench/probe_init_bandit.py)"
)
"""Said beside a prediction marked supported (`prediction_supported` means the estimand is the
model's, not that the curve will follow it)."""


def plateau_at(checkpoint: Path) -> tuple[bool, str]:
    """(near the plateau?, why) for a trainer checkpoint: the progress verdict of the run's log
    as the checkpoint saved it (checkpoint/metrics.jsonl), `plateau` or `saturated` counting."""
    from pgrpo.diagnose.progress import assess_signals
    from pgrpo.diagnose.signals import signals_from_log
    from pgrpo.logs import read_log

    log = Path(checkpoint) / "metrics.jsonl"
    try:
        verdict = assess_signals(signals_from_log(read_log(log)), fit=False)
    except (OSError, ValueError) as exc:
        return False, f"the run's log at the checkpoint could not be judged ({exc})"
    return verdict.label in NEAR_PLATEAU, f"the run's log up to it reads '{verdict.label}'"


def probe_run_config(config: Any, cfg: ProbeConfig, *, checkpoint: Any = None) -> dict[str, Any]:
    """Probe kappa for a `pgrpo.train.config.RunConfig` (model, task, G, B, minibatches,
    temperatures, estimator, transform, loss, optimizer) at its initial policy (or at a trainer
    `checkpoint` folder), then what the ROM predicts with it (`pgrpo.dynamics.predict`) with the
    reduction of the run's optimizer (`optim.name`; AdamW's 'adam': kappa preconditioned, no K*):
    regime, tau (the exact mean's decay time, -K / ln rho of the window map), K*, over the run's
    remaining optimizer steps (run.steps x K, less the checkpoint's; none at the run's end, where
    there is no prediction, said in the note) with its lr schedule, from the probed policy's
    measured mean reward. The prediction carries `prediction_supported`
    (near the plateau only) and, where not, the caveat.
    cfg.preconditioner unset: the optimizer's ('adam' for adam, 'sgd' for sgd_momentum); one that
    contradicts it is measured and warned about, with no prediction (its kappa is in other units).
    The probe step is cfg.step_lrs in units of the run's lr. Raises UserError when the step left
    the linear regime or kappa is not finite (lower --step-lrs), or the gradient is zero."""
    from torch.nn.utils import vector_to_parameters

    from pgrpo.measure import probe as mp
    from pgrpo.train import rollout
    from pgrpo.train.optimizers import TRAIN_OPTIMIZERS
    from pgrpo.train.setup import optimizer_steps_total, resolve_config, run_lr_horizon

    c = resolve_config(config)
    if c.model.precision == "auto" and c.model.dtype == "float32":
        # a finite difference of gradients at eps ~ 10 lr is below bf16's rounding (2^-8
        # relative): probe in fp32 unless bf16 is asked for explicitly
        c = replace(c, model=replace(c.model, precision="fp32"))
    reduction = TRAIN_OPTIMIZERS.get(c.optim.name).reduction
    preconditioner = cfg.preconditioner or ("adam" if reduction == "adam" else "sgd")
    cfg = replace(cfg, epsilon=cfg.step_lrs * c.optim.lr, preconditioner=preconditioner)
    task, policy = rollout.load_task_and_policy(c, checkpoint=checkpoint)
    grad_fn, theta0 = mp.lm_gradient(policy, task, task.load(c.task.split), c)
    params = policy.trainable_parameters()
    try:
        result = probe_curvature(grad_fn, theta0, cfg)
    except StepTooLarge as exc:
        raise UserError(
            f"{exc}, at --step-lrs {cfg.step_lrs:g} x lr = {cfg.epsilon:g}",
            "lower --step-lrs (default 10)",
        ) from None
    except ValueError as exc:
        if "expected gradient is zero" not in str(exc):
            raise
        raise UserError(str(exc), KNOBS) from None
    finally:
        with torch.no_grad():
            vector_to_parameters(theta0.to(params[0].dtype), params)
    batch = 0 if checkpoint is None else int(Path(checkpoint).name.removeprefix("step-"))
    dir_seeds = mp.probe_seeds(cfg.seed, cfg.n_direction, cfg.n_pairs)[0]
    rewards = [
        grad_fn.reward_means[s] for s in dir_seeds if s in getattr(grad_fn, "reward_means", {})
    ]
    out: dict[str, Any] = {
        **result.to_dict(),
        "measured": MEASURED,
        "probed_at": "initial policy" if checkpoint is None else f"checkpoint step-{batch}",
        "reward_mean": float(np.mean(rewards)) if rewards else None,
        "optimizer": reduction,
        "preconditioner": preconditioner,
        "lr": c.optim.lr,
        "beta1": c.optim.beta1,
        "beta2": c.optim.beta2,
        "schedule": c.optim.schedule,
        "warmup_steps": c.optim.warmup_steps,
        "refresh_interval": c.grpo.refresh_interval,
        "num_minibatches": c.grpo.num_minibatches,
        "group_size": c.grpo.group_size,
        "batch_prompts": c.grpo.batch_prompts,
        "rollout_batches": c.run.steps,
        "start_step": batch * c.grpo.refresh_interval,  # optimizer steps before the probed policy
        "precision": policy.precision.name,
    }
    # the prediction's horizon: the run's optimizer steps left after the probed policy's
    horizon = run_lr_horizon(c, out["start_step"])
    out["total_steps"] = optimizer_steps_total(c)
    out["steps"] = 0 if horizon is None else horizon.steps
    out["peak_lr"] = None if horizon is None else horizon.peak
    if checkpoint is None:
        near, why = False, "the initial policy (before any step)"
    else:
        near, why = plateau_at(Path(checkpoint))
        why = f"checkpoint step-{batch}: {why}"
    out.update(near_plateau=near, plateau_evidence=why)
    out.update(_verdict(result, cfg, c, reduction, out, horizon))
    return out


def _verdict(
    result: ProbeResult,
    cfg: ProbeConfig,
    c: Any,
    reduction: str,
    out: dict[str, Any],
    horizon: LRHorizon | None,
) -> dict[str, Any]:
    """noise_dominated, warnings, prediction (or None), prediction_supported, caveat and note for
    a probe of run config `c` (resolved; reduction: its optimizer's) with cfg.preconditioner;
    out: what probe_run_config has so far (probed_at, start_step, total_steps, near_plateau,
    plateau_evidence); horizon: the lr of the run's remaining optimizer steps, None where none
    is left (no prediction)."""
    kappa, n = result.kappa, len(result.samples)
    if not (math.isfinite(kappa) and math.isfinite(result.stderr)):
        raise UserError(
            f"kappa is {kappa} +- {result.stderr} (not finite): the probe step "
            f"--step-lrs {cfg.step_lrs:g} x lr = {cfg.epsilon:g} took the weights out of range",
            "lower --step-lrs (default 10)",
        )
    verdict: dict[str, Any] = {"prediction": None, "prediction_supported": False, "caveat": None}
    if result.zero_pairs == n:
        return {
            **verdict,
            "kappa": None,
            "stderr": None,
            "noise_dominated": True,
            "warnings": [],
            "note": "no measurement: every pair's gradients were equal (all groups degenerate "
            f"at both ends, as often as at the probed policy); {KNOBS}",
        }
    warnings = _warnings(result)
    noise_dominated = bool(result.stderr >= 0.5 * abs(kappa))
    if noise_dominated:
        warnings.append(
            f"the standard error ({result.stderr_kind}) is at least half of kappa "
            "(noise-dominated); raise --direction-batches, --pairs, grpo.batch_prompts or "
            "grpo.group_size before trusting it"
        )
    verdict.update(noise_dominated=noise_dominated, warnings=warnings)
    matching = "adam" if reduction == "adam" else "sgd"
    if cfg.preconditioner != matching:
        warnings.append(
            f"--preconditioner {cfg.preconditioner} contradicts optim.name={c.optim.name} (its "
            f"'{reduction}' prediction needs kappa measured with {matching}), so no prediction "
            "is made; drop --preconditioner"
        )
        verdict["note"] = (
            f"no prediction: kappa was measured with preconditioner {cfg.preconditioner}"
        )
        return verdict
    if horizon is None:
        verdict["note"] = (
            f"no prediction: the {out['probed_at']} is at or past the run's end (optimizer step "
            f"{out['start_step']} of run.steps x K = {out['total_steps']}), so no steps are left "
            "to predict; `pgrpo predict --kappa` forecasts a run of your choosing with this kappa"
        )
        return verdict
    if not kappa > 0:
        verdict["note"] = (
            "kappa <= 0 here: no restoring force at the probed policy (far below the plateau the "
            "force grows with the reward: the rise accelerates), or the probe is noise-dominated; "
            "no prediction"
        )
        return verdict
    verdict["prediction"] = _prediction(kappa, c, reduction, horizon)
    verdict["prediction_supported"] = bool(out["near_plateau"]) and not noise_dominated
    if not out["near_plateau"]:
        verdict["caveat"] = INIT_CAVEAT.format(where=out["plateau_evidence"])
    elif noise_dominated:
        verdict["caveat"] = "a prediction from a noise-dominated kappa is not supported"
    else:  # "supported": the probe measured the quantity the model needs, no more
        verdict["caveat"] = PLATEAU_CAVEAT
    return verdict


def _warnings(result: ProbeResult) -> list[str]:
    n, warnings = len(result.samples), []
    if result.zero_pairs:
        warnings.append(
            f"{result.zero_pairs} of {n} pairs had equal gradients at both ends (every group "
            f"degenerate) and count as kappa = 0; {KNOBS}"
        )
    if result.stderr_kind == "pairs only":
        warnings.append(
            "one direction batch: the standard error is over the pairs along this one direction "
            "and leaves out how kappa moves with the direction drawn; give --direction-batches 2 "
            "or more"
        )
    snr = result.metrics.get("direction_snr")
    if snr is not None and snr < 2:
        warnings.append(
            f"direction_snr = {snr:.2g} < 2: the direction g is mostly noise, which biases kappa "
            "low (on a known quadratic -8% at a median direction_snr of 2.8, -23% at 1.6: "
            "bench/probe_direction_noise.py); raise --direction-batches"
        )
    return warnings


def _prediction(kappa: float, c: Any, reduction: str, horizon: LRHorizon) -> dict[str, Any]:
    """predict() with the run's optimizer, over its remaining optimizer steps at their lr. The
    levels R_0 and R_inf do not enter regime, tau or K*; R_inf is not measured, so final_mean
    (the one level-dependent field) is left out."""
    from pgrpo.dynamics import predict

    pred = predict(
        horizon.peak,
        c.optim.beta1,
        kappa,
        refresh_interval=c.grpo.refresh_interval,
        group_size=c.grpo.group_size,
        batch_prompts=c.grpo.batch_prompts,
        n_steps=horizon.steps,
        lr_schedule=horizon.varying,
        optimizer=reduction,
        beta2=c.optim.beta2,
    ).to_dict()
    pred["final_mean"] = None  # needs R_inf, which the probe does not measure
    return pred
