"""The values an advantage estimator's option may take.

A domain is a function `value -> None | problem`: None for a value inside it, else a phrase that
says what the value must be ("must be a finite number >= 0, e.g. 1e-4"), which the error puts
after the option's name and before the value given. An estimator declares
its options' domains when it registers (`register_advantage(..., domains={"eps": non_negative})`),
a transform with `with_domains` (prospect's lambda_neg > 0, ...), and `check_options` applies them
(`check_values`), so a bad value fails in one line before any model is loaded
(`pgrpo train grpo.advantage_options.eps=-1e-4`) and in every `compute_advantages` call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np

from pgrpo.core.rewardrange import HINT, checked_reward_range

Domain = Callable[[Any], "str | None"]
F = TypeVar("F", bound=Callable[..., Any])


def check_values(
    label: str, domains: Mapping[str, Domain], options: Mapping[str, Any] | None
) -> None:
    """ValueError in one line for the first option of `options` outside its domain."""
    for key, value in (options or {}).items():
        domain = domains.get(key)
        problem = None if domain is None else domain(value)
        if problem is not None:
            raise ValueError(f"{label}: {key} {problem}, got {value!r:.60}")


def with_domains(**domains: Domain) -> Callable[[F], F]:
    """Declare a transform's option domains (read back by `declared`); a transform without
    them (a user's own callable) has its keywords checked, not its values."""

    def deco(fn: F) -> F:
        fn.option_domains = dict(domains)  # type: ignore[attr-defined]
        return fn

    return deco


def declared(fn: Any) -> Mapping[str, Domain]:
    """The option domains `fn` declared with `with_domains` (none: {})."""
    return getattr(fn, "option_domains", {})


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_
    )


def non_negative(value: Any) -> str | None:
    """eps of the z-score estimators: 0 is allowed (a zero-spread group gets advantage 0)."""
    if _is_number(value) and 0.0 <= float(value) < math.inf:
        return None
    return (
        "must be a finite number >= 0, e.g. 1e-4 (0 is allowed: a group whose reward spread is 0 "
        "gets advantage 0)"
    )


def positive(value: Any) -> str | None:
    """A scale or rate of a transform (prospect's lambda_pos, lambda_neg, beta, exponent): a
    sign or a zero there would flip or erase the advantages it shapes."""
    if _is_number(value) and 0.0 < float(value) < math.inf:
        return None
    return "must be a finite number > 0"


def unit_interval(value: Any) -> str | None:
    """A mixing weight: a number in [0, 1]."""
    if _is_number(value) and 0.0 <= float(value) <= 1.0:
        return None
    return "must be a number in [0, 1], e.g. 0.2"


def boolean(value: Any) -> str | None:
    """A switch such as `unbiased`."""
    return None if isinstance(value, bool | np.bool_) else "must be true or false"


def reward_range(value: Any) -> str | None:
    """(lo, hi) bounds of one reward (`checked_reward_range`)."""
    try:
        checked_reward_range(value)
    except ValueError:
        return HINT
    return None


def constraint_counts(value: Any) -> str | None:
    """C per completion ([N] or one for all): whole numbers >= 1 (NaN passes a `< 1` test)."""
    try:
        counts = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return "must be whole numbers >= 1 (one per completion or one for all)"
    bad = ~(np.isfinite(counts) & (counts >= 1) & (counts == np.round(counts)))
    if not bool(bad.any()):
        return None
    return (
        "must be >= 1 and whole for every completion (the number of constraints C of its "
        f"prompt; bad values: {np.unique(counts[bad])[:5].tolist()})"
    )


def one_of(*choices: str) -> Domain:
    """A domain of named choices."""
    words = " or ".join(map(repr, choices))

    def domain(value: Any) -> str | None:
        return None if isinstance(value, str) and value in choices else f"must be {words}"

    return domain


def number_or(choice: str) -> Domain:
    """A finite number, or the named choice."""

    def domain(value: Any) -> str | None:
        named = isinstance(value, str) and value == choice
        if named or (_is_number(value) and math.isfinite(float(value))):
            return None
        return f"must be a finite number or {choice!r}"

    return domain
