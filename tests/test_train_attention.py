"""pgrpo's attention for the update's passes (`train/attention.py`).

- `grouped_attention` equals torch's `scaled_dot_product_attention` on keys / values repeated to
  the query heads (computed in float64), output and the gradients of q, k and v, for random
  batch sizes, head groupings, lengths, cached keys and left padding: in float32 to float32
  rounding; a query row with nothing to attend to is finite; a key nobody may attend to gets no
  gradient, exactly.
- Under bf16 autocast it is the float32 computation of the bf16-rounded inputs (autocast does not
  turn its matmuls to bf16), as `attention_forward` hands it what autocast hands sdpa.
- `attention_forward` is transformers' sdpa, bit for bit, wherever it does not apply (one query
  position, dropout, a float mask, a device other than the CPU is not testable here).
- A model with "pgrpo" attention gives the log-probs and gradients of the same model with sdpa
  (float32, to rounding), for plain and grouped-query Llama and LoRA; `use_attention` keeps an
  implementation it does not replace; a config with an unknown kernel is refused in one line.
"""

from __future__ import annotations

import pytest
import torch
from cli_checks import one_line_error
from hypothesis import given, settings
from hypothesis import strategies as st
from train_checks import tiny_llama
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from pgrpo.train.attention import NAME, attention_forward, grouped_attention, use_attention
from pgrpo.train.logprobs import completion_scores


def _repeat(x: torch.Tensor, r: int) -> torch.Tensor:
    b, h, n, d = x.shape
    return x[:, :, None].expand(b, h, r, n, d).reshape(b, h * r, n, d)


@st.composite
def attention_cases(draw):
    b, kv, r = draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    lq, past = draw(st.integers(2, 9)), draw(st.integers(0, 6))
    keys = lq + past
    pads = draw(st.lists(st.integers(0, keys - 1), min_size=b, max_size=b))
    return {
        "b": b,
        "kv": kv,
        "r": r,
        "lq": lq,
        "keys": keys,
        "d": draw(st.sampled_from([4, 8, 16])),
        "pads": pads,
        "seed": draw(st.integers(0, 2**16)),
        "scale": draw(st.sampled_from([None, 0.3])),
    }


def _inputs(case, dtype=torch.float32):
    g = torch.Generator().manual_seed(case["seed"])
    b, h, kv = case["b"], case["kv"] * case["r"], case["kv"]
    q = torch.randn(b, h, case["lq"], case["d"], generator=g) * 2
    k = torch.randn(b, kv, case["keys"], case["d"], generator=g) * 2
    v = torch.randn(b, kv, case["keys"], case["d"], generator=g)
    causal = torch.ones(case["lq"], case["keys"], dtype=torch.bool).tril(case["keys"] - case["lq"])
    left = torch.arange(case["keys"])[None, :] >= torch.tensor(case["pads"])[:, None]  # [B, L]
    allowed = (causal[None] & left[:, None])[:, None]  # [B, 1, Lq, L]
    return [x.to(dtype).requires_grad_() for x in (q, k, v)], allowed


@given(case=attention_cases())
@settings(max_examples=60, deadline=None)
def test_grouped_attention_equals_sdpa_on_repeated_heads(case):
    (q, k, v), allowed = _inputs(case)
    live = allowed.any(-1, keepdim=True)  # [B, 1, Lq, 1]: rows with something to attend to
    out = grouped_attention(q, k, v, allowed, case["scale"])
    assert out.shape == q.shape and torch.isfinite(out).all()
    r = case["r"]
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.double(),
        _repeat(k.double(), r),
        _repeat(v.double(), r),
        attn_mask=allowed,
        scale=case["scale"],
    )
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(case["seed"] + 1))
    grad = grad * live  # as in a model: nothing reads a row that attends to nothing
    ours = torch.autograd.grad(out, (q, k, v), grad)
    theirs = torch.autograd.grad(ref, (q, k, v), grad.double())
    torch.testing.assert_close(out * live, (ref * live).float(), atol=2e-5, rtol=1e-5)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b.float(), atol=5e-5, rtol=1e-4)
    # a key no query may attend to (left padding of every row of a batch entry) gets no gradient
    unseen = ~allowed.any(-2)[:, 0]  # [B, L]
    assert (ours[1].abs().sum((1, 3))[unseen] == 0).all()
    assert (ours[2].abs().sum((1, 3))[unseen] == 0).all()


@given(case=attention_cases())
@settings(max_examples=30, deadline=None)
def test_under_autocast_it_is_the_float32_computation_of_the_bf16_inputs(case):
    (q, k, v), allowed = _inputs(case, torch.bfloat16)
    module = torch.nn.Module()
    module.is_causal = True
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, _ = attention_forward(module, q.float(), k.float(), v.float(), allowed)
    want = grouped_attention(q.float(), k.float(), v.float(), allowed).to(torch.bfloat16)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, want.transpose(1, 2))


@pytest.mark.parametrize("kind", ["one query", "dropout", "float mask"])
def test_where_it_does_not_apply_it_is_sdpa_bit_for_bit(kind):
    case = {"b": 2, "kv": 2, "r": 3, "lq": 5, "keys": 7, "d": 8, "pads": [0, 2], "seed": 3}
    (q, k, v), allowed = _inputs({**case, "lq": 1} if kind == "one query" else case)
    module = torch.nn.Module()
    module.num_key_value_groups, module.is_causal = 3, True
    mask, dropout = allowed, 0.0
    if kind == "float mask":
        mask = torch.where(allowed, 0.0, torch.finfo(torch.float32).min)
    if kind == "dropout":
        dropout = 0.5
    torch.manual_seed(0)
    got, _ = attention_forward(module, q, k, v, mask, dropout=dropout)
    torch.manual_seed(0)
    want, _ = sdpa_attention_forward(module, q, k, v, mask, dropout=dropout)
    assert torch.equal(got, want)


@given(
    kind=st.sampled_from(["llama", "llama-gqa", "lora"]),
    rows=st.integers(1, 4),
    prompt=st.integers(1, 6),
    completion=st.integers(1, 6),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=25, deadline=None)
def test_a_model_with_pgrpo_attention_scores_as_with_sdpa(kind, rows, prompt, completion, seed):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 11, (rows, prompt + completion), generator=g)
    mask = torch.ones_like(ids)
    for i in range(rows):  # left padding of random length, at least one prompt token kept
        mask[i, : int(torch.randint(0, prompt, (1,), generator=g))] = 0
    results = {}
    for attention in ("sdpa", NAME):
        model = tiny_llama(kind, 11, seed)
        assert use_attention(model, attention) == attention
        scores = completion_scores(model, ids, mask, prompt)
        scores.log_probs.sum().backward()
        grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
        results[attention] = (scores.log_probs.detach(), grads)
    (lp_s, g_s), (lp_p, g_p) = results["sdpa"], results[NAME]
    torch.testing.assert_close(lp_p, lp_s, atol=1e-5, rtol=1e-5)
    assert g_s.keys() == g_p.keys()
    for name in g_s:
        torch.testing.assert_close(g_p[name], g_s[name], atol=1e-5, rtol=1e-4)


def test_auto_replaces_sdpa_only():
    model = tiny_llama("llama", 11, 0)
    assert model.config._attn_implementation == "sdpa"
    assert use_attention(model, "auto") == NAME
    eager = tiny_llama("llama", 11, 0)
    use_attention(eager, "eager")
    assert use_attention(eager, "auto") == "eager"  # an implementation it does not replace
    assert use_attention(model, "sdpa") == "sdpa"


def test_an_unknown_attention_is_refused_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from pgrpo.cli import _load_commands, app

    _load_commands()
    overrides = [f"run.output_dir={tmp_path}", "run.name=r", "model.name=tiny"]
    res = CliRunner().invoke(app, ["train", *overrides, "model.attention=flash"])
    one_line_error(res, "model.attention", "'auto'")
    assert not (tmp_path / "r").exists()
