"""Precision: fp32, bf16 autocast (fp32 master weights) and bf16 weights, chosen and consistent.

- `auto` follows the hardware and says why; bad settings fail with the fix (also via the CLI).
- Before the first optimizer step the old log-probs are the current ones bit for bit, so the
  importance ratio is exactly 1, in fp32 and in bf16, for any minibatch / micro-batch layout.
- The recomputed log-probs match the sampler's own within the documented tolerance
  (docs/trainer.md, Precision): 1e-4 in fp32, 0.05 in bf16 on the tiny model.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

from pgrpo.train.config import load_config
from pgrpo.train.generation import sample
from pgrpo.train.precision import Precision, bf16_support, resolve_precision
from pgrpo.train.rollout import load_task_and_policy
from pgrpo.train.update import (
    _partition,
    _score_rows,
    minibatches,
    scoring_temperatures,
    sequence_log_probs,
)

SAMPLER_TOLERANCE = {"fp32": 1e-4, "bf16": 0.05}


def _config(precision, *extra):
    return load_config(
        None,
        [
            "model.name=tiny",
            "model.tiny_hidden=32",
            "model.tiny_warmup_steps=0",
            f"model.precision={precision}",
            "task.options={levels: [1, 2], n: 50}",
            "group_size=4",
            "batch_prompts=3",
            "max_new_tokens=6",
            "generation.temperatures=[0.5, 1.0, 1.0, 2.0]",
            *extra,
        ],
    )


def _rollout(cfg, with_log_probs=False):
    task, policy = load_task_and_policy(cfg)
    torch.manual_seed(0)
    prompts = [task.prompt(e) for e in task.load("train")[:3]]
    temps = list(cfg.generation.temperatures)
    rollout = sample(
        policy,
        prompts,
        group_size=4,
        temperatures=temps,
        max_new_tokens=6,
        with_log_probs=with_log_probs,
    )
    return policy, rollout


def test_auto_follows_the_hardware_and_says_why(monkeypatch):
    ok, found = bf16_support("cpu")
    auto = resolve_precision("auto", "float32", "cpu")
    assert auto.compute == ("bf16" if ok else "fp32") and found in auto.reason
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"avx512_bf16": False})
    plain = resolve_precision("auto", "float32", "cpu")
    assert plain.name == "fp32" and "without AVX-512 BF16" in plain.reason
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"amx_bf16": True})
    assert resolve_precision("auto", "float32", "cpu").name == "bf16-autocast"
    assert resolve_precision("fp32", "float32").name == "fp32"
    assert resolve_precision("bf16", "float32").name == "bf16-autocast"
    assert resolve_precision("auto", "bfloat16").name == "bf16-weights"
    assert "fp32 master weights" in resolve_precision("bf16", "float32").describe()


def test_autocast_runs_matmuls_in_bf16_only_when_mixed():
    x = torch.randn(4, 4)
    with Precision("bf16", "fp32").autocast():
        assert (x @ x).dtype == torch.bfloat16
    with Precision("fp32", "fp32").autocast():
        assert (x @ x).dtype == torch.float32


def _weight_casts_and_grad(keep: bool) -> tuple[int, torch.Tensor]:
    """Three micro-batches through a Linear(5, 7) under bf16 autocast, each with its backward;
    returns how often the [7, 5] weight was cast and its accumulated gradient."""
    torch.manual_seed(0)
    lin, precision = torch.nn.Linear(5, 7), Precision("bf16", "fp32")
    xs = torch.randn(3, 4, 5)
    outer = precision.keep_casts() if keep else contextlib.nullcontext()
    with torch.profiler.profile(record_shapes=True) as prof, outer:
        for x in xs:
            with precision.autocast():
                y = lin(x)
            assert not torch.is_autocast_enabled("cpu")  # backward runs outside autocast
            y.float().square().sum().backward()
    events = prof.key_averages(group_by_input_shape=True)
    casts = sum(
        e.count for e in events if e.key == "aten::_to_copy" and e.input_shapes[0] == [7, 5]
    )
    return casts, lin.weight.grad


def test_keep_casts_casts_each_weight_once_and_changes_no_gradient():
    """The micro-batches of one optimizer step share autocast's bf16 copy of each weight."""
    once, grad_kept = _weight_casts_and_grad(keep=True)
    every, grad = _weight_casts_and_grad(keep=False)
    # each backward casts the weight's bf16 gradient to fp32 (3 in both); forward: 1 cast vs 3
    assert (once, every) == (1 + 3, 3 + 3)
    assert torch.equal(grad_kept, grad)
    with Precision("fp32", "fp32").keep_casts():  # a no-op without autocast
        assert not torch.is_autocast_enabled("cpu")


def test_bad_precision_fails_with_the_fix():
    with pytest.raises(ValueError, match=r"model.precision='fp16' is invalid: use one of"):
        _config("fp16")
    with pytest.raises(ValueError, match="bf16 weights cannot compute in fp32"):
        _config("fp32", "model.dtype=bfloat16")


def test_cli_bad_precision_exits_2_with_one_line(tmp_path):
    from typer.testing import CliRunner

    from pgrpo.cli import _load_commands, app

    _load_commands()
    res = CliRunner().invoke(
        app, ["train", "model.name=tiny", "model.precision=half", f"run.output_dir={tmp_path}"]
    )
    assert res.exit_code == 2
    assert "model.precision='half' is invalid: use one of ('auto', 'fp32', 'bf16')" in res.output
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize(("m", "micro"), [(1, None), (1, 5), (3, 3), (2, 4)])
def test_old_log_probs_are_the_current_ones_bit_for_bit(precision, m, micro):
    """K > 1: the old log-probs recomputed at sampling time equal what the first optimizer step
    computes with gradients on, exactly: the ratio at lag 0 is 1."""
    cfg = _config(
        precision,
        f"grpo.num_minibatches={m}",
        f"grpo.refresh_interval={m * 2}",
        f"grpo.micro_batch_size={'null' if micro is None else micro}",
    )
    policy, rollout = _rollout(cfg)
    temps = scoring_temperatures(rollout, cfg)
    old = sequence_log_probs(policy, cfg, rollout, temps)
    mask = rollout.completion_mask.bool()
    for idx in minibatches(rollout.input_ids.shape[0], cfg):
        for part in _partition(idx, cfg):
            rows = idx[part]
            scores = _score_rows(policy, cfg, rollout, rows, temps, old[rows], True, False)
            assert scores.log_probs.requires_grad
            now = scores.log_probs.detach()
            assert torch.equal(now[mask[rows]], old[rows][mask[rows]])


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_recomputed_log_probs_match_the_samplers(precision):
    cfg = _config(precision)
    policy, rollout = _rollout(cfg, with_log_probs=True)
    assert policy.precision.compute == precision
    recomputed = sequence_log_probs(policy, cfg, rollout, scoring_temperatures(rollout, cfg))
    mask = rollout.completion_mask.bool()
    diff = (recomputed - rollout.sampler_log_probs)[mask].abs()
    assert diff.numel() > 10
    assert float(diff.max()) < SAMPLER_TOLERANCE[precision]


@pytest.mark.parametrize("extra", [["model.precision=bf16"], ["model.dtype=bfloat16"]])
def test_bf16_runs_train_and_log_their_precision(tmp_path, extra):
    from pgrpo.train.trainer import train

    cfg = _config(
        "auto",
        "steps=2",
        "forecast_every=0",
        "lr=3e-3",
        "grpo.advantage=sign",
        f"run.output_dir={tmp_path}",
        *extra,
    )
    result = train(cfg)
    names = {h["precision"] for h in result.history}
    assert names == {"bf16-weights" if "dtype" in extra[0] else "bf16-autocast"}
    assert all(torch.isfinite(torch.tensor(h["loss"])) for h in result.history)
    state = torch.load(result.run_dir / "checkpoints" / "step-2" / "state.pt", weights_only=False)
    dtypes = {v.dtype for v in state["model"].values()}
    assert dtypes == {torch.bfloat16 if "dtype" in extra[0] else torch.float32}
