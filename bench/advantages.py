"""Benchmark: pgrpo's `grpo` advantages vs verl 0.9.1's looped and vectorised GRPO estimators.

    /work/main/.venv-verl/bin/python bench/advantages.py            # real verl (its own venv)
    python bench/advantages.py                                      # verl reimplemented if absent

1,000,000 rollouts of binary rewards (Bernoulli 0.3), G = 8, float32, CPU, same seed (so the same
rewards) for every variant, `--threads` torch threads (default 1: the machine is shared):
- time: median of `--repeats` calls after one warm-up call, the variants' calls interleaved
  (A B C A B C ...) in one process so that other processes' load falls on all alike; verl's looped
  `grpo` is timed once (one call, ~15-30 s) in its memory subprocess;
- peak memory: each variant in a fresh subprocess: peak RSS (VmHWM, reset through
  /proc/self/clear_refs once the inputs exist and malloc_trim has returned freed heap pages)
  minus the RSS before the call, so it counts what
  the call allocates, output included; reported as a multiple of the input bytes (rewards, plus
  group ids when given; verl: token_level_rewards + response_mask + index).
Every variant's sum |A| must agree (checked), so all compute the same advantages.
verl's functions take token_level_rewards [N, T], response_mask [N, T] and an index of group ids;
we pass T = 1 so the cost measured is the group math, not the token broadcast.
Ragged groups: sizes uniform in 4..12, rollouts shuffled (ids in random order).
Writes bench/results/advantages.json and prints a table.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as dt
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]

# name: (implementation, grouping, how groups are given)
VARIANTS = {
    "pgrpo grpo (group_size)": ("pgrpo", "equal", "group_size=8"),
    "pgrpo grpo (group_ids)": ("pgrpo", "equal", "group_ids, contiguous"),
    "verl grpo (looped)": ("verl_loop", "equal", "index"),
    "verl grpo_vectorized": ("verl_vec", "equal", "index"),
    "pgrpo grpo (ragged)": ("pgrpo", "ragged", "group_ids, shuffled"),
    "verl grpo_vectorized (ragged)": ("verl_vec", "ragged", "index, shuffled"),
}


def make_inputs(n: int, g: int, grouping: str, seed: int = 0):
    """rewards [n] float32 and group ids [n] int64 (equal: contiguous; ragged: shuffled)."""
    rng = np.random.default_rng(seed)
    rewards = torch.from_numpy((rng.random(n) < 0.3).astype(np.float32))
    if grouping == "equal":
        return rewards, np.repeat(np.arange(n // g, dtype=np.int64), g)
    sizes = rng.integers(4, 13, size=n // 4 + 1)
    sizes = sizes[: int(np.searchsorted(np.cumsum(sizes), n)) + 1]
    sizes[-1] -= int(sizes.sum()) - n  # trim the last group so the sizes add up to n
    if sizes[-1] < 2:
        sizes[-2] += sizes[-1]
        sizes = sizes[:-1]
    ids = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
    return rewards, ids[rng.permutation(n)]


def load_verl():
    """verl's two estimators, or faithful copies when verl is not importable (labelled)."""
    try:
        from verl.trainer.ppo import core_algos

        return (
            core_algos.compute_grpo_outcome_advantage,
            core_algos.compute_grpo_vectorized_outcome_advantage,
            "verl " + __import__("verl").__version__,
        )
    except Exception:  # noqa: BLE001 - any import failure means: use the reimplementation
        return (
            _verl_loop_copy,
            _verl_vec_copy,
            "reimplementation of verl 0.9.1 (verl not importable)",
        )


def _verl_loop_copy(token_level_rewards, response_mask, index, epsilon=1e-6, norm=True):
    """verl 0.9.1 core_algos.py:268 compute_grpo_outcome_advantage, same loop and tensor ops."""
    scores = token_level_rewards.sum(dim=-1)
    id2score, id2mean, id2std = defaultdict(list), {}, {}
    with torch.no_grad():
        for i in range(scores.shape[0]):
            id2score[index[i]].append(scores[i])
        for idx in id2score:
            if len(id2score[idx]) == 1:
                id2mean[idx], id2std[idx] = torch.tensor(0.0), torch.tensor(1.0)
            else:
                t = torch.stack(id2score[idx])
                id2mean[idx], id2std[idx] = torch.mean(t), torch.std(t)
        for i in range(scores.shape[0]):
            scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
        scores = scores.unsqueeze(-1) * response_mask
    return scores, scores


def _verl_vec_copy(token_level_rewards, response_mask, index, epsilon=1e-6, norm=True):
    """verl 0.9.1 core_algos.py:335 + utils/groupwise.py group_mean_std (integer-index path)."""
    with torch.no_grad():
        scores = token_level_rewards.sum(dim=-1)
        g = torch.from_numpy(np.asarray(index, dtype=np.int64))
        n_groups = int(g.max()) + 1
        ones = torch.ones_like(scores)
        count = torch.zeros(n_groups).index_add_(0, g, ones)
        mean = torch.zeros(n_groups).index_add_(0, g, scores) / count.clamp_min(1.0)
        centered = scores - mean[g]
        var = torch.zeros(n_groups).index_add_(0, g, centered * centered)
        std = torch.sqrt(torch.clamp(var / (count - 1.0).clamp_min(1.0), min=0.0))
        single = count <= 1.0
        if torch.any(single):
            mean, std = mean.clone(), std.clone()
            mean[single], std[single] = 0.0, 1.0
        adv = ((scores - mean[g]) / (std[g] + epsilon)).unsqueeze(-1) * response_mask
        return adv, adv


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def measure_memory(name: str, n: int, g: int) -> dict:
    """Peak extra RSS of one call, in this (fresh) process. A warm-up on 1,000 rollouts first
    takes the one-time costs (lazy imports, thread pools) out of the figure. The looped verl
    variant is also timed here (one call: ~15-30 s)."""
    _make_call(name, *make_inputs(1000, g, VARIANTS[name][1]), g)[0]()
    rewards, ids = make_inputs(n, g, VARIANTS[name][1])
    call, input_bytes, label = _make_call(name, rewards, ids, g)
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)  # hand freed heap back, so new pages show in RSS
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak-RSS high-water mark
    base = _rss_kib("VmRSS")
    t0 = time.perf_counter()
    out = call()
    seconds = time.perf_counter() - t0
    peak = _rss_kib("VmHWM") - base
    return {
        "variant": name,
        "implementation": label,
        "groups": VARIANTS[name][1],
        "group_arg": VARIANTS[name][2],
        "n": n,
        "first_call_seconds": seconds,
        "peak_mib": peak / 1024,
        "input_mib": input_bytes / 2**20,
        "peak_over_input": peak * 1024 / input_bytes,
        "checksum": float(out.double().abs().sum()),
    }


def time_round_robin(names: list[str], n: int, g: int, repeats: int) -> dict[str, list[float]]:
    """Wall time of each variant, calls interleaved (A B C A B C ...) so that load from other
    processes on a shared machine falls on every variant alike. One warm-up call each."""
    calls = {}
    for name in names:
        calls[name] = _make_call(name, *make_inputs(n, g, VARIANTS[name][1]), g)[0]
        calls[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(repeats):
        for name in names:
            t0 = time.perf_counter()
            calls[name]()
            times[name].append(time.perf_counter() - t0)
    return times


def _make_call(name: str, rewards: torch.Tensor, ids: np.ndarray, g: int):
    """(zero-argument call returning advantages [N], input bytes, implementation label)."""
    impl = VARIANTS[name][0]
    n = rewards.numel()
    input_bytes = rewards.numel() * rewards.element_size()
    label = "pgrpo " + __import__("pgrpo").__version__
    if impl == "pgrpo":
        from pgrpo import compute_advantages

        if name.endswith("(group_size)"):

            def call():
                return compute_advantages("grpo", rewards, group_size=g, eps=1e-6).advantages
        else:
            input_bytes += ids.nbytes

            def call():
                return compute_advantages("grpo", rewards, group_ids=ids, eps=1e-6).advantages
    else:
        loop, vec, label = load_verl()
        fn = loop if impl == "verl_loop" else vec
        token_rewards, mask = rewards.unsqueeze(-1), torch.ones(n, 1)
        input_bytes += 2 * rewards.numel() * 4 + ids.nbytes

        def call():
            # the looped version writes into scores = rewards.sum(-1), a copy: inputs stay intact
            return fn(token_rewards, mask, ids, 1e-6, True)[0].squeeze(-1)

    return call, input_bytes, label


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1, help="torch threads in every variant")
    ap.add_argument("--skip-loop", action="store_true", help="skip verl's ~15 s looped grpo")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "advantages.json")
    ap.add_argument("--variant", help=argparse.SUPPRESS)  # internal: run one variant, print JSON
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.variant:
        print(json.dumps(measure_memory(args.variant, args.n, args.group_size)))
        return
    rows = []
    for name in VARIANTS:
        if args.skip_loop and VARIANTS[name][0] == "verl_loop":
            continue
        cmd = [sys.executable, __file__, "--variant", name, "--n", str(args.n)]
        cmd += ["--group-size", str(args.group_size), "--threads", str(args.threads)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(f"  memory of {name}: {rows[-1]['peak_mib']:.1f} MiB", file=sys.stderr)
    fast = [r["variant"] for r in rows if VARIANTS[r["variant"]][0] != "verl_loop"]
    times = time_round_robin(fast, args.n, args.group_size, args.repeats)
    for r in rows:
        r["times"] = times.get(r["variant"], [r["first_call_seconds"]])
        r["seconds"] = statistics.median(r["times"])
    report(rows, args)


def _ratio(x: float) -> str:
    return f"{x:.2f}x" if x >= 0.1 else f"{x:.2g}x"


def report(rows: list[dict], args: argparse.Namespace) -> None:
    ref = {r["groups"]: r["seconds"] for r in rows if r["variant"].startswith("verl grpo_vec")}
    for r in rows:
        r["speedup_vs_verl_vectorized"] = ref[r["groups"]] / r["seconds"]
    for grouping in ("equal", "ragged"):
        sums = [r["checksum"] for r in rows if r["groups"] == grouping]
        assert max(sums) - min(sums) <= 1e-4 * max(sums), f"variants disagree on {grouping}"
    head = (
        f"{'variant':32} {'groups':7} {'seconds':>9} {'speedup':>8} {'peak MiB':>9} {'x input':>8}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['variant']:32} {r['groups']:7} {r['seconds']:9.4f} "
            f"{_ratio(r['speedup_vs_verl_vectorized']):>8} {r['peak_mib']:9.1f} "
            f"{r['peak_over_input']:7.2f}x"
        )
    verl = rows[-1]["implementation"]
    print(f"speedup = verl grpo_vectorized seconds / seconds (same grouping); verl: {verl}")
    print(f"threads={args.threads}; N={args.n}, G={args.group_size}; median of {args.repeats}")
    meta = {
        "command": " ".join([Path(sys.executable).as_posix(), *sys.argv]),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "load_average": os.getloadavg(),
        "torch": torch.__version__,
        "threads": args.threads,
        "n": args.n,
        "group_size": args.group_size,
        "repeats": args.repeats,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
