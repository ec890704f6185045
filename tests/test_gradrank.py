"""Effective-rank definitions (pure functions) and the per-rollout gradient matrix."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pgrpo.core.advantages import compute_advantages
from pgrpo.measure.rank import (
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


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(2, 48),
    p=st.integers(200, 6000),
    r=st.integers(1, 4),
    tall=st.booleans(),
    seed=st.integers(0, 10_000),
)
def test_numerical_rank_of_an_exactly_low_rank_matrix_is_its_rank(n, p, r, tall, seed):
    """rollouts x parameters is wide (tall transposed): the Gram route returned the zero
    singular values at ~1e-8 s_max, on the 1e-8 cut, so an exactly rank-2 32 x 4096 matrix read
    rank 3 or 4 (review 2026-12-03); the QR route returns them at round-off, as a full SVD."""
    g = torch.Generator().manual_seed(seed)
    r = min(r, n)
    m = torch.randn(n, r, generator=g, dtype=torch.float64) @ torch.randn(
        r, p, generator=g, dtype=torch.float64
    )
    res = effective_ranks(m.T if tall else m)
    assert res.metrics["rank/numerical"] == r
    assert max(res.singular_values[r:], default=0.0) <= 1e-12 * res.singular_values[0]


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


# ---------------------------------------------------------------------------------------------
# per-rollout gradient matrix
# ---------------------------------------------------------------------------------------------

from pgrpo.measure.gradrank import GradRankConfig, countsketch, gradient_rank  # noqa: E402


def test_countsketch_is_deterministic_and_preserves_inner_products():
    g = torch.Generator().manual_seed(0)
    a = [torch.randn(3000, generator=g), torch.randn(40, 50, generator=g)]
    b = [x + 0.5 * torch.randn(x.shape, generator=g) for x in a]
    sa, sb = countsketch(a, 4096, seed=3), countsketch(b, 4096, seed=3)
    assert torch.equal(sa, countsketch(a, 4096, seed=3))
    exact = sum(float((x.double() * y.double()).sum()) for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(float((x.double() ** 2).sum()) for x in a))
    assert float(sa @ sb) == pytest.approx(exact, rel=0.1)
    assert float(sa.norm()) == pytest.approx(norm, rel=0.05)
    assert not torch.equal(sa, countsketch(a, 4096, seed=4))


def test_gradient_rank_zero_sum_vs_controls():
    """Outcome-clustered scores: zero-sum GRPO rows span <= 2 directions per batch of identical
    clusters; degenerate groups give zero rows; the random control does not vanish."""
    g = torch.Generator().manual_seed(2)
    s_c, s_w = torch.randn(2, 300, generator=g, dtype=torch.float64)
    rewards = [1, 0, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1]  # groups of 4: mixed, all-fail, all-pass
    scores = torch.stack(
        [(s_c if r else s_w) + 1e-3 * torch.randn(300, generator=g) for r in rewards]
    )
    cfg = GradRankConfig(estimators=("grpo", "sign"), projection_dim=0)
    res = gradient_rank(scores, rewards, 4, cfg)
    assert res.ranks["grpo"]["nonzero_rows"] == 4  # only the mixed group carries signal
    assert res.ranks["grpo"]["rank/energy_99"] <= 2
    assert res.ranks["grpo"]["group/nonzero_groups"] == 1
    assert res.ranks["sign"]["nonzero_rows"] == 12  # sign: every rollout carries signal
    assert set(res.ranks) == {"grpo", "sign"}  # controls are draws, not a row of their own
    assert set(res.controls["grpo"]) == {"random", "support", "permutation"}
    with pytest.raises(ValueError, match="rewards for"):
        gradient_rank(scores, rewards[:-4], 4, cfg)
    with pytest.raises(KeyError, match="valid names"):
        GradRankConfig(estimators=("nope",))


def _tiny_rollout():
    from pgrpo.train.config import ModelConfig
    from pgrpo.train.generation import sample
    from pgrpo.train.policies import load_policy

    torch.manual_seed(0)
    policy = load_policy(ModelConfig(name="tiny", tiny_warmup_steps=0), seed=0)
    rollout = sample(
        policy, ["1 + 2 =", "3 + 4 ="], group_size=4, temperatures=[1.0] * 4, max_new_tokens=6
    )
    return policy, rollout


def test_sketched_matches_exact_gradients_on_tiny_model():
    from pgrpo.measure.gradrank import score_gradients

    policy, rollout = _tiny_rollout()
    params = policy.trainable_parameters()
    exact = score_gradients(policy.model, rollout, params, projection_dim=0, seed=0)
    assert exact.shape == (8, sum(p.numel() for p in params))
    # row 0 equals autograd of the summed completion log-prob computed another way
    from pgrpo.train.logprobs import completion_scores

    sc = completion_scores(
        policy.model,
        rollout.input_ids[:1],
        rollout.attention_mask[:1],
        rollout.prompt_len,
        rollout.temperatures[:1],
    )
    total = (sc.log_probs * rollout.completion_mask[:1]).sum()
    ref = torch.cat([g.reshape(-1) for g in torch.autograd.grad(total, params)]).double()
    assert torch.allclose(exact[0], ref, rtol=1e-4, atol=1e-6)
    sketched = score_gradients(policy.model, rollout, params, projection_dim=8192, seed=0)
    s_exact, s_sk = singular_values(exact), singular_values(sketched)
    assert torch.allclose(s_sk, s_exact, rtol=0.1)
    rewards = [1, 0, 0, 1, 0, 0, 1, 1]
    cfg = GradRankConfig(projection_dim=0)
    a = gradient_rank(exact, rewards, 4, cfg).ranks
    b = gradient_rank(sketched, rewards, 4, cfg).ranks
    for name in ("grpo", "sign", "dual_anchor"):
        assert b[name]["rank/entropy"] == pytest.approx(a[name]["rank/entropy"], rel=0.1)


def test_cli_gradrank_json_on_tiny_model():
    import json

    from typer.testing import CliRunner

    from pgrpo.cli import _load_commands, app

    _load_commands()
    args = [
        "gradrank",
        "--model",
        "tiny",
        "--tiny-warmup-steps",
        "0",
        "--prompts",
        "2",
        "--group-size",
        "4",
        "--max-new-tokens",
        "6",
        "--projection-dim",
        "1024",
        "--json",
    ]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert set(out["ranks"]) == {"grpo", "sign", "dual_anchor"}
    assert set(out["controls"]["grpo"]) == {"random", "support", "permutation"}
    assert len(out["rewards"]) == 8 and out["metrics"]["projection_dim"] == 1024
    sign = out["ranks"]["sign"]
    assert sign["nonzero_rows"] == 8 and 1.0 <= sign["rank/entropy"] <= 8.0


def test_lora_adapter_gradients_on_tiny_model():
    """--lora-rank: rows are gradients of the LoRA adapter only (the frozen base gets none)."""
    from pgrpo.measure.gradrank import score_gradients
    from pgrpo.train.config import ModelConfig
    from pgrpo.train.generation import sample
    from pgrpo.train.policies import load_policy

    torch.manual_seed(0)
    policy = load_policy(ModelConfig(name="tiny", tiny_warmup_steps=0, lora_rank=4), seed=0)
    params = policy.trainable_parameters()
    n_total = sum(p.numel() for p in policy.model.parameters())
    n_lora = sum(p.numel() for p in params)
    assert 0 < n_lora < n_total / 2
    rollout = sample(
        policy, ["1 + 1 =", "2 + 2 ="], group_size=3, temperatures=[1.0] * 3, max_new_tokens=5
    )
    rows = score_gradients(policy.model, rollout, params, projection_dim=0, seed=0)
    assert rows.shape == (6, n_lora) and torch.isfinite(rows).all()
    res = gradient_rank(rows, [1, 0, 0, 1, 1, 1], 3, GradRankConfig(projection_dim=0))
    assert res.ranks["grpo"]["nonzero_rows"] == 3  # the all-pass group carries nothing


def test_cli_gradrank_text_says_when_an_estimator_has_no_gradient():
    """An all-fail batch (the untrained tiny model fails every completion) zeroes GRPO's
    advantages: its ranks read 0, which the text output now explains; counts print as integers."""
    from typer.testing import CliRunner

    from pgrpo.cli import _load_commands, app

    _load_commands()
    args = ["gradrank", "--model", "tiny", "--tiny-warmup-steps", "0", "--prompts", "2",
            "--group-size", "4", "--max-new-tokens", "4", "--projection-dim", "256"]  # fmt: skip
    res = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "note: grpo gives every rollout a zero advantage" in text
    assert "note: sign gives" not in text  # sign's A = 2r - 1 is never zero
    assert "note: sign: every rollout's |A| is the same" in text  # so its ranks are S's own
    row = next(line for line in res.output.splitlines() if "│ sign" in line)
    assert row.rstrip(" │").endswith("8")  # nonzero_rows as a count, not 8.00


# ---------------------------------------------------------------------------------------------
# session 39: control draws, exact rows by default, the sketch's distortion, early checks
# ---------------------------------------------------------------------------------------------


def test_energy_rank_of_equal_values_is_the_ceiling_of_q_n():
    """The module docstring said every definition gives n for n equal values; the q-energy rank
    gives ceil(q n) (docstring fix; this passes on the old code too)."""
    for n in (5, 10, 32):
        for q in (0.90, 0.95, 0.99):
            assert energy_rank(torch.ones(n), q) == math.ceil(q * n - 1e-9)


def _degenerate_batch(seed: int = 3):
    """4 groups of 4 (2 mixed, 2 all-fail) on random scores: GRPO zeroes half the rows."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(16, 500, generator=g, dtype=torch.float64)
    rewards = [1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0]
    return scores, rewards


def test_controls_are_many_seeded_draws_with_the_estimators_support():
    """One N(0, 1) draw over all N rows was the only control: GRPO's zeroed rows alone make it
    look concentrated. Now 200 seeded draws each of random, support-matched (the estimator's
    non-zero rows) and within-group-permuted advantages, summarised with a 5-95% interval."""
    scores, rewards = _degenerate_batch()
    cfg = GradRankConfig(estimators=("grpo",), projection_dim=0, seed=1)
    res = gradient_rank(scores, rewards, 4, cfg)
    grpo = res.ranks["grpo"]["rank/entropy"]
    for kind, summary in res.controls["grpo"].items():
        s = summary["rank/entropy"]
        assert s["p05"] <= s["mean"] <= s["p95"] and 0 <= s["share_at_or_below"] <= 1, kind
    random, support = res.controls["grpo"]["random"], res.controls["grpo"]["support"]
    assert support["rank/numerical"]["p95"] <= res.ranks["grpo"]["nonzero_rows"] == 8
    assert random["rank/entropy"]["mean"] > support["rank/entropy"]["mean"]
    assert (
        random["rank/entropy"]["share_at_or_below"]
        < 0.05
        < support["rank/entropy"]["share_at_or_below"]
    )  # against all rows GRPO looks concentrated; against its own support it does not
    assert grpo == pytest.approx(effective_ranks(
        compute_advantages("grpo", torch.tensor(rewards, dtype=torch.float64), group_size=4)
        .advantages[:, None] * scores).metrics["rank/entropy"])  # fmt: skip
    again = gradient_rank(scores, rewards, 4, cfg).controls
    assert again == res.controls  # seeded
    assert gradient_rank(scores, rewards, 4, replace(cfg, seed=2)).controls != res.controls


def test_control_ranks_on_the_core_equal_those_on_the_scores():
    """Each draw's ranks come from the [N, N] core of S (one QR), not from [N, D] again."""
    from pgrpo.measure.rank_controls import control_ranks, permuted_draws, score_core

    scores, rewards = _degenerate_batch()
    adv = torch.tensor(rewards, dtype=torch.float64) - 0.5
    draws = permuted_draws(adv, 4, 5, torch.Generator().manual_seed(0))
    assert sorted(draws[0].tolist()) == sorted(adv.tolist())
    on_core = control_ranks(score_core(scores), draws)
    on_scores = control_ranks(scores, draws)
    for key, values in on_core.items():
        assert values == pytest.approx(on_scores[key], rel=1e-9), key


def test_a_constant_magnitude_advantage_is_said_to_be_the_score_matrix():
    """With 0/1 rewards sign's A = +-1: flipping rows keeps the singular values, so its ranks
    are S's own; the docs read 'sign ... as spread as the control' as about the estimator."""
    scores, rewards = _degenerate_batch()
    res = gradient_rank(scores, rewards, 4, GradRankConfig(estimators=("grpo", "sign")))
    assert res.ranks["sign"]["abs_uniform"] == 1.0 and res.ranks["grpo"]["abs_uniform"] == 0.0
    assert res.ranks["sign"]["rank/entropy"] == pytest.approx(res.metrics["scores/rank/entropy"])
    (note,) = res.notes
    assert note.startswith("sign:") and "say nothing about the estimator" in note


def test_exact_rows_are_the_default_where_they_fit():
    """The default sketched to D = 4096 even for 4,352 LoRA parameters (P < D)."""
    from pgrpo.errors import UserError
    from pgrpo.measure.gradrank import resolve_projection_dim

    assert resolve_projection_dim(None, 32, 4_352) == 0
    assert resolve_projection_dim(None, 32, 98_752) == 0
    assert resolve_projection_dim(None, 32, 134_515_008) == 4096
    assert resolve_projection_dim(1024, 32, 98_752) == 1024
    with pytest.raises(UserError, match="not below the 4,352 trainable parameters"):
        resolve_projection_dim(8192, 32, 4_352)


def test_the_sketch_distortion_matches_a_flat_spectrum():
    """A CountSketch to D inflates the top singular value of a flat spectrum: stable rank x
    1 / (1 + sqrt(N/D))^2 (the reported factor), participation ratio x 1 / (1 + N/D)."""
    from pgrpo.measure.gradrank import sketch_distortion

    n, p, dim = 16, 20_000, 256
    q, _ = torch.linalg.qr(torch.randn(p, n, generator=torch.Generator().manual_seed(0),
                                       dtype=torch.float64))  # fmt: skip
    sketched = torch.stack([countsketch([row], dim, seed=1) for row in q.T])
    got = effective_ranks(sketched).metrics
    factors = sketch_distortion(n, dim)
    assert got["rank/stable"] == pytest.approx(n * factors["sketch/stable_rank_factor"], rel=0.15)
    assert got["rank/participation_ratio"] == pytest.approx(
        n * factors["sketch/participation_factor"], rel=0.05
    )
    assert sketch_distortion(n, 0) == {}


def _gradrank(*args: str, **env: str):
    from typer.testing import CliRunner

    from pgrpo.cli import _load_commands, app

    _load_commands()
    base = ["gradrank", "--model", "tiny", "--tiny-warmup-steps", "0", "--prompts", "2",
            "--group-size", "4", "--max-new-tokens", "4"]  # fmt: skip
    return CliRunner().invoke(app, [*base, *args], env={"COLUMNS": "200", **env})


def test_bad_projection_dims_fail_before_the_model_loads(monkeypatch):
    """--projection-dim 1e12 failed late with 'out of memory; lower grpo.batch_prompts ...'
    (keys gradrank does not take)."""
    import pgrpo.train.rollout as ro

    def no_loading(*a, **k):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(ro, "load_task_and_policy", no_loading)
    for dim, words in (("1000000000000", "more than half this machine's"), ("4", "below the 8")):
        res = _gradrank("--projection-dim", dim)
        assert res.exit_code == 2, res.output
        assert f"--projection-dim {dim}" in res.output and words in res.output
        assert len(res.output.strip().splitlines()) == 1
    res = _gradrank("--estimators", "grpo,grpo")
    assert res.exit_code == 2 and "--estimators grpo,grpo names grpo more than once" in res.output


def test_a_repeated_estimator_is_refused_by_one_check(monkeypatch):
    """Review (session 40): `pgrpo gradrank --estimators` and `GradRankConfig` each had their own
    copy of the repeated-name check; both now call `check_estimator_names`, same words."""
    from cli_checks import one_line_error

    import pgrpo.measure.gradrank as gr
    import pgrpo.train.rollout as ro
    from pgrpo.errors import UserError

    with pytest.raises(UserError) as err:
        GradRankConfig(estimators=("grpo", "sign", "grpo"))
    assert str(err.value) == "estimators names grpo more than once; give each once"
    labels = []
    check = gr.check_estimator_names
    monkeypatch.setattr(
        gr,
        "check_estimator_names",
        lambda names, label: labels.append(label) or check(names, label),
    )
    monkeypatch.setattr(ro, "load_task_and_policy", lambda *a, **k: pytest.fail("model loaded"))
    res = _gradrank("--estimators", "grpo,sign,grpo")
    one_line_error(res, "--estimators grpo,sign,grpo names grpo more than once; give each once")
    assert labels == ["--estimators grpo,sign,grpo"]


def test_cli_defaults_to_exact_rows_for_lora_and_reports_a_sketchs_distortion():
    import json

    res = _gradrank("--lora-rank", "2", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["metrics"]["projection_dim"] == 0 and out["metrics"]["n_params"] < 10_000
    assert "sketch/stable_rank_factor" not in out["metrics"]
    too_wide = _gradrank("--lora-rank", "2", "--projection-dim", "8192")
    assert too_wide.exit_code == 2 and "not below the" in too_wide.output
    text = " ".join(_gradrank("--projection-dim", "512").stdout.split())
    assert "sketch distortion for N=8, D=512" in text and "x0.790" in text  # 1 / 1.125^2
    assert "p = share of draws at or below the estimator" in text
