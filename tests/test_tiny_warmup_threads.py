"""The tiny model's warm-up gives the same weights whatever torch's thread count in the caller
(it runs at `policies.WARMUP_THREADS`), and leaves that count as it found it: a warm-up under
one thread built another model than under two, and the cache, keyed without the count, kept
whichever was built first (a docs audit, session 37)."""

from __future__ import annotations

import torch

from pgrpo.tasks import get_task
from pgrpo.train.config import ModelConfig
from pgrpo.train.policies import load_policy


def _weights(tmp_path, threads: int) -> dict[str, torch.Tensor]:
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        cfg = ModelConfig(name="tiny", cache_dir=str(tmp_path / f"cache{threads}"),
                          tiny_warmup_steps=30)  # fmt: skip
        policy = load_policy(cfg, task=get_task("arithmetic"), task_key="arithmetic", seed=5)
        assert torch.get_num_threads() == threads  # restored after the warm-up
    finally:
        torch.set_num_threads(before)
    return {k: v.detach().clone() for k, v in policy.model.state_dict().items()}


def test_the_warm_up_does_not_depend_on_the_callers_thread_count(tmp_path):
    one, two = _weights(tmp_path, 1), _weights(tmp_path, 2)
    assert one.keys() == two.keys()
    for name in one:
        assert torch.equal(one[name], two[name]), name
