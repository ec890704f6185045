"""bench/reproduce_lm_mdp.py: the pure analysis parts (sparsity measures, SSR/HSR by constraint
count, intervals and Welch's t, the sparsity-growth test, the per-layer sketch, the per-arm
analysis) on synthetic inputs; no model."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location(
    "reproduce_lm_mdp", ROOT / "bench" / "reproduce_lm_mdp.py"
)
rl = importlib.util.module_from_spec(spec)
sys.modules["reproduce_lm_mdp"] = rl
spec.loader.exec_module(rl)
spec = importlib.util.spec_from_file_location(
    "reproduce_lm_rank", ROOT / "bench" / "reproduce_lm_rank.py"
)
rk = importlib.util.module_from_spec(spec)
sys.modules["reproduce_lm_rank"] = rk
spec.loader.exec_module(rk)

finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)
# entries are 0 or of a magnitude whose square is a normal float (subnormals square to 0)
entries = finite.map(lambda v: 0.0 if abs(v) < 1e-6 else v)
vectors = arrays(np.float64, st.integers(2, 200), elements=entries)


@settings(max_examples=200, deadline=None)
@given(vectors, st.floats(0.01, 100.0))
def test_sparsity_measures_are_scale_invariant_and_bounded(x, scale):
    for f in (rl.hoyer, rl.top_share):
        v = f(x)
        assert -1e-9 <= v <= 1 + 1e-9
        assert f(scale * x) == pytest.approx(v, abs=1e-9)
    assert rl.top_share(x, 1.0) == (0.0 if not np.any(x) else pytest.approx(1.0))


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 500), st.integers(0, 499), finite.filter(lambda v: abs(v) > 1e-6))
def test_sparsity_extremes(n, j, value):
    one = np.zeros(n)
    one[j % n] = value
    assert rl.hoyer(one) == pytest.approx(1.0)
    assert rl.top_share(one) == pytest.approx(1.0)
    flat = np.full(n, value) * np.where(np.arange(n) % 2, 1, -1)
    assert rl.hoyer(flat) == pytest.approx(0.0, abs=1e-9)
    assert rl.top_share(flat, 0.01) == pytest.approx(math.ceil(0.01 * n) / n)
    assert rl.hoyer(np.zeros(n)) == 0.0 and rl.top_share(np.zeros(n)) == 0.0


def test_layer_sparsity_matches_numpy_measures():
    torch.manual_seed(0)
    named = [("model.layers.0.a", None), ("model.layers.0.b", None), ("model.embed_tokens", None)]
    ts = [torch.randn(30, 7), torch.randn(50) ** 3, torch.randn(400)]
    out = rk._layer_sparsity(named, ts)
    layer0 = np.concatenate([ts[0].numpy().ravel(), ts[1].numpy()])
    assert out["hoyer"]["layer00"] == pytest.approx(rl.hoyer(layer0), rel=1e-5)
    assert out["top1pct"]["layer00"] == pytest.approx(rl.top_share(layer0), rel=1e-5)
    assert out["hoyer"]["embed"] == pytest.approx(rl.hoyer(ts[2].numpy()), rel=1e-5)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(0, 6)), min_size=1, max_size=40))
def test_ssr_hsr_by_count_from_followed_counts(pairs):
    counts = [c for c, _ in pairs]
    followed = [min(f, c) for c, f in pairs]
    rewards = [f / c for f, c in zip(followed, counts, strict=True)]
    out = rl.by_count(rewards, counts)
    assert out["all"]["ssr"] == pytest.approx(sum(followed) / sum(counts))
    full = [f == c for f, c in zip(followed, counts, strict=True)]
    assert out["all"]["hsr"] == pytest.approx(np.mean(full))
    assert sum(v["prompts"] for k, v in out.items() if k != "all") == len(pairs)
    for k, v in out.items():
        if k != "all":
            c = int(k.split("=")[1])
            sel = [(f, cc) for f, cc in zip(followed, counts, strict=True) if cc == c]
            assert v["ssr"] == pytest.approx(sum(f for f, _ in sel) / (c * len(sel)))


@settings(max_examples=100, deadline=None)
@given(arrays(np.float64, st.integers(2, 12), elements=st.floats(0, 1)))
def test_mean_interval_is_scipy_t_interval(v):
    out = rl.mean_interval(v)
    assert out["mean"] == pytest.approx(v.mean())
    if np.ptp(v) > 1e-12:
        lo, hi = stats.t.interval(0.95, v.size - 1, loc=v.mean(), scale=stats.sem(v))
        assert out["ci"] == pytest.approx([lo, hi], rel=1e-6, abs=1e-9)
        assert out["ci"][0] <= out["mean"] <= out["ci"][1]
    elif np.ptp(v) == 0:  # no spread: undefined, as pgrpo's t_interval says (not [m, m])
        assert out["ci"] is None and rl.show_ci(out["ci"]) == "n/a"


def test_mean_interval_of_one_value_is_undefined():
    assert rl.mean_interval([0.4]) == {"mean": 0.4, "ci": None, "n": 1}


def test_welch_matches_scipy_and_refuses_too_few():
    a, b = [0.3, 0.35, 0.32], [0.25, 0.31, 0.22, 0.28]
    res = stats.ttest_ind(a, b, equal_var=False)
    w = rl.welch(a, b)
    assert w["t"] == pytest.approx(res.statistic) and w["p"] == pytest.approx(res.pvalue)
    assert w["diff"] == pytest.approx(np.mean(a) - np.mean(b))
    assert math.isnan(rl.welch([0.3], b)["p"]) and math.isnan(rl.welch([1, 1], [1, 1])["t"])


def _cells(growth: float, seeds: int = 3, layers: int = 12, noise: float = 0.01, seed: int = 0):
    rng = np.random.default_rng(seed)
    cells = {}
    for s in range(seeds):
        base = rng.uniform(0.2, 0.5, layers)
        for stage, shift in (("start", 0.0), ("end", growth)):
            vals = base + shift + rng.normal(0, noise, layers)
            cells[f"seed{s}/{stage}"] = {
                "sparsity": {"grpo": {"hoyer": {f"layer{i:02d}": v for i, v in enumerate(vals)}}}
            }
    return cells


def test_sparsity_growth_detects_growth_and_not_noise():
    up = rl.sparsity_growth(_cells(0.05), "start", "end")["grpo/hoyer"]
    assert up["layers_growing"] == 12 and up["seeds_growing"] == 3 and up["wilcoxon_p"] < 0.01
    assert up["median_change"] == pytest.approx(0.05, abs=0.02)
    down = rl.sparsity_growth(_cells(-0.05), "start", "end")["grpo/hoyer"]
    assert down["layers_growing"] == 0 and down["seeds_growing"] == 0
    # no growth: over many synthetic repeats the test rejects at about its level
    ps = [
        rl.sparsity_growth(_cells(0.0, seed=k), "start", "end")["grpo/hoyer"]["wilcoxon_p"]
        for k in range(200)
    ]
    assert 0.0 <= np.mean(np.array(ps) < 0.05) <= 0.1
    assert rl.sparsity_growth({}, "start", "end") == {"seeds": []}


def test_layer_of_groups_smollm2_names():
    assert rk.layer_of("model.layers.7.mlp.up_proj.weight") == "layer07"
    assert rk.layer_of("model.embed_tokens.weight") == "embed"
    assert rk.layer_of("lm_head.weight") == "embed"
    assert rk.layer_of("model.norm.weight") == "other"


def test_layer_sketch_preserves_inner_products_per_layer():
    torch.manual_seed(0)
    shapes = {"model.layers.0.q": (40, 50), "model.layers.1.q": (3000,), "model.embed": (60, 20)}
    named = [(n, torch.zeros(s)) for n, s in shapes.items()]
    sk = rk.LayerSketch(named, dim=4096, seed=3)
    a = [torch.randn(s) for s in shapes.values()]
    b = [x + 0.5 * torch.randn(x.shape) for x in a]
    sa, sb = sk(a), sk(b)
    for i, g in enumerate(["layer00", "layer01", "embed"]):
        exact = float((a[i] * b[i]).sum())
        approx = float((sk.block(sa[None], g) * sk.block(sb[None], g)).sum())
        assert approx == pytest.approx(exact, rel=0.15)
    assert sa.shape == (3 * 4096,) and torch.equal(sk(a), sa)  # deterministic


def _eval(rewards, counts):
    return {"rewards": rewards, "counts": counts, "by_count": rl.by_count(rewards, counts)}


def test_mdp_analysis_arms_intervals_and_welch():
    counts = [1, 2, 3, 3]
    cells, given = {}, {"mdp_grpo": [], "grpo": []}
    for seed in range(3):
        for arm, r in (("mdp_grpo", [1.0, 0.5, 2 / 3, 1.0]), ("grpo", [0.0, 0.5, 1 / 3, 1.0])):
            r = [min(1.0, x + 0.01 * seed) if x < 1 else x for x in r]
            given[arm].append(r)
            cells[f"{arm}/seed{seed}"] = {
                "arm": arm,
                "seed": seed,
                "train_seconds": 10.0,
                "train_reward": [0.1, 0.2, 0.3],
                "zero_variance_rate": 0.5 if arm == "grpo" else 0.2,
                "eval": {"generated": _eval(r, counts)},
            }
    a = rl.mdp_analysis(cells)
    mdp, grpo = a["arms"]["mdp_grpo"], a["arms"]["grpo"]
    assert mdp["generated/all/hsr"]["mean"] == pytest.approx(0.5)
    assert grpo["generated/all/hsr"]["mean"] == pytest.approx(0.25)
    assert mdp["generated/C=1/ssr"]["mean"] == pytest.approx(1.0)
    w = a["welch_mdp_minus_grpo"]
    assert w["generated/hsr"]["diff"] == pytest.approx(0.25)
    assert w["zero_variance_rate"]["diff"] == pytest.approx(-0.3)
    paired = a["prompt_paired_mdp_minus_grpo"]["generated/reward"]
    expected = np.mean(np.mean(given["mdp_grpo"], 0) - np.mean(given["grpo"], 0))
    assert paired["n"] == 4 and paired["mean"] == pytest.approx(expected)
    lo, hi = mdp["generated/all/reward_prompt_ci"]
    assert lo < np.mean([1.0, 0.5, 2 / 3, 1.0]) + 0.01 < hi


def test_zero_variance_rate_is_the_step_mean():
    hist = [{"frac_reward_zero_std": v} for v in (0.5, 0.25, 0.0, 0.25)]
    assert rl.zero_variance_rate(hist) == pytest.approx(0.25)


def test_weight_ranks_of_a_rank_two_gradient_and_their_summary():
    q, _ = torch.linalg.qr(torch.randn(40, 2, dtype=torch.float64))
    r, _ = torch.linalg.qr(torch.randn(30, 2, dtype=torch.float64))
    two = (q @ r.T).float()  # two equal singular values
    named = [
        ("model.layers.3.self_attn.o_proj.weight", None),
        ("model.layers.3.input_layernorm.weight", None),
        ("model.embed_tokens.weight", None),
    ]
    out = rk._weight_ranks(named, [two, torch.randn(40), torch.randn(50, 8)])
    assert list(out) == ["layer03/self_attn.o_proj"]  # 2-D decoder weights only
    m = out["layer03/self_attn.o_proj"]
    assert m["rank/entropy"] == pytest.approx(2.0, rel=1e-4)
    assert m["rank/stable"] == pytest.approx(2.0, rel=1e-4) and m["min_dim"] == 30
    assert m["rank/participation_ratio"] == pytest.approx(2.0, rel=1e-4)
    cells = {f"seed{s}/start": {"weight_grad_ranks": {"grpo": out}} for s in range(2)}
    cells["seed0/end"] = {}
    summary = rk.weight_rank_summary(cells)
    assert summary["start"]["grpo"]["cells"] == 2 and "end" not in summary
    assert summary["start"]["grpo"]["rank/entropy"]["mean"] == pytest.approx(2.0, rel=1e-4)


def test_ablation_arms_are_compared_with_the_recipe():
    counts = [1, 2]

    def cell(arm, seed, r, zv):
        ev = {"generated": _eval(r, counts)}
        return {
            "arm": arm,
            "seed": seed,
            "train_seconds": 1.0,
            "train_reward": [0.1],
            "zero_variance_rate": zv,
            "eval": ev,
        }

    cells = {}
    for s in range(2):
        cells[f"mdp_grpo/seed{s}"] = cell("mdp_grpo", s, [1.0, 0.5], 0.5 + 0.1 * s)
        cells[f"no_multitemp/seed{s}"] = cell("no_multitemp", s, [0.0, 0.5], 0.2 + 0.1 * s)
    a = rl.mdp_analysis(cells)
    assert a["welch_mdp_minus_grpo"] == {}  # no plain GRPO arm: no such comparison
    w = a["welch_ablation_minus_mdp_grpo"]["no_multitemp"]
    assert w["zero_variance_rate"]["diff"] == pytest.approx(-0.3)
    assert w["generated/hsr"]["diff"] == pytest.approx(-0.5)


def test_unknown_arm_is_refused_with_the_choices():
    args = rl.parser().parse_args(["--part", "mdp", "--arms", "grpo,nope"])
    with pytest.raises(SystemExit, match="nope.*choose from"):
        rl.mdp_arms(args)
