"""Helpers shared by the trainer's update tests (imported by them; not a test module)."""

from __future__ import annotations

import torch

from pgrpo.train.setup import _Run, make_scheduler
from pgrpo.train.trainer import optimize, train_step


def optimize_from(cfg, task, policy, state, rollout, advantages):
    """Run the trainer's K-step update (`optimize`, AdamW at cfg.optim.lr) from `policy` reset to
    `state`; returns (metrics, grads): the gradients each optimizer step saw, one list of
    tensors (one per trainable parameter) per step."""
    policy.model.load_state_dict(state)
    params = policy.trainable_parameters()
    optimizer = torch.optim.AdamW(params, lr=cfg.optim.lr)
    grads: list[list[torch.Tensor]] = []
    optimizer.register_step_pre_hook(
        lambda *_: grads.append([p.grad.detach().clone() for p in params])
    )
    temps = tuple(float(t) for t in rollout.temperatures[: cfg.grpo.group_size])
    run = _Run(cfg, policy, task, None, optimizer, make_scheduler(optimizer, cfg), temps)  # type: ignore[arg-type]
    return optimize(run, rollout, advantages), grads


def tiny_llama(kind: str, vocab: int, seed: int) -> torch.nn.Module:
    """A 2-layer Llama (hidden 32) in eval mode: kind 'llama' (2 heads), 'llama-gqa' (4 query
    heads on 2 key / value heads, as SmolLM2 groups them) or 'lora' (llama + a LoRA adapter on
    q, v with non-zero initial weights)."""
    import transformers

    torch.manual_seed(seed)
    heads, kv_heads = (4, 2) if kind == "llama-gqa" else (2, 2)
    cfg = transformers.LlamaConfig(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=64,
        initializer_range=0.2,
        pad_token_id=0,
        bos_token_id=None,
        eos_token_id=None,
    )
    model = transformers.LlamaForCausalLM(cfg)
    if kind == "lora":
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
        model = get_peft_model(model, lora)
    return model.eval()


DECODER_KINDS = ("llama", "qwen2", "qwen3", "gemma")


def tiny_decoder(kind: str, seed: int, **config) -> torch.nn.Module:
    """A grouped-query decoder of `kind` (DECODER_KINDS: 2 layers unless `config` says, 2 query
    heads on 1 key/value head; Qwen3 and Gemma with head_dim 8), seeded; `config`: vocab_size,
    hidden_size, intermediate_size and any other field of the family's config. Train mode, as
    built. The one builder of test_train_lean.py and test_review37_exactness.py."""
    import transformers

    torch.manual_seed(seed)
    common = {"num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
              "max_position_embeddings": 64, **config}  # fmt: skip
    model_cls, config_cls, extra = {
        "llama": (transformers.LlamaForCausalLM, transformers.LlamaConfig, {}),
        "qwen2": (transformers.Qwen2ForCausalLM, transformers.Qwen2Config, {}),
        "qwen3": (transformers.Qwen3ForCausalLM, transformers.Qwen3Config, {"head_dim": 8}),
        "gemma": (transformers.GemmaForCausalLM, transformers.GemmaConfig, {"head_dim": 8}),
    }[kind]
    return model_cls(config_cls(**extra, **common))


def first_step_gradients(run: _Run, seed: int) -> tuple[dict, list[torch.Tensor]]:
    """`train_step(run, 1)` after `torch.manual_seed(seed)`: (its metrics, the flat gradient of
    the trainable parameters before each optimizer step), for tests that hold the trainer's
    first update against an independent gradient (the probe's, the rollout objective's)."""
    params = run.policy.trainable_parameters()
    grads: list[torch.Tensor] = []
    run.optimizer.register_step_pre_hook(
        lambda *_: grads.append(torch.cat([p.grad.reshape(-1) for p in params]))
    )
    torch.manual_seed(seed)
    return train_step(run, 1), grads
