"""Chunked log-probs vs a full log-softmax; sampling helpers; per-row temperature."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pgrpo.train.config import ModelConfig
from pgrpo.train.generation import RowTemperature, completion_mask, left_pad, row_temperatures
from pgrpo.train.logprobs import completion_scores, position_ids
from pgrpo.train.policies import ByteTokenizer, tiny_model


@pytest.fixture(scope="module")
def batch():
    torch.manual_seed(0)
    model = tiny_model(ModelConfig(name="tiny", tiny_hidden=32, tiny_layers=2), seed=1)
    tok = ByteTokenizer()
    prompts = [tok.encode_prompt(p) for p in ["1 + 2 =", "what is 33 - 4?", "x"]]
    ids, mask = left_pad(prompts, tok.pad_token_id)
    completion = torch.randint(2, 200, (3, 7))
    input_ids = torch.cat([ids, completion], 1)
    attention = torch.cat([mask, torch.ones_like(completion)], 1)
    return model, input_ids, attention, ids.shape[1]


def _reference(model, input_ids, attention, p, temps):
    logits = model(
        input_ids=input_ids, attention_mask=attention, position_ids=position_ids(attention)
    ).logits[:, p - 1 : -1]
    logits = logits / temps[:, None, None]
    logp = torch.log_softmax(logits, -1)
    token = logp.gather(-1, input_ids[:, p:, None]).squeeze(-1)
    return token, -(logp.exp() * logp).sum(-1)


@pytest.mark.parametrize("chunk", [1, 3, 7, 64])
def test_chunked_log_probs_and_entropy_match_full_log_softmax(batch, chunk):
    model, input_ids, attention, p = batch
    temps = torch.tensor([0.1, 0.7, 1.3])
    got = completion_scores(model, input_ids, attention, p, temps, chunk=chunk, with_entropy=True)
    want_lp, want_ent = _reference(model, input_ids, attention, p, temps)
    torch.testing.assert_close(got.log_probs, want_lp, atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(got.entropy, want_ent, atol=2e-5, rtol=1e-5)


def test_chunked_gradient_matches_full(batch):
    model, input_ids, attention, p = batch
    temps = torch.tensor([0.5, 1.0, 2.0])
    weights = torch.randn(3, input_ids.shape[1] - p)

    def grads(fn):
        model.zero_grad()
        (fn() * weights).sum().backward()
        return [q.grad.clone() for q in model.parameters()]

    chunked = grads(
        lambda: completion_scores(model, input_ids, attention, p, temps, chunk=2).log_probs
    )
    full = grads(lambda: _reference(model, input_ids, attention, p, temps)[0])
    for a, b in zip(chunked, full, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_left_padding_gives_the_same_log_probs_as_no_padding(batch):
    model, input_ids, attention, p = batch
    row = 2  # the shortest prompt, most padding
    alone = attention[row].bool()
    single = completion_scores(
        model,
        input_ids[row : row + 1, alone],
        attention[row : row + 1, alone],
        int(alone[:p].sum()),
        None,
    ).log_probs
    padded = completion_scores(model, input_ids, attention, p, None).log_probs[row : row + 1]
    torch.testing.assert_close(single, padded, atol=1e-5, rtol=1e-5)


def test_completion_mask_keeps_the_first_eos_and_nothing_after():
    ids = torch.tensor([[5, 6, 1, 7, 1], [5, 5, 5, 5, 5], [1, 9, 9, 9, 9]])
    assert completion_mask(ids, eos_id=1).tolist() == [
        [1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1],
        [1, 0, 0, 0, 0],
    ]


def test_row_temperatures_fixed_position_in_group_and_processor_divides_rows():
    temps = row_temperatures(3, 4, [0.1, 0.4, 0.7, 1.0])
    assert temps.view(3, 4).tolist() == [[pytest.approx(t) for t in [0.1, 0.4, 0.7, 1.0]]] * 3
    with pytest.raises(ValueError, match="one temperature per position"):
        row_temperatures(3, 4, [1.0, 1.0])
    scores = torch.ones(2, 5)
    out = RowTemperature(torch.tensor([0.5, 2.0]))(None, scores)
    assert out[:, 0].tolist() == [2.0, 0.5]


@pytest.mark.parametrize("order", [[0, 1, 2, 3, 4, 5], [2, 3, 0, 5, 4, 1], [1, 2, 3], [0, 3, 4]])
def test_shared_prompt_prefix_gives_the_same_values_and_gradients(batch, order):
    """Rows of two groups of 3, in any order or subset (a micro-batch that splits groups): the
    shared-prompt path equals running every row in full."""
    model, input_ids, attention, p = batch
    g = 3
    ids = input_ids[:1].repeat(g * 2, 1)  # two groups of 3 rows sharing a prompt each
    ids[g:, :p] = input_ids[2, :p]
    att = torch.cat([attention[:1].repeat(g, 1), attention[2:3].repeat(g, 1)])
    ids[:, p:] = torch.randint(2, 200, (g * 2, ids.shape[1] - p))
    temps = torch.tensor([0.5, 1.0, 2.0] * 2)
    weights = torch.randn(g * 2, ids.shape[1] - p)
    rows = torch.tensor(order)
    ids, att, temps, weights = ids[rows], att[rows], temps[rows], weights[rows]

    def run(share):
        model.zero_grad()
        s = completion_scores(
            model, ids, att, p, temps, chunk=3, with_entropy=True, share_prompts=share
        )
        (s.log_probs * weights).sum().backward()
        return s, [q.grad.clone() for q in model.parameters()]

    (full, gfull), (shared, gshared) = run(False), run(True)
    torch.testing.assert_close(shared.log_probs, full.log_probs, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(shared.entropy, full.entropy, atol=1e-5, rtol=1e-5)
    for a, b in zip(gshared, gfull, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_sampling_with_the_shared_prompt_cache_matches_full_prefill(monkeypatch):
    import pgrpo.train.generation as gen
    from pgrpo.train.policies import Policy

    torch.manual_seed(0)
    policy = Policy(tiny_model(ModelConfig(name="tiny", tiny_hidden=32), 2), ByteTokenizer(), "t")
    prompts = ["What is 1 + 2?", "What is 33 + 4? Answer", "x"]

    def draw():
        torch.manual_seed(0)
        return gen.sample(policy, prompts, group_size=3, temperatures=[0.5, 1, 2], max_new_tokens=6)

    shared = draw()
    monkeypatch.setattr(gen, "shared_prompt_cache", lambda *a, **k: None)
    full = draw()
    assert torch.equal(shared.input_ids, full.input_ids)
    assert shared.texts == full.texts
    assert shared.completion_mask.shape == (9, shared.completion_ids.shape[1])


def test_row_temperature_sampler_draws_softmax_of_logits_over_temperature():
    """Chi-square goodness of fit of 20,000 draws per row against softmax(logits / T_i)."""
    from scipy.stats import chisquare

    from pgrpo.train.generation import RowTemperatureSampler

    torch.manual_seed(0)
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, -30.0], [0.5, 0.4, 3.0, -2.0, 0.0]])
    temps = torch.tensor([0.7, 2.0])
    n = 20_000
    draws = [RowTemperatureSampler(temps)(None, logits).argmax(-1) for _ in range(n)]
    counts = torch.stack([torch.bincount(torch.stack(draws)[:, i], minlength=5) for i in range(2)])
    for i in range(2):
        p = torch.softmax(logits[i].double() / temps[i], -1)
        keep = p > 1e-6
        res = chisquare(counts[i][keep].double().numpy(), (p[keep] / p[keep].sum() * n).numpy())
        assert res.pvalue > 1e-3, (i, counts[i], p)
    assert counts[0, 4] == 0  # a token of probability ~1e-19 is never drawn
    out = RowTemperatureSampler(temps)(None, logits)
    assert torch.isinf(out).sum(-1).tolist() == [4, 4] and (out.max(-1).values == 0).all()


@given(
    logits=st.lists(
        st.lists(st.floats(-20, 20, allow_nan=False), min_size=6, max_size=6),
        min_size=1,
        max_size=5,
    ),
    greedy=st.lists(st.booleans(), min_size=5, max_size=5),
)
@settings(max_examples=50, deadline=None)
def test_a_row_at_temperature_zero_takes_the_argmax(logits, greedy):
    """Greedy rows (T = 0, for evaluation) take the argmax; the other rows are drawn as before,
    from the same random stream."""
    from pgrpo.train.generation import RowTemperatureSampler

    scores = torch.tensor(logits, dtype=torch.float32)
    n = scores.shape[0]
    temps = torch.tensor([0.0 if g else 0.8 for g in greedy[:n]])
    torch.manual_seed(1)
    out = RowTemperatureSampler(temps)(None, scores)
    torch.manual_seed(1)
    sampled = RowTemperatureSampler(torch.full((n,), 0.8))(None, scores)
    assert torch.isfinite(out).sum(-1).tolist() == [1] * n
    for i in range(n):
        want = scores[i].argmax() if temps[i] == 0 else sampled[i].argmax()
        assert out[i].argmax() == want


def _autograd_chunk(hidden, targets, inv_temp, head):
    """The head's log-probs as plain autograd ops (pgrpo before 2026-12-02): fp32 logits,
    temperature, logsumexp, gather. The reference `_TokenLogProbs` must match bit for bit."""
    logits = head(hidden).float()
    if inv_temp is not None:
        logits = logits * inv_temp
    lse = torch.logsumexp(logits, dim=-1)
    return logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - lse


@given(
    n=st.integers(1, 5),
    t=st.integers(1, 9),
    chunk=st.integers(1, 10),
    tempered=st.booleans(),
    bf16=st.booleans(),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=25, deadline=None)
def test_head_gradient_is_bit_identical_to_autograd_of_the_fp32_logits(
    n, t, chunk, tempered, bf16, seed
):
    """completion_scores' head (`_TokenLogProbs`: the gradient built in place from the bf16 head
    output) gives the same log-probs and the same gradient of every weight, bit for bit, as
    autograd through fp32 logits, chunked and checkpointed the same way; in fp32 and bf16
    autocast, at T = 1 and at per-row temperatures."""
    from torch.utils.checkpoint import checkpoint

    from pgrpo.train import logprobs

    g = torch.Generator().manual_seed(seed)
    model = tiny_model(ModelConfig(name="tiny", tiny_hidden=32, tiny_layers=2), seed=seed)
    p = 3
    ids = torch.randint(2, 200, (n, p + t), generator=g)
    mask = torch.ones_like(ids)
    temps = torch.rand(n, generator=g) + 0.5 if tempered else None
    weights = torch.randn(n, t, generator=g)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16)

    def grads(fn):
        model.zero_grad(set_to_none=True)
        with autocast:
            lp = fn()
        (lp * weights).sum().backward()
        return [lp.detach()] + [q.grad.clone() for q in model.parameters()]

    def reference():
        hidden = logprobs.completion_hidden(model, ids, mask, p)
        inv = None if temps is None else (1.0 / temps).view(n, 1, 1)
        head = model.get_output_embeddings()
        parts = []
        for s in range(0, t, chunk):
            args = (hidden[:, s : s + chunk], ids[:, p + s : p + s + chunk], inv, head)
            if t > chunk:
                parts.append(checkpoint(_autograd_chunk, *args, use_reentrant=False))
            else:
                parts.append(_autograd_chunk(*args))
        return torch.cat(parts, dim=1)

    got = grads(
        lambda: (
            completion_scores(model, ids, mask, p, temps, chunk=chunk, with_entropy=True).log_probs
        )
    )
    want = grads(reference)
    for a, b in zip(got, want, strict=True):
        assert torch.equal(a, b)


def test_head_keeps_its_bf16_output_for_backward_not_an_fp32_copy():
    """Under bf16 autocast with one chunk (no recompute), the only [N, T, V] tensor autograd
    keeps for the head's backward is the head's bf16 output: half the bytes of the fp32 logits
    that autograd of logsumexp would save (pgrpo before 2026-12-02 kept those: this fails)."""
    model = tiny_model(ModelConfig(name="tiny", tiny_hidden=32, tiny_layers=2), seed=0)
    n, p, t = 4, 3, 5
    ids = torch.randint(2, 200, (n, p + t), generator=torch.Generator().manual_seed(0))
    vocab = model.get_output_embeddings().weight.shape[0]
    saved: dict[int, torch.Tensor] = {}

    def pack(x):
        if x.dim() == 3 and x.shape[-1] == vocab:
            saved[x.untyped_storage().data_ptr()] = x
        return x

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            completion_scores(model, ids, torch.ones_like(ids), p, chunk=16, with_entropy=True)
    assert [x.dtype for x in saved.values()] == [torch.bfloat16]
    assert sum(x.untyped_storage().nbytes() for x in saved.values()) == n * t * vocab * 2
