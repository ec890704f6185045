"""The GRPO training loop.

    result = train(load_config("run.yaml", ["steps=20"]))

One step, in the paper's order (`train_step`, top to bottom): sample B prompts x G completions;
score them (each reward call isolated, failures score 0 and are counted); advantages from the
registry; K optimizer steps over minibatches with the old log-probs kept fixed; diagnostics; one
line of `RUN_DIR/metrics.jsonl`. `train` wraps it with set-up, periodic online forecasts, atomic
checkpoints and resume, under the run folder's lock (`runlock`), with SIGINT/SIGTERM deferred to
the end of the step (`interrupts`); what each promise means: docs/reliability.md. Seeded and
deterministic on CPU: same config, same parameters, same log (up to the timing fields).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pgrpo.core.advantages import compute_advantages
from pgrpo.core.degeneracy import group_stats
from pgrpo.core.losses import LossResult, policy_loss
from pgrpo.train import checkpoint as ckpt
from pgrpo.train.config import RunConfig, save_config
from pgrpo.train.generation import Rollout, sample
from pgrpo.train.interrupts import StopFlag, interrupted, stop_on_signals
from pgrpo.train.log import CONFIG_FILE, MetricsLog, Reporters, read_metrics
from pgrpo.train.logprobs import TokenScores, completion_scores
from pgrpo.train.online import OnlineForecaster
from pgrpo.train.resume import plan_start, restore_log
from pgrpo.train.runlock import run_lock
from pgrpo.train.setup import _resolve, _Run, build_run

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
    # 1. Sample groups: B prompts x G completions; position j of a group uses temperatures[j].
    t0 = time.perf_counter()
    examples = run.stream.next_batch(cfg.grpo.batch_prompts)
    rollout = sample(
        run.policy,
        [task.prompt(e) for e in examples],
        group_size=g,
        temperatures=run.temperatures,
        max_new_tokens=cfg.generation.max_new_tokens,
    )
    t1 = time.perf_counter()
    # 2. Score: errors, hangs and non-finite rewards score 0 and are counted, never fatal.
    from pgrpo.tasks.scoring import score_completions

    per_completion = [e for e in examples for _ in range(g)]
    scored = score_completions(
        task, rollout.texts, per_completion, timeout_s=cfg.task.reward_timeout_s
    )
    rewards = torch.tensor(scored.rewards, dtype=torch.float32)
    empty = torch.tensor([not t.strip() for t in rollout.texts])
    rewards = torch.where(empty, torch.zeros_like(rewards), rewards)  # empty completion: 0
    t2 = time.perf_counter()
    # 3. Advantages from the registry (group-relative, sign, dual anchor, ...).
    adv = compute_advantages(
        cfg.grpo.advantage,
        rewards,
        group_size=g,
        transform=cfg.grpo.transform,
        transform_options=cfg.grpo.transform_options,
        nan=cfg.grpo.nan_rewards,
        **_advantage_options(cfg, task, per_completion),
    )
    # 4. K optimizer steps over M minibatches; old log-probs fixed at sampling time.
    update = optimize(run, rollout, adv.advantages)
    t3 = time.perf_counter()
    # 5. Diagnostics: degeneracy, spread, per-temperature reward, errors, timings.
    stats = group_stats(rewards, group_size=g, nan=cfg.grpo.nan_rewards).metrics
    lengths = rollout.completion_mask.sum(1).double()
    metrics: dict[str, Any] = {
        "step": step,
        **{k: stats[k] for k in _GROUP_KEYS},
        **update,
        "completions/mean_length": float(lengths.mean()),
        "completions/clipped_ratio": float(rollout.truncated.double().mean()),
        "completions/empty": int(empty.sum()),
        **_per_temperature(rewards, rollout.temperatures, run.temperatures),
        **adv.metrics,
        "group_size": g,
        "batch_prompts": cfg.grpo.batch_prompts,
        "refresh_interval": cfg.grpo.refresh_interval,
        "beta1": cfg.optim.beta1,
        "optimizer_step": run.optimizer_steps,
        "reward_errors": scored.errors,
        "reward_timeouts": scored.timeouts,
        **_task_metrics(task, rollout.texts, per_completion, scored.rewards),
        "time/generate_s": t1 - t0,
        "time/score_s": t2 - t1,
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
    temps = rollout.temperatures if cfg.generation.score_temperature == "sampled" else None
    n = rollout.input_ids.shape[0]
    minibatches = torch.arange(n).chunk(m)
    # rows of a group share their prompt: run it once per group (exact, less compute)
    shared = cfg.grpo.group_size if (n // m) % cfg.grpo.group_size == 0 else None
    old = _score(policy.model, rollout, temps, cfg, shared) if k_steps > 1 else None
    ref = None
    if cfg.loss.uses_reference:
        with policy.reference_model() as reference:
            ref = _score(reference, rollout, temps, cfg, shared)
    params = policy.trainable_parameters()
    records = []
    for k in range(k_steps):
        run.optimizer.zero_grad(set_to_none=True)
        result = minibatch_gradient(
            run, rollout, minibatches[k % m], advantages, old, ref, temps, first=(k == 0)
        )
        grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.optim.max_grad_norm or math.inf)
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
    out = {key: float(np.mean([r[key] for r in records if key in r])) for key in records[0]}
    out["learning_rate"] = records[0]["learning_rate"]  # the lr that met these rollouts first
    out["entropy"] = records[0].get("entropy", math.nan)  # on-policy entropy of the samples
    return out


def minibatch_gradient(
    run: _Run,
    rollout: Rollout,
    idx: torch.Tensor,
    advantages: torch.Tensor,
    old: torch.Tensor | None,
    ref: torch.Tensor | None,
    temps: torch.Tensor | None,
    *,
    first: bool,
) -> LossResult:
    """Accumulate the gradient of the minibatch `idx` into .grad, in micro-batches of rows.

    Exact for any aggregator linear in the per-token values (all registered ones): a micro-batch's
    log-probs are placed into a [n, T] tensor whose other rows are constants, so the loss over
    the whole minibatch (same normaliser) gets the micro-batch's share of the gradient. Returns
    the loss and metrics of the whole minibatch.
    """
    cfg, g = run.config, run.config.grpo.group_size
    mask, adv = rollout.completion_mask[idx], advantages[idx]
    ref_mb = None if ref is None else ref[idx]
    size = cfg.grpo.micro_batch_size or len(idx)
    parts = torch.arange(len(idx)).split(size)
    entropy_grad = cfg.loss.entropy_coef > 0
    with_entropy = first or entropy_grad
    log_probs = torch.zeros(mask.shape)
    entropy = torch.zeros(mask.shape) if with_entropy else None
    base_old = torch.zeros(mask.shape) if old is None else old[idx]
    for part in parts:
        rows = idx[part]
        scores = _score_rows(
            run,
            rollout,
            rows,
            temps,
            base_old[part],
            with_entropy,
            entropy_grad,
            group_size=g if len(part) % g == 0 else None,
        )
        part_old = scores.log_probs.detach() if old is None else base_old[part]
        full_old = base_old.index_put((part,), part_old)
        full_lp = full_old.index_put((part,), scores.log_probs)  # other rows: constant, ratio 1
        full_ent = None
        if entropy_grad:
            full_ent = entropy.detach().index_put((part,), scores.entropy)
        result = policy_loss(
            full_lp, full_old, adv, mask, cfg.loss, ref_log_probs=ref_mb, entropy=full_ent
        )
        result.loss.backward()
        log_probs[part] = scores.log_probs.detach()
        if entropy is not None:
            entropy[part] = scores.entropy.detach()
    if len(parts) == 1 and not with_entropy:
        return result
    with torch.no_grad():  # loss value and metrics of the whole minibatch
        final_old = log_probs if old is None else base_old
        return policy_loss(
            log_probs, final_old, adv, mask, cfg.loss, ref_log_probs=ref_mb, entropy=entropy
        )


def _score_rows(
    run: _Run,
    rollout: Rollout,
    rows: torch.Tensor,
    temps: torch.Tensor | None,
    fill: torch.Tensor,
    with_entropy: bool,
    entropy_grad: bool,
    group_size: int | None,
) -> TokenScores:
    """Scores of `rows` with the columns that are padding in all of them cut off (the prompt's
    left padding, the completions' tail after the last EOS): less compute, same values on the
    completion mask. Cut completion positions get `fill` (log-probs; ratio 1 against it) and
    entropy 0; they are outside the mask, so the loss and its gradient are unchanged."""
    att = rollout.attention_mask[rows]
    p, t_full = rollout.prompt_len, rollout.completion_mask.shape[1]
    lo = int(att[:, :p].sum(0).nonzero()[0]) if p else 0
    t = max(1, int(rollout.completion_mask[rows].sum(1).max()))
    scores = completion_scores(
        run.policy.model,
        rollout.input_ids[rows, lo : p + t],
        att[:, lo : p + t],
        p - lo,
        None if temps is None else temps[rows],
        chunk=run.config.generation.logprob_chunk,
        with_entropy=with_entropy,
        entropy_grad=entropy_grad,
        group_size=group_size,
    )
    if t == t_full:
        return scores
    log_probs = torch.cat([scores.log_probs, fill[:, t:]], dim=1)
    entropy = scores.entropy
    if entropy is not None:
        entropy = torch.cat([entropy, entropy.new_zeros(len(rows), t_full - t)], dim=1)
    return TokenScores(log_probs=log_probs, entropy=entropy)


@torch.no_grad()
def _score(
    model: torch.nn.Module, rollout: Rollout, temps: Any, cfg: RunConfig, shared: int | None
) -> torch.Tensor:
    return completion_scores(
        model,
        rollout.input_ids,
        rollout.attention_mask,
        rollout.prompt_len,
        temps,
        chunk=cfg.generation.logprob_chunk,
        group_size=shared,
    ).log_probs


_GROUP_KEYS = (
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "degeneracy/all_pass",
    "degeneracy/all_fail",
    "degeneracy/iid_prediction",
    "reward_within_group_std",
)


def _advantage_options(cfg: RunConfig, task: Any, examples: list[dict]) -> dict[str, Any]:
    options = dict(cfg.grpo.advantage_options)
    if cfg.grpo.advantage == "dual_anchor" and "num_constraints" not in options:
        count = getattr(task, "num_constraints", None)
        if not callable(count):
            raise ValueError(
                f"the dual_anchor advantage needs each prompt's constraint count, but task "
                f"{task.name!r} has no num_constraints(example); set "
                "grpo.advantage_options.num_constraints=<C> or use an IFEval-style task"
            )
        options["num_constraints"] = [count(e) for e in examples]
    return options


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
        if start.done:
            return TrainResult(run_dir, read_metrics(run_dir), tuple(notes))
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
            log, repaired = restore_log(run_dir, state)
            for text in repaired:
                note(text)
            first = state.step + 1
        else:
            log = MetricsLog(run_dir)
        with ckpt.disk_full_is_one_line(run_dir / CONFIG_FILE, "the run's config"):
            save_config(cfg, run_dir / CONFIG_FILE)
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
    in flight finishes and is checkpointed, then RunInterrupted ends the run."""
    cfg, run_dir = run.config, run.config.run_dir
    history = read_metrics(run_dir)
    forecaster = OnlineForecaster(cfg, history)
    for step in range(first, cfg.run.steps + 1):
        if stop.signum is not None:
            raise interrupted(stop.signum, run_dir)
        metrics = train_step(run, step)
        metrics.update(forecaster.update(metrics))
        log.append(metrics)
        reporters.log(metrics)
        history.append(metrics)
        every = cfg.run.checkpoint_every
        if step == cfg.run.steps or (every and step % every == 0) or stop.signum is not None:
            ckpt.save_checkpoint(
                run_dir,
                step=step,
                model=run.policy.model,
                optimizer=run.optimizer,
                scheduler=run.scheduler,
                data_position=run.stream.position(),
                metrics_offset=log.offset(),
                base_digest=base,
            )
        if on_step is not None:
            on_step(metrics)


def _save_final(run: _Run, run_dir: Path) -> None:
    """The trained model (or adapter) in transformers format, for `from_pretrained`."""
    final = run_dir / "final"
    run.policy.model.save_pretrained(str(final))
    run.policy.tokenizer.save_pretrained(final)
