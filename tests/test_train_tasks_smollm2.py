"""`pgrpo train` on the benchmark tasks (gsm8k, ifeval, math) with SmolLM2-135M-Instruct, one
step each: the Sign advantage at G = 4 on GSM8K, the MDP-GRPO recipe (dual_anchor, asymmetric KL,
four temperatures) on generated IFEval prompts, the default estimator on MATH-500."""

from __future__ import annotations

import json
import math

import pytest

from pgrpo.train.config import load_config
from pgrpo.train.trainer import train

SMALL = [
    "grpo.batch_prompts=2",
    "grpo.group_size=4",
    "generation.max_new_tokens=24",
    "run.steps=1",
    "run.torch_threads=1",
    "run.checkpoint_every=100",
]
TEMPS = (0.1, 0.4, 0.7, 1.0)


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("PGRPO_CACHE", str(tmp_path_factory.getbasetemp() / "pgrpo-cache"))


def _run(tmp_path, overrides: list[str]) -> list[dict]:
    cfg = load_config(None, [*SMALL, f"run.output_dir={tmp_path}", "run.name=r", *overrides])
    assert cfg.model.name == "smollm2"
    train(cfg)
    run_dir = tmp_path / "r"
    assert (run_dir / "config.yaml").exists()
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _common(rows: list[dict], group_size: int = 4, batch_prompts: int = 2) -> dict:
    assert [r["step"] for r in rows] == [1]
    row = rows[0]
    assert row["group_size"] == group_size and row["batch_prompts"] == batch_prompts
    assert 0.0 <= row["reward"] <= 1.0
    assert row["reward_errors"] == 0 and row["reward_timeouts"] == 0
    assert 0 < row["completions/mean_length"] <= 24 + 1
    assert 0.0 <= row["frac_reward_zero_std"] <= 1.0
    for key in ("entropy", "loss", "grad_norm", "tokens_per_second", "time/generate_s"):
        assert row[key] is not None and math.isfinite(row[key]), key
    return row


@pytest.mark.slow
def test_gsm8k_sign_advantage_at_g4(tmp_path, shared_data):
    rows = _run(
        tmp_path,
        [
            "task=gsm8k",
            f"task.split={shared_data / 'gsm8k' / 'train.jsonl'}",
            "grpo.advantage=sign",
        ],
    )
    row = _common(rows)
    # binary reward: the batch mean is a multiple of 1/8 and the groups split into pass/fail/mixed
    assert row["reward"] * 8 == pytest.approx(round(row["reward"] * 8))
    degenerate = row["degeneracy/all_pass"] + row["degeneracy/all_fail"]
    assert degenerate == pytest.approx(row["frac_reward_zero_std"])
    assert 0.0 <= row["task/accuracy"] <= 1.0 and 0.0 <= row["task/answer_rate"] <= 1.0
    assert "kl" not in row or row["kl"] is None  # no KL coefficient, no reference model


@pytest.mark.slow
def test_ifeval_mdp_grpo_recipe_dual_anchor_asymmetric_kl_four_temperatures(tmp_path):
    rows = _run(
        tmp_path,
        [
            "task=ifeval",
            "task.split=generated",
            "task.options={n_generated: 16}",
            "grpo.advantage=dual_anchor",
            "loss.kl_coef=0.01",
            "loss.kl_coef_negative=0.025",
            "temperatures=[0.1,0.4,0.7,1.0]",
        ],
    )
    row = _common(rows)
    temp_keys = sorted(k for k in row if k.startswith("reward/temperature_"))
    assert temp_keys == sorted(f"reward/temperature_{t:g}" for t in TEMPS)
    for key in temp_keys:
        assert 0.0 <= row[key] <= 1.0
    # each temperature holds one completion per group: their mean is the batch mean
    assert sum(row[k] for k in temp_keys) / 4 == pytest.approx(row["reward"], abs=1e-6)
    # one step with K = 1: the policy is still the reference, so the KL is (numerically) zero
    assert row["kl"] is not None and abs(row["kl"]) < 1e-4
    assert 0.0 <= row["task/ssr"] <= 1.0 and 0.0 <= row["task/hsr"] <= 1.0
    assert row["task/unknown_instruction_ids"] == 0


@pytest.mark.slow
def test_math500_default_estimator(tmp_path, shared_data):
    rows = _run(
        tmp_path,
        ["task=math", f"task.split={shared_data / 'math500' / 'test.jsonl'}"],
    )
    row = _common(rows)
    assert row["reward"] * 8 == pytest.approx(round(row["reward"] * 8))
    assert 0.0 <= row["task/accuracy"] <= 1.0
    assert any(k.startswith("task/accuracy/level_") for k in row)
