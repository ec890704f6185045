"""Live assessment of a growing reward log: progress verdict, forecast, alerts and stop decisions.

`assess_live(log, config)` is the one call behind `PgrpoCallback` (TRL, Unsloth) and
`pgrpo watch` (any log). The verdict is `pgrpo.diagnose.progress.assess_progress` (the same
label `pgrpo diagnose` prints: learning / plateau / flat / declining / saturated / collapsed /
too_short, null-calibrated); the forecast (`pgrpo.dynamics.forecast.forecast`, the code of
`pgrpo fit`, on the log's lr schedule, beta1 and K) only supplies the logged `pgrpo/forecast_*`
keys and `pgrpo/steps_to_90`, withheld (`pgrpo/forecast_withheld` 1) where the forecast's level
contradicts the verdict (`fitwords.contradiction`: below a run still rising, or back towards the
level a run fell from). `LiveStatus.metrics` holds the stable `pgrpo/*` keys the callback logs.

The alerts follow from the verdict, decided in one small function, `_decide`:
- plateau: the verdict is `saturated`, or `plateau` (the reward rose and has stopped rising)
  with a bound that says so (`plateau_stopped` 1; `LiveConfig.plateau_confirmed`);
- flat: the verdict is `flat` (no change beyond batch noise: nothing is being learned) and
  shows no possible rise (`progresstext.possible_drift`: its end window above its start at 5%,
  or a straight-line rise at 95%; the verdict's words then say to log more steps). A rule of its
  own because it is the riskier stop: a run that starts slowly reads flat before its rise
  (measured premature-stop rates of both in docs/integrations.md);
- collapse: the verdict is `collapsed`;
- degeneracy: at least `degeneracy_threshold` of the groups have zero reward std on each of the
  last `degeneracy_patience` logged points (a transient streak is not enough); the share is
  `starvation.zero_spread_share`, the reading `pgrpo diagnose` makes (from reward_std alone, a
  lower bound). `LiveStatus.warnings` says when a rule asked for cannot fire on the log, or the
  reward leaves its stated range; the callers say each kind once.
A rule in `stop_on` requests a stop once its alert has held for `plateau_patience` (plateau,
flat) or `patience` (collapse, degeneracy) consecutive assessments; for the plateau rule the
earlier assessments count when their verdict is `plateau` or `saturated`, confirmed or not,
and the one that requests the stop must raise the alert (`_held`). False-alarm control: the
verdict's null calibration (`assess_progress`: level 0.005 for a rise / fall, 0.05 one-sided
for "still rising") plus the patience; the measured rates on real logs and null curves are in
docs/integrations.md.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass, field, replace

import numpy as np

from pgrpo.core.rewardrange import checked_reward_range, range_warning
from pgrpo.core.stats import iid_degeneracy
from pgrpo.diagnose.fitwords import contradiction
from pgrpo.diagnose.nullmodel import lag1_autocorr, maybe_binary_mean, unit_scale
from pgrpo.diagnose.progress import ProgressVerdict, assess_progress
from pgrpo.diagnose.progresstext import possible_drift
from pgrpo.diagnose.signals import MAX_POINTS, thin_log
from pgrpo.diagnose.starvation import ZERO_STD_SOURCE, rollouts_per_point, zero_spread_share
from pgrpo.dynamics.forecast import Forecast, forecast
from pgrpo.dynamics.runfit import reward_range
from pgrpo.dynamics.settings import ASSUMED_REFRESH_INTERVAL
from pgrpo.errors import check_magnitude
from pgrpo.logs import RewardLog

VERDICTS = ("too_short", "learning", "plateau", "flat", "declining", "saturated", "collapsed")
STOP_RULES = ("plateau", "flat", "collapse", "degeneracy")
PATIENCE = {"plateau": "plateau_patience", "flat": "plateau_patience",
            "collapse": "patience", "degeneracy": "patience"}  # fmt: skip
"""The LiveConfig field that sets each rule's patience."""
ALERT_VERDICTS = {
    "plateau": ("plateau", "saturated"),
    "flat": ("flat",),
    "collapse": ("collapsed",),
}
"""Which progress verdicts raise which alert (degeneracy is read from the groups, not the
verdict)."""


@dataclass(frozen=True)
class LiveConfig:
    """When to assess and when a stop condition is met (all opt-in for stopping)."""

    confidence: float = 0.9
    """Level of the logged forecast band, `pgrpo/forecast_lo` .. `pgrpo/forecast_hi` (0 < c < 1)."""
    min_points: int = 20
    """Logged points before any verdict other than too_short (20: at 12 the progress verdict
    read many slow-starting real runs as flat; docs/integrations.md)."""
    patience: int = 5
    """Consecutive assessments the collapse or degeneracy alert must hold before a stop is
    requested (5: on AR(1) nulls, rho 0.5, collapse fired on 2 of 66 against 7 of 66 with 3;
    docs/integrations.md)."""
    plateau_patience: int = 8
    """The same for the plateau and flat alerts, whose verdicts are the noisier ones (8: on the
    real logs 3 of 16 plateau stops were followed by a rise, against 10 of 22 with 5, when it
    was chosen on 2026-12-01; on 2026-12-05 3 of 10 with the confirmed plateau stop, 3 of 11
    with 5; docs/integrations.md). The plateau stop's patience counts every plateau verdict,
    confirmed or not (`plateau_confirmed`)."""
    plateau_confirmed: bool = True
    """Raise the plateau alert only on a plateau whose bound says the rise has stopped (the
    verdict's `plateau_stopped` 1: "has stopped", "has turned down" or "still creeping"; or
    `saturated`), not on a "probably plateaued" one, whose action is to train on; such a one
    still counts towards `plateau_patience` (False: on any `plateau`, the rule before
    2026-12-05: on the real logs 7 of 19 plateau stops premature when it was chosen (6 of 18
    since the rho estimate of 9bf2f9b), against 3 of 10; on 480
    simulated rises 53 of 302 against 1 of 198; docs/integrations.md)."""
    degeneracy_threshold: float = 0.9
    """Share of zero-std groups that counts as degenerate at one logged point, in (0, 1]."""
    degeneracy_patience: int = 5
    """Consecutive degenerate logged points for sustained degeneracy."""
    stop_on: tuple[str, ...] = ()
    """Stop rules that request a stop: any of STOP_RULES (empty or None: report only, never
    stop; one name is one rule)."""
    max_points: int = MAX_POINTS
    """Logs longer than this are assessed as bin means of consecutive steps, as `pgrpo
    diagnose` does (`pgrpo.diagnose.signals.thin_signals`)."""
    reward_range: tuple[float, float] | None = None
    """The reward's known (lo, hi), over the log's own (a pgrpo run's config.yaml records its
    task's; TRL and verl logs record none): the forecast and its band stay inside it, and an
    end within 1% of hi is `saturated` (`assess_progress`)."""

    def __post_init__(self) -> None:
        # `not lo < x < hi` (not `x <= lo or ...`): NaN fails it, where it would pass silently
        for name in ("confidence", "degeneracy_threshold"):
            value = getattr(self, name)
            if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "iuf":
                value = value[()]  # a 0-d array of a real number
            if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
                raise ValueError(f"{name} must be a real number, e.g. 0.9; got {value!r}")
            object.__setattr__(self, name, float(value))  # numpy floats: a JSON-ready report
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must be in (0, 1), e.g. 0.9; got {self.confidence!r}")
        if not 0.0 < self.degeneracy_threshold <= 1.0:
            raise ValueError(f"degeneracy_threshold must be a share of groups in (0, 1], e.g. "
                             f"0.9; got {self.degeneracy_threshold!r}")  # fmt: skip
        if not isinstance(self.plateau_confirmed, bool | np.bool_):
            raise ValueError(f"plateau_confirmed must be True or False; got "
                             f"{self.plateau_confirmed!r}")  # fmt: skip
        object.__setattr__(self, "plateau_confirmed", bool(self.plateau_confirmed))
        lows = {"min_points": 8, "patience": 1, "plateau_patience": 1, "degeneracy_patience": 1,
                "max_points": self.min_points}  # fmt: skip
        for name, low in lows.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
                why = " (the forecast's backtest)" if name == "min_points" else ""
                raise ValueError(f"{name} must be >= {low}{why}, an integer; got {value!r}")
            object.__setattr__(self, name, int(value))  # numpy integers: a JSON-ready report
        if self.reward_range is not None:
            object.__setattr__(self, "reward_range", checked_reward_range(self.reward_range))
        stop_on = self.stop_on
        if stop_on is None or isinstance(stop_on, str):  # None: never stop; "plateau": one rule
            stop_on = () if stop_on in (None, "none") else (stop_on,)  # "none" as the CLI's
        object.__setattr__(self, "stop_on", tuple(stop_on))
        bad = [r for r in self.stop_on if r not in STOP_RULES]
        if bad:
            raise ValueError(f"unknown stop rule(s) {bad}; valid: {', '.join(STOP_RULES)}")


@dataclass(frozen=True)
class LiveStatus:
    """One assessment. verdict: one of VERDICTS (the progress verdict); summary: its one-line
    explanation; alerts: the stop rules whose condition holds now; stop: a rule in
    config.stop_on has held for `patience` assessments (reason names it); metrics: the
    `pgrpo/*` keys (floats only, so every logger accepts them)."""

    step: float
    reward: float
    verdict: str
    alerts: tuple[str, ...]
    stop: bool
    reason: str
    metrics: dict[str, float] = field(default_factory=dict)
    summary: str = ""
    held: tuple[str, ...] = ()
    """The rules of config.stop_on whose stop condition holds (stop is True when any does)."""
    warnings: tuple[str, ...] = ()
    """What this assessment cannot do as configured (`_warnings`), for the caller to say once."""


def noise_sd(reward: np.ndarray) -> float:
    """Per-point noise sd from first differences (robust to a trend): std(diff) / sqrt(2)."""
    d = np.diff(reward)
    return float(np.std(d, ddof=1) / math.sqrt(2.0)) if d.size > 1 else 0.0


def slope_t(step: np.ndarray, reward: np.ndarray, rho: float | None = None) -> float:
    """t statistic of the OLS slope, SE inflated by (1 + rho) / (1 - rho) for lag-1
    autocorrelation, rho the 90% upper bound of `nullmodel.lag1_autocorr` (the residuals' own
    lag-1 correlation, used before, is biased low on short curves; `rho` when the caller has
    it). step, reward: [n], n >= 4."""
    x = step - step.mean()
    sxx = float(x @ x)
    if sxx <= 0 or reward.size < 4:
        return 0.0
    b = float(x @ (reward - reward.mean())) / sxx
    r = reward - reward.mean() - b * x
    rho = lag1_autocorr(reward) if rho is None else rho
    s2 = float(r @ r) / max(reward.size - 2, 1) * (1 + rho) / (1 - rho)
    se = math.sqrt(s2 / sxx)
    return b / se if se > 0 else (math.copysign(math.inf, b) if b else 0.0)


def _plateau_forecast(log: RewardLog, level: float) -> Forecast:
    """The forecast of the reward's plateau: `forecast` on all points so far of the mean reward
    over a future span as long as the log so far, three spans from now (at the log's stride).
    level_gain, not the default consensus: steps_to_90 reads the fitted curve, which is this
    plateau's own (a consensus member may be the damped trend, and the consensus was judged on
    the mean after a cut, not three spans ahead)."""
    step, hyper = log.step, log.hyperparameters
    lr = log.learning_rate
    span = max(float(step[-1] - step[0]), 1.0)
    return forecast(
        step,
        log.reward,
        float(step[-1]),
        method="level_gain",
        horizon=float(step[-1]) + 3.0 * span + np.linspace(0.0, span, step.size),
        lr=lr,
        lr_step=step if lr is not None else None,
        beta1=hyper.get("beta1"),
        refresh_interval=int(hyper.get("refresh_interval") or ASSUMED_REFRESH_INTERVAL),
        level=level,
        reward_range=reward_range(hyper),
    )


def _degeneracy(log: RewardLog, cfg: LiveConfig) -> tuple[float, float, int]:
    """(last logged share of zero-std groups, its i.i.d. prediction, consecutive degenerate
    points at the end), the share read by `starvation.zero_spread_share`; the share is NaN where
    the log lacks it or gives only the lower bound from reward_std == 0 (which counts towards
    the run of degenerate points but is no share to report), the prediction NaN without G or
    0/1 rewards."""
    col, source = zero_spread_share(log.columns)  # at least one finite value when not None
    g = log.hyperparameters.get("group_size")
    if col is None or (g is not None and g < 2):  # groups of one: degeneracy does not apply
        return math.nan, math.nan, 0
    run = 0  # the last rows in a row: a row without the share ends the run, as one below it
    for v in col[::-1]:  # (zeros logged long ago, then none, stopped a rising run; review)
        if not v >= cfg.degeneracy_threshold:
            break
        run += 1
    w = max(5, len(log) // 10)
    unit = unit_scale(log.reward, reward_range(log.hyperparameters))  # 0/1 scale of a range
    p = float(np.mean(unit[-w:]))
    # the i.i.d. prediction is for 0/1 rewards: NaN when the means cannot be of 0/1 rewards
    binary = maybe_binary_mean(unit, _rollouts(log))
    iid = float(iid_degeneracy(p, g, strict=False)) if g and binary else math.nan
    last = float(col[np.isfinite(col)][-1])
    return (last if source != ZERO_STD_SOURCE else math.nan), float(iid), run


def warning_kind(text: str) -> str:
    """A warning without its numbers, so that one said once is not said again as the log grows
    ("3 malformed line(s) skipped (first at line 7)" then 4, at line 9; a reward range left by
    0.3 to 1.6, then to 1.7): `pgrpo watch` and `PgrpoCallback` say each kind once."""
    return re.sub(r"[-+]?\d+(\.\d+)?([eE][-+]?\d+)?", "#", text)


WITHDRAWN = "no longer so: "


def unsaid(
    texts: tuple[str, ...] | list[str], said: dict[str, str], withdraw: bool = True
) -> list[str]:
    """What `pgrpo watch` and `PgrpoCallback` say of the warnings `texts` of one assessment,
    given `said` (kind -> text, `warning_kind`), which it updates: each kind once while it holds;
    with `withdraw`, a kind said before that no longer holds, once, prefixed WITHDRAWN (a
    degeneracy stop rule that could not fire could once a zero-spread column appeared, and the
    warning stood), and again if it comes back. The reader's repairs come and go with the
    newest rows (a NaN last reward, then a finite one): `pgrpo watch` says them with
    `withdraw=False`, each kind once (review, 2026-12-05: each isolated NaN said two lines)."""
    now = {warning_kind(text): text for text in texts}
    gone = [kind for kind in said if kind not in now] if withdraw else []
    out = [WITHDRAWN + said.pop(kind) for kind in gone]
    for kind, text in now.items():
        if kind not in said:
            said[kind] = text
            out.append(text)
    return out


def _warnings(log: RewardLog, cfg: LiveConfig) -> tuple[str, ...]:
    """What the assessment cannot do as asked: a degeneracy stop rule on a log with no
    zero-spread signal (it could never fire, and nothing said so; review, 2026-12-05), a reward
    range (given, or in the log's config) that the logged reward leaves (the verdict and the
    forecast then ignore it)."""
    out = []
    share, why = zero_spread_share(log.columns)
    if "degeneracy" in cfg.stop_on and share is None:
        why = why or ("it has no zero-spread column (frac_reward_zero_std, degeneracy/all_pass "
                      "and all_fail, or reward_std)")  # fmt: skip
        out.append(f"the degeneracy stop rule cannot fire on this log: {why}; the other rules "
                   "still apply")  # fmt: skip
    left = range_warning(
        log.reward,
        reward_range(log.hyperparameters),
        "the range given (--reward-range, reward_range=, the run's config)",
    )
    return (*out, left) if left else tuple(out)


def _rollouts(log: RewardLog) -> float | None:
    """`starvation.rollouts_per_point` of a RewardLog's hyperparameters."""

    def hyper(name: str) -> float | None:
        v = log.hyperparameters.get(name)
        return float(v) if isinstance(v, int | float) and math.isfinite(v) and v > 0 else None

    return rollouts_per_point(hyper)


def progress_of(log: RewardLog, fit: bool = True) -> ProgressVerdict:
    """`assess_progress` on a RewardLog: reward, reward_std, frac_reward_zero_std,
    the rollouts behind each point (`starvation.rollouts_per_point`) when the log's config gives
    them, and the reward's range when it has reward_min / reward_max (fit: `assess_progress`)."""
    hyper = log.hyperparameters
    return assess_progress(
        log.step,
        log.reward,
        reward_std=log.columns.get("reward_std"),
        frac_zero_std=log.columns.get("frac_reward_zero_std"),
        n_rollouts=_rollouts(log),
        fit=fit,
        reward_range=reward_range(hyper),
        nonfinite_tail=log.metrics.get("nonfinite_tail", 0.0),
        nonfinite_from=log.metrics.get("nonfinite_from", math.nan),
    )


def _decide(
    progress: ProgressVerdict, degenerate_run: int, n: int, cfg: LiveConfig
) -> tuple[str, tuple, bool]:
    """The verdict (the progress label, too_short before `min_points`), the stop rules whose
    condition holds now, and whether that is certain (no noise to wait out: rewards that turned
    NaN or inf, the progress verdict's non-finite tail), so that no patience applies: the only
    place an alert is decided (module docstring)."""
    label = progress.label
    if n < cfg.min_points or label == "too_short":
        return "too_short", (), False
    alerts = [rule for rule, labels in ALERT_VERDICTS.items() if label in labels]
    unconfirmed = label == "plateau" and not progress.evidence.get("plateau_stopped", 0.0)
    if cfg.plateau_confirmed and unconfirmed:
        alerts.remove("plateau")  # "probably plateaued": its action is to train on
    if label == "flat" and possible_drift(progress.evidence) == "rise":
        alerts.remove("flat")  # "a possible rise": its action is to log more steps, not stop
    if degenerate_run >= cfg.degeneracy_patience:
        alerts.append("degeneracy")
    certain = "nonfinite_tail" in progress.evidence
    return label, tuple(r for r in STOP_RULES if r in alerts), certain


def assess_live(
    log: RewardLog,
    config: LiveConfig | None = None,
    history: tuple[LiveStatus, ...] = (),
    *,
    decision_only: bool = False,
) -> LiveStatus:
    """Assess the log so far. history: earlier assessments of the same run (for `patience`).
    decision_only: the verdict, alerts and stop only (no forecast, no fit evidence, which
    neither decides anything): what a replay of the decisions needs.

    Never raises on a short or unfittable log: the verdict is then too_short ("not enough
    evidence"); the forecast keys are absent from metrics when the forecast cannot be fitted
    (the verdict does not need it). Rewards beyond `pgrpo.errors.MAX_ABS_VALUE` (1e150, which
    float64 statistics cannot square) raise UserError saying to rescale them. A log longer
    than `config.max_points` is assessed as bin means (`pgrpo.diagnose.signals.thin_log`).
    """
    cfg = config or LiveConfig()
    check_magnitude(log.reward, "reward")
    if cfg.reward_range is not None:
        lo, hi = cfg.reward_range
        log = replace(log, hyperparameters={**log.hyperparameters, "reward_min": lo,
                                            "reward_max": hi})  # fmt: skip
    step, reward = float(log.step[-1]), float(log.reward[-1])
    metrics: dict[str, float] = {"pgrpo/points": float(len(log))}
    notes = _warnings(log, cfg)  # on every point, before any thinning
    log = thin_log(log, cfg.max_points)
    deg, iid, run = _degeneracy(log, cfg)
    if math.isfinite(deg):
        metrics["pgrpo/degeneracy"] = deg
    if math.isfinite(iid):
        metrics["pgrpo/degeneracy_iid"] = iid
    if len(log) < cfg.min_points:
        return _status(step, reward, ("too_short", (), False), cfg, history, metrics, "", notes)
    progress = progress_of(log, fit=not decision_only)
    for key in ("plateau_stopped", "plateau_creeping"):  # what kind of plateau (decides nothing)
        if key in progress.evidence:
            metrics[f"pgrpo/{key}"] = float(progress.evidence[key])
    decided = _decide(progress, run, len(log), cfg)
    if decision_only:
        return _status(step, reward, decided, cfg, history, metrics, progress.summary, notes)
    metrics.update(_level_metrics(log))
    try:
        fc = _plateau_forecast(log, cfg.confidence)
    except (ValueError, FloatingPointError, RuntimeError, np.linalg.LinAlgError):
        fc = None
    if fc is not None:  # a gain and its timing only for a reward that has moved (as the trainer)
        withheld = contradiction(progress, fc.predicted_mean)  # not where the verdict says it goes
        metrics["pgrpo/forecast_withheld"] = float(withheld is not None)
        if withheld is None:
            metrics.update(_forecast_metrics(log, fc, _timed(progress)))
    return _status(step, reward, decided, cfg, history, metrics, progress.summary, notes)


def _window_se(reward: np.ndarray) -> tuple[float, float]:
    """(last window mean, standard error of a window mean from first-difference noise)."""
    w = max(5, reward.size // 10)
    return float(np.mean(reward[-w:])), noise_sd(reward) / math.sqrt(w)


def _level_metrics(log: RewardLog) -> dict[str, float]:
    level, _ = _window_se(log.reward)
    half = len(log) // 2
    out = {"pgrpo/level": level, "pgrpo/slope_t": slope_t(log.step[half:], log.reward[half:])}
    return {k: float(v) for k, v in out.items() if math.isfinite(v)}


def _timed(progress: ProgressVerdict) -> bool:
    """Whether the plateau forecast's share of the gain and steps to 90% may be given beside the
    verdict: not for a reward that has not moved (flat, too short), nor for a run still rising
    whose verdict's fit cannot tell how much more to expect (no finite `steps_to_90pct`: "the
    gain is not identified", "cannot yet tell"): a docs audit (session 37) read `to90 0` and
    progress 0.98 beside those words on a real run still rising at its end."""
    if progress.label in ("flat", "too_short"):
        return False
    return progress.label != "learning" or math.isfinite(
        float(progress.evidence.get("steps_to_90pct", math.nan))
    )


def _forecast_metrics(log: RewardLog, fc: Forecast, moved: bool = True) -> dict[str, float]:
    """The plateau forecast's keys; `pgrpo/progress` and `pgrpo/steps_to_90` only where the
    reward has moved (`moved`: the progress verdict is not flat) and the fit's gain exceeds the
    noise of the recent level: on pure noise they were given on 86 of 100 flat curves, a gain
    fitted to noise (review, 2026-12-05)."""
    fit = fc.fit
    r0, rinf = fit.values["R_0"], fit.values["R_inf"]
    now = float(fit.fitted[-1])
    out = {
        "pgrpo/forecast_plateau": fc.predicted_mean,
        "pgrpo/forecast_lo": fc.mean_band[0],
        "pgrpo/forecast_hi": fc.mean_band[1],
    }
    gain = rinf - r0
    if moved and abs(gain) > _window_se(log.reward)[1]:
        out["pgrpo/progress"] = float(np.clip((now - r0) / gain, 0.0, 1.0))
        last = float(log.step[-1])
        out["pgrpo/steps_to_90"] = fit.steps_to_fraction(
            last + 20.0 * max(last - float(log.step[0]), 1.0)
        )
    return {k: float(v) for k, v in out.items() if math.isfinite(v)}


def rule_patience(cfg: LiveConfig, rule: str) -> int:
    """Consecutive assessments `rule` must hold before it requests a stop."""
    return int(getattr(cfg, PATIENCE[rule]))


def _standing(rule: str, status: LiveStatus) -> bool:
    """The rule's condition as its patience counts it: its alert, or a verdict that raises it
    (a plateau not yet confirmed counts towards the patience; the stop waits for one that is)."""
    return rule in status.alerts or status.verdict in ALERT_VERDICTS.get(rule, ())


def _held(rule: str, alerts: tuple, cfg: LiveConfig, history: tuple) -> bool:
    """The rule's alert holds now and its condition held on the `patience` - 1 assessments
    before (`_standing`)."""
    need = rule_patience(cfg, rule)
    recent = history[len(history) - (need - 1) :] if need > 1 else ()
    return rule in alerts and len(recent) >= need - 1 and all(_standing(rule, h) for h in recent)


def _status(step, reward, decided, cfg, history, metrics, summary, notes) -> LiveStatus:  # noqa: ANN001
    verdict, alerts, certain = decided
    held = [r for r in cfg.stop_on if (certain and r in alerts) or _held(r, alerts, cfg, history)]
    metrics = dict(metrics)
    metrics["pgrpo/verdict"] = float(VERDICTS.index(verdict))
    for rule in STOP_RULES:
        metrics[f"pgrpo/alert/{rule}"] = float(rule in alerts)
    metrics["pgrpo/stop"] = float(bool(held))
    times = (
        "at once (the rewards turned NaN or inf)"
        if certain
        else (f"for {rule_patience(cfg, held[0])} assessment(s)" if held else "")
    )
    reason = f"{held[0]} ({verdict}) held {times}" if held else ""
    return LiveStatus(step, reward, verdict, tuple(alerts), bool(held), reason, metrics, summary,
                      tuple(held), notes)  # fmt: skip
