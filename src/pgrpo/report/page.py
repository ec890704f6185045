"""The report's HTML page: the verdict, the evidence table, the fit and forecast in words, the
panels (embedded PNG), the eval tables and the notes. Pure string building from what
`build.build_report` gathered; no I/O."""

from __future__ import annotations

import base64
import html
import math
from typing import Any

import numpy as np

from pgrpo.dynamics.forecast import (  # noqa: F401  (informative, uninformative_reason: re-exported)
    informative,
    measured_skill,
    uninformative_reason,
)
from pgrpo.report import plots

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
summary{cursor:pointer;color:#444}.legend{color:#666;font-size:13px}
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


def _quality(fit: Any, bin_size: int = 1) -> str:
    """The R^2 read against the noise, in the words `pgrpo fit` prints (`quality_words`, with
    the closed-form fit and the bin size it uses)."""
    from pgrpo.dynamics.fitquality import fit_quality, quality_words

    q = fit_quality(fit, constrained=getattr(fit, "constrained", None), bin_size=bin_size)
    line = quality_words(q, fit.model)
    return f"<p>{_e(line)}</p>" if line else ""


def _constrained_html(m: dict[str, Any]) -> str:
    """The closed form with m, c from the optimizer against the free fit (issue #13.3), in the
    words `pgrpo fit` prints; nothing when the fit had no lr and beta1 to fix them from."""
    if "preferred" not in m:
        return ""
    interval = f"[{_num(m['kappa_lo'])}, {_num(m['kappa_hi'])}] (90%)"
    if m.get("kappa_not_estimated"):  # k at its box's edge: no estimate, no interval
        interval = _e(m["kappa_not_estimated"])
    return (
        f"<p>Closed form (m, c fixed by beta1 and K, {_e(m.get('optimizer_reduction', ''))}): "
        f"R<sup>2</sup> {_num(m['r2_constrained'])}, AICc - free {_num(m['delta_aicc'])}: "
        f"<b>{_e(m['preferred'])}</b> preferred; closed form {_e(m['closed_form'])} "
        f"(likelihood-ratio p {_num(m['lr_test_p'])}); kappa {_num(m['kappa_constrained'])} "
        f"{interval}.</p>"
    )


def _start_html(start: Any) -> str:
    """The `Start:` line `pgrpo fit` prints (`StartComparison.sentence`), where a free start
    describes the run better than a start from rest; nothing otherwise."""
    line = None if start is None else start.sentence()
    return f"<p>{_e(line)}</p>" if line else ""


def forecast_text(fc: Any, reward: np.ndarray, bin_size: int = 1, caveat: str | None = None) -> str:
    """The forecast in words: the same object, and the same words, as the reward panel draws;
    a band wider than the run's range is "not enough evidence" and is not drawn. reward: the
    points the forecast saw (bin means of `bin_size` logged points for a long log). caveat:
    `fitwords.band_caveat`'s sentence, said beside the band."""
    if fc is None:
        return ""
    words = plots.forecast_label(fc)
    if not informative(fc, reward):
        return (
            f"<p>Backtest: a {_e(words['line'])} has a band of its mean ({_e(words['band'])}), "
            f"but {_e(uninformative_reason(fc))}{' (its bin means)' * (bin_size > 1)}"
            ": not enough evidence to forecast the second half from the first, so it is not "
            "drawn.</p>"
        )
    prefix = np.asarray(fc.fit.reward)  # the points before the cut, as the forecast saw them
    unit = "logged points" if bin_size <= 1 else f"bin means of {bin_size} logged points"
    obs = fc.observed_mean
    tail = ""
    if math.isfinite(obs):
        inside = "inside" if fc.mean_band[0] <= obs <= fc.mean_band[1] else "outside"
        last10 = fc.baselines.get("last_10_mean", math.nan)  # the fit table's row
        tail = (
            f"; {words['observed']}, {inside} the band (the mean of the last 10 {unit} before "
            f"the cut was {last10:.3g})"
        )
    skill = measured_skill(fc)  # where it was measured (method, cut, length)
    return (
        f"<p>Backtest: {_e(words['line'])} ({prefix.size} {unit}) predicts the mean reward "
        f"over steps {fc.future_step[0]:g} to {fc.future_step[-1]:g}: {_e(words['band'])}"
        f"{_e(tail)}.{' <b>' + _e(caveat) + '</b>' if caveat else ''}"
        f"{' ' + _e(skill.sentence()) if skill else ''}</p>"
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
    seen: Any = None,
    start: Any = None,
    caveats: dict | None = None,
) -> str:
    """The page. seen: the log the fit and forecast were made on (bin means of a long log;
    default `log`): the forecast's words are about its points. start: the free-start comparison
    (`logfit.fit_start`), whose line follows the fit's. caveats: `build.ReportResult.caveats`
    (a "level" caveat replaces the free-start line, which speaks of the level the run heads
    for; a "band" caveat is said beside the forecast's band)."""
    caveats = caveats or {}
    seen = log if seen is None else seen
    bins = int(seen.metrics.get("bin_size", 1))
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
        from pgrpo.dynamics.fitquality import legend

        marks = {k: "at its bound" for k in fit.at_bound}
        marks.update({k: "not identified" for k in fit.unidentified})
        params = ", ".join(
            f"{k}={p.value:.4g}" + (f" ({marks[k]})" if k in marks else "")
            for k, p in fit.params.items()
        )
        why = "; ".join(fit.metrics[k] for k in ("r2_undefined", "params_undefined")
                        if k in fit.metrics)  # fmt: skip
        lines = legend([fit.model], list(marks.values()))
        fit_txt = (
            f"<p>Fit <b>{_e(fit.model)}</b>: {_e(params)}; R<sup>2</sup> {fit.format_r2('.3f')}"
            f"{_e(f' ({why})' if why else '')}, "
            f"residual std {fit.residual_std:.3g}.</p>"
            f'<p class="legend">{"<br>".join(_e(line) for line in lines)}</p>'
            f"{'' if fit.metrics.get('r2_undefined') else _quality(fit, bins)}"
            f"{_constrained_html(fit.metrics)}"
            + (f"<p><b>{_e(caveats['level'])}</b></p>" if caveats.get("level")
               else _start_html(start))
        )  # fmt: skip
    backtest = forecast_text(fc, seen.reward, bins, caveats.get("band"))
    given = settings.warnings if settings is not None else ()  # the data against them
    thinned = [w for w in seen.warnings if w not in log.warnings]  # "fitted as N means of b"
    warn = "".join(f"<li>{_e(w)}</li>" for w in (*log.warnings, *thinned, *given, *notes))
    return f"""<!DOCTYPE html><html><head><meta charset="utf-8">
<title>pgrpo report: {_e(log.source)}</title><style>{CSS}</style></head><body>
<h1>pgrpo run report</h1>
<div class="sub">{_e(log.source)} &middot; format {_e(log.format)} &middot;
reward: {_e(log.reward_read)} &middot; {len(log.step)}
logged steps ({_num(float(log.step[0]))} to {_num(float(log.step[-1]))}) &middot;
hyperparameters: {hp}</div>
<h2>Verdict</h2>{_findings_html(diagnosis)}
<details><summary>Evidence: every mode, its figures and the signals it missed</summary>
{_diagnosis_html(diagnosis)}</details>
<h2>Dynamics</h2>{_settings_html(settings)}{fit_txt}{backtest}
<div class="grid">{"".join(figs)}</div>
<h2>Evaluation</h2>{_eval_html(eval_doc)}
{f"<h2>Notes</h2><ul>{warn}</ul>" if warn else ""}
</body></html>"""
