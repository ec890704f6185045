"""What a corpus entry (one run of an index.json, bench/real_runs.py's layout) says beside its
CSV: the progress labels its note allows (`references`: the `verdict` field where the entry has
one, else the note's keywords), its rollouts per step, and its log with the stated
hyperparameters added (`with_metadata`), the research-scale threshold, and the one-line check
that a corpus folder has its index (`missing_index`). Used by
bench/real_runs.py, bench/forecast_pooled.py and bench/live_checks.py."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path


def reference(note: str) -> set[str] | None:
    """Acceptable progress labels from a corpus note (a first opinion). COLLAPSED is read in
    capitals, as the corpus writes its verdict (a held-back note's "every group had collapsed
    to a single query" describes groups in a run its author called flat). A note that opens
    with "declining" (round 2's "declining (slow, noisy)") is a decline: declining, or a
    plateau (stopped improving), not learning."""
    n = note.lower()
    if "COLLAPSED" in note:
        return {"collapsed", "declining"}
    if n.startswith("declining"):
        return {"declining", "collapsed", "plateau"}
    if "flat" in n or "no clear trend" in n:
        return {"flat", "plateau"}
    if "learning" in n or "(slow" in n or "(fast" in n:
        return {"learning", "plateau", "saturated"}
    return None


VERDICTS = {
    "learning": ({"learning", "plateau", "saturated"}, {"learning"}),
    "plateaued": ({"plateau", "saturated", "flat"}, {"plateau", "saturated"}),
    "flat": ({"flat", "plateau"}, {"flat"}),
    "degenerate": ({"flat", "plateau", "saturated"}, {"flat"}),
    "declining": ({"declining", "collapsed", "plateau"}, {"declining", "collapsed"}),
    "collapsed": ({"collapsed", "declining"}, {"collapsed", "declining"}),
}
"""A corpus entry's `verdict` field (round 2 on, bench/holdout2/): the note's own first word
for the run, written down as a field so that no keyword elsewhere in the note (a "Flat at
0.02-0.05 for steps 1-10" in a learning run's note, the "no learning signal" of a degenerate
one) is read as its opinion -> (acceptable labels, the same read literally)."""


def references(meta: dict) -> tuple[set[str] | None, set[str] | None]:
    """(acceptable, strict) progress labels of a corpus entry: from its `verdict` field when it
    has one (`VERDICTS`), else read from its note (`reference`, `strict_reference`)."""
    if (verdict := meta.get("verdict")) is not None:
        return VERDICTS[verdict]
    note = meta.get("notes", "")
    return reference(note), strict_reference(note)


def strict_reference(note: str) -> set[str] | None:
    """The note read literally: learning -> learning, flat -> flat, collapsed or declining ->
    collapsed or declining (a plateau counts for none of them)."""
    ref = reference(note)
    if ref is None:
        return None
    if "collapsed" in ref:
        return {"collapsed", "declining"}
    return ref & {"learning", "flat"}


RESEARCH_ROLLOUTS = 128
"""Rollouts per step from which a run counts as research scale (the bar's R^2 >= 0.91; the
forecast's split by scale)."""


def missing_index(folders) -> bool:
    """Whether a corpus folder lacks its index.json; if so, says which in one line on stderr
    (the benches that read corpus folders then exit 2)."""
    for d in folders:
        if not (Path(d) / "index.json").is_file():
            print(f"error: {d} has no index.json; pass folders in the corpus layout "
                  "(index.json with `runs`, one CSV per run)", file=sys.stderr)  # fmt: skip
            return True
    return False


def synthetic_and_corpus_args(doc: str, out: Path, folder: Path) -> argparse.Namespace:
    """The command line of a bench that scores synthetic curves and corpus folders: folders
    (default `folder`), --curves per cell (0: the real runs only), --seed, --out (default
    `out`); a folder without index.json is one line on stderr and exit 2 (`missing_index`)."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("folders", nargs="*", type=Path, default=[folder])
    ap.add_argument("--curves", type=int, default=100,
                    help="synthetic curves per cell (0: the real runs only)")  # fmt: skip
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=out)
    args = ap.parse_args()
    if missing_index(args.folders):
        sys.exit(2)
    return args


def n_rollouts(meta: dict) -> int | None:
    g, b = meta.get("G"), meta.get("prompts_per_step")
    return meta.get("completions_per_step") or (g * b if g and b else None)


def with_metadata(log, meta: dict):
    """The log with the corpus's G, B, N, lr and K added where the log itself lacks them."""
    hp = dict(log.hyperparameters)
    extra = {
        "group_size": meta.get("G"),
        "batch_prompts": meta.get("prompts_per_step"),
        "completions_per_step": n_rollouts(meta),
        "refresh_interval": meta.get("num_iterations"),
        "lr": meta.get("learning_rate"),
        # torch AdamW's default (as bench/forecast_real.py): stated for the AdamW runs, assumed
        # for the runs whose optimizer the corpus does not name
        "beta1": 0.9,
    }
    for key, value in extra.items():
        if value is not None and key not in hp:
            hp[key] = float(value)
    return replace(log, hyperparameters=hp)
