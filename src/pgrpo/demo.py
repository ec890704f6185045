"""`pgrpo demo`: a short GRPO run on the default model and task, then the report of that run
(its fit, forecast, diagnosis and plots), all in one folder (default `runs/demo/`).

The run: SmolLM2-135M-Instruct on single-digit additions (arithmetic level 1), B = 8 prompts x
G = 4 completions, at most 16 new tokens, lr 2e-5, full fine-tune on the CPU. Steps default to
what fits in ~10 minutes here (2-core CPU), model conversion included.

The analysis is `pgrpo report`'s, on the run's own log: `fit.json` holds the report's fit and
forecast, `reward.png` / `degeneracy.png` are the report's panels, `report/report.html` the page,
and `diagnosis.txt` the same `pgrpo.diagnose` verdicts in plain text. It sits above the report
layer for that reason (tests/test_layers.py); see docs/trainer.md, "The demo".
"""

from __future__ import annotations

import json
import math
import os
import shutil
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
    """The report of a finished run, plus its fit, diagnosis and panels as plain files in
    `run_dir`; `history` (the trainer's per-step records) gives the headline numbers. The
    forecast reads the config the run recorded (its task's reward range resolved), not
    `config` as given, whose range is unset unless the user set one."""
    from pgrpo.logs import read_log
    from pgrpo.report import build_report
    from pgrpo.train.log import CONFIG_FILE

    if (run_dir / CONFIG_FILE).is_file():
        config = load_config(run_dir / CONFIG_FILE)

    log = read_log(run_dir)
    reward = np.array([h["reward"] for h in history], dtype=float)
    metrics: dict[str, Any] = {
        "steps": int(history[-1]["step"]),
        "reward_first3": float(reward[:3].mean()),
        "reward_last3": float(reward[-3:].mean()),
        **online_forecast(history, config),
    }
    files: dict[str, Path] = {
        "metrics": run_dir / "metrics.jsonl",
        "config": run_dir / "config.yaml",
    }
    report = build_report(run_dir)
    files["report"] = report.html_path
    doc = fit_document(report.fit, report.forecast, list(report.fit_notes))
    _write(run_dir / "fit.txt", doc.pop("report", doc.get("error", "")) + "\n")
    doc["forecast"] = {k: v for k, v in metrics.items() if k.startswith("forecast/")}
    files["fit"] = _write(run_dir / "fit.json", json.dumps(doc, indent=2, default=_num))
    text = diagnosis_text(log, report.diagnosis)
    files["diagnosis"] = _write(run_dir / "diagnosis.txt", text + "\n")
    for name, key in (("plot", "reward"), ("degeneracy", "degeneracy")):
        if key in report.pngs:  # the report's own panel, beside the run's other files
            files[name] = Path(shutil.copyfile(report.pngs[key], run_dir / f"{key}.png"))
    files["summary"] = _write(run_dir / "summary.json", json.dumps(metrics, indent=2, default=_num))
    return DemoResult(run_dir=run_dir, files=files, metrics=metrics)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _num(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def online_forecast(history: list[dict[str, Any]], config: RunConfig) -> dict[str, Any]:
    """The trainer's online forecast (`forecast/...` keys) at the last step; {} when the run is
    too short or the fit fails (the demo still reports the rest)."""
    from pgrpo.train.online import forecast_metrics

    if len(history) < 6:
        return {}
    try:
        rewards = [h["reward"] for h in history]
        return forecast_metrics(rewards, [h.get("learning_rate") for h in history], config)
    except (ValueError, RuntimeError, FloatingPointError):
        return {}


def fit_document(fit: Any, fc: Any, notes: list[str]) -> dict[str, Any]:
    """fit.json: the report's fit of the whole curve and its backtest forecast from the first
    half (`ReportResult.fit` / `.forecast`, the same objects the report draws and states), or
    the reason they failed; "report" holds the fit's text report (fit.txt)."""
    from pgrpo.dynamics.fitquality import fit_quality

    if fit is None:
        return {"error": "; ".join(notes) or "no fit"}
    doc: dict[str, Any] = {
        "model": fit.model,
        "params": fit.values,
        "r2": fit.r2,
        "aic": fit.aic,
        "metrics": fit.metrics,
        "report": fit.report(),
        # R^2 against the noise, as `pgrpo fit` reports it (NaN: undefined)
        "fit_quality": {k: (v if math.isfinite(v) else None) for k, v in fit_quality(fit).items()},
    }
    if fc is not None:
        doc["backtest"] = {
            "cut_step": fc.cut_step,
            "predicted_mean": fc.predicted_mean,
            "mean_band": list(fc.mean_band),
            "level": fc.level,
            "observed_mean": fc.observed_mean,
        }
    if notes:
        doc["notes"] = notes
    return doc


def diagnosis_text(log: Any, diagnosis: Any) -> str:
    """The degeneracy split of the run, then the diagnosis's progress and mode verdicts."""
    cols = log.columns

    def mean(name: str) -> float:
        col = cols.get(name)
        return float(np.nanmean(col)) if col is not None and np.isfinite(col).any() else np.nan

    lines = [
        f"degenerate groups (no learning signal): {mean('frac_reward_zero_std'):.2f} on average "
        f"(all-fail {mean('degeneracy/all_fail'):.2f}, all-pass {mean('degeneracy/all_pass'):.2f})",
    ]
    if diagnosis.progress is not None:
        lines.append(f"progress ({diagnosis.progress.label}): {diagnosis.progress.summary}")
    for mode in diagnosis.modes:
        flag = "yes" if mode.detected else "no"
        line = f"{mode.name}: {flag} (confidence {mode.confidence:.2f})"
        lines.append(line + (f" -> {mode.action}" if mode.detected and mode.action else ""))
    return "\n".join(lines)
