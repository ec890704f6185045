"""What `pgrpo fit` prints beside its numbers (review s32, findings 8, 12 and 13): a parameter
the fit left at a bound is said to be there, without a stderr (`m=282+-1.1e-05` where 282 was
the bound); block means whose noise is all of their variance are not given an R^2 beside a
noise ceiling of 0.000; and the models and parameters in the table are explained, with units,
from the model registry."""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.dynamics.curves import AT_BOUND_RTOL, FIT_MODELS, Parameter
from pgrpo.dynamics.fit import fit_curve
from pgrpo.dynamics.fitquality import CEILING_SLACK, fit_quality, legend, quality_words

runner = CliRunner()
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "curves"


@pytest.fixture(scope="module", autouse=True)
def _commands():
    _load_commands()


def _csv(path: Path, step, reward) -> Path:
    path.write_text(
        "step,reward\n" + "".join(f"{a:g},{b:.6f}\n" for a, b in zip(step, reward, strict=True))
    )
    return path


def _text(args: list[str]) -> str:
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    return " ".join(res.output.split())


# --- a parameter at its bound -----------------------------------------------------------------


def test_at_bound_reads_the_parameters_own_bounds():
    box = dict(min=0.0, max=282.0)
    assert Parameter("m", 281.99999995, **box).at_bound  # real run: m against its 282 steps
    assert Parameter("m", 1e-13, **box).at_bound  # a bound at 0: relative to the box's width
    assert Parameter("u", 1.99999999, -2.0, 2.0).at_bound
    assert not Parameter("m", 112.5, **box).at_bound
    assert not Parameter("m", 282.0, **box, vary=False).at_bound  # held, not fitted
    # an interior optimum near a small bound is not at it: 1.5e-4 against 1.0e-4 (a box of 5)
    assert not Parameter("k", 1.5e-4, 1.0e-4, 5.0).at_bound
    assert Parameter("k", 1.0e-4 * (1 + AT_BOUND_RTOL / 2), 1.0e-4, 5.0).at_bound
    assert not Parameter("x", 1e-9, 0.0, math.inf).at_bound  # no finite width: 0 exactly only
    assert Parameter("x", 0.0, 0.0, math.inf).at_bound


def test_a_straight_line_puts_the_exponentials_level_on_its_box():
    """The noise-free line 0.1 + 0.01 t (docs/dynamics.md, "A curve that does not bend"): the
    exponential's R_inf stops at the box's edge, and the result and its report say so."""
    t = np.arange(40.0)
    fit = fit_curve(t, 0.1 + 0.01 * t, "exponential")
    assert "R_inf" in fit.at_bound and "tau" not in fit.at_bound
    r_inf = next(line for line in fit.report().splitlines() if "R_inf" in line)
    assert "(at its bound)" in r_inf and "+/-" not in r_inf


def test_pgrpo_fit_prints_a_parameter_at_its_bound_without_a_stderr(tmp_path):
    log = _csv(tmp_path / "line.csv", np.arange(40), 0.1 + 0.01 * np.arange(40))
    res = runner.invoke(app, ["fit", str(log), "--no-plot", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    expo = data["baselines"]["exponential"]
    # null, as the text prints none (it was kept until session 36: a review read the JSON's
    # stderr beside "at its bound ... it has no stderr" as a contradiction)
    assert expo["at_bound"] == ["R_inf"] and expo["stderr"]["R_inf"] is None
    assert expo["stderr"]["tau"] is not None
    assert all("at_bound" in r for r in [data, *data["baselines"].values()])
    text = _text(["fit", str(log), "--no-plot"])
    shown = f"R_inf={expo['params']['R_inf']:.4g} (at its bound)"
    assert shown in text
    assert not re.search(r"R_inf=[-0-9.e]+\+-", text)  # no row gives R_inf a stderr here
    assert re.search(r"tau=[0-9.e+]+\+-", text)  # the others keep theirs


@pytest.mark.skipif(not CORPUS.is_dir(), reason="needs ../shared/data/curves")
def test_rom_v0s_start_velocity_at_its_bound_on_a_flat_run():
    """f1 flat (review s32): rom_v0's u sat on its bound and was printed `u=0.2+-1.5`."""
    log = CORPUS / "f1_strategy_grpo_v1_flat.csv"
    data = json.loads(runner.invoke(app, ["fit", str(log), "--no-plot", "--json"]).stdout)
    assert "u" in data["baselines"]["rom_v0"]["at_bound"]
    text = _text(["fit", str(log), "--no-plot"])
    assert "u=0.2 (at its bound)" in text and "u=0.2+-" not in text


# --- block means whose noise is all of their variance ---------------------------------------


def _q(**kw) -> dict:
    base = dict(r2=0.2, r2_adjusted=0.15, parameters=4.0, noise_ceiling=0.3,
                noise_ceiling_holds=1.0, r2_block_means=0.625, block=10.0, blocks=8.0,
                bin_size=1.0)  # fmt: skip
    return {**base, **kw}


def test_the_block_means_ceiling_in_words_where_it_is_no_number_to_read():
    zero = quality_words(_q(noise_ceiling_block_means=0.0), "rom")
    assert "on means of 10 points R^2 0.625, but their noise is about all of their" in zero
    assert "nothing for a curve to explain" in zero and "4 parameters on 8 means" in zero
    assert "0.000" not in zero.split("on means")[1]  # no 0.000 beside the larger R^2
    unknown = quality_words(_q(noise_ceiling_block_means=None), "rom")
    assert "(their noise ceiling cannot be estimated)" in unknown
    passed = quality_words(
        _q(r2_block_means=0.87, noise_ceiling_block_means=0.71,
           noise_ceiling_block_means_holds=0.0), "rom"
    )  # fmt: skip
    assert "above the noise ceiling first differences give for them (0.710)" in passed
    assert "no guide there" in passed and "their noise ceiling about" not in passed
    held = quality_words(_q(r2_block_means=0.958, noise_ceiling_block_means=0.968), "rom")
    assert "on means of 10 points R^2 0.958 (their noise ceiling about 0.968)" in held


def test_fit_quality_flags_a_block_ceiling_the_fit_passes():
    rng = np.random.default_rng(1)
    t = np.arange(80.0)
    q = fit_quality(fit_curve(t, 0.5 + rng.normal(0, 0.1, t.size), "rom"))
    assert q["noise_ceiling_block_means"] == 0.0 and q["blocks"] == 8.0
    assert q["noise_ceiling_block_means_holds"] == 1.0  # noise only: not "the ceiling is wrong"
    # MA(1) noise at -0.9: first differences overstate the block means' noise, so their
    # ceiling (0.87) is below what the fit reaches (0.99): flagged, not printed as a ceiling
    rng = np.random.default_rng(0)
    e = rng.normal(0, 0.1, t.size + 1)
    alternating = 0.2 + 0.5 * (1 - np.exp(-t / 30)) + e[1:] - 0.9 * e[:-1]
    q = fit_quality(fit_curve(t, alternating, "exponential"))
    assert q["r2_block_means"] > q["noise_ceiling_block_means"] + CEILING_SLACK
    assert q["noise_ceiling_block_means_holds"] == 0.0


def test_pgrpo_fit_says_white_noise_means_leave_nothing_to_explain(tmp_path):
    """80 points of white noise (8 means of 10: their ceiling is 0): the text said "R^2 ...
    (their noise ceiling about 0.000)" beside a larger R^2; --json keeps the numbers."""
    rng = np.random.default_rng(1)
    log = _csv(tmp_path / "noise.csv", np.arange(80), 0.5 + rng.normal(0, 0.1, 80))
    q = json.loads(runner.invoke(app, ["fit", str(log), "--no-plot", "--json"]).stdout)[
        "fit_quality"
    ]
    assert q["noise_ceiling_block_means"] == 0.0 and q["r2_block_means"] > 0
    text = _text(["fit", str(log), "--no-plot"])
    assert "the noise leaves nothing for a curve to explain" in text
    assert "their noise ceiling about 0.000" not in text


@pytest.mark.skipif(not CORPUS.is_dir(), reason="needs ../shared/data/curves")
def test_the_reviewed_flat_run_and_a_passed_block_ceiling():
    """Review s32, finding 12: f1 flat said "R^2 0.625 (their noise ceiling about 0.000)",
    cs336 question_only "R^2 0.870 (their noise ceiling about 0.710)"."""
    text = _text(["fit", str(CORPUS / "f1_strategy_grpo_v1_flat.csv"), "--no-plot"])
    assert "on means of 10 points R^2 0.625, but their noise is about all" in text
    assert "about 0.000" not in text
    text = _text(["fit", str(CORPUS / "cs336_shibuki_question_only_prompt.csv"), "--no-plot"])
    assert "R^2 0.870, above the noise ceiling first differences give for them (0.710)" in text


# --- the legend ---------------------------------------------------------------------------------


def test_every_model_explains_its_parameters_one_way():
    """Each registered model describes itself and each of its parameters; a name means the
    same in every model (STYLE: names stay the same everywhere)."""
    meaning: dict[str, str] = {}
    for name in FIT_MODELS:
        spec = FIT_MODELS.get(name)
        assert spec.description, name
        for p in spec.param_names:
            assert spec.meanings.get(p), (name, p)
            assert meaning.setdefault(p, spec.meanings[p]) == spec.meanings[p], (name, p)
    rom = FIT_MODELS.get("rom")
    assert [rom.unit(p) for p in rom.param_names] == [
        "in reward units", "in reward units", "per step", "in steps"
    ]  # fmt: skip


def test_the_legend_names_only_what_is_shown():
    models, params = legend(["exponential", "exponential"])
    assert models.count("exponential:") == 1 and "rom" not in models
    assert "tau time constant" in params and " m " not in params and "in steps" in params
    models, params = legend(["rom_v0"])
    assert "x'(0) = u x(0)" in models and "per step: k pull towards R_inf, u start" in params


def test_pgrpo_fit_explains_its_models_and_parameters(tmp_path):
    t = np.arange(60.0)
    rng = np.random.default_rng(0)
    log = _csv(
        tmp_path / "rise.csv", t, 0.2 + 0.6 * (1 - np.exp(-t / 15)) + rng.normal(0, 0.02, 60)
    )
    data = json.loads(runner.invoke(app, ["fit", str(log), "--no-plot", "--json"]).stdout)
    text = _text(["fit", str(log), "--no-plot"])
    for line in legend([data["model"], *data["baselines"]]):
        assert " ".join(line.split()) in text
    assert "rom_v0: m x'' + x' + k x = 0 with a start velocity" in text
    assert "per step: k pull towards R_inf" in text and "in steps: m inertia" in text
    assert "models (" not in json.dumps(data)  # text only: the JSON keeps its keys


def test_the_report_marks_a_bound_and_explains_its_model(tmp_path):
    """The report's `Fit` line: the rom's R_inf on its box is marked, and the legend follows."""
    log = _csv(tmp_path / "line.csv", np.arange(40), 0.1 + 0.01 * np.arange(40))
    data = json.loads(runner.invoke(app, ["fit", str(log), "--no-plot", "--json"]).stdout)
    res = runner.invoke(app, ["report", str(log), "--out", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    page = html.unescape(re.sub(r"<[^>]+>", " ", (tmp_path / "rep" / "report.html").read_text()))
    page = " ".join(page.split())
    line = page[page.index("Fit ") :][:1500]
    assert f"R_inf={data['params']['R_inf']:.4g} (at its bound)" in line
    for text in legend([data["model"]]):
        assert text in line


def test_an_offset_reward_does_not_put_interior_levels_at_a_bound():
    """The tolerance is relative to the box's width: with the reward shifted by 1e6 the levels'
    bound is 1e6 +- 2, and |bound| x 1e-5 = 10 flagged interior values (a review, 2026-12-06)."""
    from pgrpo.dynamics.fit import fit_curve

    rng = np.random.default_rng(0)
    t = np.arange(100.0)
    base = 0.2 + 0.3 * (1 - np.exp(-t / 20)) + 0.02 * rng.standard_normal(100)
    assert fit_curve(t, base, "exponential").at_bound == ()
    assert fit_curve(t, 1e6 + base, "exponential").at_bound == ()


# --- nothing to fit, and a parameter the data do not fix (review 2, finding 12) ---------------


def _v0_at_rest(seed: int = 1):
    """rom_v0 on a noisy exponential whose fit leaves m at 0 (seed 1): u then drops out."""
    from pgrpo.dynamics.fit import fit_curve

    t = np.arange(1, 61.0)
    y = 0.3 + 0.41 * (1 - np.exp(-t / 16)) + np.random.default_rng(seed).normal(0, 0.02, 60)
    return t, y, fit_curve(t, y, "rom_v0")


def test_a_parameter_coupled_to_one_at_its_bound_or_with_no_variance_is_not_identified():
    """nancol.csv: `m=2.449e-11 (at its bound), u=0+-0`. u enters rom_v0 as m u, so with m at
    0 the data do not fix it, whatever its stderr; a stderr of exactly 0 says the same."""
    from dataclasses import replace

    _, _, fit = _v0_at_rest()
    assert fit.at_bound == ("m",) and fit.unidentified == ("u",)
    assert FIT_MODELS.get("rom_v0").coupled == {"u": "m"}
    loose = {**fit.params, "u": replace(fit.params["u"], stderr=5.0)}
    assert replace(fit, params=loose).unidentified == ("u",)  # coupled: m sits at 0
    free_m = {**fit.params, "m": replace(fit.params["m"], value=3.0)}
    assert replace(fit, params=free_m).unidentified == ("u",)  # its stderr is 0
    both = {**free_m, "u": replace(fit.params["u"], stderr=5.0)}
    assert replace(fit, params=both).unidentified == ()
    u_line = next(line for line in fit.report().splitlines() if line.strip().startswith("u "))
    assert "(not identified)" in u_line and "+/-" not in u_line


def test_pgrpo_fit_says_a_parameter_is_not_identified_instead_of_a_zero_stderr(tmp_path):
    t, y, _ = _v0_at_rest()
    log = _csv(tmp_path / "v0.csv", t, y)
    data = json.loads(runner.invoke(app, ["fit", str(log), "--no-plot", "--json"]).stdout)
    v0 = data["baselines"]["rom_v0"]
    assert v0["at_bound"] == ["m"] and v0["unidentified"] == ["u"]
    text = _text(["fit", str(log), "--no-plot"])
    assert re.search(r"\bu=[-0-9.e]+ \(not identified\)", text)
    assert not re.search(r"\bu=[-0-9.e]+\+-", text)  # before: u=0+-0
    assert "(not identified): the data do not fix it" in text  # the legend says what it means


def test_a_constant_reward_marks_no_parameter_and_says_so_once(tmp_path):
    """const.csv: every shape parameter was printed "(at its bound)" (k=5, m=0, tau=0.2) beside
    "R^2 n/a: ... nothing to fit": the shape of a flat line is no fit's, so no mark, and one
    line says why."""
    log = _csv(tmp_path / "const.csv", np.arange(1, 61), np.full(60, 0.5))
    data = json.loads(runner.invoke(app, ["fit", str(log), "--no-plot", "--json"]).stdout)
    for r in (data, *data["baselines"].values()):
        assert r["at_bound"] == [] and r["unidentified"] == [], r["model"]
        assert r["metrics"]["params_undefined"].startswith("only the levels are identified")
    text = _text(["fit", str(log), "--no-plot"])
    assert "(at its bound)" not in text and "(not identified)" not in text
    assert text.count("only the levels are identified") == 1
    assert "R^2 n/a: the reward never changed: nothing to fit; only the levels" in text
    res = runner.invoke(app, ["report", str(log), "--out", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    page = " ".join(html.unescape((tmp_path / "rep" / "report.html").read_text()).split())
    assert "(at its bound)" not in page and "only the levels are identified" in page


def test_fit_without_a_plot_creates_no_out_folder(tmp_path):
    """A docs audit (session 37): `fit --no-plot --out DIR` created an empty DIR."""
    step = np.arange(1, 61)
    log = _csv(tmp_path / "log.csv", step, 0.2 + 0.6 * (1 - np.exp(-step / 15.0)))
    out = tmp_path / "never" / "made"
    res = runner.invoke(app, ["fit", str(log), "--no-plot", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert not (tmp_path / "never").exists()
    res = runner.invoke(app, ["fit", str(log), "--out", str(out)])  # with the figure: made
    assert res.exit_code == 0, res.output
    assert (out / "fit.png").is_file()
