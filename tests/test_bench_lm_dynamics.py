"""bench/lm_dynamics.py: its pure analysis parts on synthetic pgrpo logs (no model): recovery of
one kappa across lr, G and K, the refresh-interval verdict, the resume bookkeeping, and (d) the
probe-vs-fit comparison on synthetic probe files."""

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
    lo, hi = sgd["K_star_90"]  # from the fit's kappa interval: K* falls as kappa rises
    assert lo <= sgd["K_star"] and (hi is None or sgd["K_star"] <= hi)
    src = lm.Run(
        "x", np.arange(3.0), np.zeros(3), None, np.full(3, 0.05), 4, lm.B, 1, "sgd_momentum"
    )
    assert lm._k_star(src, 0.0) is None and lm._k_star(src, 5.04) == sgd_k_star(0.05 * 5.04)
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


def sgd_k_star(a: float) -> int | None:
    from pgrpo.dynamics.optimizers import OptimizerSettings, reduce_optimizer

    settings = OptimizerSettings(lr=1.0, kappa=a, beta1=0.9, closure=False)
    return reduce_optimizer("sgd_momentum", settings).K_star


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


# ---------------------------------------------------------------- (d) the curvature probe


def _probe_json(probe, runs_dir: Path, kappa: float, stderr: float) -> None:
    """A probe.json as lm_dynamics_probe.run_probe writes it (the probe's JSON: its `result`)."""
    d = runs_dir / probe.name
    d.mkdir(parents=True)
    res = {"kappa": kappa, "stderr": stderr, "samples": [kappa] * probe.pairs, "metrics": {}}
    doc = {"status": "ran", "rc": 0, "wall_s": 600.0, "cpu_s": 590.0, "load_average_after": 2.0,
           "date": "2026-12-01T23:50:00+00:00", "command": "python -m pgrpo.cli probe ...",
           "result": res}  # fmt: skip
    (d / "probe.json").write_text(json.dumps(doc))


@pytest.mark.parametrize(
    ("kappa", "stderr", "verdict"),
    [(5.0, 0.5, "consistent"), (5.5, 0.2, "consistent"), (20.0, 2.0, "disagree"),
     (1.0, 0.1, "disagree"), (5.0, 3.0, "not enough evidence (noise-dominated probe)"),
     (-2.0, 0.5, "disagree (negative curvature: no restoring force where probed)"),
     (-2.0, 1.5, "disagree"), (0.5, 3.0, "not enough evidence (noise-dominated probe)")],
)  # fmt: skip
def test_probe_vs_fit_verdict(kappa, stderr, verdict):
    fit = {"kappa": 5.04, "kappa_lo": 3.96, "kappa_hi": 6.07}
    out = lm.pr.probe_vs_fit(kappa, stderr, fit)
    assert out["verdict"] == verdict
    assert out["probe_90"] == pytest.approx(
        [kappa - 1.645 * stderr, kappa + 1.645 * stderr], abs=1e-3
    )
    assert out["ratio_probe_over_fit"] == pytest.approx(kappa / 5.04)
    zeros = lm.pr.probe_vs_fit(kappa, stderr, fit, (0.0, 0.0, 0.0, kappa))  # 3 of 4 pairs at 0
    assert zeros["verdict"].startswith("not enough evidence (most pairs degenerate")


def test_levels_recover_the_source_levels_at_a_given_kappa():
    cell = lm.Cell("adamw", lm.LR_MID["adamw"], steps=40)
    step = np.arange(1.0, 41.0)
    run = lm.Run(cell.name, step, step * 0, None, np.full(40, cell.lr), 4, lm.B, 1, "adam")
    y = lm.cd.predict_curve(run, 3000.0, 0.12, 0.85)
    run = lm.Run(cell.name, step, y, None, np.full(40, cell.lr), 4, lm.B, 1, "adam")
    assert lm.pr.levels(run, 3000.0) == pytest.approx((0.12, 0.85), abs=1e-9)


@pytest.mark.parametrize("factor", [1.0, 8.0])
def test_probe_kappa_transfer_and_threshold(tmp_path, factor):
    """The probe's kappa replaces the fitted one in the lr transfer: at the true kappa the
    held-out lr runs are predicted (R^2 >= 0.9); 8x off, they are not (< 0.5); K* from the probe's
    kappa is the reduction's at the cell's lr (SGD: a number; AdamW: none)."""
    cells = _sweep(tmp_path)
    probes = [lm.pr.Probe(lm.Cell("adamw", lm.LR_MID["adamw"]), "adam"),
              lm.pr.Probe(lm.Cell("sgd_momentum", lm.LR_MID["sgd_momentum"]), "sgd")]  # fmt: skip
    for p in probes:
        k = KAPPA[p.cell.optimizer] * factor
        _probe_json(p, tmp_path, k, 0.05 * k)
    full = lm.analyse(cells, tmp_path, probes)
    adam, sgd = (full["probe"][p.name] for p in probes)
    t = adam["transfer"]
    assert t["held_out_lr_runs"] == 2 and len(t["rows"]) == len(full["transfer"]["adamw"])
    assert {r["differs_in"] for r in t["rows"]} == {"lr", "G", "seed", "K"}
    if factor == 1.0:
        assert adam["verdict"] == "consistent" and sgd["verdict"] == "consistent"
        assert t["median_r2_held_out_lr_probe"] >= 0.9
    else:
        assert adam["verdict"] == "disagree"
        assert t["median_r2_held_out_lr_probe"] < 0.5 < t["median_r2_held_out_lr_fit"]
    assert adam["K_star_probe"] is None and adam["step_lrs"] == 10.0 and adam["at_step"] == 0
    a = lm.LR_MID["sgd_momentum"] * KAPPA["sgd_momentum"] * factor
    assert sgd["effective_a_probe"] == pytest.approx(a)
    assert sgd["K_star_probe"] == sgd_k_star(a)
    assert sgd["transfer"]["held_out_lr_runs"] == 0  # no other SGD lr in the sweep


def test_a_probe_with_no_restoring_force_predicts_nothing(tmp_path):
    cells = _sweep(tmp_path)
    probe = lm.pr.Probe(lm.Cell("adamw", lm.LR_MID["adamw"]), "adam")
    _probe_json(probe, tmp_path, -100.0, 20.0)
    (row,) = lm.analyse(cells, tmp_path, [probe])["probe"].values()
    assert row["verdict"].startswith("disagree (negative")
    assert "transfer" not in row and "K_star_probe" not in row


def test_probes_bookkeeping(tmp_path):
    names = [p.name for p in lm.PROBES]
    assert len(set(names)) == len(names) and not set(names) & {c.name for c in lm.CELLS}
    assert all(p.cell in lm.CELLS for p in lm.PROBES)  # each probes a cell the sweep runs
    for p in lm.PROBES:  # the preconditioner matches the cell's optimizer (units of its kappa)
        cmd = p.command(tmp_path)
        assert cmd[cmd.index("--preconditioner") + 1] == p.preconditioner
        assert float(cmd[cmd.index("--step-lrs") + 1]) == p.step_lrs
        cfg = p.train_command(tmp_path) or cmd  # the config trained, or the one probed
        assert f"optim.name={p.cell.optimizer}" in cfg and f"optim.lr={p.cell.lr:g}" in cfg
    _probe_json(lm.PROBES[0], tmp_path, 1.0, 0.1)
    assert lm.pr.run_probe(lm.PROBES[0], tmp_path) == {"status": "finished earlier"}
    narrow = lm.pr.Probe(lm.PROBES[0].cell, "adam", step_lrs=1.0)
    assert narrow.name == lm.PROBES[0].name + "_e1"  # the default step (10 lr) has no suffix
    later = lm.pr.Probe(lm.PROBES[0].cell, "adam", at_step=10)  # a checkpoint inside the run
    train = later.train_command(tmp_path)
    assert later.name.endswith("_at10") and lm.PROBES[0].train_command(tmp_path) is None
    assert "run.steps=10" in train and "run.steps=30" not in train and "run.seed=0" in train
    assert f"run.output_dir={tmp_path / later.name}" in train and "run.name=train" in train
    probe = later.command(tmp_path)
    assert probe[probe.index("--run") + 1] == str(tmp_path / later.name / "train")


def test_each_seed_of_the_whole_batch_grid_gets_its_own_source(tmp_path):
    """Seed 1's M = 1 K cells are predicted from seed 1's K = 1 run when it exists."""
    cells = _sweep(tmp_path)
    s_lr, rng = lm.LR_MID["sgd_momentum"], np.random.default_rng(6)
    extra = [lm.Cell("sgd_momentum", s_lr, K=k, steps=15, seed=s) for k in (8, 16) for s in (0, 1)]
    for c in extra:
        _write(c, tmp_path, rng)
    wb = lm.analyse(cells + extra, tmp_path)["refresh_whole_batch"]
    assert wb["sgd_momentum_seed1"]["source"] == "sgd_momentum_lr0.05_G4_K1_s0"  # no seed-1 K = 1
    own = lm.Cell("sgd_momentum", s_lr, seed=1, steps=60)
    _write(own, tmp_path, rng)
    wb = lm.analyse(cells + extra + [own], tmp_path)["refresh_whole_batch"]
    assert wb["sgd_momentum_seed1"]["source"] == own.name
    assert [g["run"] for g in wb["sgd_momentum_seed1"]["grid"]][0] == own.name
    assert wb["sgd_momentum"]["source"] == "sgd_momentum_lr0.05_G4_K1_s0"
