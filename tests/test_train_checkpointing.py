"""`grpo.activation_checkpointing`: the same update with and without it, bit for bit.

Property (hypothesis): for random B, G, micro-batch sizes, per-position temperatures, KL and
entropy terms, on the tiny model and its LoRA version, in fp32 and bf16 autocast, the trainer's
update (`trainer.optimize`: shared prompt caches, column cuts, the head's chunks) gives the same
loss, metrics and gradient of every parameter with the decoder layers checkpointed as without.
"""

from __future__ import annotations

import copy
import math

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from train_checks import optimize_from
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.train.config import load_config
from pgrpo.train.generation import sample
from pgrpo.train.logprobs import checkpointed_layers, completion_scores
from pgrpo.train.rollout import load_task_and_policy


def _config(b, g, micro, kl, entropy, lora, precision, checkpointing):
    return load_config(
        None,
        [
            "model.name=tiny",
            "model.tiny_hidden=32",
            "model.tiny_warmup_steps=0",
            f"model.lora_rank={lora}",
            f"model.precision={precision}",
            "task.options={levels: [1, 2], n: 50}",
            f"group_size={g}",
            f"batch_prompts={b}",
            f"grpo.micro_batch_size={'null' if micro is None else micro}",
            f"grpo.activation_checkpointing={str(checkpointing).lower()}",
            "grpo.advantage=sign",
            f"loss.kl_coef={kl}",
            f"loss.entropy_coef={entropy}",
            "generation.logprob_chunk=2",
            "optim.lr=1e-2",
        ],
    )


_POLICIES: dict[tuple, tuple] = {}


def _policy(lora: int, precision: str):
    key = (lora, precision)
    if key not in _POLICIES:
        task, policy = load_task_and_policy(_config(2, 2, None, 0.1, 0.0, lora, precision, False))
        _POLICIES[key] = (task, policy, copy.deepcopy(policy.model.state_dict()))
    return _POLICIES[key]


def _update(cfg, key, rollout, advantages):
    return optimize_from(cfg, *_policy(*key), rollout, advantages)


UPDATE_CASES = dict(
    b=st.integers(1, 3),
    g=st.integers(1, 4),
    micro=st.one_of(st.none(), st.integers(1, 5)),
    kl=st.sampled_from([0.0, 0.1]),
    entropy=st.sampled_from([0.0, 0.01]),
    lora=st.sampled_from([0, 4]),
    precision=st.sampled_from(["fp32", "bf16"]),
    temps=st.lists(st.sampled_from([0.5, 1.0, 2.0]), min_size=4, max_size=4),
    seed=st.integers(0, 1000),
)
"""The update settings the bit-for-bit update properties draw (here and test_train_lean)."""


def update_inputs(b, g, lora, precision, temps, seed):
    """(task, policy, state, rollout, advantages): B prompts x G completions sampled from the
    cached tiny policy reset to its state, and random advantages."""
    task, policy, state = _policy(lora, precision)
    policy.model.load_state_dict(state)
    examples = task.load("train")
    torch.manual_seed(seed)
    prompts = [task.prompt(examples[(seed + i) % len(examples)]) for i in range(b)]
    rollout = sample(policy, prompts, group_size=g, temperatures=temps[:g], max_new_tokens=5)
    advantages = torch.randn(b * g, generator=torch.Generator().manual_seed(seed))
    return task, policy, state, rollout, advantages


def assert_same_update(one, other):
    """Two `optimize_from` results: the same metrics (NaN where NaN) and every gradient equal."""
    (metrics, grads), (metrics2, grads2) = one, other
    assert set(metrics) == set(metrics2)
    for key, value in metrics.items():
        assert value == metrics2[key] or (math.isnan(value) and math.isnan(metrics2[key])), key
    for step, step2 in zip(grads, grads2, strict=True):
        for a, c in zip(step, step2, strict=True):
            assert torch.equal(a, c)


def assert_switch_changes_no_update(config_for, b, g, lora, precision, temps, seed):
    """The update of one drawn case (`update_inputs`) with a switch off and on:
    config_for(on) -> RunConfig; the same metrics and every gradient equal."""
    _, _, _, rollout, advantages = update_inputs(b, g, lora, precision, temps, seed)
    off, on = [
        _update(config_for(value), (lora, precision), rollout, advantages)
        for value in (False, True)
    ]
    assert_same_update(off, on)


@given(**UPDATE_CASES)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_activation_checkpointing_changes_no_loss_metric_or_gradient(
    b, g, micro, kl, entropy, lora, precision, temps, seed
):
    assert_switch_changes_no_update(
        lambda ck: _config(b, g, micro, kl, entropy, lora, precision, ck),
        b, g, lora, precision, temps, seed,
    )  # fmt: skip


def test_checkpointed_layers_keep_only_layer_inputs_and_restore_the_forward():
    """Under checkpointing autograd saves no per-layer activation (only what checkpoint keeps),
    and after the block the layers run as before."""
    _, policy, _ = _policy(0, "fp32")
    model = policy.model
    ids = torch.randint(2, 200, (4, 9), generator=torch.Generator().manual_seed(0))
    ids[:, :4] = ids[0, :4]  # one shared prompt: the rest pass reads its KV cache
    saved = []

    def pack(x):
        saved.append(x.untyped_storage().nbytes())
        return x

    counts = []
    for ck in (False, True):
        saved.clear()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
            completion_scores(model, ids, torch.ones_like(ids), 4, checkpoint_layers=ck)
        counts.append(sum(saved))
    assert counts[1] < counts[0] / 2
    layers = model.get_decoder().layers
    with checkpointed_layers(model.get_decoder()):
        assert all("forward" in vars(layer) for layer in layers)
    assert not any("forward" in vars(layer) for layer in layers)


def test_cli_rejects_a_non_boolean_activation_checkpointing(tmp_path):
    _load_commands()
    run_dir = tmp_path / "r"
    res = CliRunner().invoke(
        app, ["train", "grpo.activation_checkpointing=maybe", f"run.dir={run_dir}"]
    )
    assert res.exit_code == 2
    lines = [line for line in res.output.strip().splitlines() if line]
    assert len(lines) == 1 and "grpo.activation_checkpointing" in lines[0], res.output
    assert "expected true or false" in lines[0]
    assert not run_dir.exists()
