"""One time axis: every fit of a run (online forecast, demo, `fit`, `report`, `diagnose`) goes
through `pgrpo.dynamics.runfit` and reports tau and kappa per optimizer step."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pgrpo.dynamics import lr_schedule, simulate_recursion
from pgrpo.dynamics.runfit import fit_run, optimizer_clock, run_inputs

K, BETA1, N_LOG = 4, 0.9, 60


def _k4_history(seed: int = 0):
    """A pgrpo-style K = 4 run: log step s (1..N) is drawn after (s - 1) K optimizer steps."""
    n_opt = N_LOG * K
    lr = lr_schedule(n_opt, 1e-3, warmup=40, decay="cosine")
    kappa = 8.0  # a = lr kappa <= 0.008 per optimizer step
    x = simulate_recursion(kappa * lr, BETA1, n_opt, refresh_interval=K)[0]
    at = np.arange(N_LOG) * K
    mean = 0.8 + (0.1 - 0.8) * x[at]
    reward = mean + np.random.default_rng(seed).normal(0.0, 0.01, N_LOG)
    history = [
        {"step": s + 1, "reward": float(reward[s]), "learning_rate": float(lr[at[s]]),
         "optimizer_step": (s + 1) * K, "refresh_interval": K, "beta1": BETA1}
        for s in range(N_LOG)
    ]  # fmt: skip
    return history, kappa


def test_the_five_fits_of_one_k4_run_give_one_kappa(tmp_path):
    from pgrpo.demo import fit_document as demo_fit
    from pgrpo.diagnose.instability import fitted_kappa
    from pgrpo.diagnose.signals import signals_from_log
    from pgrpo.dynamics.logfit import fit_log
    from pgrpo.logs import read_log
    from pgrpo.report import build_report
    from pgrpo.report.build import _fits
    from pgrpo.train.config import load_config
    from pgrpo.train.online import forecast_metrics

    history, kappa = _k4_history()
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history))
    cfg = load_config(None, [f"refresh_interval={K}", f"beta1={BETA1}", f"steps={N_LOG}"])
    assert cfg.grpo.refresh_interval == K and cfg.optim.beta1 == BETA1
    reward = np.array([h["reward"] for h in history])
    log = read_log(run)
    report = build_report(run, out_dir=tmp_path / "report")  # what the demo reads its fit from
    kappas = {
        "online": forecast_metrics(list(reward), [h["learning_rate"] for h in history], cfg)[
            "forecast/kappa"
        ],
        "demo": demo_fit(report.fit, report.forecast, [])["metrics"]["kappa"],
        "fit": fit_log(log).rom.metrics["kappa"],
        "report": _fits(log)[0].metrics["kappa"],
        "diagnose": fitted_kappa(signals_from_log(log)),
    }
    ref = kappas["fit"]
    for path, value in kappas.items():
        assert value == pytest.approx(ref, rel=1e-6), (path, kappas)
    # and it is the run's kappa per optimizer step, not per log step (which is K times larger)
    res = fit_log(log).rom
    assert res.metrics["time_unit"] == "optimizer step"
    assert res.metrics["kappa_constrained"] == pytest.approx(kappa, rel=0.3)
    assert res.metrics["kappa_lo"] <= res.metrics["kappa_constrained"] <= res.metrics["kappa_hi"]


def test_clock_from_the_optimizer_step_column_and_its_errors():
    step = np.arange(1.0, 11.0)
    assert optimizer_clock(step) == 1.0
    assert optimizer_clock(step, step * 4) == 4.0
    assert optimizer_clock(step, np.full(10, np.nan)) == 1.0
    with pytest.raises(ValueError, match="optimizer_step"):
        optimizer_clock(step, -step)
    kw = run_inputs(step, {}, {"lr": 1e-5, "beta1": 0.9, "refresh_interval": 2})
    assert kw["clock"] == 1.0 and np.all(kw["lr"] == 1e-5) and kw["refresh_interval"] == 2


def test_rescaling_the_log_axis_by_the_clock_leaves_tau_and_kappa_unchanged():
    history, _ = _k4_history(seed=1)
    step = np.array([h["step"] for h in history], dtype=float)
    reward = np.array([h["reward"] for h in history])
    lr = np.array([h["learning_rate"] for h in history])
    hyper = {"beta1": BETA1, "refresh_interval": K}
    cols = {"learning_rate": lr, "optimizer_step": step * K}
    on_log = fit_run(step, reward, **run_inputs(step, cols, hyper))
    on_opt = fit_run(step * K, reward, **run_inputs(step * K, {"learning_rate": lr}, hyper))
    for name in ("tau", "kappa", "kappa_constrained"):
        assert on_log.metrics[name] == pytest.approx(on_opt.metrics[name], rel=1e-4), name
    assert on_log.r2 == pytest.approx(on_opt.r2, abs=1e-6)
