"""`assess_live`: invariants (hypothesis), each stop rule on constructed curves, patience."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgrpo.diagnose.live import STOP_RULES, VERDICTS, LiveConfig, LiveStatus, assess_live
from pgrpo.logs import RewardLog


def _log(reward, **cols):
    reward = np.asarray(reward, dtype=float)
    step = np.arange(1.0, reward.size + 1)
    cols = {k: np.asarray(v, dtype=float) for k, v in cols.items()}
    return RewardLog(step, reward, cols, {"group_size": 8.0}, (), "test", "test", "reward")


def _replay(reward, cfg, every=2, **cols):
    history = ()
    for k in range(1, len(reward) + 1, every):
        sub = _log(reward[:k], **{c: v[:k] for c, v in cols.items()})
        history = (*history, assess_live(sub, cfg, history))
    return history


curves = st.builds(
    lambda n, level, rise, tau, noise, seed: (
        level + rise * (1 - np.exp(-np.arange(n) / tau))
        + noise * np.random.default_rng(seed).standard_normal(n)
    ),
    st.integers(12, 80), st.floats(-1, 1), st.floats(-1, 1), st.floats(1, 100),
    st.floats(0.0, 0.3), st.integers(0, 2**16),
)  # fmt: skip


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(curves, st.floats(-5, 5))
def test_invariants_and_translation_equivariance(reward, shift):
    cfg = LiveConfig(stop_on=STOP_RULES)
    a = assess_live(_log(reward), cfg)
    assert a.verdict in VERDICTS and set(a.alerts) <= set(STOP_RULES)
    assert all(isinstance(v, float) and math.isfinite(v) for v in a.metrics.values())
    assert a.metrics["pgrpo/verdict"] == VERDICTS.index(a.verdict)
    # how sure a plateau is: logged exactly while the verdict is plateau
    for key in ("pgrpo/plateau_stopped", "pgrpo/plateau_creeping"):
        assert (key in a.metrics) == (a.verdict == "plateau")
        assert a.metrics.get(key, 0.0) in (0.0, 1.0)
    assert not a.stop  # one assessment cannot satisfy patience=2
    if "pgrpo/forecast_plateau" in a.metrics:
        m = a.metrics
        assert m["pgrpo/forecast_lo"] <= m["pgrpo/forecast_plateau"] <= m["pgrpo/forecast_hi"]
        b = assess_live(_log(reward + shift), cfg)
        scale = max(float(np.ptp(reward)), 1e-3)
        assert b.metrics["pgrpo/forecast_plateau"] == pytest.approx(
            m["pgrpo/forecast_plateau"] + shift, abs=0.05 * scale
        )


def test_too_short_is_not_enough_evidence():
    a = assess_live(_log(np.linspace(0, 1, 11)), LiveConfig(stop_on=STOP_RULES))
    assert a.verdict == "too_short" and a.alerts == () and "pgrpo/forecast_plateau" not in a.metrics


def test_collapse_after_a_rise_is_detected_and_stops_with_patience():
    rng = np.random.default_rng(0)
    t = np.arange(80)
    reward = np.where(t < 50, 0.1 + 0.7 * (1 - np.exp(-t / 8)), 0.1) + 0.02 * rng.standard_normal(
        80
    )
    cfg = LiveConfig(stop_on=("collapse",))
    hist = _replay(reward, cfg)
    # the verdict may flicker near its threshold (this step-shaped drop is tested against an
    # AR(1) null at the top of its grid, rho 0.9: the smooth rise reads as autocorrelation, p
    # near 0.005), so the stop comes after the first `patience` assessments in a row that alert
    assert hist[-1].verdict == "collapsed"
    stop = next(i for i, h in enumerate(hist) if h.stop)
    assert stop + 1 >= cfg.patience
    assert all("collapse" in h.alerts for h in hist[stop + 1 - cfg.patience : stop + 1])
    assert not any(h.stop for h in hist[:stop])  # no stop before patience is met
    first = next(i for i, h in enumerate(hist) if "collapse" in h.alerts)
    assert hist[first].step > 50  # not before the drop


def test_noise_and_rises_never_collapse():
    rng = np.random.default_rng(1)
    for _ in range(10):
        for reward in (0.5 + 0.05 * rng.standard_normal(60),
                       0.01 * np.arange(60) + 0.05 * rng.standard_normal(60)):  # fmt: skip
            assert not any("collapse" in h.alerts for h in _replay(reward, LiveConfig(), every=6))


def test_degeneracy_must_be_sustained():
    reward = np.full(40, 0.9) + 0.01 * np.random.default_rng(2).standard_normal(40)
    streak = np.full(40, 0.2)
    streak[-4:] = 1.0  # four degenerate points: not enough (patience 5)
    cfg = LiveConfig(stop_on=("degeneracy",))
    assert "degeneracy" not in assess_live(_log(reward, frac_reward_zero_std=streak), cfg).alerts
    streak[-5:] = 0.95
    a = assess_live(_log(reward, frac_reward_zero_std=streak), cfg)
    assert "degeneracy" in a.alerts and a.metrics["pgrpo/degeneracy"] == 0.95
    assert a.metrics["pgrpo/degeneracy_iid"] == pytest.approx(0.9**8 + 0.1**8, abs=0.05)


def test_plateau_stops_a_saturated_curve_but_not_a_rising_one():
    rng = np.random.default_rng(3)
    t = np.arange(1.0, 121)
    sat = 0.8 - 0.6 * np.exp(-t / 10) + 0.02 * rng.standard_normal(120)
    hist = _replay(sat, LiveConfig(stop_on=("plateau",)), every=4)
    stop = next(h.step for h in hist if h.stop)
    assert 30 <= stop <= 110
    rise = 0.005 * t + 0.02 * rng.standard_normal(120)
    assert not any(h.stop for h in _replay(rise, LiveConfig(stop_on=("plateau",)), every=4))


def _probable_plateau(n=60, seed=0):
    """A rise of 0.3 with time constant n/5 under batch noise of sd 0.08: the second half does
    not rise significantly, but rises up to ~40% of the gain are not rejected ("probably")."""
    t = np.arange(float(n))
    noise = np.random.default_rng(seed).normal(0, 0.08, n)
    return 0.2 + 0.3 * (1 - np.exp(-t / (n / 5))) + noise


def test_a_probable_plateau_raises_no_plateau_alert_unless_asked():
    """The verdict's own action on a plateau whose bound does not say it stopped is "train on",
    so the live stop waits for one that does (plateau_confirmed); False restores any plateau."""
    for seed in range(3):
        log = _log(_probable_plateau(seed=seed))
        a = assess_live(log, LiveConfig(stop_on=("plateau",)))
        assert a.verdict == "plateau" and a.metrics["pgrpo/plateau_stopped"] == 0.0
        assert a.summary.startswith("Probably plateaued") and "plateau" not in a.alerts
        b = assess_live(log, LiveConfig(stop_on=("plateau",), plateau_confirmed=False))
        assert b.alerts == ("plateau",) and b.metrics == a.metrics | {"pgrpo/alert/plateau": 1.0}
    rng = np.random.default_rng(1)  # a stopped plateau alerts either way
    rise = np.concatenate([np.linspace(0.1, 0.8, 20), np.full(300, 0.8)])
    log = _log(rise + rng.normal(0, 0.03, rise.size))
    for confirmed in (True, False):
        st_ = assess_live(log, LiveConfig(plateau_confirmed=confirmed))
        assert st_.metrics["pgrpo/plateau_stopped"] == 1.0 and st_.alerts == ("plateau",)


def _earlier(verdict, alerts=()):
    return LiveStatus(1.0, 0.5, verdict, alerts, False, "")


def test_patience_counts_unconfirmed_plateaus_and_the_stop_waits_for_a_confirmed_one():
    """A plateau whose bound flips between "probably" and "has stopped" from one assessment to
    the next still builds the patience; the stop needs the assessment that requests it to be
    confirmed, and any other verdict in between restarts the count."""
    rng = np.random.default_rng(1)
    rise = np.concatenate([np.linspace(0.1, 0.8, 20), np.full(300, 0.8)])
    confirmed = _log(rise + rng.normal(0, 0.03, rise.size))
    cfg = LiveConfig(stop_on=("plateau",))
    unconfirmed = tuple(_earlier("plateau") for _ in range(7))  # 7 = plateau_patience - 1
    assert assess_live(confirmed, cfg, unconfirmed).held == ("plateau",)
    broken = (*unconfirmed[:3], _earlier("learning"), *unconfirmed[4:])
    assert not assess_live(confirmed, cfg, broken).stop
    assert not assess_live(confirmed, cfg, unconfirmed[1:]).stop  # 6 before: one short
    probable = _log(_probable_plateau())  # the assessment itself unconfirmed: no stop
    assert not assess_live(probable, cfg, unconfirmed).stop
    anyp = LiveConfig(stop_on=("plateau",), plateau_confirmed=False)
    assert assess_live(probable, anyp, unconfirmed).stop


def test_config_takes_numpy_scalars_as_plain_python_values():
    """A numpy bool or integer from a sweep script is stored as bool / int, so the callback's
    JSON report can be written."""
    import json
    from dataclasses import asdict
    from fractions import Fraction

    cfg = LiveConfig(plateau_confirmed=np.bool_(False), min_points=np.int64(30),
                     confidence=np.float32(0.8), degeneracy_threshold=np.array(0.95))  # fmt: skip
    assert cfg.plateau_confirmed is False and type(cfg.min_points) is int
    assert cfg.degeneracy_threshold == 0.95
    json.dumps(asdict(cfg))
    assert LiveConfig(confidence=Fraction(9, 10)).confidence == 0.9


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"confidence": 1.0}, "confidence must be in"), ({"min_points": 5}, "min_points must be"),
     ({"patience": 0}, "patience must be >= 1"), ({"stop_on": ("x",)}, "unknown stop rule"),
     ({"plateau_confirmed": "no"}, "plateau_confirmed must be True or False"),
     ({"confidence": "0.9"}, "confidence must be a real number"),
     ({"confidence": np.complex128(0.9 + 1j)}, "confidence must be a real number")],
)  # fmt: skip
def test_config_errors_say_how_to_fix(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LiveConfig(**kwargs)


def test_a_plateau_logs_how_sure_it_is():
    rng = np.random.default_rng(0)
    rise = np.concatenate([np.linspace(0.1, 0.8, 20), np.full(300, 0.8)])
    st_ = assess_live(_log(rise + rng.normal(0, 0.03, rise.size)), LiveConfig())
    assert st_.verdict == "plateau" and st_.metrics["pgrpo/plateau_stopped"] == 1.0
    assert st_.metrics["pgrpo/plateau_creeping"] == 0.0  # level after the rise: no creep
    t = np.arange(320.0)  # a floor, a fast rise, then a creep of +0.05 over 250 steps
    creep = np.clip(0.1 + 0.7 * (t - 50) / 20, 0.1, 0.8) + np.where(t > 70, 2e-4 * (t - 70), 0)
    st_ = assess_live(_log(creep + rng.normal(0, 0.01, t.size)), LiveConfig())
    assert st_.verdict == "plateau" and st_.metrics["pgrpo/plateau_creeping"] == 1.0
