"""A trainer that logs the mean since its last log (Hugging Face Trainer / TRL, `logging_steps`)
puts logging_steps / num_iterations x G x B rollouts behind each logged reward: the config says so
(`steps_per_logged_point`), and the diagnosis, the live path and the TRL callback all read the
rollouts per point through one function (`starvation.rollouts_per_point`), so 0/1 rewards
averaged over 10 steps are tested against their own binomial noise, as `assess_progress` given
the true N tests them (a hostile user's review, session 35: N = G x B per point read such means
as AR(1) noise and dropped the i.i.d. degeneracy prediction)."""

from __future__ import annotations

import json
import math
import re
import warnings
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgrpo.diagnose import diagnose
from pgrpo.diagnose import nullmodel as nm
from pgrpo.diagnose.live import LiveConfig, _degeneracy, progress_of
from pgrpo.diagnose.progress import assess_progress
from pgrpo.diagnose.signals import MAX_POINTS
from pgrpo.diagnose.starvation import rollouts_per_point
from pgrpo.logs import read_log
from pgrpo.logs.runconfig import hyperparameters_from_config
from pgrpo.logs.thin import bin_plan


@pytest.mark.parametrize(
    ("every", "extra", "expected"),
    [(10, {}, 10.0), (2, {}, 2.0), (1, {}, None), (0.1, {}, None), (None, {}, None),
     (10, {"num_iterations": 2}, 5.0), (2, {"num_iterations": 2}, None),
     (10, {"logging_strategy": "epoch"}, None), (10, {"logging_strategy": "steps"}, 10.0)],
)  # fmt: skip
def test_the_config_gives_the_steps_per_logged_point(every, extra, expected):
    """TRL generates once every num_iterations steps: a logged mean holds L / num_iterations
    steps' rollouts; logged by epoch, logging_steps says nothing."""
    cfg = {"num_generations": 8, "per_device_train_batch_size": 8, "world_size": 1,
           "gradient_accumulation_steps": 4, "logging_steps": every, **extra}  # fmt: skip
    hyper = hyperparameters_from_config(cfg)
    assert hyper.get("steps_per_logged_point") == expected
    n = rollouts_per_point(hyper.get)
    assert n == 32.0 * (expected or 1.0)


def test_rollouts_per_point_reads_what_is_known():
    assert rollouts_per_point({}.get) is None
    assert rollouts_per_point({"group_size": 8.0}.get) is None
    assert (
        rollouts_per_point({"completions_per_step": 64.0, "steps_per_logged_point": 5.0}.get) == 320
    )
    assert rollouts_per_point({"group_size": 4.0, "batch_prompts": 2.0}.get) == 8


def _log(tmp_path, logged: np.ndarray, every: int, hyper: dict):
    path = tmp_path / "log.csv"
    steps = np.arange(1, logged.size + 1) * every
    lines = [f"{s},{float(r)!r},0.5\n" for s, r in zip(steps, logged, strict=True)]
    path.write_text("step,reward,frac_reward_zero_std\n" + "".join(lines))
    log = read_log(path)
    return replace(log, hyperparameters={**log.hyperparameters, **hyper})


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**16), every=st.sampled_from([2, 5, 10]), g=st.sampled_from([4, 8]))
def test_the_live_path_tests_a_logged_mean_against_its_own_rollouts(
    tmp_path_factory, seed, every, g
):
    b, n = 4, 60
    rng = np.random.default_rng(seed)
    p = 0.1 + 0.1 * (1 - np.exp(-np.arange(n * every) / (20.0 * every)))
    logged = (rng.binomial(g * b, p) / (g * b)).reshape(n, every).mean(1)
    hyper = {"group_size": float(g), "batch_prompts": float(b),
             "steps_per_logged_point": float(every)}  # fmt: skip
    log = _log(tmp_path_factory.mktemp("l"), logged, every, hyper)
    truth = assess_progress(log.step, log.reward, frac_zero_std=log.columns["frac_reward_zero_std"],
                            n_rollouts=g * b * every, fit=False)  # fmt: skip
    live = progress_of(log, fit=False)
    assert live.label == truth.label
    assert live.evidence["null_model"] == truth.evidence["null_model"]
    assert nm.choose_null(log.reward, g * b * every).kind == "binomial"
    _, iid, _ = _degeneracy(log, LiveConfig())
    assert math.isfinite(iid)  # the i.i.d. prediction of 0/1 means: kept
    fewer = replace(log, hyperparameters={k: v for k, v in hyper.items()
                                          if k != "steps_per_logged_point"})  # fmt: skip
    assert not math.isfinite(_degeneracy(fewer, LiveConfig())[1])  # N = G B: not 0/1 means


@pytest.mark.parametrize(("stride", "kept"), [(10, 10.0), (5, 5.0), (1, None)])
def test_the_logged_steps_bound_what_logging_steps_claims(stride, kept):
    """A config's logging_steps counts only as far as the logged steps are that far apart (a
    console log numbered by rows, or a harness feeding every step, counts 1)."""
    from pgrpo.logs.base import assemble

    records = [{"step": stride * i, "reward": 0.1 * (i % 3)} for i in range(1, 21)]
    hyper = {"group_size": 8.0, "batch_prompts": 4.0, "steps_per_logged_point": 10.0}
    log = assemble(records, fmt="trl", source="test", hyperparameters=hyper)
    assert log.hyperparameters.get("steps_per_logged_point") == kept


def _n_of(null_model: str) -> float:
    return float(re.search(r"N=([0-9.]+)", null_model).group(1))


@pytest.mark.parametrize("n", [60, 4500])
def test_the_diagnosis_counts_the_steps_per_point_once_binned_or_not(tmp_path, n):
    """`pgrpo diagnose`'s verdict tests a logged mean against G B L rollouts, and a log binned
    b points to a bin against G B L b: the factor is counted once, never twice."""
    g, b, every = 8, 4, 10
    rng = np.random.default_rng(1)
    logged = (rng.binomial(g * b, 0.3, size=(n, every)) / (g * b)).mean(1)
    hyper = {"group_size": float(g), "batch_prompts": float(b),
             "steps_per_logged_point": float(every)}  # fmt: skip
    log = _log(tmp_path, logged, every, hyper)
    bins = bin_plan(n, MAX_POINTS)[0]
    said = diagnose(log).progress.evidence["null_model"]
    assert _n_of(said) == g * b * every * bins
    plain = replace(log, hyperparameters={"group_size": float(g), "batch_prompts": float(b)})
    assert _n_of(diagnose(plain).progress.evidence["null_model"]) == g * b * bins


def test_a_trainer_state_on_disk_gives_its_logging_steps(tmp_path):
    """TRL writes logging_steps at the top of trainer_state.json; a review found only the
    callback read it, so `pgrpo diagnose` on the same history used G x B."""
    history = [{"step": 10 * i, "reward": 0.1 + 0.01 * (i % 4), "reward_std": 0.3}
               for i in range(1, 31)]  # fmt: skip
    state = {"logging_steps": 10, "global_step": 300, "log_history": history}
    (tmp_path / "trainer_state.json").write_text(json.dumps(state))
    assert read_log(tmp_path).hyperparameters.get("steps_per_logged_point") == 10.0
    state["logging_steps"] = 1
    (tmp_path / "trainer_state.json").write_text(json.dumps(state))
    assert "steps_per_logged_point" not in read_log(tmp_path).hyperparameters


class _Args:
    """What PgrpoCallback reads of a GRPOConfig: to_dict(), world_size, output_dir."""

    def __init__(self, out, **cfg):
        self.output_dir, self.world_size, self._cfg = str(out), 1, cfg

    def to_dict(self):
        return dict(self._cfg)


def _run_callback(cb, args, rewards, every):
    transformers = pytest.importorskip("transformers")
    state, control = transformers.TrainerState(), transformers.TrainerControl()
    cb.on_train_begin(args, state, control)
    for i, r in enumerate(rewards, start=1):
        state.global_step = i * every
        logs = {"reward": float(r), "frac_reward_zero_std": 0.5}
        state.log_history.append({**logs, "step": state.global_step})
        cb.on_log(args, state, control, logs=logs)
    return state


def test_the_callback_tests_trl_means_against_their_rollouts(tmp_path):
    pytest.importorskip("transformers")
    from pgrpo.integrations.callback import PgrpoCallback

    g, per, ga, every = 8, 8, 4, 10  # B = 8 x 1 x 4 / 8 = 4 prompts: 32 rollouts a step
    rng = np.random.default_rng(3)
    p = 0.1 + 0.1 * (1 - np.exp(-np.arange(600) / 200))
    logged = (rng.binomial(g * 4, p) / (g * 4)).reshape(60, every).mean(1)
    args = _Args(tmp_path, num_generations=g, per_device_train_batch_size=per,
                 gradient_accumulation_steps=ga, logging_steps=every)  # fmt: skip
    cb = PgrpoCallback(every=5)
    state = _run_callback(cb, args, logged, every)
    assert cb.errors == [] and cb.hyperparameters["steps_per_logged_point"] == every
    assert "pgrpo/degeneracy_iid" in state.log_history[-1]  # 0/1 means of 320: kept
    steps = np.arange(1, 61) * float(every)
    truth = assess_progress(steps, logged, n_rollouts=g * 4 * every, fit=False)
    verdicts = ("too_short", "learning", "plateau", "flat", "declining", "saturated", "collapsed")
    assert verdicts[int(state.log_history[-1]["pgrpo/verdict"])] == truth.label


def test_the_callback_warns_once_a_train_when_an_assessment_fails(tmp_path):
    pytest.importorskip("transformers")
    from pgrpo.integrations.callback import PgrpoCallback

    cb = PgrpoCallback(every=5)
    args = _Args(tmp_path, logging_steps=1)
    huge = [1e200 * (0.2 + 0.01 * t) for t in range(30)]  # beyond what the statistics square
    for _ in range(2):  # a second train() warns again
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _run_callback(cb, args, huge, 1)
        said = [w for w in caught if "the assessment at step" in str(w.message)]
        assert len(said) == 1 and "no stop rule acts" in str(said[0].message)
    assert len(cb.errors) == 12  # every failure is kept for the report
