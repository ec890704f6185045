"""Review 37: the trainer's exactness claims, as properties, where earlier tests left gaps.

"Exactness is tested by properties, not examples: micro-batched equals full-batch, resumed equals
uninterrupted, for random shapes and every model kind." The earlier property tests
(test_train_update, test_train_checkpointing, test_train_lean, test_train_resume) compare the
trainer with itself on the tiny Llama only, with completions that almost never end early (an
untrained byte model rarely draws EOS), random non-zero advantages, k3 KL with one coefficient,
the clipped loss, and resume at K = 1 (LoRA) or K = 2 (full) under one schedule and AdamW. Here:

1. The update against an independent, naive oracle (each row alone, unpadded, eager attention,
   a full log-softmax, the loss written out from docs/trainer.md), for the tiny Llama, Qwen2,
   Qwen3 and Gemma decoders (+ LoRA), hand-built rollouts with very different prompt and
   completion lengths (1-token, truncated, duplicated prompts), advantages of every registered
   estimator on rewards with all-equal groups (zero advantage), every aggregator, both policy
   losses, k1/k2/k3 and asymmetric KL, entropy bonus, scoring at the sampled temperature or 1,
   activation checkpointing / lean layers, arbitrary old log-probs (ratio != 1, clipping) with
   junk off the mask.
2. The whole K-step update (`trainer.optimize`: M minibatches, old log-probs fixed, clipping,
   warm-up + schedule, SGD with EMA momentum and L2) against the same oracle stepping by hand.
3. Minibatched == full batch: at the same weights the minibatch gradients, weighted by their
   share of the aggregator's denominator, sum to the full-batch gradient.
4. Lag 0 is the on-policy step bit for bit (old log-probs == the gradient pass's log-probs) also
   with an entropy bonus (another head path), checkpointing, lean layers, every model kind, bf16.
5. bf16 autocast micro-batching stays within bf16 rounding of the whole-minibatch update (the
   test_train_update docstring says test_train_precision bounds this; nothing did).
6. Resume == uninterrupted, comparing the whole state.pt (weights, every optimizer-state key,
   scheduler, python/numpy/torch RNG, data position) and the log, for random settings: LoRA,
   K > 1 with M > 1, micro-batches, multi-temperature groups, dual-anchor + prospect and the
   other estimators, asymmetric KL, SGD momentum, linear / cosine schedules with warm-up, fp32,
   bf16 autocast and bf16 weights; through the Hugging Face loading path for Llama, Qwen2, Qwen3
   and Gemma folders; with SIGINT delivered mid-way through the K inner steps (one signal: the
   step finishes and is checkpointed; two: the step is abandoned); with the online forecast on;
   and extending a finished run's run.steps under a constant schedule.

Each comparison is a function returning its mismatches; the `test_planted_*` tests plant a bug
(monkeypatched, in this process only) and check that the comparison reports it, so none of the
properties above passes vacuously.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import itertools
import math
import os
import signal

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from train_checks import DECODER_KINDS, tiny_decoder

import pgrpo.train.trainer as trainer_module
import pgrpo.train.update as pgrpo_update
from pgrpo.core.advantages import ADVANTAGE_ESTIMATORS, compute_advantages
from pgrpo.core.losses import AGGREGATORS, KL_ESTIMATORS, POLICY_LOSSES, loss_denominator
from pgrpo.train.attention import use_attention
from pgrpo.train.config import load_config
from pgrpo.train.generation import Rollout
from pgrpo.train.interrupts import RunInterrupted
from pgrpo.train.log import read_metrics
from pgrpo.train.optimizers import build_optimizer
from pgrpo.train.policies import ByteTokenizer, Policy
from pgrpo.train.precision import resolve_precision
from pgrpo.train.setup import _Run, make_scheduler
from pgrpo.train.trainer import TIMING_KEYS, optimize, train
from pgrpo.train.update import (
    _partition,
    _score_rows,
    minibatch_gradient,
    minibatches,
    scoring_temperatures,
    sequence_scores,
)

KINDS = DECODER_KINDS
VOCAB = 97
EOS, PAD = 1, 0
FAST = dict(deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("PGRPO_CACHE", str(tmp_path_factory.getbasetemp() / "pgrpo-cache"))


# ---------------------------------------------------------------------------------------------
# Models, rollouts, configs
# ---------------------------------------------------------------------------------------------


def _decoder(kind: str, seed: int, vocab: int = VOCAB) -> torch.nn.Module:
    """A 2-layer decoder of `kind`, grouped-query (2 query heads on 1 key/value head), eval."""
    return tiny_decoder(kind, seed, vocab_size=vocab, hidden_size=16, intermediate_size=24,
                        pad_token_id=PAD, bos_token_id=None, eos_token_id=EOS,
                        initializer_range=0.2).eval()  # fmt: skip


def _models(kind, lora, seed, precision="fp32", reference=False):
    """(policy as the trainer builds it, an eager-attention copy for the oracle, the initial
    weights' eager copy for the oracle's reference log-probs)."""
    model = _decoder(kind, seed)
    if lora:
        from peft import LoraConfig, get_peft_model

        targets = ["q_proj", "v_proj", "down_proj"]
        model = get_peft_model(
            model, LoraConfig(r=2, lora_alpha=4, target_modules=targets, init_lora_weights=False)
        ).eval()  # a non-zero adapter: the reference (adapter off) differs from the policy
    oracle = copy.deepcopy(model)
    oracle.set_attn_implementation("eager")
    initial = copy.deepcopy(oracle)
    attention = use_attention(model, "auto")
    ref_model = None
    if reference and not lora:  # as load_policy: a frozen copy (LoRA: the adapter disabled)
        ref_model = copy.deepcopy(model).eval()
        ref_model.requires_grad_(False)
    policy = Policy(
        model,
        ByteTokenizer(),
        kind,
        lora=bool(lora),
        reference=ref_model,
        precision=resolve_precision(precision, "float32"),
        attention=attention,
    )
    return policy, oracle, initial


def _rollout(b, g, t, seed, temps, duplicate=False, pmax=5) -> Rollout:
    """B groups of G rows as `generation.sample` lays them out (left-padded prompts, completion
    up to and including the first EOS, pad after it, attention 1 on every completion position),
    with random prompt lengths 1..pmax and completion lengths 1..t (truncated or not)."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, pmax + 1, (b,), generator=gen).tolist()
    prompts = [torch.randint(2, VOCAB, (n,), generator=gen) for n in lengths]
    if duplicate and b > 1:  # the same example twice in a batch (an epoch boundary)
        prompts[-1], lengths[-1] = prompts[0], lengths[0]
    p, n = max(lengths), b * g
    ids = torch.full((n, p + t), PAD, dtype=torch.long)
    att = torch.zeros(n, p + t, dtype=torch.long)
    mask = torch.zeros(n, t, dtype=torch.long)
    for i in range(b):
        for j in range(g):
            r = i * g + j
            ids[r, p - lengths[i] : p] = prompts[i]
            att[r, p - lengths[i] :] = 1
            length = int(torch.randint(1, t + 1, (1,), generator=gen))
            completion = torch.randint(2, VOCAB, (t,), generator=gen)
            if length < t or bool(torch.rand(1, generator=gen) < 0.5):
                completion[length - 1] = EOS
            completion[length:] = PAD
            ids[r, p:] = completion
            mask[r, :length] = 1
    row_temps = torch.tensor(list(temps), dtype=torch.float32).repeat(b)
    return Rollout(ids, att, p, ids[:, p:], mask, row_temps, [""] * n, mask.sum(1) == t)


def _reads_eps(policy_loss: str) -> bool:
    """Whether the policy loss reads a clip range (a loss that does not refuses the option)."""
    return "epsilon_high" in inspect.signature(POLICY_LOSSES.get(policy_loss)).parameters


def _cfg(**o):
    """A RunConfig of the update's settings (the model itself is built by `_models`)."""
    pick = {
        "b": 1,
        "g": 1,
        "m": 1,
        "k": 1,
        "micro": None,
        "agg": "token_mean",
        "pl": "clipped",
        "est": "k3",
        "kl": 0.0,
        "kln": None,
        "ent": 0.0,
        "chunk": 16,
        "score": "sampled",
        "klt": "one",
        "ac": False,
        "lean": False,
        "precision": "fp32",
        "clip": 0.0,
        "optim": "sgd_momentum",
        "beta1": 0.0,
        "wd": 0.0,
        "lr": 0.05,
        "warm": 0,
        "sched": "constant",
        "eps_high": None,
        **o,
    }

    def null(v):
        return "null" if v is None else v

    return load_config(
        None,
        [
            "model.name=tiny",
            f"model.precision={pick['precision']}",
            "grpo.advantage=sign",  # advantages are given; sign allows G = 1
            f"group_size={pick['g']}",
            f"batch_prompts={pick['b']}",
            f"grpo.num_minibatches={pick['m']}",
            f"grpo.refresh_interval={pick['k']}",
            f"grpo.micro_batch_size={null(pick['micro'])}",
            f"grpo.activation_checkpointing={str(pick['ac']).lower()}",
            f"grpo.lean_layers={str(pick['lean']).lower()}",
            f"loss.aggregator={pick['agg']}",
            f"loss.policy_loss={pick['pl']}",
            f"loss.kl_estimator={pick['est']}",
            f"loss.kl_coef={pick['kl']}",
            f"loss.kl_coef_negative={null(pick['kln'])}",
            f"loss.entropy_coef={pick['ent']}",
            f"loss.epsilon_high={null(pick['eps_high'] if _reads_eps(pick['pl']) else None)}",
            f"generation.logprob_chunk={pick['chunk']}",
            f"generation.score_temperature={pick['score']}",
            f"loss.kl_temperature={pick['klt']}",
            f"optim.name={pick['optim']}",
            f"optim.beta1={pick['beta1']}",
            f"optim.weight_decay={pick['wd']}",
            f"optim.lr={pick['lr']}",
            f"optim.max_grad_norm={pick['clip']}",
            f"optim.warmup_steps={pick['warm']}",
            f"optim.schedule={pick['sched']}",
            "run.steps=1",
        ],
    )


def _advantages(name, b, g, seed, constant_groups):
    """Advantages [B*G] of a registered estimator on rewards in {0, 0.5, 1}; the groups in
    `constant_groups` have all-equal rewards (zero advantage for the group-relative ones)."""
    if ADVANTAGE_ESTIMATORS.get(name).needs_group_stats and g < 2:
        name = "sign"
    gen = torch.Generator().manual_seed(seed + 11)
    rewards = torch.randint(0, 3, (b * g,), generator=gen).float() / 2
    for i in constant_groups:
        if i < b:
            rewards[i * g : (i + 1) * g] = rewards[i * g]
    options = {"num_constraints": [1 + (i // g) % 3 for i in range(b * g)]}
    options = options if ADVANTAGE_ESTIMATORS.get(name).columns else {}
    return compute_advantages(name, rewards, group_size=g, **options).advantages.float()


# ---------------------------------------------------------------------------------------------
# The oracle: docs/trainer.md's objective written out, one row at a time
# ---------------------------------------------------------------------------------------------


def _row_scores(model, ro, r, temperature, grad=True):
    """log-probs and entropies [L_r] of row r's L_r completion tokens: the row alone, without
    its padding, one forward, a full log-softmax of logits / temperature."""
    length = int(ro.completion_mask[r].sum())
    prompt = ro.input_ids[r, : ro.prompt_len][ro.attention_mask[r, : ro.prompt_len].bool()]
    seq = torch.cat([prompt, ro.input_ids[r, ro.prompt_len : ro.prompt_len + length]])[None]
    with torch.set_grad_enabled(grad):
        logits = model(input_ids=seq).logits[0, len(prompt) - 1 : len(prompt) - 1 + length]
        logp = torch.log_softmax(logits.float() / temperature, -1)
        lp = logp.gather(-1, seq[0, len(prompt) :, None]).squeeze(-1)
        return lp, -(logp.exp() * logp).sum(-1)


def _kl_temperature(ro, r, cfg) -> float:
    """Row r's KL temperature: where it was drawn (loss.kl_temperature=sampled) or 1."""
    return float(ro.temperatures[r]) if cfg.loss.kl_temperature == "sampled" else 1.0


def _oracle_kl_temperatures(ro, cfg):
    return torch.tensor([_kl_temperature(ro, r, cfg) for r in range(ro.input_ids.shape[0])])


def _oracle_log_probs(model, ro, temps):
    out = torch.zeros(ro.completion_mask.shape)
    for r in range(out.shape[0]):
        lp, _ = _row_scores(model, ro, r, 1.0 if temps is None else float(temps[r]), grad=False)
        out[r, : len(lp)] = lp
    return out


def _oracle_loss(model, ro, idx, adv, old, ref, temps, cfg):
    """(loss, metrics) of minibatch `idx`: per token the clipped surrogate (or -A log pi) plus
    w_i KL (w_i = kl_coef_negative if A_i < 0 and it is set, else kl_coef), aggregated
    (token mean / mean of row means / sum over N * max_length), minus entropy_coef times the
    aggregated entropy. old None: the current log-probs, detached. The KL's log-probs are the
    row's at its KL temperature (`_kl_temperature`), from a forward of their own."""
    loss_cfg = cfg.loss
    terms, entropies, kls, clipped = [], [], [], []
    for r in idx.tolist():
        lp, ent = _row_scores(model, ro, r, 1.0 if temps is None else float(temps[r]))
        a = float(adv[r])
        if loss_cfg.policy_loss == "clipped":
            o = lp.detach() if old is None else old[r, : len(lp)]
            ratio = torch.exp(lp - o)
            lo = 1 - loss_cfg.epsilon_low
            hi = 1 + (
                loss_cfg.epsilon_low if loss_cfg.epsilon_high is None else loss_cfg.epsilon_high
            )
            tok = -torch.minimum(ratio * a, ratio.clamp(lo, hi) * a)
            clipped.append(((ratio < lo) & (a < 0)) | ((ratio > hi) & (a > 0)))
        else:
            tok = -a * lp
        if loss_cfg.uses_reference:
            kl_lp, _ = _row_scores(model, ro, r, _kl_temperature(ro, r, cfg))
            d = ref[r, : len(lp)] - kl_lp  # log pi_ref - log pi
            dc = d.clamp(-20, 20)  # k3 as verl's low_var_kl: lr in [-20, 20], k3 <= k3_max
            k3 = (torch.exp(dc) - dc - 1).clamp(max=loss_cfg.k3_max)
            kl = {"k1": -d, "k2": 0.5 * d**2, "k3": k3}[loss_cfg.kl_estimator]
            neg = loss_cfg.kl_coef_negative is not None and a < 0
            tok = tok + (loss_cfg.kl_coef_negative if neg else loss_cfg.kl_coef) * kl
            kls.append(kl.detach())
        terms.append(tok)
        entropies.append(ent)
    n, tokens = len(idx), sum(len(x) for x in terms)

    def aggregate(values):
        if loss_cfg.aggregator == "token_mean":
            return sum(v.sum() for v in values) / tokens
        if loss_cfg.aggregator == "seq_mean_token_mean":
            return sum(v.sum() / len(v) for v in values) / n
        width = loss_cfg.max_length or ro.completion_mask.shape[1]
        return sum(v.sum() for v in values) / (n * width)

    loss = aggregate(terms)
    if loss_cfg.entropy_coef:
        loss = loss - loss_cfg.entropy_coef * aggregate(entropies)
    metrics = {
        "entropy": float(sum(e.detach().sum() for e in entropies) / tokens),
        "frac_gradient_tokens": sum(
            len(t) for t, r in zip(terms, idx.tolist(), strict=True) if adv[r] != 0
        )
        / tokens,
    }
    if kls:
        metrics["kl"] = float(sum(k.sum() for k in kls) / tokens)
    if clipped:
        metrics["clip_ratio/region_mean"] = float(sum(c.sum() for c in clipped) / tokens)
    return loss, metrics


def _grads(model):
    return {
        name: (p.grad.clone() if p.grad is not None else torch.zeros_like(p))
        for name, p in model.named_parameters()
        if p.requires_grad
    }


def _close(a: torch.Tensor, b: torch.Tensor, rel=1e-4, abs_=1e-5) -> bool:
    """|a - b| <= abs_ + rel * max|b| elementwise (a scale-aware float32 tolerance)."""
    if a.numel() == 0:
        return a.shape == b.shape
    err, scale = float((a - b).abs().max().detach()), float(b.abs().max().detach())
    return bool(torch.isfinite(a).all()) and err <= abs_ + rel * scale


# ---------------------------------------------------------------------------------------------
# 1. One minibatch's gradient (micro-batched) == the oracle's, every model kind
# ---------------------------------------------------------------------------------------------


@st.composite
def update_cases(draw):
    b, g = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    kl = draw(st.sampled_from([0.0, 0.1]))
    return dict(
        kind=draw(st.sampled_from(KINDS)),
        lora=draw(st.sampled_from([0, 0, 1])),
        b=b,
        g=g,
        t=draw(st.integers(1, 9)),
        micro=draw(st.one_of(st.none(), st.integers(1, b * g))),
        agg=draw(st.sampled_from(AGGREGATORS.names())),
        pl=draw(st.sampled_from(POLICY_LOSSES.names())),
        est=draw(st.sampled_from(KL_ESTIMATORS.names())),
        kl=kl,
        kln=draw(st.sampled_from([None, 0.3])),
        ent=draw(st.sampled_from([0.0, 0.05])),
        chunk=draw(st.sampled_from([1, 2, 16])),
        score=draw(st.sampled_from(["sampled", "one"])),
        klt=draw(st.sampled_from(["one", "sampled"])),
        ac=draw(st.booleans()),
        lean=draw(st.booleans()),
        estimator=draw(st.sampled_from(ADVANTAGE_ESTIMATORS.names())),
        constant=draw(st.sampled_from([(), (0,), (0, 1, 2)])),
        with_old=draw(st.booleans()),
        duplicate=draw(st.booleans()),
        seed=draw(st.integers(0, 999)),
    )


def update_mismatches(case) -> list:
    """The trainer's `minibatch_gradient` over a whole batch (micro-batched as drawn) against
    the oracle: loss, every trainable parameter's gradient, and the metrics."""
    c = case
    cfg = _cfg(b=c["b"], g=c["g"], micro=c["micro"], agg=c["agg"], pl=c["pl"], est=c["est"],
               kl=c["kl"], kln=c["kln"], ent=c["ent"], chunk=c["chunk"], score=c["score"],
               klt=c.get("klt", "one"), ac=c["ac"], lean=c["lean"])  # fmt: skip
    policy, oracle, _ = _models(c["kind"], c["lora"], c["seed"])
    temps = [0.5, 1.0, 2.0, 0.7][: c["g"]]
    ro = _rollout(c["b"], c["g"], c["t"], c["seed"], temps, c["duplicate"])
    n, width = c["b"] * c["g"], c["t"]
    adv = _advantages(c["estimator"], c["b"], c["g"], c["seed"], c["constant"])
    gen = torch.Generator().manual_seed(c["seed"] + 3)
    on = ro.completion_mask.bool()
    base = torch.randn(n, width, generator=gen) * 0.3 - 2.0
    junk = torch.full((n, width), math.nan)  # what sits off the mask must not matter
    old = torch.where(on, base, junk) if c["with_old"] else None
    ref = torch.where(on, base + 0.2 * torch.randn(n, width, generator=gen), -math.inf)
    ref = ref if cfg.loss.uses_reference else None
    row_temps = scoring_temperatures(ro, cfg)
    idx = torch.arange(n)
    policy.model.zero_grad(set_to_none=True)
    got = minibatch_gradient(policy, cfg, ro, idx, adv, old, ref, row_temps, first=True)
    loss, metrics = _oracle_loss(oracle, ro, idx, adv, old, ref, row_temps, cfg)
    oracle.zero_grad(set_to_none=True)
    loss.backward()
    bad = []
    loss_value = float(loss.detach())
    if not math.isclose(float(got.loss), loss_value, rel_tol=1e-4, abs_tol=1e-6):
        bad.append(("loss", float(got.loss), loss_value))
    for key, value in metrics.items():
        if not math.isclose(got.metrics[key], value, rel_tol=1e-4, abs_tol=1e-6):
            bad.append((key, got.metrics[key], value))
    want, have = _grads(oracle), _grads(policy.model)
    bad += [(name, "grad") for name in want if not _close(have[name], want[name])]
    return bad


@settings(max_examples=60, **FAST)
@given(update_cases())
@example(  # every group equal: zero advantage everywhere, only the asymmetric KL pulls
    dict(kind="qwen3", lora=1, b=3, g=3, t=7, micro=4, agg="token_mean", pl="clipped", est="k3",
         kl=0.1, kln=0.3, ent=0.0, chunk=2, score="sampled", ac=False, lean=False,
         estimator="grpo", constant=(0, 1, 2), with_old=True, duplicate=True, seed=5)
)  # fmt: skip
@example(  # Dr. GRPO, 1-token and full-length completions, micro-batches splitting groups
    dict(kind="gemma", lora=0, b=3, g=2, t=8, micro=5, agg="seq_sum_constant_norm",
         pl="clipped", est="k1", kl=0.1, kln=None, ent=0.05, chunk=3, score="one", ac=True,
         lean=False, estimator="dr_grpo", constant=(1,), with_old=True, duplicate=False, seed=7)
)  # fmt: skip
def test_micro_batched_update_equals_the_naive_oracle_for_every_model_kind(case):
    assert update_mismatches(case) == []


# ---------------------------------------------------------------------------------------------
# 2. The K-step update (`trainer.optimize`) == the oracle stepping by hand
# ---------------------------------------------------------------------------------------------


@st.composite
def k_step_cases(draw):
    b, g = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    n = b * g
    m = draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
    return dict(
        kind=draw(st.sampled_from(KINDS)),
        lora=draw(st.sampled_from([0, 0, 1])),
        b=b,
        g=g,
        m=m,
        k=m * draw(st.integers(1, 2)),
        t=draw(st.integers(1, 7)),
        micro=draw(st.one_of(st.none(), st.integers(1, n))),
        agg=draw(st.sampled_from(AGGREGATORS.names())),
        kl=draw(st.sampled_from([0.0, 0.1])),
        kln=draw(st.sampled_from([None, 0.3])),
        ent=draw(st.sampled_from([0.0, 0.02])),
        clip=draw(st.sampled_from([0.0, 0.5])),
        beta1=draw(st.sampled_from([0.0, 0.9])),
        wd=draw(st.sampled_from([0.0, 0.1])),
        warm=draw(st.sampled_from([0, 2])),
        sched=draw(st.sampled_from(["constant", "linear", "cosine"])),
        eps_high=draw(st.sampled_from([None, 0.28])),
        pl=draw(st.sampled_from(POLICY_LOSSES.names())),
        est=draw(st.sampled_from(KL_ESTIMATORS.names())),
        score=draw(st.sampled_from(["sampled", "one"])),
        klt=draw(st.sampled_from(["one", "sampled"])),
        estimator=draw(st.sampled_from(["grpo", "dual_anchor", "rloo", "sign"])),
        constant=draw(st.sampled_from([(), (0,)])),
        seed=draw(st.integers(0, 999)),
    )


def _lr_factor(step, total, warm, sched):
    """docs/trainer.md: linear warm-up (step + 1) / warmup, then the decay of
    frac = (step - warmup) / (total - warmup), 0 one step past the last optimizer step."""
    if step < warm:
        return (step + 1) / warm
    frac = min(max((step - warm) / max(total - warm, 1), 0.0), 1.0)
    return {"constant": 1.0, "linear": 1 - frac, "cosine": 0.5 * (1 + math.cos(math.pi * frac))}[
        sched
    ]


def k_step_mismatches(case) -> list:
    """`trainer.optimize` (K optimizer steps, step k on minibatch k mod M, old log-probs of the
    sampling policy, clipping by the global norm, the lr schedule, SGD with EMA momentum
    dampening = beta1 and coupled L2) against the oracle doing the same by hand: each step's
    (clipped) gradient, the final weights and the logged loss, grad_norm, learning_rate."""
    c = case
    cfg = _cfg(b=c["b"], g=c["g"], m=c["m"], k=c["k"], micro=c["micro"], agg=c["agg"],
               kl=c["kl"], kln=c["kln"], ent=c["ent"], clip=c["clip"], beta1=c["beta1"],
               wd=c["wd"], warm=c["warm"], sched=c["sched"], eps_high=c["eps_high"], chunk=3,
               pl=c.get("pl", "clipped"), est=c.get("est", "k3"),
               score=c.get("score", "sampled"), klt=c.get("klt", "one"))  # fmt: skip
    policy, oracle, initial = _models(c["kind"], c["lora"], c["seed"], reference=True)
    temps = [0.5, 1.0, 2.0][: c["g"]]
    ro = _rollout(c["b"], c["g"], c["t"], c["seed"], temps)
    adv = _advantages(c["estimator"], c["b"], c["g"], c["seed"], c["constant"])
    params = policy.trainable_parameters()
    opt = build_optimizer(params, cfg.optim)
    seen: list[list[torch.Tensor]] = []
    opt.register_step_pre_hook(lambda *_: seen.append([p.grad.clone() for p in params]))
    run = _Run(cfg, policy, None, None, opt, make_scheduler(opt, cfg), tuple(temps))  # type: ignore[arg-type]
    logged = optimize(run, ro, adv)

    row_temps = scoring_temperatures(ro, cfg)
    if cfg.loss.uses_reference:
        kl_temps = _oracle_kl_temperatures(ro, cfg)
        if c["lora"]:
            with initial.disable_adapter():
                ref = _oracle_log_probs(initial, ro, kl_temps)
        else:
            ref = _oracle_log_probs(initial, ro, kl_temps)
    else:
        ref = None
    old = _oracle_log_probs(oracle, ro, row_temps) if c["k"] > 1 else None
    mine = [p for p in oracle.parameters() if p.requires_grad]
    rows = list(torch.arange(ro.input_ids.shape[0]).chunk(c["m"]))
    momentum = [None] * len(mine)
    expected, losses, norms, lrs = [], [], [], []
    for step in range(c["k"]):
        oracle.zero_grad(set_to_none=True)
        loss, _ = _oracle_loss(oracle, ro, rows[step % c["m"]], adv, old, ref, row_temps, cfg)
        loss.backward()
        grads = [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in mine]
        norm = float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads])))
        scale = min(1.0, c["clip"] / (norm + 1e-6)) if c["clip"] else 1.0
        grads = [g * scale for g in grads]
        expected.append(grads)
        lr = cfg.optim.lr * _lr_factor(step, c["k"], c["warm"], c["sched"])
        losses.append(float(loss.detach())), norms.append(norm), lrs.append(lr)
        with torch.no_grad():
            for i, (p, g) in enumerate(zip(mine, grads, strict=True)):
                d = g + c["wd"] * p
                momentum[i] = (
                    d.clone()
                    if momentum[i] is None
                    else c["beta1"] * momentum[i] + (1 - c["beta1"]) * d
                )
                p -= lr * momentum[i]
    bad = []
    if len(seen) != c["k"]:
        bad.append(("optimizer steps", len(seen), c["k"]))
    for step, (have, want) in enumerate(zip(seen, expected, strict=False)):
        bad += [
            ("grad", step, i)
            for i, (x, y) in enumerate(zip(have, want, strict=True))
            if not _close(x, y)
        ]
    bad += [
        ("weight", i) for i, (x, y) in enumerate(zip(params, mine, strict=True)) if not _close(x, y)
    ]
    for key, want in (("loss", sum(losses) / len(losses)), ("grad_norm", sum(norms) / len(norms)),
                      ("learning_rate", lrs[0])):  # fmt: skip
        if not math.isclose(logged[key], want, rel_tol=1e-4, abs_tol=1e-6):
            bad.append((key, logged[key], want))
    return bad


@settings(max_examples=40, **FAST)
@given(k_step_cases())
@example(  # M = K = 3 minibatches of one group each, momentum, cosine after warm-up, clipping
    dict(kind="llama", lora=1, b=3, g=2, m=3, k=6, t=5, micro=1, agg="seq_mean_token_mean",
         kl=0.1, kln=0.3, ent=0.02, clip=0.5, beta1=0.9, wd=0.1, warm=2, sched="cosine",
         eps_high=0.28, estimator="dual_anchor", constant=(0,), seed=1)
)  # fmt: skip
def test_k_step_update_equals_the_oracle_stepping_by_hand(case):
    assert k_step_mismatches(case) == []


# ---------------------------------------------------------------------------------------------
# 3. Minibatched == full batch (at the same weights)
# ---------------------------------------------------------------------------------------------


def decomposition_mismatches(kind, agg, b, g, m, micro, t, seed, kl) -> list:
    """sum over the M minibatches of (denominator_m / denominator) x gradient_m equals the
    full-batch gradient, and the minibatches partition the rows in order."""
    cfg = _cfg(b=b, g=g, m=m, k=m, micro=micro, agg=agg, kl=kl, kln=0.3 if kl else None)
    full_cfg = _cfg(b=b, g=g, micro=micro, agg=agg, kl=kl, kln=0.3 if kl else None)
    policy, _, _ = _models(kind, 0, seed)
    ro = _rollout(b, g, t, seed, [0.5, 1.0, 2.0, 0.7][:g])
    n = b * g
    adv = _advantages("grpo", b, g, seed, (0,))
    ref = torch.randn(n, t, generator=torch.Generator().manual_seed(seed)) * 0.3 - 2.0
    ref = ref if kl else None
    temps = scoring_temperatures(ro, cfg)
    parts = trainer_module.minibatches(n, cfg)  # the trainer's own split (a patch reaches it)
    bad = []
    if torch.cat(parts).tolist() != list(range(n)) or len(parts) != m:
        bad.append(("partition", [p.tolist() for p in parts]))
    whole = loss_denominator(ro.completion_mask, cfg.loss)
    policy.model.zero_grad(set_to_none=True)
    for idx in parts:
        share = float(loss_denominator(ro.completion_mask[idx], cfg.loss) / whole)
        before = _grads(policy.model)
        policy.model.zero_grad(set_to_none=True)
        minibatch_gradient(policy, cfg, ro, idx, adv, None, ref, temps, first=True)
        with torch.no_grad():
            for name, p in policy.model.named_parameters():
                p.grad = before[name] + share * (p.grad if p.grad is not None else 0)
    summed = _grads(policy.model)
    policy.model.zero_grad(set_to_none=True)
    minibatch_gradient(policy, full_cfg, ro, torch.arange(n), adv, None, ref, temps, first=True)
    full = _grads(policy.model)
    return bad + [(name, "grad") for name in full if not _close(summed[name], full[name])]


@settings(max_examples=20, **FAST)
@given(
    kind=st.sampled_from(KINDS),
    agg=st.sampled_from(AGGREGATORS.names()),
    bg=st.sampled_from([(2, 2), (3, 2), (2, 3), (4, 1)]),
    m_pick=st.integers(0, 3),
    micro=st.one_of(st.none(), st.integers(1, 4)),
    t=st.integers(1, 8),
    seed=st.integers(0, 999),
    kl=st.sampled_from([0.0, 0.1]),
)
def test_minibatch_gradients_weighted_by_their_denominators_sum_to_the_full_batch(
    kind, agg, bg, m_pick, micro, t, seed, kl
):
    b, g = bg
    divisors = [d for d in range(2, b * g + 1) if (b * g) % d == 0]
    m = divisors[m_pick % len(divisors)]
    assert decomposition_mismatches(kind, agg, b, g, m, micro, t, seed, kl) == []


# ---------------------------------------------------------------------------------------------
# 4. Lag 0 is the on-policy step, bit for bit
# ---------------------------------------------------------------------------------------------


def lag_zero_mismatches(kind, precision, b, g, m, micro, ent, ac, lean, chunk, t, seed) -> list:
    """The old log-probs (`sequence_scores`, no gradient) equal the first optimizer step's
    log-probs (`_score_rows` with gradients, the entropy-bonus head path when ent > 0) on the
    completion mask, bit for bit; and the first step's gradient at K = 2 equals K = 1's (M = 1)."""
    cfg = _cfg(b=b, g=g, m=m, k=2 * m, micro=micro, ent=ent, ac=ac, lean=lean, chunk=chunk,
               precision=precision)  # fmt: skip
    policy, _, _ = _models(kind, 0, seed, precision)
    ro = _rollout(b, g, t, seed, [0.5, 1.0, 2.0, 0.7][:g])
    temps = scoring_temperatures(ro, cfg)
    old = sequence_scores(policy, cfg, ro, temps, with_entropy=m > 1).log_probs
    on = ro.completion_mask.bool()
    bad = []
    for idx in minibatches(b * g, cfg):
        for part in _partition(idx, cfg):
            rows = idx[part]
            with policy.precision.keep_casts():
                now = _score_rows(policy, cfg, ro, rows, temps, old[rows], True, ent > 0)
            now = now.log_probs.detach()
            if not torch.equal(now[on[rows]], old[rows][on[rows]]):
                bad.append(("old log-probs", rows.tolist()))
    if m == 1:
        adv = torch.randn(b * g, generator=torch.Generator().manual_seed(seed))
        state = copy.deepcopy(policy.model.state_dict())
        firsts = []
        for k in (1, 2):
            policy.model.load_state_dict(state)
            c = _cfg(b=b, g=g, k=k, micro=micro, ent=ent, ac=ac, lean=lean, chunk=chunk,
                     precision=precision, optim="adamw")  # fmt: skip
            params = policy.trainable_parameters()
            opt = build_optimizer(params, c.optim)
            seen: list = []
            opt.register_step_pre_hook(
                lambda *_, s=seen, p=params: s.append([x.grad.clone() for x in p])
            )
            run = _Run(c, policy, None, None, opt, make_scheduler(opt, c), (1.0,))  # type: ignore[arg-type]
            optimize(run, ro, adv)
            firsts.append(seen[0])
        if not all(torch.equal(x, y) for x, y in zip(*firsts, strict=True)):
            bad.append(("first step gradient at K = 2 != K = 1",))
    return bad


@settings(max_examples=30, **FAST)
@given(
    kind=st.sampled_from(KINDS),
    precision=st.sampled_from(["fp32", "bf16"]),
    bg=st.sampled_from([(1, 3), (2, 2), (3, 2), (2, 4)]),
    m_pick=st.integers(0, 2),
    micro=st.one_of(st.none(), st.integers(1, 3)),
    ent=st.sampled_from([0.0, 0.01]),
    ac=st.booleans(),
    lean=st.booleans(),
    chunk=st.sampled_from([1, 2, 16]),
    t=st.integers(1, 8),
    seed=st.integers(0, 999),
)
@example(kind="qwen3", precision="bf16", bg=(2, 2), m_pick=0, micro=3, ent=0.01, ac=True,
         lean=True, chunk=2, t=6, seed=3)  # fmt: skip
def test_lag_zero_is_the_on_policy_step_bit_for_bit(
    kind, precision, bg, m_pick, micro, ent, ac, lean, chunk, t, seed
):
    b, g = bg
    divisors = [d for d in range(1, b * g + 1) if (b * g) % d == 0]
    m = divisors[m_pick % len(divisors)]
    assert lag_zero_mismatches(kind, precision, b, g, m, micro, ent, ac, lean, chunk, t, seed) == []


# ---------------------------------------------------------------------------------------------
# 5. bf16 autocast: micro-batching within bf16 rounding of the whole minibatch
# ---------------------------------------------------------------------------------------------

BF16_GRAD_REL = 2e-2
"""Relative (global 2-norm) gradient difference allowed between a micro-batched and the whole
bf16-autocast update: autocast rounds each pass's weight gradient to bf16 (2^-8 relative)
before it is accumulated in fp32; measured 2.5e-3 .. 5.2e-3 (the test_train_update docstring
says ~1e-3)."""


def bf16_micro_mismatches(kind, lora, b, g, t, micro, agg, kl, seed) -> list:
    policy, _, _ = _models(kind, lora, seed, "bf16")
    ro = _rollout(b, g, t, seed, [0.5, 1.0, 2.0, 0.7][:g])
    n = b * g
    adv = _advantages("grpo", b, g, seed, ())
    ref = (
        (torch.randn(n, t, generator=torch.Generator().manual_seed(seed)) * 0.3 - 2.0)
        if kl
        else None
    )
    out = []
    for size in (None, micro):
        cfg = _cfg(b=b, g=g, micro=size, agg=agg, kl=kl, precision="bf16")
        policy.model.zero_grad(set_to_none=True)
        res = minibatch_gradient(
            policy,
            cfg,
            ro,
            torch.arange(n),
            adv,
            None,
            ref,
            scoring_temperatures(ro, cfg),
            first=True,
        )
        flat = torch.cat([p.grad.flatten() for p in policy.trainable_parameters()])
        out.append((float(res.loss), flat))
    (loss0, g0), (loss1, g1) = out
    bad = []
    if not math.isclose(loss0, loss1, rel_tol=1e-3, abs_tol=1e-5):
        bad.append(("loss", loss0, loss1))
    rel = float((g0 - g1).norm() / g0.norm().clamp(min=1e-12))
    if not rel <= BF16_GRAD_REL:
        bad.append(("grad rel", rel))
    return bad


@settings(max_examples=12, **FAST)
@given(
    kind=st.sampled_from(KINDS),
    lora=st.sampled_from([0, 1]),
    bg=st.sampled_from([(1, 4), (2, 3), (3, 2), (2, 4)]),
    t=st.integers(2, 9),
    micro=st.integers(1, 3),
    agg=st.sampled_from(AGGREGATORS.names()),
    kl=st.sampled_from([0.0, 0.1]),
    seed=st.integers(0, 999),
)
def test_bf16_micro_batched_update_is_within_bf16_rounding_of_the_whole(
    kind, lora, bg, t, micro, agg, kl, seed
):
    assert bf16_micro_mismatches(kind, lora, *bg, t, micro, agg, kl, seed) == []


# ---------------------------------------------------------------------------------------------
# 6. Resume == uninterrupted: the whole state, every setting
# ---------------------------------------------------------------------------------------------

_IDS = itertools.count()


class _Crash(Exception):
    pass


def _tiny_run(root, name, steps, extra):
    return load_config(
        None,
        [
            "model.name=tiny",
            "model.tiny_hidden=32",
            "model.tiny_warmup_steps=200",
            "task.options={levels: [1], n: 100}",
            f"steps={steps}",
            "group_size=4",
            "batch_prompts=2",
            "max_new_tokens=4",
            "lr=3e-3",
            "torch_threads=1",
            "checkpoint_every=1",
            "forecast_every=0",
            f"run.output_dir={root}",
            f"run.name={name}",
            *extra,
        ],
    )


_WARMED: set[str] = set()


def _warm_cache(make, root, extra=()):
    """Build the run's policy once per warm-up cache, so that every run of a comparison loads the
    tiny model's warm-up from the cache: a LoRA adapter's initial values depend on whether the
    warm-up was trained in this call or loaded (the defect that
    `test_a_lora_runs_initial_adapter_does_not_depend_on_the_warm_up_cache` pins), which is
    not what the resume properties are about."""
    from pgrpo.train.rollout import load_task_and_policy

    cfg = make(root, "warm", 1, list(extra))
    key = repr((os.environ.get("PGRPO_CACHE", ""), cfg.model, cfg.task, cfg.run.seed))
    if key not in _WARMED:
        load_task_and_policy(cfg)
        _WARMED.add(key)


def _state(run_dir, step):
    return torch.load(run_dir / "checkpoints" / f"step-{step}" / "state.pt", weights_only=True)


def _diff(a, b, path="") -> list[str]:
    """Where two nested states differ (tensors by dtype, shape and value, exactly)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        same = (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and torch.equal(a, b)
        )
        return [] if same else [path]
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return [f"{path}: keys {sorted(map(str, set(a) ^ set(b)))}"]
        return [d for k in a for d in _diff(a[k], b[k], f"{path}/{k}")]
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        if len(a) != len(b):
            return [f"{path}: length"]
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in _diff(x, y, f"{path}[{i}]")
        ]
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return []
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def run_mismatches(reference, resumed, steps) -> list[str]:
    """Everything a checkpoint holds (but the log's byte offset and hash, which the timing
    fields move) and every log line minus the timing fields."""
    skip = ("metrics_offset", "metrics_sha256")
    sa = {k: v for k, v in _state(reference, steps).items() if k not in skip}
    sb = {k: v for k, v in _state(resumed, steps).items() if k not in skip}
    la = [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in read_metrics(reference)]
    lb = [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in read_metrics(resumed)]
    bad = _diff(sa, sb, "state") + _diff(la, lb, "log")
    if [r["step"] for r in lb] != list(range(1, steps + 1)):
        bad.append("log steps")
    return bad


def resume_mismatches(root, make, extra, steps, stop, resume_extra=()) -> list[str]:
    """An uninterrupted run against one that crashes after logging step `stop` (checkpointed)
    and is resumed; also checks the run trained after the interruption (weights moved)."""
    _warm_cache(make, root, extra)
    reference = train(make(root, f"ref{next(_IDS)}", steps, extra)).run_dir
    name = f"cut{next(_IDS)}"

    def crash(metrics):
        if metrics["step"] == stop:
            raise _Crash

    with pytest.raises(_Crash):
        train(make(root, name, steps, extra), on_step=crash)
    at_stop = _state(root / name, stop)["model"]
    resumed = train(make(root, name, steps, [*extra, *resume_extra]), resume=True).run_dir
    bad = run_mismatches(reference, resumed, steps)
    final = _state(resumed, steps)["model"]
    if all(torch.equal(at_stop[k], final[k]) for k in final):
        bad.append("vacuous: no weight moved after the interruption")
    return bad


@st.composite
def resume_settings(draw):
    """Overrides of the tiny run (G = 4, B = 2): any combination the trainer accepts."""
    m = draw(st.sampled_from([1, 2, 4]))
    extra = [
        f"model.lora_rank={draw(st.sampled_from([0, 4]))}",
        f"grpo.num_minibatches={m}",
        f"grpo.refresh_interval={m * draw(st.integers(1, 2))}",
        f"grpo.micro_batch_size={draw(st.sampled_from(['null', 3]))}",
        f"loss.aggregator={draw(st.sampled_from(AGGREGATORS.names()))}",
        f"optim.name={draw(st.sampled_from(['adamw', 'sgd_momentum']))}",
        f"optim.schedule={draw(st.sampled_from(['constant', 'linear', 'cosine']))}",
        f"optim.warmup_steps={draw(st.sampled_from([0, 3]))}",
    ]
    extra += draw(
        st.sampled_from(
            [
                ["model.precision=fp32"],
                ["model.precision=bf16"],
                ["model.dtype=bfloat16"],
            ]
        )
    )
    extra += draw(
        st.sampled_from(
            [
                [],
                ["temperatures=[0.1,0.4,0.7,1.0]"],
                ["temperatures=[0.5,1.0,1.5,2.0]", "generation.score_temperature=one"],
            ]
        )
    )
    extra += draw(
        st.sampled_from(
            [
                ["grpo.advantage=grpo"],
                ["grpo.advantage=dual_anchor", "grpo.advantage_options={num_constraints: 3}"],
                ["grpo.advantage=rloo"],
                ["grpo.advantage=batch_std"],
                ["grpo.advantage=sign", "loss.policy_loss=reinforce"],
                ["grpo.advantage=dr_grpo", "grpo.transform=prospect"],
            ]
        )
    )
    extra += draw(
        st.sampled_from(
            [
                [],
                ["loss.kl_coef=0.05"],
                ["loss.kl_coef=0.01", "loss.kl_coef_negative=0.025", "loss.kl_estimator=k2"],
                ["loss.kl_coef=0.05", "loss.kl_temperature=sampled"],
                ["loss.entropy_coef=0.01", "optim.max_grad_norm=0"],
            ]
        )
    )
    return extra, draw(st.integers(1, 3))


@settings(max_examples=16, **FAST)
@given(resume_settings())
@example(  # LoRA, K = 4 over M = 2, micro-batches, MDP-GRPO (multi-temperature, dual anchor +
    # prospect, asymmetric KL), cosine after warm-up, bf16 autocast
    ([
        "model.lora_rank=4", "grpo.num_minibatches=2", "grpo.refresh_interval=4",
        "grpo.micro_batch_size=3", "loss.aggregator=seq_mean_token_mean", "optim.name=adamw",
        "optim.schedule=cosine", "optim.warmup_steps=3", "model.precision=bf16",
        "temperatures=[0.1,0.4,0.7,1.0]", "grpo.advantage=dual_anchor",
        "grpo.advantage_options={num_constraints: 3}", "loss.kl_coef=0.01",
        "loss.kl_coef_negative=0.025",
    ], 2)
)  # fmt: skip
def test_resume_is_the_uninterrupted_run_for_any_training_setting(tmp_path_factory, setting):
    extra, stop = setting
    root = tmp_path_factory.mktemp("resume")
    assert resume_mismatches(root, _tiny_run, extra, 4, stop) == []


def _hf_folder(path, kind):
    """A tiny `kind` model and a byte-level BPE tokenizer (no merges) saved as a Hugging Face
    folder: the trainer loads it through `model.name=<path>` (AutoModelForCausalLM), the path
    SmolLM2 and any hub model take, not the tiny model's."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1}
    for ch in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>")
    model = _decoder(kind, 0, vocab=len(vocab))
    model.config.tie_word_embeddings = True
    model.save_pretrained(path)
    fast.save_pretrained(path)
    return path


HF_SETTINGS = {
    "llama": ["model.lora_rank=2", "grpo.refresh_interval=2", "loss.kl_coef=0.1"],
    "qwen2": ["grpo.refresh_interval=2", "grpo.num_minibatches=2", "loss.kl_coef=0.1",
              "loss.kl_coef_negative=0.2", "temperatures=[0.5,1.5]", "grpo.micro_batch_size=3"],
    "qwen3": ["model.lora_rank=2", "model.precision=fp32", "grpo.refresh_interval=2",
              "optim.schedule=linear", "optim.warmup_steps=2"],
    "gemma": ["model.dtype=bfloat16", "grpo.refresh_interval=2", "optim.name=sgd_momentum",
              "optim.lr=0.05"],
}  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
def test_resume_is_the_uninterrupted_run_for_hugging_face_model_kinds(tmp_path_factory, kind):
    folder = _hf_folder(tmp_path_factory.mktemp(f"hf-{kind}"), kind)

    def make(root, name, steps, extra):
        return load_config(
            None,
            [
                f"model.name={folder}",
                "task.options={levels: [1], n: 50}",
                f"steps={steps}",
                "group_size=2",
                "batch_prompts=2",
                "max_new_tokens=5",
                "optim.lr=1e-2",
                "torch_threads=1",
                "forecast_every=0",
                "grpo.advantage=sign",  # a random model scores 0: sign still pushes
                "checkpoint_every=1",
                f"run.output_dir={root}",
                f"run.name={name}",
                *extra,
            ],
        )

    root = tmp_path_factory.mktemp(f"hf-runs-{kind}")
    assert resume_mismatches(root, make, HF_SETTINGS[kind], 3, 1) == []


@pytest.mark.parametrize("signals", [1, 2], ids=["one-signal", "two-signals"])
def test_a_signal_mid_way_through_the_k_inner_steps_resumes_exactly(tmp_path, monkeypatch, signals):
    """SIGINT at the 2nd of K = 3 inner optimizer steps of step 3 (checkpoints every 2 steps):
    one signal lets the step finish, checkpoints it and stops; two abandon it with the weights
    and optimizer already moved in memory, and resume recomputes it from step 2's checkpoint. Either
    way the resumed run is the uninterrupted one. (No checkpoint is ever taken inside the K
    steps: the first signal is deferred to the step's end, the second drops the step.)"""
    import pgrpo.train.trainer as trainer

    extra = ["model.lora_rank=4", "grpo.refresh_interval=3", "temperatures=[0.1,0.4,0.7,1.0]",
             "checkpoint_every=2", "loss.kl_coef=0.05"]  # fmt: skip
    _warm_cache(_tiny_run, tmp_path)
    reference = train(_tiny_run(tmp_path, "ref", 4, extra)).run_dir
    real = trainer.check_finite
    inner = itertools.count(1)
    fire_at = 2 * 3 + 2  # steps 1-2's six inner steps, then the 2nd inner step of step 3

    def check_finite(run, *, step=None, **values):
        if "loss" in values and next(inner) == fire_at:
            for _ in range(signals):
                os.kill(os.getpid(), signal.SIGINT)
        return real(run, step=step, **values)

    monkeypatch.setattr(trainer, "check_finite", check_finite)
    with pytest.raises(RunInterrupted) as stopped:
        train(_tiny_run(tmp_path, "cut", 4, extra))
    assert stopped.value.step == (3 if signals == 1 else 2)
    assert len(read_metrics(tmp_path / "cut")) == stopped.value.step  # abandoned: not logged
    monkeypatch.setattr(trainer, "check_finite", real)
    resumed = train(_tiny_run(tmp_path, "cut", 4, extra), resume=True).run_dir
    assert run_mismatches(reference, resumed, 4) == []


def test_resume_with_the_online_forecast_logs_the_same_forecasts(tmp_path):
    extra = ["forecast_every=1", "optim.lr=3e-2", "grpo.refresh_interval=2"]
    assert resume_mismatches(tmp_path, _tiny_run, extra, 8, 6) == []
    logged = [r for r in read_metrics(next(tmp_path.glob("cut*"))) if "forecast/progress" in r]
    assert [r["step"] for r in logged] == [6, 7, 8]  # not vacuous: three forecasts compared


def test_extending_a_finished_run_under_a_constant_schedule_is_the_longer_run(tmp_path):
    """run.steps 2 -> 4 on a finished run (the note says a decaying schedule would change the
    lr; a constant one with warm-up does not): the same as a run started with steps=4."""
    extra = ["optim.warmup_steps=5", "grpo.refresh_interval=2", "model.lora_rank=4"]
    _warm_cache(_tiny_run, tmp_path)
    reference = train(_tiny_run(tmp_path, "long", 4, extra)).run_dir
    train(_tiny_run(tmp_path, "short", 2, extra))
    extended = train(_tiny_run(tmp_path, "short", 4, extra), resume=True).run_dir
    assert run_mismatches(reference, extended, 4) == []


# ---------------------------------------------------------------------------------------------
# Planted bugs: each comparison above reports a bug of the kind it is there to catch
# ---------------------------------------------------------------------------------------------


def test_planted_micro_batch_normaliser_bug_is_caught(monkeypatch):
    """Each micro-batch normalised by its own denominator (the classic accumulation bug)."""
    import pgrpo.train.update as update

    real = update.policy_loss

    def own_denominator(*args, denominator=None, **kwargs):
        return real(*args, **kwargs)

    case = dict(kind="qwen2", lora=0, b=2, g=3, t=6, micro=4, agg="token_mean", pl="clipped",
                est="k3", kl=0.1, kln=None, ent=0.0, chunk=16, score="sampled", ac=False,
                lean=False, estimator="grpo", constant=(), with_old=False, duplicate=False,
                seed=3)  # fmt: skip
    assert update_mismatches(case) == []
    monkeypatch.setattr(update, "policy_loss", own_denominator)
    assert update_mismatches(case) != []
    assert bf16_micro_mismatches("llama", 0, 2, 3, 6, 2, "token_mean", 0.0, 3) != []


def test_planted_minibatch_order_and_staleness_bugs_are_caught(monkeypatch):
    import pgrpo.train.trainer as trainer

    case = dict(kind="llama", lora=0, b=2, g=2, m=2, k=4, t=5, micro=None, agg="token_mean",
                kl=0.0, kln=None, ent=0.0, clip=0.0, beta1=0.0, wd=0.0, warm=0,
                sched="constant", eps_high=None, estimator="sign", constant=(), seed=2)  # fmt: skip
    assert k_step_mismatches(case) == []
    real = trainer.minibatches
    monkeypatch.setattr(trainer, "minibatches", lambda n, cfg: real(n, cfg)[::-1])
    assert k_step_mismatches(case) != []
    monkeypatch.setattr(trainer, "minibatches", real)
    real_scores = trainer.sequence_scores

    def stale_by_one_step(*args, **kwargs):  # old log-probs that are not the sampler's
        out = real_scores(*args, **kwargs)
        return dataclasses.replace(out, log_probs=out.log_probs + 0.3)

    monkeypatch.setattr(trainer, "sequence_scores", stale_by_one_step)
    assert k_step_mismatches(case) != []


def test_planted_decomposition_and_lag_zero_bugs_are_caught(monkeypatch):
    assert decomposition_mismatches("llama", "token_mean", 2, 2, 2, None, 5, 1, 0.0) == []
    real = trainer_module.minibatches  # a split that drops each minibatch's last row
    monkeypatch.setattr(
        trainer_module, "minibatches", lambda n, cfg: [i[:-1] for i in real(n, cfg)]
    )
    assert decomposition_mismatches("llama", "token_mean", 2, 2, 2, None, 5, 1, 0.0) != []
    monkeypatch.setattr(trainer_module, "minibatches", real)
    denominator = pgrpo_update.loss_denominator

    def batch_denominator(mask, loss_cfg):  # a minibatch of 2 rows normalised by all 4 rows
        return denominator(mask, loss_cfg) * (4 / mask.shape[0])

    monkeypatch.setattr(pgrpo_update, "loss_denominator", batch_denominator)
    assert decomposition_mismatches("llama", "seq_mean_token_mean", 2, 2, 2, None, 5, 1, 0.0) != []
    monkeypatch.setattr(pgrpo_update, "loss_denominator", denominator)
    args = ("llama", "fp32", 2, 2, 1, None, 0.0, False, False, 16, 6, 1)
    assert lag_zero_mismatches(*args) == []
    real_scores = pgrpo_update.completion_scores

    def no_grad_pass_rounds_otherwise(*a, **k):  # the old pass a few ulps off the update's
        out = real_scores(*a, **k)
        if torch.is_grad_enabled():
            return out
        return dataclasses.replace(out, log_probs=out.log_probs * (1 + 2**-22))

    monkeypatch.setattr(pgrpo_update, "completion_scores", no_grad_pass_rounds_otherwise)
    assert len(lag_zero_mismatches(*args)) == 2  # the log-probs and the first step's gradient


@pytest.mark.parametrize("lost", ["torch rng", "scheduler", "optimizer"])
def test_planted_resume_bugs_are_caught(tmp_path, monkeypatch, lost):
    import pgrpo.train.checkpoint as ckpt

    if lost == "torch rng":
        real = ckpt.set_rng_state
        monkeypatch.setattr(
            ckpt, "set_rng_state", lambda s: real({**s, "torch": torch.get_rng_state()})
        )
    elif lost == "scheduler":
        monkeypatch.setattr(
            torch.optim.lr_scheduler.LambdaLR, "load_state_dict", lambda self, s: None
        )
    else:
        monkeypatch.setattr(torch.optim.Optimizer, "load_state_dict", lambda self, s: None)
    extra = ["optim.warmup_steps=4", "grpo.refresh_interval=2", "model.lora_rank=4"]
    assert resume_mismatches(tmp_path, _tiny_run, extra, 4, 2) != []


# ---------------------------------------------------------------------------------------------
# Defect found by this review (fixed in session 37)
# ---------------------------------------------------------------------------------------------


def test_a_lora_runs_initial_adapter_does_not_depend_on_the_warm_up_cache(tmp_path, monkeypatch):
    """docs/trainer.md, Determinism: "the same config gives bit-identical parameters and logs".
    The same LoRA config trained twice, first with an empty warm-up cache (the warm-up is
    trained and saved), then with it filled (the warm-up is loaded): the two runs differed from
    their first optimizer step (adapter A matrices up to 0.35 apart; peft draws lora_A from
    torch's global RNG, whose state differed after a fresh warm-up and after a cache load),
    which is also why test_train_resume.py's LoRA resume test failed when run on its own. Since
    session 37 `load_policy` seeds the adapter's init from the run's seed alone."""
    monkeypatch.setenv("PGRPO_CACHE", str(tmp_path / "empty-cache"))
    extra = ["model.lora_rank=4", "grpo.refresh_interval=2"]
    first = train(_tiny_run(tmp_path, "first", 2, extra)).run_dir  # trains the warm-up
    second = train(_tiny_run(tmp_path, "second", 2, extra)).run_dir  # loads it
    assert run_mismatches(first, second, 2) == []
