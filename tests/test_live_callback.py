"""PgrpoCallback inside real TRL 1.16 GRPOTrainer runs (tiny random Llama, no downloads): the
forecast keys reach trainer_state.json and earlier reporting callbacks, a flat reward stops the
run, a rising one does not."""

from __future__ import annotations

import json

import numpy as np
import pytest

trl = pytest.importorskip("trl")
transformers = pytest.importorskip("transformers")
datasets = pytest.importorskip("datasets")

from test_integration_trl import _dataset, _model, _tokenizer  # noqa: E402

from pgrpo.integrations.trl import PgrpoCallback  # noqa: E402

G = 4
MAX_STEPS = 60


class Recorder(transformers.TrainerCallback):
    """Stands in for W&B / TensorBoard: records the logs it is given."""

    def __init__(self):
        self.logs = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.logs.append(dict(logs or {}))


def _counting_reward(level):
    """A reward whose value depends on the training step only: level(call index) + noise."""
    rng = np.random.default_rng(0)
    calls = {"n": 0}

    def reward(completions, **kwargs):
        calls["n"] += 1
        base = level(calls["n"])
        return [float(base + 0.05 * rng.standard_normal()) for _ in completions]

    return reward


class PatchedTrainer(trl.GRPOTrainer):
    """Stands in for Unsloth's patched GRPOTrainer: a subclass that rewrites `log` (Unsloth
    replaces TRL's methods the same way); the callback must not need anything from it."""

    def log(self, logs, start_time=None):
        logs["patched"] = 1.0
        super().log(logs, start_time)


def _run(tmp_path, reward, callback, recorder=None, trainer_cls=None):
    tokenizer = _tokenizer()
    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=G,
        num_generations=G,
        max_completion_length=3,
        max_steps=MAX_STEPS,
        logging_steps=1,
        learning_rate=1e-4,
        report_to=[],
        save_strategy="no",
        seed=0,
        disable_tqdm=True,
    )
    callbacks = [c for c in (recorder, callback) if c is not None]  # recorder first, like W&B
    trainer = (trainer_cls or trl.GRPOTrainer)(
        model=_model(tokenizer),
        reward_funcs=reward,
        args=args,
        train_dataset=_dataset(64),
        processing_class=tokenizer,
        callbacks=callbacks,
    )
    trainer.train()
    trainer.save_state()
    state = json.loads((tmp_path / "out" / "trainer_state.json").read_text())
    return trainer, state


def test_flat_reward_stops_and_logs_forecast_keys(tmp_path):
    # the flat rule at its defaults (the progress verdict flat held for 8 assessments)
    cb = PgrpoCallback(every=2, stop_on=("flat",))
    recorder = Recorder()
    trainer, state = _run(tmp_path, _counting_reward(lambda n: 0.5), cb, recorder)
    assert trainer.state.global_step < MAX_STEPS, "a flat reward should stop the run early"
    assert cb.stopped.startswith(f"step {trainer.state.global_step}: flat")
    keyed = [e for e in state["log_history"] if "pgrpo/forecast_plateau" in e]
    assert keyed, "forecast keys missing from trainer_state.json"
    for key in ("pgrpo/forecast_lo", "pgrpo/forecast_hi", "pgrpo/verdict", "pgrpo/alert/flat"):
        assert key in keyed[-1]
    assert keyed[-1]["pgrpo/forecast_lo"] <= 0.5 <= keyed[-1]["pgrpo/forecast_hi"]
    # every `every`-th logged reward carries the keys (from the first one past min_points)
    steps = [e["step"] for e in state["log_history"] if "pgrpo/points" in e]
    assert steps == list(range(2, trainer.state.global_step + 1, 2))
    # the recorder was registered before the callback, yet it saw the keys (callback moved)
    assert any("pgrpo/forecast_plateau" in e for e in recorder.logs)
    report = json.loads((tmp_path / "out" / "pgrpo_live_report.json").read_text())
    assert report["stopped"] == cb.stopped and report["verdict"] in ("flat", "plateau")
    # G, K, lr, beta1 come from the trainer's args (K = num_iterations x steps_per_generation /
    # gradient_accumulation_steps = 1 here)
    assert report["hyperparameters"]["group_size"] == G
    assert report["hyperparameters"]["refresh_interval"] == 1
    assert report["hyperparameters"]["lr"] == pytest.approx(1e-4)


def test_rising_reward_does_not_stop(tmp_path):
    # the setting of the flat test: it must not stop a rising run
    cb = PgrpoCallback(every=2, stop_on=("plateau", "flat", "collapse"))
    trainer, state = _run(tmp_path, _counting_reward(lambda n: 0.02 * n), cb)
    assert trainer.state.global_step == MAX_STEPS
    assert cb.stopped == ""
    last = [e for e in state["log_history"] if "pgrpo/verdict" in e][-1]
    assert last["pgrpo/alert/plateau"] == last["pgrpo/alert/flat"] == 0.0
    # a straight rise (0.02 a step) with no bend: at its end the fitted curve bends over below
    # the still-rising reward, which the verdict contradicts, so the forecast is withheld there
    # (session 39; before, it was drawn there, below the level and falling)
    assert last["pgrpo/verdict"] == 1.0 and last["pgrpo/forecast_withheld"] == 1.0
    assert "pgrpo/forecast_hi" not in last
    shown = [e for e in state["log_history"] if e.get("pgrpo/forecast_withheld") == 0.0][-1]
    assert shown["pgrpo/forecast_hi"] > 0.8


def test_report_only_by_default_in_a_patched_subclass(tmp_path):
    """Without stop_on the callback never stops a run, even a flat one; it works unchanged in a
    subclass that patches the trainer (as Unsloth does)."""
    cb = PgrpoCallback(every=4)
    trainer, state = _run(tmp_path, _counting_reward(lambda n: 0.5), cb, trainer_cls=PatchedTrainer)
    assert trainer.state.global_step == MAX_STEPS and cb.stopped == ""
    assert any(h.alerts for h in cb.history)
    keyed = [e for e in state["log_history"] if "pgrpo/forecast_plateau" in e]
    assert keyed and all(e.get("patched") == 1.0 for e in keyed)


def test_bad_options_say_how_to_fix():
    with pytest.raises(ValueError, match="valid: plateau, flat, collapse, degeneracy"):
        PgrpoCallback(stop_on=("platau",))
    with pytest.raises(ValueError, match="every must be >= 1"):
        PgrpoCallback(every=0)


def test_tensorboard_gets_the_keys_and_pgrpo_reads_the_events(tmp_path):
    """transformers' TensorBoardCallback comes before user callbacks; the pgrpo keys still reach
    the event file, which the `tensorboard` log reader then reads back."""
    pytest.importorskip("tensorboard")
    from pgrpo.logs import read_log

    tokenizer = _tokenizer()
    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        per_device_train_batch_size=G,
        num_generations=G,
        max_completion_length=3,
        max_steps=16,
        logging_steps=1,
        report_to=["tensorboard"],
        save_strategy="no",
        seed=0,
        disable_tqdm=True,
    )
    trl.GRPOTrainer(
        model=_model(tokenizer),
        reward_funcs=_counting_reward(lambda n: 0.5),
        args=args,
        train_dataset=_dataset(64),
        processing_class=tokenizer,
        callbacks=[PgrpoCallback(every=2, min_points=12)],
    ).train()
    log = read_log(tmp_path / "out")  # no trainer_state.json (no checkpoint): the event files
    assert log.format == "tensorboard" and len(log) == 16
    plateau = log.columns["pgrpo/forecast_plateau"]
    assert np.isfinite(plateau).sum() == 3  # steps 12, 14, 16 (min_points=12, every=2)
    assert "rewards/reward/mean" in log.columns


def test_resumed_run_starts_from_the_trainer_history(tmp_path):
    """On a resume the trainer's log_history already holds the earlier steps: the callback
    forecasts from all of them (no TRL run needed: the callback sees only the Trainer API)."""
    from transformers import TrainerControl, TrainerState, TrainingArguments

    args = TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True)
    state = TrainerState()
    rng = np.random.default_rng(0)
    state.log_history = [{"reward": 0.5 + 0.02 * rng.standard_normal(), "step": s}
                         for s in range(1, 31)]  # fmt: skip
    state.log_history.insert(5, {"eval_reward": 0.1, "step": 5})  # not a training entry
    cb = PgrpoCallback(every=1)
    control = TrainerControl()
    cb.on_train_begin(args, state, control)
    assert len(cb.records) == 30
    state.global_step = 31
    logs = {"reward": 0.5}
    state.log_history.append({**logs, "step": 31})
    cb.on_log(args, state, control, logs=logs)
    assert logs["pgrpo/points"] == 31 and "pgrpo/forecast_plateau" in state.log_history[-1]


def test_one_callback_given_to_a_second_trainer_is_moved_there_too(tmp_path):
    """Review, 2026-12-05: the move before the reporting callbacks was done once per callback
    object, so a sweep that reuses its callbacks list left it after W&B / TensorBoard in the
    second trainer, which then got no pgrpo key (0 of 13 logs)."""
    cb = PgrpoCallback(every=2, stop_on=None)
    for k in range(2):
        recorder = Recorder()
        _run(tmp_path / str(k), _counting_reward(lambda n: 0.5), cb, recorder)
        assert any("pgrpo/forecast_plateau" in e for e in recorder.logs), k


def test_a_reward_that_turns_nan_stops_the_run_as_collapsed(tmp_path):
    """TRL logs a metric that is NaN on every process as None; the callback, and the readers of
    trainer_state.json, read it as NaN, so the run reads `collapsed` and the collapse rule
    stops it (review, 2026-12-05: it read `plateau` to the end)."""
    level = _counting_reward(lambda n: 0.5 + 0.004 * min(n, 25))

    def reward(completions, **kwargs):
        out = level(completions, **kwargs)
        return [float("nan")] * len(out) if reward.calls >= 30 else out

    def counted(completions, **kwargs):
        reward.calls += 1
        return reward(completions, **kwargs)

    reward.calls = 0
    counted.__name__ = "reward"
    cb = PgrpoCallback(every=1, stop_on=("collapse",))
    trainer, state = _run(tmp_path, counted, cb)
    assert any(e.get("reward", 0.0) is None for e in state["log_history"])  # TRL's spelling
    assert trainer.state.global_step < MAX_STEPS and "collapse" in cb.stopped, cb.stopped
    from pgrpo.logs import read_log

    log = read_log(tmp_path / "out" / "trainer_state.json")
    assert log.metrics["nonfinite_tail"] >= 3
