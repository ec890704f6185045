"""The `sign` part of `bench/reproduce_lm.py`: gradient starvation and the Sign advantage
(arXiv 2605.07689) on SmolLM2-135M-Instruct.

    python bench/reproduce_lm.py --part sign               # resumable: finished runs are skipped
    python bench/reproduce_lm.py --part sign --seeds 7     # a resume may add seeds
    python bench/reproduce_lm.py --part sign --markdown    # the docs tables from the JSON

Arithmetic levels 1 and 2 (single-digit additions; two-digit +/- one-digit), where the base
model's samples are right ~3% of the time, so most G = 4 groups are all-fail and a group-centred
advantage is exactly zero for them. Arms: `sign` (A = 2r - 1), `dr_grpo` (r - mean, the trainer's
default token-mean aggregator) at the same learning rate, and `dr_grpo` at the
learning-rate-matched control lr x 2G/(G-1) (in a bandit the expected Sign gradient is 2G/(G-1)
times Dr. GRPO's, notes/advantages.md section 1). Run order: seed 0 of every arm, then seed 1,
... (a cut leaves a balanced design).

Per run: training with the pgrpo trainer (metrics.jsonl: the degeneracy rate and its i.i.d.
prediction per step); then the final checkpoint is evaluated on a fixed held-out set of test
problems (greedy, and G samples at T = 1 for pass@k, k = 1..G), and deleted. The base model is
evaluated once on the same problems. The results JSON (`bench/results/reproduce_lm_sign.json`) is
rewritten after every run with the per-seed numbers and the analysis
(`reproduce_lm_sign_analysis`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from reproduce_lm_sign_analysis import analyse, by_level, degeneracy_series, markdown, print_table

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
GREEDY_TEMPERATURE = 1e-4
"""Near-greedy decoding through the trainer's sampler (it has no argmax path): logits / 1e-4 in
float64 puts all mass on the argmax unless two logits tie within ~1e-3 (then one is drawn)."""


# ---------------------------------------------------------------------------------------------
# Settings and arms
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SignSettings:
    """One Sign-vs-Dr.GRPO experiment; a results JSON written under other settings is not mixed
    with this one (resume refuses it)."""

    seeds: int = 5
    """Seeds per arm (the seed sets sampling and the prompt order)."""
    steps: int = 8
    batch_prompts: int = 6
    group_size: int = 4
    lr: float = 2e-5
    max_new_tokens: int = 16
    levels: tuple[int, ...] = (1, 2)
    """Arithmetic levels trained and evaluated on (1: single-digit addition, 2: two-digit +/-
    one-digit); level 2 alone does not move in 10 steps of 6 x 4 (reward flat at ~0.02)."""
    problems: int = 64
    """Held-out test problems (a seeded draw from the task's test split, the same for every run)."""
    eval_seed: int = 1000
    model: str = "smollm2"
    """`model.name` ('tiny' for a smoke test of the driver)."""

    def __post_init__(self) -> None:
        for name in ("seeds", "steps", "batch_prompts", "problems"):
            if getattr(self, name) < 1:
                raise ValueError(
                    f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}"
                )
        if self.group_size < 2:
            raise ValueError(
                f"--group-size must be >= 2 (a group needs two rewards), got {self.group_size}"
            )
        if not self.levels or any(lv not in range(1, 7) for lv in self.levels):
            raise ValueError(f"--levels must be arithmetic levels in 1..6, got {self.levels}")
        if not self.lr > 0:
            raise ValueError(f"--lr must be > 0, got {self.lr}")


@dataclass(frozen=True)
class Arm:
    name: str
    advantage: str
    lr_factor: float
    """Learning rate = settings.lr x lr_factor."""


def sign_arms(group_size: int) -> tuple[Arm, ...]:
    """sign, dr_grpo at the same lr, dr_grpo at lr x 2G/(G-1)."""
    return (
        Arm("sign", "sign", 1.0),
        Arm("dr_grpo", "dr_grpo", 1.0),
        Arm("dr_grpo_lr_matched", "dr_grpo", 2.0 * group_size / (group_size - 1)),
    )


def run_order(arms: Sequence[Arm], seeds: int) -> list[tuple[Arm, int]]:
    """Seed 0 of every arm, then seed 1, ...: a cut anywhere leaves the arms within one run."""
    return [(arm, seed) for seed in range(seeds) for arm in arms]


def run_key(arm: Arm, seed: int) -> str:
    return f"{arm.name}/seed{seed}"


def overrides(settings: SignSettings, arm: Arm, seed: int, output_dir: Path) -> list[str]:
    """The trainer's key=value settings of one run (what `pgrpo train` would be given)."""
    levels = ", ".join(str(lv) for lv in settings.levels)
    return [
        f"model.name={settings.model}",
        "task.name=arithmetic",
        f"task.options={{levels: [{levels}]}}",
        f"grpo.advantage={arm.advantage}",
        f"grpo.group_size={settings.group_size}",
        f"grpo.batch_prompts={settings.batch_prompts}",
        f"generation.max_new_tokens={settings.max_new_tokens}",
        f"optim.lr={settings.lr * arm.lr_factor:.6g}",
        f"run.steps={settings.steps}",
        f"run.seed={seed}",
        "run.torch_threads=1",
        "run.checkpoint_every=0",
        "run.forecast_every=0",
        f"run.output_dir={output_dir}",
        f"run.name={arm.name}_seed{seed}",
    ]


# ---------------------------------------------------------------------------------------------
# Model work: train, evaluate (reuses the trainer's rollout path and pgrpo.evaluate's statistics)
# ---------------------------------------------------------------------------------------------


def eval_problems(task: Any, problems: int, seed: int = 0) -> list[dict[str, Any]]:
    """The fixed held-out set: a seeded draw (as `pgrpo eval --problems`) from the test split."""
    examples, seen = [], set()
    for e in task.load("test"):  # distinct problems (a small level's test pool repeats)
        if e["expression"] not in seen:
            seen.add(e["expression"])
            examples.append(e)
    idx = np.arange(len(examples))
    if problems < len(examples):
        idx = np.sort(np.random.default_rng(seed).choice(idx, problems, replace=False))
    return [examples[i] for i in idx]


def held_out_levels(settings: SignSettings) -> dict[str, int]:
    """Problem id (its expression) -> arithmetic level, for the held-out set."""
    from pgrpo.tasks import get_task
    from pgrpo.train.rollout import import_tasks

    import_tasks()
    task = get_task("arithmetic", levels=list(settings.levels))
    return {str(e["expression"]): int(e["level"]) for e in eval_problems(task, settings.problems)}


def evaluate_policy(
    policy: Any,
    task: Any,
    examples: Sequence[dict[str, Any]],
    *,
    samples: int,
    temperature: float,
    max_new_tokens: int,
    seed: int,
    name: str,
    step: int,
    batch_prompts: int = 8,
) -> dict[str, Any]:
    """`pgrpo.evaluate.evaluate`'s loop on an already loaded policy and task (that function
    builds the task without the run's options, so it would evaluate every arithmetic level):
    samples per problem through `sample_and_score`, correct by `tasks.base.is_correct` (the
    final number; the same as reward >= 1 at the runs' format_weight 0, which the recorded
    results used); the EvalRun summary."""
    import torch

    from pgrpo.evaluate import EvalRun
    from pgrpo.tasks.base import is_correct
    from pgrpo.train.rollout import sample_and_score

    torch.manual_seed(seed)
    n, c = [], []
    for start in range(0, len(examples), batch_prompts):
        batch = list(examples[start : start + batch_prompts])
        scored = sample_and_score(
            policy, task, batch, group_size=samples, temperatures=[temperature] * samples,
            max_new_tokens=max_new_tokens, reward_timeout_s=10.0,
        )  # fmt: skip
        texts = scored.rollout.texts  # example-major: the rewards' [B * G] order
        n += [samples] * len(batch)
        c += [
            sum(is_correct(task, texts[i * samples + j], ex) for j in range(samples))
            for i, ex in enumerate(batch)
        ]
    ids = [str(e.get("expression", i)) for i, e in enumerate(examples)]
    run = EvalRun(
        name=name, ids=ids, n=n, c=c, step=step, seed=seed, task="arithmetic", split="test"
    )
    return run.summary()


def evaluate_both(policy: Any, task: Any, settings: SignSettings, name: str, step: int, seed: int):
    """(greedy summary, G-sample summary) on the fixed held-out problems."""
    examples = eval_problems(task, settings.problems)
    common = dict(max_new_tokens=settings.max_new_tokens, step=step)
    greedy = evaluate_policy(
        policy, task, examples, samples=1, temperature=GREEDY_TEMPERATURE, seed=seed,
        name=f"{name}/greedy", batch_prompts=8 * settings.group_size, **common,
    )  # fmt: skip
    sampled = evaluate_policy(
        policy, task, examples, samples=settings.group_size, temperature=1.0, seed=seed + 1,
        name=f"{name}/sampled", **common,
    )  # fmt: skip
    return greedy, sampled


def baseline_eval(settings: SignSettings, scratch: Path) -> dict[str, Any]:
    """The base model on the held-out problems (shared by every arm)."""
    from pgrpo.train.config import load_config
    from pgrpo.train.rollout import load_task_and_policy

    t0 = time.perf_counter()
    cfg = load_config(None, overrides(settings, sign_arms(settings.group_size)[0], 0, scratch))
    task, policy = load_task_and_policy(cfg)
    greedy, sampled = evaluate_both(policy, task, settings, "base", 0, settings.eval_seed)
    return {
        "eval_greedy": greedy,
        "eval_sampled": sampled,
        "jensen_heldout": _jensen(sampled, settings.group_size),
        "seconds": time.perf_counter() - t0,
    }


def _jensen(summary: dict[str, Any], group_size: int) -> dict[str, Any]:
    """D_true from the held-out per-problem success counts against f_G(mean p)."""
    from pgrpo.core.degeneracy import jensen_estimate

    n = np.array([p["n"] for p in summary["per_problem"]])
    c = np.array([p["c"] for p in summary["per_problem"]])
    est = jensen_estimate(c / n, group_size, num_samples=n)
    return {k: float(v) for k, v in est.metrics.items()}


def train_and_evaluate(settings: SignSettings, arm: Arm, seed: int, scratch: Path, logs: Path):
    """Train one run in `scratch`, keep metrics.jsonl + config.yaml under `logs`, evaluate the
    final checkpoint, delete the run folder (checkpoints are never kept)."""
    from pgrpo.train.checkpoint import latest_checkpoint
    from pgrpo.train.config import load_config
    from pgrpo.train.log import read_metrics
    from pgrpo.train.rollout import load_task_and_policy
    from pgrpo.train.trainer import train

    cfg = load_config(None, overrides(settings, arm, seed, scratch))
    t0 = time.perf_counter()
    train(cfg, overwrite=True)
    t1 = time.perf_counter()
    run_dir = cfg.run_dir
    history = read_metrics(run_dir)
    if len(history) != settings.steps:
        raise RuntimeError(f"{run_dir}: {len(history)} steps logged, expected {settings.steps}")
    keep = logs / f"{arm.name}_seed{seed}"
    keep.mkdir(parents=True, exist_ok=True)
    for f in ("metrics.jsonl", "config.yaml"):
        shutil.copy2(run_dir / f, keep / f)
    task, policy = load_task_and_policy(cfg, checkpoint=latest_checkpoint(run_dir))
    name = run_key(arm, seed)
    greedy, sampled = evaluate_both(
        policy, task, settings, name, settings.steps, settings.eval_seed
    )
    del policy
    shutil.rmtree(run_dir)
    t2 = time.perf_counter()
    return {
        "arm": arm.name,
        "seed": seed,
        "advantage": arm.advantage,
        "lr": settings.lr * arm.lr_factor,
        "eval_greedy": greedy,
        "eval_sampled": sampled,
        "degeneracy": degeneracy_series(history),
        "seconds": {"train": t1 - t0, "eval": t2 - t1, "total": t2 - t0},
        "s_per_step": float(
            np.mean(
                [h["time/generate_s"] + h["time/score_s"] + h["time/update_s"] for h in history]
            )
        ),
        "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


# ---------------------------------------------------------------------------------------------
# The part: resumable driver
# ---------------------------------------------------------------------------------------------


def _write(path: Path, doc: dict[str, Any]) -> None:
    from pgrpo.evaluate.runner import json_safe

    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(json_safe(doc), indent=1, allow_nan=False))
    tmp.replace(path)


def _load(path: Path, settings: SignSettings) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    doc = json.loads(path.read_text())
    new = json.loads(json.dumps(asdict(settings)))
    old = dict(doc.get("settings") or {})
    if {**old, "seeds": None} != {**new, "seeds": None}:
        print(
            f"error: {path} holds results under other settings ({doc.get('settings')}); "
            "pass the same settings to resume (--seeds may grow), or --out a new file",
            file=sys.stderr,
        )
        raise SystemExit(2)
    doc["settings"]["seeds"] = max(int(old["seeds"]), settings.seeds)  # more seeds: extend
    return doc


def _machine() -> str:
    load = os.getloadavg()[0]
    cpus = f"{platform.machine()}, {os.cpu_count()} CPUs shared"
    return f"{cpus}, load average {load:.1f} at start, torch threads 1"


def parse_sign(argv: Sequence[str]) -> tuple[SignSettings, argparse.Namespace]:
    p = argparse.ArgumentParser(
        prog="reproduce_lm.py --part sign", description=__doc__.split("\n\n")[0]
    )
    d = SignSettings()
    for name in ("seeds", "steps", "batch_prompts", "group_size", "problems"):
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(d, name))
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--model", default=d.model)
    p.add_argument(
        "--levels", default=",".join(map(str, d.levels)), help="arithmetic levels, e.g. 1,2"
    )
    p.add_argument("--out", type=Path, default=RESULTS / "reproduce_lm_sign.json")
    p.add_argument("--logs", type=Path, default=RESULTS / "reproduce_lm_runs" / "sign")
    p.add_argument("--scratch", type=Path, default=ROOT / "runs" / "reproduce_lm_sign")
    p.add_argument(
        "--deadline", default=None,
        help="HH:MM UTC (its next occurrence): start no run that would end later",
    )  # fmt: skip
    p.add_argument(
        "--markdown", action="store_true", help="print the docs tables from --out; run nothing"
    )
    p.add_argument(
        "--reanalyse",
        action="store_true",
        help="recompute the analysis in --out from its per-run records and rewrite it; no model",
    )
    args = p.parse_args(list(argv))
    try:
        fields = {
            k: getattr(args, k)
            for k in ("seeds", "steps", "batch_prompts", "group_size", "problems", "lr", "model")
        }
        levels = tuple(int(x) for x in str(args.levels).split(",") if x.strip())
        return SignSettings(**fields, levels=levels), args
    except ValueError as exc:
        p.error(str(exc))
        raise  # unreachable: p.error exits 2


def run_sign(argv: Sequence[str]) -> int:
    settings, args = parse_sign(argv)
    arms = sign_arms(settings.group_size)
    if args.markdown or args.reanalyse:
        if not args.out.is_file():
            print(f"error: {args.out} does not exist; run the part first", file=sys.stderr)
            return 2
        doc = json.loads(args.out.read_text())
        if doc.get("runs"):  # the analysis afresh from the per-run records (pure)
            doc["analysis"] = analyse(doc["runs"], doc["baseline"], arms)
            doc["analysis"]["by_level"] = by_level(doc, held_out_levels(settings))
        if args.reanalyse:
            now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
            doc["reanalysed"] = {
                "command": "python bench/reproduce_lm.py --part sign " + " ".join(argv),
                "date": now,
            }
            _write(args.out, doc)
        if args.markdown:
            print(markdown(doc))
        return 0
    doc = _load(args.out, settings) or {
        "command": "python bench/reproduce_lm.py --part sign " + " ".join(argv),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": _machine(),
        "model": "SmolLM2-135M-Instruct (bf16 autocast, full fine-tune)",
        "settings": asdict(settings),
        "arms": [asdict(a) for a in arms],
        "greedy_temperature": GREEDY_TEMPERATURE,
        "runs": {},
    }
    command = "python bench/reproduce_lm.py --part sign " + " ".join(argv)
    if command != doc["command"]:  # a resume with other arguments (more seeds, a deadline)
        doc.setdefault("resumed_with", []).append(
            {"command": command, "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if "baseline" not in doc:
        doc["baseline"] = baseline_eval(settings, args.scratch)
        _write(args.out, doc)
        print(f"base: greedy {doc['baseline']['eval_greedy']['accuracy']:.3f}", flush=True)
    for arm, seed in run_order(arms, settings.seeds):
        key = run_key(arm, seed)
        if key in doc["runs"]:
            continue
        if _past_deadline(args.deadline, doc["runs"].values()):
            print(f"deadline {args.deadline} UTC: stopping before {key} (rerun to resume)")
            break
        doc["runs"][key] = train_and_evaluate(settings, arm, seed, args.scratch, args.logs)
        doc["analysis"] = analyse(doc["runs"], doc["baseline"], arms)
        doc["analysis"]["by_level"] = by_level(doc, held_out_levels(settings))
        doc["updated"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        _write(args.out, doc)
        r = doc["runs"][key]
        print(
            f"{key}: greedy {r['eval_greedy']['accuracy']:.3f} "
            f"sampled {r['eval_sampled']['accuracy']:.3f} ({r['seconds']['total']:.0f} s)",
            flush=True,
        )
    if doc["runs"]:
        print_table(doc)
    return 0


def _past_deadline(deadline: str | None, done: Any) -> bool:
    """True when the next run, at the mean duration of those done so far, would end after
    `deadline` (HH:MM UTC, its next occurrence: 00:30 given at 23:00 is tomorrow's; read as
    today's, a sweep started before midnight stopped at once)."""
    secs = [r["seconds"]["total"] for r in done]
    if deadline is None or not secs:
        return False
    now = dt.datetime.now(dt.UTC)
    hh, mm = (int(x) for x in deadline.split(":"))
    end = now.replace(hour=hh, minute=mm, second=0, microsecond=0)
    if end <= now:
        end += dt.timedelta(days=1)
    return now + dt.timedelta(seconds=float(np.mean(secs))) > end
