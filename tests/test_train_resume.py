"""Kill and resume: same final parameters and same log (no missing or duplicated step) as an
uninterrupted run, whether the run crashes in-process or is SIGKILLed at a random step."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest
import torch

from pgrpo.train.config import load_config, save_config
from pgrpo.train.log import read_metrics
from pgrpo.train.trainer import TIMING_KEYS, train

STEPS = 6


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("PGRPO_CACHE", str(tmp_path_factory.getbasetemp() / "pgrpo-cache"))


def cfg(tmp_path, name, *extra):
    return load_config(
        None,
        [
            "model.name=tiny",
            "model.tiny_hidden=32",
            "model.tiny_warmup_steps=60",
            "task.options={levels: [1], n: 200}",
            f"steps={STEPS}",
            "group_size=4",
            "batch_prompts=4",
            "max_new_tokens=4",
            "lr=3e-3",
            "torch_threads=1",
            "checkpoint_every=2",
            "refresh_interval=2",
            "forecast_every=0",
            f"run.output_dir={tmp_path}",
            f"run.name={name}",
            *extra,
        ],
    )


def _final(run_dir):
    state = torch.load(run_dir / "checkpoints" / f"step-{STEPS}" / "state.pt", weights_only=False)
    return state["model"], state["optimizer"]["state"]


def _same_run(a, b):
    pa, oa = _final(a)
    pb, ob = _final(b)
    assert all(torch.equal(pa[k], pb[k]) for k in pa)
    assert all(torch.equal(oa[i]["exp_avg"], ob[i]["exp_avg"]) for i in oa)
    la = [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in read_metrics(a)]
    lb = [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in read_metrics(b)]
    assert [r["step"] for r in lb] == list(range(1, STEPS + 1))
    assert la == lb


class _Crash(Exception):
    pass


def test_crash_after_step_then_resume_matches_uninterrupted(tmp_path):
    reference = train(cfg(tmp_path, "ref")).run_dir

    def crash(metrics):
        if metrics["step"] == 3:  # after the step-2 checkpoint, before the step-4 one
            raise _Crash

    with pytest.raises(_Crash):
        train(cfg(tmp_path, "crash"), on_step=crash)
    assert len(read_metrics(tmp_path / "crash")) == 3  # step 3 logged but not checkpointed
    resumed = train(cfg(tmp_path, "crash"), resume=True).run_dir
    _same_run(reference, resumed)


def test_sigkill_at_a_random_step_then_resume_matches_uninterrupted(tmp_path):
    reference = train(cfg(tmp_path, "ref")).run_dir
    config = cfg(tmp_path, "killed")
    save_config(config, tmp_path / "killed.yaml")
    kill_after = random.Random(os.getpid()).randint(1, STEPS - 1)
    code = (
        "from pgrpo.train.config import load_config; from pgrpo.train.trainer import train; "
        f"train(load_config({str(tmp_path / 'killed.yaml')!r}))"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], env=dict(os.environ))
    log = tmp_path / "killed" / "metrics.jsonl"
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if log.exists() and len(log.read_text().splitlines()) >= kill_after:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert len(read_metrics(tmp_path / "killed")) < STEPS
    resumed = train(config, resume=True).run_dir
    _same_run(reference, resumed)


def test_resume_refuses_a_changed_config_and_a_missing_checkpoint(tmp_path):
    train(cfg(tmp_path, "r", "steps=2"))
    with pytest.raises(ValueError, match="optim.lr"):
        train(cfg(tmp_path, "r", "lr=1e-3"), resume=True)
    with pytest.raises(FileNotFoundError, match="without --resume"):
        train(cfg(tmp_path, "nothing"), resume=True)
    more = train(cfg(tmp_path, "r", "steps=3"), resume=True)  # extending a finished run
    assert [r["step"] for r in more.history] == [1, 2, 3]
