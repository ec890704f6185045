"""bench/corpus_dynamics.py: the analysis functions on a seeded synthetic sweep (recovery) and on
the real tonywang1990 / ShibukiZero runs (read from ../shared; skipped when absent)."""

from __future__ import annotations

import csv
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location(
    "corpus_dynamics", ROOT / "bench" / "corpus_dynamics.py"
)
cd = importlib.util.module_from_spec(spec)
sys.modules["corpus_dynamics"] = cd  # dataclasses look their module up
spec.loader.exec_module(cd)

KAPPA = 2000.0


def _write_sweep(tmp: Path, seed: int = 0) -> list[str]:
    """Three runs of the constrained adam model at lr 5e-6, 1e-5, 2e-5 (one kappa), K = 1 and
    one at K = 3, with Gaussian batch noise, in the corpus' CSV + index.json layout."""
    rng = np.random.default_rng(seed)
    runs, names = [], []
    for lr, K in ((5e-6, 1), (1e-5, 1), (2e-5, 1), (1e-5, 3)):
        name = f"syn_lr{lr:g}_K{K}"
        step = np.arange(1.0, 81.0)
        run = cd.Run(name, step, step * 0, None, np.full(step.size, lr), 8, 8, K, "adam")
        y = cd.predict_curve(run, KAPPA, 0.1, 0.8) + rng.normal(0.0, 0.02, step.size)
        with open(tmp / f"{name}.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["step", "reward", "learning_rate"])
            w.writerows(zip(step, y, run.lr, strict=True))
        runs.append({"name": name, "csv": f"{name}.csv", "G": 8, "prompts_per_step": 8,
                     "learning_rate": lr, "num_iterations": K, "optimizer": "AdamW"})  # fmt: skip
        names.append(name)
    (tmp / "index.json").write_text(json.dumps({"runs": runs}))
    return names


def test_transfer_recovers_one_kappa_across_lr_and_K(tmp_path):
    names = _write_sweep(tmp_path)
    runs = cd.load_corpus(names, tmp_path)
    fits = {n: cd.fit_run_model(runs[n]) for n in names}
    for n in names:
        assert fits[n]["kappa"] == pytest.approx(KAPPA, rel=0.2)
        # predict_curve is the fit's own model: at the fitted values it gives the fit's R^2
        f = fits[n]
        own = cd.r2(runs[n].reward, cd.predict_curve(runs[n], f["kappa"], f["R_0"], f["R_inf"]))
        assert own == pytest.approx(f["r2_constrained"], abs=1e-6)
    rows = cd.transfer(runs, fits, names[:3])
    assert len(rows) == 6
    for r in rows:
        assert r["r2_prediction"] >= 0.9  # the model holds: held-out lr predicted
        assert r["r2_timescale_only"] >= r["r2_prediction"] - 1e-9  # least-squares levels
    inner = cd.inner_updates(runs, fits, names[1], names[3])
    assert (
        inner["r2_prediction"] >= 0.9 and inner["r2_prediction"] > inner["r2_prediction_K_ignored"]
    )
    assert inner["K_star"] is None and inner["heavy_ball_K_star"] is not None


@pytest.mark.skipif(not (cd.CURVES / "index.json").exists(), reason="../shared corpus absent")
def test_on_the_real_lr_sweeps_the_statistics_are_consistent():
    names = cd.LR_SWEEPS["ShibukiZero lr"]
    runs = cd.load_corpus(names)
    assert all(r.optimizer == "adam" and r.K == 1 for r in runs.values())  # not named: AdamW
    fits = {n: cd.fit_run_model(runs[n]) for n in names}
    for r in cd.transfer(runs, fits, names):
        assert r["r2_timescale_only"] >= r["r2_prediction"] - 1e-9
        assert r["r2_own_fit"] >= r["r2_timescale_only"] - 0.02  # the target's best fit
    e16 = cd.load_corpus([cd.SHIBUKI + "offpolicy_e16_tb256"])
    assert next(iter(e16.values())).K == 16
