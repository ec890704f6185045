"""`pgrpo fit` given the run's settings, a forecast the log is too short for, run folders of every
format, and one-line usage errors (defects found by the acceptance review of issue #13,
2026-12-02). Each test goes through the CLI and fails on the code before the fix."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from cli_checks import one_line_error
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app

runner = CliRunner()
FIX = Path(__file__).parent / "fixtures" / "logs"
FOLDERS = sorted(p.name for p in FIX.iterdir() if p.is_dir())
SHIBUKI = "curves/cs336_shibuki_no_std_norm.csv"  # logs lr, not beta1 nor the optimizer


@pytest.fixture(scope="module", autouse=True)
def _commands():
    _load_commands()


def _fit(*args: str) -> dict:
    res = runner.invoke(app, ["fit", *args, "--no-plot", "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


# --- 1. the run's settings -----------------------------------------------------------------------


def test_fit_without_beta1_says_why_the_closed_form_is_not_fitted(shared_data):
    """Before: no constrained line and no word on why (the log has lr but no beta1)."""
    data = _fit(str(shared_data / SHIBUKI))
    s = data["settings"]
    assert data["constrained"] is None and "preferred" not in data["metrics"]
    assert s["values"]["lr"] == pytest.approx(4e-5) and s["sources"]["lr"] == "log column"
    assert s["values"]["beta1"] is None and "beta1" not in s["sources"]
    assert any("not fitted" in n and "--beta1" in n for n in s["notes"]), s["notes"]
    assert s["metrics"]["closed_form_fitted"] == 0.0


def test_fit_beta1_on_the_command_line_fits_the_closed_form(shared_data):
    """Before: `--beta1` was no option of `fit` (exit 2)."""
    log = str(shared_data / SHIBUKI)
    data = _fit(log, "--beta1", "0.9")
    assert data["constrained"] is not None and data["metrics"]["preferred"] in (
        "free",
        "constrained",
    )
    assert data["settings"]["sources"]["beta1"] == "command line"
    lo, k, hi = (data["metrics"][n] for n in ("kappa_lo", "kappa_constrained", "kappa_hi"))
    assert lo <= k <= hi
    text = runner.invoke(app, ["fit", log, "--no-plot", "--beta1", "0.9"])
    assert text.exit_code == 0, text.output
    assert "beta1 0.9 (command line)" in text.output and "constrained (m, c" in text.output


def test_fit_assumes_adamws_beta1_when_the_optimizer_is_known(shared_data):
    """AdamW named (here by the user), beta1 not: 0.9 is assumed and said, as the bench does;
    an optimizer without a default momentum gets the reason instead."""
    log = str(shared_data / SHIBUKI)
    data = _fit(log, "--optimizer", "adamw")
    s = data["settings"]
    assert s["values"]["beta1"] == 0.9 and s["sources"]["beta1"] == "assumed"
    assert any("beta1 = 0.9 assumed" in n for n in s["notes"]), s["notes"]
    assert data["constrained"] is not None
    assert (
        data["metrics"]["kappa_constrained"]
        == _fit(log, "--beta1", "0.9")["metrics"]["kappa_constrained"]
    )
    sgd = _fit(log, "--optimizer", "sgd_momentum")
    assert sgd["constrained"] is None
    assert any("sgd_momentum has no default momentum" in n for n in sgd["settings"]["notes"])


def test_the_command_line_overrides_the_log(tmp_path):
    """pgrpo_run logs beta1 0.9, K 1 and an lr schedule peaking at 1e-6 (config and columns):
    the given values win, the schedule keeps its shape at the given peak, and the constrained
    fit changes with them."""
    run = str(FIX / "pgrpo_run")
    base = _fit(run)
    assert base["settings"]["sources"]["beta1"] in ("log column", "log config")
    assert base["settings"]["values"]["refresh_interval"] == 1
    over = _fit(run, "--beta1", "0.5", "--refresh-interval", "3", "--lr", "2e-6",
                "--group-size", "4", "--optimizer", "sgd_momentum")  # fmt: skip
    s = over["settings"]
    assert s["values"]["beta1"] == 0.5 and s["values"]["refresh_interval"] == 3
    assert s["values"]["lr"] == 2e-6 and s["values"]["optimizer"] == "sgd_momentum"
    assert all(s["sources"][n] == "command line" for n in ("lr", "beta1", "refresh_interval"))
    assert over["hyperparameters"]["beta1"] == 0.5 and over["hyperparameters"]["group_size"] == 4
    assert any("rescaled to the given peak" in n for n in s["notes"]), s["notes"]
    assert any("group_size 4: recorded" in n for n in s["notes"]), s["notes"]
    assert over["metrics"]["optimizer_reduction"] == "sgd_momentum"
    assert over["metrics"]["aicc_constrained"] != base["metrics"]["aicc_constrained"]
    # only the peak changed: the constrained kappa scales as 1 / peak lr (k = lr kappa fitted)
    peak = _fit(run, "--lr", "2e-6")
    ratio = base["metrics"]["kappa_constrained"] / peak["metrics"]["kappa_constrained"]
    assert ratio == pytest.approx(2.0, rel=1e-6)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--lr", "-1"], "--lr"),
        (["--lr", "nan"], "--lr"),
        (["--beta1", "1.0"], "--beta1"),
        (["--optimizer", "lion"], "lion"),
    ],
)
def test_fit_bad_settings_get_one_line_before_reading_the_log(tmp_path, args, needle):
    res = runner.invoke(app, ["fit", str(FIX / "pgrpo_run"), "--out", str(tmp_path), *args])
    one_line_error(res, needle)


_COUNT = st.integers(1, 64).map(float)
_VALUE = {"lr": st.floats(1e-8, 1e-2), "beta1": st.floats(0.0, 0.99),
          "refresh_interval": _COUNT, "group_size": _COUNT, "batch_prompts": _COUNT,
          "optimizer": st.sampled_from(["adamw", "sgd_momentum", "adamw_torch"])}  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(_VALUE)), st.none(), max_size=6).flatmap(
    lambda keys: st.fixed_dictionaries({k: _VALUE[k] for k in keys})),  # fmt: skip
    st.dictionaries(st.sampled_from(sorted(_VALUE)), st.none(), max_size=6).flatmap(
    lambda keys: st.fixed_dictionaries({k: _VALUE[k] for k in keys})))  # fmt: skip
def test_resolved_settings_follow_the_precedence(log_hyper, cli):
    """Property: every setting is the command line's when given, else the log's, else assumed
    (beta1 only for a named AdamW, K = 1) or unknown; the merged log carries the values; the
    closed form is fitted exactly when lr and beta1 end up known."""
    from pgrpo.dynamics.settings import resolve_settings
    from pgrpo.logs import RewardLog

    log = RewardLog(np.arange(8.0), np.linspace(0, 1, 8), {}, dict(log_hyper), (), "csv", "x",
                    "reward")  # fmt: skip
    merged, s = resolve_settings(log, cli)
    for name in _VALUE:
        if name in cli:
            assert (s.values[name], s.sources[name]) == (cli[name], "command line")
        elif name in log_hyper:
            assert (s.values[name], s.sources[name]) == (log_hyper[name], "log config")
        elif name == "refresh_interval":
            assert (s.values[name], s.sources[name]) == (1, "assumed")
        elif name == "beta1":
            opt = cli.get("optimizer", log_hyper.get("optimizer"))
            assumed = opt is not None and opt.startswith("adamw")
            assert s.values[name] == (0.9 if assumed else None)
        else:
            assert s.values[name] is None and name not in s.sources
        if s.values[name] is not None:
            assert merged.hyperparameters[name] == s.values[name]
    known = s.values["lr"] is not None and s.values["beta1"] is not None
    assert s.metrics["closed_form_fitted"] == float(known)


# --- 2. a forecast the log is too short for ------------------------------------------------------


def _c10(tmp_path: Path) -> Path:
    path = tmp_path / "c10.csv"
    rows = [f"{i},{0.1 * i + 0.01 * (-1) ** i}" for i in range(1, 11)]
    path.write_text("step,reward\n" + "\n".join(rows) + "\n")
    return path


def test_a_short_log_keeps_its_fit_when_the_forecast_cannot_be_made(tmp_path):
    """Before: 'the cut leaves 5 points', exit 2, and no fit at all."""
    log, out = _c10(tmp_path), tmp_path / "out"
    res = runner.invoke(app, ["fit", str(log), "--forecast-from", "0.5", "--out", str(out),
                              "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["r2"] > 0.9 and data["n"] == 10 and data["png"]
    assert data["forecast"] is None
    assert "not enough points to forecast from step 5 (need 6" in data["forecast_skipped"]
    assert (out / "fit.png").stat().st_size > 10_000
    text = runner.invoke(app, ["fit", str(log), "--forecast-from", "0.5", "--no-plot"])
    assert text.exit_code == 0, text.output
    assert "rom" in text.output and "not enough points to forecast from step 5" in text.output
    end = _fit(str(log), "--forecast-from", "0.99")  # the cut at the last point
    assert (
        end["forecast"] is None and "nothing to forecast after step 10" in end["forecast_skipped"]
    )
    ok = _fit(str(log), "--forecast-from", "0.6")  # 6 points: enough
    assert ok["forecast"]["cut_step"] == 6 and "forecast_skipped" not in ok


# --- 3. run folders -------------------------------------------------------------------------------


@pytest.mark.parametrize("folder", FOLDERS)
@pytest.mark.parametrize("command", ["fit", "report", "diagnose"])
def test_every_fixture_run_folder_is_read(tmp_path, folder, command):
    """Before: `diagnose` / `fit` / `report` of verl_run said 'unrecognised log format'."""
    argv = [command, str(FIX / folder), "--json"]
    if command != "diagnose":
        argv += ["--out", str(tmp_path / "out")]
    res = runner.invoke(app, argv)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    if command == "fit":
        assert doc["n"] > 20 and Path(doc["log"]).parent == FIX / folder
    if command == "diagnose":
        assert doc["progress"]["label"] in ("learning", "plateau")


def test_a_verl_folder_reads_its_jsonl_then_its_console_log(tmp_path):
    from pgrpo.logs import read_log

    assert read_log(FIX / "verl_run").format == "verl"  # the JSONL wins over console.log
    console = tmp_path / "console_only"
    console.mkdir()
    (console / "console.log").write_bytes((FIX / "verl_run" / "console.log").read_bytes())
    log = read_log(console)
    assert log.format == "verl_console"
    np.testing.assert_array_equal(log.reward, read_log(FIX / "verl_run" / "console.log").reward)
    two = tmp_path / "two"
    two.mkdir()
    for name in ("a.jsonl", "b.jsonl"):
        (two / name).write_bytes((FIX / "verl_run" / "gsm8k_grpo.jsonl").read_bytes())
    res = runner.invoke(app, ["diagnose", str(two)])
    one_line_error(res, "a.jsonl, b.jsonl", "give the file")


# --- 4. usage errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["fit", "x.csv", "--group-size", "0"], ["--group-size", "fit --help"]),
        (["fit", "x.csv", "--lr", "abc"], ["--lr", "valid number", "fit --help"]),
        (["fit"], ["Missing argument", "fit --help"]),
        (["fitt"], ["No such command 'fitt'", "--help"]),
        (["diagnose", "x.csv", "--bogus"], ["--bogus", "diagnose --help"]),
        (["diagnose", "x.csv", "--fail-on"], ["requires an argument", "diagnose --help"]),
        (["predict", "--lr", "x"], ["--lr", "predict --help"]),
        (["--bogus"], ["--bogus"]),
    ],
)
def test_usage_errors_are_one_line(argv, needles):
    """Before: a 5-line rich box under the usage lines."""
    one_line_error(runner.invoke(app, argv), *needles)


def test_help_is_unchanged():
    res = runner.invoke(app, ["fit", "--help"])
    assert res.exit_code == 0 and "--forecast-from" in res.output and "Usage" in res.output
    bare = runner.invoke(app, [])
    assert "Commands" in bare.output and "fit" in bare.output
    assert SimpleNamespace(code=bare.exit_code).code in (0, 2)  # click's no-args-is-help code
