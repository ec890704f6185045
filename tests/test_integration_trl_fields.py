"""Multi-temperature groups through TRL's generation when prompts carry processor fields
(`multimodal_fields`), and `reward/temperature_*` logged only where slots were sampled at their
temperatures (session 40). Helpers from test_integration_trl."""

from __future__ import annotations

import pytest
import torch

trl = pytest.importorskip("trl")
transformers = pytest.importorskip("transformers")
datasets = pytest.importorskip("datasets")
from test_integration_trl import (  # noqa: E402
    G,
    RecordingTrainer,
    _config,
    _model,
    _tokenizer,
    _train,
    odd_digit,
)


class _TokenTypeLlama(transformers.LlamaForCausalLM):
    """A tiny Llama that takes `token_type_ids` at generation, as Gemma 3 does; at each prefill
    it records (rows, whether every row's token_type_ids are its own prompt's ids)."""

    def forward(self, input_ids=None, token_type_ids=None, **kwargs):
        if token_type_ids is not None and input_ids is not None and input_ids.shape[1] > 1:
            self.prefills.append((input_ids.shape[0], torch.equal(input_ids, token_type_ids)))
        return super().forward(input_ids=input_ids, **kwargs)


class _TokenTypeTrainer(RecordingTrainer):
    """TRL's tokenization, with each prompt's token_type_ids set to its own ids (a row paired
    with another prompt's field shows at the prefill)."""

    def _tokenize_prompts(self, prompts):
        prompt_ids, images, fields = super()._tokenize_prompts(prompts)
        assert images is None and set(fields) == {"token_type_ids"}  # TRL's text-prompt path
        return prompt_ids, images, {"token_type_ids": [list(ids) for ids in prompt_ids]}


def odd_digit_chat(completions, **kwargs):
    return odd_digit([c[-1]["content"] for c in completions])


def test_multi_temperature_sampling_with_processor_fields(tmp_path):
    """Conversational text prompts whose tokenizer returns token_type_ids reach TRL's generation
    with a `multimodal_fields` entry: each slot is still sampled at its own temperature, with its
    own rows' token_type_ids (pgrpo once fell back to TRL's one temperature here, silently, while
    logging reward/temperature_*)."""
    tokenizer = _tokenizer()
    tokenizer.model_input_names = ["input_ids", "token_type_ids", "attention_mask"]
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    model = _TokenTypeLlama(_model(tokenizer).config)
    model.prefills = []
    rows = [{"prompt": [{"role": "user", "content": f"{i}+{i + 1}="}]} for i in range(8)]
    args = _config(
        tmp_path, pgrpo_advantage="sign", pgrpo_temperatures=[1e-3, 1e-3, 50.0, 50.0], max_steps=1
    )
    trainer = _TokenTypeTrainer(
        model=model,
        reward_funcs=odd_digit_chat,
        args=args,
        train_dataset=datasets.Dataset.from_list(rows),
        processing_class=tokenizer,
    )
    trainer.train()
    assert model.prefills == [(2, True)] * G  # one generate call per slot, rows aligned
    completions = trainer.generated[0]["completions"]
    groups = [completions[i : i + G] for i in range(0, len(completions), G)]
    assert all(group[0] == group[1] for group in groups)  # temperature 1e-3: (near) greedy
    logged = [h for h in trainer.state.log_history if "reward/temperature_50" in h]
    assert len(logged) == 1


class _OneTemperatureTrainer(RecordingTrainer):
    """Generates with TRL's own single-temperature path, pgrpo_temperatures notwithstanding."""

    def _generate_single_turn(self, prompt_ids, images, fields, num_generations, *args):
        return trl.GRPOTrainer._generate_single_turn(
            self, prompt_ids, images, fields, num_generations, *args
        )


def test_reward_per_temperature_is_logged_only_when_slots_were_sampled_at_them(tmp_path):
    trainer = _train(
        tmp_path,
        odd_digit,
        trainer_cls=_OneTemperatureTrainer,
        pgrpo_advantage="sign",
        pgrpo_temperatures=[0.5, 0.5, 1.0, 1.0],
        max_steps=1,
    )
    history = trainer.state.log_history
    assert any("degeneracy/all_pass" in h for h in history)
    assert not any(k.startswith("reward/temperature_") for h in history for k in h)
