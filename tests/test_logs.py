"""Log readers: each framework's format on fixtures, auto-detection, repairs, fuzzing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgrpo.logs import LOG_READERS, LogFormatError, RewardLog, read_log

FIX = Path(__file__).resolve().parent / "fixtures" / "logs"


def test_registry_lists_every_format():
    assert set(LOG_READERS.names()) == {
        "pgrpo", "trl", "verl", "verl_console", "wandb", "csv", "tensorboard", "wandb_export",
        "trl_console",
    }  # fmt: skip
    with pytest.raises(KeyError, match="valid names"):
        read_log(FIX / "generic.csv", format="mlflow")


def test_pgrpo_run_dir_with_restart_nan_and_truncated_line():
    log = read_log(FIX / "pgrpo_run")
    assert log.format == "pgrpo" and log.reward_key == "reward"
    assert np.all(np.diff(log.step) > 0)
    assert log.step[0] == 1 and log.step[-1] == 80 and 30 not in log.step
    assert len(log) == 79
    text = " ".join(log.warnings)
    assert "1 malformed line" in text and "1 NaN" in text
    assert "5 row(s) replaced by a resume" in text
    # the resume's re-logged values are kept
    lines = [
        json.loads(x) for x in (FIX / "pgrpo_run" / "metrics.jsonl").read_text().splitlines()[:-1]
    ]
    last = {r["step"]: r["reward"] for r in lines}
    assert log.reward[log.step == 43][0] == pytest.approx(last[43])
    assert log.hyperparameters == {
        "lr": 1e-6, "beta1": 0.9, "refresh_interval": 1.0, "group_size": 8.0,
        "batch_prompts": 2.0,
    }  # fmt: skip
    for col in ("learning_rate", "frac_reward_zero_std", "reward_std", "entropy", "kl",
                "completion_length", "group_size"):  # fmt: skip
        assert log.columns[col].shape == log.step.shape
    assert log.metrics["dropped_nan"] == 1.0 and log.metrics["repeated_steps"] == 5.0


def test_trl_output_dir_logged_every_two_steps():
    log = read_log(FIX / "trl_output")
    assert log.format == "trl" and log.reward_key == "reward"
    assert len(log) == 40 and log.step[0] == 2 and log.metrics["log_every"] == 2.0
    assert any("every 2 steps" in w for w in log.warnings)
    assert log.hyperparameters["group_size"] == 8 and log.hyperparameters["beta1"] == 0.9
    assert log.hyperparameters["refresh_interval"] == 1  # 1 iteration x 4 / 4 accumulation
    assert log.learning_rate is not None and log.learning_rate.max() <= 1e-6
    same = read_log(FIX / "trl_output" / "trainer_state.json")
    np.testing.assert_array_equal(same.reward, log.reward)


def test_verl_file_logger():
    log = read_log(FIX / "verl_run" / "gsm8k_grpo.jsonl")
    assert log.format == "verl" and log.reward_key == "critic/score/mean"
    assert len(log) == 80
    h = log.hyperparameters
    assert h["group_size"] == 5 and h["batch_prompts"] == 32 and h["refresh_interval"] == 2
    assert h["beta1"] == 0.9 and "entropy" in log.columns and "kl" in log.columns


def test_verl_console_log():
    log = read_log(FIX / "verl_run" / "console.log")
    ref = read_log(FIX / "verl_run" / "gsm8k_grpo.jsonl")
    assert log.format == "verl_console" and log.reward_key == "critic/score/mean"
    np.testing.assert_allclose(log.reward, ref.reward)
    np.testing.assert_allclose(log.learning_rate, ref.learning_rate, rtol=1e-5)
    assert log.hyperparameters["group_size"] == 5  # from .hydra/config.yaml


def test_wandb_export_with_empty_cells():
    log = read_log(FIX / "wandb_export.csv")
    assert log.format == "wandb" and log.reward_key == "train/reward"
    assert len(log) == 78 and 10 not in log.step and 11 not in log.step
    assert any("2 row(s) with a missing" in w for w in log.warnings)
    assert log.step[0] == 1  # train/global_step is preferred over _step


def test_wandb_chart_panel_export():
    log = read_log(FIX / "wandb_panel.csv")
    ref = read_log(FIX / "verl_run" / "gsm8k_grpo.jsonl")
    assert log.format == "wandb" and log.reward_key == "train/reward" and len(log) == 80
    np.testing.assert_allclose(log.reward, ref.reward, atol=1e-6)
    assert any("2 runs" in w and "grpo-qwen" in w for w in log.warnings)


def test_generic_csv_needs_a_mapping_and_says_how():
    with pytest.raises(LogFormatError, match="--reward-column"):
        read_log(FIX / "generic.csv")
    log = read_log(FIX / "generic.csv", reward_key="acc", step_key="iteration")
    assert log.format == "csv" and len(log) == 80 and "learning_rate" in log.columns
    with pytest.raises(LogFormatError, match="not found"):
        read_log(FIX / "generic.csv", reward_key="accuracy")


def test_same_curve_across_formats():
    ref = read_log(FIX / "verl_run" / "gsm8k_grpo.jsonl")
    gen = read_log(FIX / "generic.csv", reward_key="acc", step_key="iteration")
    np.testing.assert_allclose(gen.reward, ref.reward, atol=1e-6)
    trl = read_log(FIX / "trl_output")
    np.testing.assert_allclose(trl.reward, ref.reward[1::2])


def test_rewards_per_function_are_summed(tmp_path):
    rows = [{"step": i, "rewards/acc/mean": 0.5, "rewards/format/mean": 0.25} for i in range(5)]
    p = tmp_path / "trainer_state.json"
    p.write_text(json.dumps({"log_history": rows}))
    log = read_log(p)
    assert log.reward_key == "rewards/acc/mean+rewards/format/mean"
    np.testing.assert_allclose(log.reward, 0.75)


@pytest.mark.parametrize(
    "name,content,match",
    [
        ("empty.jsonl", "", "empty file"),
        ("blank.jsonl", "\n \n", "empty file"),
        ("run.jsonl", "\x00\x01garbage", "binary data"),
        ("empty.csv", "", "empty"),
        ("trainer_state.json", "{not json", "not valid JSON"),
        ("trainer_state.json", '{"log_history": 3}', "log_history"),
        ("metrics.jsonl", '{"step": 1, "loss": 0.3}\n', "no reward column"),
        ("metrics.jsonl", '{"step": "a", "reward": "b"}\n', "no usable"),
        ("notes.txt", "hello", "unrecognised"),
    ],
)
def test_bad_files_give_clear_errors(tmp_path, name, content, match):
    p = tmp_path / name
    p.write_text(content)
    with pytest.raises(LogFormatError, match=match):
        read_log(p)


def test_missing_path():
    with pytest.raises(LogFormatError, match="no such file"):
        read_log("/nonexistent/metrics.jsonl")


_value = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5), st.lists(st.integers(), max_size=2),
)  # fmt: skip
_record = st.dictionaries(st.sampled_from(["step", "reward", "learning_rate", "kl", "x"]), _value)
_line = st.one_of(_record.map(json.dumps), st.text(max_size=30), st.just("{"), st.just("[1, 2]"))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(_line, max_size=25))
def test_fuzzed_jsonl_reads_or_fails_clearly(tmp_path, lines):
    p = tmp_path / "metrics.jsonl"
    p.write_text("\n".join(lines))
    try:
        log = read_log(p)
    except LogFormatError as exc:
        assert str(exc)
        return
    assert isinstance(log, RewardLog)
    assert np.all(np.isfinite(log.reward)) and np.all(np.diff(log.step) > 0)
    assert log.step.shape == log.reward.shape


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.lists(st.lists(st.one_of(st.text(max_size=4), st.floats().map(str)), min_size=1,
                           max_size=3), max_size=15)
)  # fmt: skip
def test_fuzzed_csv_reads_or_fails_clearly(tmp_path, rows):
    p = tmp_path / "export.csv"
    body = "\n".join(",".join(r) for r in rows)
    p.write_text("_step,train/reward,train/kl\n" + body)
    try:
        log = read_log(p)
    except LogFormatError as exc:
        assert str(exc)
        return
    assert np.all(np.isfinite(log.reward)) and np.all(np.diff(log.step) > 0)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=200))
def test_fuzzed_bytes_never_crash(tmp_path, data):
    for name in ("trainer_state.json", "run.jsonl", "hist.csv", "console.log"):
        p = tmp_path / name
        p.write_bytes(data)
        try:
            read_log(p)
        except LogFormatError:
            pass


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    parts=st.lists(
        st.tuples(st.sampled_from(["step", "critic/score/mean", "actor/lr", "x"]),
                  st.one_of(st.text(max_size=6), st.floats().map(repr))),
        max_size=6,
    ),
    n=st.integers(0, 5),
)  # fmt: skip
def test_fuzzed_console_lines_read_or_fail_clearly(tmp_path, parts, n):
    line = "(TaskRunner pid=1) step:3 - " + " - ".join(f"{k}:{v}" for k, v in parts)
    p = tmp_path / "console.log"
    p.write_text("\n".join([line] * n))
    try:
        log = read_log(p)
    except LogFormatError as exc:
        assert str(exc)
        return
    assert np.all(np.isfinite(log.reward))


def test_a_reused_trl_output_folder_reads_the_newest_checkpoint(tmp_path):
    """Review, 2026-12-05: the highest-numbered checkpoint was read even when an earlier run
    left it: a new run's checkpoint-200 lost to the old run's checkpoint-1000."""
    import os

    from pgrpo.logs import read_log

    def state(n: int, reward: float) -> str:
        rows = [{"step": s, "reward": reward, "loss": 0.0} for s in range(1, n + 1)]
        return json.dumps({"log_history": rows, "global_step": n})

    old, new = tmp_path / "checkpoint-1000", tmp_path / "checkpoint-200"
    for folder, n, r in ((old, 100, 0.1), (new, 20, 0.9)):
        folder.mkdir()
        (folder / "trainer_state.json").write_text(state(n, r))
    os.utime(old / "trainer_state.json", (1e9, 1e9))  # written long before the new run's
    log = read_log(tmp_path)
    assert log.step.size == 20 and log.reward[0] == 0.9
    os.utime(new / "trainer_state.json", (1e9, 1e9))  # equal times: the highest number
    assert read_log(tmp_path).step.size == 100


def test_reward_and_train_reward_read_the_same_whatever_the_column_order(tmp_path):
    """Review, 2026-12-05: with both `reward` and `train/reward` the rightmost was read."""
    from pgrpo.logs import read_log

    rows = [(s, 0.2 + 0.01 * s, 5.0) for s in range(1, 21)]
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("step,reward,train/reward\n" + "".join(f"{s},{r},{t}\n" for s, r, t in rows))
    b.write_text("step,train/reward,reward\n" + "".join(f"{s},{t},{r}\n" for s, r, t in rows))
    assert read_log(a).reward.tolist() == read_log(b).reward.tolist() == [r for _, r, _ in rows]


def test_older_trl_per_function_reward_keys_are_read(tmp_path):
    """Review, 2026-12-05: TRL <= 0.16 logs each reward function as `rewards/<name>` (no
    `/mean`); they were ignored, and diagnose asked for per-function rewards the log held."""
    from pgrpo.logs import read_log

    rows = [{"step": s, "reward": 0.1 * s, "rewards/accuracy_reward": 0.05 * s,
             "rewards/format_reward": 0.05 * s, "rewards/std": 0.1}
            for s in range(1, 11)]  # fmt: skip
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": rows}))
    cols = read_log(tmp_path).columns
    assert {"rewards/accuracy_reward/mean", "rewards/format_reward/mean"} <= set(cols)
    assert "rewards/std/mean" not in cols
    np.testing.assert_allclose(cols["rewards/format_reward/mean"], [0.05 * s for s in range(1, 11)])
