"""`dynamical_instability` on growing prefixes of real runs, as a live user would see them.

    python bench/prefix_instability.py [FOLDERS ...] [--fractions 0.25,0.5,0.75,1] [--out PATH]

A user who runs `pgrpo diagnose` (or `pgrpo watch`, or the TRL callback) in the middle of a run
sees a prefix of its log, not the whole of it. The bar on real runs (`bench/real_runs.py`:
instability on <= 2 of the runs without a collapse note) judges whole logs; this bench judges
the prefixes: for every run of each corpus folder (index.json, one CSV per run; default
../shared/data/curves), each prefix of the
given fractions of its points (at least MIN_POINTS) is diagnosed with the corpus's stated
hyperparameters (`corpus_entry.with_metadata`), and the bench counts the runs whose prefix at
each fraction reads `dynamical_instability`, with the evidence that fired: among the runs whose
reference labels do not include `collapsed` (false alarms), and among those that do. Prints
one table and writes results JSON (command, date) to bench/results/prefix_instability.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np

from pgrpo.diagnose import diagnose
from pgrpo.logs import read_log

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_results  # noqa: E402
from corpus_entry import missing_index, references, with_metadata  # noqa: E402

CURVES = Path(__file__).resolve().parents[2] / "shared" / "data" / "curves"
OUT = Path(__file__).resolve().parent / "results" / "prefix_instability.json"
MIN_POINTS = 20
"""The live replay's min_points (`LiveConfig`): shorter prefixes are not judged."""
EVIDENCE_P = ("oscillation_growth_p", "spectral_peak_p", "peak_drop_p", "divergence_fall_p")
GROWTH = ("oscillation_growth", "oscillation_growth_level_shift_z", "oscillation_growth_judged")


def prefix(log, k: int):
    return replace(log, step=log.step[:k], reward=log.reward[:k],
                   columns={c: v[:k] for c, v in log.columns.items()})  # fmt: skip


def _name(folder: Path) -> str:
    """shared, or the held-back round's folder (holdout19 for /work/holdout19/all/curves)."""
    return "shared" if folder.resolve() == CURVES.resolve() else folder.resolve().parents[1].name


def judge(log) -> dict:
    mode = next(v for v in diagnose(log).modes if v.name == "dynamical_instability")
    ev = mode.evidence
    return {
        "detected": bool(mode.detected),
        "confidence": float(mode.confidence),
        **{k: float(ev[k]) for k in (*EVIDENCE_P, *GROWTH) if k in ev},
        "null_model": ev.get("null_model"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="*", type=Path, default=[CURVES])
    ap.add_argument("--fractions", default="0.25,0.5,0.75,1")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    if missing_index(args.folders):
        sys.exit(2)
    fractions = [float(f) for f in args.fractions.split(",")]
    warnings.filterwarnings("ignore")
    t0 = time.time()
    rows = []
    for folder in args.folders:
        for meta in json.loads((folder / "index.json").read_text())["runs"]:
            ref, _ = references(meta)
            collapsed = ref is not None and "collapsed" in ref
            log = with_metadata(read_log(str(folder / meta["csv"])), meta)
            ok = int(np.isfinite(log.reward).sum())
            for f in fractions:
                k = int(round(f * len(log)))
                if k < MIN_POINTS or ok < MIN_POINTS:
                    continue
                row = {"folder": _name(folder), "run": meta["name"], "repo": meta.get("repo"),
                       "collapse_note": collapsed, "fraction": f, "n": k}  # fmt: skip
                row.update(judge(prefix(log, k)))
                rows.append(row)
                if row["detected"] and not collapsed:
                    fired = [e for e in EVIDENCE_P if row.get(e, 1.0) < 0.05]
                    growth = row.get("oscillation_growth", float("nan"))
                    print(f"  INSTAB {row['folder']}/{row['run']} at {f:g} (n={k}): {fired} "
                          f"growth x{growth:.2f}", flush=True)  # fmt: skip
    print("| fraction | runs without a collapse note | instability | share "
          "| runs with one | instability |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    summary = []
    for f in fractions:
        at = [r for r in rows if r["fraction"] == f and not r["collapse_note"]]
        co = [r for r in rows if r["fraction"] == f and r["collapse_note"]]
        hit, co_hit = sum(r["detected"] for r in at), sum(r["detected"] for r in co)
        summary.append({"fraction": f, "runs": len(at), "instability": hit,
                        "collapse_runs": len(co), "collapse_instability": co_hit})  # fmt: skip
        print(f"| {f:g} | {len(at)} | {hit} | {hit / max(len(at), 1):.3f} | {len(co)} "
              f"| {co_hit} |")  # fmt: skip
    runs = {(r["folder"], r["run"]) for r in rows if not r["collapse_note"]}
    any_hit = {(r["folder"], r["run"]) for r in rows if r["detected"] and not r["collapse_note"]}
    print(f"runs without a collapse note with an alarm at any prefix: {len(any_hit)} of "
          f"{len(runs)}")  # fmt: skip
    write_results(args.out, "prefix_instability.py", None, seconds=round(time.time() - t0, 1),
                  summary=summary, runs_with_any_alarm=len(any_hit), runs=len(runs),
                  rows=rows)  # fmt: skip


if __name__ == "__main__":
    main()
