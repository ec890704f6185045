"""What `pgrpo fit` and the report say where the progress verdict contradicts the fit's level or
the forecast's band (`pgrpo.diagnose.fitwords`; review s32, findings 8 and 9): the rom's fitted
level on a run that collapsed is not where the run heads (and the free-start line about "the
level the run heads for" is not printed), and a band from points still rising with no
saturation may be passed."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.diagnose.fitwords import band_caveat, level_caveat, run_progress
from pgrpo.diagnose.progress import ProgressVerdict

runner = CliRunner()
T = np.arange(1, 201.0)


@pytest.fixture(scope="module", autouse=True)
def _commands():
    _load_commands()


def _csv(path: Path, p: np.ndarray, seed: int = 0, n: int = 64) -> Path:
    """A log of batch means of n 0/1 rewards at success rate p ([200])."""
    reward = (np.random.default_rng(seed).binomial(n, p) / n).tolist()
    rows = "".join(f"{s:g},{r!r}\n" for s, r in zip(T, reward, strict=True))
    path.write_text("step,reward\n" + rows)
    return path


def _fall(tmp_path: Path) -> Path:
    """A rise 0.1 -> 0.5 by step 80, then a fall to 0.05 by step 200: collapsed."""
    p = np.where(T <= 80, 0.1 + 0.4 * T / 80, 0.5 - 0.45 * (T - 80) / 120)
    return _csv(tmp_path / "fall.csv", p)


def _convex(tmp_path: Path) -> Path:
    """A rise that speeds up (0.1 -> 0.7): its first half shows no saturation."""
    return _csv(tmp_path / "convex.csv", 0.1 + 0.6 * (T / 200) ** 1.5, n=256)


def _saturating(tmp_path: Path) -> Path:
    return _csv(tmp_path / "sat.csv", 0.1 + 0.6 * (1 - np.exp(-T / 20)))


def _fit(log: Path, *options: str) -> tuple[dict, str]:
    res = runner.invoke(app, ["fit", str(log), "--no-plot", "--json", *options])
    assert res.exit_code == 0, res.output
    text = runner.invoke(app, ["fit", str(log), "--no-plot", *options])
    assert text.exit_code == 0, text.output
    return json.loads(res.stdout), " ".join(text.output.split())


def _page(tmp_path: Path, log: Path) -> tuple[dict, str]:
    out = tmp_path / f"rep_{log.stem}"
    res = runner.invoke(app, ["report", str(log), "--json", "--out", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output[res.output.index("{") :])
    page = re.sub(r"<[^>]+>", " ", (out / "report.html").read_text())
    return doc, " ".join(html.unescape(page).split())


# --- the fitted level of a run that fell ------------------------------------------------------


def test_pgrpo_fit_says_the_level_of_a_run_that_fell_is_not_where_it_heads(tmp_path):
    """tzy_searchr1 (collapsed, end 0.075): "Fit rom: R_inf=0.2028" and "Start: the first
    steps moved towards the level the run heads for", and no word that the model cannot
    describe a rise and a fall."""
    data, text = _fit(_fall(tmp_path))
    level = data["caveats"]["level"]
    assert level.startswith("The rom fit describes a rise to a level, and this run fell")
    assert "(progress: collapsed;" in level and "is not where the run heads" in level
    assert f"R_inf={data['params']['R_inf']:.4g}" in level
    assert "fit: The rom fit describes a rise to a level, and this run fell" in text
    assert "Start:" not in text and "the level the run heads for" not in text


def test_the_report_says_it_in_place_of_the_start_line(tmp_path):
    doc, page = _page(tmp_path, _fall(tmp_path))
    assert doc["progress"]["label"] == "collapsed"
    assert "this run fell (progress: collapsed;" in doc["caveats"]["level"]
    assert doc["caveats"]["level"] in page
    assert "the level the run heads for" not in page


def test_no_level_caveat_on_a_run_that_rose_and_stayed(tmp_path):
    data, text = _fit(_saturating(tmp_path))
    assert data["caveats"]["level"] is None and "this run fell" not in text


def _verdict(label: str, **ev: float) -> ProgressVerdict:
    base = {"end_level": 0.1, "best_level": 0.3, "noise_sd": 0.05, "window": 25.0,
            "end_from": 160.0}  # fmt: skip
    return ProgressVerdict(label, "", {**base, **ev}, "")


def test_the_level_caveat_needs_a_fall_and_a_level_away_from_the_end():
    """Away, towards the best window: more than FAR_SE (2) window standard errors (0.05 / 5 =
    0.01 here) and more than FAR_SHARE (a quarter) of the fall from the best (0.2 here)."""
    assert level_caveat(_verdict("collapsed"), "rom", 0.2) is not None
    assert level_caveat(_verdict("declining"), "rom", 0.2) is not None
    assert level_caveat(_verdict("collapsed"), "rom", 0.115) is None  # 1.5 SE: near the end
    # 10 SE, but a tenth of the fall: a long log's tiny error does not make 0.8014 "away" from
    # a run that settled at 0.800 after an overshoot
    assert level_caveat(_verdict("collapsed", noise_sd=0.01), "rom", 0.12) is None
    assert level_caveat(_verdict("declining"), "rom", 0.02) is None  # where a fall heads
    assert level_caveat(_verdict("learning"), "rom", 0.2) is None  # still rising towards it
    held = level_caveat(_verdict("plateau", plateau_below_best=1.0), "rom", 0.2)
    assert held is not None and "fell from its best and held" in held


def test_the_level_caveat_of_a_run_still_rising_above_its_fitted_level():
    """Session 37: a run the verdict reads `learning` (still rising over its second half) that
    is already above the fitted level by more than FAR_SE window standard errors (0.01 here):
    that level is not where it heads; near the end, above it, or on a run that is not rising:
    nothing."""
    rising = {"end_level": 0.5, "best_level": 0.5}
    said = level_caveat(_verdict("learning", **rising), "rom_schedule", 0.47)  # 3 SE below
    assert said is not None and said.startswith("This run is still rising (progress: learning;")
    assert "above the rom_schedule fit's level R_inf=0.47" in said
    assert "not where the run heads" in said
    assert level_caveat(_verdict("learning", **rising), "rom", 0.485) is None  # 1.5 SE
    assert level_caveat(_verdict("learning", **rising), "rom", 0.6) is None  # where it heads
    for label in ("plateau", "flat", "saturated"):  # not rising: a level below is the fit's
        assert level_caveat(_verdict(label, **rising), "rom", 0.47) is None


def test_pgrpo_fit_and_the_report_say_it_on_the_real_run_that_showed_it(shared_data, tmp_path):
    """watchdog_qwen3_8b_lora (shared corpus): still rising to 0.152 at its end, and the
    underdamped rom_schedule fit, frozen by the lr's decay, put "R_inf level it heads for" at
    -0.31, 4.7 window errors below, without a word."""
    log = shared_data / "curves" / "watchdog_qwen3_8b_lora.csv"
    data, text = _fit(log)
    level = data["caveats"]["level"]
    assert level is not None and "This run is still rising (progress: learning;" in level
    assert f"R_inf={data['params']['R_inf']:.4g}" in level and data["params"]["R_inf"] < 0
    assert "fit: This run is still rising" in text
    doc, page = _page(tmp_path, log)
    assert doc["progress"]["label"] == "learning"
    assert doc["caveats"]["level"] and doc["caveats"]["level"] in page


# --- the band of a forecast from points still rising ------------------------------------------


def test_pgrpo_fit_says_the_run_may_rise_past_the_band(tmp_path):
    """panacea (first half "still rising ... the gain is not identified"): a flat 90% band of
    width 0.04 that the second half left, with nothing said beside it."""
    data, text = _fit(_convex(tmp_path), "--forecast-from", "0.5")
    band = data["caveats"]["band"]
    assert band.startswith("The band assumes the run levels off as fitted to the points up to")
    assert "may rise past the band" in band
    assert "band: The band assumes the run levels off" in text
    before = text.index("band: The band assumes")
    assert text.index("forecast of the mean after step") < before < text.index("How far")


def test_the_measured_coverage_is_quoted_for_the_method_it_was_measured_for_only(tmp_path):
    """bench/forecast_coverage_rising.py measured the default's band: beside another method's
    the caveat stands without those figures (review s34)."""
    default, _ = _fit(_convex(tmp_path), "--forecast-from", "0.5")
    other, _ = _fit(_convex(tmp_path), "--forecast-from", "0.5", "--forecast-method",
                    "level_gain")  # fmt: skip
    assert "Measured where the points before the cut read so" in default["caveats"]["band"]
    assert other["caveats"]["band"].endswith("it may rise past the band.")


def test_the_report_says_it_beside_the_band(tmp_path):
    doc, page = _page(tmp_path, _convex(tmp_path))
    assert doc["forecast"]["informative"] and doc["caveats"]["band"]
    backtest = page[page.index("Backtest:") :]
    assert doc["caveats"]["band"] in backtest[: backtest.index("How far")]


def test_no_band_caveat_where_the_prefix_saturates(tmp_path):
    data, text = _fit(_saturating(tmp_path), "--forecast-from", "0.5")
    assert data["caveats"]["band"] is None and "may rise past the band" not in text
    assert _fit(_saturating(tmp_path))[0]["caveats"]["band"] is None  # no forecast asked


def test_the_band_caveat_reads_the_verdict_of_the_points_before_the_cut(tmp_path):
    """The whole run of the convex rise still reads rising; its first half reads so too, and
    that is the verdict the band caveat reads (`run_progress(log, upto=cut)`)."""
    from pgrpo.logs import read_log

    log = read_log(_convex(tmp_path))
    prefix = run_progress(log, upto=100.0)
    assert prefix.evidence["n"] == 100 and prefix.label == "learning"
    assert band_caveat(prefix, 100.0) is not None
    assert band_caveat(_verdict("learning"), 100.0) is None  # gain identified (no flag)
    assert band_caveat(_verdict("plateau", fit_gain_identified=0.0), 100.0) is None


# --- the caveats under fit.png -------------------------------------------------------------------


@pytest.fixture
def saved_figures(monkeypatch):
    """The matplotlib Figures `pgrpo fit` saves, as saved (Figure.savefig recorded)."""
    from matplotlib.figure import Figure

    saved: list = []
    real = Figure.savefig

    def record(self, *args, **kwargs):
        saved.append(self)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", record)
    return saved


def _notes(fig) -> str:
    return " ".join(" ".join(t.get_text().split()) for t in fig.texts)


def _png_fit(tmp_path: Path, log: Path, *options: str) -> dict:
    out = tmp_path / f"out_{log.stem}_{len(options)}"
    res = runner.invoke(app, ["fit", str(log), "--json", "--out", str(out), *options])
    assert res.exit_code == 0, res.output
    assert (out / "fit.png").exists()
    return json.loads(res.stdout)


def test_fit_png_carries_the_level_caveat(tmp_path, saved_figures):
    """The figure is often looked at without the text beside it: the level caveat of a run that
    fell is printed under the saved plot too, which grows to hold it."""
    data = _png_fit(tmp_path, _fall(tmp_path))
    _png_fit(tmp_path, _saturating(tmp_path))
    fell, plain = saved_figures
    assert f"Note: {data['caveats']['level']}" in _notes(fell)
    assert not plain.texts and fell.get_figheight() > plain.get_figheight()


def test_fit_png_carries_the_band_caveat(tmp_path, saved_figures):
    data = _png_fit(tmp_path, _convex(tmp_path), "--forecast-from", "0.5")
    assert data["caveats"]["band"] and f"Note: {data['caveats']['band']}" in _notes(
        saved_figures[0]
    )


def test_fit_png_says_a_forecast_is_not_informative(tmp_path, saved_figures):
    """A constant prefix: the text says the forecast is not informative; so does the figure."""
    y = [0.25] * 30 + [0.25 + 0.01 * i for i in range(30)]
    log = tmp_path / "const.csv"
    log.write_text("step,reward\n" + "".join(f"{i + 1},{v!r}\n" for i, v in enumerate(y)))
    data = _png_fit(tmp_path, log, "--forecast-from", "0.5")
    why = data["forecast"]["not_informative_because"]
    assert why and f"Note: The forecast is not informative: {why}." in _notes(saved_figures[0])
