"""A hostile user's review of fit / predict / report / diagnose (session 36). Each test failed
before its fix (the report folder's own tests are in test_report_out_folder.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app

_load_commands()
runner = CliRunner()


def _csv(path, n: int = 50, step=None, extra: dict | None = None):
    rng = np.random.default_rng(1)
    t = np.arange(n)
    reward = 0.1 + 0.6 * (1 - np.exp(-t / 15)) + 0.04 * rng.standard_normal(n)
    step = np.arange(1, n + 1) if step is None else np.asarray(step)
    cols = {"step": step, "reward": reward, "reward_std": 0.3 + 0.01 * rng.random(n),
            **(extra or {})}  # fmt: skip
    lines = [",".join(cols)] + [",".join(f"{cols[c][i]}" for c in cols) for i in range(n)]
    path.write_text("\n".join(lines) + "\n")
    return path


def _one_line_error(res, *words):
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and res.output.strip().count("\n") == 0, res.output
    assert all(w in res.output for w in words), res.output


def test_a_kappa_given_without_a_refresh_interval_is_used_at_the_assumed_k_1(tmp_path):
    """It was dropped without a word (`missing: refresh_interval`) beside settings that said
    "refresh_interval 1 (assumed)"; K = 1 is the smallest K, so an alarm there holds for any."""
    log = _csv(tmp_path / "run.csv")
    args = ["diagnose", str(log), "--optimizer", "sgd_momentum", "--beta1", "0.9", "--lr", "1e-3"]
    res = runner.invoke(app, [*args, "--kappa", "5", "--json"])
    assert res.exit_code == 0, res.output
    mode = next(m for m in json.loads(res.stdout)["modes"] if m["name"] == "dynamical_instability")
    ev = mode["evidence"]
    assert ev["kappa"] == 5.0 and ev["kappa_source"] == "given"
    assert ev["refresh_interval"] == 1.0 and ev["refresh_interval_assumed"] == 1.0
    assert "refresh_interval" not in mode["missing"]
    given = runner.invoke(app, [*args, "--kappa", "5", "--refresh-interval", "1", "--json"])
    ev_k = next(m for m in json.loads(given.stdout)["modes"]
                if m["name"] == "dynamical_instability")["evidence"]  # fmt: skip
    assert ev_k["stability_margin"] == ev["stability_margin"]
    assert "refresh_interval_assumed" not in ev_k


def test_the_step_column_cannot_be_the_reward_column(tmp_path):
    log = _csv(tmp_path / "run.csv")
    for cmd in ("fit", "diagnose"):
        extra = ["--no-plot"] if cmd == "fit" else []
        res = runner.invoke(app, [cmd, str(log), *extra, "--step-column", "reward"])
        _one_line_error(res, "step column and the reward column are both 'reward'")


def test_a_step_column_of_fractions_is_warned(tmp_path):
    log = _csv(tmp_path / "run.csv")
    res = runner.invoke(app, ["diagnose", str(log), "--step-column", "reward_std", "--json"])
    assert res.exit_code == 0, res.output
    assert any("not whole" in w for w in json.loads(res.stdout)["warnings"])
    plain = runner.invoke(app, ["diagnose", str(log), "--json"])
    assert not any("not whole" in w for w in json.loads(plain.stdout)["warnings"])


def test_rows_that_all_share_one_step_are_named_as_such(tmp_path):
    log = _csv(tmp_path / "run.csv", step=np.full(50, 7))
    res = runner.invoke(app, ["fit", str(log), "--no-plot"])
    _one_line_error(res, "all 50 rows", "same step 7", "--step-column")


@pytest.mark.parametrize("cmd", ["fit", "diagnose", "report", "watch"])
def test_a_group_of_one_is_a_setting_and_zero_is_refused(tmp_path, cmd):
    """Session 36 refused --group-size 1 everywhere, as predict (a model of GRPO's groups);
    session 37: one completion per prompt is a run's setting (pgrpo's sign advantage, a
    critic's PPO), which the log-analysis commands take, the degeneracy mode not applying."""
    log = _csv(tmp_path / "run.csv")
    extra = {"fit": ["--no-plot"], "watch": ["--once"],
             "report": ["--out", str(tmp_path / "rep")]}.get(cmd, [])  # fmt: skip
    res = runner.invoke(app, [cmd, str(log), *extra, "--group-size", "1"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, [cmd, str(log), *extra, "--group-size", "0"])
    assert res.exit_code == 2 and "greater than or equal to 1" in res.output, res.output


def test_predict_still_needs_a_group_of_two(tmp_path):
    res = runner.invoke(app, ["predict", "--group-size", "1", "--out", str(tmp_path)])
    assert res.exit_code == 2, res.output


def test_the_loss_is_stated_in_the_json_and_the_text(tmp_path):
    log = _csv(tmp_path / "run.csv")
    data = json.loads(runner.invoke(app, ["fit", str(log), "--no-plot", "--json"]).stdout)
    assert data["loss"] == "linear"
    robust = runner.invoke(app, ["fit", str(log), "--no-plot", "--loss", "cauchy", "--json"])
    assert json.loads(robust.stdout)["loss"] == "cauchy"
    text = runner.invoke(app, ["fit", str(log), "--no-plot", "--loss", "cauchy"]).output
    assert "loss cauchy" in text and "same loss" in text
    assert "loss linear" not in runner.invoke(app, ["fit", str(log), "--no-plot"]).output


def test_the_fit_table_offers_the_last_10_mean_the_report_names(tmp_path):
    """The fit table's only naive row was last_window_mean (max(5, 10%) points: 5 here) while
    the trust sentence and the report's backtest spoke of the last 10 points."""
    log = _csv(tmp_path / "run.csv")
    res = runner.invoke(app, ["fit", str(log), "--no-plot", "--forecast-from", "0.5", "--json"])
    fc = json.loads(res.stdout)["forecast"]
    raw = np.loadtxt(log, delimiter=",", skiprows=1)[:, 1]
    assert fc["baselines"]["last_10_mean"]["predicted_mean"] == pytest.approx(raw[15:25].mean())
    assert fc["baselines"]["last_window_mean"]["predicted_mean"] == pytest.approx(raw[20:25].mean())
    out = tmp_path / "rep"
    assert runner.invoke(app, ["report", str(log), "--out", str(out)]).exit_code == 0
    page = (out / "report.html").read_text()
    assert f"before the cut was {raw[15:25].mean():.3g})" in page


def test_predict_reads_adamw_as_the_other_commands_do_and_states_its_noise(tmp_path):
    res = runner.invoke(app, ["predict", "--lr", "1e-3", "--kappa", "10", "--optimizer", "adamw",
                              "--out", str(tmp_path), "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["optimizer"] == "adam"
    bad = runner.invoke(app, ["predict", "--lr", "1e-3", "--kappa", "10", "--optimizer", "lion",
                              "--out", str(tmp_path)])  # fmt: skip
    _one_line_error(bad, "'lion'", "--optimizer sgd_momentum or adam")
    sgd = runner.invoke(app, ["predict", "--lr", "1e-3", "--kappa", "10", "--out", str(tmp_path),
                              "--json"])  # fmt: skip
    assert any("0.25 kappa^2" in n for n in json.loads(sgd.stdout)["notes"])


def test_the_report_says_adamw_is_taken_for_the_margin_not_assumed_everywhere(tmp_path):
    log = _csv(tmp_path / "run.csv")
    res = runner.invoke(app, ["report", str(log), "--out", str(tmp_path / "rep"), "--json"])
    why = json.loads(res.stdout)["missing"]["stability_margin"]
    assert why.startswith("AdamW (taken for the margin: the log names no optimizer)"), why
