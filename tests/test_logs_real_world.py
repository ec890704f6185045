"""Logs as real users' tools write them (a hostile review of the readers, 2026-12-03): a UTF-8
byte-order mark, European Excel's semicolons, UTF-16 and binary files named .csv, W&B exports
whose own `_step` counts train and eval rows, chart-panel exports without a `train/` prefix,
rows out of order, a TRL folder whose top-level trainer_state.json is left from an earlier run, a
TensorBoard run resumed into its folder, JSONL whose first record has no reward, verl console
logs behind long start-up output or with coloured values. Each either reads the numbers that were
written (with a warning where the reader repaired something) or fails with one line that says
what the file is and what to do. Every case failed (misread silently, or refused) before."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from pgrpo.logs import LogFormatError, read_log

STEPS = np.arange(10, 1010, 10)
REWARD = 0.2 + 0.6 * (1 - np.exp(-STEPS / 300.0))


def _csv(rows, sep=","):
    return "\n".join(sep.join(str(v) for v in r) for r in rows) + "\n"


def _check(log, steps=STEPS, reward=REWARD):
    np.testing.assert_array_equal(log.step, steps)
    np.testing.assert_allclose(log.reward, reward)


def test_a_byte_order_mark_is_skipped_by_every_reader(tmp_path):
    """'\\ufeffstep' lost the step column (the record order was used: k 10x too large), a BOM
    before `reward` lost the reward, TRL's JSON was refused and a JSONL's first row dropped."""
    bom = "\ufeff"
    rows = [("step", "reward"), *zip(STEPS, REWARD, strict=True)]
    (tmp_path / "a.csv").write_text(bom + _csv(rows), encoding="utf-8")
    _check(read_log(tmp_path / "a.csv"))
    flipped = [("reward", "step"), *zip(REWARD, STEPS, strict=True)]
    (tmp_path / "b.csv").write_text(bom + _csv(flipped), encoding="utf-8")
    _check(read_log(tmp_path / "b.csv"))
    lines = [
        json.dumps({"step": int(s), "reward": float(r)}) for s, r in zip(STEPS, REWARD, strict=True)
    ]
    (tmp_path / "c.jsonl").write_text(bom + "\n".join(lines) + "\n", encoding="utf-8")
    log = read_log(tmp_path / "c.jsonl")
    _check(log)
    assert not any("malformed" in w for w in log.warnings), log.warnings  # row 1 was lost
    trl = tmp_path / "trl"
    trl.mkdir()
    history = [{"step": int(s), "reward": float(r)} for s, r in zip(STEPS, REWARD, strict=True)]
    (trl / "trainer_state.json").write_text(bom + json.dumps({"log_history": history}))
    _check(read_log(trl))


def test_semicolon_csv_is_read(tmp_path):
    rows = [("step", "reward"), *zip(STEPS, REWARD, strict=True)]
    (tmp_path / "semi.csv").write_text(_csv(rows, ";"))
    _check(read_log(tmp_path / "semi.csv"))


def test_utf16_and_binary_csv_get_one_clear_line(tmp_path):
    rows = [("step", "reward"), *zip(STEPS, REWARD, strict=True)]
    (tmp_path / "u.csv").write_text(_csv(rows), encoding="utf-16")
    with pytest.raises(LogFormatError, match="UTF-16 text.*save it as UTF-8"):
        read_log(tmp_path / "u.csv")
    (tmp_path / "b.csv").write_bytes(bytes(range(256)) * 10)
    with pytest.raises(LogFormatError, match="binary data"):  # not 'keys present: ^@^A^B'
        read_log(tmp_path / "b.csv")


def test_wandb_export_uses_the_trainers_step_not_wandbs_own(tmp_path):
    """W&B's `_step` counts every log call: with eval rows between train rows it runs twice as
    fast as `trainer/global_step`, and every step read double."""
    rows = [("_step", "trainer/global_step", "train/reward", "val/reward")]
    for i, (s, r) in enumerate(zip(STEPS, REWARD, strict=True)):
        rows += [(2 * i, s, r, ""), (2 * i + 1, s, "", 0.5)]
    (tmp_path / "w.csv").write_text(_csv(rows))
    log = read_log(tmp_path / "w.csv")
    _check(log)


def test_wandb_panel_export_without_a_train_prefix_is_a_wandb_export(tmp_path):
    """`Step, <run> - critic/score/mean, ...__MIN, ...__MAX`: a verl run's chart export."""
    key = "qwen-grpo - critic/score/mean"
    rows = [("Step", key, key + "__MIN", key + "__MAX")]
    rows += [(s, r, r - 0.1, r + 0.1) for s, r in zip(STEPS, REWARD, strict=True)]
    (tmp_path / "panel.csv").write_text(_csv(rows))
    log = read_log(tmp_path / "panel.csv")
    assert log.format == "wandb"
    _check(log)


def test_rows_out_of_order_are_sorted_with_a_warning(tmp_path):
    rows = [("step", "reward"), *zip(STEPS[::-1], REWARD[::-1], strict=True)]
    (tmp_path / "r.csv").write_text(_csv(rows))
    log = read_log(tmp_path / "r.csv")
    _check(log)
    assert "steps out of order in the file: sorted by step" in log.warnings


def test_a_stale_top_level_trainer_state_is_not_read_over_a_newer_checkpoint(tmp_path):
    """TRL writes the top-level trainer_state.json when training ends; one older than the latest
    checkpoint is an earlier run's, and was read (40 steps) over the newer run (100 steps)."""
    old = [{"step": s, "reward": 0.1} for s in range(1, 41)]
    new = [{"step": int(s), "reward": float(r)} for s, r in zip(STEPS, REWARD, strict=True)]
    (tmp_path / "checkpoint-1000").mkdir()
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": old}))
    (tmp_path / "checkpoint-1000" / "trainer_state.json").write_text(
        json.dumps({"log_history": new})
    )
    past = os.stat(tmp_path / "trainer_state.json").st_mtime - 2 * 86400
    os.utime(tmp_path / "trainer_state.json", (past, past))
    log = read_log(tmp_path)
    _check(log)
    assert any("top-level trainer_state.json is older" in w for w in log.warnings)
    os.utime(tmp_path / "trainer_state.json")  # a finished run: the top level is the newest
    log = read_log(tmp_path)
    assert log.step.size == 40 and not any("older" in w for w in log.warnings)
    now = os.stat(tmp_path / "trainer_state.json").st_mtime  # a copy without times: as before
    os.utime(tmp_path / "checkpoint-1000" / "trainer_state.json", (now, now))
    assert read_log(tmp_path).step.size == 40


def test_a_tensorboard_run_resumed_into_its_folder_reads_like_the_other_readers(tmp_path):
    """The second event file re-logs steps 300-800 (a resume from checkpoint 300): the first
    file's steps from 300 on, 810-1000 included, are a discarded trajectory, as in a CSV (they
    were kept, with "repeated step(s) (a restart?)", until review 41)."""
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    for lo, hi, shift in ((10, 1000, 0.0), (300, 800, 0.1)):
        writer = SummaryWriter(str(tmp_path))
        for s, r in zip(STEPS, REWARD, strict=True):
            if lo <= s <= hi:
                writer.add_scalar("train/reward", r + shift, int(s))
        writer.close()
    log = read_log(tmp_path)
    assert any("replaced by a resume" in w and "from 1000 to 300" in w for w in log.warnings)
    assert log.reward[STEPS.tolist().index(500)] == pytest.approx(REWARD[49] + 0.1)
    assert log.step[-1] == 800


def test_jsonl_whose_first_record_has_no_reward_is_read(tmp_path):
    lines = [json.dumps({"_step": 0, "system/gpu": 1.0})]
    lines += [json.dumps({"_step": int(s), "train/reward": float(r)})
              for s, r in zip(STEPS, REWARD, strict=True)]  # fmt: skip
    (tmp_path / "h.jsonl").write_text("\n".join(lines) + "\n")
    _check(read_log(tmp_path / "h.jsonl"))


def test_verl_console_log_behind_long_start_up_output_and_with_colours(tmp_path):
    head = "".join(f"INFO 12-03 vllm engine: loading shard {i} ...\n" for i in range(30_000))
    body = "".join(f"(TaskRunner pid=1) step:{s} - critic/score/mean:\x1b[32m{r}\x1b[0m - "
                   f"actor/lr:1e-06\n" for s, r in zip(STEPS, REWARD, strict=True))  # fmt: skip
    (tmp_path / "train.log").write_text(head + body)
    assert len(head) > 1 << 20
    log = read_log(tmp_path / "train.log")
    assert log.format == "verl_console"
    _check(log)


def test_an_unrecognised_file_names_the_cli_option_and_every_format(tmp_path):
    (tmp_path / "x.log").write_text("nothing a reader knows\n")
    with pytest.raises(LogFormatError) as err:
        read_log(tmp_path / "x.log")
    assert "--format" in str(err.value) and "tensorboard" in str(err.value)
