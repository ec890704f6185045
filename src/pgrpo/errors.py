"""The one exception type for input a user can fix (a bad file, option, path or config value).

Library code raises `UserError(problem, fix)`; the CLI catches it in one place
(`pgrpo.cli.common.command`) and prints `error: <problem>; <fix>` on one line with exit code 2.
It subclasses ValueError, so callers that already catch ValueError keep working.
"""

from __future__ import annotations


class UserError(ValueError):
    """Bad input. problem: what is wrong, naming the file/option/value; fix: what to do."""

    def __init__(self, problem: str, fix: str = "") -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(f"{problem}; {fix}" if fix else problem)


MAX_ABS_VALUE = 1e150
"""Largest |value| the statistics and fits take: they square sums of values, and float64
overflows past ~1.8e308 (a reward of 1e300 gave NaN deep inside a fit)."""


def check_magnitude(values: object, name: str, where: str = "") -> None:
    """Raise UserError when a finite value of `values` ([n] array-like) exceeds MAX_ABS_VALUE.
    The labels and fits are invariant to the reward's scale, so the fix is to divide it."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    v = np.abs(v[np.isfinite(v)])
    if v.size and float(v.max()) > MAX_ABS_VALUE:
        at = f"{where}: " if where else ""
        raise UserError(
            f"{at}{name} values reach {float(v.max()):.3g}, beyond the {MAX_ABS_VALUE:.0e} that "
            "float64 statistics can square",
            f"rescale the {name} (divide it by a constant; the verdicts and fits do not depend "
            "on its scale)",
        )


__all__ = ["MAX_ABS_VALUE", "UserError", "check_magnitude"]
