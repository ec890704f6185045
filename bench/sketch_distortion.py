"""What `pgrpo gradrank`'s CountSketch does to effective ranks (the review's construction,
/tmp/rev39_rank/sketch.py): N = 32 rows of P = 100,000 parameters with a known spectrum (rank 2:
3, 1; flat: 32 equal values; geometric 0.8^k), dense random right singular vectors (numpy seed 0),
sketched to D = 256 / 1024 / 4096 with 5 sketch seeds each. Per case and D: the exact ranks, the
sketched ones (mean and sd over seeds), and for the flat spectrum the prediction the command
prints (`sketch_distortion`: stable rank x 1 / (1 + sqrt(N/D))^2, participation ratio
x 1 / (1 + N/D)). Writes bench/results/sketch_distortion.json (about 10 s).

    python bench/sketch_distortion.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_results  # noqa: E402

from pgrpo.measure.gradrank import countsketch, sketch_distortion
from pgrpo.measure.rank import effective_ranks

N, P, DIMS, SEEDS = 32, 100_000, (256, 1024, 4096), 5
KEYS = ("rank/entropy", "rank/participation_ratio", "rank/stable", "rank/energy_90")


def matrix(svals: np.ndarray, rng: np.random.Generator) -> torch.Tensor:
    u, _ = np.linalg.qr(rng.standard_normal((N, N)))
    v, _ = np.linalg.qr(rng.standard_normal((P, N)))
    return torch.tensor(u @ np.diag(svals) @ v.T)


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    cases = {
        "rank2": np.r_[3.0, 1.0, np.zeros(N - 2)],
        "flat32": np.ones(N),
        "geometric0.8": 0.8 ** np.arange(N),
    }
    rows = []
    print("| spectrum | D | entropy | participation | stable | energy 90 | flat prediction |")
    print("|---|---|---|---|---|---|---|")
    for name, svals in cases.items():
        m = matrix(svals, rng)
        exact = effective_ranks(m).metrics
        print(f"| {name} | exact | " + " | ".join(f"{exact[k]:.2f}" for k in KEYS) + " | |")
        for dim in DIMS:
            got = {k: [] for k in KEYS}
            for seed in range(SEEDS):
                sk = torch.stack([countsketch([row], dim, seed) for row in m])
                metrics = effective_ranks(sk).metrics
                for k in KEYS:
                    got[k].append(metrics[k])
            row = {"spectrum": name, "D": dim, **{f"exact/{k}": exact[k] for k in KEYS}}
            for k in KEYS:
                row[f"mean/{k}"] = float(np.mean(got[k]))
                row[f"sd/{k}"] = float(np.std(got[k], ddof=1))
            factors = sketch_distortion(N, dim)
            flat = ""
            if name == "flat32":
                row["predicted/rank/stable"] = N * factors["sketch/stable_rank_factor"]
                row["predicted/rank/participation_ratio"] = (
                    N * factors["sketch/participation_factor"]
                )
                flat = (
                    f"stable {row['predicted/rank/stable']:.2f}, participation "
                    f"{row['predicted/rank/participation_ratio']:.2f}"
                )
            rows.append(row)
            cells = " | ".join(f"{row[f'mean/{k}']:.2f} +- {row[f'sd/{k}']:.2f}" for k in KEYS)
            print(f"| {name} | {dim} | {cells} | {flat} |")
    write_results(
        Path("bench/results/sketch_distortion.json"),
        "sketch_distortion.py",
        None,
        n_rows=N,
        n_params=P,
        seeds=SEEDS,
        rows=rows,
    )


if __name__ == "__main__":
    main()
