"""pgrpo report: a self-contained HTML page with embedded plots; rendered in headless Chromium
when it is installed (docs/diagnostics.md describes the visual check)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

from pgrpo.bandit.scenarios import build, write_run
from pgrpo.evaluate import EvalRun, eval_document, write_eval
from pgrpo.report import build_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _eval_doc(path, n_problems=30):
    rng = np.random.default_rng(0)
    ids = [str(i) for i in range(n_problems)]
    base = [
        EvalRun(
            "base", ids, [8] * n_problems, rng.binomial(8, 0.3, n_problems).tolist(), step=0, seed=s
        )
        for s in range(2)
    ]
    trained = [
        EvalRun(
            "trained",
            ids,
            [8] * n_problems,
            rng.binomial(8, 0.5, n_problems).tolist(),
            step=149,
            seed=s,
        )
        for s in range(2)
    ]
    return write_eval(eval_document(trained, base), path)


@pytest.fixture(scope="module")
def full_report(tmp_path_factory):
    run_dir = write_run(build("high_lr_no_kl", 0), tmp_path_factory.mktemp("r") / "run")
    _eval_doc(run_dir / "eval.json")
    return build_report(run_dir)


def test_report_is_self_contained_with_every_panel(full_report):
    page = full_report.html_path.read_text()
    assert page.startswith("<!DOCTYPE html>")
    imgs = re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,', page)
    assert len(imgs) == 7 and full_report.missing == {}
    assert not re.search(r'(src|href)="(?!data:)', page)  # nothing fetched from outside
    for mode in (
        "reward_hacking",
        "advantage_degeneracy",
        "policy_concentration",
        "dynamical_instability",
        "healthy",
    ):
        assert f"<b>{mode}</b>" in page
    assert "DETECTED" in page  # this run concentrates
    assert "search compression" in page and "pass@k" in page
    for name, png in full_report.pngs.items():
        assert png.read_bytes()[:8] == PNG_MAGIC, name


def test_missing_signals_are_named(tmp_path):
    run_dir = write_run(build("refresh_above_threshold", 0), tmp_path / "run")
    res = build_report(run_dir, out_dir=tmp_path / "out")
    assert set(res.missing) == {"degeneracy", "entropy", "kl", "lengths", "pass_at_k"}
    page = res.html_path.read_text()
    assert "not shown: no entropy column" in page
    # the ROM recursion's reward is no mean of 0/1 rewards: the verdict cannot judge
    # degeneracy, so the page draws no i.i.d. prediction either (it did until 2026-12-06)
    assert "not multiples of 1/512" in res.missing["degeneracy"]
    assert "stability_margin" in res.pngs  # kappa from config.yaml, K = 250 > K*


def test_cli_report_json(tmp_path):
    from typer.testing import CliRunner

    from pgrpo.cli import _load_commands, app

    _load_commands()
    run_dir = write_run(build("healthy", 0), tmp_path / "run")
    res = CliRunner().invoke(app, ["report", str(run_dir), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["html"].endswith("report.html") and "reward" in doc["pngs"]
    bad = CliRunner().invoke(app, ["report", str(tmp_path / "none")])
    assert bad.exit_code == 2 and bad.output.startswith("error:") and "not found" in bad.output


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium() is None, reason="chromium not installed (apt-get install chromium)")
def test_report_renders_in_headless_chromium(full_report, tmp_path):
    shot = tmp_path / "report.png"
    cmd = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tempfile.mkdtemp()}",
        f"--screenshot={shot}",
        "--window-size=1280,2400",
        full_report.html_path.resolve().as_uri(),
    ]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    data = shot.read_bytes()
    assert data[:8] == PNG_MAGIC
    import matplotlib.image as mpimg

    img = mpimg.imread(shot)
    assert img.shape[0] == 2400 and img.shape[1] == 1280
    # the page is not blank: plenty of non-white pixels (plots, tables)
    assert (img[..., :3].mean(-1) < 0.9).mean() > 0.05


def test_report_leads_with_the_verdict_and_folds_the_evidence(full_report):
    page = full_report.html_path.read_text()
    verdict, details, dynamics = (
        page.index("<h2>Verdict</h2>"),
        page.index("<details>"),
        page.index("<h2>Dynamics</h2>"),
    )
    assert verdict < details < page.index("<b>reward_hacking</b>") < dynamics
    findings = re.findall(r'<li class="finding"><b>([^<]+)</b>: ([^<]+)', page)
    assert findings[0][0].startswith("progress: ")
    assert any(about == "policy_concentration" for about, _ in findings)  # this run concentrates


class _Axes:
    """Records what a panel draws."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return lambda *a, **k: self.calls.append((name, a, k))


def test_the_forecast_drawn_is_the_forecast_reported(tmp_path):
    """The band drawn is the band of the predicted mean that the report prints (it was the
    per-step band of one new observation, from -0.4 to 1.3 on the demo), and the words in the
    legend are the words in the text."""
    from pgrpo.logs import read_log
    from pgrpo.report import plots
    from pgrpo.report.build import _fits, forecast_text

    run_dir = write_run(build("healthy", 1), tmp_path / "run")
    res = build_report(run_dir)
    log = read_log(run_dir)
    fit, fc, _, _ = _fits(log)
    ax = _Axes()
    plots.reward_panel(ax, log.step, log.reward, fit, fc, ())
    bands = [a for name, a, _ in ax.calls if name == "fill_between"]
    assert len(bands) == 1 and tuple(bands[0][1:]) == tuple(fc.mean_band)
    labels = {k.get("label") for _, _, k in ax.calls}
    words = plots.forecast_label(fc)
    assert words["band"] in labels and words["line"] in labels
    page = res.html_path.read_text()
    assert forecast_text(fc, log.reward) in page
    assert words["band"] in page and f"{fc.predicted_mean:.3g}" in page


def test_a_forecast_wider_than_the_run_is_not_enough_evidence():
    """A band of the mean wider than the run's whole range is said to be uninformative and is
    not drawn (a forecast of 0.49 with a band from -0.4 to 1.3 told the user nothing)."""
    from types import SimpleNamespace

    from pgrpo.report.build import forecast_text, informative

    fc = SimpleNamespace(
        mean_band=(-0.4, 1.3),
        predicted_mean=0.49,
        level=0.9,
        cut_step=6.0,
        observed_mean=0.85,
        future_step=np.arange(7.0, 13.0),
        fit=SimpleNamespace(step=np.arange(1.0, 7.0), reward=np.linspace(0.16, 0.6, 6)),
        baselines={"last_10_mean": 0.38},  # the 6 points before the cut
    )
    reward = np.linspace(0.16, 0.91, 12)
    assert not informative(fc, reward)
    assert "not enough evidence" in forecast_text(fc, reward)
    fc.mean_band = (0.8, 0.9)
    assert informative(fc, reward) and "Backtest: forecast made at step 6" in forecast_text(
        fc, reward
    )


def test_the_report_compares_the_closed_form_with_the_free_fit(tmp_path):
    """Issue #13.3: 'the report compares the two by AIC'. `pgrpo fit` printed the comparison;
    the HTML report showed only the free fit. Now the same figures as `fit --json`."""
    from pathlib import Path

    from typer.testing import CliRunner

    from pgrpo.cli import _load_commands, app

    _load_commands()
    run = Path(__file__).resolve().parent / "fixtures" / "logs" / "pgrpo_run"
    fit = json.loads(CliRunner().invoke(app, ["fit", str(run), "--no-plot", "--json"]).stdout)
    m = fit["metrics"]
    res = CliRunner().invoke(app, ["report", str(run), "--out", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    page = re.sub(r"<[^>]+>", "", (tmp_path / "rep" / "report.html").read_text())
    line = page[page.index("Closed form") :][:400]
    assert f"{m['preferred']} preferred" in line and f"closed form {m['closed_form']}" in line
    assert f"{m['kappa_constrained']:.4g}" in line


def test_the_report_says_the_start_line_pgrpo_fit_prints(tmp_path):
    """A fast first rise and a slow creep: `pgrpo fit` prints a Start: line (a free start
    describes the run); the report said nothing of it. Now the same line, and none for a run
    that starts from rest."""
    from typer.testing import CliRunner

    from pgrpo.cli import _load_commands, app

    _load_commands()
    t = np.arange(1, 301)
    y = 0.8 - 0.5 * (0.5 * np.exp(-t / 3.0) + 0.5 * np.exp(-t / 150.0))
    y = y + np.random.default_rng(3).normal(0, 0.01, t.size)
    log = tmp_path / "two.csv"
    log.write_text("step,reward\n" + "".join(f"{s},{v:.5f}\n" for s, v in zip(t, y, strict=True)))
    shown = CliRunner().invoke(app, ["fit", str(log), "--no-plot"])
    said = " ".join(shown.stdout.split())
    line = said[said.index("Start:") : said.index("start from rest).") + len("start from rest).")]
    res = CliRunner().invoke(app, ["report", str(log), "--out", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    page = re.sub(r"<[^>]+>", "", (tmp_path / "rep" / "report.html").read_text())
    assert line in " ".join(page.replace("&#x27;", "'").split())
    rest = tmp_path / "rest.csv"
    z = 0.8 - 0.6 * np.exp(-t / 60.0) + np.random.default_rng(5).normal(0, 0.03, t.size)
    rest.write_text("step,reward\n" + "".join(f"{s},{v:.5f}\n" for s, v in zip(t, z, strict=True)))
    res = CliRunner().invoke(app, ["report", str(rest), "--out", str(tmp_path / "rep2")])
    assert res.exit_code == 0 and "Start:" not in (tmp_path / "rep2" / "report.html").read_text()


def test_report_json_carries_the_verdict_and_the_forecast_it_states(tmp_path):
    """`pgrpo report --json` gave only file paths; the verdict, the fit and the forecast the
    page states were in the HTML alone."""
    from pathlib import Path

    from typer.testing import CliRunner

    from pgrpo.cli import _load_commands, app

    _load_commands()
    run = Path(__file__).resolve().parent / "fixtures" / "logs" / "pgrpo_run"
    res = CliRunner().invoke(app, ["report", str(run), "--out", str(tmp_path / "r"), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    diag = json.loads(CliRunner().invoke(app, ["diagnose", str(run), "--json"]).stdout)
    assert doc["progress"] == diag["progress"] and doc["findings"] == diag["findings"]
    page = (tmp_path / "r" / "report.html").read_text()
    lo, hi = doc["forecast"]["band"]
    assert f"90% band [{lo:.3g}, {hi:.3g}]" in page
    assert doc["fit"]["model"] in page


def test_a_long_logs_report_speaks_of_the_points_the_forecast_saw(tmp_path):
    """Past 4,000 steps the fit and forecast see bin means. The report judged the band against
    the raw reward's range while `pgrpo fit` used the bin means', and its backtest sentence took
    the "last 10 points" from raw rows at the bin means' count (the mean of rows 1341-1350 for a
    cut at step 4049); the page also lost the warning of a reward outside --reward-range
    (review, 2026-12-04)."""
    from typer.testing import CliRunner

    from pgrpo.cli import _load_commands, app

    _load_commands()
    rng = np.random.default_rng(0)
    t = np.arange(1, 8101)
    y = 0.2 + 0.5 * (1 - np.exp(-t / 2000)) + rng.normal(0, 0.3, t.size)
    log = tmp_path / "long.csv"
    log.write_text(
        "step,reward\n"
        + "".join(f"{a},{b!r}\n" for a, b in zip(t.tolist(), y.tolist(), strict=True))
    )
    runner = CliRunner()
    res = runner.invoke(
        app, ["report", str(log), "--out", str(tmp_path / "r"), "--reward-range", "0,0.5"]
    )
    assert res.exit_code == 0, res.output
    page = (tmp_path / "r" / "report.html").read_text()
    assert "leaves the stated range [0, 0.5]" in page
    sentence = re.search(r"Backtest:[^<]*", page).group(0)
    assert "(1350 bin means of 3 logged points)" in sentence
    cut = 1350 * 3  # bin means of 3 steps: the last 10 before the cut are steps 4021-4050
    last10 = float(np.mean(y[cut - 30 : cut]))
    assert (
        f"the mean of the last 10 bin means of 3 logged points before the cut was {last10:.3g}"
        in sentence
    )
    out = runner.invoke(app, ["fit", str(log), "--forecast-from", "0.5", "--no-plot", "--json"])
    fc = json.loads(out.output)["forecast"]
    drawn = "not enough evidence" not in sentence
    assert fc["informative"] is drawn


def test_report_json_says_whether_the_forecast_is_drawn(tmp_path):
    """Review, 2026-12-05: `report --json` gave the forecast without saying the page had not
    drawn it; a log file's report goes to report-<name> beside it."""
    from typer.testing import CliRunner

    from pgrpo.cli import _load_commands, app

    _load_commands()
    rng = np.random.default_rng(0)
    step = np.arange(1, 201)
    floor = np.where(step <= 100, 0.0, rng.binomial(64, 0.4, 200) / 64)
    rise = rng.binomial(64, 0.2 + 0.5 * (1 - np.exp(-step / 40.0))) / 64
    for name, reward, drawn in (("floor", floor, False), ("rise", rise, True)):
        log = tmp_path / f"{name}.csv"
        log.write_text(
            "step,reward\n" + "".join(f"{s},{r}\n" for s, r in zip(step, reward, strict=True))
        )
        res = CliRunner().invoke(app, ["report", str(log), "--json"])
        assert res.exit_code == 0, res.output
        fc = json.loads(res.output[res.output.index("{") :])["forecast"]
        assert fc["informative"] is drawn and (fc["not_informative_because"] is None) == drawn
        assert (tmp_path / f"report-{name}" / "report.html").is_file()


def test_the_report_fits_the_rom_pgrpo_fit_reports(tmp_path):
    """The report fitted the rom without the log's G, so where `pgrpo fit` described a run by
    rom_starved the page showed the plain rom (11 of the 30 shared runs that state G; the
    synthetic starved run below read 'rom' before 2026-12-05). One path now (`logfit.log_rom`):
    the same model, R^2 and closed-form test, the latter at the diagnosis' rho bound in both."""
    from pgrpo.diagnose.nullmodel import lag1_autocorr
    from pgrpo.dynamics.logfit import fit_log
    from pgrpo.logs.base import RewardLog
    from pgrpo.report.build import _fits

    t = np.arange(1, 121.0)
    p = 0.05 + 0.75 / (1 + np.exp(-(t - 50) / 10))
    y = np.random.default_rng(0).binomial(64, p) / 64
    hyper = {"group_size": 8, "lr": 1e-5, "beta1": 0.9}
    log = RewardLog(t, y, {}, hyper, (), "synthetic", "synthetic", "reward")
    cli = fit_log(log, noise_rho=lag1_autocorr).rom
    page, _, notes, _ = _fits(log)
    assert not notes and cli.model == page.model == "rom_starved"
    assert page.r2 == pytest.approx(cli.r2, abs=1e-12)
    for key in ("lr_test_p", "lr_test_rho", "closed_form", "preferred"):
        assert page.metrics[key] == cli.metrics[key], key
    assert page.metrics["lr_test_rho_source"] == "bound"
