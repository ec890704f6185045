"""Defects a hostile review found in `pgrpo train`'s overrides and resume (2026-12-02, review B
items 5 and 14-16, 18); each test failed on the code before its fix. Bad input: one `error:` line
naming the problem and the fix, exit code 2, nothing written. A run folder that was copied,
renamed or moved resumes where it now is (docs/reliability.md, section 3)."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import TINY_CLI_ARGS
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.train.log import read_metrics
from pgrpo.train.trainer import TIMING_KEYS

_load_commands()
runner = CliRunner()

TINY = [*TINY_CLI_ARGS, "forecast_every=0"]
TINY_NO_OPTIONS = [a for a in TINY if not a.startswith("task.options")]


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("PGRPO_CACHE", str(tmp_path_factory.getbasetemp() / "pgrpo-cache"))


@pytest.fixture(scope="module")
def base_run(tmp_path_factory):
    """A finished 2-step tiny run with a checkpoint at each step; tests copy it."""
    root = tmp_path_factory.mktemp("base")
    out = runner.invoke(
        app,
        ["train", *TINY, f"run.output_dir={root}", "run.name=base", "steps=2",
         "checkpoint_every=1", "--json"],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    return root / "base"


def _copy(base_run, dest):
    shutil.copytree(base_run, dest)
    return dest


def _errors(out) -> list[str]:
    return [x for x in out.output.splitlines() if x.startswith("error:")]


def _one_error_line(out) -> str:
    """The failure is one `error:` line (beside the progress bar), exit 2, no traceback."""
    assert out.exit_code == 2, out.output
    assert len(_errors(out)) == 1 and "Traceback" not in out.output, out.output
    return _errors(out)[0]


def _log(run_dir):
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in read_metrics(run_dir)]


def _summary(out) -> dict:
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- item 5: a mapping and its sub-key in two overrides -----------------------------------------


@pytest.mark.parametrize(
    ("overrides", "lost"),
    [
        (["task.options.n=200", "task.options={levels: [1]}"], "task.options.n"),  # n dropped
        (["task.options={levels: [1], n: 200}", "task.options.n=100"], "task.options.n"),
        (["grpo.advantage_options.eps=1e-6", "grpo.advantage_options={}"],
         "grpo.advantage_options.eps"),
    ],
)  # fmt: skip
def test_a_mapping_and_its_sub_key_in_two_overrides_are_refused(tmp_path, overrides, lost):
    args = ["train", *TINY_NO_OPTIONS, *overrides, "steps=1", f"run.output_dir={tmp_path}"]
    line = _one_error_line(runner.invoke(app, args))
    assert f"{lost} given twice" in line and all(o in line for o in overrides), line
    assert "give each key once" in line
    assert list(tmp_path.iterdir()) == []


def test_a_sub_key_after_a_mapping_without_it_is_merged():
    from pgrpo.cli.train import load_run_config

    cfg = load_run_config(None, ["task.options={levels: [1]}", "task.options.n=200"])
    assert dict(cfg.task.options) == {"levels": [1], "n": 200}


# --- item 14: a copied, renamed or moved run folder resumes where it is -------------------------


def test_a_copied_renamed_or_moved_run_folder_resumes_where_it_is(base_run, tmp_path):
    renamed = _copy(base_run, tmp_path / "renamed")
    out = runner.invoke(
        app,
        ["train", *TINY, f"run.output_dir={tmp_path}", "run.name=renamed", "steps=3",
         "checkpoint_every=5", "--resume", "--json"],
    )  # fmt: skip
    assert _summary(out)["run_dir"] == str(renamed)
    said = " ".join(out.output.split())  # rich wraps the note lines
    assert "run.name 'base' -> 'renamed', run.checkpoint_every 1 -> 5" in said, said
    assert "name: renamed" in (renamed / "config.yaml").read_text()  # config.yaml says where

    moved = _copy(base_run, tmp_path / "elsewhere" / "moved")  # its config.yaml names base
    out = runner.invoke(
        app, ["train", "--config", str(moved / "config.yaml"), "steps=3", "--resume", "--json"]
    )
    assert _summary(out)["run_dir"] == str(moved)
    assert (base_run / "checkpoints" / "latest").read_text().strip() == "step-2"  # untouched
    assert (moved / "checkpoints" / "latest").read_text().strip() == "step-3"

    original = _copy(base_run, tmp_path / "base")  # the same run resumed in its own folder
    out = runner.invoke(
        app, ["train", "--config", str(original / "config.yaml"), "steps=3", "--resume", "--json"]
    )
    assert _summary(out)["run_dir"] == str(original)
    assert _log(renamed) == _log(moved) == _log(original)  # the same run, wherever it is


def test_resume_still_refuses_a_training_setting_and_a_second_folder(base_run, tmp_path):
    run = _copy(base_run, tmp_path / "r")
    config = run / "config.yaml"
    line = _one_error_line(
        runner.invoke(
            app, ["train", "--config", str(config), "steps=3", "torch_threads=2", "--resume"]
        )  # fmt: skip
    )
    assert "run.torch_threads: 1 -> 2" in line and "only run.steps" in line, line
    _copy(base_run, tmp_path / "other")
    line = _one_error_line(
        runner.invoke(
            app, ["train", "--config", str(config), "run.name=other", "steps=3", "--resume"]
        )  # fmt: skip
    )
    assert f"config of the run folder {run}" in line and "run.name=other" in line, line
    for folder in ("r", "other"):  # neither was resumed
        assert (tmp_path / folder / "checkpoints" / "latest").read_text().strip() == "step-2"


# --- item 15: --resume with --overwrite ----------------------------------------------------------


def test_resume_with_overwrite_is_refused(base_run, tmp_path):
    run = _copy(base_run, tmp_path / "base")
    before = (run / "metrics.jsonl").read_bytes()
    args = ["train", *TINY, f"run.output_dir={tmp_path}", "run.name=base", "steps=3"]
    line = _one_error_line(runner.invoke(app, [*args, "--resume", "--overwrite"]))
    assert "--resume and --overwrite" in line and "pass one of them" in line, line
    assert (run / "metrics.jsonl").read_bytes() == before
    assert (run / "checkpoints" / "latest").read_text().strip() == "step-2"


# --- items 16 and 18: a damaged state.pt or config.yaml -----------------------------------------


@pytest.mark.parametrize("damage", ["random", "cut"])
def test_a_damaged_state_file_is_damaged_and_nothing_is_said_updated(base_run, tmp_path, damage):
    run = _copy(base_run, tmp_path / "base")
    state = run / "checkpoints" / "step-2" / "state.pt"
    data = state.read_bytes()
    state.write_bytes(bytes(range(256)) * 20 if damage == "random" else data[:10000])
    config = (run / "config.yaml").read_text()
    args = ["train", *TINY, f"run.output_dir={tmp_path}", "run.name=base", "steps=3", "--resume"]
    out = runner.invoke(app, args)
    line = _one_error_line(out)
    assert f"{state} is damaged" in line and "--overwrite" in line, line
    assert "could run code" not in line and "try again" not in line
    assert "config.yaml is updated" not in out.output  # it is not: the resume was refused
    assert (run / "config.yaml").read_text() == config


def test_a_byte_changed_inside_a_tensor_of_the_state_file_is_damaged(base_run, tmp_path):
    """torch.load does not check the CRC-32s torch.save writes: a state.pt with one byte of a
    weight changed resumed silently from the changed weight (closing note of 2026-12-02)."""
    import zipfile

    run = _copy(base_run, tmp_path / "base")
    state = run / "checkpoints" / "step-2" / "state.pt"
    data = bytearray(state.read_bytes())
    with zipfile.ZipFile(state) as archive:  # the largest member: a weight or an AdamW moment
        info = max(archive.infolist(), key=lambda i: i.file_size)
    name_len, extra_len = (int.from_bytes(data[info.header_offset + k : info.header_offset + k + 2],
                                          "little") for k in (26, 28))  # fmt: skip
    start = info.header_offset + 30 + name_len + extra_len
    data[start + info.file_size // 2] ^= 0x10
    state.write_bytes(bytes(data))
    import torch

    torch.load(state, weights_only=True)  # torch itself loads it
    out = runner.invoke(app, ["train", "--config", str(run / "config.yaml"), "steps=3", "--resume"])
    line = _one_error_line(out)
    assert f"{state} is damaged" in line and "fails its CRC check" in line, line
    assert info.filename in line and "--overwrite" in line, line
    assert (run / "checkpoints" / "latest").read_text().strip() == "step-2"


@pytest.mark.parametrize("text", ["{{{ not yaml\n", "run: {steps: abc}\n"])
def test_a_damaged_config_yaml_on_resume_is_named(base_run, tmp_path, text):
    run = _copy(base_run, tmp_path / "base")
    (run / "config.yaml").write_text(text)
    args = ["train", *TINY, f"run.output_dir={tmp_path}", "run.name=base", "steps=3", "--resume"]
    line = _one_error_line(runner.invoke(app, args))
    assert str(run / "config.yaml") in line and "--overwrite" in line, line
    assert (run / "config.yaml").read_text() == text


# --- repeated options on every command ---------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["predict", "--lr", "1e-6", "--lr", "2e-6", "--beta1", "0.9", "--refresh-interval", "4",
          "--group-size", "8", "--kappa", "2e4"], "--lr"),
        (["fit", "LOG", "--forecast-from", "0.5", "--forecast-from=0.7"], "--forecast-from"),
        (["diagnose", "LOG", "--lr", "1e-6", "--lr", "1e-5"], "--lr"),
        (["report", "LOG", "--out", "a", "--out", "b"], "--out"),
        (["fit", "LOG", "--plot", "--no-plot"], "--plot/--no-plot"),
        (["train", "-c", "a.yaml", "--config", "b.yaml"], "--config/-c"),
    ],
)  # fmt: skip
def test_an_option_given_twice_is_refused(tmp_path, args, option):
    log = tmp_path / "log.csv"
    log.write_text("step,reward\n" + "".join(f"{i},{0.1 + 0.01 * i}\n" for i in range(1, 31)))
    args = [str(log) if a == "LOG" else a for a in args]
    res = runner.invoke(app, args)
    line = _one_error_line(res)
    assert f"option {option} given twice" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.csv"]


# --- the memory settings may change on resume (closing note of 2026-12-02, "left alone") ---------


def test_resume_may_switch_the_memory_settings_and_stays_the_same_run(base_run, tmp_path):
    """A run that ran out of memory resumes with activation checkpointing (and lean layers, and
    the allocator's release) switched on, and logs exactly what the run resumed with its own
    settings logs; the change is said and recorded in config.yaml."""
    same = _copy(base_run, tmp_path / "same")
    out = runner.invoke(
        app, ["train", "--config", str(same / "config.yaml"), "steps=3", "--resume", "--json"]
    )
    assert out.exit_code == 0, out.output
    switched = _copy(base_run, tmp_path / "switched")
    switches = ["grpo.activation_checkpointing=true", "grpo.lean_layers=true",
                "grpo.release_memory=true"]  # fmt: skip
    out = runner.invoke(
        app,
        ["train", "--config", str(switched / "config.yaml"), "steps=3", *switches, "--resume",
         "--json"],
    )  # fmt: skip
    assert _summary(out)["run_dir"] == str(switched)
    said = " ".join(out.output.split())
    assert "grpo.activation_checkpointing False -> True" in said, said
    assert "grpo.lean_layers False -> True" in said and "how it spends memory" in said, said
    saved = (switched / "config.yaml").read_text()
    assert "activation_checkpointing: true" in saved and "release_memory: true" in saved
    assert _log(switched) == _log(same)  # the same step 3, bit for bit
    line = _one_error_line(  # a setting that sums in another order still blocks the resume
        runner.invoke(
            app,
            [
                "train",
                "--config",
                str(_copy(base_run, tmp_path / "mb") / "config.yaml"),
                "steps=3",
                "grpo.micro_batch_size=1",
                "--resume",
            ],
        )  # fmt: skip
    )
    assert "grpo.micro_batch_size: None -> 1" in line and "grpo.lean_layers" in line, line


# --- overrides read numbers as YAML 1.2 does (closing note of 2026-12-02, "left alone") ---------


@pytest.mark.parametrize(
    ("override", "said"),
    [("optim.lr=1_000", "optim.lr='1_000': expected a number (write 1000, not 1_000)"),
     ("run.steps=1_0", "run.steps='1_0': expected a whole number, e.g. 8 (write 1000, not 1_000)"),
     ("run.steps=1:30", "run.steps='1:30': expected a whole number"),  # YAML 1.1: sexagesimal 90
     ("grpo.activation_checkpointing=yes",
      "grpo.activation_checkpointing='yes': expected true or false")],
)  # fmt: skip
def test_overrides_take_no_yaml_1_1_numbers_or_booleans(tmp_path, override, said):
    """`--lr 1_000` is refused on the command line; `optim.lr=1_000` in an override was read as
    1000 (YAML 1.1), `run.steps=1:30` as 90 and `yes` as true. One line, exit 2, nothing written."""
    key = override.split("=")[0].split(".")[-1]
    tiny = [a for a in TINY_NO_OPTIONS if not a.split("=")[0].endswith(key)]
    line = _one_error_line(runner.invoke(app, ["train", *tiny, override, f"output_dir={tmp_path}"]))
    assert said in line, line
    assert list(tmp_path.iterdir()) == []


def test_overrides_read_yaml_1_2_numbers_and_keep_dates_and_words_as_strings():
    from pgrpo.cli.train import load_run_config
    from pgrpo.train.yamlvalues import parse

    assert [parse(t) for t in ("1e-5", "010", "0x1f", "0o17", "true", "False", ".inf")] == [
        1e-5, 10, 31, 15, True, False, float("inf")]  # fmt: skip
    assert [parse(t) for t in ("1_000", "1:30", "yes", "on", "2026-12-03")] == [
        "1_000", "1:30", "yes", "on", "2026-12-03"]  # fmt: skip
    cfg = load_run_config(None, ["run.name=2026-12-03", "optim.lr=5e-6", "run.steps=010"])
    assert (cfg.run.name, cfg.optim.lr, cfg.run.steps) == ("2026-12-03", 5e-6, 10)


# --- the KL reference of a resumed tiny run (review 2026-12-03) ----------------------------------


def test_a_resumed_tiny_run_with_kl_keeps_the_warmed_up_reference(tmp_path):
    """Resuming skipped the tiny model's warm-up, and the KL reference was copied from that
    random, untrained network before the checkpoint replaced the policy's weights: step 3's KL
    0.198 where the uninterrupted run had 0.516. The resumed run must log what the uninterrupted
    one logs, KL included."""
    args = [*TINY, "kl_coef=0.01", "advantage=sign", f"run.output_dir={tmp_path}",
            "checkpoint_every=1"]  # fmt: skip
    full = runner.invoke(app, ["train", *args, "run.name=full", "steps=3", "--json"])
    assert full.exit_code == 0, full.output
    part = runner.invoke(app, ["train", *args, "run.name=res", "steps=2", "--json"])
    assert part.exit_code == 0, part.output
    res = runner.invoke(app, ["train", *args, "run.name=res", "steps=3", "--resume", "--json"])
    assert res.exit_code == 0, res.output
    a, b = _log(tmp_path / "full"), _log(tmp_path / "res")
    assert [r["kl"] for r in a] == [r["kl"] for r in b] and a[-1]["kl"] > 0
    assert a == b
