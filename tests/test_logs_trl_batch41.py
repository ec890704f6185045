"""TRL's batch arithmetic (`runconfig.trl_batch`) against a table derived from trl 1.16's code
(`GRPOConfig.__post_init__`, `GRPOTrainer._prepare_inputs`, `log`), and a real tiny TRL run:
with steps_per_generation > gradient_accumulation_steps a logged reward holds spg / ga times
the rollouts the old reading took (a review, session 41: ga 1, spg 4 read N = 8, truly 32)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgrpo.diagnose.starvation import rollouts_per_point
from pgrpo.logs import read_log
from pgrpo.logs.runconfig import hyperparameters_from_config


def _simulate(per, ws, ga, spg, mu, every, steps):
    """TRL's loop, step by step: micro-step t generates when t % (spg x mu) == 0
    (`_prepare_inputs`), appending one mean over generation_batch_size = per x ws x spg
    completions; the Trainer logs after optimizer steps every, 2 every, ... (`log` averages the
    appended means, a log with none has no reward). Returns the completions behind each
    logged reward."""
    held, out, t = 0, [], 0
    for step in range(1, steps + 1):
        for _ in range(ga):
            if t % (spg * mu) == 0:
                held += 1
            t += 1
        if step % every == 0 and held:
            out.append(held * per * ws * spg)
            held = 0
    return out


@settings(max_examples=200, deadline=None)
@given(per=st.integers(1, 4), ws=st.integers(1, 3), ga=st.integers(1, 4),
       spg_mult=st.integers(1, 4), mu=st.integers(1, 3), every=st.integers(1, 12),
       g=st.sampled_from([2, 4]))  # fmt: skip
def test_the_rollouts_per_logged_point_match_trls_loop(per, ws, ga, spg_mult, mu, every, g):
    spg = ga * spg_mult  # spg >= ga, a multiple (TRL's usual); the other case below
    if (per * ws * spg) % g or (per * ws * ga) % g:
        return
    cfg = {"per_device_train_batch_size": per, "world_size": ws, "num_generations": g,
           "gradient_accumulation_steps": ga, "steps_per_generation": spg,
           "num_iterations": mu, "logging_steps": every}  # fmt: skip
    hyper = hyperparameters_from_config(cfg)
    k = mu * spg // ga
    per_log = _simulate(per, ws, ga, spg, mu, every, steps=k * every * 4)
    assert per_log and rollouts_per_point(hyper.get) == sum(per_log) / len(per_log)
    assert hyper["refresh_interval"] == k
    assert hyper["batch_prompts"] == per * ws * ga / g  # the gradient's prompts per step


@pytest.mark.parametrize(
    ("per", "ws", "ga", "spg", "mu", "every", "n"),
    [(8, 1, 1, 4, 1, 1, 32), (8, 1, 1, 4, 1, 8, 64), (8, 1, 1, 4, 2, 1, 32),
     (8, 1, 1, 4, 2, 16, 64), (4, 2, 4, 4, 1, 10, 320), (4, 2, 4, 2, 1, 10, 320),
     (4, 1, 2, 4, 1, 3, 24)],
)  # fmt: skip
def test_a_table_from_trls_code(per, ws, ga, spg, mu, every, n):
    """n: completions behind a logged reward, worked by hand: generations per log
    max(1, L / K) x per x ws x spg, K = mu spg / ga (L = 3, K = 2: 1.5 on average)."""
    cfg = {"per_device_train_batch_size": per, "world_size": ws, "num_generations": 4,
           "gradient_accumulation_steps": ga, "steps_per_generation": spg,
           "num_iterations": mu, "logging_steps": every}  # fmt: skip
    hyper = hyperparameters_from_config(cfg)
    assert rollouts_per_point(hyper.get) == n
    if spg >= ga:  # spg < ga: several generations per optimizer step, averaged over L steps
        per_log = _simulate(per, ws, ga, spg, mu, every, steps=240)
        assert sum(per_log) / len(per_log) == n


def test_the_world_size_from_a_resolved_generation_batch_size_or_a_note():
    """TRL's saved args hold generation_batch_size = per x world x spg (resolved): B follows
    without the world size; with neither spg nor the world size the size is unknown, said."""
    cfg = {"per_device_train_batch_size": 4, "num_generations": 4, "logging_steps": 1,
           "gradient_accumulation_steps": 1, "steps_per_generation": 4,
           "generation_batch_size": 32}  # 2 processes  # fmt: skip
    hyper = hyperparameters_from_config(cfg)
    assert hyper["batch_prompts"] == 2 and rollouts_per_point(hyper.get) == 32
    notes: list[str] = []
    raw = {**cfg, "steps_per_generation": None}
    hyper = hyperparameters_from_config(raw, notes)
    assert "steps_per_logged_point" not in hyper and "batch_prompts" not in hyper
    assert len(notes) == 1 and "generation_batch_size 32" in notes[0]


def test_trl_state_takes_num_iterations_not_k(tmp_path):
    """read_trl passed refresh_interval K = mu spg / ga as num_iterations: with ga 1, spg 4,
    mu 1 and logging_steps 8 it read 8 / 4 = 2 steps per point, not 8."""
    args = {"per_device_train_batch_size": 8, "world_size": 1, "num_generations": 8,
            "gradient_accumulation_steps": 1, "steps_per_generation": 4,
            "num_iterations": 1}  # fmt: skip
    (tmp_path / "training_args.json").write_text(json.dumps(args))
    rows = [{"step": s, "reward": 0.5 + 0.01 * (s % 3), "loss": 0.1} for s in range(8, 400, 8)]
    state = {"log_history": rows, "logging_steps": 8, "global_step": 392}
    (tmp_path / "trainer_state.json").write_text(json.dumps(state))
    log = read_log(tmp_path)
    assert log.hyperparameters["steps_per_logged_point"] == 8
    assert rollouts_per_point(log.hyperparameters.get) == 64


def test_a_real_tiny_trl_run_logs_what_the_arithmetic_says(tmp_path):
    """ga 1, spg 4, logging_steps 1: TRL generates 16 completions every 4 steps and logs a
    reward at steps 1, 5, 9 only; the config read from its args says 16 per logged reward."""
    trl = pytest.importorskip("trl")
    from test_integration_trl import _dataset, _model, _tokenizer

    sizes: list[int] = []

    def reward(completions, **kw):  # noqa: ANN001, ANN003
        sizes.append(len(completions))
        return [0.5] * len(completions)

    args = trl.GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False,
                          per_device_train_batch_size=4, num_generations=4,
                          max_completion_length=3, max_steps=12, logging_steps=1,
                          steps_per_generation=4, report_to=[], save_strategy="no", seed=0,
                          disable_tqdm=True)  # fmt: skip
    tok = _tokenizer()
    trainer = trl.GRPOTrainer(model=_model(tok), reward_funcs=reward, args=args,
                              train_dataset=_dataset(64), processing_class=tok)  # fmt: skip
    trainer.train()
    logged = [e["step"] for e in trainer.state.log_history if "reward" in e]
    assert logged == [1, 5, 9] and sizes == [16, 16, 16]
    hyper = hyperparameters_from_config(json.loads(args.to_json_string()))
    assert rollouts_per_point(hyper.get) == 16  # no world size on disk: from the resolved gbs
