"""bench/forecast_analogs.py's local-linear level (`local_level`, the forecast frozen after round
13 and dropped after round 14): the value at the cut of a line fitted to the last share of the
prefix, exact on any straight line whatever the share, the mean on a prefix too short for a
line, and less noisy than the last-10 mean on a flat prefix of many points."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from forecast_analogs import LEVEL_FRACS, local_level  # noqa: E402


@given(
    m=st.integers(3, 400),
    a=st.floats(-5, 5),
    b=st.floats(-0.1, 0.1),
    frac=st.sampled_from(LEVEL_FRACS),
)
def test_a_straight_line_gives_its_value_at_the_cut(m, a, b, frac):
    p = a + b * np.arange(m)
    assert local_level(p, frac) == pytest.approx(a + b * (m - 1), abs=1e-6)


def test_a_prefix_too_short_for_a_line_gives_its_mean():
    assert local_level(np.array([0.2, 0.6]), 0.75) == pytest.approx(0.4)


def test_on_a_flat_prefix_it_is_less_noisy_than_the_last_ten():
    rng = np.random.default_rng(0)
    p = rng.normal(0.5, 0.1, size=(2000, 200))
    level = np.array([local_level(row, 0.75) for row in p])
    assert np.std(level) < 0.8 * np.std(p[:, -10:].mean(1))
