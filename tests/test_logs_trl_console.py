"""TRL / Unsloth console output (`pgrpo.logs.trl_console`): the `{'loss': ..., 'reward': ...}`
dicts a run prints, read whatever surrounds them (review, 2026-12-05: no reader took them)."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.logs import read_log

_load_commands()
runner = CliRunner()


def _console(path, n=40, eval_every=10):
    lines = ["Loading checkpoint shards: 100%|##########| 2/2 [00:03<00:00]",
             "{'model_name': 'x'}"]  # fmt: skip
    for s in range(1, n + 1):
        r = 0.2 + 0.5 * (1 - np.exp(-s / 10.0))
        lines.append(f" {s}%|#         | {s}/{n} [00:10<01:30, 2.1s/it]"
                     f"{{'loss': 0.01, 'grad_norm': np.float64(0.5), 'learning_rate': 1e-06, "
                     f"'reward': {r!r}, 'reward_std': tensor(0.3, device='cuda:0'), "
                     f"'rewards/format_reward': {r / 2!r}, 'epoch': {s / n:.2f}}}")  # fmt: skip
        if s % eval_every == 0:
            lines.append(f"{{'eval_loss': 0.5, 'eval_accuracy': {0.5 - s / 200!r}, "
                         f"'epoch': {s / n:.2f}}}")  # fmt: skip
    lines.append("{'train_runtime': 120.5, 'train_samples_per_second': 1.0, 'train_loss': 0.01}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_printed_dicts_are_read_in_order_with_their_evals(tmp_path):
    log = read_log(_console(tmp_path / "train.log"))
    assert log.format == "trl_console"
    assert log.step.tolist() == list(map(float, range(1, 41)))
    np.testing.assert_allclose(log.reward, [0.2 + 0.5 * (1 - np.exp(-s / 10.0))
                                            for s in range(1, 41)])  # fmt: skip
    np.testing.assert_allclose(log.columns["reward_std"], 0.3)
    acc = log.columns["eval/accuracy"]
    assert np.flatnonzero(np.isfinite(acc)).tolist() == [9, 19, 29, 39]  # steps 10, 20, 30, 40
    assert "rewards/format_reward/mean" in log.columns or "rewards/format_reward" in log.columns
    assert any("progress bar's counts" in w for w in log.warnings)


def test_diagnose_reads_a_console_log_and_a_jsonl_is_not_taken_for_one(tmp_path):
    res = runner.invoke(app, ["diagnose", str(_console(tmp_path / "out.txt")), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output[res.output.index("{") :])
    assert doc["progress"]["label"] in ("learning", "plateau")
    jsonl = tmp_path / "metrics.log"
    jsonl.write_text("".join(json.dumps({"step": s, "reward": 0.1 * s}) + "\n" for s in range(9)))
    from pgrpo.logs.trl_console import detect_trl_console

    assert not detect_trl_console(jsonl)


def test_text_that_only_looks_like_code_is_not_run(tmp_path):
    """The values are literals; anything else in a printed dict is no number, never evaluated."""
    path = tmp_path / "evil.log"
    path.write_text("".join(f"{{'reward': {0.1 * s}, 'x': __import__('os').getcwd()}}\n"
                            for s in range(1, 12)))  # fmt: skip
    res = runner.invoke(app, ["diagnose", str(path)])
    assert res.exit_code == 2  # not a dict of literals: no record, one line


def _bar(s: int, total: int) -> str:
    return f"\r {100 * s // total}%|#    | {s}/{total} [00:10<01:30, 2.1s/it]"


def _printed(s: int) -> str:
    return f"{{'loss': 0.0, 'reward': {0.1 + s / 100!r}, 'epoch': 0.1}}"


def test_the_step_is_the_progress_bar_count_before_each_dict(tmp_path):
    """logging_steps 5 of 60: the bar passes 1..5 before the first dict, which is step 5, not
    1. An eval bar of its own total after each eval does not move the training steps."""
    lines = ["Loading checkpoint shards: 100%|##| 2/2 [00:03<00:00]"]
    for s in range(1, 61):
        line = _bar(s, 60)
        if s % 5 == 0:
            line += "\n" + _printed(s)
        if s % 20 == 0:
            line += "\n" + "".join(_bar(k, 8) for k in range(1, 9)) + "\n{'eval_loss': 0.4}"
        lines.append(line)
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    log = read_log(path)
    assert log.step.tolist() == [float(s) for s in range(5, 61, 5)]
    np.testing.assert_allclose(log.reward, [0.1 + s / 100 for s in range(5, 61, 5)])
    assert np.flatnonzero(np.isfinite(log.columns["eval/loss"])).tolist() == [3, 7, 11]
    assert any("progress bar's counts" in w for w in log.warnings)


def test_without_a_bar_count_before_every_dict_the_step_is_the_order(tmp_path):
    """tqdm off, a dict without a count of its own, or counts that are no training bar's (a
    generation bar finished at 8/8 before each dict): the dicts' order, and the warning says
    why. Counts that go back (a resumed run) are steps: tests/test_logs_review41.py."""
    cases = {
        "no_bars": ([_printed(s) for s in range(1, 13)], "carry no step"),
        "one_missing": (
            [_bar(s, 12) + "\n" + _printed(s) if s != 7 else _printed(s) for s in range(1, 13)],
            "carry no step",
        ),
        "not_a_bar": ([_bar(8, 8) + "\n" + _printed(s) for s in range(12)], "do not read as"),
    }
    for name, (lines, why) in cases.items():
        path = tmp_path / f"{name}.log"
        path.write_text("\n".join(lines) + "\n")
        log = read_log(path)
        assert log.step.tolist() == [float(s) for s in range(1, 13)], name
        assert any(why in w for w in log.warnings), name
