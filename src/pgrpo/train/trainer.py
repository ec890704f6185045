"""The GRPO training loop.

    result = train(load_config("run.yaml", ["steps=20"]))

One step, in the paper's order (`train_step`, top to bottom): sample B prompts x G completions;
score them (each reward call isolated; failures score the reward range's low end, counted);
advantages from the registry (these three are `pgrpo.train.rollout`, shared with the probe,
gradrank and evaluate); K optimizer steps over minibatches with the old log-probs kept fixed
(gradients from `pgrpo.train.update`); diagnostics; one line of `RUN_DIR/metrics.jsonl`. `train`
wraps it with set-up, periodic online forecasts, atomic checkpoints and resume, under the run
folder's lock (`runlock`), with SIGINT/SIGTERM deferred to the end of the step (`interrupts`);
what each promise means: docs/reliability.md. Seeded and deterministic on CPU: same config, same
parameters, same log (up to the timing fields).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pgrpo.core.degeneracy import group_stats
from pgrpo.core.losses import token_mean
from pgrpo.errors import RunFailed
from pgrpo.train import checkpoint as ckpt
from pgrpo.train.config import RunConfig, save_config
from pgrpo.train.generation import Rollout
from pgrpo.train.interrupts import StopFlag, interrupted, stop_on_signals
from pgrpo.train.log import CONFIG_FILE, MetricsLog, Reporters, read_metrics
from pgrpo.train.online import OnlineForecaster
from pgrpo.train.resume import plan_start, restore_log, step_of
from pgrpo.train.rollout import batch_advantages, collect
from pgrpo.train.runlock import run_lock
from pgrpo.train.setup import _resolve, _Run, build_run, release_freed_memory
from pgrpo.train.update import (
    minibatch_gradient,
    minibatches,
    reference_log_probs,
    scoring_temperatures,
    sequence_scores,
)

TIMING_KEYS = ("time/generate_s", "time/score_s", "time/update_s", "tokens_per_second")


@dataclass(frozen=True)
class TrainResult:
    """run_dir: where the log, config and checkpoints are; history: one metrics dict per step."""

    run_dir: Path
    history: list[dict[str, Any]]
    notes: tuple[str, ...] = ()

    @property
    def rewards(self) -> list[float]:
        return [float(h["reward"]) for h in self.history]


# ---------------------------------------------------------------------------------------------
# One step
# ---------------------------------------------------------------------------------------------


def train_step(run: _Run, step: int) -> dict[str, Any]:
    """Sample, score, advantages, K optimizer steps, diagnostics. Returns the step's log line."""
    cfg, task, g = run.config, run.task, run.config.grpo.group_size
    # 1-2. Sample B prompts x G completions (position j of a group at temperatures[j]) and score
    # them: errors, hangs and non-finite rewards score the low end of the run's reward range (0
    # without one) and are counted, never fatal; so does an empty completion. The same path as
    # the probe, gradrank and evaluate (`train.rollout`).
    t0 = time.perf_counter()
    batch = collect(run.policy, task, run.stream.next_batch(cfg.grpo.batch_prompts), cfg)
    rollout, rewards, scored = batch.rollout, batch.rewards, batch.score
    t2 = time.perf_counter()
    # 3. Advantages from the registry (group-relative, sign, dual anchor, ...).
    adv = batch_advantages(batch, task, cfg.grpo)
    # 4. K optimizer steps over M minibatches; old log-probs fixed at sampling time.
    update = optimize(run, rollout, adv.advantages)
    t3 = time.perf_counter()
    # 5. Diagnostics: degeneracy, spread, per-temperature reward, errors, timings.
    stats = group_stats(
        rewards, group_size=g, nan=cfg.grpo.nan_rewards, reward_range=batch.reward_range
    ).metrics
    lengths = rollout.completion_mask.sum(1).double()
    metrics: dict[str, Any] = {
        "step": step,
        **{k: stats[k] for k in _GROUP_KEYS},
        **update,
        "completions/mean_length": float(lengths.mean()),
        "completions/clipped_ratio": float(rollout.truncated.double().mean()),
        "completions/empty": int(batch.empty.sum()),
        **_per_temperature(rewards, rollout.temperatures, run.temperatures),
        **adv.metrics,
        "group_size": g,
        "batch_prompts": cfg.grpo.batch_prompts,
        "refresh_interval": cfg.grpo.refresh_interval,
        "beta1": cfg.optim.beta1,
        "optimizer_step": run.optimizer_steps,
        "precision": run.policy.precision.name,
        "attention": run.policy.attention,
        "reward_errors": scored.errors,
        "reward_timeouts": scored.timeouts,
        **_task_metrics(task, rollout.texts, batch.per_completion, scored.rewards),
        "time/generate_s": t2 - t0 - scored.seconds,
        "time/score_s": scored.seconds,
        "time/update_s": t3 - t2,
        "tokens_per_second": rollout.num_tokens / max(t3 - t0, 1e-9),
    }
    if scored.error_messages:
        metrics["reward_error_messages"] = list(scored.error_messages)
    return metrics


def optimize(run: _Run, rollout: Rollout, advantages: torch.Tensor) -> dict[str, float]:
    """K = refresh_interval optimizer steps; step k uses minibatch k mod M. The old log-probs are
    those of the sampling policy (recomputed once when K > 1; when K = 1 the policy has not moved
    yet, so they equal the current log-probs, detached, and the ratio is exactly 1)."""
    cfg, policy = run.config, run.policy
    k_steps, m = cfg.grpo.refresh_interval, cfg.grpo.num_minibatches
    temps = scoring_temperatures(rollout, cfg)
    batches = minibatches(rollout.input_ids.shape[0], cfg)
    # with M > 1 minibatches the first step sees 1/M of the batch: the on-policy entropy of the
    # whole batch comes from the old log-probs' pass (no extra forward)
    whole = (
        sequence_scores(policy, cfg, rollout, temps, with_entropy=m > 1) if k_steps > 1 else None
    )
    old = whole.log_probs if whole is not None else None
    ref = reference_log_probs(policy, rollout, cfg)  # at the KL's temperatures
    params = policy.trainable_parameters()
    records = []
    for k in range(k_steps):
        run.optimizer.zero_grad(set_to_none=True)
        result = minibatch_gradient(
            policy, cfg, rollout, batches[k % m], advantages, old, ref, temps, first=(k == 0)
        )
        grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.optim.max_grad_norm or math.inf)
        check_finite(run, loss=float(result.loss.detach()), grad_norm=float(grad_norm))
        lr = run.scheduler.get_last_lr()[0]
        run.optimizer.step()
        run.scheduler.step()
        run.optimizer_steps += 1
        records.append(
            {
                **result.metrics,
                "loss": float(result.loss.detach()),
                "grad_norm": float(grad_norm),
                "learning_rate": lr,
                "refresh_lag": float(k),
            }
        )
    run.optimizer.zero_grad(set_to_none=True)  # free the gradients while sampling (memory)
    release_freed_memory(cfg.grpo.release_memory)
    out = {key: float(np.mean([r[key] for r in records if key in r])) for key in records[0]}
    out["learning_rate"] = records[0]["learning_rate"]  # the lr that met these rollouts first
    out["entropy"] = (  # on-policy entropy of the samples
        float(token_mean(whole.entropy, rollout.completion_mask))
        if whole is not None and whole.entropy is not None
        else records[0].get("entropy", math.nan)
    )
    return out


class TrainingDiverged(RunFailed):
    """A step's loss, gradient norm or updated weights are NaN or infinite: the run stops before
    it applies or saves them, so the last checkpoint on disk is the last good state."""


_LABELS = {"loss": "loss", "grad_norm": "gradient norm", "weights": "largest |weight|"}


def check_finite(run: _Run, *, step: int | None = None, **values: float) -> None:
    """TrainingDiverged naming the first non-finite value (`loss=`, `grad_norm=`, `weights=`) and
    the likely fix; step: the log step (None: the one in flight). Nothing is written here."""
    bad = next(((k, v) for k, v in values.items() if not math.isfinite(v)), None)
    if bad is None:
        return
    cfg = run.config
    step = step if step is not None else run.optimizer_steps // cfg.grpo.refresh_interval + 1
    latest = ckpt.latest_checkpoint(cfg.run_dir)
    kept = f"the last good checkpoint is {latest}" if latest else "no checkpoint was written"
    clip = "" if cfg.optim.max_grad_norm else " with gradient clipping off (optim.max_grad_norm=0)"
    lower = min(cfg.optim.lr / 10, 1e-4)
    cause, fix = f"optim.lr={cfg.optim.lr:g} is too high{clip}", f"a lower optim.lr, e.g. {lower:g}"
    coldest = min(run.temperatures)
    if cfg.loss.uses_reference and cfg.loss.kl_temperature == "sampled" and coldest < 1:
        # the tempered log-ratio is the logits' drift / T, so their KL grows as T falls
        cause += (
            f", or because the KL is taken between the policies tempered at T = {coldest:g} "
            "(loss.kl_temperature=sampled), whose log-ratio grows as 1/T"
        )
        fix += " or loss.kl_temperature=one (the KL at T = 1)"
    raise TrainingDiverged(
        f"training diverged at step {step}: the {_LABELS[bad[0]]} is {bad[1]}, most likely "
        f"because {cause}; start the run afresh (--overwrite) with {fix}; {kept}, and final/ is "
        "not written"
    )


def _max_abs_weight(run: _Run) -> float:
    """max |w| over the trainable parameters; NaN or inf when one is not finite (aminmax needs
    no temporary the size of a parameter and propagates NaN, where Python's max skips it)."""
    ends = [torch.stack(p.detach().aminmax()).float() for p in run.policy.trainable_parameters()]
    return float(torch.cat(ends).abs().amax()) if ends else 0.0


_GROUP_KEYS = (
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "degeneracy/all_pass",
    "degeneracy/all_fail",
    "degeneracy/iid_prediction",
    "reward_within_group_std",
)


def _per_temperature(
    rewards: torch.Tensor, row_temps: torch.Tensor, schedule: tuple[float, ...]
) -> dict[str, float]:
    if len(set(schedule)) < 2:
        return {}
    return {
        f"reward/temperature_{t:g}": float(rewards[row_temps == t].double().mean())
        for t in sorted(set(schedule))
    }


def _task_metrics(task: Any, texts: list[str], examples: list[dict], rewards: list[float]):
    fn = getattr(task, "metrics", None)
    if not callable(fn):
        return {}
    try:
        return {f"task/{k}": float(v) for k, v in fn(texts, examples, rewards).items()}
    except Exception as exc:  # task metrics are diagnostics: never stop training for them
        return {"task/metrics_error": f"{type(exc).__name__}: {exc}"[:200]}


# ---------------------------------------------------------------------------------------------
# The run loop
# ---------------------------------------------------------------------------------------------


def train(
    config: RunConfig,
    *,
    resume: bool = False,
    overwrite: bool = False,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    on_note: Callable[[str], None] | None = None,
) -> TrainResult:
    """Run GRPO for `config.run.steps` steps (or the rest of them, with `resume=True`).

    Holds the run folder's lock throughout (RunLockedError if another process writes it);
    `on_note` gets each line the user should read (what a resume changed or repaired).
    SIGINT/SIGTERM end the run after the step in flight with a checkpoint and RunInterrupted."""
    cfg = _resolve(config)
    run_dir = cfg.run_dir
    notes: list[str] = []

    def note(text: str) -> None:
        notes.append(text)
        if on_note is not None:
            on_note(text)

    if resume and not run_dir.is_dir():  # before the lock, which would create the folder
        raise FileNotFoundError(
            f"nothing to resume: {run_dir} does not exist; start the run without --resume"
        )
    with run_lock(run_dir), stop_on_signals(run_dir) as stop:
        start = plan_start(cfg, run_dir, resume=resume, overwrite=overwrite)
        for text in start.notes:
            note(text)
        at = step_of(start.checkpoint) if start.checkpoint is not None else None
        if start.done and not start.resumed and final_complete(run_dir, at):
            return TrainResult(run_dir, read_metrics(run_dir), tuple(notes))  # nothing to do
        # (a resume that ends the run at its checkpoint goes on: its notes, config.yaml and
        # final/ are written below even where final/ already holds that step's model)
        if start.done and not start.resumed:  # final/ not written (disk full, killed while
            # saving), or written at another step (a finished run resumed further, stopped)
            note(f"{run_dir}/final is missing, incomplete, of another step or without the "
                 f"record of its step (written before pgrpo kept one): writing it from the "
                 f"checkpoint at step {at}")  # fmt: skip
        reporters = Reporters(cfg.run.report_to, run_dir, cfg.to_dict())  # fails before the model
        run = build_run(cfg, resume=start.checkpoint is not None)
        base = ckpt.frozen_digest(run.policy.model)
        first = 1
        if start.checkpoint is not None:
            state = ckpt.load_checkpoint(
                start.checkpoint,
                model=run.policy.model,
                optimizer=run.optimizer,
                scheduler=run.scheduler,
                base_digest=base,
            )
            run.stream.restore(state.data_position)
            run.optimizer_steps = state.step * cfg.grpo.refresh_interval
            log, repaired = restore_log(run_dir, state, ends=start.done)
            for text in (*start.resumed, *repaired):  # once the checkpoint is known to load
                note(text)
            was = next((r.get("precision") for r in reversed(read_metrics(run_dir))), None)
            if was is not None and was != run.policy.precision.name:  # model.precision=auto
                note(f"precision {was} -> {run.policy.precision.name} (model.precision="
                     f"{cfg.model.precision} resolves on this machine to another mode): the "
                     "resumed steps are not bit for bit the uninterrupted run's")  # fmt: skip
            first = state.step + 1
        else:
            log = MetricsLog(run_dir)
        with ckpt.disk_full_is_one_line(run_dir / CONFIG_FILE, "the run's config"):
            save_config(run.config, run_dir / CONFIG_FILE)  # task.reward_range resolved
        try:
            _run_steps(run, log, reporters, first, base, stop, on_step)
        finally:
            reporters.close()
        with ckpt.disk_full_is_one_line(run_dir / "final", "the final model"):
            _save_final(run, run_dir)
    return TrainResult(run_dir=run_dir, history=read_metrics(run_dir), notes=tuple(notes))


def _run_steps(
    run: _Run,
    log: MetricsLog,
    reporters: Reporters,
    first: int,
    base: str,
    stop: StopFlag,
    on_step: Callable[[dict[str, Any]], None] | None,
) -> None:
    """Steps `first`..run.steps: step, forecast, log, checkpoint. After a SIGINT/SIGTERM the step
    in flight finishes and is checkpointed, then RunInterrupted ends the run; a signal that
    lands between steps (in `on_step`, say) checkpoints the last finished step the same way."""
    cfg, run_dir = run.config, run.config.run_dir
    history = read_metrics(run_dir)
    forecaster = OnlineForecaster(cfg, history)
    saved = first - 1  # the step the latest checkpoint holds (or the start: nothing to save)
    for step in range(first, cfg.run.steps + 1):
        if stop.signum is not None:  # during set-up, or after the previous step's checkpoint
            if saved != step - 1:
                _checkpoint(run, log, step - 1, base)
            raise interrupted(stop.signum, run_dir)
        metrics = train_step(run, step)
        metrics.update(forecaster.update(metrics))
        log.append(metrics)
        reporters.log(metrics)
        history.append(metrics)
        every = cfg.run.checkpoint_every
        if step == cfg.run.steps or (every and step % every == 0) or stop.signum is not None:
            saved = _checkpoint(run, log, step, base)
        if on_step is not None:
            on_step(metrics)


def _checkpoint(run: _Run, log: MetricsLog, step: int, base: str) -> int:
    """Checkpoint the state after `step` (checked finite first, and so final/ too); returns it."""
    check_finite(run, step=step, weights=_max_abs_weight(run))
    ckpt.save_checkpoint(
        run.config.run_dir,
        step=step,
        model=run.policy.model,
        optimizer=run.optimizer,
        scheduler=run.scheduler,
        data_position=run.stream.position(),
        metrics_offset=log.offset(),
        base_digest=base,
    )
    return step


def _save_final(run: _Run, run_dir: Path) -> None:
    """The trained model (or adapter) in transformers format, for `from_pretrained`: written to a
    temporary folder, then renamed, so final/ is whole or absent (a disk that filled while
    writing left a final/ without weights that no resume rewrote)."""
    final = run_dir / "final"
    tmp = run_dir / f".tmp-final-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        run.policy.model.save_pretrained(str(tmp))
        run.policy.tokenizer.save_pretrained(tmp)
        step = {"step": run.config.run.steps}
        (tmp / ckpt.FINAL_STEP_FILE).write_text(json.dumps(step) + "\n")
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def final_complete(run_dir: Path, step: int | None = None) -> bool:
    """Whether run_dir/final holds a model's (or an adapter's) weights, and, given `step`, the
    model of that step by its record (`checkpoint.final_step`; a final/ without one, written
    before session 37, is read as another step's and rewritten from the checkpoint: a finished
    run resumed further and stopped kept the earlier final/ beside a later checkpoint, and a
    later resume that had nothing to train called it complete)."""
    final = Path(run_dir) / "final"
    if not (final.is_dir() and (any(final.glob("*.safetensors")) or any(final.glob("*.bin")))):
        return False
    return step is None or ckpt.final_step(run_dir) == step
