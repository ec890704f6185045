"""What the progress verdict (`pgrpo.diagnose.progress`) says about a reward fit and its forecast
of the same run, in the words `pgrpo fit` and the report print beside them:

- `level_caveat`: the rom family describes a rise (or fall) to a level; on a run that rose and
  then fell (the verdict collapsed or declining, or fell from its best and held there), a fitted
  level well above where the run ended, towards its best, is not where it heads (review s32,
  finding 8: "Fit rom: R_inf=0.2028" and "the level the run heads for" on a run that ended at
  0.075); nor, on a run still rising (`learning`), is a fitted level below where it already is
  (session 37: `watchdog_qwen3_8b_lora`, still rising to 0.152 at its end, read "R_inf level it
  heads for" -0.31, an underdamped fit frozen by the lr's decay).
- `band_caveat`: the forecast's band assumes the level fitted to the points before the cut; where
  the verdict of those points is still rising with the gain not identified (no saturation within
  them), the run may rise past it (review s32, finding 9: a flat band of width 0.04 beside "the
  gain is not identified").

`pgrpo fit` calls `fit_caveats` (text, and JSON `caveats`); the report calls the two with its
diagnosis' verdict. docs/dynamics.md, "What the fit cannot describe".
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from pgrpo.diagnose.progress import ProgressVerdict, assess_signals, end_window
from pgrpo.diagnose.progresstext import gain_unidentified
from pgrpo.diagnose.signals import Signals, signals_from_log, thin_signals

PROGRESS_COLUMNS = ("reward_std", "frac_reward_zero_std")
"""The columns the progress verdict reads besides the reward (`read_log(columns=...)` of a log
read for a fit keeps them too)."""
FELL_LABELS = ("collapsed", "declining")
"""Progress labels of a run that fell (`plateau` with `plateau_below_best` fell too, and held)."""
FAR_SE = 2.0
FAR_SHARE = 0.25
"""A fitted level is away from the end window's level when it sits on the side of the best
window by more than FAR_SE of the window mean's standard error (the verdict's noise_sd /
sqrt(window), as its labels read the windows) and more than FAR_SHARE of the fall from the best
window to the end: a long log's end window has so small an error that a damped oscillation
settling at 0.800 read its level 0.8014 "not where the run heads" on the error alone."""
RISING_COVERAGE = (
    "Measured where the points before the cut read so: the band held the observed mean on 5 of "
    "66 simulated runs that take off late (the other 61 rose past it) and on 6 of 7 real runs, "
    "2 of the 3 whose band is narrower than the run's range (docs/dynamics.md)."
)
"""The band's measured coverage where `band_caveat` speaks (`python
bench/forecast_coverage_rising.py`, 2026-12-06 07:29 UTC: the shapes of
bench/forecast_coverage_shapes.py, 200 runs per shape and cut, and the 96 real runs of the
shared corpus and held-back rounds 15-19, cut 0.5), for the forecast method
`RISING_COVERAGE_METHOD` only."""
RISING_COVERAGE_METHOD = "consensus"
"""The method bench/forecast_coverage_rising.py measured (`forecast`'s default); beside another
method's band `band_caveat` says the caveat without those figures."""


def progress_signals(log: Any, upto: float | None = None) -> Signals:
    """The log's signals as `pgrpo diagnose` reads them (thinned past `signals.MAX_POINTS`),
    of its steps up to `upto` when given: on steps in order (as logs are read) a prefix of the
    columns, viewed, not copied (a 200,000-step log's 27 columns are 44 MB, which the copy
    added to the peak of `pgrpo report`, whose caveat reads the forecast's cut; session 38)."""
    signals = signals_from_log(log)
    if upto is not None:
        steps = signals.steps
        keep: slice | np.ndarray = steps <= upto
        if bool(np.all(steps[1:] >= steps[:-1])):
            keep = slice(0, int(np.count_nonzero(keep)))
        cols = {k: v[keep] for k, v in signals.columns.items()}
        signals = replace(signals, steps=steps[keep], columns=cols)
    return thin_signals(signals)


def run_progress(log: Any, upto: float | None = None, fit: bool = True) -> ProgressVerdict:
    """The progress verdict of `log` as `pgrpo diagnose` reads it, of its steps up to `upto`
    when given. fit: as `assess_signals`'s (False: the label and windows alone, without the
    exponential fit's evidence)."""
    return assess_signals(progress_signals(log, upto), fit=fit)


def _end_se(ev: dict) -> float:
    """The standard error of the end window's mean, as the verdict reads it (noise_sd /
    sqrt(window)): the yardstick of `_away` and `_below`."""
    return float(ev["noise_sd"]) / math.sqrt(float(ev["window"]))


def _away(ev: dict, r_inf: float) -> bool:
    """The fitted level r_inf sits away from the end window's level towards the best window's
    (FAR_SE, FAR_SHARE; ev: a verdict's evidence, or `progress.end_window`): the fit keeps
    the level the run fell from. A level beyond the end in the fall's direction is where a
    fall heads."""
    if "end_level" not in ev or not math.isfinite(r_inf):
        return False
    fall = float(ev["best_level"]) - float(ev["end_level"])  # >= 0: the best window's excess
    off = r_inf - float(ev["end_level"])
    return off > FAR_SE * _end_se(ev) and off > FAR_SHARE * fall


def _below(ev: dict, r_inf: float) -> bool:
    """The fitted level r_inf sits below the end window's level by more than FAR_SE of the
    window mean's standard error: on a run the verdict reads still rising (`learning`), a level
    it is already above, in the direction it is moving away from. No share rule: the verdict's
    rise over the second half is itself beyond the noise, so a level below the end contradicts
    it at any size beyond the window's error."""
    if "end_level" not in ev or not math.isfinite(r_inf):
        return False
    return float(ev["end_level"]) - r_inf > FAR_SE * _end_se(ev)


def fell(verdict: ProgressVerdict) -> bool:
    """Whether the verdict says the run fell from its best: collapsed, declining, or a plateau
    below its best (it fell and held)."""
    return verdict.label in FELL_LABELS or bool(verdict.evidence.get("plateau_below_best"))


WITHHELD = {
    "below": "below the reward, still rising",
    "fell": "back towards the level the reward fell from",
}
"""Why a level-derived forecast is withheld, by `contradiction`'s kind: the words of `pgrpo
watch`'s line and the trainer's `forecast/withheld`."""


def contradiction(verdict: ProgressVerdict, level: float) -> str | None:
    """How a level a fit or forecast gives for where the run heads contradicts the verdict:
    "below" where a run still rising (`learning`) is already above it (`_below`), "fell" where
    a run that fell (`fell`) ended away from it, towards the level it fell from (`_away`); None
    where it does not. The one rule behind `level_caveat` (fit, report) and the level-derived
    forecast keys the live assessment and the trainer withhold."""
    ev = verdict.evidence
    if verdict.label == "learning" and _below(ev, level):
        return "below"
    return "fell" if fell(verdict) and _away(ev, level) else None


def level_caveat(verdict: ProgressVerdict, model: str, r_inf: float) -> str | None:
    """One sentence where a run that fell (`fell`) ended away from the fitted level `r_inf` of
    `model`, which sits towards the level it fell from (`_away`), or where a run still rising
    (`learning`) is already above it (`_below`): that level is not where the run heads; None
    otherwise (`contradiction`). Where it is given, the fit's sentences about "the level the
    run heads for" (the free-start line) are not."""
    ev = verdict.evidence
    end = float(ev.get("end_level", math.nan))
    kind = contradiction(verdict, r_inf)
    if kind == "below":
        return (
            f"This run is still rising (progress: learning; it ended at {end:.3g}, its mean from "
            f"step {ev['end_from']:g}), above the {model} fit's level R_inf={r_inf:.4g}: the "
            "fitted level is not where the run heads (the fit bends over too early, or a "
            "decaying lr froze its curve below the data)."
        )
    if kind is None:
        return None
    how = "fell from its best and held" if verdict.label == "plateau" else "fell"
    return (
        f"The {model} fit describes a rise to a level, and this run {how} (progress: "
        f"{verdict.label}; "
        f"it ended at {end:.3g}, its mean from step {ev['end_from']:g}): its fitted level "
        f"R_inf={r_inf:.4g} is not where the run heads."
    )


def band_caveat(
    prefix: ProgressVerdict, cut_step: float, method: str | None = RISING_COVERAGE_METHOD
) -> str | None:
    """One sentence where the points up to the forecast's cut (`prefix`: their verdict) are still
    rising with the gain not identified (`progresstext.gain_unidentified`, the words "no
    saturation within the data: the gain is not identified"): the band assumes the level fitted
    to them, and the run may rise past it; None otherwise. The measured coverage
    (`RISING_COVERAGE`) follows only for the method it was measured for (method: the
    forecast's)."""
    if prefix.label != "learning" or not gain_unidentified(prefix.evidence):
        return None
    said = (
        f"The band assumes the run levels off as fitted to the points up to step {cut_step:g}, "
        "but over them it is still rising with no saturation (the gain is not identified): it "
        "may rise past the band."
    )
    return f"{said} {RISING_COVERAGE}" if method == RISING_COVERAGE_METHOD else said


def fit_caveats(
    log: Any, model: str, r_inf: float, cut_step: float | None = None, method: str | None = None
) -> dict:
    """{"level": `level_caveat` of the whole log's verdict, "band": `band_caveat` of the verdict
    of its steps up to `cut_step` (None without a forecast)}: each a sentence or None. log: the
    log the fit was made on (a RewardLog); model, r_inf: the fit's model and fitted level;
    method: the forecast's method (`band_caveat`)."""
    signals, level = progress_signals(log), None
    # the level tests first, on the windows the verdict reads: the verdict's null curves cost a
    # fraction of a second, a fit whose level is where the run ended needs none
    ends = end_window(signals.steps, signals.columns["reward"])
    if _away(ends, r_inf) or _below(ends, r_inf):
        level = level_caveat(assess_signals(signals, fit=False), model, r_inf)
    band = None
    if cut_step is not None and np.isfinite(cut_step):
        band = band_caveat(run_progress(log, upto=cut_step), cut_step, method)
    return {"level": level, "band": band}
