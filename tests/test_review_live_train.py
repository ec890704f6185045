"""A hostile review of live use and `pgrpo train` (2026-12-04): prompts per step from TRL's args,
the i.i.d. degeneracy only for 0/1 rewards, a resumed callback that keeps its patience, options
checked at construction, and train's settings refused before anything is written."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app

trl = pytest.importorskip("trl")
transformers = pytest.importorskip("transformers")

from pgrpo.integrations.trl import PgrpoCallback  # noqa: E402

CURVES = Path(__file__).resolve().parents[2] / "shared" / "data" / "curves"
runner = CliRunner()


@pytest.fixture(scope="module", autouse=True)
def _commands():
    _load_commands()


def _grpo_args(tmp_path, **kw):
    base = dict(output_dir=str(tmp_path), use_cpu=True, report_to=[], bf16=False)
    return trl.GRPOConfig(**{**base, **kw})


def _feed(cb, args, rewards, start=1, state=None, columns=None):
    """Log `rewards` (and `columns`: {key: [n]}) one per step through the Trainer API, as TRL
    does; returns the state."""
    from transformers import TrainerControl, TrainerState

    state = state or TrainerState()
    control = TrainerControl()
    columns = columns or {}
    for j, (i, r) in enumerate(enumerate(rewards, start=start)):
        state.global_step = i
        logs = {"reward": float(r), **{k: float(v[j]) for k, v in columns.items()}}
        state.log_history.append({**logs, "step": i})
        cb.on_log(args, state, control, logs=logs)
    return state


def test_prompts_per_step_come_from_trl_args(tmp_path):
    """B = per_device_train_batch_size x world size x gradient_accumulation_steps / G: the docs
    said the callback read it, but only G, K, lr and beta1 were read."""
    from transformers import TrainerControl, TrainerState

    args = _grpo_args(tmp_path, per_device_train_batch_size=8, num_generations=4,
                      gradient_accumulation_steps=3)  # fmt: skip
    cb = PgrpoCallback()
    cb.on_train_begin(args, TrainerState(), TrainerControl())
    assert cb.hyperparameters["batch_prompts"] == 6 and cb.hyperparameters["group_size"] == 4


@pytest.mark.skipif(not CURVES.exists(), reason="needs ../shared/data/curves")
def test_with_prompts_per_step_a_collapsed_real_run_reads_collapsed(tmp_path):
    """cs336 off-policy e16 (16 epochs per rollout batch, G = 8, B = 32): with G alone the
    binomial null is unknown and the callback said flat; with B it says collapsed, as
    `pgrpo diagnose` does with the corpus's G and B."""
    from transformers import TrainerControl, TrainerState

    from pgrpo.logs import read_log

    log = read_log(CURVES / "cs336_shibuki_offpolicy_e16_tb256.csv")
    args = _grpo_args(tmp_path, per_device_train_batch_size=256, num_generations=8)
    cb = PgrpoCallback(every=1, min_points=12)
    cb.on_train_begin(args, TrainerState(), TrainerControl())
    cols = {k: log.columns[k] for k in ("reward_std", "frac_reward_zero_std") if k in log.columns}
    _feed(cb, args, log.reward, columns=cols)
    assert cb.hyperparameters["batch_prompts"] == 32
    assert cb.history[-1].verdict == "collapsed"


def test_the_iid_degeneracy_is_only_given_for_rewards_that_can_be_0_1_means(tmp_path):
    """`pgrpo/degeneracy_iid` was 0.125 beside an observed 0 for a reward of 0.5 +- 0.05."""
    from transformers import TrainerControl, TrainerState

    args = _grpo_args(tmp_path, per_device_train_batch_size=8, num_generations=4)  # N = 8
    rng = np.random.default_rng(0)
    for rewards, finite in (
        (0.5 + 0.05 * rng.standard_normal(30), False),  # not multiples of 1/8
        (rng.binomial(8, 0.5, 30) / 8, True),  # means of 8 0/1 rewards
    ):
        cb = PgrpoCallback(every=1, min_points=12)
        cb.on_train_begin(args, TrainerState(), TrainerControl())
        _feed(cb, args, rewards, columns={"frac_reward_zero_std": np.full(30, 0.25)})
        assert math.isfinite(cb.history[-1].metrics.get("pgrpo/degeneracy_iid", math.nan)) is finite


def test_a_resumed_callback_decides_as_an_uninterrupted_one(tmp_path):
    """The stop rules count consecutive assessments; a resume restarted them from 0 (and the
    report listed the new assessments only). It now replays the last ones from the history."""
    from transformers import TrainerControl, TrainerState

    args = _grpo_args(tmp_path, per_device_train_batch_size=8, num_generations=4)
    rewards = np.random.default_rng(1).binomial(8, 0.5, 40) / 8  # flat: the flat rule fires
    kw = dict(every=1, min_points=12, stop_on=("flat",), plateau_patience=8)
    whole = PgrpoCallback(**kw)
    whole.on_train_begin(args, TrainerState(), TrainerControl())
    _feed(whole, args, rewards)
    resumed = PgrpoCallback(**kw)
    state = TrainerState()
    state.log_history = [{"reward": float(r), "step": i} for i, r in enumerate(rewards[:-1], 1)]
    resumed.on_train_begin(args, state, TrainerControl())
    _feed(resumed, args, rewards[-1:], start=len(rewards), state=state)
    a, b = whole.history[-1], resumed.history[-1]
    assert (a.verdict, a.alerts, a.stop) == (b.verdict, b.alerts, b.stop)
    assert b.stop and any(h.step < len(rewards) for h in resumed.history[:-1])


def test_callback_options_are_checked_when_it_is_built():
    with pytest.raises(TypeError, match="unknown option.*'foo'.*options: every, report"):
        PgrpoCallback(foo=1)
    with pytest.raises(TypeError, match="report must be a path or None"):
        PgrpoCallback(report=123)


def _train_error(tmp_path, *overrides: str) -> str:
    res = runner.invoke(app, ["train", *overrides, f"run.output_dir={tmp_path / 'out'}"])
    assert res.exit_code == 2, res.output
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), res.output
    assert not (tmp_path / "out").exists()  # nothing written: no run folder, no lock
    return lines[0]


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        (("task.name=nope",), "unknown task 'nope'; valid names: arithmetic"),
        (("run.forecast_every=-1",), "run.forecast_every=-1 is invalid: must be >= 0"),
        (("grpo.batch_prompts=0",), "grpo.batch_prompts=0 is invalid: must be >= 1"),
        (("grpo.group_size=abc",), "expected a whole number, e.g. 8"),
        (
            ("generation.temperatures=0.5", "grpo.group_size=2"),
            "generation.temperatures=[1.0, 1.0]",  # was "e.g. group_size=1", itself invalid
        ),
    ],
)
def test_train_settings_are_refused_with_the_right_name_and_fix(tmp_path, overrides, said):
    line = _train_error(tmp_path, *overrides)
    assert said in line, line


def test_a_key_twice_in_a_config_file_is_refused(tmp_path):
    """The command line refuses a setting given twice; a YAML file kept the last silently."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("grpo:\n  group_size: 4\n  group_size: 2\n")
    line = _train_error(tmp_path, "--config", str(cfg))
    assert "key 'group_size' at line 3 repeats line 2; keep one" in line
    merged = tmp_path / "m.yaml"  # a YAML merge (<<) overriding a key is not a repeat
    merged.write_text("base: &b\n  x: 1\nmore:\n  <<: *b\n  x: 2\n")
    from pgrpo.train.yamlvalues import read_file

    assert read_file(merged)["more"] == {"x": 2}


def test_an_unreachable_dataset_is_one_line_not_a_traceback(tmp_path, monkeypatch):
    import datasets

    def offline(*a, **kw):
        raise ConnectionError("no internet")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    res = runner.invoke(app, ["train", "task.name=gsm8k", "model.name=tiny", "run.steps=1",
                              f"run.output_dir={tmp_path / 'out'}"])  # fmt: skip
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert "could not load gsm8k" in text and "task.options.data=" in text
    assert "Traceback" not in text
