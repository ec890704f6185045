"""One rollout path: the probe measures the objective the trainer trains.

For every registered advantage estimator and transform (dual_anchor included, its constraint
counts read from the task), with multi-temperature sampling, a KL term and unaligned
micro-batches: the curvature probe's loss and gradient at the initial policy equal the loss and the
gradient of the trainer's first optimizer step on the same prompts and sampling seed.
"""

from __future__ import annotations

import pytest
import torch
from train_checks import first_step_gradients

from pgrpo.core.advantages import ADVANTAGE_ESTIMATORS, ADVANTAGE_TRANSFORMS
from pgrpo.measure.probe import objective_gradient
from pgrpo.tasks import TASKS
from pgrpo.tasks.arithmetic import ArithmeticTask
from pgrpo.train.config import load_config
from pgrpo.train.rollout import collect, estimator_options
from pgrpo.train.setup import build_run, resolve_config


class _Counted(ArithmeticTask):
    """Arithmetic with a per-prompt constraint count (1-3), so dual_anchor reads a real column."""

    name = "arithmetic_counted"

    def num_constraints(self, example):
        return 1 + len(self.prompt(example)) % 3


if "arithmetic_counted" not in TASKS:
    TASKS.add("arithmetic_counted", _Counted)


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("PGRPO_CACHE", str(tmp_path_factory.getbasetemp() / "pgrpo-cache"))


def _config(tmp_path, estimator, transform):
    return resolve_config(
        load_config(
            None,
            [
                "model.name=tiny",
                "model.tiny_hidden=32",
                "model.tiny_warmup_steps=60",
                "task.name=arithmetic_counted",
                "task.options={levels: [1], n: 200}",
                "group_size=4",
                "batch_prompts=3",
                "max_new_tokens=4",
                "generation.temperatures=[0.5, 1.0, 1.0, 2.0]",
                f"grpo.advantage={estimator}",
                f"grpo.transform={'null' if transform is None else transform}",
                "grpo.micro_batch_size=5",
                "loss.kl_coef=0.05",
                "loss.aggregator=seq_sum_constant_norm",
                "optim.max_grad_norm=0",
                "torch_threads=1",
                f"run.output_dir={tmp_path}",
            ],
        )
    )


def _informative_seed(run, examples, cfg):
    """A sampling seed whose batch has some reward spread (a gradient that is not 0 = 0)."""
    for seed in range(50):
        torch.manual_seed(seed)
        if collect(run.policy, run.task, examples, cfg).rewards.std() > 0:
            return seed
    raise AssertionError("no sampling seed gives a reward spread")


@pytest.mark.parametrize("transform", [None, "default", *ADVANTAGE_TRANSFORMS.names()])
@pytest.mark.parametrize("estimator", ADVANTAGE_ESTIMATORS.names())
def test_probe_objective_is_the_trainers(tmp_path, estimator, transform):
    cfg = _config(tmp_path, estimator, transform)
    run = build_run(cfg, resume=False)
    position = run.stream.position()
    examples = run.stream.next_batch(cfg.grpo.batch_prompts)
    run.stream.restore(position)
    seed = _informative_seed(run, examples, cfg)
    probe_loss, ascent = objective_gradient(run.policy, run.task, examples, cfg, seed=seed)
    metrics, grads = first_step_gradients(run, seed)
    assert metrics["reward_std"] > 0  # a real signal, not 0 = 0
    assert metrics["loss"] == pytest.approx(probe_loss, abs=1e-6)
    torch.testing.assert_close(-ascent.float(), grads[0], atol=1e-6, rtol=1e-5)
    assert float(ascent.norm()) > 0


def test_declared_columns_come_from_options_then_task_then_fallback():
    task = _Counted(levels=[1], n=10)
    examples = task.load("train")[:2]
    from_task = estimator_options("dual_anchor", {}, task, examples)
    assert from_task["num_constraints"] == [task.num_constraints(e) for e in examples]
    given = estimator_options("dual_anchor", {"num_constraints": 3}, task, examples)
    assert given["num_constraints"] == 3
    plain = ArithmeticTask(levels=[1], n=10)
    fallback = estimator_options(
        "dual_anchor", {}, plain, examples, fallback={"num_constraints": 1}
    )
    assert fallback["num_constraints"] == 1
    with pytest.raises(ValueError, match="num_constraints=<value>"):
        estimator_options("dual_anchor", {}, plain, examples)
    assert estimator_options("grpo", {"eps": 1e-6}, plain, examples) == {"eps": 1e-6}
