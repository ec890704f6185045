"""`grpo.lean_layers`: RMSNorm / SwiGLU modules that keep less for backward, bit for bit.

Properties (hypothesis): for random B, G, micro-batch sizes, temperatures, KL and entropy terms,
on the tiny model and its LoRA version, in fp32 and bf16 autocast, the trainer's update gives the
same loss, metrics and gradient of every parameter with lean layers as without; for random
shapes of Llama, Qwen2, Qwen3 (whose head norms see bf16 inputs) and Gemma (whose norm and MLP
are other formulas: the probe must keep them as written) decoders, `completion_scores` gives the
same log-probs and gradients. Lean layers keep fewer bytes for backward and restore the forwards.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_train_checkpointing import UPDATE_CASES, _config, assert_switch_changes_no_update
from train_checks import tiny_decoder

from pgrpo.train.lean import lean_layers
from pgrpo.train.logprobs import completion_scores


def _lean_config(b, g, micro, kl, entropy, lora, precision, lean):
    cfg = _config(b, g, micro, kl, entropy, lora, precision, False)
    grpo = type(cfg.grpo)(**{**vars(cfg.grpo), "lean_layers": lean})
    return type(cfg)(**{**vars(cfg), "grpo": grpo})


@given(**UPDATE_CASES)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_lean_layers_change_no_loss_metric_or_gradient(
    b, g, micro, kl, entropy, lora, precision, temps, seed
):
    assert_switch_changes_no_update(
        lambda on: _lean_config(b, g, micro, kl, entropy, lora, precision, on),
        b, g, lora, precision, temps, seed,
    )  # fmt: skip


def _decoder(kind: str, hidden: int, inter: int, layers: int, seed: int) -> torch.nn.Module:
    return tiny_decoder(kind, seed, vocab_size=97, hidden_size=hidden, intermediate_size=inter,
                        num_hidden_layers=layers, pad_token_id=0)  # fmt: skip


def _scores(model, ids, lean, autocast):
    model.zero_grad(set_to_none=True)
    saved = []

    def pack(x):
        if not isinstance(x, torch.nn.Parameter):
            saved.append(x.untyped_storage().nbytes())
        return x

    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
            scores = completion_scores(
                model, ids, torch.ones_like(ids), 3, with_entropy=True, lean_layers=lean
            )
    (scores.log_probs * torch.linspace(-1, 1, scores.log_probs.shape[1])).sum().backward()
    grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    return scores.log_probs.detach(), grads, sum(saved)


@pytest.mark.parametrize("kind", ["llama", "qwen2", "qwen3", "gemma"])
@given(
    hidden=st.sampled_from([16, 24]),
    inter=st.integers(8, 40),
    layers=st.integers(1, 2),
    rows=st.integers(1, 4),
    length=st.integers(4, 9),
    autocast=st.booleans(),
    seed=st.integers(0, 100),
)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_lean_layers_keep_values_and_gradients_of_every_model_kind(
    kind, hidden, inter, layers, rows, length, autocast, seed
):
    model = _decoder(kind, hidden, inter, layers, seed)
    ids = torch.randint(1, 97, (rows, length), generator=torch.Generator().manual_seed(seed))
    lp0, g0, saved0 = _scores(model, ids, False, autocast)
    lp1, g1, saved1 = _scores(model, ids, True, autocast)
    assert torch.equal(lp0, lp1)
    assert len(g0) == len(g1) and all(torch.equal(a, b) for a, b in zip(g0, g1, strict=True))
    if kind == "gemma":  # (1 + weight) norm, GELU MLP: the probe keeps Gemma's own forwards
        assert saved1 == saved0
    else:
        assert saved1 < saved0


def test_lean_layers_swap_only_what_passes_and_restore_the_forward():
    model = _decoder("llama", 16, 24, 2, 0)
    decoder = model.get_decoder()
    with lean_layers(decoder) as swapped:
        assert swapped == 2 * 2 + 2 + 1  # per layer: 2 norms + the MLP; the final norm
    assert not any("forward" in vars(m) for m in decoder.modules())
    gemma = _decoder("gemma", 16, 24, 2, 0).get_decoder()
    with lean_layers(gemma) as swapped:
        assert swapped == 0
