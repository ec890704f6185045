"""Defects the review of issue #13 left open (2026-12-02): an undefined R^2 on a constant
reward, the remaining gain of a curve that never saturates, an optimizer the model does not
know, where `diagnose` and `report` take the run's settings from, an empty run folder. Each
test goes through the CLI (or the library for library behaviour) and fails on the code before."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from cli_checks import one_line_error
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app

runner = CliRunner()
FIX = Path(__file__).parent / "fixtures" / "logs"


@pytest.fixture(scope="module", autouse=True)
def _commands():
    _load_commands()


def _csv(path: Path, reward: np.ndarray) -> Path:
    rows = [f"{i},{r!r}" for i, r in enumerate(reward.tolist(), start=1)]
    path.write_text("step,reward\n" + "\n".join(rows) + "\n")
    return path


def _json(*args: str) -> dict:
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _lion_run(tmp_path: Path) -> Path:
    run = tmp_path / "lion_run"
    shutil.copytree(FIX / "pgrpo_run", run)
    with (run / "config.yaml").open("a") as fh:
        fh.write("optim:\n  name: lion\n")
    return run


# --- 3. an optimizer the model does not know ------------------------------------------------------


def test_an_unknown_optimizer_in_the_log_falls_back_to_the_free_fit(tmp_path):
    """Before: `fit` stopped with exit 2 and a message that did not mention --optimizer."""
    data = _json("fit", str(_lion_run(tmp_path)), "--no-plot")
    s = data["settings"]
    assert s["values"]["optimizer"] == "lion" and s["sources"]["optimizer"] == "log config"
    assert s["metrics"]["closed_form_fitted"] == 0.0
    note = next(n for n in s["notes"] if "'lion'" in n)
    assert "--optimizer" in note and "sgd_momentum" in note and "free fit" in note
    assert data["constrained"] is None and data["model"].startswith("rom")
    assert "preferred" not in data["metrics"]


def test_an_unknown_optimizer_on_the_command_line_names_the_option(tmp_path):
    res = runner.invoke(app, ["fit", str(FIX / "pgrpo_run"), "--out", str(tmp_path),
                              "--optimizer", "lion"])  # fmt: skip
    one_line_error(res, "--optimizer 'lion'", "adam", "sgd_momentum")


# --- 5. a folder without a log ------------------------------------------------------------------


@pytest.mark.parametrize("command", ["fit", "diagnose", "report"])
def test_an_empty_folder_says_it_has_no_log_file(tmp_path, command):
    """Before: 'unrecognised log format; pass format= ...'."""
    folder = tmp_path / "empty"
    folder.mkdir()
    res = runner.invoke(app, [command, str(folder), "--out", str(tmp_path / "o")]
                        if command != "diagnose" else [command, str(folder)])  # fmt: skip
    line = one_line_error(res, f"{folder} has no log file", "looked for", "metrics.jsonl")
    assert "unrecognised" not in line


def test_a_folder_of_other_files_says_what_it_holds(tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    _csv(folder / "curve.csv", np.linspace(0, 1, 20))
    res = runner.invoke(app, ["fit", str(folder), "--out", str(tmp_path)])
    one_line_error(res, "has no log file pgrpo recognises", "it holds curve.csv")


# --- 1. a constant reward: R^2 undefined ---------------------------------------------------------


@pytest.mark.parametrize("n", [12, 40])
def test_a_constant_reward_has_an_undefined_r2_and_no_intervals(tmp_path, n):
    """Before: R^2 1.0000 on 40 steps, 0.0000 on 12, and tau = 0.2 +- 0."""
    path = _csv(tmp_path / "c.csv", np.full(n, 0.5))
    data = _json("fit", str(path), "--no-plot")
    for fit in (data, *data["baselines"].values()):
        assert fit["r2"] is None, fit["model"]
        assert fit["metrics"]["r2_undefined"] == "the reward never changed: nothing to fit"
        assert all(v is None for v in fit["stderr"].values()), fit["stderr"]
    text = runner.invoke(app, ["fit", str(path), "--no-plot"]).output
    assert "n/a" in text and "nothing to fit" in text and "+-0" not in text
    ev = _json("diagnose", str(path))["progress"]["evidence"]
    assert ev["fit_r2"] is None and ev["fit_r2_undefined"].startswith("the reward never")
    rep = _json("report", str(path), "--out", str(tmp_path / "rep"))
    assert rep["fit"]["r2"] is None
    assert "n/a (the reward never changed" in Path(rep["html"]).read_text()


def test_fit_curve_r2_is_undefined_only_without_variance():
    from pgrpo.dynamics import fit_curve

    step = np.arange(20.0)
    assert np.isnan(fit_curve(step, np.full(20, -3.0), "exponential").r2)
    assert fit_curve(step, 1 - np.exp(-step / 5), "exponential").r2 > 0.999


# --- 2. a curve that never saturates --------------------------------------------------------------


@pytest.mark.parametrize("slope", [0.01, -0.02, 3.0])
def test_a_straight_line_gets_no_made_up_remaining_gain(tmp_path, slope):
    """Before: the exponential's R_inf stopped on its box (the data range + 3 ranges), tau at
    136 (the best tau given that R_inf, not the bound 1950: the bound needs R_inf ~ 19.6), and
    `diagnose` said '+1.15 more within ~306 steps'."""
    path = _csv(tmp_path / "line.csv", 0.1 + slope * np.arange(40.0))
    doc = _json("diagnose", str(path))
    ev = doc["progress"]["evidence"]
    assert ev["fit_gain_identified"] == 0.0
    assert ev["remaining_gain"] is None and ev["steps_to_90pct"] is None
    if doc["progress"]["label"] == "learning":
        assert "no saturation within the data: the gain is not identified" in doc["progress"][
            "summary"]  # fmt: skip


def test_a_saturating_curve_keeps_its_remaining_gain(tmp_path):
    t = np.arange(60.0)
    path = _csv(tmp_path / "sat.csv", 0.2 + 0.6 * (1 - np.exp(-t / 40)))
    ev = _json("diagnose", str(path))["progress"]["evidence"]
    assert "fit_gain_identified" not in ev
    assert ev["remaining_gain"] == pytest.approx(0.6 * np.exp(-59 / 40), rel=0.02)


# --- 4. where diagnose takes the run's settings from ---------------------------------------------


def test_diagnose_reports_the_same_settings_as_fit():
    """Before: `diagnose` said nothing about where its settings came from."""
    args = [str(FIX / "pgrpo_run"), "--lr", "2e-6", "--optimizer", "sgd_momentum"]
    fit = _json("fit", *args, "--no-plot")["settings"]
    diag = _json("diagnose", *args)["settings"]
    assert diag == fit and diag["sources"]["lr"] == "command line"
    text = runner.invoke(app, ["diagnose", *args]).output
    assert "settings: lr 2e-06 (command line)" in text


def test_report_takes_the_same_settings_options_and_agrees_with_fit(tmp_path):
    """Before: `report` had no settings options (exit 2 on --lr) and stated no sources."""
    args = [str(FIX / "pgrpo_run"), "--lr", "2e-6", "--optimizer", "sgd_momentum"]
    fit = _json("fit", *args, "--no-plot")
    rep = _json("report", *args, "--out", str(tmp_path / "rep"))
    assert rep["settings"] == fit["settings"]
    assert rep["fit"]["r2"] == pytest.approx(fit["r2"], rel=1e-9)
    assert rep["fit"]["metrics"]["preferred"] == fit["metrics"]["preferred"]
    page = Path(rep["html"]).read_text()
    assert "Settings: lr 2e-06 (command line)" in page and "sgd_momentum" in page


def test_report_of_a_log_naming_an_unknown_optimizer_keeps_its_fit(tmp_path):
    """Before: the page said 'fit failed (ValueError: optimizer 'lion' has no reduction...)'."""
    rep = _json("report", str(_lion_run(tmp_path)), "--out", str(tmp_path / "rep"))
    assert rep["fit"] is not None and rep["fit_notes"] == []
    assert any("'lion'" in n for n in rep["settings"]["notes"])


def test_fit_diagnose_and_report_share_one_definition_of_the_settings_options():
    import typer.main

    cmds = typer.main.get_command(app).commands
    flags = ("--lr", "--beta1", "--refresh-interval", "--group-size", "--batch-prompts",
             "--optimizer")  # fmt: skip

    def spec(name: str) -> dict:
        return {o: p.help for p in cmds[name].params for o in p.opts if o in flags}

    assert spec("fit") == spec("diagnose") == spec("report") and set(spec("fit")) == set(flags)


def test_a_constant_reward_gets_no_constrained_comparison(tmp_path):
    """Before: 'constrained (...): R^2 -, ... constrained preferred, closed form consistent
    (p 1); kappa 512.8 [0, -]' on a reward that never moved."""
    path = _csv(tmp_path / "c.csv", np.full(40, 0.5))
    data = _json("fit", str(path), "--no-plot", "--lr", "1e-6", "--beta1", "0.9")
    assert data["constrained"] is None and "preferred" not in data["metrics"]


@pytest.mark.parametrize("given", [(), ("--lr", "1e-6", "--beta1", "0.9")])
def test_a_constant_reward_has_no_identified_closed_form_or_aic(tmp_path, given):
    """Before (2026-12-02): settings said closed_form_fitted 1 (lr, beta1 known) and every
    model an AIC of about -27770 (a log(1e-300) floor: zero residual variance)."""
    path = _csv(tmp_path / "c.csv", np.full(40, 0.5))
    data = _json("fit", str(path), "--no-plot", *given)
    m = data["settings"]["metrics"]
    assert m["closed_form_fitted"] == 0.0 and m["closed_form_identified"] == 0.0
    (note,) = [n for n in data["settings"]["notes"] if "not identified" in n]
    assert note.startswith("closed form") and "AIC comparison" in note and "never changed" in note
    assert not any("--lr" in n or "--beta1" in n for n in data["settings"]["notes"])
    for fit in (data, *data["baselines"].values()):
        assert fit["aic"] is None and fit["bic"] is None, fit["model"]
        assert "not identified" in fit["metrics"]["aic_undefined"]
    text = " ".join(runner.invoke(app, ["fit", str(path), "--no-plot", *given]).output.split())
    assert text.count("and the AIC comparison not identified") == 1 and "-2777" not in text
    rep = _json("report", str(path), "--out", str(tmp_path / "rep"), *given)
    assert rep["settings"]["metrics"]["closed_form_identified"] == 0.0
    assert "AIC comparison not identified" in Path(rep["html"]).read_text()


def test_a_varying_reward_keeps_its_closed_form_and_aic(tmp_path):
    step = np.arange(1.0, 41.0)
    path = _csv(tmp_path / "v.csv", 0.2 + 0.5 * (1 - np.exp(-step / 8)) + 0.01 * np.sin(step))
    data = _json("fit", str(path), "--no-plot", "--lr", "1e-6", "--beta1", "0.9")
    m = data["settings"]["metrics"]
    assert m["closed_form_fitted"] == 1.0 and "closed_form_identified" not in m
    assert data["constrained"] is not None and np.isfinite(data["aic"])
    assert "aic_undefined" not in data["metrics"]


def test_bench_real_runs_keeps_an_undefined_r2_as_null():
    import importlib.util

    from pgrpo.logs import RewardLog

    bench = Path(__file__).parents[1] / "bench" / "real_runs.py"
    spec = importlib.util.spec_from_file_location("real_runs_bench", bench)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    log = RewardLog(np.arange(40.0), np.full(40, 0.5), {}, {}, (), "csv", "x", "reward")
    row = mod.forecast_row(log)
    assert row["r2"] is None and row["err"] == 0.0
    json.dumps(row, allow_nan=False)


def test_report_of_a_folder_without_a_log_creates_nothing_there(tmp_path):
    """Before (2026-12-02): the default --out RUN_DIR/report was created before the log was
    looked for, so the folder was left holding an empty report/ (and a second call said 'it holds
    report')."""
    folder = tmp_path / "empty"
    folder.mkdir()
    for _ in range(2):
        res = runner.invoke(app, ["report", str(folder)])
        line = one_line_error(res, f"{folder} has no log file", "looked for")
        assert "it holds" not in line
    assert list(folder.iterdir()) == []
