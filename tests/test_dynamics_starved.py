"""`rom_starved`: the rom whose force acts through the groups with a reward spread only
(`pgrpo.dynamics.starved`), as a model, as a variant of the rom fit and through `pgrpo fit`."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pgrpo.core.stats import iid_degeneracy
from pgrpo.dynamics import fit_curve
from pgrpo.dynamics.curves import FIT_MODELS, FitContext
from pgrpo.dynamics.recursion import unit_response
from pgrpo.dynamics.starved import spread_share, starved_range, starved_run


@pytest.mark.parametrize("g", [2, 4, 8, 16, 64])
def test_the_share_is_one_minus_the_iid_degeneracy_normalised_at_one_half(g):
    u = np.linspace(0.0, 1.0, 41)
    expect = (1.0 - iid_degeneracy(u, g)) / (1.0 - iid_degeneracy(0.5, g))
    got = np.array([spread_share(float(x), g) for x in u])
    np.testing.assert_allclose(got, expect, rtol=1e-12, atol=1e-15)
    assert spread_share(0.5, g) == pytest.approx(1.0)
    assert spread_share(0.0, g) == spread_share(1.0, g) == 0.0
    assert spread_share(-0.2, g) == 0.0 and spread_share(1.3, g) == 0.0  # clipped to [0, 1]
    # at a floor the share grows as G u: the logistic take-off
    assert spread_share(1e-6, g) == pytest.approx(g * 1e-6 / (1.0 - 2.0 ** (1 - g)), rel=1e-4)


@settings(max_examples=40, deadline=None)
@given(
    k=st.floats(1e-3, 0.5),
    m=st.floats(0.0, 30.0),
    K=st.integers(1, 5),
    n=st.integers(1, 120),
    r_0=st.floats(0.35, 0.45),
    r_inf=st.floats(0.55, 0.65),
    seed=st.integers(0, 2**16),
)
def test_with_every_group_spread_it_is_the_linear_recursion(k, m, K, n, r_0, r_inf, seed):
    """G -> infinity (s = 1 inside the range): exactly rom_schedule's recursion, any schedule
    and refresh interval."""
    a = (k * np.random.default_rng(seed).uniform(0.1, 1.0, n)).tolist()
    beta = m / (1.0 + m)
    path = np.array(starved_run(a, beta, K, r_0, r_inf, (0.0, 1.0), 10**6))
    linear = r_inf + (r_0 - r_inf) * np.array(unit_response(a, beta, K))
    np.testing.assert_allclose(path, linear, rtol=1e-12, atol=1e-14)


def test_a_run_at_the_floor_stays_there_and_one_just_above_it_takes_off_late():
    """s(0) = 0: a run where every group fails gets no gradient; from 0.1% it rises as a
    logistic, late and then sharply (the slow start the linear rom cannot follow)."""
    a = [0.05] * 400
    stuck = starved_run(a, 0.5, 1, 0.0, 0.6, (0.0, 1.0), 8)
    assert max(stuck) == 0.0
    path = np.array(starved_run(a, 0.5, 1, 0.001, 0.6, (0.0, 1.0), 8))
    linear = 0.6 + (0.001 - 0.6) * np.array(unit_response(a, 0.5, 1))
    half, half_linear = int(np.argmax(path >= 0.3)), int(np.argmax(linear >= 0.3))
    assert half > 2 * half_linear and path[half // 2] < 0.05
    assert path[-1] == pytest.approx(0.6, abs=0.01)
    assert np.argmax(np.diff(path)) > 0.5 * half  # the steepest rise comes late, not at the start
    assert np.argmax(np.diff(linear)) < 0.5 * half_linear


def _floor_start(seed: int = 0, n: int = 200, G: int = 8, prompts: int = 32):
    """A curve of batch means of prompts x G 0/1 rewards whose mean follows rom_starved from
    a floor (R_0 0.002, R_inf 0.6, k 0.05, m 3)."""
    ctx = FitContext(group_size=G, reward_range=(0.0, 1.0))
    truth = {"R_0": 0.002, "R_inf": 0.6, "k": 0.05, "m": 3.0}
    t = np.arange(n, dtype=float)
    mean = FIT_MODELS.get("rom_starved").func(t, truth, ctx)
    rng = np.random.default_rng(seed)
    reward = rng.binomial(prompts * G, np.clip(mean, 0, 1)) / (prompts * G)
    return t + 1.0, reward, truth


def test_the_rom_fit_takes_the_starved_variant_on_a_floor_start_and_recovers_it():
    step, reward, truth = _floor_start()
    linear = fit_curve(step, reward, "rom")  # no G: the linear rom family only
    fit = fit_curve(step, reward, "rom", group_size=8)
    assert linear.model in ("rom", "rom_schedule") and fit.model == "rom_starved"
    assert fit.metrics["variant"] == "starved" and fit.metrics["group_size"] == 8.0
    assert fit.metrics["r2_linear"] == pytest.approx(linear.r2)
    assert fit.r2 > linear.r2 + 0.01 and fit.aic < linear.aic
    v = fit.values
    assert v["R_inf"] == pytest.approx(truth["R_inf"], abs=0.02)
    assert v["k"] == pytest.approx(truth["k"], rel=0.3)
    assert fit.params["k"].stderr is not None and fit.params["k"].stderr > 0
    assert np.max(np.abs(fit.predict(step) - fit.fitted)) < 1e-9  # predict is the fitted curve


def test_without_g_or_a_01_scale_there_is_no_starved_variant():
    step, reward, _ = _floor_start(seed=1)
    assert fit_curve(step, reward, "rom").model != "rom_starved"
    shifted = reward * 3.0 - 1.0  # leaves [0, 1], no range stated: no 0/1 scale to read
    assert starved_range(shifted, None) is None
    assert fit_curve(step, shifted, "rom", group_size=8).model != "rom_starved"
    assert starved_range(reward, None) == (0.0, 1.0)


def test_a_stated_range_gives_the_same_fit_in_its_units():
    """The same success rates on a 0-10 scale with that range stated: the same fit, levels x 10."""
    step, reward, _ = _floor_start(seed=2)
    unit = fit_curve(step, reward, "rom", group_size=8)
    tens = fit_curve(step, 10.0 * reward, "rom", group_size=8, reward_range=(0.0, 10.0))
    assert unit.model == tens.model == "rom_starved"
    assert tens.r2 == pytest.approx(unit.r2, abs=1e-6)
    assert tens.values["k"] == pytest.approx(unit.values["k"], rel=1e-3)
    assert tens.values["R_inf"] == pytest.approx(10.0 * unit.values["R_inf"], rel=1e-3)


def test_pgrpo_fit_reports_the_starved_variant_with_the_group_size(tmp_path):
    from pgrpo.cli import _load_commands, app

    _load_commands()
    step, reward, _ = _floor_start(seed=3)
    log = tmp_path / "floor.csv"
    log.write_text(
        "step,reward\n"
        + "".join(f"{s:g},{float(r)!r}\n" for s, r in zip(step, reward, strict=True))
    )
    runner = CliRunner()
    res = runner.invoke(app, ["fit", str(log), "--group-size", "8", "--no-plot", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["model"] == "rom_starved" and data["metrics"]["variant"] == "starved"
    assert data["hyperparameters"]["group_size"] == 8
    plain = json.loads(runner.invoke(app, ["fit", str(log), "--no-plot", "--json"]).stdout)
    assert plain["model"] != "rom_starved"
    assert data["r2"] > plain["r2"]
    text = runner.invoke(app, ["fit", str(log), "--group-size", "8", "--no-plot"]).output
    words = " ".join(text.split())  # rich wraps the line at the terminal's width
    assert "rom_starved" in words and "the linear rom reads R^2" in words
    assert data["fit_quality"]["r2_linear"] == pytest.approx(data["metrics"]["r2_linear"])


@pytest.mark.parametrize("module", ["starved", "schedule_models", "curves", "fit", "fitstats"])
def test_any_dynamics_module_can_be_imported_first(module):
    """pgrpo.dynamics loads lazily, so a user may import a leaf module first; the models that
    register from their own modules are then all registered (a name import at the bottom of
    curves raised ImportError for `import pgrpo.dynamics.starved` and schedule_models)."""
    import ast
    import subprocess
    import sys

    code = (f"import pgrpo.dynamics.{module}\n"
            "from pgrpo.dynamics.curves import FIT_MODELS\n"
            "print(sorted(FIT_MODELS.names()))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-1000:]
    assert {"rom_schedule", "exponential_lr", "rom_starved"} <= set(ast.literal_eval(out.stdout))
