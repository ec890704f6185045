"""`pgrpo demo`: a short GRPO run on the default model and task, then the fit, the forecast, a
diagnosis and plots, all in one folder (default `runs/demo/`).

The run: SmolLM2-135M-Instruct on single-digit additions (arithmetic level 1), B = 8 prompts x
G = 4 completions, at most 16 new tokens, lr 2e-5, full fine-tune on the CPU. Steps default to
what fits in ~10 minutes here (2-core CPU), model conversion included.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pgrpo.train.config import RunConfig, load_config

DEMO_OVERRIDES = [
    "model.name=smollm2",
    "task.name=arithmetic",
    "task.options={levels: [1]}",
    "grpo.group_size=4",
    "grpo.batch_prompts=8",
    "generation.max_new_tokens=16",
    "optim.lr=2e-5",
    "run.name=demo",
    "run.checkpoint_every=5",
    "run.forecast_every=5",
]


@dataclass(frozen=True)
class DemoResult:
    """Where everything went, and the headline numbers."""

    run_dir: Path
    files: dict[str, Path]
    metrics: dict[str, Any]


def demo_threads() -> list[str]:
    """One torch thread when the machine is small or busy (load >= cores): torch's spinning
    threads then run several times slower than one thread (measured here: 5x for sampling)."""
    cores = os.cpu_count() or 1
    return ["run.torch_threads=1"] if cores <= 2 or os.getloadavg()[0] >= cores else []


def demo_config(steps: int, output_dir: str, extra: list[str] | None = None) -> RunConfig:
    return load_config(
        None,
        [
            *DEMO_OVERRIDES,
            *demo_threads(),
            f"run.steps={steps}",
            f"run.output_dir={output_dir}",
            *(extra or []),
        ],
    )


def analyse(run_dir: Path, config: RunConfig, history: list[dict[str, Any]]) -> DemoResult:
    """Fit + forecast + diagnosis + plots of a finished run; writes them into `run_dir`."""
    step = np.array([h["step"] for h in history], dtype=float)
    reward = np.array([h["reward"] for h in history], dtype=float)
    files: dict[str, Path] = {
        "metrics": run_dir / "metrics.jsonl",
        "config": run_dir / "config.yaml",
    }
    metrics: dict[str, Any] = {
        "steps": int(step[-1]),
        "reward_first3": float(reward[:3].mean()),
        "reward_last3": float(reward[-3:].mean()),
    }
    fit_info = _fit(step, reward, config, history)
    if fit_info is not None:
        (run_dir / "fit.json").write_text(json.dumps(fit_info["json"], indent=2, default=_num))
        (run_dir / "fit.txt").write_text(fit_info["report"] + "\n")
        files["fit"] = run_dir / "fit.json"
        metrics.update(fit_info["summary"])
    diagnosis = _diagnose(history)
    (run_dir / "diagnosis.txt").write_text(diagnosis + "\n")
    files["diagnosis"] = run_dir / "diagnosis.txt"
    files["plot"] = _plot(run_dir, step, reward, history, fit_info)
    (run_dir / "summary.json").write_text(json.dumps(metrics, indent=2, default=_num))
    files["summary"] = run_dir / "summary.json"
    return DemoResult(run_dir=run_dir, files=files, metrics=metrics)


def _num(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def _fit(step, reward, config: RunConfig, history) -> dict[str, Any] | None:
    """ROM fit on the whole curve and a forecast of 3x as many steps beyond it."""
    if step.size < 6:
        return None
    from pgrpo.dynamics.runfit import fit_run, run_inputs
    from pgrpo.train.online import forecast_metrics

    k = config.grpo.refresh_interval
    lrs = [h.get("learning_rate") for h in history]
    columns = {"learning_rate": np.array(lrs, dtype=float), "optimizer_step": step * k}
    hyper = {"beta1": config.optim.beta1, "refresh_interval": k}
    try:
        fit = fit_run(step, reward, **run_inputs(step, columns, hyper))
        summary = forecast_metrics(list(reward), lrs, config)
    except (ValueError, RuntimeError, FloatingPointError) as exc:
        return {
            "json": {"error": str(exc)},
            "report": f"fit failed: {exc}",
            "summary": {},
            "fit": None,
        }
    future = np.arange(1, 4 * step[-1] + 1)
    return {
        "fit": fit,
        "future": future,
        "predicted": fit.predict(future),
        "summary": summary,
        "report": fit.report(),
        "json": {
            "model": fit.model,
            "params": fit.values,
            "r2": fit.r2,
            "aic": fit.aic,
            "metrics": fit.metrics,
            "forecast": summary,
        },
    }


def _diagnose(history: list[dict[str, Any]]) -> str:
    """A short diagnosis: pgrpo.diagnose's verdicts, plus the degeneracy figures of the run."""
    degenerate = float(np.mean([h["frac_reward_zero_std"] for h in history]))
    fail = float(np.mean([h["degeneracy/all_fail"] for h in history]))
    passed = float(np.mean([h["degeneracy/all_pass"] for h in history]))
    lines = [
        f"degenerate groups (no learning signal): {degenerate:.2f} on average "
        f"(all-fail {fail:.2f}, all-pass {passed:.2f})",
    ]
    try:
        from pgrpo.diagnose import diagnose

        columns = _columns(history)
        verdict = diagnose(columns)
        if verdict.progress is not None:
            lines.append(f"progress ({verdict.progress.label}): {verdict.progress.summary}")
        for mode in verdict.modes:
            flag = "yes" if mode.detected else "no"
            line = f"{mode.name}: {flag} (confidence {mode.confidence:.2f})"
            lines.append(line + (f" -> {mode.action}" if mode.detected and mode.action else ""))
    except Exception as exc:  # the diagnosis is a report: never lose the run over it
        lines.append(f"(pgrpo.diagnose unavailable: {type(exc).__name__}: {exc})")
    return "\n".join(lines)


def _columns(history: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    keys = [k for k, v in history[0].items() if isinstance(v, int | float)]
    return {
        k: np.array([np.nan if h.get(k) is None else h.get(k) for h in history], dtype=float)
        for k in keys
        if all(isinstance(h.get(k), int | float | type(None)) for h in history)
    }


def _plot(run_dir: Path, step, reward, history, fit_info) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ax1.plot(step, reward, "o-", ms=3, label="reward (batch mean)")
    if fit_info is not None and fit_info.get("fit") is not None:
        ax1.plot(fit_info["future"], fit_info["predicted"], "--", label="ROM fit + forecast")
        plateau = fit_info["summary"].get("forecast/plateau")
        if plateau is not None and math.isfinite(plateau):
            ax1.axhline(plateau, color="gray", lw=0.8, ls=":", label=f"plateau {plateau:.2f}")
    ax1.set_xlabel("step")
    ax1.set_ylabel("reward")
    ax1.legend()
    ax2.stackplot(
        step,
        [h["degeneracy/all_fail"] for h in history],
        [h["degeneracy/all_pass"] for h in history],
        labels=["all-fail groups", "all-pass groups"],
    )
    ax2.plot(step, [h["degeneracy/iid_prediction"] for h in history], "k--", label="i.i.d.")
    ax2.set_xlabel("step")
    ax2.set_ylabel("fraction of groups")
    ax2.set_ylim(0, 1)
    ax2.legend()
    fig.tight_layout()
    path = run_dir / "reward.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
