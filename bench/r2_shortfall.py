"""Why the fit's R^2 falls short of the noise ceiling on research-scale learning runs: the model's
shape, or noise the ceiling does not count.

    python bench/r2_shortfall.py [DIR ...] [--out PATH]

For each run of each corpus folder (index.json + CSVs; default ../shared/data/curves) with at
least RESEARCH_ROLLOUTS rollouts per step whose entry allows `learning` (bench/real_runs.py's
selection), per logged point:

- `model`: R^2 of `fit_log`'s fit (the ROM, as bench/real_runs.py reports it);
- `smooth`: R^2 of the best curve that knows nothing of the point it predicts: a centred moving
  mean without the point itself (leave-one-out), its window chosen by that leave-one-out error
  (odd windows 3 .. n/3). Not a model: a reference for what a smooth curve can reach here;
- `ceiling`: the noise ceiling (`fitquality.noise_ceiling`: 1 - sigma^2 / var, sigma^2 from first
  differences, white noise assumed).

Leaving the point out costs the smooth curve its own estimation noise: on white noise about a
flat mean, (1 - ceiling) / (window - 1) of R^2 (`smooth_penalty`); `smooth_short_net` is its
shortfall less that. If the smooth curve gets to the ceiling (net) and the model does not, the
model misses a shape the data show; if the smooth curve falls as short as the model, no smooth
curve does better on that log, and the ceiling (white noise assumed) asks for more than the
data give. `noise_rho`: the noise's lag-1 autocorrelation read off the first differences (1 + 2
corr(dy_t, dy_t-1), which is 0 for white noise); with it, var(dy) / 2 = sigma^2 (1 - rho) and
the ceiling reads about rho (1 - ceiling) too high (`ceiling_over`). Writes
bench/results/r2_shortfall.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from pgrpo.dynamics.fitquality import noise_ceiling
from pgrpo.dynamics.logfit import fit_log
from pgrpo.logs import read_log

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_results  # noqa: E402
from corpus_entry import RESEARCH_ROLLOUTS, n_rollouts, references, with_metadata  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CURVES = ROOT.parent / "shared" / "data" / "curves"
OUT = ROOT / "bench" / "results" / "r2_shortfall.json"


def loo_smooth(y: np.ndarray) -> tuple[np.ndarray, int]:
    """Leave-one-out centred moving mean of y [n] at the odd window (3 .. n/3) that predicts
    the points best: ([n] predictions, window). Near the ends the window is cut to the points
    there are."""
    n = y.size
    c = np.concatenate([[0.0], np.cumsum(y)])
    best = (np.inf, None, 3)
    for w in range(3, max(4, n // 3 + 1), 2):
        h = w // 2
        lo, hi = np.maximum(np.arange(n) - h, 0), np.minimum(np.arange(n) + h + 1, n)
        pred = (c[hi] - c[lo] - y) / (hi - lo - 1)
        sse = float(((y - pred) ** 2).sum())
        if sse < best[0]:
            best = (sse, pred, w)
    return best[1], best[2]


def r2(y: np.ndarray, fitted: np.ndarray) -> float:
    return 1.0 - float(((y - fitted) ** 2).sum()) / float(((y - y.mean()) ** 2).sum())


def rows_of(folder: Path) -> list[dict]:
    rows = []
    for meta in json.loads((folder / "index.json").read_text())["runs"]:
        accept, _ = references(meta)
        if (n_rollouts(meta) or 0) < RESEARCH_ROLLOUTS or "learning" not in (accept or set()):
            continue
        log = with_metadata(read_log(folder / meta["csv"]), meta)
        y = np.asarray(log.reward, dtype=float)
        fit = fit_log(log)
        smooth, window = loo_smooth(y)
        row = {
            "folder": str(folder),
            "run": meta["name"],
            "n": int(y.size),
            "model": float(fit.rom.r2),
            "smooth": r2(y, smooth),
            "smooth_window": window,
            "ceiling": noise_ceiling(y),
        }
        row["model_short"] = row["ceiling"] - row["model"]
        row["smooth_short"] = row["ceiling"] - row["smooth"]
        row["smooth_penalty"] = (1.0 - row["ceiling"]) / (window - 1)
        row["smooth_short_net"] = row["smooth_short"] - row["smooth_penalty"]
        d = np.diff(y)
        row["noise_rho"] = 1.0 + 2.0 * float(np.corrcoef(d[1:], d[:-1])[0, 1])
        row["ceiling_over"] = row["noise_rho"] * (1.0 - row["ceiling"])
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="*", type=Path, default=[CURVES])
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    rows = [r for folder in args.folders for r in rows_of(folder)]
    print("| run | n | model R^2 | smooth R^2 (window) | ceiling | model short | smooth short, "
          "net of its penalty | noise rho | ceiling over |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['run']} | {r['n']} | {r['model']:.3f} | {r['smooth']:.3f} "
              f"({r['smooth_window']}) | {r['ceiling']:.3f} | {r['model_short']:+.3f} | "
              f"{r['smooth_short']:+.3f}, {r['smooth_short_net']:+.3f} | {r['noise_rho']:+.3f} | "
              f"{r['ceiling_over']:+.3f} |")  # fmt: skip
    write_results(args.out, "r2_shortfall.py", argv, rows=rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
