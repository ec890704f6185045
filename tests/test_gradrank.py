"""Effective-rank definitions (pure functions) and the per-rollout gradient matrix."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pgrpo.diagnose.rank import (
    effective_ranks,
    energy_rank,
    entropy_rank,
    participation_ratio,
    singular_values,
    stable_rank,
)


def test_known_spectra():
    flat = torch.ones(5)
    assert entropy_rank(flat) == pytest.approx(5.0)
    assert participation_ratio(flat) == pytest.approx(5.0)
    assert stable_rank(flat) == pytest.approx(5.0)
    assert energy_rank(flat, 0.9) == 5
    assert energy_rank(flat, 0.79) == 4
    one = torch.tensor([3.0, 0.0, 0.0])
    for fn in (entropy_rank, participation_ratio, stable_rank):
        assert fn(one) == pytest.approx(1.0)
    zero = torch.zeros(4)
    assert entropy_rank(zero) == 0.0 and stable_rank(zero) == 0.0 and energy_rank(zero, 0.9) == 0
    # two values 2, 1: p = (2/3, 1/3); PR = (4+1)^2/(16+1); stable = 5/4
    s = torch.tensor([2.0, 1.0])
    h = -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3))
    assert entropy_rank(s) == pytest.approx(math.exp(h))
    assert participation_ratio(s) == pytest.approx(25 / 17)
    assert stable_rank(s) == pytest.approx(1.25)
    assert energy_rank(s, 0.8) == 1 and energy_rank(s, 0.81) == 2


@pytest.mark.parametrize("shape", [(6, 200), (200, 6), (12, 15)])
def test_singular_values_match_svd(shape):
    g = torch.Generator().manual_seed(0)
    m = torch.randn(*shape, generator=g, dtype=torch.float64)
    ref = torch.linalg.svdvals(m)
    assert torch.allclose(singular_values(m), ref, rtol=1e-8, atol=1e-10)


def test_rank_two_structure_from_zero_sum_advantages():
    """Binary rewards, zero-sum advantages, outcome-clustered scores -> exactly rank 2 (notes 3)."""
    g = torch.Generator().manual_seed(1)
    s_correct, s_wrong = torch.randn(2, 500, generator=g, dtype=torch.float64)
    r = torch.tensor([1, 1, 0, 0, 0, 1, 0, 0], dtype=torch.float64)
    adv = (r - r.mean()) / r.std()
    scores = torch.stack([s_correct if ri else s_wrong for ri in r])
    res = effective_ranks(adv[:, None] * scores)
    assert res.metrics["rank/numerical"] == 2.0
    assert res.metrics["rank/energy_99"] <= 2
    assert 1.0 <= res.metrics["rank/entropy"] <= 2.0


def test_rejects_bad_input():
    with pytest.raises(ValueError, match="2-D"):
        singular_values(torch.ones(3))
    with pytest.raises(ValueError, match="NaN"):
        singular_values(torch.tensor([[1.0, float("nan")]]))
    with pytest.raises(ValueError, match="energy level"):
        energy_rank(torch.ones(3), 1.5)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 8),
    p=st.integers(1, 40),
    seed=st.integers(0, 10_000),
    scale=st.floats(1e-3, 1e3),
)
def test_properties_bounds_and_invariances(n, p, seed, scale):
    rng = np.random.default_rng(seed)
    m = torch.from_numpy(rng.normal(size=(n, p)))
    base = effective_ranks(m).metrics
    k = base["rank/numerical"]
    for name in ("rank/entropy", "rank/participation_ratio", "rank/stable"):
        assert 1.0 - 1e-9 <= base[name] <= k + 1e-9
    # stable rank <= participation ratio <= ... all at most the numerical rank
    assert base["rank/stable"] <= base["rank/participation_ratio"] + 1e-9
    assert base["rank/energy_90"] <= base["rank/energy_95"] <= base["rank/energy_99"] <= k
    # invariant to scale and to an orthogonal rotation of the rows
    q, _ = torch.linalg.qr(torch.from_numpy(rng.normal(size=(n, n))))
    other = effective_ranks(scale * (q @ m)).metrics
    for name, value in base.items():
        assert other[name] == pytest.approx(value, rel=1e-6, abs=1e-6)
