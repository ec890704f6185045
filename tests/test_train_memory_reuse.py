"""The training process keeps freed memory for reuse (`setup.keep_freed_memory`, the default).

With glibc's defaults a 64 MiB tensor is a fresh mapping each time it is allocated, so filling it
page-faults every 4 KiB page again; after `keep_freed_memory`, once the heap has grown to the
pattern's peak, a cycle of the same allocations reuses its pages. `build_run` makes the setting
unless `grpo.release_memory=true`. Each check runs in a fresh interpreter (mallopt is process-wide
and not undone). A cycle is judged by the median of ten after the first two: the heap can still
grow in a later cycle (on CI one of cycles 4-7 faulted its 32 MiB tensor in afresh, which a
mean of those four read as a failure); under glibc's defaults every cycle faults.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import json, resource, sys
import torch
from pgrpo.train import setup
if sys.argv[1] == "keep":
    setup.keep_freed_memory()
elif sys.argv[1] == "run":
    from pgrpo.train.config import load_config
    overrides = ["model.name=tiny", "model.tiny_warmup_steps=0", *sys.argv[2:]]
    setup.build_run(load_config(None, overrides), resume=False)
n = 16 * 2**20  # 64 MiB of float32
faults = []
for _ in range(12):  # a step's pattern: large tensors and small objects, allocated and freed
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    x = torch.empty(n).fill_(1.0)
    small = [torch.ones(64) for _ in range(100)]
    y = torch.empty(n // 2).fill_(2.0)
    del x, y, small
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"faults": sorted(faults[2:])[5]}))  # a typical cycle once the heap has grown
"""

PAGES = 3 * 16 * 2**20 * 4 // 4096 // 2  # 4 KiB pages in the 64 + 32 MiB of a cycle


def _faults(*args: str, tmp_path=None) -> int:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])["faults"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_a_freed_large_tensor_is_reused_without_page_faults():
    assert _faults("glibc") > PAGES // 2  # glibc's default: mapped afresh, faulted in again
    assert _faults("keep") < PAGES // 20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_build_run_keeps_freed_memory_unless_asked_to_release_it(tmp_path):
    out = f"run.output_dir={tmp_path}"
    assert _faults("run", out, tmp_path=tmp_path) < PAGES // 20
    assert _faults("run", out, "grpo.release_memory=true", tmp_path=tmp_path) > PAGES // 2
