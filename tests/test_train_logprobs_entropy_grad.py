"""The entropy bonus's gradient does not depend on the log-prob chunking (a hostile review,
2026-12-04: completions that fit in one chunk, the default 16 tokens, got no entropy gradient)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

transformers = pytest.importorskip("transformers")

from pgrpo.train.logprobs import completion_scores  # noqa: E402


def _model():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=2, num_attention_heads=2,
                                   num_key_value_heads=2, max_position_embeddings=64)  # fmt: skip
    return transformers.LlamaForCausalLM(cfg).float()


MODEL = _model()


@settings(max_examples=12, deadline=None)
@given(t=st.integers(1, 12), chunk=st.integers(1, 16), seed=st.integers(0, 1000))
def test_entropy_gradient_matches_autograd_for_any_chunk(t, chunk, seed):
    gen = torch.Generator().manual_seed(seed)
    n, p = 3, 4
    ids = torch.randint(2, 50, (n, p + t), generator=gen)
    att = torch.ones_like(ids)
    temps = torch.tensor([0.5, 1.0, 1.5])
    sc = completion_scores(MODEL, ids, att, p, temps, chunk=chunk, with_entropy=True,
                           entropy_grad=True)  # fmt: skip
    assert sc.entropy.requires_grad
    logits = MODEL(input_ids=ids, attention_mask=att).logits[:, p - 1 : -1].float()
    logits = logits / temps[:, None, None]
    ref = -(logits.softmax(-1) * logits.log_softmax(-1)).sum(-1)
    got = torch.autograd.grad(sc.entropy.sum(), MODEL.lm_head.weight)[0]
    want = torch.autograd.grad(ref.sum(), MODEL.lm_head.weight)[0]
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
