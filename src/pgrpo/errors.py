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


__all__ = ["UserError"]
