"""Policy-loss pieces: clipped surrogate, REINFORCE, aggregators, KL estimators, composition."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pgrpo.core.losses import (
    AGGREGATORS,
    KL_ESTIMATORS,
    POLICY_LOSSES,
    LossConfig,
    asymmetric_kl_weights,
    check_dual_clip,
    clipped_surrogate,
    gradient_token_fraction,
    kl_k1,
    kl_k2,
    kl_k3,
    policy_loss,
    reinforce,
    token_entropy,
)


def _batch(seed: int = 0, n: int = 6, t: int = 5):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(n, t, generator=g, dtype=torch.float64) * 3
    new = old + 0.4 * torch.randn(n, t, generator=g, dtype=torch.float64)
    adv = torch.randn(n, generator=g, dtype=torch.float64)
    mask = torch.ones(n, t, dtype=torch.float64)
    lengths = torch.randint(1, t + 1, (n,), generator=g)
    for i, length in enumerate(lengths):
        mask[i, length:] = 0
    return new, old, adv, mask


def test_clipped_surrogate_hand_computation():
    """ratios 0.5, 0.9, 1.0, 1.1, 1.5 with A = +1 and A = -1, eps_low 0.2, eps_high 0.28."""
    ratios = torch.tensor([[0.5, 0.9, 1.0, 1.1, 1.5], [0.5, 0.9, 1.0, 1.1, 1.5]])
    old = torch.zeros(2, 5)
    adv = torch.tensor([1.0, -1.0])
    out = clipped_surrogate(ratios.log(), old, adv, epsilon_low=0.2, epsilon_high=0.28)
    # A > 0: -min(r, clip(r, 0.8, 1.28)); A < 0: -min(-r, -clip(r)) = max(r, clip(r))
    expected = torch.tensor([[-0.5, -0.9, -1.0, -1.1, -1.28], [0.8, 0.9, 1.0, 1.1, 1.5]])
    torch.testing.assert_close(out.loss, expected)
    high = torch.tensor([[0, 0, 0, 0, 1], [0, 0, 0, 0, 0]], dtype=torch.bool)
    low = torch.tensor([[0, 0, 0, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    assert torch.equal(out.high_clipped, high) and torch.equal(out.low_clipped, low)
    res = policy_loss(
        ratios.log(),
        old,
        adv,
        torch.ones(2, 5),
        LossConfig(epsilon_low=0.2, epsilon_high=0.28),
    )
    assert res.metrics["clip_ratio/low_mean"] == pytest.approx(0.1)
    assert res.metrics["clip_ratio/high_mean"] == pytest.approx(0.1)
    assert res.metrics["clip_ratio/region_mean"] == pytest.approx(0.2)
    assert res.loss.item() == pytest.approx(expected.mean().item())


def test_clipped_surrogate_max_log_ratio():
    """log(ratio) 200, -200, 0.1 with A = -1, 0, +1: unclamped exp overflows (inf loss, NaN
    gradient); max_log_ratio=20 gives the loss at ratio e^+-20 and no gradient beyond the clamp."""
    log_ratio = torch.tensor([[200.0, -200.0, 0.1]] * 3)
    adv = torch.tensor([-1.0, 0.0, 1.0])
    assert not bool(clipped_surrogate(log_ratio, torch.zeros(3, 3), adv).loss.isfinite().all())
    lp = log_ratio.clone().requires_grad_()
    out = clipped_surrogate(lp, torch.zeros(3, 3), adv, max_log_ratio=20.0)
    out.loss.sum().backward()
    e20 = math.exp(20.0)
    r = math.exp(0.1)
    expected = torch.tensor([[e20, 0.8, r], [0.0, 0.0, 0.0], [-1.2, 0.0, -r]])
    torch.testing.assert_close(out.loss, expected)
    assert bool(lp.grad.isfinite().all()) and bool((lp.grad[:, :2] == 0).all())
    same = clipped_surrogate(log_ratio[:, 2:], torch.zeros(3, 1), adv, max_log_ratio=20.0)
    assert torch.equal(same.loss, clipped_surrogate(log_ratio[:, 2:], torch.zeros(3, 1), adv).loss)


def test_clipped_matches_trl_lines():
    """TRL 1.16.0 grpo_trainer.py `_compute_loss` lines 3095 and 3113-3119 (token level,
    loss_type in grpo/bnpo/dr_grpo/dapo, delta None) and the clip metrics at lines 3274-3276."""
    new, old, adv, mask = _batch(1)
    eps_low, eps_high = 0.2, 0.28
    advantages = adv.unsqueeze(1)
    coef_1 = torch.exp(new - old)
    coef_2 = torch.clamp(coef_1, 1 - eps_low, 1 + eps_high)
    per_token_loss = -torch.min(coef_1 * advantages, coef_2 * advantages)
    is_low = (coef_1 < 1 - eps_low) & (advantages < 0)
    is_high = (coef_1 > 1 + eps_high) & (advantages > 0)
    out = clipped_surrogate(new, old, adv, epsilon_low=eps_low, epsilon_high=eps_high)
    torch.testing.assert_close(out.loss, per_token_loss)
    assert torch.equal(out.low_clipped, is_low) and torch.equal(out.high_clipped, is_high)
    # TRL's loss_type="bnpo"/"dapo" aggregation == token_mean; "grpo" == seq_mean_token_mean
    bnpo = (per_token_loss * mask).sum() / mask.sum().clamp(min=1.0)
    grpo = ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    torch.testing.assert_close(AGGREGATORS.get("token_mean")(out.loss, mask), bnpo)
    torch.testing.assert_close(AGGREGATORS.get("seq_mean_token_mean")(out.loss, mask), grpo)


def test_aggregators_match_loops():
    new, old, adv, mask = _batch(2)
    v = clipped_surrogate(new, old, adv).loss
    n, t = v.shape
    tok_sum = sum(v[i, j] * mask[i, j] for i in range(n) for j in range(t))
    assert AGGREGATORS.get("token_mean")(v, mask).item() == pytest.approx(
        float(tok_sum / mask.sum())
    )
    seq = [sum(v[i, j] for j in range(t) if mask[i, j]) / mask[i].sum() for i in range(n)]
    assert AGGREGATORS.get("seq_mean_token_mean")(v, mask).item() == pytest.approx(
        float(sum(seq) / n)
    )
    agg = AGGREGATORS.get("seq_sum_constant_norm")
    assert agg(v, mask).item() == pytest.approx(float(tok_sum / (n * t)))
    assert agg(v, mask, max_length=64).item() == pytest.approx(float(tok_sum / (n * 64)))
    assert set(AGGREGATORS.names()) >= {
        "token_mean",
        "seq_mean_token_mean",
        "seq_sum_constant_norm",
    }


def test_kl_estimator_formulas_and_expectations():
    new, _, _, _ = _batch(3)
    ref = new + 0.3 * torch.randn_like(new)
    lr = ref - new
    torch.testing.assert_close(kl_k1(new, ref), -lr)
    torch.testing.assert_close(kl_k2(new, ref), lr**2 / 2)
    torch.testing.assert_close(kl_k3(new, ref), torch.exp(lr) - lr - 1)
    assert set(KL_ESTIMATORS.names()) == {"k1", "k2", "k3"}
    # k1 and k3 are unbiased for KL(pi || ref) under x ~ pi: check by exact expectation
    pi = torch.softmax(torch.tensor([0.2, -1.0, 0.7, 0.0], dtype=torch.float64), 0)
    rho = torch.softmax(torch.tensor([0.0, 0.3, -0.4, 0.5], dtype=torch.float64), 0)
    kl = (pi * (pi.log() - rho.log())).sum()
    assert (pi * kl_k1(pi.log(), rho.log())).sum().item() == pytest.approx(kl.item())
    assert (pi * kl_k3(pi.log(), rho.log())).sum().item() == pytest.approx(kl.item())


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(-30, 30), min_size=2, max_size=20))
def test_k3_and_k2_nonnegative(values):
    x = torch.tensor(values, dtype=torch.float64)
    ref = x.flip(0)
    assert torch.all(kl_k3(x, ref) >= 0) and torch.all(kl_k2(x, ref) >= 0)
    assert torch.all(kl_k3(x, x) == 0)


def test_asymmetric_kl_weights():
    adv = torch.tensor([-1.0, 0.0, 2.0, -0.1])
    w = asymmetric_kl_weights(adv, kl_coef=0.01, kl_coef_negative=0.025)
    torch.testing.assert_close(w, torch.tensor([0.025, 0.01, 0.01, 0.025]))
    same = asymmetric_kl_weights(adv, kl_coef=0.04, kl_coef_negative=None)
    torch.testing.assert_close(same, torch.full((4,), 0.04))
    per_token = torch.tensor([[-1.0, -1.0], [1.0, -3.0], [1.0, 1.0]])  # row means -1, -1, 1
    w2 = asymmetric_kl_weights(per_token, kl_coef=0.01, kl_coef_negative=0.025)
    torch.testing.assert_close(w2, torch.tensor([0.025, 0.025, 0.01]))


def test_policy_loss_composes_kl_with_asymmetric_weights_and_entropy():
    new, old, adv, mask = _batch(4)
    ref = old + 0.1
    ent = torch.rand_like(new)
    cfg = LossConfig(kl_coef=0.01, kl_coef_negative=0.025, entropy_coef=0.001)
    res = policy_loss(new, old, adv, mask, cfg, ref_log_probs=ref, entropy=ent)
    w = torch.where(adv < 0, 0.025, 0.01).unsqueeze(1)
    per_token = clipped_surrogate(new, old, adv).loss + w * kl_k3(new, ref)
    tm = AGGREGATORS.get("token_mean")
    expected = tm(per_token, mask) - 0.001 * tm(ent, mask)
    torch.testing.assert_close(res.loss, expected)
    assert res.metrics["kl"] == pytest.approx(tm(kl_k3(new, ref), mask).item())
    assert res.metrics["entropy"] == pytest.approx(tm(ent, mask).item())
    assert res.metrics["frac_gradient_tokens"] == 1.0
    assert cfg.uses_reference and not LossConfig().uses_reference


def test_policy_loss_dr_grpo_aggregation_uses_max_length():
    new, old, adv, mask = _batch(5)
    cfg = LossConfig(aggregator="seq_sum_constant_norm", max_length=50, policy_loss="reinforce")
    res = policy_loss(new, old, adv, mask, cfg)
    expected = (reinforce(new, old, adv).loss * mask).sum() / (new.shape[0] * 50)
    torch.testing.assert_close(res.loss, expected)
    assert "clip_ratio/low_mean" not in res.metrics  # no ratio, no clip metrics


@pytest.mark.parametrize(
    "aggregator", ["token_mean", "seq_mean_token_mean", "seq_sum_constant_norm"]
)
@pytest.mark.parametrize("junk", [-math.inf, math.inf, math.nan])
def test_anything_at_a_padded_position_leaves_loss_and_gradient_finite(aggregator, junk):
    """Padding was masked by multiplication, so -inf log-probs at a padded position (a masked
    log-softmax) made the loss NaN (review 2026-12-03). Now the loss and every gradient equal
    those of the same batch with zeros there, whatever the padded positions hold (log-probs,
    per-token advantages, reference log-probs, entropy)."""
    new, old, adv, mask = _batch(7)
    adv_t = adv[:, None].expand_as(new).clone()
    cfg = LossConfig(aggregator=aggregator, kl_coef=0.02, entropy_coef=0.01)
    pad = mask == 0
    assert pad.any()

    def run(fill):
        logits = new.clone().requires_grad_(True)  # stands in for the model's output
        dirty = [torch.where(pad, torch.full_like(x, fill), x) for x in (old, adv_t, old + 0.1)]
        ent = torch.where(pad, torch.full_like(new, fill), torch.ones_like(new))
        lp = torch.where(pad, fill * torch.ones_like(new) + 0 * logits, logits)
        res = policy_loss(lp, dirty[0], dirty[1], mask, cfg, ref_log_probs=dirty[2], entropy=ent)
        res.loss.backward()
        return res.loss.detach(), logits.grad

    clean_loss, clean_grad = run(0.0)
    loss, grad = run(junk)
    assert torch.isfinite(loss) and torch.isfinite(grad).all()
    assert torch.equal(loss, clean_loss) and torch.equal(grad, clean_grad)
    assert AGGREGATORS.get(aggregator)(torch.where(pad, junk, new), mask, **(
        {"max_length": 8} if aggregator == "seq_sum_constant_norm" else {})).isfinite()  # fmt: skip


def test_reinforce_gradient_equals_clipped_gradient_at_ratio_one():
    new, _, adv, mask = _batch(6)
    for agg in ("token_mean", "seq_mean_token_mean", "seq_sum_constant_norm"):
        grads = []
        for name in ("clipped", "reinforce"):
            lp = new.clone().requires_grad_(True)
            cfg = LossConfig(policy_loss=name, aggregator=agg)
            policy_loss(lp, lp.detach(), adv, mask, cfg).loss.backward()
            grads.append(lp.grad)
        torch.testing.assert_close(grads[0], grads[1])
    # away from ratio 1 the clipped gradient differs (zero on clipped tokens)
    lp = new.clone().requires_grad_(True)
    out = clipped_surrogate(lp, new.detach() - 1.0, adv)  # ratio e: clipped where A > 0
    out.loss.sum().backward()
    assert torch.all(lp.grad[adv > 0] == 0)


def test_token_entropy_and_gradient_token_fraction():
    logits = torch.zeros(2, 3, 7)
    torch.testing.assert_close(token_entropy(logits), torch.full((2, 3), math.log(7)))
    logits = torch.randn(4, 9, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    p = torch.softmax(logits, -1)
    # token_entropy returns float32: compare at float32's tolerance (float64's failed at random)
    torch.testing.assert_close(
        token_entropy(logits).double(), -(p * p.log()).sum(-1), rtol=1e-6, atol=1e-6
    )
    adv = torch.tensor([0.0, 1.0, 0.0, -2.0])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [1, 1, 0], [1, 1, 1]], dtype=torch.float64)
    assert gradient_token_fraction(adv, mask) == pytest.approx(4 / 9)  # tokens with A != 0


@pytest.mark.parametrize(
    "kwargs,pattern",
    [
        ({"policy_loss": "ppo"}, r"unknown policy loss 'ppo'; valid names: clipped, reinforce"),
        ({"aggregator": "mean"}, r"unknown loss aggregator 'mean'; valid names: .*token_mean"),
        ({"kl_estimator": "k4"}, r"unknown KL estimator 'k4'; valid names: k1, k2, k3"),
        ({"epsilon_low": -0.1}, r"epsilon_low must be >= 0"),
        ({"epsilon_high": -0.1}, r"epsilon_high must be >= 0 or None"),
        ({"kl_coef_negative": -1.0}, r"kl_coef_negative must be >= 0 or None"),
        ({"dual_clip": 0.5}, r"loss.dual_clip=0.5 is invalid: use a finite number > 1.*or None"),
    ],
)
def test_loss_config_errors_name_the_fix(kwargs, pattern):
    with pytest.raises((ValueError, KeyError), match=pattern):
        LossConfig(**kwargs)


def test_missing_reference_errors():
    new, old, adv, mask = _batch(7)
    with pytest.raises(
        ValueError, match="ref_log_probs is None: pass ref_log_probs=.*or set kl_coef=0"
    ):
        policy_loss(new, old, adv, mask, LossConfig(kl_coef=0.1))


def test_registries_are_complete():
    assert POLICY_LOSSES.names() == ["clipped", "reinforce"]
    with pytest.raises(ValueError, match="already registered"):
        POLICY_LOSSES.register("clipped")(clipped_surrogate)
    assert np.isfinite(LossConfig().epsilon_low)


# ---------------------------------------------------------------------------------------------
# The dual clip (Ye et al. 2019, arXiv 1912.09729; verl's clip_ratio_c), since session 41
# ---------------------------------------------------------------------------------------------

EXTREMES = (30.0, -30.0, 200.0, -200.0)


def _clipped_before(log_probs, old_log_probs, advantages, eps_low, eps_high, max_log_ratio):
    """clipped_surrogate before session 41 (commit 1fff025), line for line."""
    eps_high = eps_low if eps_high is None else eps_high
    adv = advantages.unsqueeze(-1).expand_as(log_probs) if advantages.ndim == 1 else advantages
    log_ratio = log_probs - old_log_probs
    if max_log_ratio is not None:
        log_ratio = torch.clamp(log_ratio, -max_log_ratio, max_log_ratio)
    ratio = torch.exp(log_ratio)
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)
    loss = -torch.minimum(ratio * adv, clipped * adv)
    return loss, (ratio < 1.0 - eps_low) & (adv < 0), (ratio > 1.0 + eps_high) & (adv > 0)


@st.composite
def _surrogate_case(draw):
    """Seeded [N,T] float64 log-probs whose log-ratios mix N(0, 1.5) with +-30 and +-200, per-token
    advantages with A > 0, < 0 and = 0, clip ranges, a log-ratio clamp (or none), a dual clip."""
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    n, t = draw(st.integers(1, 6)), draw(st.integers(1, 8))
    old = -3 * torch.rand(n, t, generator=g, dtype=torch.float64)
    log_ratio = 1.5 * torch.randn(n, t, generator=g, dtype=torch.float64)
    pick = torch.rand(n, t, generator=g) < 0.25
    extreme = torch.tensor(EXTREMES, dtype=torch.float64)[torch.randint(0, 4, (n, t), generator=g)]
    log_ratio = torch.where(pick, extreme, log_ratio)
    adv = torch.randn(n, t, generator=g, dtype=torch.float64)
    adv = torch.where(torch.rand(n, t, generator=g) < 0.2, torch.zeros_like(adv), adv)
    eps_low = draw(st.floats(0.0, 0.5))
    eps_high = draw(st.none() | st.floats(0.0, 3.0))
    max_log_ratio = draw(st.sampled_from([None, 20.0]))
    dual_clip = draw(st.floats(1.0, 10.0, exclude_min=True))
    return old + log_ratio, old, adv, eps_low, eps_high, max_log_ratio, dual_clip


@settings(max_examples=60, deadline=None)
@given(_surrogate_case())
def test_dual_clip_none_is_the_loss_before_bit_for_bit(case):
    """dual_clip=None (the default): loss, clip masks and gradient equal the code before."""
    new, old, adv, eps_low, eps_high, max_log_ratio, _ = case
    opts = {"epsilon_low": eps_low, "epsilon_high": eps_high, "max_log_ratio": max_log_ratio}
    lp = new.clone().requires_grad_(True)
    ours = clipped_surrogate(lp, old, adv, **opts, dual_clip=None)
    torch.where(ours.loss.isfinite(), ours.loss, 0.0).sum().backward()
    lp_before = new.clone().requires_grad_(True)
    loss, low, high = _clipped_before(lp_before, old, adv, eps_low, eps_high, max_log_ratio)
    torch.where(loss.isfinite(), loss, 0.0).sum().backward()
    assert ours.dual_clipped is None
    assert torch.equal(ours.loss.detach().nan_to_num(), loss.detach().nan_to_num())
    assert torch.equal(lp.grad, lp_before.grad)
    assert torch.equal(ours.low_clipped, low) and torch.equal(ours.high_clipped, high)


@settings(max_examples=60, deadline=None)
@given(_surrogate_case())
def test_dual_clip_is_the_published_formula_with_no_gradient_where_it_binds(case):
    """Ye et al. 2019, eq. 5, token by token: A < 0 -> max(min(r A, clip(r) A), c A), else
    min(r A, clip(r) A); the loss is its negative. A token with A < 0 and r > c is dual-clipped
    and gets no gradient; every other token keeps the gradient of dual_clip=None bit for bit."""
    new, old, adv, eps_low, eps_high, max_log_ratio, c = case
    opts = {"epsilon_low": eps_low, "epsilon_high": eps_high, "max_log_ratio": max_log_ratio}
    lp = new.clone().requires_grad_(True)
    out = clipped_surrogate(lp, old, adv, **opts, dual_clip=c)
    out.loss.sum().backward()
    lp_plain = new.clone().requires_grad_(True)
    plain = clipped_surrogate(lp_plain, old, adv, **opts)
    torch.where(plain.loss.isfinite(), plain.loss, 0.0).sum().backward()

    high_eps = eps_low if eps_high is None else eps_high
    lr = (new - old).numpy()
    if max_log_ratio is not None:
        lr = np.clip(lr, -max_log_ratio, max_log_ratio)
    want = np.empty_like(lr)
    for i, j in np.ndindex(*lr.shape):
        r, a = math.exp(lr[i, j]), float(adv[i, j])
        surrogate = min(r * a, min(max(r, 1 - eps_low), 1 + high_eps) * a)
        want[i, j] = -(max(surrogate, c * a) if a < 0 else surrogate)
    torch.testing.assert_close(out.loss.detach(), torch.from_numpy(want), rtol=1e-12, atol=0)
    assert bool(out.loss.isfinite().all()) and bool(lp.grad.isfinite().all())

    ratio = np.exp(lr)
    binds = torch.from_numpy((adv.numpy() < 0) & (ratio > c))
    clear = torch.from_numpy(np.abs(np.log(ratio) - math.log(c)) > 1e-9)  # not at a tie
    assert torch.equal(out.dual_clipped[clear], binds[clear])
    assert bool((lp.grad[binds] == 0).all())
    assert torch.equal(lp.grad[~binds & clear], lp_plain.grad[~binds & clear])
    assert torch.equal(out.loss[~binds & clear], plain.loss[~binds & clear])
    assert torch.equal(out.low_clipped, plain.low_clipped)
    assert torch.equal(out.high_clipped, plain.high_clipped)


def test_dual_clip_hand_computation_and_its_metric():
    """ratios 0.5, 1, 2, 4, e^30 with A = -1 and +1, c = 3: A < 0 caps r at 3 (4 and e^30)."""
    ratios = torch.tensor([[0.5, 1.0, 2.0, 4.0, math.exp(30.0)]] * 2, dtype=torch.float64)
    adv = torch.tensor([-1.0, 1.0], dtype=torch.float64)
    out = clipped_surrogate(ratios.log(), torch.zeros_like(ratios), adv, dual_clip=3.0)
    expected = torch.tensor([[0.8, 1.0, 2.0, 3.0, 3.0], [-0.5, -1.0, -1.2, -1.2, -1.2]])
    torch.testing.assert_close(out.loss, expected.double())
    assert out.dual_clipped.tolist() == [[False, False, False, True, True], [False] * 5]
    mask = torch.ones(2, 5, dtype=torch.float64)
    mask[0, 4] = 0  # off the mask: not counted
    res = policy_loss(ratios.log(), torch.zeros_like(ratios), adv, mask, LossConfig(dual_clip=3))
    assert res.metrics["clip_ratio/dual_mean"] == pytest.approx(1 / 9)
    plain = policy_loss(ratios.log(), torch.zeros_like(ratios), adv, mask, LossConfig())
    assert "clip_ratio/dual_mean" not in plain.metrics
    assert LossConfig().dual_clip is None


@pytest.mark.parametrize("bad", [0.5, 1.0, 0.0, -3.0, math.nan, math.inf, -math.inf, True])
def test_a_dual_clip_not_above_one_or_not_finite_is_refused(bad):
    new, old, adv, _ = _batch(2)
    with pytest.raises(ValueError, match=r"dual_clip=.* is invalid: use a finite number > 1"):
        clipped_surrogate(new, old, adv, dual_clip=bad)
    with pytest.raises(ValueError, match=r"^loss\.dual_clip=.*, or None for no dual clip$"):
        LossConfig(dual_clip=bad)
    with pytest.raises(ValueError, match=r"^clip_ratio_c=.*verl\)$"):  # no 'None' where it has none
        check_dual_clip(bad, "clip_ratio_c", off=False)
    with pytest.raises(ValueError, match="clip_ratio_c=None"):
        check_dual_clip(None, "clip_ratio_c", off=False)
