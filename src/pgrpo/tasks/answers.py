"""Extracting a model's final numeric answer from free text (arithmetic and GSM8K rewards).

The rule, in priority order (the first that finds a number wins):
1. the last `\\boxed{...}` (or `\\fbox{...}`): a `\\frac{a}{b}` inside it as a/b, else the last
   number inside it;
2. the last `####` marker followed by a number that ends its line (GSM8K's own answer format;
   a trailing period, `%`, `**` or a lowercase unit such as "dollars" may follow): that number.
   A markdown heading is not one: `#### Step 2: Money`, `#### 1. Eggs sold`, `#### 2) Final`;
3. the last "answer is" / "answer:" phrase (case-insensitive, e.g. "The final answer is $1,200."):
   the first number after it;
4. otherwise the last number in the text.

A number is an optional minus sign (not when it follows a digit or letter, so "8-3" is 8 and 3),
an optional "$", digits with optional thousands commas ("1,234", but "1,2,3" is three numbers),
and an optional decimal part ("18.00" is 18; a trailing sentence period is not a decimal point).
Values are compared exactly as decimals, so "18.00" equals "18" and "0.5" equals ".5".
LaTeX thousands separators between digit groups (`70{,}000`, `70\\,000`, `10,\\!080`, a thin
space) read as commas (`normalise_separators`; `\\boxed{70{,}000}` read 000 before). The
rewards score a completion with every restatement of the question removed (`without_prompt`):
the prompt, each field the prompt inserts (the question, the problem, the expression) and each
sentence of those, with any whitespace and with or without their final punctuation. A model
that echoed the question scored 1 whenever its last number was the answer (`What is 0 + 5?`);
removing only the whole prompt still let the question alone score on 30 of GSM8K's 1,319 test
questions, 17 of MATH-500's 500 problems and 11 of 200 level-1 arithmetic problems (0 now).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation

# sign | optional currency | integer with thousands groups, or plain digits, or a bare decimal
_NUMBER = re.compile(
    r"(?<![\w.])(?P<sign>[-\u2212])?\$?\s?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?!\d)"
)
_SIGN_CONTEXT = re.compile(r"[\w)]")
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_FRAC = re.compile(r"(-?)\\[dt]?frac\s*\{\s*(-?\d+)\s*\}\s*\{\s*(\d+)\s*\}")
_ANSWER_PHRASE = re.compile(r"answer\s*(?:is|:|=)", re.IGNORECASE)
# '#### 42' (also '#### $1,200.', '#### 18 dollars', '#### **18**') alone on its line; not a
# heading '#### Step 1: ...', '#### 1. Eggs sold' or '#### 2) Final'
_HASHES = re.compile(
    r"####[ \t]*[*_]*(?P<answer>\$?[ \t]?[-\u2212]?\$?[ \t]?(?:\d[\d,]*(?:\.\d+)?|\.\d+))"
    r"[*_]*[ \t]*(?:%|[a-z]+(?:[ \t]+[a-z]+)?)?[ \t]*\.?[ \t]*$",
    re.MULTILINE,
)
_SEPARATOR = re.compile(r"(?<=\d)(?:,\\!|\{,\}|\\,|\\!|[\u2009\u202f])(?=\d{3}(?!\d))")
_MAX_CHARS = 20_000  # longer completions are scored on their last 20k characters


def _numbers(text: str) -> list[str]:
    """All numbers in `text`, normalised (no commas, no $, '-' sign), in order."""
    out = []
    for m in _NUMBER.finditer(text):
        num = m.group("num").replace(",", "")
        sign = m.group("sign")
        if sign and m.start() > 0 and _SIGN_CONTEXT.match(text[m.start() - 1]):
            sign = None  # "8-3": a subtraction, not a negative number
        out.append(("-" if sign else "") + num)
    return out


def _boxed_contents(text: str) -> list[str]:
    """Contents of every \\boxed{...} with balanced braces (unbalanced: up to the end)."""
    out = []
    for m in _BOXED.finditer(text):
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        out.append(text[m.end() : j - 1 if depth == 0 else j])
    return out


def normalise_separators(text: str) -> str:
    """LaTeX and typographic thousands separators between digit groups as commas:
    `70{,}000`, `70\\,000`, `10,\\!080` and `70\u202f000` -> `70,000` / `10,080`."""
    return _SEPARATOR.sub(",", text)


_SLOT_MARK = "\x00pgrpo-slot\x00"
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+")


def prompt_slots(prompt: Callable[[dict], str], example: dict) -> list[str]:
    """The example's text fields that `prompt(example)` inserts verbatim (the question, the
    problem, the expression), found by marking each field and looking for the mark. A field
    that only happens to occur in the prompt (MATH's `answer` "5" inside its problem) is not one."""
    out = []
    for key, value in example.items():
        if not isinstance(value, str) or not value.strip():
            continue
        try:
            marked = prompt({**example, key: _SLOT_MARK})
        except Exception:  # noqa: BLE001 - a prompt that cannot take the mark: not a slot
            continue
        if _SLOT_MARK in str(marked):
            out.append(value)
    return out


@functools.lru_cache(maxsize=4096)
def _echo_pattern(text: str) -> re.Pattern | None:
    """`text` as a regex: any whitespace between its words, its final punctuation optional, not
    glued to a neighbouring word or number ('0 + 5' does not match inside '10 + 56')."""
    core = text.strip().rstrip(".?!:;, ")
    if not core or is_bare_number(core):  # stripping a bare number would strip answers
        return None
    body = r"\s+".join(re.escape(token) for token in core.split())
    head = r"(?<![\w.])" if re.match(r"\w", core) else ""
    tail = r"(?!\w|[.,]\d)" if re.search(r"\w$", core) else ""
    return re.compile(f"{head}{body}{tail}[.?!:;,]*")


def echo_texts(prompt: Callable[[dict], str], example: dict) -> list[str]:
    """What restating the question means: the whole prompt, each field the prompt inserts, and
    each sentence of those fields; longest first."""
    try:
        texts = [prompt(example).strip(), *prompt_slots(prompt, example)]
    except (KeyError, IndexError):  # an example without the prompt's fields
        return []
    sentences = [s for t in texts[1:] for s in _SENTENCE_END.split(t.strip())]
    return sorted({t for t in texts + sentences if t.strip()}, key=len, reverse=True)


def without_prompt(completion: str, prompt: Callable[[dict], str], example: dict) -> str:
    """`completion` with every restatement of the question removed (`echo_texts`: the prompt,
    the question field, each of its sentences; whitespace may differ, the final punctuation
    may be missing): restating the question is not answering it. An example without the
    prompt's fields (a TRL dataset row may carry only the answer) leaves the completion as it is."""
    for text in echo_texts(prompt, example):
        pattern = _echo_pattern(text)
        if pattern is not None:
            completion = pattern.sub(" ", completion)
    return completion


def extract_final_number(text: str) -> str | None:
    """The model's final numeric answer as a normalised string (e.g. "-1200.5"), or None."""
    text = normalise_separators(text[-_MAX_CHARS:])
    for content in reversed(_boxed_contents(text)):
        frac = _FRAC.fullmatch(content.strip())
        if frac and int(frac.group(3)) != 0:
            value = Decimal(int(frac.group(2))) / Decimal(int(frac.group(3)))
            return str(-value if frac.group(1) else value)
        nums = _numbers(content)
        if nums:
            return nums[-1]
    marks = list(_HASHES.finditer(text))
    if marks:
        nums = _numbers(marks[-1].group("answer"))
        if nums:
            return nums[0]
    phrases = list(_ANSWER_PHRASE.finditer(text))
    if phrases:
        nums = _numbers(text[phrases[-1].end() :])
        if nums:
            return nums[0]
    nums = _numbers(text)
    return nums[-1] if nums else None


def to_decimal(value: str | int | float) -> Decimal | None:
    """A number (possibly with commas or $) as a Decimal, or None when it is not one."""
    s = str(value).strip().replace(",", "").replace("$", "").replace("\u2212", "-")
    try:
        d = Decimal(s)
    except InvalidOperation:
        return None
    return d if d.is_finite() else None


def numbers_equal(predicted: str | None, gold: str | int | float) -> bool:
    """Exact decimal equality of a predicted and a gold number ("18.00" == 18)."""
    if predicted is None:
        return False
    a, b = to_decimal(predicted), to_decimal(gold)
    return a is not None and b is not None and a == b


def is_bare_number(text: str) -> bool:
    """True when the completion is only a number (the format the arithmetic prompt asks for)."""
    s = text.strip().rstrip(".").strip()
    return (
        bool(s)
        and to_decimal(s) is not None
        and re.fullmatch(r"[-\u2212]?[\d,]*\.?\d+", s) is not None
    )
