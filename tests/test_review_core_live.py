"""Defects a hostile review of the core math, `PgrpoCallback` / `LiveConfig` and `pgrpo train`
found (2026-12-02, /tmp/p8/report_B.md); each test failed on the code before its fix."""

from __future__ import annotations

import math
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from conftest import TINY_CLI_ARGS
from typer.testing import CliRunner

from pgrpo import compute_advantages
from pgrpo.cli import _load_commands, app
from pgrpo.core.advantages import result_dtype
from pgrpo.core.degeneracy import group_stats
from pgrpo.core.losses import LossConfig
from pgrpo.core.schedules import lr_factor
from pgrpo.core.stats import accuracy_ci, pass_at_k
from pgrpo.diagnose.live import LiveConfig, assess_live
from pgrpo.errors import UserError
from pgrpo.logs.base import assemble
from pgrpo.logs.columns import as_number
from pgrpo.train.config import load_config

_load_commands()
runner = CliRunner()
TINY = [a for a in TINY_CLI_ARGS if not a.startswith("lr=")]


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("PGRPO_CACHE", str(tmp_path_factory.getbasetemp() / "pgrpo-cache"))


# ---------------------------------------------------------------------------------------------
# Core math
# ---------------------------------------------------------------------------------------------

DTYPES = [  # (numpy dtype, torch dtype, the advantages' dtype)
    (np.bool_, torch.bool, torch.float32),
    (np.int8, torch.int8, torch.float32),
    (np.int64, torch.int64, torch.float64),
    (np.float16, torch.float16, torch.float32),
    (np.float32, torch.float32, torch.float32),
    (np.float64, torch.float64, torch.float64),
]


@pytest.mark.parametrize("np_dtype,torch_dtype,want", DTYPES)
def test_integer_bool_and_half_rewards_give_the_same_float_advantages_in_numpy_and_torch(
    np_dtype, torch_dtype, want
):
    """torch int64 rewards once came back as int64 zeros (no learning signal), torch bool ones
    as all True under `sign`; numpy float16 came back float32 but torch float16 as float16."""
    rewards = [1, 0, 0, 1]
    for name, expect in (("grpo", 0.866), ("sign", 1.0)):
        a_np = compute_advantages(name, np.array(rewards, dtype=np_dtype), group_size=4)
        a_t = compute_advantages(name, torch.tensor(rewards, dtype=torch_dtype), group_size=4)
        assert a_t.advantages.dtype == want == result_dtype(torch_dtype)
        assert a_np.advantages.dtype == torch.empty(0, dtype=want).numpy().dtype
        np.testing.assert_allclose(a_t.advantages.numpy(), a_np.advantages, rtol=1e-6)
        np.testing.assert_allclose(np.abs(a_np.advantages), expect, atol=1e-3)
        assert (a_np.advantages > 0).tolist() == [True, False, False, True]


def test_dr_grpo_max_length_must_be_a_positive_count():
    """max_length=-4 flipped the sign of the Dr. GRPO loss (gradient ascent), 0 gave -inf."""
    for bad in (-3, 0, 2.5, True):
        with pytest.raises(ValueError, match="max_length must be None .* whole number"):
            LossConfig(aggregator="seq_sum_constant_norm", max_length=bad)
    with pytest.raises(ValueError, match="aggregator_options.max_length"):
        LossConfig(aggregator_options={"max_length": -1})
    assert LossConfig(max_length=4).max_length == 4
    with pytest.raises(ValueError, match="max_length"):
        load_config(None, ["loss.aggregator=seq_sum_constant_norm", "loss.max_length=-4"])


@pytest.mark.parametrize("key", ["epsilon_low", "epsilon_high", "kl_coef", "kl_coef_negative",
                                 "entropy_coef"])  # fmt: skip
def test_nan_loss_coefficients_are_refused(key):
    """NaN passed the `< 0` checks: epsilon_low=nan silently disabled clipping, kl_coef=nan the
    KL term (uses_reference was `nan > 0`, False)."""
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError, match=f"{key} must be >= 0.* a finite number"):
            LossConfig(**{key: bad})


NON_FINITE = [("lr=.inf", "optim.lr"), ("lr=.nan", "optim.lr"),
              ("optim.max_grad_norm=.nan", "optim.max_grad_norm"),
              ("optim.weight_decay=.inf", "optim.weight_decay")]  # fmt: skip


@pytest.mark.parametrize("override,key", NON_FINITE)
def test_non_finite_optimizer_settings_are_refused_at_config_time(override, key):
    with pytest.raises(ValueError, match=rf"{key}=.* must be a finite number"):
        load_config(None, [override])


def test_huge_float32_rewards_are_computed_wide_enough_or_refused():
    """float32 rewards of 4e19 gave all-zero z-scores (the row norm overflowed); dr_grpo on
    [3e38, -3e38] gave [inf, nan]; float64 rewards of 1e200 gave garbage, all silently."""
    big = compute_advantages("grpo", np.array([4e19, 0, 0, 4e19], np.float32), group_size=4)
    np.testing.assert_allclose(big.advantages, [0.866, -0.866, -0.866, 0.866], atol=1e-3)
    assert big.advantages.dtype == np.float32
    edge = compute_advantages("dr_grpo", np.array([3e38, -3e38], np.float32), group_size=2)
    np.testing.assert_allclose(edge.advantages, [3e38, -3e38], rtol=1e-6)
    with pytest.raises(ValueError, match="overflow .*rescale the rewards"):
        compute_advantages("rloo", np.array([3e38, -3e38], np.float32), group_size=2)
    with pytest.raises(UserError, match="1e\\+150.*rescale the reward"):
        compute_advantages("grpo", np.array([1e200, 0, 0, 1e200]), group_size=4)


@pytest.mark.parametrize("count", [math.nan, 2.5, 0, -1, math.inf])
def test_dual_anchor_num_constraints_must_be_whole_counts(count):
    """num_constraints=nan gave all-NaN advantages silently (`(c < 1).any()` misses NaN)."""
    with pytest.raises(ValueError, match="num_constraints must be >= 1 and whole"):
        compute_advantages("dual_anchor", [1.0, 0, 0, 1], group_size=4, num_constraints=count)


def test_accuracy_ci_and_pass_at_k_refuse_what_is_not_a_count():
    """accuracy_ci(2.7, 10) used 2 successes, (3, 10.9) n = 10; pass_at_k(1e19, 1, 2) said
    `n must be >= 0, got a negative value (-9223372036854775808)` (int64 wrap-around)."""
    with pytest.raises(ValueError, match="successes must hold whole numbers.*2.7"):
        accuracy_ci(2.7, 10)
    with pytest.raises(ValueError, match="n must hold whole numbers"):
        accuracy_ci(3, 10.9)
    with pytest.raises(ValueError, match="successes must hold whole numbers.*nan"):
        accuracy_ci(math.nan, 10)
    assert accuracy_ci(3.0, np.int64(10)).estimate == 0.3
    with pytest.raises(ValueError, match=r"n must be counts below 2\^63, got 1e\+19"):
        pass_at_k(1e19, 1, 2)


def test_all_masked_group_counts_the_same_in_degeneracy_and_its_iid_prediction():
    """With nan="mask" a group with no valid reward counted as zero-std in frac_reward_zero_std
    but was left out of the i.i.d. prediction, biasing degeneracy/excess (-0.111 here)."""
    nan = math.nan
    m = group_stats([1, nan, nan, nan, 0, 1], group_size=2, nan="mask").metrics
    # groups: [1] (f_1 = 1), [] (certain: 1), [0, 1] at pbar = 2/3 (f_2 = 5/9)
    assert m["frac_reward_zero_std"] == pytest.approx(2 / 3)
    assert m["degeneracy/iid_prediction"] == pytest.approx((1 + 1 + 5 / 9) / 3)
    assert m["degeneracy/excess"] == pytest.approx(2 / 3 - 23 / 27)


def test_lr_schedule_floor_is_checked_and_the_decay_is_transformers():
    """floor=-1 gave a negative lr factor. The decay is transformers' (the docs' promise for
    `optim.schedule=linear`): the last step runs at 1/(total - warmup), not at 0."""
    from transformers.optimization import (
        _get_cosine_schedule_with_warmup_lr_lambda as hf_cosine,
    )
    from transformers.optimization import (
        _get_linear_schedule_with_warmup_lr_lambda as hf_linear,
    )

    for bad in (-1.0, 1.5, math.nan):
        with pytest.raises(ValueError, match=r"floor must be in \[0, 1\]"):
            lr_factor("linear", 3, 10, floor=bad)
    total, warm = 10, 2
    for step in range(warm, total):
        ours = lr_factor("linear", step, total, warm)
        assert ours == pytest.approx(hf_linear(step, num_warmup_steps=warm,
                                               num_training_steps=total))  # fmt: skip
        theirs = hf_cosine(step, num_warmup_steps=warm, num_training_steps=total, num_cycles=0.5)
        assert lr_factor("cosine", step, total, warm) == pytest.approx(theirs)
    assert lr_factor("linear", total - 1, total) == pytest.approx(1 / total)


def test_unknown_transform_and_estimator_options_fail_at_config_time_naming_the_valid_ones():
    """`grpo.transform_options.betaa=2` passed the config and failed after the model loaded,
    pointing to help(pgrpo.core.advantages.grpo) for an option of the prospect transform."""
    options = r"lambda_pos, lambda_neg, beta, form, exponent"
    with pytest.raises(ValueError, match=rf"grpo.transform_options=.*'betaa'.*prospect.*{options}"):
        load_config(None, ["grpo.transform=prospect", "grpo.transform_options.betaa=2"])
    with pytest.raises(ValueError, match=r"grpo.advantage_options=.*'epss'.*unbiased, eps"):
        load_config(None, ["grpo.advantage_options.epss=1e-6"])
    with pytest.raises(TypeError, match=r"'betaa' of the advantage transform 'prospect'.*"
                                        r"help\(pgrpo.core.advantages.prospect\)"):  # fmt: skip
        compute_advantages("grpo", [1.0, 0.0], group_size=2, transform="prospect",
                           transform_options={"betaa": 2})  # fmt: skip
    ok = load_config(None, ["advantage=dual_anchor", "grpo.transform_options.beta=0.5"])
    assert ok.grpo.transform_options == {"beta": 0.5}


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a\\b", "/abs"])
def test_run_name_must_be_a_plain_folder_name(name):
    """run.name=.. wrote config.yaml, metrics.jsonl, checkpoints/ and final/ into the parent of
    run.output_dir; run.name=. into run.output_dir itself."""
    with pytest.raises(ValueError, match="run.name=.* plain folder name"):
        load_config(None, [f"run.name={name!r}"])
    assert load_config(None, ["run.name=v1.2"]).run.name == "v1.2"


# ---------------------------------------------------------------------------------------------
# PgrpoCallback, LiveConfig, assess_live
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("field,value", [
    ("degeneracy_threshold", math.nan), ("degeneracy_threshold", -0.5),
    ("degeneracy_threshold", 0.0), ("degeneracy_threshold", 1.5), ("patience", 2.5),
    ("min_points", math.nan), ("degeneracy_patience", True), ("max_points", 10),
])  # fmt: skip
def test_live_config_refuses_values_outside_their_range(field, value):
    """degeneracy_threshold=nan (or -0.5) counted every point as degenerate and stopped a
    learning run at step 24; then on_train_end raised on the NaN in the JSON report."""
    with pytest.raises(ValueError, match=field):
        LiveConfig(**{field: value})


def _fake_trainer(tmp_path):
    transformers = pytest.importorskip("transformers")
    args = transformers.TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True)
    return args, transformers.TrainerState(), transformers.TrainerControl()


def _feed(cb, args, state, control, values):  # noqa: ANN001
    cb.on_train_begin(args, state, control)
    for i, v in enumerate(values, start=1):
        state.global_step = i
        logs = {"reward": v, "frac_reward_zero_std": 0.1}
        state.log_history.append({**logs, "step": i})
        cb.on_log(args, state, control, logs=logs)


def test_callback_options_none_and_bad_every(tmp_path):
    """stop_on=None ('never stop') raised TypeError; every=2.5 was accepted, every='5' raised a
    bare TypeError."""
    pytest.importorskip("transformers")
    from pgrpo.integrations.callback import PgrpoCallback

    assert PgrpoCallback(stop_on=None).config.stop_on == ()
    assert PgrpoCallback(stop_on="plateau").config.stop_on == ("plateau",)
    for bad in (2.5, "5", 0, True):
        with pytest.raises(ValueError, match="every must be >= 1 .*an integer"):
            PgrpoCallback(every=bad)
    with pytest.raises(ValueError, match="degeneracy_threshold"):
        PgrpoCallback(degeneracy_threshold=math.nan)


def test_callback_reads_numpy_and_tensor_rewards_and_never_raises_at_train_end(tmp_path):
    """Rewards logged as np.float32 or 0-d tensors gave `no usable (step, reward) rows` at every
    assessment (no pgrpo keys, no stops); a report that cannot be written raised out of
    trainer.train() at on_train_end."""
    pytest.importorskip("transformers")
    from pgrpo.integrations.callback import PgrpoCallback

    rng = np.random.default_rng(0)
    rise = [0.1 + 0.8 * (1 - math.exp(-i / 15)) + 0.03 * rng.standard_normal() for i in range(30)]
    for wrap in (np.float32, lambda x: torch.tensor(x)):
        args, state, control = _fake_trainer(tmp_path)
        cb = PgrpoCallback(every=5)
        _feed(cb, args, state, control, [wrap(v) for v in rise])
        assert cb.errors == [] and len(cb.history) == 6
        assert "pgrpo/verdict" in state.log_history[-1]
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    cb = PgrpoCallback(every=5, report=str(blocker / "sub" / "report.json"))
    _feed(cb, args, state, control, rise)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cb.on_train_end(args, state, control) is control
    assert any("report not written" in str(w.message) for w in caught)
    assert "report not written" in cb.errors[-1]


def test_as_number_takes_numpy_scalars_and_0d_values_without_importing_torch():
    assert as_number(np.float32(0.5)) == 0.5 and as_number(np.int64(3)) == 3.0
    assert as_number(torch.tensor(0.25)) == 0.25 and as_number(np.array(2.0)) == 2.0
    assert as_number(torch.tensor([1.0, 2.0])) is None and as_number(np.bool_(True)) is None
    assert as_number(torch.tensor(True)) is None
    code = "import sys, pgrpo.logs.columns; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_assess_live_names_the_fix_for_huge_rewards():
    """Rewards of ~1e200 raised `cannot convert float NaN to integer` from deep in the null
    model, though assess_live's docstring says it never raises."""
    recs = [{"reward": 1e200 * (0.1 + 0.01 * i), "step": i + 1} for i in range(30)]
    with pytest.raises(UserError, match="rescale the reward"):
        assess_live(assemble(recs, fmt="trl", source="live"), LiveConfig())


# ---------------------------------------------------------------------------------------------
# pgrpo train: a run that diverges, damaged files
# ---------------------------------------------------------------------------------------------


def _error_lines(res) -> list[str]:  # noqa: ANN001
    return [line for line in res.output.splitlines() if line.startswith("error: ")]


def test_a_diverging_run_stops_with_one_line_and_exit_code_1(tmp_path):
    """lr=1e300 logged `loss: null, grad_norm: null`, saved NaN weights as final/ and exited 0."""
    res = runner.invoke(app, ["train", *TINY, "lr=1e300", "steps=3", "forecast_every=0",
                              f"run.output_dir={tmp_path}"])  # fmt: skip
    assert res.exit_code == 1, res.output
    (line,) = _error_lines(res)
    assert "training diverged at step 2: the loss is nan" in line
    assert "lower optim.lr" in line and "final/ is not written" in line
    assert not (tmp_path / "grpo" / "final").exists()
    assert not (tmp_path / "grpo" / "checkpoints").exists()


def test_divergence_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    """From the third optimizer step on the lr is 1e300: steps 1-2 are checkpointed, step 3's
    weights are not finite, so the run stops there with step-2 as the latest checkpoint."""
    import pgrpo.train.setup as setup
    from pgrpo.train.checkpoint import latest_checkpoint
    from pgrpo.train.trainer import TrainingDiverged, train

    monkeypatch.setattr(setup, "lr_factor", lambda kind, n, total, warm: 1.0 if n < 2 else 1e300)
    cfg = load_config(None, [*TINY, "lr=3e-3", "steps=4", "forecast_every=0",
                             "checkpoint_every=1", f"run.output_dir={tmp_path}"])  # fmt: skip
    with pytest.raises(TrainingDiverged, match="at step 3: the largest |weight| is") as err:
        train(cfg)
    assert latest_checkpoint(cfg.run_dir).name == "step-2"
    assert "step-2" in str(err.value) and not (cfg.run_dir / "final").exists()
    state = torch.load(cfg.run_dir / "checkpoints" / "step-2" / "state.pt", weights_only=True)
    assert all(bool(torch.isfinite(w).all()) for w in state["model"].values())


def test_damaged_state_pt_is_called_damaged_not_unsafe(tmp_path):
    """Bytes changed inside the pickle of a state.pt gave IndexError / UnicodeDecodeError
    tracebacks or 'holds objects other than tensors ... loading it could run code'."""
    from pgrpo.train.checkpoint import UnsafeCheckpointError, read_state

    torch.save({"format": 2, "model": {"w": torch.arange(64.0)}}, tmp_path / "state.pt")
    good = (tmp_path / "state.pt").read_bytes()
    rng = np.random.default_rng(0)
    for offset in (60, 120, 200):
        bad = bytearray(good)
        bad[offset : offset + 32] = rng.bytes(32)
        (tmp_path / "state.pt").write_bytes(bytes(bad))
        with pytest.raises(UnsafeCheckpointError, match="is damaged .*fails its CRC check"):
            read_state(tmp_path)


def test_garbage_config_yaml_on_resume_names_the_file(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "config.yaml").write_text("model: {name: tiny\n  oops: [1, 2\n")
    res = runner.invoke(app, ["train", *TINY, "lr=3e-3", "run.name=r",
                              f"run.output_dir={tmp_path}", "--resume"])  # fmt: skip
    assert res.exit_code == 2, res.output
    (line,) = _error_lines(res)
    assert f"{run / 'config.yaml'} is not valid YAML" in line and "line" in line
