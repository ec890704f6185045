"""fit, forecast and diagnose on every real run of the corpus (../shared/data/curves) and on
null curves of the same lengths, beside rldoctor 0.2.0 (PyPI) on the same files.

    python bench/real_runs.py [--rldoctor .venv-rldoctor/bin/python] [--nulls-per-run 10]
                              [--corpus DIR] [--out PATH]

--corpus: another folder of runs in the same layout (index.json with `runs`: name, csv, repo,
notes, G, prompts_per_step, completions_per_step, num_iterations, learning_rate, steps_logged;
one CSV per run), e.g. runs held back from the shared corpus: its results go to
bench/results/real_runs_<folder>.json unless --out says otherwise. The forecast's prior
(`levelgain.CORPUS_PRIOR`) was learned on the runs bench/results/forecast_prior.json lists (the
shared corpus and held-back rounds 1-5): the quality bar says whether it is in sample on the
runs here (bench/forecast_prior.py gives its leave-one-repository-out figures).

rldoctor pins numpy and nothing else, but it lives in its own venv so that the comparison never
depends on pgrpo's environment: `python -m venv .venv-rldoctor && .venv-rldoctor/bin/pip install
rldoctor==0.2.0`. Without that venv its columns are left empty.

Per run: the corpus note, the progress verdict, the failure modes detected, R^2 of the `rom` fit
(free; constrained when `fit_log` provides one), the forecast of the second-half mean from the
first half against the mean of the last 10 logged steps of the first half (|error| / std of the
run's reward), and whether the forecast's band covered the observed mean. The log's own G, B
(prompts per step), lr and num_iterations come from index.json.

The summary ends with `quality_bar`: each of issue #13's bars (forecast median |error| / std <=
0.20 and better than the last-10 mean on >= 2/3 of runs; a sensible progress verdict on >= 85%;
`dynamical_instability` on <= 2 runs without a collapse note; no failure mode and `flat` on >=
95% of null curves; R^2 >= 0.91 on research-scale learning curves, i.e. runs of >= 128 rollouts
per step whose note allows learning, per logged point and on means of 10, beside the noise
ceiling: the R^2 a perfect mean curve gets under the log's own noise; and the same for the fit
that describes the run, `LogFit.described`: rom_v0 where a free start is preferred, since
2026-12-05), its value and whether it is met.

A "sensible" progress verdict is judged against the corpus note, a first opinion, not ground
truth: a note that says COLLAPSED (in capitals) accepts collapsed / declining; one that says
flat (or "no clear trend") accepts flat / plateau; one that says learning (or slow / fast)
accepts learning / plateau / saturated; a note that says none of these gives no reference and
the run is left out of the rate (listed as '?'). An entry's `verdict` field, where it has
one (bench/holdout2/), replaces the note's keywords (`VERDICTS`).

Null curves: per corpus run, `--nulls-per-run` curves of its length, seeded: for a run whose
rewards are means of N = B x G 0/1 rewards, B prompts x G rollouts at the run's mean success
rate (clipped to [0.2, 0.8]) with TRL's reward_std and frac_reward_zero_std; otherwise i.i.d.
Gaussian at the run's mean and noise level. Plus the issue's suite: 40 curves of 1 prompt x G=8
at a constant p ~ U(0.2, 0.8), lengths drawn from the corpus. A null curve of G 0/1 rollouts
per prompt whose zero-spread share p^G + (1 - p)^G exceeds the degeneracy mode's
DEGENERACY_MAX by EXPECTED_MARGIN (a G = 2 run at p 0.2: 0.68) is degenerate by construction,
and advantage_degeneracy (rldoctor: advantage_collapse) is the right answer there: the bar
counts a null as clean when it reads flat with no mode beyond that (`null_no_mode_and_flat`,
`rldoctor_null_flat_no_alarm`); the `_literal` counts take any mode. Where entries carry a
`verdict` field, the summary also gives the note-keyword reading (`keywords_*`) and the runs
the two readings judge differently. Results: bench/results/real_runs.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from pgrpo.diagnose import MODES, diagnose
from pgrpo.diagnose.nullmodel import lag1_autocorr
from pgrpo.dynamics.fitquality import AT_CEILING, fit_quality
from pgrpo.dynamics.logfit import fit_log
from pgrpo.logs import read_log

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_entry import (  # noqa: E402
    RESEARCH_ROLLOUTS,
    n_rollouts,
    reference,
    references,
    with_metadata,
)
from null_curves import null_suite  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CURVES = ROOT.parent / "shared" / "data" / "curves"
RESULTS = ROOT / "bench" / "results" / "real_runs.json"
PRIOR_RESULT = ROOT / "bench" / "results" / "forecast_prior.json"
SHORT = {
    "reward_hacking": "hack",
    "advantage_degeneracy": "degen",
    "policy_concentration": "conc",
    "dynamical_instability": "INSTAB",
}


def _defined(x: float) -> float | None:
    """A finite float, or None (strict JSON; `median` skips it)."""
    return float(x) if np.isfinite(x) else None


def forecast_row(log) -> dict:
    """R^2 of the fit on the whole log and the forecast of the second half from the first."""
    out: dict = {"r2": None, "r2_constrained": None}
    try:
        lf = fit_log(log, forecast_from=0.5, noise_rho=lag1_autocorr)
    except (ValueError, RuntimeError, np.linalg.LinAlgError) as exc:
        return {**out, "fit_error": f"{type(exc).__name__}: {exc}"}
    out["r2"] = _defined(lf.rom.r2)  # None: undefined (a reward that never changed)
    out["start"] = None if lf.start is None else lf.start.preferred
    out["r2_described"] = _defined(lf.described.r2)  # rom_v0 where a free start is preferred
    q = fit_quality(lf.rom, bin_size=int(lf.log.metrics.get("bin_size", 1)))
    out["r2_ceiling"] = _defined(q.get("noise_ceiling", float("nan")))
    out["r2_block10"] = _defined(q.get("r2_block_means", float("nan")))
    out["r2_ceiling_block10"] = _defined(q.get("noise_ceiling_block_means", float("nan")))
    constrained = getattr(lf, "constrained", None)
    if constrained is not None and hasattr(constrained, "r2"):
        out["r2_constrained"] = _defined(constrained.r2)
    fc = lf.forecast
    if fc is None:  # the cut leaves too few points (fit_log says why; the fit stands)
        return {**out, "fit_error": str(lf.metrics.get("forecast_skipped"))}
    r = log.reward
    half = int(round(0.5 * r.size))
    std = float(np.std(r)) or 1.0
    obs = float(fc.observed_mean)
    last10 = float(np.mean(r[:half][-10:]))
    out.update(
        forecast=float(fc.predicted_mean),
        observed=obs,
        err=abs(fc.predicted_mean - obs) / std,
        err_last10=abs(last10 - obs) / std,
        covered=bool(fc.mean_band[0] <= obs <= fc.mean_band[1]),
    )
    return out


def pgrpo_row(log) -> dict:
    t0 = time.perf_counter()
    d = diagnose(log)
    secs = time.perf_counter() - t0
    modes = [v.name for v in d.modes if v.detected and v.name in MODES]
    return {"progress": d.progress.label, "modes": modes, "diagnose_s": secs,
            "summary": d.progress.summary}  # fmt: skip


RLDOCTOR = r"""
import json, sys
from rl_doctor import diagnose, load_csv
out = {}
for path in json.load(sys.stdin):
    try:
        d = diagnose(load_csv(path))
    except Exception as exc:  # a run rldoctor cannot read is reported, not fatal
        out[path] = {"error": f"{type(exc).__name__}: {exc}"}
        continue
    f = {x.detector: (x.severity.name, x.summary) for x in d.findings}
    out[path] = {"findings": f, "headline": d.headline}
json.dump(out, sys.stdout)
"""


def rldoctor_label(res: dict) -> tuple[str | None, list[str]]:
    """rldoctor's plateau finding as a progress label, and its other findings >= WARNING."""
    if "findings" not in res:
        return None, []
    sev, summary = res["findings"].get("plateau", ("SKIPPED", ""))
    text = summary.lower()
    if sev == "OK":
        label = "learning"
    elif "declining" in text:
        label = "declining"
    elif "stopped improving" in text:
        label = "plateau"
    elif sev == "INFO" and "flat" in text:
        label = "flat"
    else:
        label = "too_short" if sev == "SKIPPED" else sev.lower()
    alarms = [
        name
        for name, (s, _) in res["findings"].items()
        if name != "plateau" and s in ("WARNING", "CRITICAL")
    ]
    return label, alarms


def run_rldoctor(python: str | None, paths: list[str]) -> dict:
    if not python or not Path(python).exists():
        return {}
    proc = subprocess.run(
        [python, "-c", RLDOCTOR], input=json.dumps(paths), capture_output=True, text=True,
        timeout=1800, check=True,
    )  # fmt: skip
    return json.loads(proc.stdout)


RLDOCTOR_MODES = {"advantage_degeneracy": "advantage_collapse"}
"""rldoctor's name for a pgrpo mode, so that a null's expected modes excuse both tools alike."""


def median(rows: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rows if isinstance(r.get(key), float)]
    return float(np.median(vals)) if vals else None


def real_runs(runs: list[dict], rld: dict, corpus: Path = CURVES) -> list[dict]:
    rows = []
    for meta in runs:
        path = str(corpus / meta["csv"])
        log = with_metadata(read_log(path), meta)
        ref, strict = references(meta)
        row = {"run": meta["name"], "repo": meta.get("repo"), "n": len(log),
               "note": meta.get("notes", ""), "n_rollouts": n_rollouts(meta)}  # fmt: skip
        row.update(pgrpo_row(log))
        row.update(forecast_row(log))
        row["reference"] = sorted(ref) if ref else None
        row["sensible"] = None if ref is None else row["progress"] in ref
        row["strict"] = None if strict is None else row["progress"] in strict
        label, alarms = rldoctor_label(rld.get(path, {}))
        row.update(rldoctor_progress=label, rldoctor_alarms=alarms)
        row["rldoctor_sensible"] = None if ref is None or label is None else label in ref
        row["rldoctor_strict"] = None if strict is None or label is None else label in strict
        kw_ref = reference(meta.get("notes", ""))  # the note's keywords, verdict field or not
        row["reference_keywords"] = sorted(kw_ref) if kw_ref else None
        row["sensible_keywords"] = None if kw_ref is None else row["progress"] in kw_ref
        row["rldoctor_sensible_keywords"] = (
            None if kw_ref is None or label is None else label in kw_ref
        )
        rows.append(row)
    return rows


def null_rows(suite, rld: dict) -> list[dict]:
    rows = []
    for meta, path, _, expect in suite:
        log = with_metadata(read_log(path), meta)
        row = {"null": path.stem, "n": len(log), **pgrpo_row(log), "expected_modes": expect}
        label, alarms = rldoctor_label(rld.get(str(path), {}))
        row.update(rldoctor_progress=label, rldoctor_alarms=alarms)
        rows.append(row)
    return rows


def show(rows: list[dict], nulls: list[dict]) -> None:
    def f(v, fmt=".2f"):
        return "-" if v is None else format(v, fmt)

    print("| run | note | progress | ok | modes | R^2 | R^2 constr. | err | err last-10 | "
          "covered | rldoctor progress | ok | rldoctor alarms |")  # fmt: skip
    print("|" + "---|" * 13)
    for r in rows:
        ok = {True: "yes", False: "NO", None: "?"}
        modes = ",".join(SHORT[m] for m in r["modes"]) or "-"
        print(
            f"| {r['run']} | {r['note'][:38]} | {r['progress']} | {ok[r['sensible']]} | {modes} | "
            f"{f(r['r2'])} | {f(r['r2_constrained'])} | {f(r.get('err'))} | "
            f"{f(r.get('err_last10'))} | {r.get('covered', '-')} | {r['rldoctor_progress']} | "
            f"{ok[r['rldoctor_sensible']]} | {','.join(r['rldoctor_alarms']) or '-'} |"
        )


def show_bar(bars: list[dict]) -> None:
    print("\n| quality bar (issue #13) | value | target | |\n|---|---|---|---|")
    for b in bars:
        v = b["value"]
        v = f"{v:.3f}" if isinstance(v, float) else ("-" if v is None else v)
        print(f"| {b['bar']} | {v} | {b['target']} | {b['met']} |")


def summary(rows: list[dict], nulls: list[dict], prior_sample: str = "in sample") -> dict:
    judged = [r for r in rows if r["sensible"] is not None]
    rjudged = [r for r in rows if r["rldoctor_sensible"] is not None]
    shows_none = [r for r in rows if "collapsed" not in (r["reference"] or [])]
    fc = [r for r in rows if isinstance(r.get("err"), float)]
    out = {
        "runs": len(rows),
        "runs_with_reference": len(judged),
        "sensible_progress": sum(r["sensible"] for r in judged),
        "rldoctor_runs_with_reference": len(rjudged),
        "rldoctor_sensible_progress": sum(r["rldoctor_sensible"] for r in rjudged),
        "strict_progress": sum(bool(r["strict"]) for r in judged),
        "rldoctor_strict_progress": sum(bool(r["rldoctor_strict"]) for r in rjudged),
        "instability_runs_without_collapse_note": sum(
            "dynamical_instability" in r["modes"] for r in shows_none
        ),
        "runs_without_collapse_note": len(shows_none),
        "median_r2": median(rows, "r2"),
        "median_forecast_err": median(fc, "err"),
        "median_last10_err": median(fc, "err_last10"),
        "forecast_beats_last10": sum(r["err"] < r["err_last10"] for r in fc),
        "forecast_runs": len(fc),
        "band_coverage": float(np.mean([r["covered"] for r in fc])) if fc else None,
        "median_diagnose_s": median(rows, "diagnose_s"),
        "nulls": len(nulls),
        "null_no_mode_and_flat": sum(
            set(r["modes"]) <= set(r["expected_modes"]) and r["progress"] == "flat" for r in nulls
        ),
        "null_no_mode_and_flat_literal": sum(
            (not r["modes"]) and r["progress"] == "flat" for r in nulls
        ),
        "null_degenerate_by_construction": sum(bool(r["expected_modes"]) for r in nulls),
        "null_any_mode": sum(bool(r["modes"]) for r in nulls),
        "null_modes": {m: sum(m in r["modes"] for r in nulls) for m in MODES},
        "null_progress": {
            k: sum(r["progress"] == k for r in nulls)
            for k in sorted({r["progress"] for r in nulls})
        },  # fmt: skip
        "rldoctor_null_flat_no_alarm": sum(
            r["rldoctor_progress"] == "flat"
            and set(r["rldoctor_alarms"]) <= {RLDOCTOR_MODES[m] for m in r["expected_modes"]}
            for r in nulls
        ),
        "rldoctor_null_flat_no_alarm_literal": sum(
            r["rldoctor_progress"] == "flat" and not r["rldoctor_alarms"] for r in nulls
        ),
        "rldoctor_null_any_alarm": sum(bool(r["rldoctor_alarms"]) for r in nulls),
        "rldoctor_null_progress": {
            str(k): sum(r["rldoctor_progress"] == k for r in nulls)
            for k in sorted({str(r["rldoctor_progress"]) for r in nulls})
        },
    }
    by_repo: dict[str, list[bool]] = {}
    for r in judged:
        by_repo.setdefault(str(r["repo"]), []).append(bool(r["sensible"]))
    out["sensible_by_repository"] = {k: f"{sum(v)}/{len(v)}" for k, v in by_repo.items()}
    # the same runs read by note keywords alone (how the shared and round-1 notes are read): on
    # round 2 the verdict field was introduced after its verdicts had been seen (docs)
    kw = [r for r in rows if r["sensible_keywords"] is not None]
    out["keywords_runs_with_reference"] = len(kw)
    out["keywords_sensible_progress"] = sum(r["sensible_keywords"] for r in kw)
    out["keywords_rldoctor_sensible_progress"] = sum(
        bool(r["rldoctor_sensible_keywords"]) for r in kw
    )
    out["runs_read_differently_by_verdict"] = [
        r["run"] for r in rows if r["reference"] != r["reference_keywords"]
    ]
    out["quality_bar"] = quality_bar(rows, out, prior_sample)
    return out


def _bar(name: str, value, target: str, met: bool | None) -> dict:
    return {"bar": name, "value": value, "target": target,
            "met": "not judged" if met is None else ("met" if met else "NOT met")}  # fmt: skip


def _r2_needed(ceiling: float) -> float:
    """The per-point R^2 that meets the bar at this noise ceiling: 0.91 where the noise allows
    it, else the ceiling less AT_CEILING (`logfit`'s "at the ceiling", the R^2 bar's reading
    pre-registered for round 5, bench/holdout5/README.md)."""
    return 0.91 if ceiling >= 0.91 else ceiling - AT_CEILING


def prior_sample(runs: list[dict]) -> str:
    """Whether the forecast's prior was learned on `runs` (index.json entries): by their names
    among the runs bench/results/forecast_prior.json derived it from."""
    trained = set(json.loads(PRIOR_RESULT.read_text())["derivation"]["log_tau_ratio"])
    k = sum(m["name"] in trained for m in runs)
    if k == 0:
        return "out of sample"
    return "in sample" if k == len(runs) else f"in sample on {k} of {len(runs)} runs"


def quality_bar(rows: list[dict], s: dict, prior_sample: str = "in sample") -> list[dict]:
    """Issue #13's bars on these runs (see the module docstring). prior_sample: whether the
    forecast's prior was learned on these runs (`prior_sample`'s words)."""
    fc, judged, nulls = s["forecast_runs"], s["runs_with_reference"], s["nulls"]
    research = [
        r for r in rows
        if (r.get("n_rollouts") or 0) >= RESEARCH_ROLLOUTS and "learning" in (r["reference"] or [])
    ]  # fmt: skip
    r2 = [r["r2"] for r in research if r.get("r2") is not None]
    r2_10 = [r["r2_block10"] for r in research if r.get("r2_block10") is not None]
    ceil = [r["r2_ceiling"] for r in research if r.get("r2_ceiling") is not None]
    ceil_10 = [r["r2_ceiling_block10"] for r in research if r.get("r2_ceiling_block10") is not None]
    room = [r["r2_block10"] for r in research if r.get("r2_block10") is not None
            and (r.get("r2_ceiling_block10") or 0.0) >= 0.91]  # fmt: skip
    with_ceiling = [r for r in research if r.get("r2") is not None and r.get("r2_ceiling")]
    reached = sum(r["r2"] >= _r2_needed(r["r2_ceiling"]) for r in with_ceiling)
    described = [r.get("r2_described") for r in research if r.get("r2_described") is not None]
    reached_described = sum(r["r2_described"] >= _r2_needed(r["r2_ceiling"])
                            for r in with_ceiling if r.get("r2_described") is not None)  # fmt: skip
    free = sum(r.get("start") == "free" for r in research)

    def rng(v):
        return f"{min(v):.3f}-{max(v):.3f}" if v else "-"

    err = s["median_forecast_err"]
    return [
        _bar(f"forecast median |error| / std (cut 0.5; prior {prior_sample})", err, "<= 0.20",
             None if err is None else err <= 0.20),
        _bar("forecast better than the last-10 mean", f"{s['forecast_beats_last10']}/{fc}",
             ">= 2/3", None if not fc else 3 * s["forecast_beats_last10"] >= 2 * fc),
        _bar("sensible progress verdict", f"{s['sensible_progress']}/{judged}", ">= 85%",
             None if not judged else s["sensible_progress"] >= 0.85 * judged),
        *([_bar("  the same, notes read by keywords (as without verdict fields)",
                f"{s['keywords_sensible_progress']}/{s['keywords_runs_with_reference']}",
                ">= 85%", s["keywords_sensible_progress"]
                >= 0.85 * s["keywords_runs_with_reference"])]
          if s["runs_read_differently_by_verdict"] else []),
        _bar("dynamical_instability on runs without a collapse note",
             f"{s['instability_runs_without_collapse_note']}/{s['runs_without_collapse_note']}",
             "<= 2", s["instability_runs_without_collapse_note"] <= 2),
        _bar("null curves: no failure mode and flat", f"{s['null_no_mode_and_flat']}/{nulls}",
             ">= 95%", None if not nulls else s["null_no_mode_and_flat"] >= 0.95 * nulls),
        _bar(f"  the same, counting advantage_degeneracy on the "
             f"{s['null_degenerate_by_construction']} nulls degenerate by construction",
             f"{s['null_no_mode_and_flat_literal']}/{nulls}", "(literal reading)", None),
        _bar(f"R^2 per logged point, research-scale learning runs ({len(r2)})", rng(r2),
             ">= 0.91", None if not r2 else min(r2) >= 0.91),
        _bar("  noise ceiling of those runs (a perfect mean curve's R^2)", rng(ceil),
             "(what per-point R^2 can reach)", None),
        _bar(f"  R^2 per point >= 0.91, or within {AT_CEILING} of a ceiling below 0.91 "
             "(round 5's reading)", f"{reached}/{len(with_ceiling)}", "all",
             None if not with_ceiling else reached == len(with_ceiling)),
        _bar(f"  R^2 per point of the fit that describes the run (rom_v0 where a free start "
             f"is preferred: {free} of {len(research)})", rng(described), ">= 0.91",
             None if not described else min(described) >= 0.91),
        _bar(f"  the same, >= 0.91 or within {AT_CEILING} of a ceiling below 0.91",
             f"{reached_described}/{len(with_ceiling)}", "all",
             None if not with_ceiling else reached_described == len(with_ceiling)),
        _bar("  R^2 on means of 10 logged points, same runs", rng(r2_10), ">= 0.91",
             None if not r2_10 else min(r2_10) >= 0.91),
        _bar("  noise ceiling of those means", rng(ceil_10), "(what it can reach)", None),
        _bar(f"  R^2 on means of 10, runs whose ceiling there is >= 0.91 ({len(room)})",
             rng(room), ">= 0.91", None if not room else min(room) >= 0.91),
    ]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rldoctor", default=str(ROOT / ".venv-rldoctor" / "bin" / "python"))
    ap.add_argument("--nulls-per-run", type=int, default=10)
    ap.add_argument("--corpus", type=Path, default=CURVES, help="folder with index.json")
    ap.add_argument("--out", type=Path, default=None, help="results JSON")
    args = ap.parse_args()
    t0 = time.time()
    corpus = args.corpus.resolve()
    index = corpus / "index.json"
    if not index.is_file():
        print(f"error: {index} not found: give --corpus a folder holding index.json",
              file=sys.stderr)  # fmt: skip
        sys.exit(2)
    own = corpus == CURVES.resolve()
    out_path = args.out or (RESULTS if own else RESULTS.with_name(f"real_runs_{corpus.name}.json"))
    runs = json.loads(index.read_text())["runs"]
    with tempfile.TemporaryDirectory() as tmp:
        suite = null_suite(runs, args.nulls_per_run, Path(tmp), corpus)
        paths = [str(corpus / m["csv"]) for m in runs] + [str(x[1]) for x in suite]
        rld = run_rldoctor(args.rldoctor, paths)
        rows = real_runs(runs, rld, corpus)
        nulls = null_rows(suite, rld)
    show(rows, nulls)
    summ = summary(rows, nulls, prior_sample(runs))
    print(json.dumps({k: v for k, v in summ.items() if k != "quality_bar"}, indent=1))
    show_bar(summ["quality_bar"])
    print(f"{time.time() - t0:.0f} s")
    doc = {
        "command": "python bench/real_runs.py " + " ".join(sys.argv[1:]),
        "date": dt.date.today().isoformat(),
        "machine": "2-core CPU shared with other jobs, no GPU",
        "rldoctor": "0.2.0" if rld else None,
        "summary": summ,
        "runs": rows,
        "nulls": nulls,
    }
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(doc, indent=1, default=float))


if __name__ == "__main__":
    main()
