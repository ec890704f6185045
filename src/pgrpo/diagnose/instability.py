"""Dynamical instability (arXiv 2606.30789): the refresh interval K at or above the exact
threshold K*, oscillations beyond batch noise, a collapse after a rise, an exploding gradient
norm, or NaN/inf. Each reward-curve test is calibrated on null curves of the same length
(`pgrpo.diagnose.nullmodel`) at level ALPHA_MODE, so the three together fire on at most ~1.5% of
pure-noise curves; slow wander (a red spectrum) is not an oscillation (local spectral
prominence)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pgrpo.diagnose import nullmodel as nm
from pgrpo.diagnose.concentration import KL_FLOOR
from pgrpo.diagnose.curvestats import GROWTH_MIN, binomial_sd, centred_smooth, level_shift_z, thirds
from pgrpo.diagnose.rules import ALPHA_MODE, MIN_STEPS, _lack, n_rollouts
from pgrpo.diagnose.signals import Signals, finite, window_mean
from pgrpo.diagnose.verdict import DIAGNOSTIC_RULES, ModeVerdict, cannot_judge, confidence, verdict

GRAD_BLOWUP = 10.0
BLOWUP = 2.0
"""Entropy or KL over the last 10% of the run at least this many times its mid-run level (KL
above `concentration.KL_FLOOR`), with a significant fall of the reward at the end: the policy
diverged."""


def _nonfinite_evidence(s: Signals) -> dict[str, float]:
    """Steps where reward / loss / grad_norm / kl went NaN or inf after having been finite."""
    ev = {}
    for col in ("reward", "loss", "grad_norm", "kl"):
        if col in s.columns:
            x = s.get(col)
            seen = np.nonzero(np.isfinite(x))[0]
            # a NaN after the last finite value of a column logged at every step, or an inf
            # anywhere; a column logged every few steps (kl every 5th) has blank rows between
            # its values, so a blank last row is its stride, not a NaN (it read as instability
            # at confidence 0.99, at step 1)
            dense = seen.size > 0 and seen[-1] - seen[0] + 1 == seen.size
            tail_nan = dense and seen[-1] < x.size - 1 and np.isnan(x[seen[-1] + 1 :]).all()
            first = np.flatnonzero(np.isinf(x))[:1].tolist()  # the first inf
            if tail_nan:
                first.append(int(seen[-1]) + 1)
            if first:
                ev[f"nonfinite_{col}_step"] = float(s.steps[min(first)])
    return ev


LEVEL_SHIFT_Z = 1.96
"""The growth test is judged only where the level held (|`level_shift_z`| below this, 5%
two-sided) or where the noise's growth with the level is bounded (means of N 0/1 rewards:
sqrt(p (1 - p)) times `instability.prompt_mix_ramp`). The batch noise of a reward moves with
its level, and for a reward that is not a mean of 0/1 rewards nothing in the log says by how
much (a logged within-group spread misses the spread between prompts that learning opens, the
whole noise of a 1-prompt batch): live prefixes of 6 of 89 real runs without a collapse note
read `dynamical_instability` on the growth test alone, every one a rise off a floor whose swings
grew x1.9-8.1 with its level (bench/prefix_instability.py, 2026-12-06)."""


def growth_counts(evidence: dict) -> bool:
    """Whether the growth test's evidence counts (what `dynamical_instability` reads and its
    finding words): judged (`oscillation_growth_judged`, `LEVEL_SHIFT_Z`), the late swings
    ranked above the early ones and their size grown by at least GROWTH_MIN."""
    return (
        bool(evidence.get("oscillation_growth_judged", 1.0))
        and evidence.get("oscillation_growth_rank_z", 0.0) > 0
        and evidence.get("oscillation_growth", 0.0) >= GROWTH_MIN
    )


SPREAD_COVERAGE = 0.9
"""The growth test reads the swings against the logged reward_std when it is finite on at least
this share of the reward's steps."""


def _spread_profile(s: Signals, ok: np.ndarray, x: np.ndarray) -> tuple[np.ndarray | None, bool]:
    """The batch noise's profile under the AR(1) null ([n], x: the unit-scale reward at the ok
    steps) and whether it bounds the noise's growth with the level: the logged reward_std (gaps
    filled linearly) when it is finite on SPREAD_COVERAGE of the steps and not all 0 (no bound:
    it misses the spread between prompts), else sqrt(p (1 - p)) of the smoothed level times
    `prompt_mix_ramp` for means of a stated N of 0/1 rewards whose noise is beyond binomial
    (prompts of different difficulty; a bound), else None; smoothed by a centred moving
    average over max(5, n / 10) steps. The sd of a batch mean moves with the spread: where
    it grows (a run leaving a floor at which every rollout failed), the swings of the mean
    grow with it and are no instability (two held-back runs rising from 0 read
    'dynamical_instability' on swings x1.8 and x2.1 against a constant-noise null; 5-25% of
    simulated 32-prompt runs rising from p 0.02, 2026-12-04)."""
    w = max(5, x.size // 10)
    sd = s.get("reward_std")[ok] if "reward_std" in s.columns else np.full(x.size, np.nan)
    fin = np.isfinite(sd)
    if fin.sum() >= SPREAD_COVERAGE * sd.size and np.nanmax(np.abs(sd)) > 0:
        i = np.arange(sd.size)
        return centred_smooth(np.interp(i, i[fin], np.abs(sd[fin]))[None, :], w)[0], False
    if nm.is_binary_mean(x, n_rollouts(s)):
        ramp = prompt_mix_ramp(x, n_rollouts(s), s.hyper("group_size"))
        return binomial_sd(centred_smooth(x[None, :], w)[0]) * ramp, True
    return None, False


def prompt_mix_ramp(x: np.ndarray, n_rollouts: float, group_size: float | None) -> np.ndarray:
    """[n] the most that prompts of different difficulty can grow the noise sd of x: [n], a
    mean of N = n_rollouts 0/1 rewards per step, beyond sqrt(p (1 - p)) over a run: 1 over the
    first third, sqrt(G / D) after it (only the first and last thirds enter the growth
    statistics), all ones when G is unknown or 1 or the thirds overlap. The variance of a mean
    of B prompts x G 0/1 rollouts is (Var(p_i) (1 - 1/G) + p (1 - p) / G) / B: from the
    binomial p (1 - p) / N when every prompt has the same success rate (a run at a floor, whose
    rare successes are independent) to G times that when every prompt is all-or-nothing (a run
    that has learned some prompts and not others). D in [1, G] is the overdispersion the first
    third already shows (its noise variance from first differences over the binomial
    p (1 - p) / N at its smoothed level): a run that starts overdispersed has that much less
    room to grow, a run at a floor (D ~ 1) the full sqrt(G). (A held-back run rising from
    0.0004 to 0.44 at G 8 read growth x1.74 against sqrt(p (1 - p)), 2026-12-04.)"""
    x = np.asarray(x, dtype=float)
    n = x.size
    first, last = thirds(n)
    g = float(group_size) if group_size and group_size > 1 else 1.0
    if g == 1.0 or first.stop > last.start:
        return np.ones(n)
    level = centred_smooth(x[None, :], max(5, n // 10))[0][first]
    binomial = float(np.mean(level * (1.0 - level))) / float(n_rollouts)
    noise = float(np.mean(np.diff(x[first]) ** 2)) / 2.0
    d = min(max(noise / binomial, 1.0), g) if binomial > 0 else 1.0
    top = math.sqrt(g / d)
    ramp = np.full(n, top)
    ramp[first] = 1.0
    return ramp


def _oscillation_evidence(s: Signals) -> tuple[dict[str, float], float]:
    """Oscillations beyond batch noise, each against null curves of the same length
    (`nullmodel`: binomial at the log's N when known, AR(1) otherwise), each at level
    ALPHA_MODE: growth of the residual amplitude (last third / first third, after dividing by
    the expected noise profile: the binomial sqrt(p (1 - p)), or under AR(1) the logged
    reward_std's, `_spread_profile`; judged only where that profile bounds the noise's growth
    with the level or the level held, `LEVEL_SHIFT_Z`), a spectral peak of the
    residuals, and a collapse (a significant fall from the best window to at or below the
    start)."""
    ok = np.isfinite(s.get("reward"))
    x = s.unit_reward()[ok]  # the 0/1 scale of a known range (every statistic is scale-free)
    null = nm.choose_null(x, n_rollouts(s))
    binary = null.kind == "binomial"  # the noise sd then moves with the level
    spread, bounded = (None, True) if binary else _spread_profile(s, ok, x)
    shift = float(level_shift_z(x)[0])
    st = {k: float(v[0]) for k, v in nm.curve_statistics(x, binary, spread).items()}
    ns = nm.null_statistics(x.size, null)
    w = nm.window_size(x.size)
    mw = np.convolve(x, np.ones(w) / w, mode="valid")
    se_w = st["noise_sd"] / math.sqrt(w) if st["noise_sd"] > 0 else math.inf
    best, start, end = float(mw.max()), float(mw[0]), float(mw[-1])
    lost = end <= start and best - start > 2 * se_w
    ev = {
        "oscillation_growth": st["growth"],
        "oscillation_growth_rank_z": st["growth_rank"],
        "oscillation_growth_p": nm.p_value(st["growth_rank"], ns["growth_rank"]),
        "oscillation_growth_level_shift_z": shift,
        "oscillation_growth_judged": float(bounded or abs(shift) < LEVEL_SHIFT_Z),
        "spectral_peak": st["spectral"],
        "spectral_peak_p": nm.p_value(st["spectral"], ns["spectral"]),
        "spectral_peak_period_points": st["peak_period"],
        "peak_drop_p": nm.p_value(st["drop_z"], ns["drop_z"]) if lost else 1.0,
        "peak_drop": (best - end) / (best - start) if best > start else 0.0,
        "null_model": null.describe(),
    }
    grew = growth_counts(ev)
    div = _divergence_evidence(s, x, st["late_drop_z"])
    ev.update(div)
    strength = max(
        _p_strength(ev["oscillation_growth_p"]) if grew else 0.0,
        _p_strength(ev["spectral_peak_p"]),
        _p_strength(ev["peak_drop_p"]),
        _p_strength(div.get("divergence_fall_p", 1.0)),
    )
    return ev, strength


def _divergence_evidence(s: Signals, x: np.ndarray, late_z: float) -> dict[str, float]:
    """The policy diverged: entropy or KL blew up over the end of the run (last 10% over the
    middle 10%, >= BLOWUP) while the reward fell at the end (`nullmodel.late_drop_p`, the fall
    against the noise of the points before the last third). x: the unit-scale reward at its
    finite steps; late_z: its `late_drop_z`. The fall's test alone sets the false-alarm rate
    (at most ALPHA_MODE on stationary noise, whatever the columns do); the columns say it is a
    blow-up, not a slow decline. {} without entropy or KL."""
    ev: dict[str, float] = {}
    for col in ("entropy", "kl"):
        if s.has(col, MIN_STEPS):
            v = s.get(col)
            mid, late = window_mean(v, 0.45, 0.55), window_mean(v, 0.9, 1.0)
            if mid > 0 and (col != "kl" or late > KL_FLOOR):
                ev[f"{col}_blowup"] = late / mid
    if not ev:
        return ev
    blew = max(ev.values()) >= BLOWUP
    ev["divergence_fall_p"] = nm.late_drop_p(x, late_z, n_rollouts(s)) if blew else 1.0
    if s.has("entropy", MIN_STEPS):
        ev.update(entropy_rise(s.steps, s.get("entropy")))
    return ev


def entropy_start(entropy: np.ndarray) -> float:
    """The entropy at the start: the mean of the first max(3, n / 20) finite values of
    entropy: [S] (NaN without one); what `entropy_rise` and the `entropy_floor` check read."""
    vals = entropy[np.isfinite(entropy)]
    return float(np.mean(vals[: max(3, vals.size // 20)])) if vals.size else math.nan


def entropy_rise(step: np.ndarray, entropy: np.ndarray) -> dict[str, float]:
    """How far the entropy rose from its start, for the words beside a collapse (`findings`):
    entropy_start, the mean of its first max(3, n / 20) logged values (the `entropy_floor`
    check's start, so the two agree); entropy_end, the mean of its last tenth;
    entropy_rise, their ratio; entropy_rise_step, the first step whose entropy is above BLOWUP
    x the start. An early blow-up that then stays (0.92 -> 4.3 by step 5 of 40, 6.9 at the end)
    leaves the late / mid-run ratio at 1, and read 'not falling' only (a review, 2026-12-06).
    Descriptive: it decides no verdict. {} without a positive start."""
    ok = np.isfinite(entropy)
    start = entropy_start(entropy)
    end = window_mean(entropy, 0.9, 1.0)
    if not start > 0:
        return {}
    above = np.flatnonzero(ok & (np.nan_to_num(entropy) > BLOWUP * start))
    return {
        "entropy_start": start,
        "entropy_end": end,
        "entropy_rise": end / start,
        "entropy_rise_step": float(step[above[0]]) if above.size else math.nan,
    }


def _p_strength(p: float) -> float:
    """0.5 at p = ALPHA_MODE, towards 1 as p falls a decade below it, towards 0 above."""
    return confidence(-math.log10(max(p, 1e-12)), -math.log10(ALPHA_MODE), 0.5)


def _reduction(s: Signals, lr: float, kappa: float, beta1: float, k_int: float) -> Any:
    """The run optimizer's reduction (`pgrpo.dynamics.optimizers`; AdamW when the log does not
    name one) at these settings: its K_star, or `threshold_predicted` False (adam)."""
    from pgrpo.dynamics.optimizers import OptimizerSettings, reduce_optimizer, run_optimizer

    settings = OptimizerSettings(
        lr=lr, kappa=kappa, beta1=beta1, refresh_interval=max(int(k_int), 1), closure=False
    )
    return reduce_optimizer(run_optimizer(s.config.get("optimizer")), settings)


def _predicts_threshold(s: Signals, beta1: float, k_int: float) -> bool:
    """Whether the run optimizer's reduction predicts a K* at all (a property of the optimizer,
    not of kappa: Adam's never does), read from its cheap fit-time reduction (K scanned only up
    to the run's own), so that an AdamW run costs no kappa fit. An optimizer without a reduction
    answers True, so that `_reduction` names it."""
    from pgrpo.dynamics.optimizers import fit_reduction, run_optimizer

    try:
        red = fit_reduction(run_optimizer(s.config.get("optimizer")), 1e-3, beta1, int(k_int))
    except (ValueError, KeyError):
        return True
    return bool(red.metrics["threshold_predicted"])


def fitted_kappa(s: Signals) -> float | None:
    """kappa (per optimizer step) from the ROM fit of the reward curve that every fit of a run
    uses (`pgrpo.dynamics.runfit`); None when the fit is poor (R^2 < 0.5) or no lr is known."""
    from pgrpo.dynamics.logfit import thin_curve
    from pgrpo.dynamics.runfit import fit_run, run_inputs

    lr = s.hyper("learning_rate")
    if lr is None or lr <= 0 or not s.has("reward", MIN_STEPS):
        return None
    r = s.get("reward")
    ok = np.isfinite(r)
    cols = {n: s.columns[n][ok] for n in ("learning_rate", "optimizer_step") if n in s.columns}
    hyper = {"lr": lr, "beta1": s.hyper("beta1"), "refresh_interval": s.hyper("refresh_interval")}
    step, reward, b = thin_curve(s.steps[ok], r[ok])  # bin means past 4,000 steps (O(1) cost)
    if b > 1:
        cols = {n: thin_curve(s.steps[ok], c)[1] for n, c in cols.items()}
    hyper["optimizer"] = s.config.get("optimizer")
    try:
        fit = fit_run(step, reward, **run_inputs(step, cols, hyper))
    except (ValueError, RuntimeError, np.linalg.LinAlgError):
        return None
    kappa = fit.metrics.get("kappa")
    if not fit.r2 >= 0.5 or not isinstance(kappa, float):
        return None
    return kappa if math.isfinite(kappa) and kappa > 0 else None


KAPPA_SOURCES = {"given": "the run's settings", "reward fit": "a fit of the reward curve"}
"""`kappa_source` in the evidence -> the words the finding and the report's panel print."""


def kappa_words(source: str | None) -> str:
    """Where kappa came from, in words (`KAPPA_SOURCES`; an unknown source as it is)."""
    return KAPPA_SOURCES.get(source or "", source or "?")


def _margin_evidence(s: Signals) -> tuple[dict[str, float], list[str]]:
    """K / K* from the run's hyperparameters, its optimizer's reduction and kappa (the run's
    settings or the command line, e.g. `pgrpo probe`'s, else a ROM fit of the reward curve with
    the logged learning rate). K = 1 when no K is known, as `pgrpo fit` assumes
    (`dynamics.settings`; `refresh_interval_assumed` in the evidence): the smallest K, so an
    alarm on it holds for any K the run took (a review, session 36: a --kappa given without
    --refresh-interval was dropped without a word, beside settings that said "K 1 (assumed)").
    Empty, with nothing missing, when the reduction predicts no threshold (AdamW, the
    default)."""
    from pgrpo.dynamics.settings import ASSUMED_REFRESH_INTERVAL

    k_int, lr, beta1 = s.hyper("refresh_interval"), s.hyper("learning_rate"), s.hyper("beta1")
    if lr is None:
        return {}, ["learning_rate"]
    assumed = {} if k_int is not None else {"refresh_interval_assumed": 1.0}
    k_int = float(ASSUMED_REFRESH_INTERVAL) if k_int is None else k_int
    if not _predicts_threshold(s, beta1 or 0.0, k_int):  # adam: nothing to say about K*
        return {}, []
    kappa, source = s.hyper("kappa"), "given"
    if kappa is None:
        kappa, source = fitted_kappa(s), "reward fit"
    if kappa is None:
        return {}, ["kappa (probe it: `pgrpo probe`, or pass it in config.yaml)"]
    try:
        red = _reduction(s, lr, kappa, beta1 or 0.0, k_int)
    except ValueError as exc:
        return {}, [f"K* ({exc})"]
    if red.K_star is None:
        return {}, ["K* (no unstable refresh interval found for these hyperparameters)"]
    k_star = float(red.K_star)
    ev = {
        "refresh_interval": k_int,
        "kappa": kappa,
        "kappa_source": source,
        "k_star": float(k_star),
        "stability_margin": k_int / k_star,
        **assumed,
    }
    return ev, []


@DIAGNOSTIC_RULES.register("dynamical_instability")
def dynamical_instability(s: Signals) -> ModeVerdict:
    """The update is unstable: refresh interval K at or above the threshold K*, oscillations that
    grow, a collapse of reward after its peak, a divergence (entropy or KL blowing up as the
    reward falls at the end), exploding gradient norm, or NaN/inf."""
    name = "dynamical_instability"
    ev: dict[str, float] = _nonfinite_evidence(s)
    if s.config.get("dropped_nonfinite_rewards"):
        ev["nonfinite_reward_rows"] = float(s.config["dropped_nonfinite_rewards"])
    strengths = [0.99] if ev else []
    margin_ev, missing = _margin_evidence(s)
    ev.update(margin_ev)
    if margin_ev:
        # K and K* are whole numbers and K >= K* diverges (`OptimizerReduction.diverges`): the
        # threshold sits halfway between K* - 1 and K*, so K = K* fires (at 1.0 itself the
        # strength was 0.5, "no", beside words that say "at or above": a review, session 36)
        k_star = margin_ev["k_star"]
        strengths.append(confidence(margin_ev["stability_margin"], 1.0 - 0.5 / k_star, 0.1))
    if s.has("reward", MIN_STEPS):
        o_ev, o_strength = _oscillation_evidence(s)
        ev.update(o_ev)
        strengths.append(o_strength)
    else:
        missing.append(_lack(s, "reward", MIN_STEPS))
    gn = finite(s.get("grad_norm")) if s.has("grad_norm", MIN_STEPS) else np.zeros(0)
    gn = gn[gn > 0]  # a step with no gradient at all (every group degenerate) is no scale
    if gn.size >= MIN_STEPS:
        ev["grad_norm_growth"] = growth = float(
            np.median(gn[-max(1, gn.size // 10) :]) / np.median(gn[: gn.size // 2])
        )
        strengths.append(confidence(growth, GRAD_BLOWUP, 3.0))
    elif s.has("grad_norm", MIN_STEPS):
        missing.append(f"grad_norm (only {gn.size} steps with a gradient, need {MIN_STEPS})")
    else:
        missing.append(_lack(s, "grad_norm", MIN_STEPS))
    if not strengths:
        return cannot_judge(name, missing, "no reward, grad_norm or hyperparameters")
    if margin_ev and margin_ev["stability_margin"] >= 1.0:
        action = f"lower the refresh interval K below K*={margin_ev['k_star']:.0f} or lower lr"
    else:
        action = "lower the learning rate or the refresh interval K (num_iterations)"
    action += "; clip gradients and check sampler/learner log-prob agreement"
    return verdict(
        name, max(strengths), ev, action=action, missing=missing, coverage=len(strengths) / 3
    )
