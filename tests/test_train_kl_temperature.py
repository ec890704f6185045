"""The KL term under multi-temperature sampling (2026-12-06, session 40).

A review ran MDP-GRPO's recipe (temperatures [0.1, 0.4, 0.7, 1.0], asymmetric KL 0.01 / 0.025)
at lr 1e-3: the KL was taken between the T-tempered policies, whose log-ratio scales as 1 / T,
and k3 had no clamp: grad norm 48 -> 1515 and kl 7 -> 193 over 4 steps, and at T = 0.01
TrainingDiverged blaming the lr. Now `loss.kl_temperature` (default 'one') takes the KL at
T = 1 from the same forward, and k3 is clamped as verl's. The run-level tests below fail on the
code before (tests/test_train_kl_temperature.py, `test_paper_temperatures_*`).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import types

import pytest
import torch
from cli_checks import one_line_error
from conftest import TINY_CLI_ARGS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from train_checks import tiny_llama
from typer.testing import CliRunner

import pgrpo.train.update as update
from pgrpo.cli import _load_commands, app
from pgrpo.core.losses import K3_MAX, LossConfig, kl_k3, policy_loss
from pgrpo.train.config import load_config
from pgrpo.train.log import read_metrics
from pgrpo.train.logprobs import completion_scores
from pgrpo.train.trainer import TIMING_KEYS, TrainingDiverged, check_finite, train

_load_commands()
runner = CliRunner()
FAST = dict(deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
PAPER = "[0.1,0.4,0.7,1.0]"


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("PGRPO_CACHE", str(tmp_path_factory.getbasetemp() / "pgrpo-cache"))


# ---------------------------------------------------------------------------------------------
# k3, clamped as verl's low_var_kl
# ---------------------------------------------------------------------------------------------


def _k3_and_grad(fn, lr: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    log_probs = torch.zeros_like(lr, requires_grad=True)
    value = fn(log_probs, lr)  # ref_log_probs - log_probs = lr
    value.sum().backward()
    return value.detach(), log_probs.grad


def _unclamped(log_probs, ref_log_probs):
    lr = ref_log_probs - log_probs
    return (torch.expm1(lr) - lr).clamp(min=0.0)


@settings(max_examples=200, **FAST)
@given(st.lists(st.floats(-10.98, 2.6), min_size=1, max_size=20))
def test_k3_is_the_unclamped_formula_inside_the_clamp(values):
    lr = torch.tensor(values)
    got, got_grad = _k3_and_grad(kl_k3, lr)
    want, want_grad = _k3_and_grad(_unclamped, lr)
    assert torch.equal(got, want) and torch.equal(got_grad, want_grad)


@settings(max_examples=200, **FAST)
@given(st.lists(st.floats(-1e30, 1e30), min_size=1, max_size=20))
def test_k3_is_finite_and_at_most_10_however_far_a_token_is_from_the_reference(values):
    lr = torch.tensor(values + [90.0, 700.0, -700.0])  # 90: expm1 overflowed float32 before
    value, grad = _k3_and_grad(kl_k3, lr)
    assert bool(torch.isfinite(value).all() and torch.isfinite(grad).all())
    assert bool((value >= 0).all() and (value <= K3_MAX).all())
    assert bool((grad[value == K3_MAX] == 0).all())  # at the bound: no pull, as in verl
    assert value[-3] == K3_MAX and value[-1] == K3_MAX
    # k3_max=None is the textbook k3, unclamped (the bandit's divergence scenario needs it)
    uncapped, _ = _k3_and_grad(lambda lp, ref: kl_k3(lp, ref, k3_max=None), lr)
    assert torch.equal(uncapped, _unclamped(torch.zeros_like(lr), lr))
    assert math.isinf(float(uncapped[-2]))


# ---------------------------------------------------------------------------------------------
# The KL's log-probs at T = 1: by hand from the logits
# ---------------------------------------------------------------------------------------------

VOCAB = 40


@settings(max_examples=25, **FAST)
@given(
    seed=st.integers(0, 999),
    n=st.integers(1, 5),
    t=st.integers(1, 9),
    chunk=st.sampled_from([1, 3, 16]),
    cold=st.sampled_from([0.1, 0.01, 0.4]),
)
def test_the_kl_at_one_is_the_kl_of_the_untempered_logits_by_hand(seed, n, t, chunk, cold):
    """Rows drawn at [cold, 1.0, ...]: `completion_scores(kl_temperatures=ones)` gives the
    log-probs of softmax(logits) from the same forward (the backbone runs as often as without
    it; the ratio's log-probs are unchanged bit for bit), and `policy_loss` with them has the
    k3 KL at T = 1 by hand: its value, metric and gradient."""
    gen = torch.Generator().manual_seed(seed)
    model = tiny_llama("llama", VOCAB, seed)
    reference = copy.deepcopy(model)  # the policy after some drift: k3 well inside its clamp
    with torch.no_grad():
        for q in reference.parameters():
            q.add_(0.05 * q.abs().mean() * torch.randn(q.shape, generator=gen))
    p = 3
    ids = torch.randint(1, VOCAB, (n, p + t), generator=gen)
    att = torch.ones_like(ids)
    temps = torch.tensor([cold, 1.0] * n)[:n]
    lengths = torch.randint(1, t + 1, (n,), generator=gen)
    mask = (torch.arange(t)[None] < lengths[:, None]).long()
    adv = torch.randn(n, generator=gen)
    calls = []
    hook = model.get_decoder().register_forward_hook(lambda *_: calls.append(1))
    plain = completion_scores(model, ids, att, p, temps, chunk=chunk).log_probs
    forwards = len(calls)
    ones = torch.ones(n)
    scores = completion_scores(model, ids, att, p, temps, chunk=chunk, kl_temperatures=ones)
    hook.remove()
    assert len(calls) == 2 * forwards  # one more call, one more forward: no extra per KL
    assert torch.equal(scores.log_probs.detach(), plain.detach())
    with torch.no_grad():
        ref = completion_scores(reference, ids, att, p, None).log_probs
    cfg = LossConfig(kl_coef=0.01, kl_coef_negative=0.025)
    got = policy_loss(
        scores.log_probs, scores.log_probs.detach(), adv, mask, cfg,
        ref_log_probs=ref, kl_log_probs=scores.kl_log_probs,
    )  # fmt: skip
    model.zero_grad()
    got.loss.backward()
    got_grads = [q.grad.clone() for q in model.parameters()]

    logits = model(input_ids=ids).logits[:, p - 1 : -1].float()
    target = ids[:, p:, None]
    at_one = torch.log_softmax(logits, -1).gather(-1, target).squeeze(-1)
    tempered = torch.log_softmax(logits / temps[:, None, None], -1).gather(-1, target).squeeze(-1)
    torch.testing.assert_close(scores.kl_log_probs, at_one, atol=2e-5, rtol=1e-5)
    lr = ref - at_one
    k3 = torch.exp(lr) - lr - 1
    w = torch.where(adv < 0, 0.025, 0.01)[:, None]
    surrogate = -adv[:, None] * torch.exp(tempered - tempered.detach())  # ratio 1, unclipped
    on = mask.bool()
    loss = (surrogate + w * k3)[on].sum() / on.sum()
    kl = float(k3[on].mean().detach())
    assert got.metrics["kl"] == pytest.approx(kl, rel=1e-4, abs=1e-7)
    assert float(got.loss) == pytest.approx(float(loss.detach()), rel=1e-4, abs=1e-6)
    model.zero_grad()
    loss.backward()
    for have, want in zip(got_grads, [q.grad for q in model.parameters()], strict=True):
        # scale-aware: at T = 0.01 the ratio's gradient is 100x the logits' (float32 rounding)
        assert float((have - want).abs().max()) <= 1e-6 + 1e-4 * float(want.abs().max())
    tempered_kl = (torch.exp(ref - tempered) - (ref - tempered) - 1)[on].mean()
    assert not math.isclose(kl, float(tempered_kl), rel_tol=1e-3)  # the option matters here


# ---------------------------------------------------------------------------------------------
# Runs: where the option changes nothing, where it does, the review's recipe
# ---------------------------------------------------------------------------------------------


def _run_cfg(tmp_path, name, *extra):
    """A tiny random model (no warm-up) on arithmetic: 4 x 4 completions, K = 4 over M = 2."""
    return load_config(
        None,
        [
            "model.name=tiny",
            "model.tiny_warmup_steps=0",
            "group_size=4",
            "batch_prompts=4",
            "refresh_interval=4",
            "num_minibatches=2",
            "max_new_tokens=12",
            "torch_threads=1",
            "forecast_every=0",
            "checkpoint_every=0",
            "advantage=sign",
            "loss.kl_coef=0.01",
            "loss.kl_coef_negative=0.025",
            f"run.output_dir={tmp_path}",
            f"run.name={name}",
            *extra,
        ],
    )


def _kl_gathers(monkeypatch) -> list:
    """The `kl_temperatures` each update pass asks `completion_scores` for (None: none)."""
    asked = []
    real = update.completion_scores

    def spy(*args, **kwargs):
        asked.append(kwargs.get("kl_temperatures"))
        return real(*args, **kwargs)

    monkeypatch.setattr(update, "completion_scores", spy)
    return asked


def _weights(run_dir):
    path = run_dir / "checkpoints" / "step-2" / "state.pt"
    return torch.load(path, weights_only=True)["model"]


@pytest.mark.parametrize(
    "temps, same",
    [
        ("temperature=1.0", True),
        ("temperatures=[1.0,1.0,1.0,1.0]", True),
        ("temperature=0.7", False),
        (f"temperatures={PAPER}", False),
    ],
)
def test_the_option_changes_a_run_only_where_a_temperature_is_not_1(
    tmp_path, monkeypatch, temps, same
):
    """With every temperature 1 the two options give the same run bit for bit (log and
    weights) and no second gather is asked for; with one below 1 ('temperature=0.7', a single
    temperature, as TRL's) the KL differs: 'one' is a change for such runs (docs/trainer.md)."""
    runs = {}
    for option in ("one", "sampled"):
        asked = _kl_gathers(monkeypatch)
        cfg = _run_cfg(tmp_path, option, temps, "steps=2", f"loss.kl_temperature={option}")
        runs[option] = train(cfg)
        second_gathers = [a for a in asked if a is not None]
        # only 'one' with a temperature below 1 gathers at T = 1 besides the ratio's temperature
        assert bool(second_gathers) == (option == "one" and not same)
    logs = {k: [{m: v for m, v in h.items() if m not in TIMING_KEYS} for h in r.history]
            for k, r in runs.items()}  # fmt: skip
    one, sampled = _weights(runs["one"].run_dir), _weights(runs["sampled"].run_dir)
    if same:
        assert logs["one"] == logs["sampled"]
        assert all(torch.equal(one[k], sampled[k]) for k in one)
    else:
        assert logs["one"][0]["kl"] != logs["sampled"][0]["kl"]


@pytest.mark.parametrize(
    "temps, option, kl_max, grad_max",
    [
        (PAPER, None, 0.5, 10.0),  # before: kl 3.8, grad norm 12.9 at step 1
        ("[0.01,0.4,0.7,1.0]", None, 0.5, 10.0),  # before: kl 1.5e11, grad norm 5.5e12, step 2
        ("[0.01,0.4,0.7,1.0]", "sampled", 2.0, 20.0),  # the clamped k3 alone (kl 0.75 here)
    ],
)
def test_paper_temperatures_with_asymmetric_kl_at_a_high_lr_stay_finite(
    tmp_path, temps, option, kl_max, grad_max
):
    """The review's recipe at lr 1e-3 on a tiny random model, 4 steps of K = 4: every logged
    value finite, the KL and gradient norm bounded. On the code before, the first two cases'
    KL was the tempered one and exceeded these bounds (figures beside each case)."""
    extra = [f"temperatures={temps}", "steps=4", "optim.lr=1e-3", "model.tiny_hidden=64"]
    extra += [f"loss.kl_temperature={option}"] if option else []
    history = train(_run_cfg(tmp_path, "paper", *extra)).history
    for h in history:
        assert all(math.isfinite(h[k]) for k in ("loss", "grad_norm", "kl")), h
    assert max(h["kl"] for h in history) < kl_max
    assert max(h["grad_norm"] for h in history) < grad_max
    cfg = _run_cfg(tmp_path, "paper", *extra)
    assert cfg.loss.kl_temperature == (option or "one")


def test_kl_at_one_is_zero_before_the_first_step_bit_for_bit(tmp_path):
    """K = 1: the first optimizer step's policy is the reference, so the KL at T = 1 (the
    reference's no-gradient pass and the update's second gather) is exactly 0."""
    cfg = _run_cfg(tmp_path, "zero", f"temperatures={PAPER}", "steps=1", "refresh_interval=1",
                   "num_minibatches=1")  # fmt: skip
    assert train(cfg).history[0]["kl"] == 0.0


# ---------------------------------------------------------------------------------------------
# Config, CLI, the divergence message, resuming a run written before the option
# ---------------------------------------------------------------------------------------------


def test_the_config_takes_one_or_sampled_and_refuses_anything_else():
    assert LossConfig().kl_temperature == "one" and LossConfig().k3_max == K3_MAX
    with pytest.raises(ValueError, match="k3_max must be > 0"):
        LossConfig(k3_max=0.0)
    assert load_config(None, ["kl_temperature=sampled"]).loss.kl_temperature == "sampled"
    with pytest.raises(ValueError, match=r"loss.kl_temperature='1' is invalid: use 'one'"):
        LossConfig(kl_temperature="1")


def test_pgrpo_train_refuses_a_bad_kl_temperature_in_one_line(tmp_path):
    args = ["train", *TINY_CLI_ARGS, "loss.kl_temperature=bogus", f"run.output_dir={tmp_path}"]
    line = one_line_error(runner.invoke(app, args), "loss.kl_temperature='bogus'", "'sampled'")
    assert "'one'" in line
    assert list(tmp_path.iterdir()) == []  # refused before anything was written


@pytest.mark.parametrize("option, named", [("sampled", True), ("one", False)])
def test_divergence_names_the_tempered_kl_next_to_the_lr(tmp_path, option, named):
    cfg = _run_cfg(tmp_path, "gone", f"temperatures={PAPER}", f"loss.kl_temperature={option}")
    run = types.SimpleNamespace(config=cfg, optimizer_steps=0, temperatures=(0.1, 0.4, 0.7, 1.0))
    with pytest.raises(TrainingDiverged) as err:
        check_finite(run, loss=math.inf)
    text = str(err.value)
    assert "optim.lr=1e-06 is too high" in text and "\n" not in text
    assert ("tempered at T = 0.1 (loss.kl_temperature=sampled)" in text) == named
    assert ("or loss.kl_temperature=one" in text) == named


def _drop_kl_temperature(path):
    text = path.read_text()
    kept = [line for line in text.splitlines() if "kl_temperature" not in line]
    assert len(kept) == len(text.splitlines()) - 1
    path.write_text("\n".join(kept) + "\n")


@pytest.mark.parametrize(
    "temps, refused",
    [
        ([f"temperatures={PAPER}"], True),
        (["temperature=1.0"], False),
        ([f"temperatures={PAPER}", "generation.score_temperature=one"], False),
    ],
)
def test_a_run_written_before_the_option_resumes_with_the_kl_it_trained_with(
    tmp_path, temps, refused
):
    """A config.yaml without loss.kl_temperature (pgrpo before session 40) took its KL at the
    ratio's temperatures: with tokens drawn at a temperature other than 1 and scored at it, the
    resume refuses the new default, naming it, and resumes with loss.kl_temperature=sampled; at
    temperature 1, or with the ratio (and so the KL) at T = 1, it is the same run and goes on."""
    old = "one" if "generation.score_temperature=one" in temps else "sampled"
    base = ["steps=1", "checkpoint_every=1", *temps]
    first = train(_run_cfg(tmp_path, "old", *base, f"loss.kl_temperature={old}")).run_dir
    _drop_kl_temperature(first / "config.yaml")
    _drop_kl_temperature(first / "checkpoints" / "step-1" / "config.yaml")
    resumed = _run_cfg(tmp_path, "old", "steps=2", "checkpoint_every=1", *temps)
    if refused:
        with pytest.raises(ValueError, match=r"loss.kl_temperature: 'sampled' -> 'one'"):
            train(resumed, resume=True)
        resumed = dataclasses.replace(
            resumed, loss=dataclasses.replace(resumed.loss, kl_temperature="sampled")
        )
    assert len(train(resumed, resume=True).history) == 2
    assert len(read_metrics(first)) == 2
