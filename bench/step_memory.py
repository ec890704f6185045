"""Where one trainer step's memory peaks, phase by phase (`bench/step_profile.py --memory`).

At every boundary of a phase that `step_profile.instrument` wraps (and at the switch from the LM
head's backward to the decoder's, a hook on the decoder's output gradient), the process's peak
RSS since the last boundary (`VmHWM` of /proc/self/status) is charged to the phase that was
running, and the peak is reset (`/proc/self/clear_refs` 5): the per-phase peaks are exact, with
no sampling gap. glibc's `mallinfo2` tells the bytes malloc has handed out (live: in-use heap
chunks + mmapped chunks) from the pages it holds (heap + mmapped); a thread samples it every
5 ms for each phase's live peak. At the start and end of each backward and around the AdamW
step, what is alive is counted: parameters, gradients, optimizer state, and the tensors autograd
saved for backward (`torch.autograd.graph.saved_tensors_hooks`, unique storages; bf16 copies of
weights apart from activations).

Resetting VmHWM also resets the figure `/usr/bin/time` reports, so measure the process's peak RSS
in a run without --memory.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import threading
import time
from collections import defaultdict

import torch

MB = 1 << 20


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


_LIBC = ctypes.CDLL("libc.so.6")
_LIBC.mallinfo2.restype = _MallInfo2


def malloc_bytes() -> tuple[int, int]:
    """(live, held): bytes malloc has handed out (in-use heap + mmapped chunks) and bytes it holds
    (heap arenas + mmapped chunks); held - live is free heap (fragmentation or not yet trimmed)."""
    m = _LIBC.mallinfo2()
    return m.uordblks + m.hblkhd, m.arena + m.hblkhd


def _status_kb(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    raise KeyError(key)


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


class PhaseMemory:
    """Per-phase peak RSS (exact) and live malloc bytes (sampled), plus snapshots of what is
    alive at named points. `enter(label)` / `exit(label)` at phase boundaries."""

    def __init__(self, interval_s: float = 0.005) -> None:
        self.stack: list[str] = []
        self.peak_rss: dict[str, float] = defaultdict(float)
        self.peak_live: dict[str, float] = defaultdict(float)
        self.snapshots: list[dict] = []
        self.tensors: dict[str, object] = {}
        self._saved: dict[int, tuple[int, str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, args=(interval_s,), daemon=True)
        _reset_peak()
        self._thread.start()

    def phase(self) -> str:
        return self.stack[-1] if self.stack else "between phases"

    def _close(self) -> None:
        phase = self.phase()
        self.peak_rss[phase] = max(self.peak_rss[phase], _status_kb("VmHWM") / 1024)
        self.peak_live[phase] = max(self.peak_live[phase], malloc_bytes()[0] / MB)
        _reset_peak()

    def enter(self, label: str) -> None:
        self._close()
        top = self.phase()
        self.stack.append(f"{top} > {label}" if top.startswith("update: backward") else label)

    def exit(self, label: str) -> None:
        self._close()
        if self.stack:  # the wrapped phases nest properly
            self.stack.pop()

    def switch(self, label: str) -> None:
        """Replace the innermost phase (inside backward: head -> decoder)."""
        self._close()
        if self.stack:
            self.stack[-1] = label

    def _sample(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            phase = self.phase()
            live = malloc_bytes()[0] / MB
            self.peak_live[phase] = max(self.peak_live[phase], live)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def reset(self) -> None:
        """Forget the peaks so far (after the warm-up step)."""
        self.peak_rss.clear()
        self.peak_live.clear()
        self.snapshots.clear()

    # --- what is alive ---------------------------------------------------------------------

    def snapshot(self, where: str) -> None:
        live, held = malloc_bytes()
        row = {
            "where": where,
            "rss_mb": _status_kb("VmRSS") / 1024,
            "malloc_live_mb": live / MB,
            "malloc_free_held_mb": (held - live) / MB,
        }
        model, optimizer = self.tensors.get("model"), self.tensors.get("optimizer")
        if model is not None:
            params = list(model.parameters())
            row["parameters_mb"] = sum(p.nbytes for p in params) / MB
            row["gradients_mb"] = sum(p.grad.nbytes for p in params if p.grad is not None) / MB
        if optimizer is not None:
            state = optimizer.state.values()
            row["optimizer_state_mb"] = (
                sum(t.nbytes for s in state for t in s.values() if torch.is_tensor(t)) / MB
            )
        by_kind: dict[str, float] = defaultdict(float)
        for nbytes, kind in self._saved.values():
            by_kind[kind] += nbytes / MB
        row.update({f"saved_for_backward_{k}_mb": v for k, v in by_kind.items()})
        self.snapshots.append(row)

    @contextlib.contextmanager
    def count_saved(self):
        """Count the tensors autograd saves for backward (unique storages) inside the block."""
        self._saved.clear()
        params = {p.data_ptr() for p in self.tensors["model"].parameters()}
        shapes = {tuple(p.shape) for p in self.tensors["model"].parameters()}

        def pack(t: torch.Tensor) -> torch.Tensor:
            ptr = t.untyped_storage().data_ptr()
            if ptr not in params and ptr not in self._saved:
                kind = "activations"
                if t.dtype == torch.bfloat16 and tuple(t.shape) in shapes:
                    kind = "bf16_weight_casts"
                self._saved[ptr] = (t.untyped_storage().nbytes(), kind)
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            yield

    def report(self) -> dict:
        return {
            "peak_rss_mb_by_phase": {k: round(v) for k, v in self.peak_rss.items()},
            "peak_malloc_live_mb_by_phase": {k: round(v) for k, v in self.peak_live.items()},
            "peak_rss_mb": round(max(self.peak_rss.values(), default=0.0)),
            "snapshots": [
                {k: v if isinstance(v, str) else round(v) for k, v in s.items()}
                for s in self.snapshots
            ],
        }


def install(tracker: PhaseMemory, hooks: list, run=None) -> None:
    """Hook the tracker into step_profile's phase wrappers (`hooks`), count saved tensors in the
    trainer's minibatch gradient, and mark the head -> decoder switch inside backward."""
    from pgrpo.train import logprobs, trainer

    hooks.append((tracker.enter, tracker.exit))
    if run is not None:
        tracker.tensors.update(model=run.policy.model, optimizer=run.optimizer)
        inner = trainer.minibatch_gradient

        @functools.wraps(inner)
        def counted(*args, **kwargs):
            with tracker.count_saved():
                return inner(*args, **kwargs)

        trainer.minibatch_gradient = counted
        step = run.optimizer.step

        @functools.wraps(step)
        def stepped(*args, **kwargs):
            tracker.snapshot("before AdamW step")
            try:
                return step(*args, **kwargs)
            finally:
                tracker.snapshot("after AdamW step")

        run.optimizer.step = stepped
    backward = torch.Tensor.backward

    @functools.wraps(backward)
    def marked_backward(self, *args, **kwargs):
        tracker.snapshot("backward start")
        try:
            return backward(self, *args, **kwargs)
        finally:
            tracker.snapshot("backward end")

    torch.Tensor.backward = marked_backward
    hidden_fn = logprobs.completion_hidden

    @functools.wraps(hidden_fn)
    def hidden_marked(*args, **kwargs):
        out = hidden_fn(*args, **kwargs)
        if out.requires_grad:
            out.register_hook(lambda g: tracker.switch("update: backward (decoder)") or None)
        return out

    logprobs.completion_hidden = hidden_marked
    _ = time
