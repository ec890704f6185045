"""The one exception type for input a user can fix (a bad file, option, path or config value).

Library code raises `UserError(problem, fix)`; the CLI catches it in one place
(`pgrpo.cli.common.command`) and prints `error: <problem>; <fix>` on one line with exit code 2.
It subclasses ValueError, so callers that already catch ValueError keep working. `RunFailed` is
the other kind the CLI prints as one line: a run that failed for a reason that is not the input
(exit code 1).
"""

from __future__ import annotations


class UserError(ValueError):
    """Bad input. problem: what is wrong, naming the file/option/value; fix: what to do."""

    def __init__(self, problem: str, fix: str = "") -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(f"{problem}; {fix}" if fix else problem)


class RunFailed(Exception):
    """A run that cannot go on for a reason other than bad input (its training diverged): the CLI
    prints `error: <message>` on one line and exits with `exit_code` (1), not a traceback."""

    exit_code = 1


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


MAX_SEED = 2**32 - 1
"""Largest seed: every generator a run seeds takes [0, 2^32) (numpy's legacy `np.random.seed`,
which `pgrpo train` seeds, refuses more; torch and numpy's Generator refuse negatives)."""


def check_seed(value: object, name: str) -> None:
    """Raise UserError unless `value` is an integer seed in [0, MAX_SEED]: a negative or huge
    seed otherwise fails deep inside numpy or torch, after the model has loaded."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEED:
        raise UserError(
            f"{name}={value!r} is not a seed", f"give an integer in [0, {MAX_SEED}] (2^32 - 1)"
        )


__all__ = ["MAX_ABS_VALUE", "MAX_SEED", "RunFailed", "UserError", "check_magnitude", "check_seed"]
