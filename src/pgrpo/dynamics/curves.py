"""Reward-curve models for fitting, in lmfit's vocabulary: a pure model function, named bounded
parameters, and a data-driven `guess`. Registry `FIT_MODELS` (rom, rom_schedule, rom_starved,
exponential, logistic) is the only dispatch path.

Every model but one is R(t) = R_inf + (R_0 - R_inf) phi(t; theta): a shape `basis(t: [n] steps
since the first logged step, params: dict, ctx) -> phi: [n]` with phi(0) = 1, linear in the two
levels (the fit profiles them out: variable projection); `rom_starved` gives R(t) itself.
- `exponential`: R_inf - (R_inf - R_0) exp(-t / tau)      (arXiv 2507.18014's saturation law)
- `rom`: closed form of m x'' + x' + k x = 0 with v0 = 0, constant lr (model.trajectory); m = 0 is
  exactly `exponential` with tau = 1 / k, so the rom contains the exponential.
- `rom_schedule`: the exact recursion driven by the logged lr schedule, a_n = k lr_n / max(lr),
  momentum beta = m / (1 + m) (fixed from the config's beta1 when known), refresh interval K;
  it and `exponential_lr` live in `schedule_models` (registered when this module is imported).
- `rom_starved`: rom_schedule's recursion with the force scaled by the share of groups with a
  reward spread at the current level (`starved`); not linear in the levels (`CurveModel.path`).
- `logistic`: R_0 + (R_inf - R_0) / (1 + exp(-(t - t_mid) / width)).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from pgrpo._registry import Registry
from pgrpo.dynamics.model import _unit_response
from pgrpo.dynamics.optimizers import DEFAULT_OPTIMIZER
from pgrpo.dynamics.recursion import at_times as _at_times

AT_BOUND_RTOL = 1e-5
"""A fitted value this close to a bound, relative to the box's width (to the bound's size for a
half-open box), is at it (`Parameter.at_bound`): least_squares stops within about its xtol (1e-6,
relative) of a bound it presses against (m = 281.99999995 against 282 steps, u = 1.99999999
against 2 on real runs), while an interior optimum near a small bound stays clear of it (k =
1.5e-4 against 1.0e-4)."""


@dataclass(frozen=True)
class Parameter:
    """A named model parameter with bounds; `vary=False` holds it at `value`."""

    name: str
    value: float
    min: float = -math.inf
    max: float = math.inf
    vary: bool = True
    stderr: float | None = None

    def __post_init__(self) -> None:
        if not self.min <= self.value <= self.max:
            raise ValueError(
                f"parameter {self.name}: value {self.value} outside [{self.min}, {self.max}]"
            )

    @property
    def at_bound(self) -> bool:
        """Whether the fit left this varying parameter at (within AT_BOUND_RTOL of) one of its
        bounds: the data would take it past the box, so its value is the box's and a stderr
        from the curvature there means nothing."""
        if not self.vary:
            return False
        width = self.max - self.min
        for bound in (self.min, self.max):
            # the box's width where it is finite (a reward offset by 1e6 put interior levels
            # "at" a bound of 1e6 +- 2 by |bound|; a review, 2026-12-06), else the bound's size
            scale = width if math.isfinite(width) else abs(bound)
            if math.isfinite(bound) and abs(self.value - bound) <= AT_BOUND_RTOL * scale:
                return True
        return False


@dataclass(frozen=True)
class FitContext:
    """What is known besides (step, reward): the lr schedule and optimizer hyperparameters.

    lr: [T] learning rate at integer times t = 0..T-1 (t = step - step0), or None (unknown);
    extended with its last value beyond T. beta1 / refresh_interval: from the config, or None / 1.
    time_scale: user step units per internal time unit (the fit rescales the step axis for the
    models that allow it, `CurveModel.physical_time` False; 1 for the others, whose time is the
    optimizer step). optimizer: the `OPTIMIZER_REDUCTIONS` name that maps beta1, K to (m, c).
    clock: optimizer steps per unit of the user's step (K when a log counts rollout batches).
    reward_range: known (lo, hi) bounds of the reward, in the user's units, or None; `fit_model`
    keeps R_0 and R_inf inside them. group_size: G, the rollouts per prompt, or None (unknown).
    reward_units: (loc, scale) with the user's reward = loc + scale x the context's (`fit_model`
    fits a standardised reward; the models that read absolute levels, `rom_starved`, map back).
    """

    step0: float = 0.0
    lr: np.ndarray | None = None
    beta1: float | None = None
    refresh_interval: int = 1
    time_scale: float = 1.0
    optimizer: str = DEFAULT_OPTIMIZER
    clock: float = 1.0
    reward_range: tuple[float, float] | None = None
    group_size: int | None = None
    reward_units: tuple[float, float] = (0.0, 1.0)
    metrics: dict[str, float] = field(default_factory=dict)

    def schedule(self, n_steps: int) -> np.ndarray:
        """lr / max(lr) at t = 0..n_steps-1: [n_steps] (ones when the lr is unknown); read-only,
        computed once per n_steps (a long log's fit asks ~100 times; not a field: frozen-safe)."""
        memo = self.__dict__.setdefault("_schedules", {})
        if n_steps not in memo:
            memo[n_steps] = self._schedule(n_steps)
            memo[n_steps].flags.writeable = False
        return memo[n_steps]

    def _schedule(self, n_steps: int) -> np.ndarray:
        if self.lr is None or self.lr.size == 0:
            return np.ones(n_steps)
        lr = self.lr[:n_steps]
        if lr.size < n_steps:
            lr = np.r_[lr, np.full(n_steps - lr.size, lr[-1])]
        top = float(np.max(self.lr))
        return lr / top if top > 0 else np.ones(n_steps)

    @property
    def lr_varies(self) -> bool:
        if self.lr is None or self.lr.size < 2:
            return False
        return bool(np.ptp(self.lr) > 1e-6 * np.max(np.abs(self.lr)))


BasisFunc = Callable[[np.ndarray, dict[str, float], FitContext], np.ndarray]
PathFunc = BasisFunc  # R(t) itself, for a model that is not linear in its levels
GuessFunc = Callable[[np.ndarray, np.ndarray, FitContext], list[dict[str, Parameter]]]


@dataclass(frozen=True)
class CurveModel:
    """A registered curve model: shape basis, parameter names (R_inf, R_0 first), guess (one or
    more starts) and Gaussian priors {name: (centre, scale)} on weakly identified parameters.

    time_power: name -> the power of time in its unit (tau: 1, k: -1; absent: 0), so a fit on a
    rescaled step axis reports in the user's units. physical_time: the model's clock is the
    optimizer step (an lr schedule on the integer step grid, beta1 per step): never rescaled.
    path: R(t) itself for a model whose shape depends on its levels (`rom_starved`); its levels
    are then fitted, not profiled out, and `basis` is not used.
    description: what the model is, in a phrase (x = R - R_inf, t in steps since the first
    logged one); meanings: parameter name -> what it is, in a few words (its unit comes from
    time_power). `fitquality.legend` prints both under `pgrpo fit`'s table.
    coupled: parameter name -> the parameter at whose lower bound it drops out of the model, so
    that the data do not fix it there (`FitResult.unidentified`).
    """

    name: str
    param_names: tuple[str, ...]
    basis: BasisFunc
    guess: GuessFunc
    priors: Callable[[np.ndarray, FitContext], dict[str, tuple[float, float]]] = lambda t, ctx: {}
    time_power: dict[str, int] = field(default_factory=dict)
    physical_time: bool = False
    path: PathFunc | None = None
    description: str = ""
    meanings: dict[str, str] = field(default_factory=dict)
    coupled: dict[str, str] = field(default_factory=dict)

    def unit(self, name: str) -> str:
        """The unit of parameter `name` as fitted, in words ("per step"; the log's steps and
        reward)."""
        if name in LEVEL_MEANINGS:
            return "in reward units"
        power = self.time_power.get(name, 0)
        return {0: "without unit", 1: "in steps", -1: "per step"}.get(power, f"in steps^{power}")

    def func(self, t: np.ndarray, p: dict[str, float], ctx: FitContext) -> np.ndarray:
        """R(t): [n] for t: [n] (user step units since ctx.step0, parameters in user units)."""
        ts = ctx.time_scale
        if ts != 1.0:
            t = np.asarray(t, dtype=float) / ts
            p = to_internal(self, p, ts)
        if self.path is not None:
            return self.path(t, p, ctx)
        return p["R_inf"] + (p["R_0"] - p["R_inf"]) * self.basis(t, p, ctx)


def to_internal(spec: CurveModel, p: dict[str, float], time_scale: float) -> dict[str, float]:
    """Parameters in user step units -> internal units (time divided by time_scale)."""
    return {n: v / time_scale ** spec.time_power.get(n, 0) for n, v in p.items()}


FIT_MODELS: Registry[CurveModel] = Registry("fit model")

LEVEL_MEANINGS = {"R_0": "start level", "R_inf": "level it heads for"}
"""`CurveModel.meanings` of the two levels every model has (one wording for all)."""
ROM_MEANINGS = {**LEVEL_MEANINGS, "k": "pull towards R_inf", "m": "inertia"}
"""`CurveModel.meanings` of the rom family's parameters (rom, rom_v0, rom_schedule, ...)."""


# --- shared bounds and the profile (variable projection) helper ------------------------------


def level_bounds(y: np.ndarray) -> tuple[float, float]:
    """Bounds for R_0 / R_inf: the data range +- 3 ranges (wide enough for a still-rising curve;
    not clipped to [0, 1], so any reward scale works and no fit is forced by the box)."""
    lo, hi = float(np.min(y)), float(np.max(y))
    span = hi - lo
    if not span > 0:  # a constant curve: a relative floor keeps every reward scale alike
        span = 1e-6 * abs(hi) if hi != 0 else 1e-6
    return lo - 3 * span, hi + 3 * span


def levels_within(start: dict[str, Parameter], lo: float, hi: float) -> dict[str, Parameter]:
    """`start` with R_inf and R_0 bounded by [lo, hi] as well (their values clipped into it).
    The caller passes a range the data lie in (`core.rewardrange.range_holding`), so it meets
    every level's box (the data range +- 3 ranges)."""
    out = dict(start)
    for name in ("R_inf", "R_0"):
        p = start[name]
        a, b = max(p.min, lo), min(p.max, hi)
        out[name] = replace(p, value=float(np.clip(p.value, a, b)), min=a, max=b)
    return out


def rate_bounds(t: np.ndarray) -> tuple[float, float]:
    """Bounds for k = 1 / tau (per step): tau in [0.2 steps, 50 x the time span]."""
    span = max(float(np.max(t) - np.min(t)), 1.0)
    return 1.0 / (50.0 * span), 5.0


def profile_levels(phi: np.ndarray, y: np.ndarray, bounds: tuple[float, float], weights=None):
    """Best (R_inf, R_0) for y ~ R_inf (1 - phi) + R_0 phi, per basis row: phi [P, n].

    Returns (R_inf [P], R_0 [P], sse [P]); levels are clipped to `bounds` (then slightly
    suboptimal, which only matters for ranking grid points). weights: [n] sqrt-weights (one
    basis row only): weighted least squares, sse weighted.
    """
    if phi.shape[0] == 1:
        return _profile_one(phi[0], y, bounds, weights)
    n = y.size
    sw, sww, swy = phi.sum(1), np.einsum("ij,ij->i", phi, phi), phi @ y
    suu, suw, suy = n - 2.0 * sw + sww, sw - sww, float(y.sum()) - swy
    det = suu * sww - suw * suw
    safe = np.where(np.abs(det) > 1e-12 * (suu * sww + 1e-300), det, np.nan)
    r_inf = (suy * sww - swy * suw) / safe
    r_0 = (swy * suu - suy * suw) / safe
    fallback = float(np.mean(y))
    r_inf = np.clip(np.where(np.isfinite(r_inf), r_inf, fallback), *bounds)
    r_0 = np.clip(np.where(np.isfinite(r_0), r_0, fallback), *bounds)
    sse = (
        float(y @ y)
        - 2.0 * (r_inf * suy + r_0 * swy)
        + r_inf**2 * suu
        + 2.0 * r_inf * r_0 * suw
        + r_0**2 * sww
    )
    return r_inf, r_0, np.maximum(sse, 0.0)


def _profile_one(phi: np.ndarray, y: np.ndarray, bounds: tuple[float, float], sqrt_w=None):
    """`profile_levels` for one basis row with Python scalars (the fit's inner loop); sqrt_w:
    [n] sqrt-weights or None."""
    if sqrt_w is None:
        n, sy, yy = float(y.size), float(y.sum()), float(y @ y)
        sw, sww, swy = float(phi.sum()), float(phi @ phi), float(phi @ y)
    else:
        w = sqrt_w * sqrt_w
        wphi = w * phi
        n, sy, yy = float(w.sum()), float(w @ y), float(w @ (y * y))
        sw, sww, swy = float(wphi.sum()), float(wphi @ phi), float(wphi @ y)
    suu, suw, suy = n - 2.0 * sw + sww, sw - sww, sy - swy
    det = suu * sww - suw * suw
    lo, hi = bounds
    if math.isfinite(det) and abs(det) > 1e-12 * (suu * sww + 1e-300):
        r_inf = (suy * sww - swy * suw) / det
        r_0 = (swy * suu - suy * suw) / det
    else:
        r_inf = r_0 = sy / n
    r_inf, r_0 = min(max(r_inf, lo), hi), min(max(r_0, lo), hi)
    sse = yy - 2 * (r_inf * suy + r_0 * swy) + r_inf**2 * suu + 2 * r_inf * r_0 * suw + r_0**2 * sww
    return np.array([r_inf]), np.array([r_0]), np.array([max(sse, 0.0)])


def _levels(y: np.ndarray, R_inf: float, R_0: float) -> dict[str, Parameter]:
    lo, hi = level_bounds(y)
    return {
        "R_inf": Parameter("R_inf", float(np.clip(R_inf, lo, hi)), lo, hi),
        "R_0": Parameter("R_0", float(np.clip(R_0, lo, hi)), lo, hi),
    }


def lr_time(t: np.ndarray, ctx: FitContext) -> np.ndarray:
    """U(t) = sum_{n < t} lr_n / max(lr): progress measured in peak-lr optimizer steps ([n] for
    t: [n] optimizer steps; = t with a constant or unknown lr). Interpolated between steps."""
    n_steps = int(math.ceil(float(np.max(t)))) if t.size else 0
    u = np.concatenate(([0.0], np.cumsum(ctx.schedule(n_steps))))
    return _at_times(u, np.asarray(t, dtype=float))


def timescale_prior(t: np.ndarray, ctx: FitContext) -> dict[str, tuple[float, float]]:
    """A prior on tau when ctx.metrics carries one (the forecaster's, `levelgain`):
    tau ~ N(c, (spread c)^2) with c = exp(tau_prior_log_ratio) x the clock time of the whole run
    (the fitted prefix times `horizon_ratio`); nothing otherwise (ordinary fits)."""
    m = ctx.metrics
    if "tau_prior_log_ratio" not in m or not t.size:
        return {}
    total = float(np.max(t)) * float(m["horizon_ratio"])
    clock = total if ctx.lr is None else float(lr_time(np.array([total]), ctx)[0])
    centre = math.exp(float(m["tau_prior_log_ratio"])) * max(clock, 1e-12)
    return {"tau": (centre, float(m["tau_prior_spread"]) * centre)}


# --- exponential -----------------------------------------------------------------------------


def exponential_basis(t: np.ndarray, p: dict[str, float], ctx: FitContext) -> np.ndarray:
    return np.exp(-t / p["tau"])


def exponential_guess(t: np.ndarray, y: np.ndarray, ctx: FitContext) -> list[dict[str, Parameter]]:
    k_lo, k_hi = rate_bounds(t)
    taus = np.geomspace(1.0 / k_hi, 1.0 / k_lo, 32)
    phi = np.exp(-t[None, :] / taus[:, None])
    r_inf, r_0, sse = profile_levels(phi, y, level_bounds(y))
    i = int(np.argmin(sse))
    params = _levels(y, r_inf[i], r_0[i])
    params["tau"] = Parameter("tau", float(taus[i]), 1.0 / k_hi, 1.0 / k_lo)
    return [params]


FIT_MODELS.add(
    "exponential",
    CurveModel(
        "exponential",
        ("R_inf", "R_0", "tau"),
        exponential_basis,
        exponential_guess,
        time_power={"tau": 1},
        priors=timescale_prior,
        description="R_inf + (R_0 - R_inf) exp(-t / tau)",
        meanings={**LEVEL_MEANINGS, "tau": "time constant"},
    ),
)


# --- rom (closed form, constant lr) ------------------------------------------------------------


def rom_basis(t: np.ndarray, p: dict[str, float], ctx: FitContext) -> np.ndarray:
    return _unit_response(t, p["m"], 1.0, p["k"], 1.0, 0.0)


def mass_bounds(t: np.ndarray) -> tuple[float, float]:
    return 0.0, max(float(np.max(t) - np.min(t)), 1.0)


# steps; m = 25 is heavy-ball momentum beta1 ~ 0.96. Chosen on the synthetic suite (seed 5;
# scale 10: median forecast error 0.0130, 25: 0.0115, span / 5 = 100: 0.0146), see docs/dynamics.md
MASS_PRIOR_SCALE = 25.0


def rom_priors(t: np.ndarray, ctx: FitContext) -> dict[str, tuple[float, float]]:
    """Regularise the inertia towards the exponential (m = 0): m ~ N(0, s^2),
    s = min(span / 5, MASS_PRIOR_SCALE)."""
    span = max(float(np.max(t) - np.min(t)), 1.0)
    return {"m": (0.0, min(span / 5.0, MASS_PRIOR_SCALE))}


def rom_guess(t: np.ndarray, y: np.ndarray, ctx: FitContext) -> list[dict[str, Parameter]]:
    """Starts: the exponential's solution (m = 0) first, then the best (k, m) grid point."""
    exp0 = exponential_guess(t, y, ctx)[0]
    k_lo, k_hi = rate_bounds(t)
    m_lo, m_hi = mass_bounds(t)
    k0 = float(np.clip(1.0 / exp0["tau"].value, k_lo, k_hi))
    first = {
        "R_inf": exp0["R_inf"],
        "R_0": exp0["R_0"],
        "k": Parameter("k", k0, k_lo, k_hi),
        "m": Parameter("m", 0.0, m_lo, m_hi),
    }
    ks = np.geomspace(k_lo, k_hi, 16)
    span = m_hi
    ms = np.array([span / 40, span / 8])
    grid = [(k, m) for k in ks for m in ms]
    phi = np.stack([_unit_response(t, m, 1.0, k, 1.0, 0.0) for k, m in grid])
    r_inf, r_0, sse = profile_levels(phi, y, level_bounds(y))
    i = int(np.argmin(sse))
    second = _levels(y, r_inf[i], r_0[i])
    second["k"] = Parameter("k", float(grid[i][0]), k_lo, k_hi)
    second["m"] = Parameter("m", float(grid[i][1]), m_lo, m_hi)
    return [first, second]


FIT_MODELS.add(
    "rom",
    CurveModel(
        "rom",
        ("R_inf", "R_0", "k", "m"),
        rom_basis,
        rom_guess,
        rom_priors,
        time_power={"k": -1, "m": 1},
        description="m x'' + x' + k x = 0 from rest",
        meanings=ROM_MEANINGS,
    ),
)


# --- logistic ----------------------------------------------------------------------------------


def logistic_basis(t: np.ndarray, p: dict[str, float], ctx: FitContext) -> np.ndarray:
    """Weight on R_0: 1 - sigmoid((t - t_mid) / width) (R_0 is the lower asymptote here)."""
    z = np.clip((t - p["t_mid"]) / p["width"], -500, 500)
    return 1.0 - 1.0 / (1.0 + np.exp(-z))


def logistic_guess(t: np.ndarray, y: np.ndarray, ctx: FitContext) -> list[dict[str, Parameter]]:
    span = max(float(np.max(t) - np.min(t)), 1.0)
    mids = np.linspace(-0.5 * span, 1.5 * span, 24)
    widths = np.geomspace(0.5, 2.0 * span, 12)
    grid = [(c, w) for c in mids for w in widths]
    # phi = weight on R_0: 1 - sigmoid
    phi = np.stack([1.0 - 1.0 / (1.0 + np.exp(-np.clip((t - c) / w, -500, 500))) for c, w in grid])
    r_inf, r_0, sse = profile_levels(phi, y, level_bounds(y))
    i = int(np.argmin(sse))
    params = _levels(y, r_inf[i], r_0[i])
    params["t_mid"] = Parameter("t_mid", float(grid[i][0]), -span, 2.0 * span)
    params["width"] = Parameter("width", float(grid[i][1]), 0.2, 5.0 * span)
    return [params]


FIT_MODELS.add(
    "logistic",
    CurveModel(
        "logistic",
        ("R_inf", "R_0", "t_mid", "width"),
        logistic_basis,
        logistic_guess,
        time_power={"t_mid": 1, "width": 1},
        description="S-curve from R_0 to R_inf",
        meanings={**LEVEL_MEANINGS, "t_mid": "midpoint", "width": "rise width"},
    ),
)


# The models that build on the names above register from their own modules, imported last: the
# lr-schedule-driven ones (`schedule_models`: rom_schedule, exponential_lr), `starved`
# (rom_starved) and `rom_v0`. Module imports, not name imports: pgrpo.dynamics loads its
# modules lazily, so any may be imported first, and is then only partly run when this line is
# reached (a name import from it failed there: `import pgrpo.dynamics.starved` in a fresh
# interpreter raised ImportError, and so did schedule_models); it registers its models when it
# finishes.
import pgrpo.dynamics.rom_v0  # noqa: E402, F401
import pgrpo.dynamics.schedule_models  # noqa: E402, F401
import pgrpo.dynamics.starved  # noqa: E402, F401
