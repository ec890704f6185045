"""What the forecast's win bar measures: how often the mean after the cut lies above the last-10
mean, and what a forecaster that only calls that direction scores.

    python bench/win_direction.py [--rows PATH] [--out PATH]

Reads the per-run rows that bench/forecast_pooled.py stored (default: the held-back rounds 6-23
at cut 0.5, bench/results/forecast_holdout6_23.json; nothing is recomputed) and scores, as
forecast_pooled does (|predicted - observed mean after the cut| / std of the whole run; a win is
a strictly smaller error than the last-10 mean's):

- `consensus`: the default forecast as stored;
- `hair_above`: the last-10 mean plus 1e-6 of the run's std. It wins exactly where the mean after
  the cut lies above the last-10 mean, and its error is the last-10 mean's: it forecasts nothing;
- `floor_k`: max(consensus, last-10 mean + k std) for k in FLOOR_KS, the default kept from
  forecasting below the recent level. k was not chosen in advance: the grid is read on the same
  rows, so it says what the direction is worth on them, not what to ship.

Each round (folder) and the pool get the count of runs that rose after the cut with its exact
(Clopper-Pearson) 90% interval. Writes bench/results/win_direction.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from scipy.stats import binomtest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_results  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
ROWS = RESULTS / "forecast_holdout6_23.json"
HAIR = 1e-6
FLOOR_KS = (0.0, 0.05, 0.1, 0.2, 0.3)


def interval(k: int, n: int) -> list[float]:
    ci = binomtest(k, n).proportion_ci(confidence_level=0.9, method="exact")
    return [round(float(ci.low), 4), round(float(ci.high), 4)]


def score(pred: np.ndarray, y: np.ndarray, last10: np.ndarray, std: np.ndarray) -> dict:
    err, base = np.abs(pred - y) / std, np.abs(last10 - y) / std
    wins = int(np.sum(err < base))
    n = int(y.size)
    return {"median": round(float(np.median(err)), 4), "wins": wins, "runs": n,
            "win_share": round(wins / n, 4), "win_interval": interval(wins, n)}  # fmt: skip


def summarise(rows: list[dict]) -> dict:
    y, last10, c, std = (np.array([r[k] for r in rows], float)
                         for k in ("observed", "last10", "pred_consensus", "std"))  # fmt: skip
    std = np.where(std > 0, std, 1.0)
    rose = int(np.sum(y > last10))
    below = c < last10
    won = np.abs(c - y) / std < np.abs(last10 - y) / std
    right = np.sign(c - last10) == np.sign(y - last10)
    out = {"runs": len(rows), "rose": rose, "rose_interval": interval(rose, len(rows)),
           "last10_median": round(float(np.median(np.abs(last10 - y) / std)), 4),
           "consensus": score(c, y, last10, std),
           "consensus_below_last10": int(below.sum()),
           "rose_where_consensus_below": int(np.sum(below & (y > last10))),
           "consensus_direction_right": int(right.sum()),
           "consensus_right_but_lost": int(np.sum(right & ~won)),
           "consensus_wins_where_not_rose": int(np.sum(won & (y <= last10))),
           "hair_above": score(last10 + HAIR * std, y, last10, std)}  # fmt: skip
    for k in FLOOR_KS:
        out[f"floor_{k:g}"] = score(np.maximum(c, last10 + max(k, HAIR) * std), y, last10, std)
    return out


KEYS = ("folder", "observed", "last10", "pred_consensus", "std")


def read_rows(path: Path) -> list[dict]:
    """The cut-0.5 rows of a forecast_pooled results file; ValueError names what is wrong."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not a JSON file ({exc.__class__.__name__})") from None
    rows = doc.get("rows") if isinstance(doc, dict) else None
    if not isinstance(rows, list):
        raise ValueError(f"{path} holds no `rows` list")
    rows = [r for r in rows if isinstance(r, dict) and r.get("cut", 0.5) == 0.5]
    if not rows:
        raise ValueError(f"{path} holds no rows at cut 0.5")
    for i, r in enumerate(rows):
        bad = [k for k in KEYS[1:] if not _finite(r.get(k))]
        if not isinstance(r.get("folder"), str) or bad:
            what = ", ".join(bad) if bad else "folder"
            raise ValueError(f"{path}: row {i} ({r.get('run', '?')}) lacks a finite {what}")
    return rows


def _finite(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and bool(np.isfinite(v))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=Path, default=ROWS, help="a forecast_pooled results file")
    ap.add_argument("--out", type=Path, default=RESULTS / "win_direction.json")
    a = ap.parse_args(argv)
    try:
        rows = read_rows(a.rows)
    except ValueError as exc:
        print(f"error: {exc}; give --rows a results file of bench/forecast_pooled.py",
              file=sys.stderr)  # fmt: skip
        return 2
    by_round: dict[str, list[dict]] = {}
    for r in rows:
        by_round.setdefault(Path(r["folder"]).parent.parent.name or r["folder"], []).append(r)
    ordered = sorted(by_round.items(), key=lambda kv: _order(kv[0]))
    rounds = [{"round": k, **summarise(v)} for k, v in ordered]
    pool = summarise(rows)
    head = f"{'rows':<14}{'runs':>5}{'rose':>6}  {'90% interval':<15}"
    print(f"{head}{'consensus':>16}{'hair above':>16}")
    for name, s in [*((r["round"], r) for r in rounds), ("pooled", pool)]:
        lo, hi = s["rose_interval"]
        print(f"{name:<14}{s['runs']:>5}{s['rose']:>6}  {lo:.2f}-{hi:.2f}      "
              f"{s['consensus']['median']:>8.3f} {s['consensus']['wins']:>4}"
              f"{s['hair_above']['median']:>10.3f} {s['hair_above']['wins']:>4}")  # fmt: skip
    floors = [(k, pool[f"floor_{k:g}"]) for k in FLOOR_KS]
    print("pooled, floor at last-10 + k std (k read on these rows): "
          + ", ".join(f"k {k:g}: {f['median']:.3f} / {f['wins']}" for k, f in floors))  # fmt: skip
    payload = {"rows_file": str(a.rows), "rounds": rounds, "pooled": pool}
    write_results(a.out, "win_direction.py", argv, **payload)
    return 0


def _order(name: str) -> int:
    digits = "".join(ch for ch in name if ch.isdigit())
    return int(digits) if digits else -1


if __name__ == "__main__":
    raise SystemExit(main())
