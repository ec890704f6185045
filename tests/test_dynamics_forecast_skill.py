"""What `pgrpo fit` and the report say of the default forecast's out-of-sample skill is what the
stored held-back results give (rounds 8-23, the 192 runs collected after the fourth member was
chosen), and it is said only for the method it was measured for."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.dynamics.forecast import DEFAULT_METHOD, MEASURED_SKILL, forecast
from pgrpo.report.page import forecast_text

ROOT = Path(__file__).resolve().parents[1]
_load_commands()
runner = CliRunner()


ROUNDS = {"consensus": range(8, 24)}
"""The held-back rounds each method's stored skill counts: the folder's name, not a prefix of
it."""


@pytest.mark.parametrize("method", sorted(MEASURED_SKILL))
def test_each_measured_skill_is_the_stored_results(method):
    skill = MEASURED_SKILL[method]
    assert skill.method == method
    path = ROOT / skill.source.split(":")[0]

    def later(folder: str) -> bool:
        found = re.search(r"holdout(\d+)/", folder)
        return found is not None and int(found.group(1)) in ROUNDS[method]

    rows = [r for r in json.loads(path.read_text())["rows"]
            if r["cut"] == skill.cut and later(r["folder"])]  # fmt: skip
    obs, sd = np.array([r["observed"] for r in rows]), np.array([r["std"] for r in rows])
    err = np.abs(np.array([r[f"pred_{skill.method}"] for r in rows]) - obs) / sd
    base = np.abs(np.array([r["last10"] for r in rows]) - obs) / sd
    assert skill.runs == len(rows) and rows
    assert skill.repositories == len({r["repo"] for r in rows})
    assert round(float(np.median(err)), 3) == skill.median_error
    assert round(float(np.median(base)), 3) == skill.last10_median_error
    assert skill.wins == int(np.sum(err < base))
    assert skill.band_covered == sum(r[f"covered_{skill.method}"] for r in rows)


def test_the_default_has_a_measured_skill():
    assert MEASURED_SKILL[DEFAULT_METHOD].runs == 192


def _log(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    t = np.arange(1, 201)  # long enough for a band narrower than the run's range
    y = 0.2 + 0.6 * (1 - np.exp(-t / 40)) + rng.normal(0, 0.05, t.size)
    path = tmp_path / "log.csv"
    path.write_text("step,reward\n" + "".join(f"{s},{v:.4f}\n" for s, v in zip(t, y, strict=True)))
    return path


def test_fit_says_the_skill_beside_the_default_forecast_only(tmp_path):
    log = _log(tmp_path)
    shown = runner.invoke(app, ["fit", str(log), "--forecast-from", "0.5", "--no-plot"])
    assert shown.exit_code == 0, shown.output
    assert "How far to trust it: on 192 real runs" in " ".join(shown.stdout.split())
    data = runner.invoke(app, ["fit", str(log), "--forecast-from", "0.5", "--no-plot", "--json"])
    assert json.loads(data.stdout)["forecast"]["measured_skill"]["wins"] == 111
    other = ["--forecast-method", "level_gain", "--json"]
    got = runner.invoke(app, ["fit", str(log), "--forecast-from", "0.5", "--no-plot", *other])
    assert json.loads(got.stdout)["forecast"]["measured_skill"] is None


def test_the_reports_forecast_words_carry_it_for_the_default_only():
    rng = np.random.default_rng(1)
    t = np.arange(1.0, 201.0)
    y = 0.2 + 0.6 * (1 - np.exp(-t / 40)) + rng.normal(0, 0.05, t.size)
    assert "How far to trust it" in forecast_text(forecast(t, y, 0.5), y[:100])
    other = forecast(t, y, 0.5, method="level_gain")
    assert "How far to trust it" not in forecast_text(other, y[:100])


def test_the_skill_is_said_only_where_it_was_measured(tmp_path):
    """Not for a cut far from 0.5 (it was measured at 0.5), not for a forecast from fewer than
    10 points (it was compared with the last-10 mean), not for one that is not informative (the
    text and the report hide those; the JSON did not: a review, 2026-12-05)."""
    log = _log(tmp_path)

    def skill(path: Path, cut: str):
        got = runner.invoke(app, ["fit", str(path), "--forecast-from", cut, "--no-plot", "--json"])
        return json.loads(got.stdout)["forecast"]["measured_skill"]

    assert skill(log, "0.5") is not None and skill(log, "0.45") is not None
    assert skill(log, "0.9") is None and skill(log, "0.2") is None
    short = tmp_path / "short.csv"
    short.write_text("step,reward\n" + "".join(f"{s},{0.1 * s:.2f}\n" for s in range(1, 13)))
    assert skill(short, "0.5") is None
    rng = np.random.default_rng(0)  # 80 points: a band wider than the run's range
    y = 0.2 + 0.6 * (1 - np.exp(-np.arange(1, 81) / 25)) + rng.normal(0, 0.05, 80)
    wide = tmp_path / "wide.csv"
    wide.write_text("step,reward\n" + "".join(f"{s},{v:.4f}\n" for s, v in enumerate(y, 1)))
    got = runner.invoke(app, ["fit", str(wide), "--forecast-from", "0.5", "--no-plot", "--json"])
    assert json.loads(got.stdout)["forecast"]["informative"] is False
    assert skill(wide, "0.5") is None


def test_the_sentence_gives_the_sign_test_as_nominal():
    words = MEASURED_SKILL[DEFAULT_METHOD].sentence()
    said = "111 of 192 (58%; a two-sided sign test against half: p 0.036, nominal, as it is "
    assert said + "recomputed after each held-back round)" in words
    assert "significant" not in words
    earlier = replace(MEASURED_SKILL[DEFAULT_METHOD], runs=182, wins=103)  # until round 23
    assert "103 of 182 (57%; a two-sided sign test against half: p 0.088, nominal" in (
        earlier.sentence()
    )
