"""The `wasted_compute` replay's search against the replay that assesses every poll (session 38).

    python bench/replay_search.py [--nulls-per-run 4]

`pgrpo.diagnose.costs.plateau_step` looks for the first run of `plateau_patience` plateau
verdicts among its polls (`costs.first_run`) instead of assessing every poll in order with the
history it carries; both must give the same step. Here both run on every log of the shared
corpus (index.json's G and prompts per step, as `bench/real_runs.py` reads them) and on the
null curves `bench/real_runs.py` uses (`--nulls-per-run` per run plus 40 binomial curves), at
the default `max_points` and at 50 (long-log binning). Prints the counts and the time of each,
and writes bench/results/replay_search.json. The reference replay passes each poll its prefix
without the whole log's NaN tail, as the search does (a separate fix, same commit).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from _results import write_results  # noqa: E402
from corpus_entry import with_metadata  # noqa: E402
from null_curves import null_suite  # noqa: E402

from pgrpo.diagnose.costs import DECISION_COLUMNS, plateau_step, replay_prefixes  # noqa: E402
from pgrpo.diagnose.live import LiveConfig, assess_live  # noqa: E402
from pgrpo.logs import read_log  # noqa: E402

RESULT = ROOT / "bench" / "results" / "replay_search.json"
CURVES = ROOT.parent / "shared" / "data" / "curves"


def every_poll(log, max_points: int | None) -> float | None:  # noqa: ANN001
    """The replay before session 38: every poll assessed in order, with its history."""
    cfg = LiveConfig(stop_on=("plateau",), plateau_confirmed=False)
    if max_points is not None:
        cfg = replace(cfg, max_points=max_points)
    cols = {c: v for c, v in log.columns.items() if c in DECISION_COLUMNS}
    metrics = {k: v for k, v in log.metrics.items() if not k.startswith("nonfinite_")}
    history: tuple = ()
    for k in replay_prefixes(len(log), cfg.min_points, cfg.max_points):
        sub = replace(log, step=log.step[:k], reward=log.reward[:k],
                      columns={c: v[:k] for c, v in cols.items()},
                      metrics=log.metrics if k == len(log) else metrics)  # fmt: skip
        status = assess_live(sub, cfg, history, decision_only=True)
        history = (*history, status)
        if status.stop:
            return float(log.step[k - 1])
    return None


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nulls-per-run", type=int, default=4)
    args = ap.parse_args(argv)
    runs = json.loads((CURVES / "index.json").read_text())["runs"]
    logs = [(m["name"], with_metadata(read_log(CURVES / m["csv"]), m)) for m in runs]
    with tempfile.TemporaryDirectory() as tmp:
        for meta, path, _, _ in null_suite(runs, args.nulls_per_run, Path(tmp), CURVES):
            logs.append((path.stem, with_metadata(read_log(path), meta)))
    rows, seconds = [], {"every_poll": 0.0, "search": 0.0}
    for name, log in logs:
        for max_points in (None, 50):
            t0 = time.perf_counter()
            old = every_poll(log, max_points)
            t1 = time.perf_counter()
            new = plateau_step(log, max_points)
            t2 = time.perf_counter()
            seconds["every_poll"] += t1 - t0
            seconds["search"] += t2 - t1
            rows.append({"log": name, "max_points": max_points, "every_poll": old, "search": new})
    same = sum(r["every_poll"] == r["search"] for r in rows)
    fired = sum(r["every_poll"] is not None for r in rows)
    print(f"{len(logs)} logs, {len(rows)} replays: the same step on {same}/{len(rows)} "
          f"({fired} fire); every poll {seconds['every_poll']:.1f} s, the search "
          f"{seconds['search']:.1f} s (null curves cached by whichever ran first)")  # fmt: skip
    return write_results(RESULT, "replay_search.py", argv, logs=len(logs), replays=len(rows),
                         same=same, fired=fired, seconds=seconds,
                         differ=[r for r in rows if r["every_poll"] != r["search"]])  # fmt: skip


if __name__ == "__main__":
    main()
