"""Where the progress verdict misses on held-back runs: the evidence behind each verdict that the
collector's word does not allow, read from the runs as `pgrpo diagnose` reads them.

    python bench/verdict_misses.py DIR [DIR ...] [--out PATH]

Each DIR is a corpus folder (index.json with `runs`, one CSV per run). For every run whose
verdict the entry's word does not allow (`corpus_entry.references`, as bench/real_runs.py judges
it) it prints the verdict, the null model the tests used and their p-values (the whole-run trend,
the gain of the end window over the start, the rise over the second half, a rise within the
start window), and sorts the misses into the reasons the verdict's rules give:

- `weak`: a rise (an upward trend, or the gain) significant at 5% but not at the verdict's level
  ALPHA (0.5%):
  the level that holds the null curves' false alarms (docs/diagnostics.md);
- `rho_bound`: the null is AR(1) noise at the rho bound 0.9, against which a short rise that
  stops cannot be told from wander;
- `other`: neither (a label the collector's word does not allow for another reason).

A study, not a change: nothing here feeds the verdict. Writes bench/results/verdict_misses.json
(or --out) with the command and date.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_results  # noqa: E402
from corpus_entry import missing_index, references, with_metadata  # noqa: E402

from pgrpo.diagnose import diagnose  # noqa: E402
from pgrpo.diagnose.progress import ALPHA  # noqa: E402
from pgrpo.logs import read_log  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "verdict_misses.json"
RHO_BOUND = "rho=0.90"
P_KEYS = ("trend_slope", "trend_p", "gain_p", "recent_p_up", "head_p")


def reason(ev: dict, label: str) -> str:
    if label == "flat" and RHO_BOUND in str(ev.get("null_model", "")):
        return "rho_bound"
    rose = (ev.get("trend_slope", 0.0) > 0 and ev["trend_p"] < 0.05) or ev["gain_p"] < 0.05
    if label == "flat" and rose:  # the trend test is two-sided: a fall at 5% is no weak rise
        return "weak"
    return "other"


def folder_rows(folder: Path) -> tuple[int, list[dict]]:
    """(runs judged, the misses' rows) of one corpus folder."""
    judged, rows = 0, []
    for meta in json.loads((folder / "index.json").read_text())["runs"]:
        ref, _ = references(meta)
        if ref is None:
            continue
        judged += 1
        progress = diagnose(with_metadata(read_log(folder / meta["csv"]), meta)).progress
        if progress.label in ref:
            continue
        ev = progress.evidence
        ps = {k: ev.get(k) for k in P_KEYS}
        rows.append({"folder": str(folder), "run": meta["name"], "repo": meta.get("repo"),
                     "n": ev.get("n"), "word": meta.get("verdict"), "label": progress.label,
                     "null_model": ev.get("null_model"), **ps,
                     "reason": reason(ev, progress.label)})  # fmt: skip
    return judged, rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", type=Path, nargs="+", help="corpus folders (index.json + CSVs)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if missing_index(args.folders):
        return 2
    judged, rows = 0, []
    for folder in args.folders:
        k, r = folder_rows(folder)
        judged, rows = judged + k, rows + r
    print(f"{'run':<40}{'n':>5}  {'word':<11}{'verdict':<10}{'trend p':>9}{'gain p':>9}  reason")
    for r in rows:
        ps = f"{r['trend_p']:>9.3g}{r['gain_p']:>9.3g}"
        print(f"{r['run'][:39]:<40}{r['n']:>5}  {str(r['word']):<11}{r['label']:<10}{ps}"
              f"  {r['reason']}  ({r['null_model']})")  # fmt: skip
    counts = {k: sum(r["reason"] == k for r in rows) for k in ("weak", "rho_bound", "other")}
    print(f"{len(rows)} misses of {judged} runs judged (level {ALPHA}): {counts}")
    write_results(args.out, "verdict_misses.py", argv, judged=judged, misses=len(rows),
                  reasons=counts, alpha=ALPHA, rows=rows)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
