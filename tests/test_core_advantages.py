"""Advantage estimators: loop vs vectorised, published formulas (TRL, verl), properties, examples.

Run in the main venv (TRL parity imports trl) and, for the `verl`-marked tests, under
`/work/main/.venv-verl/bin/python -m pytest -m verl tests/test_core_advantages.py` (verl 0.9.1).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pgrpo import compute_advantages
from pgrpo.core.advantages import (
    ADVANTAGE_ESTIMATORS,
    ADVANTAGE_TRANSFORMS,
    prospect,
    register_advantage,
)

SETTINGS = settings(max_examples=60, deadline=None)


# ---------------------------------------------------------------------------------------------
# Naive references: one Python loop over groups, numpy float64, written from the papers' formulas
# ---------------------------------------------------------------------------------------------


def _pt(v: np.ndarray, lp: float = 1.25, ln: float = 2.0, beta: float = 0.8) -> np.ndarray:
    return np.where(v >= 0, lp * np.tanh(beta * v), ln * np.tanh(beta * v))


def naive(name: str, r: np.ndarray, ids: np.ndarray, **opts) -> np.ndarray:
    out = np.empty_like(r, dtype=np.float64)
    batch_sd = r.std(ddof=1)
    for g in np.unique(ids):
        m = ids == g
        x = r[m]
        n = x.size
        mu = x.mean()
        if name == "grpo":
            sd = x.std(ddof=1 if opts.get("unbiased", True) else 0)
            out[m] = (x - mu) / (sd + opts.get("eps", 1e-4))
        elif name == "dr_grpo":
            out[m] = x - mu
        elif name == "rloo":
            out[m] = [x[i] - (x.sum() - x[i]) / (n - 1) for i in range(n)]
        elif name == "batch_std":
            out[m] = (x - mu) / (batch_sd + 1e-4)
        elif name == "sign":
            out[m] = 2 * x - 1
        elif name == "dual_anchor":
            c = opts["num_constraints"][m]
            z = (x - mu) / (x.std() + 1e-6)
            if opts.get("sigma_goal", "paper") == "paper":
                sg = 1 / (2 * np.sqrt(c))
            else:
                sg = np.sqrt(n / (4 * c))
            goal = max(0.5, mu) if opts.get("goal_mean") == "max_mu" else 0.5
            delta = (x - goal) / sg
            out[m] = 0.8 * _pt(z) + 0.2 * _pt(delta)
        else:
            raise AssertionError(name)
    return out


def _batch(seed: int, ragged: bool, graded: bool = True):
    rng = np.random.default_rng(seed)
    if ragged:
        sizes = rng.integers(2, 9, size=25)
        ids = np.repeat(rng.permutation(1000)[:25] * 7 - 300, sizes)  # sparse, negative ids
        perm = rng.permutation(ids.size)
        ids = ids[perm]
    else:
        ids = np.repeat(np.arange(25), 6)
    n = ids.size
    r = rng.random(n) if graded else (rng.random(n) < 0.4).astype(np.float64)
    r[: n // 5] = np.round(r[: n // 5])  # some ties and degenerate groups
    return r, ids


CASES = [
    ("grpo", {}),
    ("grpo", {"unbiased": False, "eps": 1e-6}),
    ("dr_grpo", {}),
    ("rloo", {}),
    ("batch_std", {}),
    ("sign", {}),
    ("dual_anchor", {}),
    ("dual_anchor", {"sigma_goal": "code", "goal_mean": "max_mu"}),
]


@pytest.mark.parametrize("name,opts", CASES)
@pytest.mark.parametrize("ragged", [False, True])
def test_vectorised_matches_loop(name, opts, ragged):
    r, ids = _batch(0, ragged)
    if name == "dual_anchor":
        opts = {**opts, "num_constraints": np.random.default_rng(1).integers(1, 7, r.size)}
    expected = naive(name, r, ids, **opts)
    got = compute_advantages(name, r, group_ids=ids, **opts).advantages
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)
    if not ragged:  # the equal-size fast path gives the same numbers
        got_eq = compute_advantages(name, r, group_size=6, **opts).advantages
        np.testing.assert_allclose(got_eq, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name,opts", CASES)
@pytest.mark.parametrize("ragged", [False, True])
def test_nan_mask_matches_loop_over_finite_rewards(name, opts, ragged):
    """nan="mask": every estimator equals the loop run on the finite rewards alone, and the
    masked rollouts get exactly 0."""
    r, ids = _batch(7, ragged)
    rng = np.random.default_rng(8)
    bad = rng.random(r.size) < 0.1
    r = np.where(bad, np.where(rng.random(r.size) < 0.5, np.nan, np.inf), r)
    ok = ~bad
    if name == "dual_anchor":
        opts = {**opts, "num_constraints": rng.integers(1, 7, r.size)}
    # groups left with < 2 finite rewards have no relative signal: keep them out of the check
    dense = np.unique(ids, return_inverse=True)[1]
    keep = ok & (np.bincount(dense, weights=ok)[dense] >= 2)
    kw = {"group_ids": ids} if ragged else {"group_size": 6}
    got = compute_advantages(name, r, nan="mask", **kw, **opts).advantages
    assert np.all(got[bad] == 0.0)
    sub = {**opts}
    if name == "dual_anchor":
        sub["num_constraints"] = opts["num_constraints"][ok]
    want = naive(name, r[ok], ids[ok], **sub)
    np.testing.assert_allclose(got[keep], want[keep[ok]], rtol=1e-10, atol=1e-10)


def test_every_registered_builtin_is_covered():
    assert {"grpo", "dr_grpo", "rloo", "batch_std", "sign", "dual_anchor"} <= set(
        ADVANTAGE_ESTIMATORS.names()
    )
    assert {c[0] for c in CASES} == {"grpo", "dr_grpo", "rloo", "batch_std", "sign", "dual_anchor"}
    assert "prospect" in ADVANTAGE_TRANSFORMS.names()


def test_torch_and_numpy_give_same_values_and_keep_types():
    r, ids = _batch(3, ragged=True)
    a_np = compute_advantages("grpo", r.astype(np.float32), group_ids=ids).advantages
    a_t = compute_advantages("grpo", torch.tensor(r, dtype=torch.float64), group_ids=ids)
    assert isinstance(a_np, np.ndarray) and a_np.dtype == np.float32
    assert isinstance(a_t.advantages, torch.Tensor) and a_t.advantages.dtype == torch.float64
    np.testing.assert_allclose(a_np, a_t.advantages.numpy(), atol=2e-5)
    ints = compute_advantages("grpo", np.array([0, 1, 1, 0]), group_size=2).advantages
    assert ints.dtype == np.float64  # int64 rewards: numpy's result_type(int64, float32)
    bf = compute_advantages(
        "grpo", torch.tensor([0.0, 1, 1, 1], dtype=torch.bfloat16), group_size=4
    )
    assert bf.advantages.dtype == torch.float32  # computed and returned in float32 (result_dtype)
    # torch group ids and string ids (verl's uid) give the same grouping
    tid = compute_advantages("grpo", r, group_ids=torch.from_numpy(ids)).advantages
    sid = compute_advantages("grpo", r, group_ids=[f"uid-{i}" for i in ids]).advantages
    np.testing.assert_allclose(tid, naive("grpo", r, ids), atol=1e-12)
    np.testing.assert_allclose(sid, naive("grpo", r, ids), atol=1e-12)


def test_metrics_have_stable_names_and_values():
    r = np.array([0, 0, 0, 0, 0, 1, 1, 1], dtype=np.float64)
    res = compute_advantages("grpo", r, group_size=4)
    a = res.advantages
    m = res.metrics
    assert m["advantages/frac_zero"] == 0.5
    assert m["advantages/mean"] == pytest.approx(a.mean(), abs=1e-12)
    assert m["advantages/std"] == pytest.approx(a.std(), abs=1e-12)
    assert m["advantages/abs_max"] == pytest.approx(np.abs(a).max())
    assert m["advantages/nonfinite_rewards"] == 0.0
    empty = compute_advantages("grpo", np.array([]), group_ids=[])
    assert empty.advantages.shape == (0,) and set(empty.metrics) == set(m)  # same names


# ---------------------------------------------------------------------------------------------
# Parity with the published implementations
# ---------------------------------------------------------------------------------------------


def _trl_group_advantages(rewards: torch.Tensor, num_generations: int, scale_rewards: str):
    """TRL 1.16.0 trl/trainer/grpo_trainer.py, GRPOTrainer._generate_and_score_completions,
    lines 2765-2788 (multi_objective_aggregation="sum_then_normalize"), copied verbatim except for
    `self.`; `nanstd` is TRL's own (trl/trainer/utils.py:1021)."""
    nanstd = pytest.importorskip("trl.trainer.utils").nanstd
    mean_grouped_rewards = torch.nanmean(rewards.view(-1, num_generations), dim=1)
    mean_grouped_rewards = mean_grouped_rewards.repeat_interleave(num_generations, dim=0)
    if scale_rewards in ["group", "none"]:
        std_rewards = nanstd(rewards.view(-1, num_generations), dim=1)
        std_rewards = std_rewards.repeat_interleave(num_generations, dim=0)
    elif scale_rewards == "batch":
        std_rewards = nanstd(rewards).expand_as(rewards)
    advantages = rewards - mean_grouped_rewards
    if scale_rewards != "none":
        advantages = advantages / (std_rewards + 1e-4)
    is_std_zero = torch.isclose(std_rewards, torch.zeros_like(std_rewards))
    return advantages, is_std_zero


@pytest.mark.parametrize(
    "scale_rewards,name", [("group", "grpo"), ("batch", "batch_std"), ("none", "dr_grpo")]
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_parity_with_trl(scale_rewards, name, seed):
    g = [2, 4, 8][seed]
    rng = np.random.default_rng(seed)
    r = torch.tensor(rng.random(16 * g), dtype=torch.float32)
    r[: 2 * g] = 1.0  # two degenerate groups
    expected, is_zero = _trl_group_advantages(r, g, scale_rewards)
    got = compute_advantages(name, r, group_size=g).advantages
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    from pgrpo.core.degeneracy import group_stats

    if scale_rewards == "group":
        frac = group_stats(r, group_size=g).metrics["frac_reward_zero_std"]
        assert frac == pytest.approx(float(is_zero.float().mean()))


def _verl_grpo_documented(scores: torch.Tensor, index, epsilon=1e-6, norm=True):
    """verl 0.9.1 verl/trainer/ppo/core_algos.py:268 `compute_grpo_outcome_advantage`, its loop
    reimplemented: per uid, torch.mean and torch.std (Bessel); singleton -> mean 0, std 1."""
    id2score: dict = {}
    for i in range(len(scores)):
        id2score.setdefault(index[i], []).append(scores[i])
    out = scores.clone()
    for i in range(len(scores)):
        group = torch.stack(id2score[index[i]])
        mean, std = (group.mean(), group.std()) if len(group) > 1 else (0.0, 1.0)
        out[i] = (scores[i] - mean) / (std + epsilon) if norm else scores[i] - mean
    return out


@pytest.mark.parametrize("norm", [True, False])
def test_parity_with_verl_documented_formula(norm):
    r, ids = _batch(5, ragged=True)
    uid = np.array([f"u{i}" for i in ids], dtype=object)
    expected = _verl_grpo_documented(torch.tensor(r), uid, norm=norm)
    if norm:
        got = compute_advantages("grpo", r, group_ids=uid, eps=1e-6).advantages
    else:
        got = compute_advantages("dr_grpo", r, group_ids=uid).advantages
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.verl
@pytest.mark.parametrize(
    "fn_name", ["compute_grpo_outcome_advantage", "compute_grpo_vectorized_outcome_advantage"]
)
@pytest.mark.parametrize("norm", [True, False])
def test_parity_with_real_verl(fn_name, norm):
    core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")
    fn = getattr(core_algos, fn_name)
    r, ids = _batch(6, ragged=True)
    rf = r.astype(np.float32)
    t = 5
    mask = torch.ones(r.size, t)
    mask[:, 3:] = 0.0
    token_rewards = torch.zeros(r.size, t)
    token_rewards[:, 2] = torch.from_numpy(rf)  # outcome reward on the last response token
    uid = np.array([f"uid-{i}" for i in ids], dtype=object)  # verl reads numeric strings as ints
    adv, _ = fn(token_rewards, mask, uid, 1e-6, norm)
    name, opts = ("grpo", {"eps": 1e-6}) if norm else ("dr_grpo", {})
    ours = compute_advantages(name, rf, group_ids=ids, **opts).advantages
    expected = torch.from_numpy(ours).unsqueeze(-1) * mask
    torch.testing.assert_close(adv, expected, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# Properties (hypothesis)
# ---------------------------------------------------------------------------------------------

group_sizes = st.integers(2, 8)


@st.composite
def grouped(draw, min_groups=1, max_groups=6):
    g = draw(group_sizes)
    n_groups = draw(st.integers(min_groups, max_groups))
    levels = draw(st.lists(st.integers(0, 20), min_size=g * n_groups, max_size=g * n_groups))
    return np.array(levels, dtype=np.float64) / 20.0, g


@SETTINGS
@given(grouped())
def test_zscores_zero_sum_and_unit_rms(batch):
    r, g = batch
    v = r.reshape(-1, g)
    assume(np.all(v.std(1) > 1e-3))  # non-degenerate groups
    pop = compute_advantages("grpo", r, group_size=g, unbiased=False, eps=1e-12).advantages
    bes = compute_advantages("grpo", r, group_size=g, eps=1e-12).advantages
    np.testing.assert_allclose(pop.reshape(-1, g).sum(1), 0.0, atol=1e-9)
    np.testing.assert_allclose(np.sqrt((pop.reshape(-1, g) ** 2).mean(1)), 1.0, rtol=1e-9)
    rms_b = np.sqrt((bes.reshape(-1, g) ** 2).mean(1))
    np.testing.assert_allclose(rms_b, np.sqrt((g - 1) / g), rtol=1e-9)  # Bessel: sqrt((G-1)/G)


@SETTINGS
@given(grouped(), st.floats(0.01, 100.0), st.floats(-50.0, 50.0))
def test_shift_and_scale_invariance(batch, scale, shift):
    r, g = batch
    assume(np.all(r.reshape(-1, g).std(1) > 1e-3))
    for name, opts in [("grpo", {"eps": 0.0}), ("grpo", {"eps": 0.0, "unbiased": False})]:
        a = compute_advantages(name, r, group_size=g, **opts).advantages
        b = compute_advantages(name, scale * r + shift, group_size=g, **opts).advantages
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-7)
    for name in ("dr_grpo", "rloo"):  # shift-invariant, scale-equivariant
        a = compute_advantages(name, r, group_size=g).advantages
        b = compute_advantages(name, scale * r + shift, group_size=g).advantages
        np.testing.assert_allclose(scale * a, b, rtol=1e-7, atol=1e-6 * scale)


@SETTINGS
@given(st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=40))
def test_sign_never_zero_on_binary_rewards(rewards):
    a = compute_advantages("sign", np.array(rewards), group_size=1).advantages
    np.testing.assert_array_equal(np.abs(a), 1.0)
    np.testing.assert_array_equal(a, 2 * np.array(rewards) - 1)


@SETTINGS
@given(
    st.floats(-1e3, 1e3, allow_nan=False, width=32),
    group_sizes,
    st.booleans(),
    st.sampled_from(["float32", "float64"]),
)
def test_centred_estimators_give_zero_on_degenerate_groups(value, g, ragged, dtype):
    rng = np.random.default_rng(0)
    other = rng.random(g)  # a non-degenerate group beside it (batch_std needs a batch std > 0)
    r = np.concatenate([np.full(g, value), other]).astype(dtype)
    kw = {"group_ids": np.repeat([7, 3], g)} if ragged else {"group_size": g}
    for name in ("grpo", "dr_grpo", "rloo", "batch_std"):
        a = compute_advantages(name, r, **kw).advantages
        assert np.all(a[:g] == 0.0), (name, a[:g])


@SETTINGS
@given(st.integers(0, 12).map(lambda k: k / 12), group_sizes, st.integers(1, 6), st.booleans())
def test_dual_anchor_homogeneous_group_takes_sign_of_r_minus_half(value, g, c, code_sigma):
    r = np.full(g, value)
    opts = {"sigma_goal": "code"} if code_sigma else {}
    a = compute_advantages("dual_anchor", r, group_size=g, num_constraints=c, **opts).advantages
    np.testing.assert_array_equal(np.sign(a), np.sign(value - 0.5))
    # and it equals alpha * PT(delta): the relative anchor contributes nothing
    sg = 1 / (2 * math.sqrt(c)) if not code_sigma else math.sqrt(g / (4 * c))
    np.testing.assert_allclose(a, 0.2 * _pt(np.array([(value - 0.5) / sg]))[0], atol=1e-12)


def test_dual_anchor_code_goal_mean_zeroes_all_correct_groups():
    r = np.ones(4)
    a = compute_advantages("dual_anchor", r, group_size=4, num_constraints=2, goal_mean="max_mu")
    np.testing.assert_array_equal(a.advantages, 0.0)
    paper = compute_advantages("dual_anchor", r, group_size=4, num_constraints=2).advantages
    assert np.all(paper > 0)


@SETTINGS
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=50))
def test_prospect_bounded(values):
    v = torch.tensor(values, dtype=torch.float64)
    out = prospect(v)
    assert torch.all(out >= -2.0) and torch.all(out <= 1.25)
    moderate = v.abs() < 5.0  # tanh(0.8 v) < 1 strictly there, so the bound is strict
    assert torch.all(out[moderate] > -2.0) and torch.all(out[moderate] < 1.25)
    assert torch.all(torch.sign(out) == torch.sign(v))


def test_prospect_loss_aversion_and_power_form():
    v = torch.tensor([0.5, 1.0, 3.0])
    assert torch.all(prospect(-v).abs() > prospect(v))  # losses loom larger
    p = prospect(torch.tensor([-4.0, 0.0, 4.0]), form="power", exponent=0.5)
    torch.testing.assert_close(p, torch.tensor([-4.0, 0.0, 2.5]))
    # transform composes with any estimator: grpo + prospect == prospect(grpo)
    r = np.random.default_rng(0).random(12)
    plain = compute_advantages("grpo", r, group_size=4).advantages
    shaped = compute_advantages("grpo", r, group_size=4, transform="prospect").advantages
    np.testing.assert_allclose(shaped, _pt(plain), atol=1e-12)
    # dual_anchor without its default transform mixes the raw anchors
    raw = compute_advantages("dual_anchor", r, group_size=4, num_constraints=1, transform=None)
    z = naive("grpo", r, np.repeat(np.arange(3), 4), unbiased=False, eps=1e-6)
    np.testing.assert_allclose(raw.advantages, 0.8 * z + 0.2 * (r - 0.5) * 2, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# Worked examples from notes/advantages.md
# ---------------------------------------------------------------------------------------------


def test_low_variance_amplification_example():
    """{0.8, 0.8, 0.8, 1.0} and {0, 0, 0, 1} get the same z-scores (section 2)."""
    a = compute_advantages("grpo", np.array([0.8, 0.8, 0.8, 1.0, 0, 0, 0, 1]), group_size=4, eps=0)
    v = a.advantages.reshape(2, 4)
    np.testing.assert_allclose(v[0], v[1], atol=1e-12)
    np.testing.assert_allclose(v[1], [-0.5, -0.5, -0.5, 1.5], atol=1e-12)  # Bessel std = 0.5
    dual = compute_advantages(
        "dual_anchor", np.array([0.8, 0.8, 0.8, 1.0, 0, 0, 0, 1]), group_size=4, num_constraints=5
    ).advantages.reshape(2, 4)
    assert np.all(dual[0, :3] > dual[1, :3])  # the absolute anchor tells the groups apart
    assert dual[0, 3] == pytest.approx(dual[1, 3], abs=1e-5)  # r = 1 in both: same anchors


def _bandit_expected_gradient(name: str, g: int, only_all_fail: bool = False):
    """Exact E[sum_i A_i grad log pi(a_i)] for a softmax bandit, enumerating all K^G groups."""
    theta = torch.tensor([0.3, -0.2, 0.5, -1.0], dtype=torch.float64)
    correct = torch.tensor([0.0, 1.0, 0.0, 1.0], dtype=torch.float64)
    pi = torch.softmax(theta, 0)
    k = theta.numel()
    outcomes = torch.tensor(list(itertools.product(range(k), repeat=g)))  # [K^G, G]
    rewards = correct[outcomes]  # [K^G, G]
    prob = pi[outcomes].prod(1)  # [K^G]
    adv = torch.as_tensor(
        compute_advantages(name, rewards.reshape(-1), group_size=g).advantages
    ).reshape(-1, g)
    score = torch.eye(k, dtype=torch.float64)[outcomes] - pi  # grad log pi(a) = e_a - pi
    per_group = (adv.unsqueeze(-1) * score).sum(1)  # [K^G, K]
    if only_all_fail:
        prob = prob * (rewards.sum(1) == 0)
    grad = (prob.unsqueeze(-1) * per_group).sum(0)
    p = (pi * correct).sum()
    grad_p = pi * (correct - p)  # d p / d theta
    return grad, grad_p, p


@pytest.mark.parametrize("g", [2, 3, 4])
def test_pass_at_g_failure_descent_exact_enumeration(g):
    """Sign's expected total gradient is 2G grad p; mean-centred (dr_grpo) gives (G-1) grad p;
    restricted to all-fail groups Sign's gradient is exactly grad pass@G = grad (1-(1-p)^G)."""
    sign_grad, grad_p, p = _bandit_expected_gradient("sign", g)
    torch.testing.assert_close(sign_grad, 2 * g * grad_p)
    dr_grad, grad_p, _ = _bandit_expected_gradient("dr_grpo", g)
    torch.testing.assert_close(dr_grad, (g - 1) * grad_p)
    fail_grad, grad_p, p = _bandit_expected_gradient("sign", g, only_all_fail=True)
    torch.testing.assert_close(fail_grad, g * (1 - p) ** (g - 1) * grad_p)  # grad of pass@G


# ---------------------------------------------------------------------------------------------
# NaN policy and bad input: every error names the problem and the fix
# ---------------------------------------------------------------------------------------------


def test_nan_error_default_and_mask_option():
    r = np.array([1.0, np.nan, 0.0, 1.0, 0.0, 0.0, np.inf, 1.0])
    with pytest.raises(ValueError, match=r"NaN or infinite.*positions: \[1, 6\].*nan='mask'"):
        compute_advantages("grpo", r, group_size=4)
    res = compute_advantages("grpo", r, group_size=4, nan="mask")
    assert res.advantages[1] == 0.0 and res.advantages[6] == 0.0
    assert res.metrics["advantages/nonfinite_rewards"] == 2.0
    # the masked rewards take no part in the statistics: same as the loop over valid rewards
    ok = np.isfinite(r)
    ids = np.repeat([0, 1], 4)
    np.testing.assert_allclose(res.advantages[ok], naive("grpo", r[ok], ids[ok]), atol=1e-12)
    with pytest.raises(ValueError, match="nan must be 'error' or 'mask'"):
        compute_advantages("grpo", r, group_size=4, nan="drop")
    big = np.array([1e140, 1e140, 0.0, 1.0])  # finite and huge: not mistaken for non-finite
    np.testing.assert_array_equal(
        compute_advantages("dr_grpo", big, group_size=2).advantages, [0.0, 0.0, -0.5, 0.5]
    )


@pytest.mark.parametrize(
    "call,exc,pattern",
    [
        (lambda: compute_advantages("grpo", [1.0, 0.0], group_size=1), ValueError,
         r"single completion.*group_size >= 2.*'sign'"),
        (lambda: compute_advantages("rloo", [1.0, 0.0, 1.0], group_ids=[0, 0, 1]), ValueError,
         r"1 group\(s\) have a single completion"),
        (lambda: compute_advantages("grpo", [1.0, 0.0, 1.0], group_size=2), ValueError,
         r"do not split into groups of 2; pass group_ids="),
        (lambda: compute_advantages("grpo", [1.0, 0.0, 1.0], group_ids=[0, 0]), ValueError,
         r"group_ids has 2 entries but there are 3 rewards"),
        (lambda: compute_advantages("grpo", [1.0, 0.0]), ValueError,
         r"exactly one of group_size=.*or group_ids="),
        (lambda: compute_advantages("grpo", [1.0, 0.0], group_size=2, group_ids=[0, 0]),
         ValueError, r"exactly one of group_size="),
        (lambda: compute_advantages("gpro", [1.0, 0.0], group_size=2), KeyError,
         r"unknown advantage estimator 'gpro'; valid names: .*grpo"),
        (lambda: compute_advantages("dual_anchor", [1.0, 0.0], group_size=2), ValueError,
         r"needs num_constraints="),
        (lambda: compute_advantages("dual_anchor", [1.0, 0.0], group_size=2,
                                    num_constraints=[1, 2, 3]), ValueError,
         r"num_constraints has 3 entries but there are 2 rewards"),
        (lambda: compute_advantages("dual_anchor", [1.0, 0.0], group_size=2, num_constraints=0),
         ValueError, r"num_constraints must be >= 1"),
        (lambda: compute_advantages("dual_anchor", [1.0, 0.0], group_size=2, num_constraints=1,
                                    sigma_goal="x"), ValueError, r"'paper' or 'code'"),
        (lambda: compute_advantages("dual_anchor", [1.0, 0.0], group_size=2, num_constraints=1,
                                    goal_mean="mu"), ValueError, r"number or 'max_mu'"),
        (lambda: compute_advantages("grpo", [1.0, 0.0], group_size=2, epsilon=0.1), TypeError,
         r"epsilon.*help\(pgrpo.core.advantages.grpo\)"),
        (lambda: compute_advantages("grpo", ["a", "b"], group_size=2), TypeError,
         r"rewards must be numbers"),
        (lambda: compute_advantages("grpo", [1.0, 0.0], group_size=2, transform="tanh"), KeyError,
         r"unknown advantage transform 'tanh'; valid names: prospect"),
        (lambda: compute_advantages("sign", [1.0], group_size=1, reward_range=(1, 0)), ValueError,
         r"lo < hi"),
        (lambda: compute_advantages("grpo", [1.0, 0.0], group_size=0), ValueError,
         r"positive integer"),
        (lambda: prospect(torch.zeros(2), form="kt"), ValueError, r"'tanh' or 'power'"),
    ],
)  # fmt: skip
def test_bad_input_errors_name_the_fix(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


def test_sign_outside_unit_range_is_affine():
    a = compute_advantages("sign", np.array([2.0, -1.0, 0.5]), group_size=1).advantages
    np.testing.assert_array_equal(a, [3.0, -3.0, 0.0])
    b = compute_advantages(
        "sign", np.array([10.0, -10.0, 0.0]), group_size=1, reward_range=(-10, 10)
    ).advantages
    np.testing.assert_array_equal(b, [1.0, -1.0, 0.0])


def test_register_custom_estimator_and_duplicates_fail():
    name = "test_constant_baseline"

    @register_advantage(name, needs_group_stats=False)
    def constant_baseline(rewards, groups, *, valid=None, transform=None, baseline=0.25):
        return rewards - baseline

    try:
        a = compute_advantages(name, np.array([1.0, 0.0]), group_size=1, baseline=0.5)
        np.testing.assert_array_equal(a.advantages, [0.5, -0.5])
        with pytest.raises(ValueError, match="already registered"):
            register_advantage(name)(constant_baseline)
    finally:
        ADVANTAGE_ESTIMATORS._items.pop(name, None)


def test_large_batch_fast_paths_agree():
    """Equal-size (matrix-vector) and ragged (scatter/gather) paths agree on 100k rollouts."""
    rng = np.random.default_rng(0)
    r = (rng.random(100_000) < 0.3).astype(np.float32)
    ids = np.repeat(np.arange(12_500), 8)
    perm = rng.permutation(r.size)
    eq = compute_advantages("grpo", r, group_size=8).advantages
    rag = compute_advantages("grpo", r[perm], group_ids=ids[perm]).advantages
    np.testing.assert_allclose(rag, eq[perm], atol=1e-6)


def test_constant_graded_group_is_exactly_zero_where_trl_formula_is_not():
    """docs/core.md claim: float32 mean-then-subtract leaves ~7e-5 on a constant group of 0.1 at
    G = 8 (TRL's lines); pgrpo shifts by a group member first and returns exact zeros."""
    r = torch.full((8,), 0.1, dtype=torch.float32)
    trl, _ = _trl_group_advantages(r, 8, "group")
    assert 1e-5 < float(trl.abs().max()) < 1e-3
    assert torch.all(compute_advantages("grpo", r, group_size=8).advantages == 0)
