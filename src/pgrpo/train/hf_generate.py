"""The same decode through HF `generate`: the reference `generation.decode` is tested against.

    out = generate_decode(model, prompt_ids, prompt_mask, temperatures, max_new_tokens=32,
                          eos_id=tok.eos_token_id, pad_id=tok.pad_token_id, cache=cache)

`generate` in greedy mode with `RowTemperatureSampler` as its logits processor: the processor
draws each row's token (`draw_tokens`) and returns one-hot scores, greedy takes it. This was
pgrpo's sampler until 2026-12-02; `decode` gives the same tokens for the same random state
(tests/test_train_decode.py) at 0.77x its CPU time per token (docs/trainer.md, "The decode loop").
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from pgrpo.train.generation import Decoded, RowTemperatureSampler
from pgrpo.train.logprobs import _backbone, _cache_kwarg


@torch.no_grad()
def generate_decode(
    model: torch.nn.Module,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    temperatures: torch.Tensor,
    *,
    max_new_tokens: int,
    eos_id: int,
    pad_id: int,
    cache: object | None = None,
    with_log_probs: bool = False,
) -> Decoded:
    """`generation.decode`'s contract, through `model.generate` (prompt_ids, prompt_mask [N, P],
    temperatures [N]; cache: keys / values of prompt_ids[:, :P - 1] or None)."""
    from transformers import GenerationConfig, LogitsProcessorList

    gen_config = GenerationConfig(
        do_sample=False,  # the processor below samples; greedy then takes its token
        max_new_tokens=max_new_tokens,
        return_dict_in_generate=True,
        output_logits=with_log_probs,
        min_new_tokens=0,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        use_cache=True,
    )
    out = model.generate(
        input_ids=prompt_ids,
        attention_mask=prompt_mask,
        generation_config=gen_config,
        logits_processor=LogitsProcessorList([RowTemperatureSampler(temperatures)]),
        **({} if cache is None else {_cache_kwarg(_backbone(model)): cache}),
    )
    completion_ids = out.sequences[:, prompt_ids.shape[1] :]
    logps = None
    if with_log_probs:
        logps = _sampler_log_probs(out.logits, completion_ids, temperatures)
    return Decoded(completion_ids, logps)


def _sampler_log_probs(
    logits: Sequence[torch.Tensor], completion_ids: torch.Tensor, temps: torch.Tensor
) -> torch.Tensor:
    """log softmax(logits_t / T_i) of each drawn token, in float32 as the sampler draws: T
    tensors [N, V] -> [N, T]."""
    steps = []
    for t, step_logits in enumerate(logits[: completion_ids.shape[1]]):
        logp = torch.log_softmax(step_logits.float() / temps[:, None], dim=-1)
        steps.append(logp.gather(-1, completion_ids[:, t : t + 1]).squeeze(-1))
    return torch.stack(steps, dim=1)
