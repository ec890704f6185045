"""End-to-end: `pgrpo fit` and `pgrpo predict` (JSON keys, PNG written, clear errors)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.dynamics import synthetic_suite
from pgrpo.dynamics.recursion import window_timescale

FIX = Path(__file__).resolve().parent / "fixtures" / "logs"
runner = CliRunner()


@pytest.fixture(scope="module", autouse=True)
def _commands():
    _load_commands()


def _write_run(tmp_path: Path) -> Path:
    c = synthetic_suite(1, seed=2, n_steps=400)[0]
    run = tmp_path / "run"
    run.mkdir()
    with (run / "metrics.jsonl").open("w") as fh:
        for s, r, lr in zip(c.step, c.reward, c.lr, strict=True):
            fh.write(json.dumps({"step": int(s), "reward": r, "learning_rate": lr}) + "\n")
    (run / "config.yaml").write_text("optim:\n  beta1: 0.9\n")
    return run


def test_fit_json_with_forecast(tmp_path):
    run = _write_run(tmp_path)
    out = tmp_path / "out"
    res = runner.invoke(app, ["fit", str(run), "--forecast-from", "0.5", "--out", str(out),
                              "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert 0.0 < data["r2"] <= 1.0
    assert "R_inf" in data["params"] and 0.0 <= data["params"]["R_inf"] <= 1.0
    for name in ("exponential", "logistic", "rom_v0"):
        assert "r2" in data["baselines"][name]
    assert data["r2"] >= data["baselines"]["exponential"]["r2"]
    fc = data["forecast"]
    assert fc["band"][0] < fc["predicted_mean"] < fc["band"][1]
    assert abs(fc["observed_mean"] - fc["predicted_mean"]) == pytest.approx(fc["error"])
    assert "last_window_mean" in fc["baselines"]
    assert data["hyperparameters"]["beta1"] == 0.9
    assert (out / "fit.png").stat().st_size > 10_000


def test_fit_table_on_trl_fixture(tmp_path):
    res = runner.invoke(app, ["fit", str(FIX / "trl_output"), "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "exponential" in res.output and "logistic" in res.output
    assert "every 2 steps" in res.output
    assert (tmp_path / "fit.png").exists()


def test_fit_errors_are_clear(tmp_path):
    res = runner.invoke(app, ["fit", str(FIX / "generic.csv"), "--out", str(tmp_path)])
    assert res.exit_code == 2 and "--reward-column" in res.output
    mapped = ["--reward-column", "acc", "--step-column", "iteration"]
    ok = runner.invoke(app, ["fit", str(FIX / "generic.csv"), *mapped, "--out", str(tmp_path)])
    assert ok.exit_code == 0, ok.output
    bad = runner.invoke(app, ["fit", str(FIX / "trl_output"), "--forecast-from", "1.5",
                              "--out", str(tmp_path)])  # fmt: skip
    assert bad.exit_code == 2 and "forecast_from" in bad.output


def test_fit_forecast_method_consensus_by_default_level_gain_and_a_bad_one(tmp_path):
    run = _write_run(tmp_path)
    args = ["fit", str(run), "--forecast-from", "0.5", "--no-plot", "--json"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    fc = json.loads(res.output)["forecast"]
    assert fc["method"] == "consensus"
    pair = fc["member"].split("+")  # the median of four: the two middle members
    assert len(pair) == 2 and set(pair) <= {"level_gain", "logistic", "damped_trend",
                                            "recent_level"}  # fmt: skip
    lg = runner.invoke(app, [*args, "--forecast-method", "level_gain"])
    plain = json.loads(lg.output)["forecast"]
    assert plain["method"] == "level_gain" and plain["member"] is None
    ens = runner.invoke(app, [*args, "--forecast-method", "ensemble_mean"])
    mean = json.loads(ens.output)["forecast"]
    assert mean["method"] == "ensemble_mean" and mean["member"] is None
    assert mean["combination"] == "mean" and fc["combination"] == "median"
    table = runner.invoke(app, [a for a in args if a != "--json"] + ["--forecast-method",
                          "ensemble_mean"], env={"COLUMNS": "200"})  # fmt: skip
    assert table.exit_code == 0 and "mean of the members" in table.output
    out = tmp_path / "not_made"
    for extra in ([], ["--forecast-from", "0.5"]):
        bad = runner.invoke(app, ["fit", str(run), "--forecast-method", "prophet", *extra,
                                  "--out", str(out)])  # fmt: skip
        assert bad.exit_code == 2 and bad.output.count("\n") == 1
        assert "'prophet' is not a forecast method" in bad.output and "consensus" in bad.output
        assert not out.exists()  # checked before anything is made or read
    alone = runner.invoke(app, ["fit", str(run), "--forecast-method", "level_gain", "--out",
                                str(out)])  # fmt: skip
    assert alone.exit_code == 2 and "without --forecast-from forecasts nothing" in alone.output
    assert not out.exists()


def test_predict_json_and_png(tmp_path):
    args = ["predict", "--lr", "1e-6", "--beta1", "0.9", "--refresh-interval", "4",
            "--group-size", "8", "--kappa", "2e4", "--out", str(tmp_path), "--json"]  # fmt: skip
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["refresh_threshold"] == 118  # a = 0.02, beta1 = 0.9
    assert data["regime"] == "overdamped"
    assert data["continuum_tau"] == pytest.approx((1 - 0.02 * 1.5) / 0.02)  # c / k
    assert data["tau"] == pytest.approx(window_timescale(0.02, 0.9, 4))  # exact: the slow mode
    assert data["damping_ratio"] > 1 and data["stable"] is True
    assert np.isfinite(data["stationary_std"]) and data["stationary_std"] > 0
    assert (tmp_path / "predict.png").stat().st_size > 5_000


def test_predict_unstable_and_bad_input(tmp_path):
    res = runner.invoke(app, ["predict", "--lr", "1e-6", "--kappa", "1e5", "--beta1", "0.0",
                              "--refresh-interval", "25", "--out", str(tmp_path)])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "diverges" in res.output  # a = 0.1: K* = 21 < 25
    bad = runner.invoke(app, ["predict", "--lr", "1e-6", "--kappa", "-3", "--out", str(tmp_path)])
    assert bad.exit_code == 2 and "kappa" in bad.output


def test_fit_compares_the_optimizer_constrained_fit(tmp_path):
    run = _write_run(tmp_path)  # logged lr schedule + beta1 0.9 in config.yaml
    res = runner.invoke(app, ["fit", str(run), "--out", str(tmp_path / "o"), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    m = data["metrics"]
    assert m["preferred"] in ("free", "constrained") and m["time_unit"] == "optimizer step"
    assert m["kappa_lo"] <= m["kappa_constrained"] <= (m["kappa_hi"] or float("inf"))
    assert data["constrained"]["model"] == "rom_fixed"
    assert data["constrained"]["r2"] == pytest.approx(m["r2_constrained"])
    text = runner.invoke(app, ["fit", str(run), "--out", str(tmp_path / "t")])
    assert text.exit_code == 0 and "constrained (m, c from beta1, K)" in text.output


def test_fit_names_a_broken_optimizer_step_column(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    rows = [{"step": s, "reward": 0.1 + 0.01 * s, "optimizer_step": 100 - s} for s in range(1, 30)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = runner.invoke(app, ["fit", str(run), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    assert "optimizer_step" in res.output and "Traceback" not in res.output


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 10**6), max_points=st.integers(1, 5000))
def test_plot_thinning_bounds_the_points_drawn(n, max_points):
    from pgrpo.dynamics.plots import thin

    drawn = len(range(n)[thin(n, max_points)])
    assert drawn <= max_points
    assert drawn == n if n <= max_points else drawn >= max_points // 2


def test_fit_no_plot_writes_no_figure_and_skips_matplotlib(tmp_path):
    import subprocess
    import sys

    run = _write_run(tmp_path)
    code = (
        "import sys; from pgrpo.cli import main; sys.argv = ['pgrpo', 'fit', sys.argv[1], "
        "'--out', sys.argv[2], '--no-plot', '--json']\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print('MPL', 'matplotlib' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(run), str(tmp_path / "out")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    *data, last = done.stdout.strip().splitlines()
    assert last == "MPL False"
    assert json.loads("\n".join(data))["png"] is None
    assert not (tmp_path / "out" / "fit.png").exists()


def test_fit_says_what_the_report_says_of_a_forecast_band_wider_than_the_run(shared_data):
    """`pgrpo report` does not draw a forecast whose band is wider than the run's whole range
    ("not enough evidence"); `pgrpo fit` printed the same band with no caveat (hotpotqa v1:
    0.632..0.746 on a run spanning less; review, 2026-12-04; with the prior learned on every run
    seen, that band narrowed inside the range, and the tonywang1990 mu_3 ablation is the case
    here: 0.27..1.35). One test, `informative`."""
    from pgrpo.dynamics.forecast import informative
    from pgrpo.report import page

    assert page.informative is informative
    log = str(shared_data / "curves" / "gsm8k_qwen3_1p7b_abl_mu_3.csv")
    args = ["fit", log, "--forecast-from", "0.5", "--no-plot"]
    fc = json.loads(runner.invoke(app, [*args, "--json"]).output)["forecast"]
    assert fc["informative"] is False and fc["band"][1] - fc["band"][0] > 0
    text = " ".join(runner.invoke(app, args).output.split())
    assert "its band is wider than the whole range of the run's reward" in text
    log = str(shared_data / "curves" / "cs336_shibuki_no_std_norm.csv")
    out = runner.invoke(app, ["fit", log, "--forecast-from", "0.5", "--no-plot", "--json"])
    assert json.loads(out.output)["forecast"]["informative"] is True


def test_fit_png_draws_the_band_fit_prints(shared_data):
    """fit.png shaded the band of one step under the label "90% band" while `pgrpo fit` printed
    the band of the mean after the cut (review, 2026-12-05): the figure now draws the printed
    band, with the report's words, and labels the per-step band as such."""
    from matplotlib.collections import PolyCollection

    from pgrpo.dynamics.logfit import fit_log
    from pgrpo.dynamics.plots import forecast_label, log_fit_figure
    from pgrpo.logs import read_log

    fit = fit_log(read_log(shared_data / "curves" / "countdown_trl_grpo.csv"), forecast_from=0.5)
    fc = fit.forecast
    ax = log_fit_figure(fit).axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert forecast_label(fc)["band"] in labels and "90% band of one step" in labels
    assert "90% band" not in labels
    band = next(
        c
        for c in ax.collections
        if isinstance(c, PolyCollection) and c.get_label() == forecast_label(fc)["band"]
    )
    y = band.get_paths()[0].vertices[:, 1]
    assert (y.min(), y.max()) == pytest.approx(fc.mean_band)


@pytest.mark.parametrize("method", ["consensus", "level_gain", "rom_blend"])
def test_a_prefix_that_never_moved_gives_no_band_of_zero_width(tmp_path, method):
    """Review, 2026-12-05: a reward at 0 before take-off got the 90% band [0, 0] from every
    method, drawn and stated as informative. Its band is now all the stated range allows, or,
    with no range, not informative; `fit` and the report say why."""
    from pgrpo.dynamics.forecast import forecast, informative, uninformative_reason

    rng = np.random.default_rng(0)
    step = np.arange(1.0, 201)
    reward = np.where(step <= 100, 0.0, rng.binomial(64, 0.4, 200) / 64)
    fc = forecast(step, reward, 0.5, method=method)
    assert not informative(fc, reward) and "never moved" in uninformative_reason(fc)
    ranged = forecast(step, reward, 0.5, method=method, reward_range=(0.0, 1.0))
    assert ranged.mean_band == (0.0, 1.0)
    assert ranged.band_lo.min() == 0.0 and ranged.band_hi.max() == 1.0
    moved = reward.copy()
    moved[50] = 1 / 64  # one success before the cut: a spread, however small, is evidence
    assert "constant_prefix" not in forecast(step, moved, 0.5, method=method).metrics
    log = tmp_path / "floor.csv"
    rows = "".join(f"{s:g},{r}\n" for s, r in zip(step, reward, strict=True))
    log.write_text("step,reward\n" + rows)
    res = runner.invoke(app, ["fit", str(log), "--forecast-from", "0.5", "--no-plot", "--json"])
    assert res.exit_code == 0, res.output
    fc_doc = json.loads(res.output)["forecast"]
    assert fc_doc["informative"] is False and "never moved" in fc_doc["not_informative_because"]


def _curve_csv(path: Path, step: np.ndarray, reward: np.ndarray) -> Path:
    """A step,reward CSV of the curve (reward to 5 decimals)."""
    rows = "".join(f"{s:g},{v:.5f}\n" for s, v in zip(step, reward, strict=True))
    path.write_text("step,reward\n" + rows)
    return path


def test_fit_shows_a_free_start_beside_the_rom_where_the_run_moved_fast_at_once(tmp_path):
    """A fast first rise and a slow creep (time constants 3 and 150 steps, as held-back verl
    runs): the rom from rest cannot follow both, `rom_v0` (a free initial velocity) can, and
    `pgrpo fit` prints it under the rom with its lower AIC; the rom stays the fit reported."""
    t = np.arange(1, 301)
    mean = 0.8 - 0.5 * (0.5 * np.exp(-t / 3.0) + 0.5 * np.exp(-t / 150.0))
    y = mean + np.random.default_rng(3).normal(0, 0.01, t.size)
    log = _curve_csv(tmp_path / "two.csv", t, y)
    res = runner.invoke(app, ["fit", str(log), "--no-plot", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    free = data["baselines"]["rom_v0"]
    assert data["model"] != "rom_v0"
    assert free["r2"] > data["r2"] + 0.02 and free["aic"] < data["aic"] - 10
    start = data["start"]  # the comparison that says which start describes the run
    assert start["preferred"] == "free" and start["lr_test_p"] < 0.05
    assert start["r2_free"] == pytest.approx(free["r2"]) and start["r2_rest"] == data["r2"]
    assert start["fit_quality"]["r2"] == pytest.approx(free["r2"])
    shown = runner.invoke(app, ["fit", str(log), "--no-plot"])
    assert shown.exit_code == 0 and "rom_v0" in shown.stdout
    assert "faster than a start from rest allows" in " ".join(shown.stdout.split())


def test_fit_says_a_run_that_dipped_first_did_not_move_faster(tmp_path):
    """The closed form with x'(0) = +0.08 x(0) (the reward first moves away from where it heads):
    the free start describes it, and the Start: line says the run moved away first (a review
    found it said "moved faster" whatever the sign)."""
    from pgrpo.dynamics.model import _unit_response

    t = np.arange(1, 201, dtype=float)
    mean = 0.8 - 0.6 * _unit_response(t - 1.0, 10.0, 1.0, 1.0 / 30.0, 1.0, 0.08)
    y = mean + np.random.default_rng(7).normal(0, 0.02, t.size)
    log = _curve_csv(tmp_path / "dip.csv", t, y)
    data = json.loads(runner.invoke(app, ["fit", str(log), "--no-plot", "--json"]).stdout)
    assert data["start"]["preferred"] == "free" and data["start"]["u"] > 0
    shown = " ".join(runner.invoke(app, ["fit", str(log), "--no-plot"]).stdout.split())
    assert "first moved away" in shown and "faster than a start" not in shown


def test_fit_keeps_the_start_from_rest_for_a_run_that_starts_from_rest(tmp_path):
    """The closed form from rest (m 10, c 1, k 1/60) under white noise of sd 0.03: the free
    start is fitted and printed as a baseline, but the comparison keeps the start from rest and
    `pgrpo fit` prints no "Start:" line."""
    from pgrpo.dynamics.model import _unit_response

    t = np.arange(1, 201, dtype=float)
    mean = 0.8 - 0.6 * _unit_response(t - 1.0, 10.0, 1.0, 1.0 / 60.0, 1.0, 0.0)
    y = mean + np.random.default_rng(5).normal(0, 0.03, t.size)
    log = _curve_csv(tmp_path / "rest.csv", t, y)
    res = runner.invoke(app, ["fit", str(log), "--no-plot", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert "rom_v0" in data["baselines"] and data["start"]["preferred"] == "rest"
    shown = runner.invoke(app, ["fit", str(log), "--no-plot"])
    assert shown.exit_code == 0 and "Start:" not in shown.stdout


def test_a_log_too_short_for_the_free_start_is_fitted_without_it(tmp_path):
    """Six points: the rom and the 3- and 4-parameter baselines fit, rom_v0 (5 parameters, 7
    points) is left out instead of stopping the fit (a TRL example run of 6 logged steps did)."""
    log = tmp_path / "six.csv"
    log.write_text("step,reward\n" + "".join(f"{s},{0.1 + 0.1 * s:.2f}\n" for s in range(1, 7)))
    res = runner.invoke(app, ["fit", str(log), "--no-plot", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert "rom_v0" not in data["baselines"] and "exponential" in data["baselines"]
    assert "start" not in data  # no free start fitted, nothing to compare
