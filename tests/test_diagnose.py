"""Diagnosis rules on runs deliberately driven into each failure mode (seeded bandit runs)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pgrpo.bandit.scenarios import SCENARIOS, build, write_run
from pgrpo.diagnose import MODES, diagnose
from pgrpo.diagnose.calibration import signals_of


@pytest.mark.parametrize("name", SCENARIOS.names())
def test_every_mode_on_every_failure_run(name):
    """Held-out seeds (the thresholds were tuned on seeds 0-4): the expected modes fire, no
    other mode fires except the entry's genuinely-present `allowed` ones."""
    entry = SCENARIOS.get(name)
    for seed in (11, 12):
        d = diagnose(signals_of(entry.builder(seed)))
        got = {v.name for v in d.modes if v.detected and v.name in MODES}
        assert entry.expected <= got, (name, seed, got)
        assert got <= entry.expected | entry.allowed, (name, seed, got)
        # healthy when nothing fired, unless fewer than two modes can be judged: the recursion
        # runs log a continuous reward only (not a mean of 0/1 rewards), so "not enough evidence"
        assert d.healthy.detected == (not got) or (not got and not d.healthy.judged)


def test_verdicts_carry_evidence_actions_and_missing_signals():
    run = build("hard_prompts_small_group", 0)
    d = diagnose(signals_of(run))
    deg = d.mode("advantage_degeneracy")
    assert deg.detected and deg.confidence > 0.8
    assert deg.evidence["degeneracy"] > deg.evidence["iid_prediction"]  # Jensen
    assert deg.evidence["all_fail"] > deg.evidence["all_pass"]
    assert "sign" in deg.action and "group_size" in deg.action
    # the bandit has no clip ratios and no per-function rewards: the rules say so
    assert "clip_ratio/region_mean" in d.mode("policy_concentration").missing
    assert any("rewards/" in m for m in d.mode("reward_hacking").missing)
    # only a reward column: hacking cannot be judged and says which signals it needs
    only = diagnose({"reward": run.columns["reward"]})
    hack = only.mode("reward_hacking")
    assert not hack.detected and hack.confidence == 0.0 and len(hack.missing) == 3
    assert only.mode("policy_concentration").confidence == 0.0
    assert not only.mode("advantage_degeneracy").judged  # no group_size, no degeneracy column


def test_degeneracy_from_reward_and_group_size_only_is_a_lower_bound():
    """The i.i.d. bound p^G + (1-p)^G holds for means of 0/1 rewards: it needs N = B x G to
    tell one (values on the 1/N grid) from a [0, 1] score (changed: it used to assume it)."""
    steps = 60
    cols = {
        "reward": np.full(steps, 0.05),
        "group_size": np.full(steps, 4.0),
        "batch_prompts": np.full(steps, 5.0),
    }
    v = diagnose(cols).mode("advantage_degeneracy")
    assert v.detected
    assert v.evidence["degeneracy_lower_bound"] == pytest.approx(0.05**4 + 0.95**4)
    del cols["batch_prompts"]
    v = diagnose(cols).mode("advantage_degeneracy")
    assert not v.judged and any("batch_prompts" in m for m in v.missing)


def test_lower_bounds_below_the_threshold_rule_nothing_out():
    """Zero-spread steps (reward_std == 0) and the i.i.d. prediction are lower bounds on the
    share of groups without spread: above the threshold they show degeneracy, below it they
    cannot rule it out ("no" at confidence up to 1.00 before; review, 2026-12-04). A logged
    frac_reward_zero_std is the share itself and is still judged either way."""
    rng = np.random.default_rng(0)
    steps = 80
    reward = rng.binomial(32, 0.5, steps) / 32
    std = np.full(steps, 0.5)
    std[:4] = 0.0  # 5% of steps without spread: a lower bound far below 50%
    cols = {"reward": reward, "reward_std": std, "group_size": np.full(steps, 8.0)}
    v = diagnose(cols).mode("advantage_degeneracy")
    assert not v.detected and not v.judged and "cannot rule degeneracy out" in v.evidence["reason"]
    assert "below 50%" in v.evidence["reason"] and "jensen_gap" not in v.evidence
    assert sum(m.startswith("frac_reward_zero_std") for m in v.missing) == 1
    std[:] = 0.0  # every step without spread: the bound alone shows it
    assert diagnose(cols).mode("advantage_degeneracy").detected
    logged = {**cols, "frac_reward_zero_std": np.full(steps, 0.05)}  # the share itself, low
    v = diagnose(logged).mode("advantage_degeneracy")
    assert not v.detected and v.judged and v.confidence > 0.9
    # the i.i.d. bound alone (a known mean of 0/1 rewards, N = 20): 0.52, above 50% but not
    # significantly; its "missing" named frac_reward_zero_std twice
    iid = {"reward": np.where(np.arange(60) % 2 == 0, 0.10, 0.20),
           "group_size": np.full(60, 4.0), "batch_prompts": np.full(60, 5.0)}  # fmt: skip
    v = diagnose(iid).mode("advantage_degeneracy")
    assert not v.judged and v.evidence["iid_prediction"] > 0.5
    assert "not significantly above 50%" in v.evidence["reason"]
    assert sum("frac_reward_zero_std" in m for m in v.missing) == 1


def test_nan_and_inf_are_instability():
    r = np.linspace(0.2, 0.6, 50)
    r[40:] = np.nan
    v = diagnose({"reward": r, "entropy": np.linspace(1.0, 0.9, 50)}).mode("dynamical_instability")
    assert v.detected and v.evidence["nonfinite_reward_step"] == 40
    g = np.ones(50)
    g[30] = np.inf
    v = diagnose({"reward": np.linspace(0.2, 0.6, 50), "grad_norm": g})
    assert v.mode("dynamical_instability").detected


def test_format_only_gains_are_hacking_trl_names():
    """TRL logs one column per reward function: gains only in the format reward are hacking."""
    n = 80
    t = np.arange(n)
    cols = {
        "reward": 0.2 + 0.6 * (1 - np.exp(-t / 15)),
        "rewards/format_reward/mean": 0.6 * (1 - np.exp(-t / 15)),
        "rewards/accuracy_reward/mean": np.full(n, 0.2),
    }
    v = diagnose(cols).mode("reward_hacking")
    assert v.detected and v.evidence["format_gain_share"] == pytest.approx(1.0)
    cols["rewards/accuracy_reward/mean"] = 0.2 + 0.3 * (1 - np.exp(-t / 15))
    assert not diagnose(cols).mode("reward_hacking").detected


def test_verl_names_are_read():
    run = build("high_lr_no_kl", 0)
    cols = {"critic/score/mean": run.columns["reward"], "actor/entropy": run.columns["entropy"]}
    v = diagnose(cols).mode("policy_concentration")
    assert v.detected and v.evidence["entropy_ratio"] < 0.3


def test_eval_divergence_drives_hacking_and_eval_log_file(tmp_path):
    run = build("reward_hacking", 3)
    out = write_run(run, tmp_path / "run")
    d = diagnose(signals_of(run))
    v = d.mode("reward_hacking")
    assert v.detected and v.evidence["train_gain"] > 0.2 and v.evidence["eval_gain"] < 0.1
    # the same through the eval.json file (the `pgrpo eval` format)
    cols = {k: val for k, val in run.columns.items()}
    d2 = diagnose(cols, eval_log=out / "eval.json")
    assert d2.mode("reward_hacking").detected
    assert json.loads(json.dumps(d2.to_dict()))["modes"][0]["name"] == "reward_hacking"


def test_bad_inputs_fail_clearly(tmp_path):
    with pytest.raises(ValueError, match="align columns"):
        diagnose({"reward": np.ones(5), "step": np.arange(4)})
    bad = tmp_path / "e.json"
    bad.write_text(json.dumps({"results": [{"accuracy": 0.5}]}))
    with pytest.raises(ValueError, match="--step"):
        diagnose({"reward": np.ones(20)}, eval_log=bad)
    with pytest.raises(FileNotFoundError, match="pgrpo eval"):
        diagnose({"reward": np.ones(20)}, eval_log=tmp_path / "missing.json")


def test_to_dict_is_json_clean():
    d = diagnose({"reward": np.r_[np.linspace(0.1, 0.5, 30), [math.inf]]})
    text = json.dumps(d.to_dict(), allow_nan=False)
    assert [m["name"] for m in json.loads(text)["modes"]] == [*MODES, "healthy"]


# ---------------------------------------------------------------------------------------------
# through files: pgrpo metrics.jsonl, TRL trainer_state.json, the CLI
# ---------------------------------------------------------------------------------------------


def test_every_scenario_through_pgrpo_files(tmp_path):
    from pgrpo.logs import read_log

    for name in SCENARIOS:
        entry = SCENARIOS.get(name)
        out = write_run(build(name, 0), tmp_path / name)
        ev = out / "eval.json"
        d = diagnose(read_log(out), eval_log=ev if ev.exists() else None)
        got = {v.name for v in d.modes if v.detected and v.name in MODES}
        assert entry.expected <= got <= entry.expected | entry.allowed, (name, got)
    # the recursion runs carry kappa in config.yaml: the margin K / K* is judged exactly
    d = diagnose(read_log(tmp_path / "refresh_above_threshold"))
    ev = d.mode("dynamical_instability").evidence
    assert ev["stability_margin"] > 1.0 and ev["refresh_interval"] == 250
    d = diagnose(read_log(tmp_path / "healthy_lag_below_threshold"))
    assert d.mode("dynamical_instability").evidence["stability_margin"] < 1.0
    # NaN rewards are dropped by the reader and still reported
    d = diagnose(read_log(tmp_path / "stale_kl_divergence"))
    assert d.mode("dynamical_instability").evidence["nonfinite_reward_rows"] > 0


def test_trl_trainer_state(tmp_path):
    from pgrpo.logs import read_log

    run = build("high_lr_no_kl", 1)
    history = [
        {
            "step": int(s) + 1,
            "reward": float(r),
            "entropy": float(e),
            "num_generations": 8,
            "batch_prompts": 64,
            "learning_rate": 8.0,
        }
        for s, r, e in zip(
            run.columns["step"], run.columns["reward"], run.columns["entropy"], strict=True
        )
    ]
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": history, "global_step": len(history)}))
    d = diagnose(read_log(path))
    assert d.mode("policy_concentration").detected
    assert not d.healthy.detected
    assert d.mode("advantage_degeneracy").evidence.get("iid_prediction") is not None


def test_cli_diagnose_json(tmp_path):
    from typer.testing import CliRunner

    from pgrpo.cli import _load_commands, app

    _load_commands()
    out = write_run(build("hard_prompts_small_group", 0), tmp_path / "run")
    res = CliRunner().invoke(app, ["diagnose", str(out), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    modes = {m["name"]: m for m in doc["modes"]}
    assert list(modes) == [*MODES, "healthy"]
    assert modes["advantage_degeneracy"]["detected"] is True
    assert modes["advantage_degeneracy"]["evidence"]["degeneracy"] > 0.5
    assert modes["advantage_degeneracy"]["action"]
    assert modes["healthy"]["detected"] is False
    table = CliRunner().invoke(app, ["diagnose", str(out)])
    assert table.exit_code == 0 and "advantage_degeneracy" in table.stdout
    missing = CliRunner().invoke(app, ["diagnose", str(tmp_path / "nope")])
    assert missing.exit_code != 0 and "not found" in missing.output


def test_verl_jsonl_and_wandb_csv(tmp_path):
    """The same degeneracy run written as a verl JSONL log and a W&B CSV export."""
    from pgrpo.logs import read_log

    run = build("hard_prompts_small_group", 0)
    c = run.columns
    verl = tmp_path / "verl.jsonl"
    with verl.open("w") as fh:
        for i in range(len(c["step"])):
            data = {
                "critic/score/mean": c["reward"][i],
                "actor/entropy": c["entropy"][i],
                "actor/kl_loss": c["kl"][i],
            }
            fh.write(json.dumps({"step": i + 1, "data": data}) + "\n")
    (tmp_path / "config.yaml").write_text(
        "actor_rollout_ref:\n  rollout:\n    n: 2\n  actor:\n    optim:\n      lr: 0.3\n"
        "data:\n  train_batch_size: 64\n"
    )
    d = diagnose(read_log(verl))
    deg = d.mode("advantage_degeneracy")
    assert deg.detected and "degeneracy_lower_bound" in deg.evidence  # from reward and G = 2
    assert d.mode("policy_concentration").judged
    wandb = tmp_path / "export.csv"
    lines = ["_step,train/reward,train/frac_reward_zero_std,train/entropy"]
    lines += [
        f"{i},{c['reward'][i]},{c['frac_reward_zero_std'][i]},{c['entropy'][i]}"
        for i in range(len(c["step"]))
    ]
    wandb.write_text("\n".join(lines) + "\n")
    d = diagnose(read_log(wandb))
    assert d.mode("advantage_degeneracy").evidence["degeneracy"] > 0.5
    assert d.mode("advantage_degeneracy").detected
    assert "group_size" in d.mode("advantage_degeneracy").missing
