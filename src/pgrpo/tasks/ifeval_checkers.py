"""IFEval constraint checking with if-verifiable's reference checkers, made to work offline.

The checkers (`if_verifiable.ifeval.instructions_registry.INSTRUCTION_DICT`) are the reference
IFEval implementation (Zhou et al. 2023). Two of them need NLTK's `punkt` data, which cannot be
downloaded here: `length_constraints:number_sentences` (`instructions_util.count_sentences`) and
`change_case:capital_word_frequency` (`nltk.word_tokenize`). `use_offline_tokenizers()` replaces
those two inside if-verifiable's `instructions_util` module only (global `nltk` is untouched):
- sentences: `nupunkt.sent_tokenize`, a trained Punkt model shipped in the `nupunkt` wheel
  ("Mr. Smith went to Washington. He arrived at 5 p.m. on Monday." is 2 sentences);
- words: NLTK's Treebank word tokenizer (`NLTKWordTokenizer`, no data files) on each nupunkt
  sentence, which is what `nltk.word_tokenize` does with punkt.
Differences from the reference are those between nupunkt's and NLTK's Punkt models on rare
abbreviations; it is applied always (not only when punkt is missing) so scores do not depend on
the machine. `langdetect` is seeded (`DetectorFactory.seed = 0`) so language checks are
deterministic.

`check_response(response, instruction_ids, kwargs_list, prompt, loose=False)` returns one
`ConstraintCheck` per constraint. As the reference evaluator does (`evaluate_instructions`,
with if-verifiable's own `strip_thinking`), a reasoning block is not checked: the response is
what follows the first `</think>` (also when the chat template opened `<think>` in the prompt),
an unfinished `<think>` leaves nothing, and the response is stripped of surrounding whitespace.
An empty response follows nothing. An unknown instruction id, or a
checker that raises, counts as not followed (and is reported in `unknown` / `error`).
Strict checks the raw response; loose passes if any of the reference's loose variants passes
(first/last line removed, `*` removed).
"""

from __future__ import annotations

import contextlib
import functools
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ConstraintCheck:
    """One constraint of one response: `followed`, and why not when it could not be checked."""

    instruction_id: str
    followed: bool
    unknown: bool = False
    error: str | None = None


@functools.lru_cache(maxsize=1)
def _nupunkt() -> Any:
    import nupunkt

    return nupunkt


def count_sentences(text: str) -> int:
    """Number of sentences by nupunkt's trained Punkt model (offline stand-in for NLTK punkt)."""
    return len([s for s in _nupunkt().sent_tokenize(text) if s.strip()])


def word_tokenize(text: str) -> list[str]:
    """`nltk.word_tokenize` without punkt data: nupunkt sentences, then NLTK's Treebank words."""
    from nltk.tokenize import NLTKWordTokenizer

    tokenizer = NLTKWordTokenizer()
    return [tok for sent in _nupunkt().sent_tokenize(text) for tok in tokenizer.tokenize(sent)]


class _NltkShim:
    """Stands in for the `nltk` module inside if-verifiable's `instructions_util` only."""

    def __init__(self, nltk: Any) -> None:
        self._nltk = nltk

    def word_tokenize(self, text: str, *args: Any, **kwargs: Any) -> list[str]:
        return word_tokenize(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._nltk, name)


@functools.lru_cache(maxsize=1)
def use_offline_tokenizers() -> dict[str, Any]:
    """Patch if-verifiable's sentence/word tokenizers (idempotent); returns INSTRUCTION_DICT."""
    import langdetect
    from if_verifiable.ifeval import instructions_util
    from if_verifiable.ifeval.instructions_registry import INSTRUCTION_DICT

    instructions_util.count_sentences = count_sentences
    if not isinstance(instructions_util.nltk, _NltkShim):
        instructions_util.nltk = _NltkShim(instructions_util.nltk)
    langdetect.DetectorFactory.seed = 0
    return INSTRUCTION_DICT


@contextlib.contextmanager
def seeded_global_random(seed: int) -> Iterator[None]:
    """The reference checkers draw missing kwargs from the global `random`: make that
    deterministic without disturbing anyone else's random state."""
    state = random.getstate()
    random.seed(seed)
    try:
        yield
    finally:
        random.setstate(state)


def build_checker(instruction_id: str, kwargs: dict[str, Any] | None, prompt: str) -> Any:
    """An instantiated reference checker, or None for an unknown instruction id."""
    registry = use_offline_tokenizers()
    cls = registry.get(instruction_id)
    if cls is None:
        return None
    checker = cls(instruction_id)
    filtered = {k: v for k, v in (kwargs or {}).items() if v is not None}
    with seeded_global_random(0):
        checker.build_description(**filtered)
        args = checker.get_instruction_args()
        if args and "prompt" in args:
            checker.build_description(prompt=prompt)
    return checker


def _loose_variants(response: str) -> list[str]:
    from if_verifiable.common import get_loose_transformations

    return [v for v in get_loose_transformations(response) if v.strip()]


def check_response(
    response: str,
    instruction_ids: Sequence[str],
    kwargs_list: Sequence[dict[str, Any] | None] | None,
    prompt: str = "",
    *,
    loose: bool = False,
) -> list[ConstraintCheck]:
    """One `ConstraintCheck` per instruction id, in order (see the module docstring)."""
    from if_verifiable.common import strip_thinking

    response = strip_thinking(response)  # '<think>...</think>' is not part of the answer
    kwargs_list = list(kwargs_list or [])
    if len(kwargs_list) < len(instruction_ids):
        kwargs_list += [{}] * (len(instruction_ids) - len(kwargs_list))
    empty = not response.strip()
    variants = [] if empty else (_loose_variants(response) if loose else [response])
    out = []
    for instruction_id, kwargs in zip(instruction_ids, kwargs_list, strict=False):
        try:
            checker = build_checker(instruction_id, kwargs, prompt)
            if checker is None:
                out.append(ConstraintCheck(instruction_id, False, unknown=True))
                continue
            followed = any(bool(checker.check_following(v)) for v in variants)
            out.append(ConstraintCheck(instruction_id, followed))
        except Exception as exc:  # a checker crash is "not followed", reported
            error = f"{type(exc).__name__}: {exc}"[:200]
            out.append(ConstraintCheck(instruction_id, False, error=error))
    return out


def known_instruction_ids() -> list[str]:
    """The instruction ids the reference registry can check."""
    return sorted(use_offline_tokenizers())
