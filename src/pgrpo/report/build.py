"""`pgrpo report RUN_DIR`: one self-contained HTML page (plots embedded as base64 PNG) that
leads with the verdict in plain words (progress, then each finding with its number and action;
the evidence table folded below), then the reward fit and the forecast (drawn and stated from
the same Forecast), degeneracy vs the i.i.d. prediction, entropy, KL, lengths, the stability
margin K/K* and the eval tables; the PNGs are written beside it."""

from __future__ import annotations

import base64
import html
import io
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pgrpo.core.stats import iid_degeneracy
from pgrpo.report import plots


@dataclass(frozen=True)
class ReportResult:
    html_path: Path
    pngs: dict[str, Path]
    missing: dict[str, str]
    """panel -> why it is absent (the signal the run lacks)."""
    metrics: dict[str, float] = field(default_factory=dict)
    fit: Any = None
    """The fit of the whole curve the report draws and states (None when it failed)."""
    forecast: Any = None
    """The backtest forecast from the first half, as stated (None when it failed)."""
    fit_notes: tuple[str, ...] = ()
    """Why the fit or the forecast failed, when one did."""
    diagnosis: Any = None
    """The diagnosis the report leads with."""
    settings: Any = None
    """The run's settings the fit used, with their sources and assumptions (`RunSettings`)."""


def _safe(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, str]:
    """(result, "") or (None, the error message): a failed fit must not lose the report."""
    try:
        return fn(*args, **kwargs), ""
    except (ValueError, RuntimeError, np.linalg.LinAlgError) as exc:
        return None, f"{type(exc).__name__}: {exc}"


def _fits(log: Any) -> tuple[Any, Any, list[str]]:
    from pgrpo.dynamics import forecast
    from pgrpo.dynamics.logfit import bin_weights, thin_log
    from pgrpo.dynamics.runfit import fit_run, run_inputs

    log = thin_log(log)  # bin means past 4,000 steps, as `pgrpo fit` does
    opts, err = _safe(run_inputs, log.step, log.columns, log.hyperparameters)
    if err:
        return None, None, [f"fit failed ({err})"]
    opts["weights"] = bin_weights(log)
    notes = []
    fit, err = _safe(fit_run, log.step, log.reward, **opts)
    if err:
        notes.append(f"fit failed ({err})")
    fc, err = _safe(forecast, log.step, log.reward, 0.5, **opts)
    if err:
        notes.append(f"forecast failed ({err})")
    return fit, fc, notes


def kappa_estimate(diagnosis: Any) -> tuple[float | None, str]:
    """kappa as the diagnosis used it (config / `pgrpo probe`, else the reward fit)."""
    ev = diagnosis.mode("dynamical_instability").evidence
    if ev.get("kappa") is None:
        return None, ""
    return float(ev["kappa"]), str(ev.get("kappa_source", ""))


def stability_margin(log: Any, kappa: float | None) -> np.ndarray | None:
    """K / K*(n) per step with a_n = lr(n) kappa (the logged schedule, else the peak lr), K* from
    the run optimizer's reduction; None where it predicts no threshold (AdamW, the default).

    K* is exact (the reduction's O(K*) scan) where its rule of thumb 2/a + 2 b/(1-b) is
    <= THUMB_EXACT, and ceil(rule of thumb) beyond (there they differ by <= 1 step, < 0.2%): a
    schedule that decays to lr ~ 0 would otherwise scan for hours. a is evaluated on <= 200
    log-spaced values across its range (each step takes the nearest: <= 1% in a per decade)."""
    from pgrpo.dynamics.optimizers import OptimizerSettings, reduce_optimizer, run_optimizer

    hp = log.hyperparameters
    if kappa is None or not hp.get("refresh_interval"):
        return None
    lr = log.learning_rate
    lr = np.full(log.step.shape, hp["lr"]) if lr is None and hp.get("lr") else lr
    if lr is None:
        return None
    try:
        name = run_optimizer(hp.get("optimizer"))
    except ValueError:
        return None
    beta1 = float(hp.get("beta1", 0.0))
    K = int(hp["refresh_interval"])
    a = np.where(np.isfinite(lr) & (lr > 0), lr * kappa, np.nan)
    ok = np.isfinite(a) & (a > 0)
    out = np.full(lr.shape, np.nan)
    if not ok.any():
        return out
    lo, hi = np.log(a[ok].min()), np.log(a[ok].max())
    grid = np.exp(np.linspace(lo, hi, 200)) if hi > lo else np.exp([lo])
    k_star = np.empty(grid.size)
    for j, ag in enumerate(grid):
        thumb = 2.0 / ag + 2.0 * beta1 / (1.0 - beta1)
        if thumb <= THUMB_EXACT:
            red = reduce_optimizer(name, OptimizerSettings(float(ag), 1.0, beta1, K, closure=False))
            if not red.metrics["threshold_predicted"]:
                return None  # no threshold predicted: the report says nothing about K*
            k_star[j] = red.K_star or math.inf  # no unstable K up to the scan: margin 0
        else:
            k_star[j] = math.ceil(thumb)
    pos = (np.log(a[ok]) - lo) / (hi - lo) * (grid.size - 1) if hi > lo else np.zeros(ok.sum())
    out[ok] = K / k_star[np.clip(np.rint(pos), 0, grid.size - 1).astype(int)]
    return out


THUMB_EXACT = 500.0


def _iid(log: Any) -> np.ndarray | None:
    """The i.i.d. degeneracy p^G + (1-p)^G, only for a reward in [0, 1] (read as 0/1)."""
    col = log.columns.get("degeneracy/iid_prediction")
    if col is not None and np.isfinite(col).any():
        return col
    g = log.hyperparameters.get("group_size")
    r = log.reward[np.isfinite(log.reward)]
    if g is None or r.size == 0 or r.min() < 0 or r.max() > 1:
        return None
    return iid_degeneracy(log.reward, g, strict=False)


def _figure(draw: Any, *args: Any) -> bytes | None:
    """One panel as PNG bytes: a Figure on its own Agg canvas (no pyplot, nothing global)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 3.6), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if not draw(ax, *args):
        return None
    ax.grid(alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


MAX_DRAWN = 4000
"""Longest series a panel draws as is; a longer one is drawn every ceil(n / MAX_DRAWN)-th step
(a 770-pixel panel shows no more; the diagnosis and the fits use every step)."""


def _drawn(log: Any, margin: np.ndarray | None, iid: np.ndarray | None) -> tuple:
    """(step, reward, columns, margin, iid) as the panels draw them (every n-th step)."""
    s = slice(None, None, max(1, -(-len(log) // MAX_DRAWN)))
    cols = {k: v[s] for k, v in log.columns.items()}
    return log.step[s], log.reward[s], cols, *(None if x is None else x[s] for x in (margin, iid))


def _curves(eval_doc: dict | None) -> dict[str, dict[str, float]]:
    """pass@k curves: base vs trained (seed means) when there is a baseline, else each result."""
    if not eval_doc:
        return {}
    sc = eval_doc.get("search_compression")
    if sc:
        return {"base (mean over seeds)": sc["base"], "trained (mean over seeds)": sc["trained"]}
    return {
        f"{rec.get('name', '?')}": rec["pass_at_k"]
        for rec in eval_doc.get("results", [])
        if rec.get("pass_at_k")
    }


def _panels(
    log: Any, diagnosis: Any, fit: Any, fc: Any, eval_doc: dict | None, points: tuple
) -> dict:
    kappa, source = kappa_estimate(diagnosis)
    step, reward, cols, margin, iid = _drawn(log, stability_margin(log, kappa), _iid(log))
    curves = _curves(eval_doc)
    return {
        "reward": (_figure(plots.reward_panel, step, reward, fit, fc, points), "no reward"),
        "degeneracy": (
            _figure(plots.degeneracy_panel, step, cols, iid),
            "no frac_reward_zero_std / degeneracy columns and no group_size",
        ),
        "entropy": (
            _figure(plots.series_panel, step, cols.get("entropy"), "Entropy", "nats / token"),
            "no entropy column",
        ),
        "kl": (
            _figure(
                plots.series_panel,
                step,
                cols.get("kl"),
                "KL to reference",
                "nats / token",
                plots.MODEL,
            ),
            "no kl column",
        ),
        "lengths": (
            _figure(
                plots.series_panel,
                step,
                cols.get("completion_length"),
                "Completion length",
                "tokens",
                "#2ca02c",
            ),
            "no completion length column",
        ),
        "stability_margin": (
            _figure(
                plots.margin_panel,
                step,
                margin,
                log.hyperparameters.get("refresh_interval"),
                source,
            ),
            "needs refresh_interval, lr and kappa (config.yaml kappa from `pgrpo probe`, or a "
            "fit with a known lr)",
        ),
        "pass_at_k": (_figure(plots.pass_at_k_panel, curves), "no eval log with pass@k"),
    }


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;
max-width:1180px;color:#222;background:#fff}
h1{font-size:24px;margin-bottom:4px}h2{font-size:19px;margin-top:28px;border-bottom:1px solid #ddd;
padding-bottom:4px}.sub{color:#666;font-size:13px}
table{border-collapse:collapse;font-size:13px;margin:8px 0;width:100%}
th,td{border:1px solid #ddd;padding:5px 7px;text-align:left;vertical-align:top}
th{background:#f4f4f4}.yes{color:#b00;font-weight:600}.ok{color:#070;font-weight:600}
.no{color:#555}.grid{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:14px}
.grid figure{margin:0;border:1px solid #eee;padding:6px}.grid img{width:100%;height:auto}
.missing{color:#888;font-style:italic;font-size:13px}code{background:#f4f4f4;padding:1px 4px}
.findings{font-size:15px;line-height:1.5}.finding{margin:4px 0}details{margin:8px 0}
summary{cursor:pointer;color:#444}
"""


def _e(x: Any) -> str:
    return html.escape(str(x))


def _num(v: Any) -> str:
    if isinstance(v, float):
        return "-" if not math.isfinite(v) else f"{v:.4g}"
    return "-" if v is None else _e(v)


def _cell(v: Any) -> str:
    return ", ".join(_num(x) for x in v) if isinstance(v, list) else _num(v)


def _findings_html(diagnosis: Any) -> str:
    """The verdict in plain words: one sentence per finding with its number, then the action."""
    items = []
    for f in diagnosis.findings():
        act = f" <b>Action:</b> {_e(f['action'])}." if f["action"] else ""
        items.append(f'<li class="finding"><b>{_e(f["about"])}</b>: {_e(f["sentence"])}{act}</li>')
    return f'<ul class="findings">{"".join(items)}</ul>'


def _settings_html(settings: Any) -> str:
    """The settings line `pgrpo fit` prints: each known setting with its source, then the
    assumptions and why the closed form was not fitted."""
    if settings is None:
        return ""
    parts = [f"{k} {_num(v)} ({settings.sources[k]})" for k, v in settings.values.items()
             if v is not None]  # fmt: skip
    notes = "".join(f"<li>{_e(n)}</li>" for n in settings.notes)
    line = _e(", ".join(parts)) if parts else "none known"
    return f"<p>Settings: {line}</p>" + (f"<ul>{notes}</ul>" if notes else "")


def _constrained_html(m: dict[str, Any]) -> str:
    """The closed form with m, c from the optimizer against the free fit (issue #13.3), in the
    words `pgrpo fit` prints; nothing when the fit had no lr and beta1 to fix them from."""
    if "preferred" not in m:
        return ""
    return (
        f"<p>Closed form (m, c fixed by beta1 and K, {_e(m.get('optimizer_reduction', ''))}): "
        f"R<sup>2</sup> {_num(m['r2_constrained'])}, AICc - free {_num(m['delta_aicc'])}: "
        f"<b>{_e(m['preferred'])}</b> preferred; closed form {_e(m['closed_form'])} "
        f"(likelihood-ratio p {_num(m['lr_test_p'])}); kappa {_num(m['kappa_constrained'])} "
        f"[{_num(m['kappa_lo'])}, {_num(m['kappa_hi'])}] (90%).</p>"
    )


def informative(fc: Any, reward: np.ndarray) -> bool:
    """A forecast worth drawing: its band of the mean is narrower than the run's whole range
    (or, for a reward that never changed, has no width either: "0.3, band [0.3, 0.3]" is no
    band "wider than the range")."""
    r = np.asarray(reward, dtype=float)
    r = r[np.isfinite(r)]
    lo, hi = fc.mean_band
    if not (r.size and math.isfinite(lo) and math.isfinite(hi)):
        return False
    exact = np.ptp(r) == 0 and hi - lo <= 1e-9 * max(abs(lo), abs(hi))  # rounding only
    return bool(hi - lo < np.ptp(r) or exact)


def forecast_text(fc: Any, reward: np.ndarray) -> str:
    """The forecast in words: the same object, and the same words, as the reward panel draws;
    a band wider than the run's range is "not enough evidence" and is not drawn."""
    if fc is None:
        return ""
    words = plots.forecast_label(fc)
    if not informative(fc, reward):
        return (
            f"<p>Backtest: a {_e(words['line'])} has a band of its mean ({_e(words['band'])}) "
            "wider than the whole range of the run's reward: not enough evidence to forecast "
            "the second half from the first, so it is not drawn.</p>"
        )
    n_before = int(np.searchsorted(np.asarray(fc.fit.step), fc.cut_step, side="right"))
    obs = fc.observed_mean
    tail = ""
    if math.isfinite(obs):
        inside = "inside" if fc.mean_band[0] <= obs <= fc.mean_band[1] else "outside"
        prefix = np.asarray(reward)[:n_before]
        last10 = float(np.mean(prefix[-10:])) if prefix.size else math.nan
        tail = (
            f"; {words['observed']}, {inside} the band (the mean of the last 10 steps before "
            f"the cut was {last10:.3g})"
        )
    return (
        f"<p>Backtest: {_e(words['line'])} ({n_before} steps) predicts the mean reward over "
        f"steps {fc.future_step[0]:g} to {fc.future_step[-1]:g}: {_e(words['band'])}{_e(tail)}."
        "</p>"
    )


def _diagnosis_html(diagnosis: Any) -> str:
    rows = []
    for v in diagnosis.modes:
        if v is diagnosis.healthy:
            cls, mark = ("ok", "yes") if v.detected else ("no", "no")
        else:
            cls, mark = ("yes", "DETECTED") if v.detected else ("no", "no")
        ev = ", ".join(f"{_e(k)}={_num(val)}" for k, val in v.evidence.items())
        note = _e(v.action) if v.action else ""
        if v.missing:
            note += f'<div class="missing">missing: {_e("; ".join(v.missing))}</div>'
        rows.append(
            f'<tr><td><b>{_e(v.name)}</b></td><td class="{cls}">{mark}</td>'
            f"<td>{v.confidence:.2f}</td><td>{ev}</td><td>{note}</td></tr>"
        )
    head = (
        "<tr><th>mode</th><th>detected</th><th>confidence</th><th>evidence</th><th>action</th></tr>"
    )
    return f"<table>{head}{''.join(rows)}</table>"


def _eval_html(doc: dict | None) -> str:
    if not doc:
        return (
            '<p class="missing">no eval log (run '
            "<code>pgrpo eval --out RUN_DIR/eval.json</code>)</p>"
        )
    rows = []
    for rec in doc.get("baseline", []) + doc.get("results", []):
        lo, hi = rec.get("accuracy_ci") or (math.nan, math.nan)
        curve = ", ".join(f"@{k}: {v:.3f}" for k, v in rec.get("pass_at_k", {}).items())
        rows.append(
            f"<tr><td>{_e(rec.get('name'))}</td><td>{_num(rec.get('step'))}</td>"
            f"<td>{_num(rec.get('accuracy'))}</td><td>[{_num(lo)}, {_num(hi)}]</td>"
            f"<td>{_num(rec.get('n_problems'))} x {_num(rec.get('n_samples'))}</td>"
            f"<td>{_e(curve)}</td></tr>"
        )
    out = (
        "<table><tr><th>result</th><th>step</th><th>accuracy</th><th>95% CI</th>"
        f"<th>problems x samples</th><th>pass@k</th></tr>{''.join(rows)}</table>"
    )
    for key in ("aggregate", "comparison", "search_compression"):
        if key in doc:
            items = {k: v for k, v in doc[key].items() if not isinstance(v, dict)}
            cells = "".join(
                f"<tr><td>{_e(k)}</td><td>{_cell(v)}</td></tr>" for k, v in items.items()
            )
            out += f"<h3>{_e(key.replace('_', ' '))}</h3><table>{cells}</table>"
    return out


TITLES = {
    "reward": "Reward with fit and forecast",
    "degeneracy": "Degeneracy vs i.i.d. prediction",
    "entropy": "Entropy",
    "kl": "KL",
    "lengths": "Completion lengths",
    "stability_margin": "Stability margin K/K*",
    "pass_at_k": "pass@k",
}


def render_html(
    log: Any,
    diagnosis: Any,
    panels: dict,
    eval_doc: dict | None,
    notes: list[str],
    fit: Any,
    fc: Any = None,
    settings: Any = None,
) -> str:
    hp = ", ".join(f"{_e(k)}={_num(v)}" for k, v in log.hyperparameters.items()) or "none found"
    figs = []
    for name, (png, why) in panels.items():
        if png is None:
            figs.append(
                f"<figure><figcaption><b>{_e(TITLES[name])}</b></figcaption>"
                f'<p class="missing">not shown: {_e(why)}</p></figure>'
            )
        else:
            data = base64.b64encode(png).decode()
            figs.append(
                f'<figure><img alt="{_e(TITLES[name])}" src="data:image/png;base64,{data}">'
                "</figure>"
            )
    fit_txt = ""
    if fit is not None:
        params = ", ".join(f"{k}={p.value:.4g}" for k, p in fit.params.items())
        fit_txt = (
            f"<p>Fit <b>{_e(fit.model)}</b>: {_e(params)}; R<sup>2</sup> {fit.format_r2('.3f')}"
            f"{_e(f' ({why})' if (why := fit.metrics.get('r2_undefined')) else '')}, "
            f"residual std {fit.residual_std:.3g}.</p>{_constrained_html(fit.metrics)}"
        )
    warn = "".join(f"<li>{_e(w)}</li>" for w in (*log.warnings, *notes))
    return f"""<!DOCTYPE html><html><head><meta charset="utf-8">
<title>pgrpo report: {_e(log.source)}</title><style>{CSS}</style></head><body>
<h1>pgrpo run report</h1>
<div class="sub">{_e(log.source)} &middot; format {_e(log.format)} &middot; {len(log.step)}
logged steps ({_num(float(log.step[0]))} to {_num(float(log.step[-1]))}) &middot;
hyperparameters: {hp}</div>
<h2>Verdict</h2>{_findings_html(diagnosis)}
<details><summary>Evidence: every mode, its figures and the signals it missed</summary>
{_diagnosis_html(diagnosis)}</details>
<h2>Dynamics</h2>{_settings_html(settings)}{fit_txt}{forecast_text(fc, log.reward)}
<div class="grid">{"".join(figs)}</div>
<h2>Evaluation</h2>{_eval_html(eval_doc)}
{f"<h2>Notes</h2><ul>{warn}</ul>" if warn else ""}
</body></html>"""


def build_report(
    run_dir: str | Path,
    *,
    out_dir: str | Path | None = None,
    eval_log: str | Path | None = None,
    settings: Mapping[str, Any] | None = None,
) -> ReportResult:
    """Write RUN_DIR/report/report.html (self-contained) and one PNG per panel.

    settings: the run's settings given by the user (lr, beta1, refresh_interval, group_size,
    batch_prompts, optimizer, kappa; they override the log's): the diagnosis reads them as
    `pgrpo diagnose` does (`with_given`), the fit as `pgrpo fit` does (`resolve_settings`: the
    same assumptions, stated on the page and in `ReportResult.settings`)."""
    from pgrpo.diagnose import diagnose
    from pgrpo.dynamics.settings import resolve_settings, with_given
    from pgrpo.logs import read_log

    run_dir = Path(run_dir)
    logged = read_log(run_dir)
    fit_input, run_settings = resolve_settings(logged, settings)
    log = with_given(logged, settings)
    if eval_log is None and run_dir.is_dir() and (run_dir / "eval.json").is_file():
        eval_log = run_dir / "eval.json"
    eval_doc = json.loads(Path(eval_log).read_text()) if eval_log is not None else None
    diagnosis = diagnose(log, eval_log=eval_log)
    points = ()
    if eval_log is not None:
        from pgrpo.diagnose.signals import read_eval_points

        points, _ = _safe(read_eval_points, eval_log)
    fit, fc, notes = _fits(fit_input)
    drawn = fc if fc is not None and informative(fc, log.reward) else None
    panels = _panels(log, diagnosis, fit, drawn, eval_doc, points or ())
    out = (
        Path(out_dir)
        if out_dir is not None
        else (run_dir if run_dir.is_dir() else run_dir.parent) / "report"
    )
    out.mkdir(parents=True, exist_ok=True)
    pngs = {}
    for name, (png, _) in panels.items():
        if png is not None:
            pngs[name] = out / f"{name}.png"
            pngs[name].write_bytes(png)
    page = out / "report.html"
    page.write_text(render_html(log, diagnosis, panels, eval_doc, notes, fit, fc, run_settings))
    missing = {name: why for name, (png, why) in panels.items() if png is None}
    return ReportResult(page, pngs, missing, {"panels": float(len(pngs))}, fit, fc, tuple(notes),
                        diagnosis, run_settings)  # fmt: skip
