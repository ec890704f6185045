"""One lr schedule for a prediction (`pgrpo.core.schedules.lr_horizon`): the lr the trainer's
scheduler really runs at each optimizer step, the horizon `pgrpo probe` predicts over, and the
one its printed `pgrpo predict` line gives predict, for random schedules, warm-ups, run lengths
and starts. The probe computed its own (over start .. total - 1, one made-up step [total - 1] at
the run's end) and predict another (over start + steps); at a finished run's last checkpoint
they disagreed."""

from __future__ import annotations

import inspect
import math
import shlex

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pgrpo.cli.predict import _lr_horizon, predict_cmd
from pgrpo.cli.probe import predict_command
from pgrpo.core.schedules import LR_SCHEDULES, lr_horizon
from pgrpo.train.config import load_config
from pgrpo.train.optimizers import build_optimizer
from pgrpo.train.setup import make_scheduler, optimizer_steps_total, run_lr_horizon


def _trainer_lrs(cfg) -> np.ndarray:
    """[total] the lr of each optimizer step of a run, from the scheduler the trainer builds,
    stepped as `pgrpo.train.trainer.optimize` steps it (lr read, optimizer step, scheduler step)."""
    weight = torch.nn.Parameter(torch.zeros(2))
    optimizer = build_optimizer([weight], cfg.optim)
    scheduler = make_scheduler(optimizer, cfg)
    lrs = []
    for _ in range(optimizer_steps_total(cfg)):
        weight.grad = torch.ones(2)
        lrs.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    return np.array(lrs)


def _predict_default(name: str) -> str:
    return str(inspect.signature(predict_cmd).parameters[name].default.default)


def _pasted_horizon(cfg, start: int):
    """The horizon `pgrpo predict` computes from the command `pgrpo probe` prints at `start`."""
    out = {
        "optimizer": "adam", "lr": cfg.optim.lr, "beta1": 0.9, "beta2": 0.999, "kappa": 1.0,
        "refresh_interval": cfg.grpo.refresh_interval, "group_size": 8, "batch_prompts": 1,
        "steps": optimizer_steps_total(cfg) - start, "schedule": cfg.optim.schedule,
        "warmup_steps": cfg.optim.warmup_steps, "start_step": start,
    }  # fmt: skip
    words = shlex.split(predict_command(out))

    def flag(name: str, param: str) -> str:
        return words[words.index(name) + 1] if name in words else _predict_default(param)

    return _lr_horizon(
        float(flag("--lr", "lr")),
        flag("--schedule", "schedule"),
        int(flag("--warmup-steps", "warmup_steps")),
        int(flag("--schedule-start", "schedule_start")),
        int(flag("--steps", "steps")),
    )


@settings(max_examples=60, deadline=None)
@given(
    schedule=st.sampled_from(LR_SCHEDULES.names()),
    warmup=st.integers(0, 40),
    batches=st.integers(1, 40),
    refresh_interval=st.integers(1, 4),
    lr=st.sampled_from([1e-6, 3e-4, 0.1]),
    start=st.integers(0, 170),
)
def test_the_trainers_lr_is_the_horizon_probe_and_predict_use(
    schedule, warmup, batches, refresh_interval, lr, start
):
    cfg = load_config(
        None,
        [
            "model.name=tiny", f"optim.schedule={schedule}", f"optim.warmup_steps={warmup}",
            f"optim.lr={lr!r}", f"run.steps={batches}", f"grpo.refresh_interval={refresh_interval}",
        ],
    )  # fmt: skip
    total = batches * refresh_interval
    trainer = _trainer_lrs(cfg)
    horizon = run_lr_horizon(cfg, start)
    if start >= total:  # the run's end: nothing is left, and the shared function says so
        assert horizon is None
        with pytest.raises(ValueError, match="no optimizer steps are left"):
            lr_horizon(schedule, lr, total, start, warmup)
        return
    assert (horizon.start, horizon.total, horizon.steps) == (start, total, total - start)
    # the same float arithmetic (lr x lr_factor) elementwise; the tolerance only allows for a
    # vectorised libm cos differing from its scalar path in the last bit
    np.testing.assert_allclose(horizon.lrs, trainer[start:], rtol=1e-13, atol=1e-15 * lr)
    pasted = _pasted_horizon(cfg, start)
    np.testing.assert_array_equal(pasted.lrs, horizon.lrs)
    assert pasted.peak == horizon.peak
    assert (pasted.varying is None) == (horizon.varying is None)
    constant = schedule == "constant" and bool(np.all(trainer[start:] == lr))  # the base lr
    assert (horizon.varying is None) == constant


def test_the_run_end_has_no_horizon_where_a_made_up_step_was():
    """At a finished run's last checkpoint (start = total) the probe predicted over one step
    [total - 1] at lr x lr_factor(total - 1, total), and printed a predict line whose schedule
    gave lr x lr_factor(total, total + 1) for it: two lrs for one step that never runs."""
    cfg = load_config(None, ["model.name=tiny", "optim.schedule=linear", "run.steps=10"])
    assert run_lr_horizon(cfg, 10) is None and run_lr_horizon(cfg, 11) is None
    last = run_lr_horizon(cfg, 9)
    assert last.steps == 1 and last.lrs[0] == pytest.approx(cfg.optim.lr / 10)
    # one step below the base lr stays a one-step schedule (read as a constant lr it gave a
    # continuum inflection time of 14.7 steps beyond a 1-step horizon: review, session 40)
    assert last.varying is not None and last.peak == last.lrs[0]


def test_predict_cli_keeps_its_lr_words_and_a_one_step_decay_is_a_schedule(tmp_path):
    """Review of session 40's lr_horizon: `--lr nan` said "lr=nan is not the peak of
    lr_schedule ... pass lr=max(lr_schedule)" (an API argument); and one step of a linear
    decay read as a constant lr gave a continuum inflection time of 14.7 steps."""
    import json

    from cli_checks import one_line_error
    from typer.testing import CliRunner

    from pgrpo.cli import _load_commands, app

    _load_commands()
    base = ["predict", "--kappa", "50", "--out", str(tmp_path / "p")]
    for bad in ("nan", "inf"):
        one_line_error(
            CliRunner().invoke(app, [*base, "--lr", bad]), "lr must be a finite number > 0"
        )
    res = CliRunner().invoke(
        app, [*base, "--lr", "0.001", "--schedule", "linear", "--steps", "1", "--json"]
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["inflection_time"] is None  # not beyond the 1-step horizon
    for bad_start in (-1, 5):
        with pytest.raises(ValueError, match="start"):
            lr_horizon("linear", 1e-3, 5, bad_start)
    with pytest.raises(ValueError, match="lr must be a finite number > 0"):
        lr_horizon("linear", math.nan, 5)
