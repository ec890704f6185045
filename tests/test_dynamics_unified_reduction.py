"""One optimizer reduction used everywhere: the duplicate module is gone, every caller (the
model's coefficients, the constrained fit, predict, the diagnosis's margin, the report) goes
through `optimizers.reduce_optimizer` with the run's optimizer, and where the reduction
predicts no threshold (adam) nothing is said about K*."""

from __future__ import annotations

import importlib
from dataclasses import replace

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from pgrpo.dynamics import fit_curve, predict, rom_coefficients, trajectory
from pgrpo.dynamics.optimizers import (
    OPTIMIZER_REDUCTIONS,
    OptimizerSettings,
    fit_reduction,
    heavy_ball_continuum,
    reduce_optimizer,
    run_optimizer,
)


def test_the_duplicate_reduction_module_is_gone():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("pgrpo.dynamics.reductions")
    assert OPTIMIZER_REDUCTIONS.names() == ["adam", "sgd_momentum"]


@settings(max_examples=40, deadline=None)
@given(
    a=st.floats(1e-4, 0.5),
    beta1=st.one_of(st.just(0.0), st.floats(1e-3, 0.95)),
    K=st.integers(1, 12),
)
def test_every_path_gives_the_same_mass_and_damping(a, beta1, K):
    m, c = heavy_ball_continuum(a, beta1, K)
    for name in OPTIMIZER_REDUCTIONS.names():
        fit = fit_reduction(name, a, beta1, K)  # the constrained fit's path
        coef = rom_coefficients(a / 3.0, beta1, 3.0, refresh_interval=K, optimizer=name)
        direct = reduce_optimizer(
            name,
            OptimizerSettings(
                lr=a / 3.0, kappa=3.0, beta1=beta1, refresh_interval=K, closure=False, max_refresh=K
            ),  # fmt: skip
        )
        for got in ((fit.mass, fit.damping), (coef.m, coef.c), (direct.mass, direct.damping)):
            assert got == pytest.approx((m, c), rel=1e-12, abs=1e-12)
        assert fit.a == pytest.approx(a, rel=1e-12) and fit.beta1 == beta1


def test_adam_states_no_threshold_and_sgd_momentum_gives_one():
    s = OptimizerSettings(lr=0.05, kappa=2.0, beta1=0.9, refresh_interval=4, closure=False)
    adam, sgd = reduce_optimizer("adam", s), reduce_optimizer("sgd_momentum", s)
    assert adam.K_star is None and not adam.metrics["threshold_predicted"]
    assert (
        "no divergence threshold" in adam.K_statement
        and "kappa / u" in adam.metrics["kappa_meaning"]
    )
    assert sgd.metrics["threshold_predicted"] and sgd.K_star is not None and sgd.K_star > 4
    assert adam.a == pytest.approx(sgd.a) == pytest.approx(0.1)  # closure off: a = lr kappa


@pytest.mark.parametrize(
    ("logged", "name"),
    [
        (None, "adam"),
        ("adamw", "adam"),
        ("adamw_torch (TRL default)", "adam"),
        ("AdamW (weight_decay 0.001)", "adam"),
        ("paged_adamw_8bit", "adam"),
        ("sgd_momentum", "sgd_momentum"),
        ("SGD", "sgd_momentum"),
    ],
)
def test_a_logs_optimizer_name_maps_to_its_reduction(logged, name):
    assert run_optimizer(logged) == name


def test_an_optimizer_without_reduction_fails_naming_the_valid_ones():
    with pytest.raises(ValueError, match="adam, sgd_momentum"):
        run_optimizer("adafactor")


def test_the_constrained_fit_names_the_reduction_and_what_kappa_means():
    t = np.arange(0.0, 200)
    red = fit_reduction("sgd_momentum", 0.03, 0.9, 1)
    y = trajectory(t, 0.1, 0.8, red.mass, red.damping, 0.03)
    y = y + np.random.default_rng(0).normal(0, 0.01, t.size)
    lr = np.full(t.size, 1e-5)
    got = {
        name: fit_curve(t, y, lr=lr, beta1=0.9, optimizer=name).metrics
        for name in OPTIMIZER_REDUCTIONS.names()
    }
    assert got["adam"]["optimizer_reduction"] == "adam"
    assert "kappa / u" in got["adam"]["kappa_meaning"]
    assert got["sgd_momentum"]["kappa_meaning"].startswith("curvature")
    # the same (m, c) at the same a: the fitted stiffness agrees, only its meaning differs
    assert got["adam"]["kappa_constrained"] == pytest.approx(
        got["sgd_momentum"]["kappa_constrained"], rel=1e-6
    )
    assert got["adam"]["kappa_constrained"] == pytest.approx(3000.0, rel=0.1)


def test_predict_says_nothing_about_k_star_under_adam():
    p = predict(1e-3, 0.9, 50.0, refresh_interval=8, optimizer="adam", n_steps=50).metrics
    assert p["refresh_threshold"] is None and "no divergence" in p["refresh_threshold_statement"]
    q = predict(1e-3, 0.9, 50.0, refresh_interval=8, optimizer="sgd_momentum", n_steps=50)
    assert q.metrics["refresh_threshold"] is not None


def _recursion_dir(tmp_path, optimizer: str | None):
    from pgrpo.bandit.scenarios import SCENARIOS, write_run

    out = write_run(SCENARIOS.get("refresh_above_threshold").builder(0), tmp_path / str(optimizer))
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    cfg.pop("optimizer", None)
    if optimizer is not None:
        cfg["optim"] = {"name": optimizer}  # what the pgrpo trainer writes
    (out / "config.yaml").write_text(yaml.safe_dump(cfg))
    return out


def test_pgrpo_reader_carries_optim_name_and_the_diagnosis_follows_it(tmp_path):
    from pgrpo.diagnose import diagnose
    from pgrpo.logs import read_log
    from pgrpo.report.build import stability_margin

    seen = {}
    for opt in ("sgd_momentum", "adamw", None):
        log = read_log(_recursion_dir(tmp_path, opt))
        assert log.hyperparameters.get("optimizer") == opt
        ev = diagnose(log).mode("dynamical_instability")
        seen[opt] = (ev.evidence, ev.missing, stability_margin(log, 1.0e3))
    ev, _, margin = seen["sgd_momentum"]
    assert ev["stability_margin"] > 1.0 and margin is not None
    for opt in ("adamw", None):  # AdamW, named or by default: no K*, no margin, nothing missing
        ev, missing, margin = seen[opt]
        assert "k_star" not in ev and "stability_margin" not in ev and margin is None
        assert not any("K*" in m for m in missing)


def test_pgrpo_fit_on_a_log_with_an_unknown_optimizer_keeps_the_free_fit_and_names_it(tmp_path):
    """Was exit 2 (losing the fit); since 2026-12-02 the free fit is kept with a note."""
    import json

    from typer.testing import CliRunner

    from pgrpo.cli import _load_commands, app

    _load_commands()
    run = tmp_path / "run"
    run.mkdir()
    rows = [{"step": s, "reward": 0.2 + 0.5 * (1 - 0.95**s), "learning_rate": 1e-5}
            for s in range(1, 40)]  # fmt: skip
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "config.yaml").write_text(yaml.safe_dump({"optim": {"name": "adafactor", "beta1": 0.9}}))
    res = CliRunner().invoke(app, ["fit", str(run), "--out", str(tmp_path / "o")])
    assert res.exit_code == 0 and "Traceback" not in res.output
    out = " ".join(res.output.split())
    assert "rom" in out and "optimizer 'adafactor' (log config) has no reduction" in out
    assert "closed form" in out and "not fitted" in out and "--optimizer" in out


@pytest.mark.parametrize(
    ("args", "expected"),
    [({"optim": "sgd", "learning_rate": 1e-5}, "sgd_momentum"),
     ({"optim": "adamw_torch", "learning_rate": 1e-5}, "adam"),
     ({"learning_rate": 1e-5}, "adam")],
)  # fmt: skip
def test_a_trl_logs_optim_picks_the_reduction_and_adamw_is_the_default(tmp_path, args, expected):
    import json

    from pgrpo.dynamics.runfit import run_inputs
    from pgrpo.logs import read_log

    hist = [{"step": s, "reward": 0.2 + 0.01 * s, "learning_rate": 1e-5} for s in range(1, 30)]
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": hist}))
    (tmp_path / "training_args.json").write_text(json.dumps(args))
    log = read_log(tmp_path)
    assert log.hyperparameters.get("optimizer") == args.get("optim")
    assert run_inputs(log.step, log.columns, log.hyperparameters)["optimizer"] == expected


@pytest.mark.parametrize("name", ["adamw", "sgd_momentum"])
def test_the_trainers_saved_config_names_its_optimizer_to_the_reader(tmp_path, name):
    import json

    from pgrpo.dynamics.runfit import run_inputs
    from pgrpo.logs import read_log
    from pgrpo.train.config import RunConfig, save_config
    from pgrpo.train.optimizers import TRAIN_OPTIMIZERS

    cfg = replace(RunConfig(), optim=replace(RunConfig().optim, name=name))
    save_config(cfg, tmp_path / "config.yaml")
    rows = [{"step": s, "reward": 0.2 + 0.01 * s} for s in range(1, 20)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    log = read_log(tmp_path)
    assert log.hyperparameters["optimizer"] == name
    got = run_inputs(log.step, log.columns, log.hyperparameters)["optimizer"]
    assert got == TRAIN_OPTIMIZERS.get(name).reduction


def test_fit_curve_refuses_an_unknown_reduction_name_even_without_lr():
    from pgrpo._registry import UnknownNameError

    t = np.arange(30.0)
    with pytest.raises(UnknownNameError, match="adam, sgd_momentum"):
        fit_curve(t, 0.2 + 0.01 * t, optimizer="adamw")  # a trainer name, not a reduction
