"""Logs and settings a hostile user tries (the #13/#14 acceptance audit, 2026-12-02): constant
rewards, a run that starts at its floor, values near the float64 limit, nonsense `predict`
settings. Each gives a sensible answer or one line + exit code 2, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from cli_checks import one_line_error
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.diagnose import MODES, diagnose

runner = CliRunner()


@pytest.fixture(scope="module", autouse=True)
def _commands():
    _load_commands()


def _csv(path: Path, reward: np.ndarray, step: np.ndarray | None = None) -> Path:
    step = np.arange(1, reward.size + 1) if step is None else step
    lines = ["step,reward"] + [f"{s},{r!r}" for s, r in zip(step, reward.tolist(), strict=True)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("n", [9, 10, 12, 15, 20, 30, 40, 100])
@pytest.mark.parametrize("value", [0.3, 0.1, 0.7, -2.6, 1e-3])
def test_a_constant_reward_is_flat_and_raises_no_alarm(tmp_path, n, value):
    """A reward stuck at one value. Before: the moving-average residuals were float rounding
    (~1e-17), their 'growth' from the first to the last third was inf or x6, and
    `dynamical_instability` fired at p < 0.001 on 0.3 at lengths 9-20 and 30."""
    path = _csv(tmp_path / "const.csv", np.full(n, value))
    res = runner.invoke(app, ["diagnose", str(path), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["progress"]["label"] == "flat"
    fired = [m["name"] for m in doc["modes"] if m["detected"] and m["name"] in MODES]
    assert fired == [], fired


def test_a_run_that_starts_at_its_floor_is_not_unstable():
    """Binomial batch means (1 prompt x G = 8) stuck at 0 for 20 steps, then learning: pure
    batch noise around a rising mean. Before: the residuals of the first third were divided by
    a noise level clipped at p = 0.02 while they were exactly 0, so their 'growth' looked like
    x2 and instability fired on most such runs."""
    rng = np.random.default_rng(3)
    fired = 0
    for _ in range(40):
        p = np.concatenate([np.zeros(20), np.minimum(0.9, 0.02 * np.arange(1, 61))])
        reward = rng.binomial(8, p) / 8
        cols = {"reward": reward, "group_size": np.full(80, 8.0), "batch_prompts": np.ones(80)}
        fired += diagnose(cols).mode("dynamical_instability").detected
    assert fired <= 2, fired


@pytest.mark.parametrize("command", ["diagnose", "fit", "report"])
def test_rewards_near_the_float64_limit_get_one_line(tmp_path, command):
    """Rewards of 1e300 overflowed float64 inside the statistics: `diagnose` printed numpy
    RuntimeWarnings and 'cannot convert float NaN to integer', `fit` 'parameter R_inf: value
    nan outside [-inf, inf]'. Now one line that names the size and the fix."""
    path = _csv(tmp_path / "huge.csv", 1e300 * (1 + 0.01 * np.arange(60)))
    argv = [command, str(path)]
    if command != "diagnose":
        argv += ["--out", str(tmp_path / "out")]
    res = runner.invoke(app, argv)
    line = one_line_error(res, "e+300")
    assert "rescale" in line or "divide" in line


def test_large_but_safe_rewards_still_work(tmp_path):
    path = _csv(tmp_path / "big.csv", 1e100 * (0.2 + 0.01 * np.arange(60)))
    res = runner.invoke(app, ["diagnose", str(path), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["progress"]["label"] == "learning"


PREDICT = ["predict", "--lr", "1e-6", "--kappa", "2e4"]


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--r0", "nan"], "r0"),
        (["--r-inf", "inf"], "r_inf"),
        (["--steps", "1000000000"], "steps"),
    ],
)
def test_predict_refuses_non_finite_levels_and_runaway_steps(tmp_path, extra, needle):
    """`--r0 nan` was accepted (final_mean null); `--steps 1e9` ran for minutes towards ~90 GB."""
    res = runner.invoke(app, PREDICT + extra + ["--out", str(tmp_path)])
    one_line_error(res, needle)


def test_predict_with_an_absurd_kappa_is_one_line(tmp_path):
    """kappa = 1e300 raised OverflowError in `kappa**2` (a traceback, exit 1)."""
    res = runner.invoke(app, ["predict", "--lr", "1", "--kappa", "1e300", "--out", str(tmp_path)])
    one_line_error(res, "kappa")


def test_the_report_of_a_constant_reward_draws_its_exact_forecast(tmp_path):
    """Before: "a band of its mean (0.3, [0.3, 0.3]) wider than the whole range of the run's
    reward: not enough evidence" (0 >= 0), on a reward that never moved."""
    path = _csv(tmp_path / "const.csv", np.full(20, 0.3))
    res = runner.invoke(app, ["report", str(path), "--out", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    page = (tmp_path / "rep" / "report.html").read_text()
    assert "wider than the whole range" not in page
    assert "inside the band" in page


def test_the_reward_panel_of_a_constant_reward_has_a_plain_axis():
    """matplotlib drew a reward stuck at 0.3 on an axis labelled '1e-13+3e-1'."""
    from matplotlib.figure import Figure

    from pgrpo.report.plots import reward_panel

    ax = Figure().add_subplot()
    step = np.arange(1.0, 21.0)
    wobble = 0.3 + 1e-14 * np.sin(step)  # a fit of a constant: float rounding around 0.3
    fit = SimpleNamespace(step=step, fitted=wobble, model="rom", r2=1.0)
    reward_panel(ax, step, np.full(20, 0.3), fit, None, ())
    lo, hi = ax.get_ylim()
    assert lo <= 0.3 - 0.01 and hi >= 0.3 + 0.01


def test_diagnose_takes_the_run_settings_on_the_command_line(tmp_path):
    """A CSV log says nothing about the optimizer, lr or K, and `diagnose` had no option for
    them, so the K/K* margin of an SGD-momentum run could not be judged from the command line.
    K* = 218 at a = lr kappa = 0.01, beta1 = 0.9 (docs/dynamics.md): K = 300 is past it."""
    t = np.arange(1, 121)
    rng = np.random.default_rng(0)
    path = _csv(tmp_path / "run.csv", 0.2 + 0.5 * (1 - np.exp(-t / 30)) + rng.normal(0, 0.03, 120))
    base = ["diagnose", str(path), "--json", "--optimizer", "sgd_momentum", "--lr", "1e-3"]
    base += ["--kappa", "10", "--beta1", "0.9", "--refresh-interval"]
    for k, unstable in (("300", True), ("100", False)):
        res = runner.invoke(app, [*base, k])
        assert res.exit_code == 0, res.output
        mode = {m["name"]: m for m in json.loads(res.stdout)["modes"]}["dynamical_instability"]
        assert mode["evidence"]["k_star"] == 218
        assert mode["detected"] is unstable
    for bad, needle in ((["--lr", "-1"], "--lr"), (["--beta1", "1"], "--beta1"),
                        (["--optimizer", "lion"], "lion")):  # fmt: skip
        one_line_error(runner.invoke(app, ["diagnose", str(path), *bad]), needle)


def test_diagnose_says_what_the_reader_repaired(tmp_path):
    """`fit` printed the reader's repairs; `diagnose` dropped 20 non-numeric rewards, a NaN
    and a repeated step without a word, in text and in --json."""
    lines = ["step,reward"] + [f"{i},{'abc' if i % 2 else 0.3 + 0.01 * i}" for i in range(1, 41)]
    lines += ["40,nan", "38,0.5"]
    path = tmp_path / "repaired.csv"
    path.write_text("\n".join(lines) + "\n")
    doc = json.loads(runner.invoke(app, ["diagnose", str(path), "--json"]).stdout)
    said = " ".join(doc["warnings"])
    assert "non-numeric" in said and "NaN" in said and "replaced by a resume" in said, said
    text = runner.invoke(app, ["diagnose", str(path)], terminal_width=400).stdout
    assert sum(line.startswith("warning: ") for line in text.splitlines()) == len(doc["warnings"])


def test_a_reward_that_never_changed_is_said_in_plain_words(tmp_path):
    """Was "Flat: no change beyond batch noise (..., noise sd 0 per step; null: AR(1) noise,
    rho=0.0)": there is no batch noise to speak of when every step logs 0.5."""
    path = _csv(tmp_path / "const.csv", np.full(40, 0.5))
    doc = json.loads(runner.invoke(app, ["diagnose", str(path), "--json"]).stdout)
    assert (
        doc["progress"]["summary"] == "Flat: the reward never changed (0.5 at all 40 logged steps)."
    )
    one = _csv(tmp_path / "one.csv", np.array([0.5]))
    doc = json.loads(runner.invoke(app, ["diagnose", str(one), "--json"]).stdout)
    assert doc["progress"]["summary"].startswith("Too short to judge: 1 logged reward,")


def test_a_run_stuck_at_zero_for_its_first_third_is_not_unstable_without_g():
    """The same shape with N unknown (no group size: the AR(1) null): 40 of 40 seeds fired
    `dynamical_instability` when the reward sat at 0 for the first 40 of 120 steps, since the
    first third had no residuals at all ('growth' inf). Steps pinned at the curve's lowest or
    highest value are now left out of the growth test."""
    rng = np.random.default_rng(5)
    fired = 0
    for _ in range(40):
        p = np.concatenate([np.zeros(40), np.minimum(0.9, 0.015 * np.arange(1, 81))])
        fired += diagnose({"reward": rng.binomial(8, p) / 8}).mode("dynamical_instability").detected
    assert fired <= 2, fired


def test_a_log_with_one_judged_mode_is_not_called_healthy(tmp_path):
    """With only a reward column one mode can be judged; the `healthy` mode needs two and said
    "not detected", while the verdict's lead line was headed "healthy"."""
    t = np.arange(1, 61)
    path = _csv(tmp_path / "r.csv", 0.2 + 0.5 * (1 - np.exp(-t / 15)))
    doc = json.loads(runner.invoke(app, ["diagnose", str(path), "--json"]).stdout)
    healthy = {m["name"]: m for m in doc["modes"]}["healthy"]
    assert not healthy["detected"]
    assert "healthy" not in [f["about"] for f in doc["findings"]]


def test_a_csv_read_as_trl_names_the_other_formats(tmp_path):
    """`--format trl` on a CSV said only "is the file truncated?" (review, 2026-12-04)."""
    path = _csv(tmp_path / "log.csv", np.linspace(0.1, 0.8, 20))
    res = runner.invoke(app, ["diagnose", str(path), "--format", "trl"])
    one_line_error(res, "not valid JSON", "not a TRL trainer_state.json", "--format", "csv")


def test_diagnose_says_when_group_and_batch_sizes_would_judge_a_01_reward_better(shared_data):
    """Without G and B the collapsed cs336 run reads 'flat' against AR(1) noise and nothing said
    that they change the verdict (review, 2026-12-04)."""
    log = str(shared_data / "curves" / "cs336_shibuki_offpolicy_e16_tb256.csv")
    doc = json.loads(runner.invoke(app, ["diagnose", log, "--json"]).output)
    hint = [n for n in doc["settings"]["notes"] if "give --group-size and --batch-prompts" in n]
    assert doc["progress"]["label"] == "flat" and len(hint) == 1
    args = ["diagnose", log, "--json", "--group-size", "8", "--batch-prompts", "32"]
    doc = json.loads(runner.invoke(app, args).output)
    assert doc["progress"]["label"] == "collapsed"
    assert not any("give --group-size" in n for n in doc["settings"]["notes"])


def test_diagnose_says_when_stated_sizes_would_judge_a_partial_credit_reward(tmp_path):
    """A 51-point partial-credit reward rising 0.1 -> 1.2 at noise sd 0.1 read 'flat' against
    AR(1) noise at its rho bound (round 6, 2026-12-04); with G and B stated each step's fresh
    rollouts make the noise independent, and the note says so when they are not given."""
    rng = np.random.default_rng(51)
    t = np.arange(51)
    reward = 0.1 + 1.1 / (1.0 + np.exp(-(t - 18) / 3.0)) + 0.1 * rng.standard_normal(51)
    path = _csv(tmp_path / "log.csv", reward)
    doc = json.loads(runner.invoke(app, ["diagnose", str(path), "--json"]).output)
    hint = [n for n in doc["settings"]["notes"] if "take the steps' noise as independent" in n]
    assert len(hint) == 1 and doc["progress"]["evidence"]["null_model"].startswith("AR(1)")
    args = ["diagnose", str(path), "--json", "--group-size", "6", "--batch-prompts", "8"]
    doc = json.loads(runner.invoke(app, args).output)
    assert doc["progress"]["label"] in ("learning", "plateau")
    assert doc["progress"]["evidence"]["null_model"].startswith("independent batch noise, N=48")
    assert not any("give --group-size" in n for n in doc["settings"]["notes"])


def test_the_evidence_table_puts_a_reason_first_and_says_what_it_left_out(shared_data):
    """The text table cut each mode's evidence at 6 figures without saying so, and a mode that
    could not be judged on lower bounds kept its reason out of view (review, 2026-12-04)."""
    log = str(shared_data / "curves" / "gsm8k_qwen3_1p7b_abl_num_groups_4.csv")
    text = " ".join(runner.invoke(app, ["diagnose", log, "--group-size", "8"]).output.split())
    row = text[text.index("advantage_degeneracy no 0.00") :]
    assert row.index("reason=the log gives lower bounds") < row.index("unsaturated_steps=")
    assert "more in --json" in row
    doc = json.loads(runner.invoke(app, ["diagnose", log, "--group-size", "8", "--json"]).output)
    mode = next(m for m in doc["modes"] if m["name"] == "advantage_degeneracy")
    assert mode["confidence"] == 0.0 and "frac_reward_zero_std" in " ".join(mode["missing"])
    unjudged = next(f for f in doc["findings"] if f["about"] == "not judged")
    assert "advantage_degeneracy" in unjudged["sentence"]
    assert unjudged["action"].startswith("log what 'missing' lists for each of them")
