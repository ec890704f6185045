"""Assertions shared by the CLI tests (imported by them; not a test module)."""

from __future__ import annotations


def one_line_error(res, *needles: str, after_progress: bool = False) -> str:
    """The project's rule for bad input, checked on a CliRunner result: exit code 2, no
    traceback, one line starting 'error: ' that holds every needle; returns that line.
    `after_progress`: a training progress bar ('step ...' lines) may precede it."""
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    lines = res.output.strip().splitlines()
    if after_progress:
        assert all(line.startswith("step ") for line in lines[:-1]), res.output
        lines = lines[-1:]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    assert "Traceback" not in res.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]
