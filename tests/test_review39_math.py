"""Review 39 (2026-12-06): defects a hostile review found in the GRPO math and reward handling.
Each test of a defect failed on the code before its fix (docs/core.md, docs/trainer.md,
docs/tasks.md); three guard what had to stay and pass on both:
`test_positive_eps_is_bit_identical_where_every_group_has_spread`,
`test_eps_zero_and_alpha_at_the_ends_are_accepted`, `test_ids_of_one_kind_keep_their_dense_ids`.

1. A zero-spread group's normalised advantage is exactly 0 whatever eps (eps = 0 gave NaN, a NaN
   loss); eps < 0, alpha outside [0, 1] and other values outside an estimator's documented
   domain are refused in one line, through the config and `pgrpo train` too.
2. A completion that cannot be scored gets the low end of the run's reward range (it scored 0,
   above a wrong answer of a -1/+1 task); the trainer passes the range to `sign` and to the
   all-pass / all-fail split of `group_stats`.
3. Group ids are told apart by exact equality (1 and '1' were merged; tuple ids crashed).
"""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from cli_checks import one_line_error
from conftest import TINY_CLI_ARGS
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pgrpo import compute_advantages
from pgrpo.cli import _load_commands, app
from pgrpo.core.degeneracy import group_stats
from pgrpo.core.groups import _dense_ids, group_moments, make_groups, scale_by_group
from pgrpo.core.losses import LossConfig, policy_loss
from pgrpo.tasks import TASKS, score_completions
from pgrpo.tasks.arithmetic import ArithmeticTask
from pgrpo.train import rollout
from pgrpo.train.config import GRPOConfig, load_config
from pgrpo.train.rollout import ScoredBatch, batch_advantages, estimator_options

_load_commands()
runner = CliRunner()
SETTINGS = settings(max_examples=80, deadline=None)
SCALED = ("grpo", "batch_std", "dual_anchor")  # the estimators with an eps


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("PGRPO_CACHE", str(tmp_path_factory.getbasetemp() / "pgrpo-cache"))


# ---------------------------------------------------------------------------------------------
# 1. eps: exact zeros on zero-spread groups, bit-identical elsewhere, domains refused
# ---------------------------------------------------------------------------------------------


@st.composite
def batches(draw, spread_everywhere=False):
    """(rewards [B * G], group_ids or None, G): B groups of G, some constant (unless
    `spread_everywhere`), float32 or float64, contiguous or shuffled with arbitrary ids."""
    g = draw(st.integers(2, 9))
    b = draw(st.integers(1, 6))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    level = draw(st.floats(-1e3, 1e3, allow_nan=False))
    r = (level + rng.normal(size=(b, g)) * draw(st.sampled_from([1e-3, 1.0, 50.0]))).astype(dtype)
    if not spread_everywhere:
        constant = rng.random(b) < 0.5
        r[constant] = r[constant][:, :1]  # all-equal groups (an all-pass or all-fail group)
    ids = None
    if draw(st.booleans()):
        ids = np.repeat(rng.permutation(1000)[:b] * 3 - 50, g)
        order = rng.permutation(b * g)
        return r.reshape(-1)[order], ids[order], g
    return r.reshape(-1), ids, g


def _groups_kw(ids, g):
    return {"group_size": g} if ids is None else {"group_ids": ids}


def _zero_spread(r, ids, g):
    """[N] bool: the rollout's group has all rewards equal."""
    dense = np.repeat(np.arange(r.size // g), g) if ids is None else _dense_ids(ids)[0]
    lo = np.full(dense.max() + 1, np.inf)
    hi = np.full(dense.max() + 1, -np.inf)
    np.minimum.at(lo, dense, r.astype(np.float64))
    np.maximum.at(hi, dense, r.astype(np.float64))
    return (lo == hi)[dense]


@SETTINGS
@given(batches(), st.sampled_from([0.0, 1e-6, 1e-4]))
def test_a_zero_spread_group_gets_exactly_zero_whatever_eps(batch, eps):
    """eps = 0 gave 0/0 = NaN on every all-equal group (grpo, dual_anchor) and on a batch of
    equal rewards (batch_std)."""
    r, ids, g = batch
    flat = _zero_spread(r, ids, g)
    kw = _groups_kw(ids, g)
    for name in ("grpo", "dual_anchor"):
        opts = {"num_constraints": 3, "transform": None} if name == "dual_anchor" else {}
        a = compute_advantages(name, r, eps=eps, **kw, **opts).advantages
        assert np.all(np.isfinite(a))
        if name == "grpo":
            assert np.all(a[flat] == 0.0)
        else:  # z = 0: only the absolute anchor, alpha (r - 1/2) / sigma_goal, is left
            delta = (r[flat].astype(np.float64) - 0.5) * 2 * math.sqrt(3)
            np.testing.assert_allclose(a[flat], 0.2 * delta, rtol=1e-5, atol=1e-6)
    same = np.full_like(r, r[0])
    b = compute_advantages("batch_std", same, eps=eps, **kw).advantages
    assert np.all(b == 0.0)


@SETTINGS
@given(batches(), st.floats(0.05, 20.0), st.floats(-100.0, 100.0))
def test_eps_zero_is_shift_and_scale_invariant_beside_zero_spread_groups(batch, scale, shift):
    """docs/core.md: grpo with eps = 0 is shift and scale invariant; the old test kept to
    batches without an all-equal group, where eps = 0 did not give NaN."""
    r, ids, g = batch
    r = r.astype(np.float64)
    kw = _groups_kw(ids, g)
    spread = ~_zero_spread(r, ids, g)
    a = compute_advantages("grpo", r, eps=0.0, **kw).advantages
    b = compute_advantages("grpo", scale * r + shift, eps=0.0, **kw).advantages
    assert np.all(a[~spread] == 0.0) and np.all(b[~spread] == 0.0)
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def _old_standardised(r, ids, g, eps, unbiased):
    """The formula before the fix, (r - mu) * (1 / (sigma + eps)), from the unchanged groups
    module."""
    t = torch.from_numpy(r.copy())
    groups = make_groups(t.numel(), **_groups_kw(ids, g))
    m = group_moments(t, groups, unbiased=unbiased)
    return scale_by_group(m.centered, 1.0 / (m.std + eps), groups, inplace=True).numpy()


@SETTINGS
@given(batches(spread_everywhere=True), st.floats(1e-9, 1.0), st.booleans())
def test_positive_eps_is_bit_identical_where_every_group_has_spread(batch, eps, unbiased):
    r, ids, g = batch
    assume(not _zero_spread(r, ids, g).any())
    kw = _groups_kw(ids, g)
    got = compute_advantages("grpo", r, eps=eps, unbiased=unbiased, **kw).advantages
    assert np.array_equal(got, _old_standardised(r, ids, g, eps, unbiased))
    # dual_anchor's relative anchor: alpha = 0 and no transform leave z alone, bit for bit
    z = compute_advantages(
        "dual_anchor", r, eps=eps, alpha=0.0, transform=None, num_constraints=2, **kw
    ).advantages
    assert np.array_equal(z, _old_standardised(r, ids, g, eps, unbiased=False))
    t = torch.from_numpy(r.copy())
    m = group_moments(t, make_groups(t.numel(), **kw), with_std=False)
    sigma = t.std(correction=1 if unbiased else 0)
    old_batch = (m.centered / (sigma + eps)).numpy()
    new_batch = compute_advantages("batch_std", r, eps=eps, unbiased=unbiased, **kw).advantages
    assert np.array_equal(new_batch, old_batch)


def test_eps_zero_with_an_all_pass_group_gives_a_finite_loss():
    """The review's case: one all-pass group made the loss NaN."""
    r = np.array([0.8, 0.8, 0.8, 1.0, 1, 1, 1, 1], dtype=np.float32)
    a = compute_advantages("grpo", r, group_size=4, eps=0).advantages
    np.testing.assert_allclose(a, [-0.5, -0.5, -0.5, 1.5, 0, 0, 0, 0], atol=1e-6)
    lp = torch.zeros(8, 3, requires_grad=True)
    loss = policy_loss(lp, lp.detach(), torch.from_numpy(a), torch.ones(8, 3), LossConfig()).loss
    loss.backward()
    assert math.isfinite(float(loss.detach())) and bool(torch.isfinite(lp.grad).all())


@pytest.mark.parametrize(
    ("name", "options", "needle"),
    [
        ("grpo", {"eps": -1e-4}, "eps must be a finite number >= 0"),
        ("batch_std", {"eps": -1e-4}, "eps must be a finite number >= 0"),
        ("dual_anchor", {"eps": -1e-6}, "eps must be a finite number >= 0"),
        ("grpo", {"eps": math.nan}, "eps must be a finite number >= 0"),
        ("grpo", {"eps": math.inf}, "eps must be a finite number >= 0"),
        ("grpo", {"eps": True}, "eps must be a finite number >= 0"),
        ("grpo", {"unbiased": "no"}, "unbiased must be true or false"),
        ("dual_anchor", {"alpha": 1.5}, "alpha must be a number in [0, 1]"),
        ("dual_anchor", {"alpha": -0.1}, "alpha must be a number in [0, 1]"),
        ("dual_anchor", {"goal_mean": math.nan}, "goal_mean must be a finite number or 'max_mu'"),
        ("sign", {"reward_range": (1, 1)}, "reward_range must be (lo, hi)"),
    ],
)
def test_values_outside_an_option_domain_are_refused(name, options, needle):
    """eps = -1e-4 flipped the sign of the advantages of groups with std < 1e-4; alpha = 1.5
    gave a negative weight to the relative anchor; both ran silently."""
    r = np.array([0.0, 0.0, 0.0, 1e-5, 0.0, 1.0, 0.0, 1.0])
    extra = {"num_constraints": 1} if name == "dual_anchor" else {}
    with pytest.raises(ValueError, match=f"advantage estimator {name!r}: ") as info:
        compute_advantages(name, r, group_size=4, **options, **extra)
    assert needle in str(info.value) and "got " in str(info.value)
    with pytest.raises(ValueError, match="grpo.advantage_options=.* is invalid: "):
        GRPOConfig(advantage=name, advantage_options=options, group_size=4)


def test_eps_zero_and_alpha_at_the_ends_are_accepted():
    for name in SCALED:
        GRPOConfig(advantage=name, advantage_options={"eps": 0})
    GRPOConfig(advantage="dual_anchor", advantage_options={"alpha": 0})
    GRPOConfig(advantage="dual_anchor", advantage_options={"alpha": 1.0})


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (["grpo.advantage_options.eps=-1e-4"], "eps must be a finite number >= 0"),
        (["grpo.advantage=dual_anchor", "grpo.advantage_options.alpha=1.5"],
         "alpha must be a number in [0, 1]"),
        (["grpo.advantage=batch_std", "grpo.advantage_options.eps=.nan"],
         "eps must be a finite number >= 0"),
    ],
)  # fmt: skip
def test_pgrpo_train_refuses_a_bad_option_value_in_one_line(tmp_path, overrides, needle):
    args = ["train", *TINY_CLI_ARGS, *overrides, "steps=1", f"run.output_dir={tmp_path}"]
    line = one_line_error(runner.invoke(app, args), needle, "grpo.advantage_options")
    assert "got " in line
    assert list(tmp_path.iterdir()) == []  # refused before anything was written


def test_pgrpo_train_with_eps_zero_trains_through_zero_spread_groups(tmp_path):
    """eps = 0 made every zero-spread group's advantages NaN, so the loss was NaN."""
    args = [
        "train", *TINY_CLI_ARGS, "grpo.advantage_options.eps=0", "steps=2", "forecast_every=0",
        f"run.output_dir={tmp_path}", "run.name=eps0", "--json",
    ]  # fmt: skip
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    from pgrpo.train.log import read_metrics

    log = read_metrics(tmp_path / "eps0")
    assert any(row["frac_reward_zero_std"] > 0 for row in log)  # the case that gave NaN
    assert all(math.isfinite(row["loss"]) for row in log)
    assert all(math.isfinite(row["advantages/abs_max"]) for row in log)


# ---------------------------------------------------------------------------------------------
# 2. Rewards outside [0, 1]: failures at the range's low end, the range passed to sign and to
#    the all-pass / all-fail split
# ---------------------------------------------------------------------------------------------


class SignedArithmetic(ArithmeticTask):
    """Arithmetic with rewards -1 (wrong) / +1 (right); the reward raises on a completion with a
    '9' in it and returns NaN for one with a '7' (so a batch has failures)."""

    name = "arithmetic_signed_review39"
    reward_range = (-1.0, 1.0)

    def reward(self, completion, example):
        if "9" in completion:
            raise RuntimeError("checker failed")
        if "7" in completion:
            return math.nan
        return 2.0 * super().reward(completion, example) - 1.0


if SignedArithmetic.name not in TASKS:
    TASKS.add(SignedArithmetic.name, SignedArithmetic)


class _PlusMinus:
    """The review's task: +1 for '42', -1 otherwise; 'crash' raises, 'nan' gives NaN, 'none'
    a non-number, 'slow' sleeps past the timeout."""

    name = "pm1"
    reward_range = (-1.0, 1.0)
    reward_is_fast = True  # scored in a forked child, not the worker (this module is no package)

    def prompt(self, example):
        return "What is 6 x 7?"

    def reward(self, completion, example):
        if completion == "crash":
            raise RuntimeError("checker failed")
        if completion == "slow":
            time.sleep(5)
        return {"nan": math.nan, "none": None}.get(completion, 1.0 if completion == "42" else -1.0)


class _Unranged(_PlusMinus):
    reward_range = None


@pytest.mark.parametrize("isolation", ["inline", "signal", "fork"])
def test_a_completion_that_cannot_be_scored_gets_the_low_end_of_the_range(isolation):
    """A crash scored 0.0 on a -1/+1 task, above the wrong answers: grpo advantages
    [-0.783, -0.783, 0.261, 1.305] for rewards [-1, -1, crash, 1] reinforced the crash."""
    texts = ["7", "13", "crash", "42", "nan", "none"]
    s = score_completions(_PlusMinus(), texts, [{}] * 6, isolation=isolation)
    assert s.rewards == [-1.0, -1.0, -1.0, 1.0, -1.0, -1.0] and s.errors == 3
    a = compute_advantages("grpo", np.array(s.rewards[:4]), group_size=4).advantages
    np.testing.assert_allclose(a, [-0.5, -0.5, -0.5, 1.5], atol=1e-3)
    timed = score_completions(_PlusMinus(), ["slow", "42"], [{}] * 2, isolation=isolation,
                              timeout_s=0.3) if isolation != "inline" else None  # fmt: skip
    if timed is not None:
        assert timed.rewards == [-1.0, 1.0] and timed.timeouts == 1
    # the run's range wins over the task's; a task that declares none: 0.0, as before
    run = score_completions(
        _PlusMinus(), ["crash"], [{}], isolation=isolation, reward_range=(-2, 1)
    )
    assert run.rewards == [-2.0]
    assert score_completions(_Unranged(), ["crash"], [{}], isolation=isolation).rewards == [0.0]


def test_an_empty_completion_scores_the_low_end_of_the_run_range(monkeypatch):
    texts = ["7", "", "crash", "42"]
    monkeypatch.setattr(rollout, "sample", lambda *a, **k: SimpleNamespace(texts=list(texts)))
    kw = {"group_size": 4, "temperatures": [1.0] * 4, "max_new_tokens": 4, "reward_timeout_s": 5}
    batch = rollout.sample_and_score(None, _PlusMinus(), [{}], **kw)
    assert batch.rewards.tolist() == [-1.0, -1.0, -1.0, 1.0]
    assert batch.empty.tolist() == [False, True, False, False] and batch.score.errors == 1
    assert batch.reward_range == (-1.0, 1.0)
    wider = rollout.sample_and_score(None, _PlusMinus(), [{}], reward_range=(-3.0, 1.0), **kw)
    assert wider.rewards.tolist() == [-1.0, -3.0, -3.0, 1.0]
    plain = rollout.sample_and_score(None, _Unranged(), [{}], **kw)
    assert plain.rewards.tolist() == [-1.0, 0.0, 0.0, 1.0] and plain.reward_range is None


def _batch(rewards, reward_range):
    r = torch.tensor(rewards, dtype=torch.float32)
    n = r.numel()
    return ScoredBatch(None, [{}], [{}] * n, r, torch.zeros(n, dtype=torch.bool), None, n,
                       reward_range)  # fmt: skip


def test_sign_gets_the_run_range_through_the_registry_unless_the_options_give_one():
    """The trainer called sign with its default range (0, 1): a -1/+1 task trained on
    A in {-3, +1}."""
    batch = _batch([-1.0, 1.0, 1.0, -1.0], (-1.0, 1.0))
    adv = batch_advantages(batch, _PlusMinus(), GRPOConfig(advantage="sign", group_size=4))
    np.testing.assert_array_equal(adv.advantages.numpy(), [-1.0, 1.0, 1.0, -1.0])
    given = GRPOConfig(advantage="sign", group_size=4,
                       advantage_options={"reward_range": [-3, 1]})  # fmt: skip
    np.testing.assert_array_equal(
        batch_advantages(batch, _PlusMinus(), given).advantages.numpy(), [0.0, 1.0, 1.0, 0.0]
    )
    task = _PlusMinus()
    assert estimator_options("sign", {}, task, [{}], reward_range=(-1, 1)) == {
        "reward_range": (-1, 1)
    }
    assert estimator_options("grpo", {}, task, [{}], reward_range=(-1, 1)) == {}
    assert estimator_options("sign", {}, task, [{}]) == {}  # no range known: sign's (0, 1)


@SETTINGS
@given(
    st.integers(2, 8),
    st.integers(1, 30),
    st.floats(-50, 50),
    st.floats(0.01, 100),
    st.integers(0, 2**32 - 1),
)
def test_all_pass_and_all_fail_are_relative_to_the_range(g, b, lo, width, seed):
    """On -1/+1 rewards all_fail read 0 and on 0/10 rewards the two were swapped; with the range
    the split equals that of the same outcomes written as 0/1."""
    rng = np.random.default_rng(seed)
    hit = rng.random((b, g)) < rng.beta(0.3, 0.3, size=(b, 1))
    hi = lo + width
    unit = group_stats(hit.astype(float).reshape(-1), group_size=g).metrics
    stats = group_stats(np.where(hit, hi, lo).reshape(-1), group_size=g, reward_range=(lo, hi))
    for key in ("degeneracy/all_pass", "degeneracy/all_fail", "frac_reward_zero_std"):
        assert stats.metrics[key] == unit[key], key
    assert np.array_equal(stats.all_pass, hit.all(1))
    assert np.array_equal(stats.all_fail, ~hit.any(1))


def test_all_pass_and_all_fail_on_the_reviews_signed_and_scaled_rewards():
    r = np.array([1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 1], dtype=float)
    signed = group_stats(2 * r - 1, group_size=4, reward_range=(-1, 1)).metrics
    scaled = group_stats(10 * r, group_size=4, reward_range=(0, 10)).metrics
    for m in (signed, scaled):
        assert (m["degeneracy/all_pass"], m["degeneracy/all_fail"]) == (1 / 3, 1 / 3)
    bare = group_stats(2 * r - 1, group_size=4).metrics  # no range: the 0/1 reading (docs)
    assert (bare["degeneracy/all_pass"], bare["degeneracy/all_fail"]) == (1 / 3, 0.0)


def test_the_trainer_scores_trains_and_counts_a_signed_task_on_its_range(tmp_path):
    """A -1/+1 task under sign: failures (raise, NaN) scored -1 and counted, A = r in {-1, +1},
    and every zero-spread group is all-pass or all-fail."""
    from pgrpo.train.setup import build_run, resolve_config
    from pgrpo.train.trainer import train_step

    overrides = [a for a in TINY_CLI_ARGS if not a.startswith("task.options")]
    cfg = resolve_config(load_config(None, [
        *overrides, f"task.name={SignedArithmetic.name}", "task.options={levels: [1], n: 200}",
        "grpo.advantage=sign", "batch_prompts=8", f"run.output_dir={tmp_path}",
    ]))  # fmt: skip
    run = build_run(cfg, resume=False)
    torch.manual_seed(0)
    m = train_step(run, 1)
    assert m["reward_errors"] > 0 and m["advantages/nonfinite_rewards"] == 0
    assert m["advantages/abs_max"] == 1.0 and m["advantages/frac_zero"] == 0.0
    assert m["frac_reward_zero_std"] > 0
    split = m["degeneracy/all_pass"] + m["degeneracy/all_fail"]
    assert split == pytest.approx(m["frac_reward_zero_std"])


def test_the_nan_rule_message_says_what_pgrpo_train_masks():
    """It said grpo.nan_rewards=mask leaves NaN rewards out in `pgrpo train`, where scoring has
    already given a reward function's NaN a number."""
    with pytest.raises(ValueError, match="nan='mask'") as info:
        compute_advantages("grpo", [1.0, math.nan], group_size=2)
    text = str(info.value)
    assert "only a reward beyond float32's ~3.4e38" in text
    assert "low end of the task's reward range" in text


# ---------------------------------------------------------------------------------------------
# 3. Group ids by exact equality
# ---------------------------------------------------------------------------------------------


def _old_dense_ids(group_ids):
    """`_dense_ids` before the fix, verbatim: the oracle where it was right."""
    if isinstance(group_ids, torch.Tensor):
        group_ids = group_ids.detach().cpu().reshape(-1).numpy()
    arr = np.asarray(group_ids)
    if arr.ndim != 1:
        arr = np.array(list(group_ids), dtype=object)
    if arr.size and np.issubdtype(arr.dtype, np.integer):
        lo, hi = int(arr.min()), int(arr.max())
        if hi - lo <= 4 * arr.size + 1024:
            shifted = arr - lo if lo else arr
            counts = np.bincount(shifted, minlength=hi - lo + 1)
            present = counts > 0
            if present.all():
                return shifted.astype(np.int64, copy=False), counts.astype(np.int64)
            index = np.cumsum(present, dtype=np.int64)[shifted] - 1
            return index, counts[present].astype(np.int64)
    if arr.dtype == object:
        arr = arr.astype(str)
    _, inverse, counts = np.unique(arr, return_inverse=True, return_counts=True)
    return inverse.reshape(-1).astype(np.int64), counts.astype(np.int64)


ONE_KIND = st.one_of(
    st.lists(st.integers(-5, 5), min_size=1, max_size=40),
    st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=40),  # sparse: np.unique path
    st.lists(st.sampled_from([-1.5, 0.0, 0.25, 3.0, 1e9]), min_size=1, max_size=40),
    st.lists(
        st.text(st.characters(exclude_characters="\x00"), max_size=3), min_size=1, max_size=40
    ),  # a trailing NUL: numpy dropped it (the old code merged 'a', 'a\0')
)


@SETTINGS
@given(ONE_KIND, st.sampled_from(["list", "numpy", "torch", "object"]))
def test_ids_of_one_kind_keep_their_dense_ids(ids, container):
    """Numbers or strings, as lists, arrays, tensors or object arrays: the old numbers."""
    if container == "torch":
        assume(not isinstance(ids[0], str))
        given_ids = torch.tensor(ids)
    elif container == "numpy":
        given_ids = np.asarray(ids)
    elif container == "object":
        assume(isinstance(ids[0], str))  # object arrays of numbers: see the next test
        given_ids = np.array(ids, dtype=object)
    else:
        given_ids = ids
    new, old = _dense_ids(given_ids), _old_dense_ids(given_ids)
    assert np.array_equal(new[0], old[0]) and np.array_equal(new[1], old[1])


MIXED = st.lists(
    st.one_of(
        st.integers(-3, 3),
        st.sampled_from(["1", "-1", "a", "0", "2"]),
        st.tuples(st.integers(0, 2), st.sampled_from(["x", "1"])),
        st.none(),
    ),
    min_size=1,
    max_size=40,
)


@SETTINGS
@given(MIXED)
def test_mixed_and_tuple_ids_are_grouped_by_exact_equality(ids):
    """[1, 1, '1', '1'] was one group (ids went through str); tuple ids crashed."""
    index, sizes = _dense_ids(ids)
    assert index.shape == (len(ids),) and sizes.sum() == len(ids)
    for i in range(len(ids)):
        for j in range(len(ids)):
            assert (index[i] == index[j]) == (ids[i] == ids[j])
    if all(type(x) is int for x in ids):
        return  # numbers: numeric order (the test above)
    # numbered by the ids' text, ties between distinct ids of one text by first appearance
    first = {}
    for k, x in enumerate(ids):
        first.setdefault(index[k], (str(x), k))
    assert [first[k] for k in range(len(sizes))] == sorted(first.values())
    texts = {str(x) for x in ids}
    distinct = len({(type(x), x) for x in ids})
    if len(texts) == distinct and not any(isinstance(x, tuple) for x in ids):
        assert np.array_equal(index, _old_dense_ids(ids)[0])  # where the old code was right


def test_the_reviews_ids_give_the_right_groups():
    r = np.array([1.0, 0.0, 1.0, 0.0])
    mixed = compute_advantages("grpo", r, group_ids=[1, 1, "1", "1"]).advantages
    pairs = compute_advantages("grpo", r, group_size=2).advantages
    np.testing.assert_array_equal(mixed, pairs)
    tuples = compute_advantages("grpo", r, group_ids=[(0, 1), (0, 1), (1, 0), (1, 0)])
    np.testing.assert_array_equal(tuples.advantages, pairs)
    rows = np.array([[0, 1], [0, 1], [1, 0], [1, 0]])  # one row per rollout
    np.testing.assert_array_equal(compute_advantages("grpo", r, group_ids=rows).advantages, pairs)
    stats = group_stats(r, group_ids=[(7, "a"), (7, "a"), (7, "b"), (7, "b")])
    assert stats.metrics["num_groups"] == 2.0
    assert _dense_ids(["a", "a\x00", "a"])[0].tolist() == [0, 1, 0]  # numpy merged them
    with pytest.raises(TypeError, match="group_ids must be hashable"):
        make_groups(2, group_ids=[[0], [0]])


def test_an_object_array_of_ints_is_numbered_like_an_int_array():
    """Deliberate change: the old code numbered it in the text order of the ids ('10' before
    '9'), against the documented sorted id order; ints as a list, array or tensor never were."""
    ids = np.array([10, 9, 10, 9], dtype=object)
    assert _dense_ids(ids)[0].tolist() == _dense_ids([10, 9, 10, 9])[0].tolist() == [1, 0, 1, 0]
