"""The level of the logged KL on real runs, by what their reward did: the evidence behind the
`kl_level` check's threshold (`pgrpo.diagnose.kllevel.KL_HIGH`).

    python bench/kl_levels.py [FOLDERS ...] [--out PATH]

For every run of each corpus folder (index.json, one CSV per run; default
../shared/data/curves) with a KL column of at least 10 points: the mean KL over the last tenth,
its maximum, the corpus verdict (`verdict` field, else the note read literally:
`corpus_entry.references`; "unread" where it gives none), and the check's
status. Prints the table sorted by level and the counts at or above KL_HIGH by verdict; writes
results JSON (command, date) to bench/results/kl_levels.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pgrpo.diagnose.checks import CheckOptions
from pgrpo.diagnose.kllevel import KL_HIGH, kl_level
from pgrpo.logs import read_log

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_results  # noqa: E402
from corpus_entry import missing_index, references  # noqa: E402

CURVES = Path(__file__).resolve().parents[2] / "shared" / "data" / "curves"
OUT = Path(__file__).resolve().parent / "results" / "kl_levels.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="*", type=Path, default=[CURVES])
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    if missing_index(args.folders):
        sys.exit(2)
    rows = []
    for folder in args.folders:
        for meta in json.loads((folder / "index.json").read_text())["runs"]:
            res = kl_level(read_log(str(folder / meta["csv"])), CheckOptions())
            if res.status == "not_enough_evidence":
                continue
            _, strict = references(meta)  # the note read literally where there is no verdict
            verdict = meta.get("verdict") or ("/".join(sorted(strict)) if strict else "unread")
            rows.append({"run": meta["name"], "repo": meta.get("repo"),
                         "verdict": verdict.lower(), "beta": meta.get("beta"),
                         "status": res.status, **res.evidence})  # fmt: skip
    rows.sort(key=lambda r: r["kl_last_tenth"])
    print("| run | verdict | beta | KL last tenth | KL max | status |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['run'][:48]} | {r['verdict']} | {r['beta']} | {r['kl_last_tenth']:.4g} "
              f"| {r['kl_max']:.4g} | {r['status']} |")  # fmt: skip
    by: dict[str, list[int]] = {}
    for r in rows:
        by.setdefault(r["verdict"], [0, 0])[r["status"] == "warn"] += 1
    print(f"\nlogs with a KL column: {len(rows)}; at or above {KL_HIGH:g} per token over the last "
          "tenth, by verdict (warn / all):")  # fmt: skip
    for v, (ok, warn) in sorted(by.items()):
        print(f"  {v}: {warn} / {ok + warn}")
    write_results(args.out, "kl_levels.py", None, kl_high=KL_HIGH,
                  by_verdict={v: {"warn": w, "logs": o + w} for v, (o, w) in by.items()},
                  rows=rows)  # fmt: skip


if __name__ == "__main__":
    main()
