"""A known reward range (a task's `reward_range`): fits keep their levels inside it, forecasts
and bands are clipped to it, a wide range changes nothing, and a pgrpo run records it in its
config.yaml, where `pgrpo fit` finds it (the demo's fit of a 0/1 reward once plateaued at 1.48)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgrpo.dynamics.fit import fit_curve
from pgrpo.dynamics.forecast import forecast
from pgrpo.dynamics.runfit import reward_range, run_inputs
from pgrpo.logs.runconfig import hyperparameters_from_config
from pgrpo.tasks import get_task
from pgrpo.tasks.base import FunctionTask, task_reward_range
from pgrpo.train.config import load_config
from pgrpo.train.online import forecast_metrics
from pgrpo.train.setup import with_reward_range


def _rising(n, tau, r0, r_inf, noise, seed):
    """A success rate heading above 1 early on (tau long against n): the fit, unbounded,
    extrapolates its plateau beyond the maximum."""
    t = np.arange(1.0, n + 1)
    rng = np.random.default_rng(seed)
    return t, np.clip(r_inf - (r_inf - r0) * np.exp(-(t - 1) / tau) + rng.normal(0, noise, n), 0, 1)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(10, 30),
    tau=st.floats(4.0, 60.0),
    r0=st.floats(0.0, 0.3),
    noise=st.floats(0.0, 0.1),
    seed=st.integers(0, 10**6),
    model=st.sampled_from(["rom", "exponential", "logistic"]),
)
def test_levels_and_forecasts_stay_inside_the_range(n, tau, r0, noise, seed, model):
    t, y = _rising(n, tau, r0, 2.0, noise, seed)
    fit = fit_curve(t, y, model, reward_range=(0.0, 1.0))
    for name in ("R_inf", "R_0"):
        assert -1e-9 <= fit.values[name] <= 1 + 1e-9, (name, fit.values[name])
    fc = forecast(t, y, 0.7, reward_range=(0.0, 1.0), horizon=np.arange(n + 1.0, 3 * n))
    for arr in (fc.predicted, fc.band_lo, fc.band_hi):
        assert np.all((arr >= 0) & (arr <= 1))
    assert 0 <= fc.mean_band[0] <= fc.predicted_mean <= fc.mean_band[1] <= 1


@settings(max_examples=15, deadline=None)
@given(n=st.integers(8, 30), tau=st.floats(2.0, 10.0), seed=st.integers(0, 10**6))
def test_a_range_far_outside_the_data_changes_nothing(n, tau, seed):
    t, y = _rising(n, tau, 0.2, 0.7, 0.03, seed)
    free = fit_curve(t, y, "rom")
    wide = fit_curve(t, y, "rom", reward_range=(-100.0, 100.0))
    assert wide.values == free.values
    assert wide.r2 == free.r2


def test_the_bound_binds_where_the_unbounded_fit_overshoots():
    t, y = _rising(8, 30.0, 0.05, 2.0, 0.0, 0)
    assert fit_curve(t, y, "exponential").values["R_inf"] > 1.2  # overshoots unbounded
    bounded = fit_curve(t, y, "exponential", reward_range=(0.0, 1.0))
    assert bounded.values["R_inf"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="reward_range"):
        fit_curve(t, y, "exponential", reward_range=(1.0, 0.0))


def test_data_outside_a_wrong_range_is_fitted_as_if_unbounded():
    t, y = _rising(12, 3.0, 2.0, 5.0, 0.0, 0)  # clipped to [0, 1] by _rising: rescale instead
    y = 2.0 + 3.0 * y  # rewards in [2, 5] against a stated [0, 1]
    assert fit_curve(t, y, "exponential", reward_range=(0.0, 1.0)).values == (
        fit_curve(t, y, "exponential").values
    )


def test_the_online_forecast_of_a_bounded_task_stays_at_or_below_its_maximum():
    t, y = _rising(10, 40.0, 0.05, 3.0, 0.0, 0)  # the demo's shape: still steep at step 10
    cfg = load_config(None, ["steps=40", "forecast_every=5"])
    assert forecast_metrics(list(y), [1e-6] * 10, cfg)["forecast/plateau"] > 1.2
    bounded = load_config(None, ["steps=40", "forecast_every=5", "task.reward_range=[0,1]"])
    assert forecast_metrics(list(y), [1e-6] * 10, bounded)["forecast/plateau"] <= 1.0


def test_tasks_declare_their_range_and_the_run_config_records_it():
    assert task_reward_range(get_task("arithmetic")) == (0.0, 1.0)
    plain = FunctionTask("f", examples=[{}], prompt=str, reward=lambda c, e: 0.0)
    assert task_reward_range(plain) is None
    cfg = load_config(None, [])
    assert with_reward_range(cfg, get_task("arithmetic")).task.reward_range == (0.0, 1.0)
    assert with_reward_range(cfg, plain) is cfg
    mine = load_config(None, ["task.reward_range=[-1,3]"])
    assert with_reward_range(mine, get_task("arithmetic")).task.reward_range == (-1.0, 3.0)
    hyper = hyperparameters_from_config(json.loads(json.dumps(mine.to_dict())))
    assert reward_range(hyper) == (-1.0, 3.0)
    assert run_inputs(np.arange(1.0, 4), {}, hyper)["reward_range"] == (-1.0, 3.0)
    assert reward_range(hyperparameters_from_config(cfg.to_dict())) is None


def test_the_demo_summary_forecasts_with_the_range_the_run_recorded(tmp_path):
    """`pgrpo demo`'s summary.json once gave forecast/plateau 1.2 for a 0/1 reward: `analyse`
    got the demo's config as given (range unset), not the one the run recorded."""
    from pgrpo.demo import analyse
    from pgrpo.train.config import save_config

    t, y = _rising(10, 40.0, 0.05, 3.0, 0.0, 0)
    given = load_config(None, ["steps=40"])
    save_config(with_reward_range(given, get_task("arithmetic")), tmp_path / "config.yaml")
    history = [
        {"step": int(s), "reward": float(r), "learning_rate": 1e-6}
        for s, r in zip(t, y, strict=True)
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history))
    assert forecast_metrics(list(y), [1e-6] * 10, given)["forecast/plateau"] > 1.2
    assert analyse(tmp_path, given, history).metrics["forecast/plateau"] <= 1.0
