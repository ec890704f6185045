"""pgrpo's decode loop (`generation.decode`) against HF `generate` with the same sampler.

- For the same random state the loop draws the same tokens as `generate` + `RowTemperatureSampler`
  (the path it replaces), bit for bit, with the same sampler log-probs, for random prompt
  lengths (left padding), group sizes, temperatures (0 = greedy included), lengths, EOS ids and
  tiny models of every kind the tests use (Llama, grouped-query attention as SmolLM2, LoRA), in
  fp32, bf16 autocast and bf16 weights, with and without the shared-prompt cache, with
  transformers' sdpa and with pgrpo's attention (`train/attention.py`) for the prompt's passes.
- EOS, padding and stopping: pad after a row's first EOS, the loop ends when every row has one,
  and (fp32) the sampler's log-probs equal the full-forward recompute, so positions and masks
  are those of the prompt's left padding.
- The preallocated KV cache holds the same keys / values as transformers' `DynamicCache`.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
import transformers
from hypothesis import given, settings
from hypothesis import strategies as st
from train_checks import tiny_llama
from transformers.cache_utils import DynamicLayer

from pgrpo.train import generation
from pgrpo.train.attention import use_attention
from pgrpo.train.generation import decode, left_pad, shared_prompt_cache
from pgrpo.train.hf_generate import generate_decode
from pgrpo.train.kvcache import PreallocatedLayer, preallocate
from pgrpo.train.logprobs import completion_scores
from pgrpo.train.precision import Precision

KINDS = ("llama", "llama-gqa", "lora")
PRECISIONS = {
    "fp32": Precision("fp32", "fp32"),
    "bf16-autocast": Precision("bf16", "fp32"),
    "bf16-weights": Precision("bf16", "bf16"),
}


def _model(
    kind: str, vocab: int, seed: int, precision: str, attention: str = "sdpa"
) -> torch.nn.Module:
    model = tiny_llama(kind, vocab, seed)
    if precision == "bf16-weights":
        model = model.to(torch.bfloat16)
    use_attention(model, attention)  # the prefill's kernel: transformers' sdpa or pgrpo's
    return model.eval()


@st.composite
def decodes(draw):
    vocab = draw(st.integers(5, 12))
    n_prompts = draw(st.integers(1, 3))
    group = draw(st.integers(1, 3))
    prompts = [
        draw(st.lists(st.integers(2, vocab - 1), min_size=1, max_size=6)) for _ in range(n_prompts)
    ]
    temps = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0]), min_size=group, max_size=group))
    return {
        "kind": draw(st.sampled_from(KINDS)),
        "precision": draw(st.sampled_from(sorted(PRECISIONS))),
        "vocab": vocab,
        "prompts": prompts,
        "group": group,
        "temps": temps,
        "max_new_tokens": draw(st.integers(1, 6)),
        "eos": draw(st.integers(1, vocab - 1)),
        "pad": draw(st.sampled_from([0, None])),  # None: pad = eos (a tokenizer without pad)
        "shared": draw(st.booleans()),
        "seed": draw(st.integers(0, 2**16)),
        "attention": draw(st.sampled_from(["sdpa", "pgrpo"])),
    }


def _run(fn, case, model):
    """One decode of `case` by `fn` (decode or generate_decode) from the case's random state."""
    pad = case["eos"] if case["pad"] is None else case["pad"]
    repeated = [p for p in case["prompts"] for _ in range(case["group"])]
    ids, mask = left_pad(repeated, pad)
    temps = torch.tensor(case["temps"] * len(case["prompts"]), dtype=torch.float32)
    precision = PRECISIONS[case["precision"]]
    with precision.autocast():
        cache = None
        if case["shared"]:
            cache = shared_prompt_cache(model, case["prompts"], pad, case["group"])
        torch.manual_seed(case["seed"])
        out = fn(
            model,
            ids,
            mask,
            temps,
            max_new_tokens=case["max_new_tokens"],
            eos_id=case["eos"],
            pad_id=pad,
            cache=cache,
            with_log_probs=True,
        )
    return ids, mask, temps, out


@given(case=decodes())
@settings(max_examples=40, deadline=None)
def test_the_loop_draws_the_same_tokens_as_generate(case):
    model = _model(case["kind"], case["vocab"], case["seed"], case["precision"], case["attention"])
    _, _, _, ours = _run(decode, case, model)
    _, _, _, ref = _run(generate_decode, case, model)
    assert torch.equal(ours.completion_ids, ref.completion_ids)
    greedy = torch.tensor(case["temps"] * len(case["prompts"])) == 0
    # greedy rows' log-probs are log softmax(logits / 0): not finite in either path
    assert torch.equal(ours.log_probs[~greedy], ref.log_probs[~greedy])


@given(case=decodes())
@settings(max_examples=30, deadline=None)
def test_eos_padding_and_stopping_for_random_shapes(case):
    case = {**case, "precision": "fp32", "pad": 0, "temps": [max(t, 0.5) for t in case["temps"]]}
    model = _model(case["kind"], case["vocab"], case["seed"], "fp32", case["attention"])
    ids, mask, temps, out = _run(decode, case, model)
    tokens, eos, n = out.completion_ids, case["eos"], ids.shape[0]
    length = tokens.shape[1]
    assert tokens.shape[0] == n and 1 <= length <= case["max_new_tokens"]
    is_eos = tokens == eos
    first = torch.where(is_eos.any(1), is_eos.long().argmax(1), length)
    after = torch.arange(length)[None, :] > first[:, None]
    assert (tokens[after] == 0).all()  # pad after the first EOS
    if length < case["max_new_tokens"]:  # stopped early: every row ended, the last just now
        assert is_eos.any(1).all() and int(first.max()) == length - 1
    else:
        assert not is_eos[:, :-1].any(1).all()  # not every row had ended before the last step
    # positions and masks: the sampler's log-probs are those of a full forward of the sequence
    full_ids = torch.cat([ids, tokens], dim=1)
    full_mask = torch.cat([mask, torch.ones_like(tokens)], dim=1)
    with torch.no_grad():
        again = completion_scores(model, full_ids, full_mask, ids.shape[1], temps).log_probs
    keep = ~after
    torch.testing.assert_close(out.log_probs[keep], again[keep], atol=1e-4, rtol=1e-4)


def test_greedy_rows_ignore_the_random_state_and_zero_tokens_fail():
    model = _model("llama-gqa", 9, 3, "fp32")
    case = {
        "prompts": [[2, 3, 4], [5]],
        "group": 2,
        "temps": [0.0, 0.0],
        "max_new_tokens": 5,
        "eos": 1,
        "pad": 0,
        "shared": True,
        "precision": "fp32",
    }
    a = _run(decode, {**case, "seed": 1}, model)[3].completion_ids
    b = _run(decode, {**case, "seed": 2}, model)[3].completion_ids
    assert torch.equal(a, b)
    with pytest.raises(ValueError, match="max_new_tokens=0: give at least 1"):
        _run(decode, {**case, "seed": 1, "max_new_tokens": 0}, model)


def test_sample_builds_the_same_rollout_as_through_generate(monkeypatch):
    """`sample` end to end (texts, masks, truncation, sampler log-probs) on the tiny model."""
    from pgrpo.train.config import ModelConfig
    from pgrpo.train.policies import ByteTokenizer, Policy, tiny_model

    policy = Policy(tiny_model(ModelConfig(name="tiny", tiny_hidden=32), 2), ByteTokenizer(), "t")
    prompts = ["What is 1 + 2?", "What is 33 + 4? Answer", "x"]

    def draw():
        torch.manual_seed(0)
        return generation.sample(
            policy,
            prompts,
            group_size=2,
            temperatures=[0.7, 1.3],
            max_new_tokens=7,
            with_log_probs=True,
        )

    ours = draw()
    monkeypatch.setattr(generation, "decode", generate_decode)
    ref = draw()
    for field in (
        "input_ids",
        "attention_mask",
        "completion_mask",
        "truncated",
        "sampler_log_probs",
    ):
        assert torch.equal(getattr(ours, field), getattr(ref, field)), field
    assert ours.texts == ref.texts and ours.prompt_len == ref.prompt_len


@given(
    steps=st.lists(st.integers(1, 4), min_size=1, max_size=6),
    capacity=st.integers(1, 12),
    regroup=st.sampled_from(["none", "repeat", "select"]),
    autocast=st.booleans(),
    seed=st.integers(0, 1000),
)
@settings(max_examples=60, deadline=None)
def test_the_preallocated_layer_holds_what_dynamic_cache_holds(
    steps, capacity, regroup, autocast, seed
):
    torch.manual_seed(seed)
    ours, ref = PreallocatedLayer(capacity), DynamicLayer()
    ctx = torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
    want = torch.bfloat16 if autocast else torch.float32  # autocast: what attention casts to
    buffers, batch = set(), 2
    with ctx:
        for i, q in enumerate(steps):
            if i == 1 and regroup != "none":  # as the shared-prompt cache is repeated / selected
                for layer in (ours, ref):
                    if regroup == "repeat":
                        layer.batch_repeat_interleave(2)
                    else:
                        layer.batch_select_indices(torch.tensor([1, 0, 0, 1]))
                batch = 4
            k, v = torch.randn(batch, 3, q, 4), torch.randn(batch, 3, q, 4)
            keys, values = ours.update(k, v)
            ref_keys, ref_values = ref.update(k, v)
            assert keys.dtype == values.dtype == want
            assert torch.equal(keys, ref_keys.to(want)) and torch.equal(values, ref_values.to(want))
            assert ours.get_seq_length() == ref.get_seq_length()
            buffers.add(keys.untyped_storage().data_ptr())
    if capacity >= sum(steps) and regroup == "none":
        assert len(buffers) == 1  # written in place: one buffer for every step


def test_preallocate_keeps_other_layer_kinds_and_the_cached_prompt():
    model = _model("llama-gqa", 9, 0, "fp32")
    cache = shared_prompt_cache(model, [[2, 3, 4], [5, 6]], 0, 2)
    lengths = [layer.get_seq_length() for layer in cache.layers]
    keys = [layer.keys.clone() for layer in cache.layers]
    sliding = transformers.cache_utils.DynamicSlidingWindowLayer(sliding_window=4)
    cache.layers.append(sliding)
    out = preallocate(cache, model.config, capacity=10)
    assert [type(layer) for layer in out.layers] == [PreallocatedLayer] * 2 + [type(sliding)]
    assert [layer.get_seq_length() for layer in out.layers[:2]] == lengths
    assert all(torch.equal(a.keys, b) for a, b in zip(out.layers[:2], keys, strict=True))
