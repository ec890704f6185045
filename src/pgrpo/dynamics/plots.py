"""PNG figures for `pgrpo fit` and `pgrpo predict` (matplotlib's Agg canvas, no display).

Start-up is part of a `pgrpo fit` answer, so only what is drawn is imported: a `Figure` on an
Agg canvas (no pyplot, no backend selection or figure manager), and the Adobe glyph list that
matplotlib's TeX reader (`dviread`) imports at load (~0.1 s CPU, used only with usetex) is loaded
only on first use (`_LoadedOnFirstUse`).
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import sys
import textwrap
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def forecast_label(fc: Any) -> dict[str, str]:
    """The words `pgrpo report` prints and both figures' legends draw for one Forecast (the
    same object): the predicted mean after the cut and its band, not a per-step band."""
    lo, hi = fc.mean_band
    obs = fc.observed_mean
    return {
        "line": f"forecast made at step {fc.cut_step:g} from the logged points before it",
        "band": f"its mean {fc.predicted_mean:.3g}, {fc.level:.0%} band [{lo:.3g}, {hi:.3g}]",
        "observed": f"observed mean {obs:.3g}" if math.isfinite(obs) else "",
    }


class _LoadedOnFirstUse(types.ModuleType):
    """A stand-in in sys.modules for a module imported for real on first attribute access
    (`importlib.util.LazyLoader` would not do: the import system reads `__spec__` of a module
    found in sys.modules, which makes a lazy module load at once)."""

    def __getattr__(self, attr: str) -> Any:
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        module = importlib.import_module(self.__name__)
        vars(self).update(vars(module))
        return getattr(module, attr)


def _lazy_module(name: str) -> None:
    """Put a `_LoadedOnFirstUse` stand-in for `name` in sys.modules (no-op when loaded)."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None:
        return
    stub = _LoadedOnFirstUse(name)
    stub.__spec__ = spec
    sys.modules[name] = stub
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, stub)


_lazy_module("fontTools.agl")
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from pgrpo.dynamics.logfit import LogFit  # noqa: E402
from pgrpo.dynamics.predict import Prediction  # noqa: E402

MAX_POINTS = 4000
"""Longest series drawn as is; a longer one is drawn every n-th point (a 9-inch figure at 110 dpi
is ~1,000 pixels wide: more points than that change nothing visible and cost drawing time)."""


MARGINS = {"left": 0.08, "right": 0.97, "bottom": 0.1, "top": 0.93}
"""Fixed margins: `tight_layout` draws the figure once more to measure it (a third of the cost)."""
NOTE_WIDTH = 150
"""Characters per line of a note under a figure (8-point text across a 9-inch figure)."""
NOTE_LINE_INCHES = 8 * 1.25 / 72
"""The height one line of 8-point note text takes (line spacing 1.25)."""
NOTE_GAP_INCHES = 0.1
"""Space between the x-axis label and the notes, and below them."""


def thin(n: int, max_points: int = MAX_POINTS) -> slice:
    """The slice drawn of an n-point series: every ceil(n / max_points)-th point, last kept
    when it falls on the stride."""
    return slice(None, None, max(1, -(-n // max_points)))


def _figure(width: float, height: float) -> tuple[Figure, Any]:
    """A figure on its own Agg canvas and its one axes (freed with the figure: no pyplot)."""
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def plot_log_fit(fit: LogFit, path: Path, notes: Sequence[str] = ()) -> Path:
    """Data, rom fit, baselines and (when present) the forecast: its curve, the band of its mean
    after the cut (the band `pgrpo fit` prints and the report draws) and, lighter, the band of
    one step (long series thinned). notes: sentences printed under the plot (`pgrpo fit`'s
    caveats: a fitted level the run does not head for, a band the run may rise past, a forecast
    not informative or not made), so the figure is not read without what the text says beside
    it."""
    fig = log_fit_figure(fit, notes)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def log_fit_figure(fit: LogFit, notes: Sequence[str] = ()) -> Figure:
    """`plot_log_fit`'s figure, unsaved."""
    log = fit.log
    s = thin(len(log.step))
    fig, ax = _figure(9, 5)
    ax.plot(log.step[s], log.reward[s], ".", ms=3, color="0.6", label="reward (log)")
    ax.plot(
        log.step[s],
        fit.rom.fitted[s],
        lw=2,
        label=f"{fit.rom.model} (R^2={fit.rom.format_r2('.3f')})",
    )
    for name, r in fit.baselines.items():
        ax.plot(log.step[s], r.fitted[s], "--", lw=1.2, label=f"{name} (R^2={r.format_r2('.3f')})")
    fc = fit.forecast
    if fc is not None:
        f = thin(len(fc.future_step))
        ax.axvline(fc.cut_step, color="k", lw=0.8, ls=":")
        words = forecast_label(fc)  # the numbers `pgrpo fit` prints, as the report draws them
        x0, x1 = float(fc.future_step[0]), float(fc.future_step[-1])
        ax.plot(fc.future_step[f], fc.predicted[f], color="C3", lw=1.5, label=words["line"])
        ax.fill_between([x0, x1], *fc.mean_band, color="C3", alpha=0.3, label=words["band"])
        ax.fill_between(
            fc.future_step[f],
            fc.band_lo[f],
            fc.band_hi[f],
            color="C3",
            alpha=0.08,
            label=f"{fc.level:.0%} band of one step",
        )
        ax.hlines(
            fc.baselines["last_window_mean"],
            fc.future_step[0],
            fc.future_step[-1],
            colors="C4",
            linestyles="-.",
            label="last-window mean",
        )
    ax.set_xlabel("step")
    ax.set_ylabel(log.reward_key)
    ax.legend(fontsize=8)
    ax.set_title(Path(log.source).name)
    if notes:  # the plot keeps its size in inches; the notes get their own strip below it
        text = "\n".join(textwrap.fill(f"Note: {n}", NOTE_WIDTH) for n in notes)
        strip = NOTE_LINE_INCHES * (text.count("\n") + 1) + 2 * NOTE_GAP_INCHES
        height = fig.get_figheight()
        fig.set_figheight(height + strip)
        total = height + strip
        fig.text(0.01, NOTE_GAP_INCHES / total, text, fontsize=8, va="bottom", ha="left",
                 color="0.25", linespacing=1.25)  # fmt: skip
        fig.subplots_adjust(left=MARGINS["left"], right=MARGINS["right"],
                            bottom=(MARGINS["bottom"] * height + strip) / total,
                            top=1.0 - (1.0 - MARGINS["top"]) * height / total)  # fmt: skip
    else:
        fig.subplots_adjust(**MARGINS)
    return fig


def plot_prediction(pred: Prediction, path: Path) -> Path:
    """The exact recursion's mean trajectory, the continuum closed form, +- stationary std."""
    m = pred.metrics
    s = thin(len(pred.step))
    step, mean = pred.step[s], pred.mean[s]
    fig, ax = _figure(8, 4.5)
    ax.plot(step, mean, lw=2, label="mean (exact recursion)")
    ax.plot(step, pred.closed_form[s], "--", lw=1.2, label="closed form (continuum)")
    sd = m["stationary_std"]
    if sd == sd and sd < 1e3:
        ax.fill_between(step, mean - sd, mean + sd, alpha=0.15, label="+- stationary std")
    ax.set_xlabel("step")
    ax.set_ylabel("expected reward")
    ax.set_title(
        f"{m['regime']}, zeta={m['damping_ratio']:.3g}, tau={m['tau']:.3g}, "
        f"K*={m['refresh_threshold']}"
    )
    ax.legend(fontsize=8)
    fig.subplots_adjust(**MARGINS)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path
