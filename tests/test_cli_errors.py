"""Every command fails on bad input the same way: one line `error: <problem>; <fix>` on stderr,
exit code 2, no traceback, nothing already done lost (`pgrpo.cli.common`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_checks import one_line_error
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app

FIX = Path(__file__).resolve().parent / "fixtures" / "logs"
runner = CliRunner()


@pytest.fixture(scope="module", autouse=True)
def _commands():
    _load_commands()


@pytest.fixture
def bad(tmp_path: Path) -> Path:
    """A folder of bad inputs: empty, binary, truncated, malformed YAML, a plain file."""
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "binary.jsonl").write_bytes(bytes(range(256)) * 8)
    full = (FIX / "trl_output" / "trainer_state.json").read_text()
    (tmp_path / "trl").mkdir()
    (tmp_path / "trl" / "trainer_state.json").write_text(full[: len(full) // 2])
    (tmp_path / "bad.yaml").write_text("model: [unclosed\n")
    (tmp_path / "opts.yaml").write_text("task:\n  name: arithmetic\n  options:\n    bogus: 1\n")
    (tmp_path / "afile").write_text("x")
    (tmp_path / "eval_bin.json").write_bytes(b"\xff\xfe\x00garbage")
    (tmp_path / "eval_trunc.json").write_text('{"kind": "pgrpo-eval", "results": [')
    return tmp_path


# (command line with {bad} for the bad-input folder, text the message must hold)
CASES = [
    ("diagnose {bad}/empty.jsonl", "empty file"),
    ("diagnose {bad}/binary.jsonl", "binary"),
    ("diagnose {bad}/trl", "not valid JSON"),
    ("diagnose {bad}/missing", "not found"),
    ("diagnose {bad}/afile", "unrecognised log format"),
    (f"diagnose {FIX}/pgrpo_run --eval-log {{bad}}/eval_bin.json", "not UTF-8"),
    (f"diagnose {FIX}/pgrpo_run --eval-log {{bad}}/eval_trunc.json", "eval_trunc.json"),
    (f"diagnose {FIX}/pgrpo_run --format nosuch", "unknown log reader"),
    ("report {bad}/empty.jsonl", "empty file"),
    ("report {bad}/binary.jsonl", "binary"),
    ("report {bad}/trl", "not valid JSON"),
    ("report {bad}/missing", "not found"),
    (f"report {FIX}/pgrpo_run --out {{bad}}/afile", "is a file"),
    (f"report {FIX}/pgrpo_run --eval-log {{bad}}/eval_trunc.json", "not valid JSON"),
    ("fit {bad}/missing", "not found"),
    (f"fit {FIX}/pgrpo_run --out {{bad}}/afile", "is a file"),
    ("predict --lr 0.027 --kappa 1 --group-size 1 --out {bad}/p", "G >= 2"),
    ("predict --lr 0.027 --kappa 1 --steps 0 --out {bad}/p", "steps=0"),
    ("predict --lr 0.027 --kappa 1 --steps -3 --out {bad}/p", "steps=-3"),
    ("train --config {bad}/bad.yaml", "malformed YAML"),
    ("train --config {bad}/opts.yaml", "unknown task.options 'bogus'"),
    ("train --config {bad}/missing.yaml", "not found"),
    ("train model.name=tiny run.output_dir={bad}/afile", "is a file"),
    ("train model.name={bad}/no_model", "no such model folder"),
    ("train nosuchkey=3", "unknown config key"),
    ("train optim.lr=abc", "optim.lr"),
    ("probe --config {bad}/bad.yaml", "malformed YAML"),
    ("probe --config {bad}/opts.yaml", "unknown task.options"),
    ("probe --run {bad}/missing", "not found"),
    ("gradrank --model {bad}/no_model", "no such model folder"),
    ("gradrank --task nosuch", "unknown task 'nosuch'"),
    ("gradrank --estimators nosuch", "unknown advantage estimator"),
    ("eval --from {bad}/eval_bin.json", "not UTF-8"),
    ("eval --from {bad}/eval_trunc.json", "not valid JSON"),
    ("eval --from {bad}/missing.json", "not found"),
    ("eval --model {bad}/no_model", "no such model folder"),
    ("eval --task nosuch", "unknown task"),
    ("eval --seeds a,b", "--seeds"),
    ("eval --model tiny --out {bad}/afile/eval.json", "is a file"),
    ("reproduce nosuch --out {bad}/r", "unknown"),
    ("reproduce threshold --out {bad}/afile", "is a file"),
]


@pytest.mark.parametrize(
    "line,needle", CASES, ids=[f"{c[0].split()[0]}-{i}" for i, c in enumerate(CASES)]
)
def test_bad_input_is_one_line_and_exit_2(bad, line, needle):
    res = runner.invoke(app, line.format(bad=bad).split())
    one_line_error(res, needle)


def test_bad_out_costs_nothing_already_done(bad):
    """An --out that is a file fails before the model is loaded or anything is sampled."""
    res = runner.invoke(app, ["eval", "--model", "tiny", "--out", f"{bad}/afile/x.json"])
    one_line_error(res, "afile")
    assert (bad / "afile").read_text() == "x"


def test_nan_probabilities_name_the_learning_rate(tmp_path, monkeypatch):
    """torch's own error for NaN sampling probabilities (raised here by the real
    torch.multinomial) becomes one line that names optim.lr."""
    import torch

    import pgrpo.train.trainer as trainer

    def diverged(*args, **kwargs):
        torch.multinomial(torch.tensor([[float("nan"), 1.0]]), 1)

    monkeypatch.setattr(trainer, "train", diverged)
    res = runner.invoke(app, ["train", "model.name=tiny", f"run.output_dir={tmp_path}"])
    one_line_error(res, "NaN", "optim.lr", after_progress=True)


def test_debug_env_shows_the_traceback(bad, monkeypatch):
    from pgrpo.cli.common import DEBUG_ENV

    monkeypatch.setenv(DEBUG_ENV, "1")
    res = runner.invoke(app, ["diagnose", str(bad / "empty.jsonl")])
    assert res.exit_code != 0 and res.exception is not None
    assert "empty file" in str(res.exception)


def test_bugs_are_not_disguised_as_input_errors(monkeypatch):
    """An exception that is not an input error keeps its traceback (exit 1)."""
    import pgrpo.diagnose as diag

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(diag, "diagnose", broken)
    res = runner.invoke(app, ["diagnose", str(FIX / "pgrpo_run")])
    assert res.exit_code == 1 and isinstance(res.exception, ZeroDivisionError)


def test_paths_with_markup_print_as_themselves(tmp_path):
    """`exp[lr=1e-5]` is a rich markup tag unless escaped."""
    run = tmp_path / "exp[lr=1e-5]"
    shutil.copytree(FIX / "pgrpo_run", run)
    for argv in (
        ["diagnose", str(run)],
        ["report", str(run), "--out", str(run / "rep")],
        ["fit", str(run), "--out", str(run / "fit")],
    ):
        res = CliRunner().invoke(app, argv, terminal_width=400)
        assert res.exit_code == 0, res.output
        assert "exp[lr=1e-5]" in res.output, res.output
    res = runner.invoke(app, ["diagnose", str(run / "missing[bold]")])
    one_line_error(res, "missing[bold]")


def test_json_output_is_strict(tmp_path):
    res = runner.invoke(app, ["diagnose", str(FIX / "pgrpo_run"), "--json"])
    assert res.exit_code == 0
    json.loads(res.stdout, parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))
