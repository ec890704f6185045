"""The hypothesis profile tests/conftest.py loads: derandomized under CI, the default otherwise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import hypothesis_profile
from hypothesis import settings


@pytest.mark.parametrize(
    ("environ", "profile"),
    [
        ({}, "default"),
        ({"CI": "true"}, "ci"),
        ({"CI": "TRUE"}, "ci"),
        ({"CI": "1"}, "ci"),
        ({"CI": "false"}, "default"),
        ({"CI": ""}, "default"),
        ({"HYPOTHESIS_PROFILE": "ci"}, "ci"),
        ({"CI": "false", "HYPOTHESIS_PROFILE": "dev"}, "dev"),
    ],
)
def test_the_profile_follows_the_ci_variable(environ, profile):
    assert hypothesis_profile(environ) == profile


def test_the_ci_profile_is_reproducible_and_the_default_is_not_changed():
    ci, default = settings.get_profile("ci"), settings.get_profile("default")
    assert ci.derandomize and ci.database is None and ci.deadline is None
    assert not default.derandomize and default.database is not None


def test_the_loaded_profile_is_the_environments():
    want = settings.get_profile(hypothesis_profile(dict(os.environ)))
    assert settings.default.derandomize == want.derandomize
    assert settings.default.database == want.database


_PROBE = """
from hypothesis import given, settings, strategies as st

SEEN = []

@settings(max_examples=15, deadline=None)
@given(st.integers())
def test_draw(x):
    SEEN.append(x)

def test_report():
    print("SEEN", SEEN)
"""


@pytest.mark.parametrize("ci", ["true", ""])
def test_a_run_under_ci_draws_the_same_examples_twice(tmp_path, ci):
    """Through pytest: CI=true draws one fixed sequence (run twice, the same), a developer's run
    draws fresh random examples (run twice, almost surely not the same)."""
    probe = tmp_path / "test_probe.py"
    probe.write_text(_PROBE)
    (tmp_path / "conftest.py").write_text((Path(__file__).parent / "conftest.py").read_text())
    env = {**os.environ, "CI": ci}
    env.pop("HYPOTHESIS_PROFILE", None)

    def seen() -> str:
        cmd = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", str(probe)]
        res = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert res.returncode == 0, res.stdout + res.stderr
        return next(line for line in res.stdout.splitlines() if "SEEN" in line)

    first, second = seen(), seen()
    assert (first == second) == (ci == "true"), (first, second)
