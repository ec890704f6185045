"""Extracting a model's final numeric answer from free text (arithmetic and GSM8K rewards).

The rule, in priority order (the first that finds a number wins):
1. the last `\\boxed{...}` (or `\\fbox{...}`) that holds a digit: its value when it holds one
   number, a fraction (`a/b`, `\\frac{a}{b}`), a mixed number (`2\\frac{1}{2}`) or `x = <one
   of those>`, with units (`\\text{ apples}`, a trailing word), $, % and LaTeX spacing ignored;
   no answer when it holds another expression (`\\sqrt{18}`, `18^2`, `3 + 15`: the last number
   inside it was taken until session 36, and `\\boxed{2\\frac{1}{2}}` read 2);
2. the last `####` marker followed by a number that ends its line (GSM8K's own answer format;
   a trailing period, `%`, `**` or a lowercase unit such as "dollars" may follow): that number.
   A markdown heading is not one: `#### Step 2: Money`, `#### 1. Eggs sold`, `#### 2) Final`;
3. the last "answer is" / "answer:" phrase (case-insensitive, e.g. "The final answer is $1,200.";
   not "answer isn't"): the first number after it, or after the last "=" of its sentence ("The
   answer is 3 + 15 = 18." is 18);
4. otherwise the last number in the text.

A number is an optional minus sign (hyphen, minus or en dash; not when it follows a digit or
letter, so "8-3" is 8 and 3), an optional "$", digits with optional thousands commas ("1,234",
but "1,2,3" is three numbers), and an optional decimal part ("18.00" is 18; a trailing sentence
period is not a decimal point); two plain integers joined by "/" are one fraction ("18/5" is 3.6).
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

_MINUS = "-\u2212\u2013"
"""Signs read as minus: hyphen, the minus sign and the en dash ('\u20135' was read as 5)."""
# sign | optional currency | integer with thousands groups, or plain digits, or a bare decimal;
# a fraction a/b of two plain integers is one number ("18/5" is 3.6, not 18 and 5)
_NUMBER = re.compile(
    rf"(?<![\w.])(?P<sign>[{_MINUS}])?\$?\s?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?!\d)"
    r"(?:/(?P<den>\d+)(?![\d/.]))?"
)
_SIGN_CONTEXT = re.compile(r"[\w)]")
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER_PHRASE = re.compile(r"\banswer\s*(?:is\b|:|=)", re.IGNORECASE)  # not "answer isn't"
# '#### 42' (also '#### $1,200.', '#### 18 dollars', '#### **18**') alone on its line; not a
# heading '#### Step 1: ...', '#### 1. Eggs sold' or '#### 2) Final'
# Possessive quantifiers after the number: the tail's adjacent optional runs of blanks
# backtracked in cubic time on a long run of blanks that ends in another character (a review,
# session 36: 1,500 spaces took 5 s, 20,000 would take hours, inside the trainer's metrics)
_HASHES = re.compile(
    rf"####[ \t]*+[*_]*+(?P<answer>\$?[ \t]?[{_MINUS}]?\$?[ \t]?(?:\d[\d,]*(?:\.\d+)?|\.\d+))"
    r"[*_]*+[ \t]*+(?:%|[a-z]++(?:[ \t]++[a-z]++)?)?[ \t]*+\.?[ \t]*+$",
    re.MULTILINE,
)
_SEPARATOR = re.compile(r"(?<=\d)(?:,\\!|\{,\}|\\,|\\!|[\u2009\u202f])(?=\d{3}(?!\d))")
_MAX_CHARS = 20_000  # longer completions are scored on their last 20k characters


def _numbers(text: str) -> list[str]:
    """All numbers in `text`, normalised (no commas, no $, '-' sign; a fraction a/b as its
    decimal value), in order."""
    out = []
    for m in _NUMBER.finditer(text):
        num = m.group("num").replace(",", "")
        sign = m.group("sign")
        if sign and m.start() > 0 and _SIGN_CONTEXT.match(text[m.start() - 1]):
            sign = None  # "8-3": a subtraction, not a negative number
        if m.group("den") is not None:  # "18/5": one number, 3.6 (a zero denominator: none)
            if int(m.group("den")) == 0:
                continue
            num = str(_plain(Decimal(num) / Decimal(m.group("den"))))
        out.append(("-" if sign else "") + num)
    return out


def _plain(value: Decimal) -> Decimal:
    """A decimal without exponent notation or trailing zeros ("3.6", not "3.60" or "36E-1")."""
    value = value.normalize()
    return value.quantize(Decimal(1)) if value == value.to_integral() else value


MAX_BOXES = 32
"""Boxes looked at, the last ones: each is scanned to its closing brace, and thousands of
unclosed boxes made the scan quadratic (a review, session 36: 7.6 s on one completion)."""


def _boxed_contents(text: str) -> list[str]:
    """Contents of the last MAX_BOXES \\boxed{...} with balanced braces (unbalanced: up to the
    end), in order; one pass over the text for the closing braces."""
    starts = [m.end() for m in _BOXED.finditer(text)][-MAX_BOXES:]
    if not starts:
        return []
    close: dict[int, int] = {}  # a box's content start -> its closing brace
    stack: list[tuple[int, int]] = []  # open boxes: (content start, brace depth inside it)
    depth, k = 0, 0
    for m in re.finditer(r"[{}]", text[starts[0] - 1 :]):
        j = m.start() + starts[0] - 1
        if k < len(starts) and j == starts[k] - 1:  # the box's own opening brace
            depth += 1
            stack.append((starts[k], depth))
            k += 1
        elif text[j] == "{":
            depth += 1
        else:
            if stack and stack[-1][1] == depth:
                close[stack.pop()[0]] = j
            depth -= 1
    return [text[b : close.get(b, len(text))] for b in starts]


_TEXT_GROUP = re.compile(
    r"\\(?:text|textbf|mathbf|mathrm|mbox|operatorname)\s*\{([^{}]*)\}(?:\^\{?\d+\}?)?"
)
_SPACING = re.compile(r"\\(?:[,!;:> ]|q?quad)|\\?[$%]|\\left|\\right|\s+")
_UNIT_WORD = re.compile(r"(?<=[\d}])\s*[a-zA-Z]+(?:\^\{?\d+\}?)?$")
_BOX_FRAC = re.compile(
    rf"(?P<sign>[{_MINUS}]?)\s*(?P<whole>\d+)?\s*\\[dt]?frac\s*\{{\s*(?P<a>\d+)\s*\}}"
    r"\s*\{\s*(?P<b>\d+)\s*\}"
)


def _box_value(content: str) -> str | None | bool:
    """The number a box holds: one number, a fraction (a/b or \\frac{a}{b}), a mixed number
    (2\\frac{1}{2}) or the right-hand side of "x = ...", with units (\\text{...}, a trailing
    word, either with a power), $, % , LaTeX spacing and one pair of outer brackets ignored;
    False when it holds no digit at all (look at the box before), None when it holds another
    expression (a root, a power, a sum, two numbers: no number). The last digit run of such a
    box was taken before ("\\boxed{2\\frac{1}{2}}" read 2, "\\boxed{\\sqrt{18}}" 18; a review,
    session 36)."""
    if not re.search(r"\d", content):
        return False
    # \\text{18} is 18, \\text{ apples} a unit: a space, so "18 \\text{ and } 20" stays two numbers
    text = _TEXT_GROUP.sub(lambda m: m.group(1) if re.search(r"\d", m.group(1)) else " ", content)
    body = _SPACING.sub(" ", text).strip().rstrip(".").strip()  # "18." ends a sentence
    body = body.rsplit("=", 1)[-1].strip()  # "x = 18": the value stated
    body = _UNIT_WORD.sub("", body).strip()
    if len(body) > 1 and body[0] + body[-1] in ("()", "[]", "{}"):
        body = body[1:-1].strip()
    if _NUMBER.fullmatch(body):
        nums = _numbers(body)  # empty for a zero denominator: no number
        return nums[0] if nums else None
    frac = _BOX_FRAC.fullmatch(body)
    if frac and int(frac.group("b")) != 0:
        value = Decimal(int(frac.group("whole") or 0)) + Decimal(int(frac.group("a"))) / Decimal(
            int(frac.group("b"))
        )
        return str(_plain(-value if frac.group("sign") else value))
    return None


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
        value = _box_value(content)
        if value is not False:  # the last box with a digit is the answer, a number or none
            return value
    marks = list(_HASHES.finditer(text))
    if marks:
        nums = _numbers(marks[-1].group("answer"))
        if nums:
            return nums[0]
    phrases = list(_ANSWER_PHRASE.finditer(text))
    if phrases:
        rest = text[phrases[-1].end() :]
        sentence = re.split(r"\n|(?<!\d)\.(?!\d)", rest, maxsplit=1)[0]
        if "=" in sentence:  # "The answer is 3 + 15 = 18.": the value after the last "="
            rest = sentence.rsplit("=", 1)[1]
        nums = _numbers(rest)
        if nums:
            return nums[0]
    nums = _numbers(text)
    return nums[-1] if nums else None


def to_decimal(value: str | int | float) -> Decimal | None:
    """A number (possibly with commas or $) as a Decimal, or None when it is not one."""
    s = str(value).strip().replace(",", "").replace("$", "")
    s = s.replace("\u2212", "-").replace("\u2013", "-")
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
