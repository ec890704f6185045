"""Defects an eighth hostile review of the `pgrpo` CLI found (2026-12-03); each test failed on the
code before its fix. Bad input: one `error:` line naming the problem and the fix, exit code 2,
nothing written."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app

_load_commands()
runner = CliRunner()


def _one_error_line(res) -> str:  # noqa: ANN001
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def _rising_csv(tmp_path, n: int = 30):  # noqa: ANN001, ANN202
    log = tmp_path / "log.csv"
    log.write_text("step,reward\n" + "".join(f"{i},{0.1 + 0.01 * i}\n" for i in range(1, n + 1)))
    return log


# --- 1. the reader's repairs: report says them as fit and diagnose do --------------------------


def test_report_prints_and_carries_what_the_reader_repaired(tmp_path):
    rows = [json.dumps({"step": i, "reward": 0.1 + 0.02 * i}) for i in range(1, 31)]
    rows.insert(4, "{not json")
    rows.append(json.dumps({"step": 10, "reward": 0.3}))  # a repeated step
    log = tmp_path / "metrics.jsonl"
    log.write_text("\n".join(rows) + "\n")
    expected = json.loads(runner.invoke(app, ["diagnose", str(log), "--json"]).stdout)["warnings"]
    assert len(expected) >= 2
    res = runner.invoke(app, ["report", str(log), "--out", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    assert [w for w in expected if f"warning: {w}" not in " ".join(res.output.split())] == []
    res = runner.invoke(app, ["report", str(log), "--out", str(tmp_path / "b"), "--json"])
    assert json.loads(res.stdout)["warnings"] == expected


# --- 2. one check of an eval JSON's per-problem counts -----------------------------------------


@pytest.mark.parametrize("c", [9, -1, 1.5, "x", None])
def test_eval_from_and_report_eval_log_refuse_the_same_counts(tmp_path, c):
    rec = {"name": "m@0/seed0", "step": 0, "seed": 0, "accuracy": 0.5, "pass_at_k": {"1": 0.5},
           "per_problem": [{"id": "0", "n": 4, "c": c}, {"id": "1", "n": 4, "c": 1}]}  # fmt: skip
    ev = tmp_path / "eval.json"
    ev.write_text(json.dumps({"kind": "pgrpo.eval", "results": [rec], "aggregate": {}}))
    log = _rising_csv(tmp_path)
    report = ["report", str(log), "--eval-log", str(ev), "--out", str(tmp_path / "rep")]
    for args in (
        ["eval", "--from", str(ev)],
        report,
        ["diagnose", str(log), "--eval-log", str(ev)],
    ):
        line = _one_error_line(runner.invoke(app, args))
        assert "problem 0" in line and "0 <= c <= n" in line and str(ev) in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.json", "log.csv"]


# --- 3. --problems beyond the split ------------------------------------------------------------


def test_eval_says_when_the_split_has_fewer_problems_than_asked():
    args = ["eval", "--model", "tiny", "--task-options", "{n_test: 3}", "--problems", "5",
            "--samples", "1", "--seeds", "0,1", "--tiny-warmup-steps", "0",
            "--max-new-tokens", "1", "--json"]  # fmt: skip
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    notes = [line for line in res.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "--problems 5" in notes[0] and "holds 3" in notes[0], res.stderr
    assert json.loads(res.stdout)["results"][0]["n_problems"] == 3


# --- 4. one line, before any model loads: model folders and seeds ------------------------------


def test_a_model_folder_without_config_is_named(tmp_path):
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "README").write_text("not a model")
    line = _one_error_line(runner.invoke(app, ["eval", "--model", str(tmp_path / "weights")]))
    assert "--model" in line and "no config.json" in line
    line = _one_error_line(runner.invoke(app, ["train", f"model={tmp_path / 'weights'}",
                                               f"run.output_dir={tmp_path / 'runs'}"]))  # fmt: skip
    assert "model.name" in line and "no config.json" in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "args",
    [["gradrank", "--seed", "-5"], ["gradrank", "--seed", "99999999999999999999"],
     ["probe", "--seed", "-1"], ["eval", "--problem-seed", "-1"],
     ["eval", "--seeds", "4294967296"], ["train", "model=tiny", "run.seed=-5"],
     ["train", "model=tiny", "run.seed=4294967296"], ["probe", "model=tiny", "run.seed=-1"],
     ["demo", "run.seed=-5"]],
)  # fmt: skip
def test_seeds_outside_what_the_generators_take_are_refused(tmp_path, args):
    where = ["--output-dir", str(tmp_path)] if args[0] == "demo" else []
    if args[0] == "train":
        where = [f"run.output_dir={tmp_path / 'runs'}"]
    line = _one_error_line(runner.invoke(app, [*args, *where]))
    assert "seed" in line and ("4294967295" in line or "greater than or equal to 0" in line), line
    assert list(tmp_path.iterdir()) == []


# --- 5. a reused --out ----------------------------------------------------------------------


def test_report_out_reused_drops_a_figure_it_no_longer_draws(tmp_path):
    log, out = _rising_csv(tmp_path), tmp_path / "rep"
    args = ["report", str(log), "--out", str(out), "--lr", "0.01", "--refresh-interval", "4",
            "--beta1", "0.9"]  # fmt: skip
    res = runner.invoke(app, [*args, "--kappa", "5", "--optimizer", "sgd_momentum"])
    assert res.exit_code == 0 and (out / "stability_margin.png").is_file(), res.output
    (out / "notes.txt").write_text("mine")  # not a name pgrpo writes: kept
    res = runner.invoke(app, [*args, "--json"])  # AdamW: no K*, no margin panel
    assert res.exit_code == 0, res.output
    assert "stability_margin" in json.loads(res.stdout)["missing"]
    assert not (out / "stability_margin.png").exists() and (out / "notes.txt").is_file()


# --- 6. predict with R0 = R_inf ---------------------------------------------------------------


def test_predict_from_the_plateau_has_no_inflection_time(tmp_path):
    args = ["predict", "--lr", "1e-3", "--kappa", "10", "--r0", "0.5", "--r-inf", "0.5",
            "--out", str(tmp_path)]  # fmt: skip
    data = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert data["inflection_time"] is None and data["final_mean"] == pytest.approx(0.5)
    assert data["tau"] > 0 and data["refresh_threshold"] > 1  # the dynamics are still defined
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "no inflection_time" in res.output


# --- 7. numbers with an underscore -------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "option"),
    [(["predict", "--lr", "1_000", "--kappa", "1e-5"], "--lr"),
     (["predict", "--steps=1_0"], "--steps"),
     (["fit", "LOG", "--lr", "1_0"], "--lr"), (["fit", "LOG", "--forecast-from", "0.5_0"],
     "--forecast-from"), (["diagnose", "LOG", "--kappa", "1_0"], "--kappa"),
     (["diagnose", "LOG", "--gpus", "1_0"], "--gpus"),
     (["report", "LOG", "--refresh-interval", "1_0"], "--refresh-interval"),
     (["eval", "--temperature", "1_0"], "--temperature"), (["eval", "--seeds", "1_0"], "--seeds")],
)  # fmt: skip
def test_numbers_written_with_an_underscore_are_refused(tmp_path, args, option):
    log = str(_rising_csv(tmp_path))
    out = ["--out", str(tmp_path / "out")] if args[0] in ("predict", "fit", "report") else []
    line = _one_error_line(runner.invoke(app, [log if a == "LOG" else a for a in args] + out))
    assert option in line and ("1_0" in line or "0.5_0" in line), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.csv"]


# --- 8. --json help -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["fit", "diagnose", "report", "predict", "eval", "gradrank", "probe", "train", "demo",
     "watch", "reproduce"],
)  # fmt: skip
def test_json_help_says_what_it_prints_and_flags_take_no_value(name):
    res = runner.invoke(app, [name, "--help"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.replace("│", " ").split())
    assert "as one line of JSON on stdout instead of text" in text.split("--json", 1)[1]
    assert "<bool>" not in text


def test_the_top_level_help_draws_no_value_for_its_flags():
    """`pgrpo --help` drew `--version <bool>` and `--help <bool>` (a docs audit, session 37);
    the subcommands' flags had lost it since 2026-12-02."""
    res = runner.invoke(app, ["--help"])
    assert res.exit_code == 0, res.output
    assert "--version" in res.output and "<bool>" not in res.output


# --- 9. a config key given twice --------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "key"),
    [(["train", "run.steps=1", "run.steps=0"], "run.steps"),
     (["train", "lr=1e-3", "optim.lr=0"], "optim.lr"),
     (["probe", "model=tiny", "group_size=2", "grpo.group_size=1"], "grpo.group_size"),
     (["demo", "run.steps=2", "steps=0"], "run.steps")],
)  # fmt: skip
def test_an_override_key_given_twice_is_refused(tmp_path, args, key):
    line = _one_error_line(runner.invoke(app, args + [f"run.output_dir={tmp_path}"]))
    assert f"{key} given twice" in line, line
    assert list(tmp_path.iterdir()) == []
