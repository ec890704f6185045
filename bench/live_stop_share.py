"""Sensitivity of the live plateau stop to how tight the bound must be: stop on a plateau whose
`recent_rise_hi` is at most SHARE x its gain (the default stop takes `progress.PLATEAU_SHARE`,
0.25, the share at which the verdict says "has stopped"; 1.0 adds the "probably plateaued"
verdicts; any plateau is `--plateau-any` of the two benchmarks below).

    python bench/live_stop_share.py --share 0.5 --on sim     # bench/live_stop_sim.py, 20 seeds
    python bench/live_stop_share.py --share 0.5 --on real    # bench/live_checks.py, 1 null a log

A study, not a setting: it patches `pgrpo.diagnose.live._decide` for this process only (a
plateau within SHARE of its gain is treated as `plateau_stopped` 1) and writes the benchmark's
results to bench/results/live_stop_share_<on>_<share>.json with this command in its meta.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import pgrpo.diagnose.live as live

BENCH = Path(__file__).resolve().parent


def patch(share: float) -> None:
    decide = live._decide

    def within_share(progress, run, n, cfg):  # noqa: ANN001, ANN202
        ev = progress.evidence
        if progress.label == "plateau" and not ev.get("plateau_stopped"):
            gain = ev["end_level"] - ev["start_level"]
            if ev["recent_rise_hi"] <= share * max(gain, 0.0):
                progress = dataclasses.replace(progress, evidence={**ev, "plateau_stopped": 1.0})
        return decide(progress, run, n, cfg)

    live._decide = within_share


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--share", type=float, required=True)
    ap.add_argument("--on", choices=("sim", "real"), required=True)
    args = ap.parse_args()
    patch(args.share)
    sys.path.insert(0, str(BENCH))
    tmp = BENCH / "results" / f".live_stop_share_{args.on}_{args.share:g}"
    tmp.mkdir(parents=True, exist_ok=True)
    if args.on == "sim":
        import live_stop_sim as bench

        sys.argv = ["live_stop_sim.py", "--seeds", "20"]
        written = tmp / "live_stop_sim.json"
    else:
        import live_checks as bench

        sys.argv = ["live_checks.py", "--null-per-log", "1"]
        written = tmp / "live_checks.json"
    bench.RESULTS = tmp
    bench.main()
    out = json.loads(written.read_text())
    out["meta"]["benchmark_command"] = out["meta"]["command"]  # the patched benchmark's own
    out["meta"]["command"] = (
        f"python bench/live_stop_share.py --share {args.share:g} --on {args.on}"
    )
    dest = BENCH / "results" / f"live_stop_share_{args.on}_{args.share:g}.json"
    dest.write_text(json.dumps(out, indent=1) + "\n")
    written.unlink()
    tmp.rmdir()


if __name__ == "__main__":
    main()
