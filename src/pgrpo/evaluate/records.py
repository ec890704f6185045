"""What one result record of an eval JSON may hold, checked field by field before it becomes an
`EvalRun`: a ValueError names the result, the field, what it holds and what it should hold (the
reader adds the file and the fix). Until 2026-12-06 a `metrics` of {"reward_errors": "x"} or
[1, 2] failed with a bare "invalid literal for int()" or a dict() error, a problem id null became
the id "None", and a `step` of {"x": 1} was taken.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from pgrpo.core.stats import checked_counts


@dataclass(frozen=True)
class Decoding:
    """How every sample of an evaluation was drawn: temperature (0 = greedy) and the completion
    length limit max_new_tokens. Samples drawn otherwise measure something else (greedy
    accuracy is not accuracy at temperature 2), so `pair_problems` refuses to compare them.
    (The samples per problem are in the per-problem counts; pgrpo's sampler has no top-p.)"""

    temperature: float
    max_new_tokens: int

    def text(self) -> str:
        return f"temperature {self.temperature:g}, max_new_tokens {self.max_new_tokens}"

    def options(self) -> str:
        """The `pgrpo eval` options that sample this way."""
        return f"--temperature {self.temperature:g} --max-new-tokens {self.max_new_tokens}"

    def record(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "max_new_tokens": self.max_new_tokens}


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: Any) -> bool:
    """A finite int or float, not a boolean (an int of 400 digits is finite, not a float)."""
    return _is_int(x) or (isinstance(x, float) and math.isfinite(x))


class _Record:
    """One record's fields, each read with the check its type needs."""

    def __init__(self, rec: Any, index: int) -> None:
        if not isinstance(rec, dict):
            raise ValueError(f"result {index} is {_shown(rec)}, not a result record (a mapping)")
        self.rec = rec
        name = rec.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"result {index}: name is {_shown(name)}, not a result name (text)")
        self.where = f"eval result {name!r}"

    def bad(self, field: str, should: str) -> ValueError:
        return ValueError(f"{self.where}: {field} is {_shown(self.rec.get(field))}, {should}")

    def text(self, field: str) -> str:
        value = self.rec.get(field, "")
        if value is None or not isinstance(value, str):
            raise self.bad(field, "not text")
        return value

    def whole(self, field: str, default: int | None) -> int | None:
        """A whole number >= 0 (2.0 is 2), or null where the field may be unknown."""
        value = self.rec.get(field, default)
        if value is None and default is None:
            return None
        whole = _is_int(value) or (_is_number(value) and float(value).is_integer())
        if not (whole and value >= 0):
            raise self.bad(field, "not a whole number >= 0" + " or null" * (default is None))
        return int(value)


def checked_record(rec: Any, index: int = 0) -> dict[str, Any]:
    """The `EvalRun` fields of the `index`th result record `rec` (a `summary()`), checked: a
    problem listed twice is one problem with the samples of both entries; a record without
    `id_source` (written before 2026-12-04) has row numbers for ids ("position"); without
    `decoding` (before 2026-12-06), unknown decoding (None)."""
    r = _Record(rec, index)
    probs = rec.get("per_problem")
    if not probs or not isinstance(probs, list) or not all(isinstance(p, dict) for p in probs):
        raise r.bad("per_problem", "not a list of per-problem counts ({id, n, c} each)")
    for i, p in enumerate(probs):
        if not (isinstance(p.get("id"), str) and p["id"]) and not _is_int(p.get("id")):
            raise ValueError(
                f"{r.where}: per_problem[{i}].id is {_shown(p.get('id'))}; each problem needs "
                "its id (the text `pgrpo eval` wrote)"
            )
        if "n" not in p or "c" not in p:
            raise ValueError(f"{r.where}: per_problem[{i}] has no n or no c count")
    n, c = checked_counts([p["n"] for p in probs], [p["c"] for p in probs], r.where)
    merged: dict[str, list[int]] = {}
    for p, n_i, c_i in zip(probs, n, c, strict=True):
        counts = merged.setdefault(str(p["id"]), [0, 0])
        counts[0] += n_i
        counts[1] += c_i
    options = rec.get("task_options")
    if options is not None and not isinstance(options, dict):
        raise r.bad("task_options", "not a mapping of task options or null")
    id_source = rec.get("id_source", "position")
    if not isinstance(id_source, str):
        raise r.bad("id_source", 'not "problem" or "position"')
    return {
        "name": rec["name"],
        "ids": list(merged),
        "n": [v[0] for v in merged.values()],
        "c": [v[1] for v in merged.values()],
        "step": r.whole("step", None),
        "seed": r.whole("seed", 0),
        "task": r.text("task"),
        "split": r.text("split"),
        "model": r.text("model"),
        "metrics": _metrics(r),
        "task_options": options,
        "problem_seed": r.whole("problem_seed", None),
        "id_source": id_source,
        "decoding": _decoding(r),
    }


def _metrics(r: _Record) -> dict[str, float]:
    """What scoring counted (`reward_errors`, `reward_timeouts`): a mapping of names to finite
    numbers; absent or null is none."""
    value = r.rec.get("metrics")
    if value is None:
        return {}
    should = 'not a mapping of counts (e.g. {"reward_errors": 0, "reward_timeouts": 0})'
    if not isinstance(value, dict):
        raise r.bad("metrics", should)
    for key, v in value.items():
        if not _is_number(v) or v < 0:
            raise ValueError(
                f"{r.where}: metrics.{key} is {_shown(v)}, not a count (a number >= 0)"
            )
    return {str(k): float(v) for k, v in value.items()}


def _decoding(r: _Record) -> Decoding | None:
    """The record's decoding settings; None when it has none (written before 2026-12-06)."""
    value = r.rec.get("decoding")
    if value is None:
        return None
    should = "not {temperature: a number >= 0, max_new_tokens: a whole number >= 1}"
    if not isinstance(value, dict):
        raise r.bad("decoding", should)
    t, m = value.get("temperature"), value.get("max_new_tokens")
    if not (_is_number(t) and t >= 0 and _is_int(m) and m >= 1):
        raise r.bad("decoding", should)
    return Decoding(float(t), m)
