"""bench/lm_dynamics.py: its pure analysis parts on synthetic pgrpo logs (no model): recovery of
one kappa across lr, G and K, the refresh-interval verdict, and the resume bookkeeping."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("lm_dynamics", ROOT / "bench" / "lm_dynamics.py")
lm = importlib.util.module_from_spec(spec)
sys.modules["lm_dynamics"] = lm
spec.loader.exec_module(lm)

KAPPA = {"adamw": 6000.0, "sgd_momentum": 2.0}  # a = lr kappa = 0.03 and 0.1 at the middle lr


def _write(cell, runs_dir: Path, rng, *, blow_up_at: int | None = None, noise: float = 0.02):
    """A cell's metrics.jsonl drawn from the constrained model with Gaussian batch noise;
    blow_up_at: grad_norm is non-finite (null, as the trainer writes it) from that step on."""
    step = np.arange(1.0, cell.steps + 1)
    run = lm.Run(cell.name, step, step * 0, None, np.full(step.size, cell.lr), cell.G, lm.B,
                 cell.K, lm.run_optimizer(cell.optimizer))  # fmt: skip
    y = lm.cd.predict_curve(run, KAPPA[cell.optimizer], 0.1, 0.8)
    y = y + rng.normal(0.0, noise, step.size)
    d = runs_dir / cell.name
    d.mkdir(parents=True)
    with open(d / "metrics.jsonl", "w") as f:
        for s, r in zip(step, y, strict=True):
            gn = None if blow_up_at is not None and s >= blow_up_at else 1.0
            row = {"step": int(s), "optimizer_step": int(s) * cell.K, "reward": float(r),
                   "reward_std": 0.4, "learning_rate": cell.lr, "grad_norm": gn, "loss": 0.0,
                   "group_size": cell.G, "batch_prompts": lm.B, "refresh_interval": cell.K,
                   "beta1": 0.9}  # fmt: skip
            f.write(json.dumps(row) + "\n")


def _sweep(tmp: Path, unstable_sgd_K: int | None = None) -> list:
    rng = np.random.default_rng(0)
    mid = lm.LR_MID["adamw"]
    cells = [lm.Cell("adamw", lr, steps=60) for lr in (mid, 2 * mid, mid / 2)]
    cells += [lm.Cell("adamw", mid, G=8, steps=60), lm.Cell("adamw", mid, seed=1, steps=60)]
    cells += [lm.Cell("adamw", mid, K=4, minibatches=4, steps=15)]
    s_lr = lm.LR_MID["sgd_momentum"]
    cells += [lm.Cell("sgd_momentum", s_lr, steps=60)]
    cells += [lm.Cell("sgd_momentum", s_lr, K=k, minibatches=k, steps=15) for k in (2, 4, 8)]
    cells += [lm.Cell("sgd_momentum", s_lr, K=2, steps=15)]  # a control: M = 1, not in the grid
    for c in cells:
        bad = c.optimizer == "sgd_momentum" and unstable_sgd_K is not None and c.K >= unstable_sgd_K
        _write(c, tmp, rng, blow_up_at=8 if bad else None)
    return cells


def test_transfer_recovers_one_kappa_across_lr_G_and_K(tmp_path):
    cells = _sweep(tmp_path)
    res = lm.analyse(cells, tmp_path)
    assert res["finished"] == [c.name for c in cells]
    for c in cells:
        if c.K == 1:
            assert res["fits"][c.name]["kappa"] == pytest.approx(KAPPA[c.optimizer], rel=0.3)
    rows = {r["target"]: r for r in res["transfer"]["adamw"]}
    assert {r["differs_in"] for r in rows.values()} == {"lr", "G", "seed", "K"}
    summary = res["transfer_summary"]["adamw"]
    assert summary["held_out_lr_runs"] == 2
    assert summary["median_r2_held_out_lr"] >= 0.9  # the model holds: held-out lr predicted
    assert res["lr_order"]["adamw"]["exponent"] == pytest.approx(1.0, abs=0.15)  # a = lr kappa
    # G-invariant synthetic data: the joint fit is not rejected
    assert res["g_invariance"]["adamw"]["joint"]["lr_p"] > 0.01
    late = res["g_invariance"]["adamw"]["late_variance"]
    assert set(late) == {c.name for c in cells[:5] if c.lr == lm.LR_MID["adamw"]}
    for v in late.values():  # noise of sd 0.02 plus what is left of the (underdamped) rise
        assert 0.2 * 0.02**2 < v["reward_var"] < 0.01
        assert v["sampling_var"] == pytest.approx(0.4**2 / (lm.B * v["G"]))


def test_transfer_fails_when_kappa_is_not_shared(tmp_path):
    """Cannot pass by construction: a target drawn at 4x the kappa is predicted badly."""
    rng = np.random.default_rng(1)
    mid = lm.LR_MID["adamw"]
    src, tgt = lm.Cell("adamw", mid, steps=60), lm.Cell("adamw", 2 * mid, steps=60)
    _write(src, tmp_path, rng, noise=0.01)
    KAPPA["adamw"] *= 0.125  # the target learns 4x slower than the model predicts
    try:
        _write(tgt, tmp_path, rng, noise=0.01)
    finally:
        KAPPA["adamw"] /= 0.125
    res = lm.analyse([src, tgt], tmp_path)
    (row,) = res["transfer"]["adamw"]
    assert row["r2_prediction"] < 0.5 < row["r2_own_fit"]


@pytest.mark.parametrize("unstable_K", [None, 4])
def test_refresh_onset_against_the_heavy_ball_threshold(tmp_path, unstable_K):
    cells = _sweep(tmp_path, unstable_sgd_K=unstable_K)
    res = lm.analyse(cells, tmp_path)
    sgd = res["refresh"]["sgd_momentum"]
    assert [g["K"] for g in sgd["grid"]] == [1, 2, 4, 8]
    assert list(sgd["controls"]) == ["sgd_momentum_lr0.05_G4_K2_s0"]
    assert sgd["K_star"] is not None and sgd["K_star"] > 8  # a = 0.1: heavy-ball K* = 38
    if unstable_K is None:
        assert sgd["first_unstable_K"] is None
        assert sgd["onset"] == "no instability up to K = 8"
        assert sgd["within_one_grid_step"] is True
    else:
        assert sgd["first_unstable_K"] == 4
        assert sgd["onset"] == "first unstable K between 2 and 4"
        assert sgd["within_one_grid_step"] is False  # K* = 38 is far above the grid
    adam = res["refresh"]["adamw"]
    assert adam["K_star"] is None and "no divergence threshold" in adam["K_statement"]
    assert [g["K"] for g in adam["grid"]] == [1, 4]


def test_the_whole_batch_grid_is_tested_apart_from_the_minibatch_grid(tmp_path):
    """M = 1 cells (K passes over the same rollouts) get their own onset; an instability there
    does not leak into the M = K grid, and the M = K grid's cells do not enter the M = 1 one."""
    cells = _sweep(tmp_path)
    s_lr, rng = lm.LR_MID["sgd_momentum"], np.random.default_rng(5)
    extra = [lm.Cell("sgd_momentum", s_lr, K=k, steps=15) for k in (4, 8)]
    for c in extra:
        _write(c, tmp_path, rng, blow_up_at=8 if c.K == 8 else None)
    res = lm.analyse(cells + extra, tmp_path)
    whole = res["refresh_whole_batch"]["sgd_momentum"]
    assert [g["K"] for g in whole["grid"]] == [1, 2, 4, 8]
    assert all(g["run"].endswith(f"_K{g['K']}_s0") for g in whole["grid"])  # no M in the name
    assert whole["first_unstable_K"] == 8 and whole["onset"] == "first unstable K between 4 and 8"
    minibatch = res["refresh"]["sgd_momentum"]
    assert minibatch["first_unstable_K"] is None
    assert [g["K"] for g in minibatch["grid"]] == [1, 2, 4, 8]
    assert "adamw" not in res["refresh_whole_batch"]  # no M = 1 AdamW K cells: no test


@pytest.mark.parametrize(
    ("k_star", "first", "expected"),
    [(None, None, True), (None, 4, False), (40, None, True), (6, None, False), (3, 4, True),
     (8, 4, True), (16, 4, False), (3, 8, True), (2, 8, False), (1, 1, True)],
)  # fmt: skip
def test_within_one_grid_step(k_star, first, expected):
    assert lm._within_one_step(k_star, first, [1, 2, 4, 8]) is expected


def test_cells_and_bookkeeping(tmp_path):
    names = [c.name for c in lm.CELLS]
    assert len(set(names)) == len(names)
    assert lm.CELLS[0] == lm.Cell("adamw", lm.LR_MID["adamw"])  # the source runs first
    sgd = lm.Cell("sgd_momentum", 0.1).overrides(tmp_path)
    assert "optim.max_grad_norm=0" in sgd and "optim.name=sgd_momentum" in sgd
    assert "optim.max_grad_norm=0" not in lm.Cell("adamw", 1e-5).overrides(tmp_path)
    assert [lm.k_steps(k) for k in (1, 2, 4, 8)] == [30, 15, 10, 10]
    # a finished folder is skipped without training; a torn last line is not a step
    cell = lm.Cell("adamw", 1e-5, steps=3)
    d = tmp_path / cell.name
    d.mkdir()
    lines = [json.dumps({"step": s, "reward": 0.5}) for s in (1, 2, 3)]
    (d / "metrics.jsonl").write_text("\n".join(lines[:2]) + '\n{"step": 3, "rew')
    assert lm.logged_steps(d) == 2
    (d / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    assert lm.run_cell(cell, tmp_path) == {"status": "finished earlier"}


def test_late_variance_uses_the_tail():
    step = np.arange(1.0, 31.0)
    y = np.r_[np.zeros(20), np.array([0.0, 1.0] * 5)]
    run = lm.Run("x", step, y, np.full(30, 0.5), np.full(30, 1e-5), 4, lm.B, 1, "adam")
    v = lm.late_variance(run)
    assert v["points"] == 10
    assert v["reward_var"] == pytest.approx(np.var([0.0, 1.0] * 5, ddof=1))
    assert v["sampling_var"] == pytest.approx(0.25 / 32)
    assert math.isfinite(v["mean"])


@pytest.mark.parametrize(
    ("reward", "collapsed", "dead_from", "zeros"),
    [
        ([0.06, 0.53, 0.06, 0.0, 0.0, 0.0, 0.0], True, 3, 4),  # rise, then all-fail to the end
        ([0.06, 0.53, 0.0, 0.0, 0.4, 0.5, 0.6], False, None, 2),  # recovers: not absorbing
        ([0.06, 0.5, 0.7, 0.0, 0.0], False, None, 2),  # two dead steps: below dead_steps
        ([0.0, 0.0, 0.0, 0.0, 0.1], False, None, 0),  # never rose
        ([0.1, 0.2, 0.0, 0.0, 0.0], False, None, 0),  # zeros, but it never reached 0.3
    ],
)
def test_collapse_is_an_absorbing_zero_after_a_rise(reward, collapsed, dead_from, zeros):
    out = lm.collapse(np.array(reward))
    assert out["collapsed"] is collapsed
    assert out["dead_from_index"] == dead_from
    assert out["zero_steps_after_rise"] == zeros
