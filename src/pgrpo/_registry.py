"""One registry per extension point: the only dispatch path for names given by users.

Advantage estimators, advantage transforms, policy losses, aggregators, KL estimators, tasks and
log readers each have one `Registry`. Unknown names fail listing the valid ones; registering a name
twice fails, so a plug-in cannot silently replace a built-in. `check_keywords` does the same for
the keyword options of a registered function (an estimator's `eps=`, a transform's `beta=`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(KeyError, ValueError):
    """An unknown registry name; the message lists the valid ones."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class Registry(Generic[T]):
    """A name -> object map with loud failures. `kind` names the extension point in messages."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: `@REGISTRY.register("name")`. Fails if `name` is already taken."""

        def deco(obj: T) -> T:
            self.add(name, obj)
            return obj

        return deco

    def add(self, name: str, obj: T) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"{self.kind} names must be non-empty strings, got {name!r}")
        if name in self._items:
            raise ValueError(
                f"{self.kind} {name!r} is already registered; pick another name "
                f"(registered: {', '.join(sorted(self._items))})"
            )
        self._items[name] = obj

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(
                f"unknown {self.kind} {name!r}; valid names: {', '.join(sorted(self._items))}"
            ) from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)


def check_keywords(
    given: dict[str, Any] | None, fn: Callable[..., Any], label: str, skip: tuple[str, ...] = ()
) -> None:
    """TypeError when `given` holds names that are not keyword options of the registered
    function `fn` (its parameters with a default, less `skip`), listing the valid ones; nothing
    is checked for a function that takes **kwargs. label: what `fn` is, for the message."""
    if not given:
        return
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: let the call decide
        return
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return
    valid = [
        p.name
        for p in params
        if p.default is not p.empty and p.kind is not p.POSITIONAL_ONLY and p.name not in skip
    ]
    unknown = sorted(set(given) - set(valid))
    if unknown:
        ours = fn.__module__.startswith("pgrpo.")
        see = f"; see help({fn.__module__}.{fn.__name__})" if ours else ""
        raise TypeError(
            f"unknown option(s) {', '.join(map(repr, unknown))} of the {label}; its options: "
            f"{', '.join(valid) or 'none'}{see}"
        )
