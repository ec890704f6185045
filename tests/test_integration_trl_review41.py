"""Review 41 of PgrpoCallback (2026-12-07): TRL's batch-wide frac_reward_zero_std (F1), the
PgrpoGRPOConfig reward range (F4), a steps_to_90 past max_steps (F5), a report kept at each
checkpoint and across a resume (F6). Hook-driven (the callback sees only the Trainer API), plus
one short TRL run."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

trl = pytest.importorskip("trl")
transformers = pytest.importorskip("transformers")
datasets = pytest.importorskip("datasets")

from test_integration_trl import _config, _dataset, _model, _tokenizer  # noqa: E402
from transformers import TrainerControl, TrainerState  # noqa: E402

from pgrpo.integrations.trl import PgrpoCallback, PgrpoGRPOConfig, PgrpoGRPOTrainer  # noqa: E402


def _args(tmp_path, cls=None, **kw):
    base = dict(output_dir=str(tmp_path / "out"), report_to=[], use_cpu=True, bf16=False,
                per_device_train_batch_size=8, num_generations=4, logging_steps=1)  # fmt: skip
    return (cls or trl.GRPOConfig)(**{**base, **kw})


def _feed(cb, args, state, rows, start=1):
    """Log `rows` (dicts) at steps start, start + 1, ...; return the last logs dict."""
    control, logs = TrainerControl(), {}
    for s, row in enumerate(rows, start):
        state.global_step = s
        logs = dict(row)
        state.log_history.append({**logs, "step": s})
        cb.on_log(args, state, control, logs=logs)
    return logs


def _degenerate(n, share, sd=0.3):
    rng = np.random.default_rng(0)
    return [{"reward": 0.5 + 0.01 * rng.standard_normal(), "reward_std": sd,
             "frac_reward_zero_std": share} for _ in range(n)]  # fmt: skip


# --- F1: scale_rewards="batch" --------------------------------------------------------------


def test_group_mode_reads_the_share_and_stops(tmp_path):
    args, state = _args(tmp_path, scale_rewards="group"), TrainerState()
    cb = PgrpoCallback(every=1, min_points=8, stop_on=("degeneracy",))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to say in group mode
        cb.on_train_begin(args, state, TrainerControl())
        logs = _feed(cb, args, state, _degenerate(20, 0.9375))
    assert logs["pgrpo/degeneracy"] == 0.9375 and cb.stopped


@pytest.mark.parametrize(
    "mode", [{"scale_rewards": "batch"}, {"multi_objective_aggregation": "normalize_then_sum"}]
)
def test_batch_mode_does_not_read_the_flag_as_a_share(tmp_path, mode):
    """TRL logs 0.0 (the batch has spread) where 15 of 16 groups have none: the callback gave
    pgrpo/degeneracy 0.0 and its rule silently never fired."""
    args, state = _args(tmp_path, **mode), TrainerState()
    cb = PgrpoCallback(every=1, min_points=8, stop_on=("degeneracy",))
    with pytest.warns(RuntimeWarning, match="not a share of groups") as said:
        cb.on_train_begin(args, state, TrainerControl())
        logs = _feed(cb, args, state, _degenerate(20, 0.0))
    assert sum("not a share" in str(w.message) for w in said) == 1  # once
    assert "pgrpo/degeneracy" not in logs and not cb.stopped
    assert any("scale_rewards='group'" in n for n in cb.report()["warnings"])


def test_batch_mode_falls_back_on_a_zero_reward_std(tmp_path):
    """The lower bound (reward_std == 0: no group has spread) still stops the run."""
    args, state = _args(tmp_path, scale_rewards="batch"), TrainerState()
    cb = PgrpoCallback(every=1, min_points=8, stop_on=("degeneracy",))
    with pytest.warns(RuntimeWarning, match="not a share"):
        cb.on_train_begin(args, state, TrainerControl())
        _feed(cb, args, state, _degenerate(20, 1.0, sd=0.0))
    assert cb.stopped.startswith("step") and "degeneracy" in cb.stopped


def test_pgrpo_trainer_share_is_per_group_in_batch_mode(tmp_path):
    tokenizer, cb = _tokenizer(), PgrpoCallback(every=1)
    PgrpoGRPOTrainer(model=_model(tokenizer), reward_funcs=lambda completions, **kw: [0.0] * len(
        completions), args=_config(tmp_path, scale_rewards="batch", max_steps=1),
        train_dataset=_dataset(), processing_class=tokenizer, callbacks=[cb])  # fmt: skip
    assert cb.share_per_group
    cb.on_init_end(None, None, None)  # the same callback given to a plain trainer next
    assert not cb.share_per_group


def test_trl_batch_run_logs_no_degeneracy_share(tmp_path):
    """The repro's scenario, short: every group but the first has one reward."""
    g = 4

    def reward(completions, prompts, **kw):
        return [float(np.random.random() < 0.5) if i < g else float(int(p.split("+")[0]) % 2)
                for i, p in enumerate(prompts)]  # fmt: skip

    tokenizer, cb = _tokenizer(), PgrpoCallback(every=1, stop_on=("degeneracy",))
    args = _args(tmp_path, scale_rewards="batch", per_device_train_batch_size=16, max_steps=3,
                 max_completion_length=3, save_strategy="no", disable_tqdm=True)  # fmt: skip
    trainer = trl.GRPOTrainer(model=_model(tokenizer), reward_funcs=reward, args=args,
                              train_dataset=_dataset(64), processing_class=tokenizer,
                              callbacks=[cb])  # fmt: skip
    with pytest.warns(RuntimeWarning, match="not a share of groups"):
        trainer.train()
    logged = [e for e in trainer.state.log_history if "pgrpo/points" in e]
    assert logged and all("pgrpo/degeneracy" not in e for e in logged)


# --- F4: PgrpoGRPOConfig.pgrpo_reward_range ---------------------------------------------------


def _rising(n=40):
    rng = np.random.default_rng(0)
    return [{"reward": float(np.mean(rng.random(8) < min(1.0, 0.1 + 0.05 * s))),
             "learning_rate": 1e-6} for s in range(1, n + 1)]  # fmt: skip


def test_config_reward_range_is_read_as_the_argument_is(tmp_path):
    out = []
    for cls, cb_kw, cfg_kw in ((PgrpoGRPOConfig, {}, {"pgrpo_reward_range": [0, 1]}),
                               (trl.GRPOConfig, {"reward_range": (0, 1)}, {})):  # fmt: skip
        args, state = _args(tmp_path, cls, max_steps=200, **cfg_kw), TrainerState()
        cb = PgrpoCallback(every=1, **cb_kw)
        cb.on_train_begin(args, state, TrainerControl())
        logs = _feed(cb, args, state, _rising())
        out.append({k: v for k, v in logs.items() if k.startswith("pgrpo/forecast")})
    assert cb.hyperparameters.get("reward_min") is None  # the argument, not the args
    assert out[0] == out[1] and out[0]["pgrpo/forecast_hi"] <= 1.0


# --- F5: steps_to_90 past max_steps -----------------------------------------------------------


def _lr_decay_run(tmp_path, max_steps, upto):
    """The repro: linear lr decay to 0 at max_steps, reward exponential in the cumulative lr."""
    steps = np.arange(1, max_steps + 1)
    lr = 1e-5 * (1 - (steps - 1) / max_steps)
    reward = 0.2 + 0.7 * (1 - np.exp(-np.cumsum(lr) / 1e-5 / 60.0))
    reward += 0.01 * np.random.default_rng(1).standard_normal(max_steps)
    args = _args(tmp_path, learning_rate=1e-5, max_steps=max_steps)
    state, cb = TrainerState(), PgrpoCallback(every=1)
    state.max_steps = max_steps
    cb.on_train_begin(args, state, TrainerControl())
    rows = [{"reward": float(reward[i]), "learning_rate": float(lr[i])} for i in range(upto)]
    return cb, _feed(cb, args, state, rows)


def test_steps_to_90_past_the_end_is_said_not_given(tmp_path):
    with pytest.warns(RuntimeWarning, match="not reached within the run"):
        cb, logs = _lr_decay_run(tmp_path, 200, 80)
    assert logs["pgrpo/to90_past_end"] == 1.0 and "pgrpo/steps_to_90" not in logs
    assert any("past max_steps 200" in n and "first at step" in n for n in cb.report()["warnings"])


def test_steps_to_90_within_the_run_is_given(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cb, logs = _lr_decay_run(tmp_path, 2000, 80)
    assert logs["pgrpo/to90_past_end"] == 0.0 and 80 + logs["pgrpo/steps_to_90"] <= 2000


# --- F6: the report at each checkpoint, and across a resume ----------------------------------


def _flat(n, seed=0):
    rng = np.random.default_rng(seed)
    return [{"reward": 0.5 + 0.02 * rng.standard_normal()} for _ in range(n)]


def test_report_written_on_save_and_kept_across_a_resume(tmp_path):
    args, state = _args(tmp_path), TrainerState()
    path = tmp_path / "out" / "pgrpo_live_report.json"
    rows = _flat(40)
    cb = PgrpoCallback(every=1)
    cb.on_train_begin(args, state, TrainerControl())
    _feed(cb, args, state, rows[:20])
    cb.on_save(args, state, TrainerControl())  # checkpoint-20; then the run dies
    first = json.loads(path.read_text())
    assert len(first["assessments"]) == 20 and not list(path.parent.glob(".*.tmp"))
    _feed(cb, args, state, rows[20:30], start=21)
    cb.on_save(args, state, TrainerControl())  # checkpoint-30, resumed from below
    resumed = TrainerState()
    resumed.log_history = [dict(e) for e in state.log_history[:20]]
    cb2 = PgrpoCallback(every=1)
    cb2.on_train_begin(args, resumed, TrainerControl())
    _feed(cb2, args, resumed, rows[20:40], start=21)
    cb2.on_train_end(args, resumed, TrainerControl())
    report = json.loads(path.read_text())
    assert report["logged_steps"] == 40
    assert [a["step"] for a in report["assessments"]] == list(range(1, 41))


def test_resume_without_the_earlier_report_says_so(tmp_path):
    args, state = _args(tmp_path), TrainerState()
    state.log_history = [{**r, "step": s} for s, r in enumerate(_flat(20), 1)]
    cb = PgrpoCallback(every=1)
    cb.on_train_begin(args, state, TrainerControl())
    report = cb.report()
    kept = len(report["assessments"])
    assert kept < 20 and any(f"the {20 - kept} assessment(s) before the resume" in n
                             for n in report["warnings"])  # fmt: skip


def test_a_report_that_cannot_be_written_never_raises(tmp_path):
    (tmp_path / "file").write_text("")
    args, state = _args(tmp_path), TrainerState()
    cb = PgrpoCallback(every=1, report=str(tmp_path / "file" / "r.json"))
    cb.on_train_begin(args, state, TrainerControl())
    with pytest.warns(RuntimeWarning, match="report not written"):
        cb.on_save(args, state, TrainerControl())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once, not at every checkpoint
        cb.on_save(args, state, TrainerControl())
        cb.on_train_end(args, state, TrainerControl())
    assert len(cb.errors) == 3
