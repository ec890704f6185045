"""The papers' headline experiments on a real language model (issue #16), SmolLM2-135M-Instruct.

    python bench/reproduce_lm.py --part sign            # resumable: finished runs are skipped
    python bench/reproduce_lm.py --part sign --seeds 5 --steps 12 --problems 64

Parts (`PARTS`): `sign`: gradient starvation and the Sign advantage (arXiv 2605.07689). Arithmetic
level 2 (two-digit +/- one-digit), where the base model's samples are right ~3% of the time, so
most G = 4 groups are all-fail and a group-centred advantage is exactly zero for them. Arms:
`sign` (A = 2r - 1), `dr_grpo` (r - mean, the trainer's default token-mean aggregator) at the same
learning rate, and `dr_grpo` at the learning-rate-matched control lr x 2G/(G-1) (in a bandit the
expected Sign gradient is 2G/(G-1) times Dr. GRPO's, notes/advantages.md section 1). Run order:
seed 0 of every arm, then seed 1, ... (a cut leaves a balanced design).

Per run: training with the pgrpo trainer (metrics.jsonl: the degeneracy rate and its i.i.d.
prediction per step); then the final checkpoint is evaluated on a fixed held-out set of test
problems (greedy, and G samples at T = 1 for pass@k, k = 1..G), and deleted. The base model is
evaluated once on the same problems. The results JSON (`bench/results/reproduce_lm_sign.json`) is
rewritten after every run with the per-seed numbers and the analysis (per arm: mean and t
interval over seeds, Welch's t on seed means, intervals over problems, pass@k before/after and
the search-compression verdict, the degeneracy rate against f_G(pbar) along training).
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
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

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
# Pure analysis (tested on synthetic data in tests/test_bench_reproduce_lm.py)
# ---------------------------------------------------------------------------------------------


def degeneracy_series(history: Sequence[dict[str, Any]]) -> dict[str, list[float]]:
    """Per step of one run's metrics.jsonl: the observed zero-variance share, its all-fail and
    all-pass parts, the i.i.d. prediction f_G(pbar) at the batch-mean reward, and the Jensen gap
    (observed - predicted; > 0 when prompts differ in difficulty)."""
    obs = [float(h["frac_reward_zero_std"]) for h in history]
    iid = [float(h["degeneracy/iid_prediction"]) for h in history]
    return {
        "step": [int(h["step"]) for h in history],
        "reward": [float(h["reward"]) for h in history],
        "observed": obs,
        "all_fail": [float(h["degeneracy/all_fail"]) for h in history],
        "all_pass": [float(h["degeneracy/all_pass"]) for h in history],
        "iid_prediction": iid,
        "jensen_gap": [o - p for o, p in zip(obs, iid, strict=True)],
    }


def seed_summary(values: Sequence[float]) -> dict[str, Any]:
    """Mean, sd and the t interval over seeds (`pgrpo.core.stats.mean_ci`; None with one seed)."""
    from pgrpo.core.stats import mean_ci

    x = np.asarray(values, dtype=float)
    out: dict[str, Any] = {"n": int(x.size), "mean": float(x.mean()), "values": x.tolist()}
    out["sd"] = float(x.std(ddof=1)) if x.size >= 2 else None
    out["ci"] = [mean_ci(x).low, mean_ci(x).high] if x.size >= 2 else None
    return out


def welch(a: Sequence[float], b: Sequence[float]) -> dict[str, Any] | None:
    """Welch's t of mean(a) - mean(b) over seeds (`pgrpo.core.stats.welch_t`, scipy); None with
    fewer than two seeds in either."""
    from pgrpo.core.stats import welch_t

    if len(a) < 2 or len(b) < 2:
        return None
    w = welch_t(list(a), list(b))
    return {
        "diff": w.diff,
        "ci": [w.diff_low, w.diff_high],
        "t": w.t,
        "dof": w.dof,
        "p": w.p_value,
        "hedges_g": w.hedges_g,
    }


def _eval_runs(records: Sequence[dict[str, Any]]) -> list[Any]:
    from pgrpo.evaluate import EvalRun

    return [EvalRun.from_summary(r) for r in records]


def arm_analysis(runs: Sequence[dict[str, Any]], baseline: dict[str, Any]) -> dict[str, Any]:
    """One arm's finished runs (each: greedy and sampled eval summaries, degeneracy series,
    seconds) against the base model's evaluation."""
    from pgrpo.evaluate import aggregate, search_compression

    greedy = _eval_runs([r["eval_greedy"] for r in runs])
    sampled = _eval_runs([r["eval_sampled"] for r in runs])
    base_sampled = _eval_runs([baseline["eval_sampled"]])
    gaps = [float(np.mean(r["degeneracy"]["jensen_gap"])) for r in runs]
    return {
        "seeds": [r["seed"] for r in runs],
        "greedy_accuracy": seed_summary([g.accuracy for g in greedy]),
        "greedy_accuracy_problems": aggregate(greedy),
        "sample_accuracy": seed_summary([s.accuracy for s in sampled]),
        "sampled": aggregate(sampled),
        "search_compression": search_compression(base_sampled, sampled),
        "final_train_reward": seed_summary([r["degeneracy"]["reward"][-1] for r in runs]),
        "mean_train_reward": seed_summary(
            [float(np.mean(r["degeneracy"]["reward"])) for r in runs]
        ),
        "degeneracy_observed": seed_summary(
            [float(np.mean(r["degeneracy"]["observed"])) for r in runs]
        ),
        "degeneracy_iid": seed_summary(
            [float(np.mean(r["degeneracy"]["iid_prediction"])) for r in runs]
        ),
        "jensen_gap": seed_summary(gaps),
        "degeneracy_by_step": _mean_by_step(runs),
        "seconds": seed_summary([r["seconds"]["total"] for r in runs]),
        "train_seconds": seed_summary([r["seconds"]["train"] for r in runs]),
    }


def _mean_by_step(runs: Sequence[dict[str, Any]]) -> dict[str, list[float]]:
    """Each degeneracy column averaged over seeds, step by step (runs of equal length)."""
    length = min(len(r["degeneracy"]["step"]) for r in runs)
    cols = ("reward", "observed", "iid_prediction", "jensen_gap", "all_fail", "all_pass")
    out: dict[str, list[float]] = {"step": runs[0]["degeneracy"]["step"][:length]}
    for col in cols:
        out[col] = np.mean([r["degeneracy"][col][:length] for r in runs], axis=0).tolist()
    return out


def analyse(
    runs: dict[str, dict[str, Any]], baseline: dict[str, Any], arms: Sequence[Arm]
) -> dict[str, Any]:
    """Per arm `arm_analysis`; Welch's t on seed means of greedy and sampled accuracy for the
    first arm (sign) against each other arm, on the seeds both finished."""
    by_arm = {a.name: [r for r in runs.values() if r["arm"] == a.name] for a in arms}
    out: dict[str, Any] = {"arms": {}, "comparisons": {}}
    for name, rs in by_arm.items():
        if rs:
            out["arms"][name] = arm_analysis(sorted(rs, key=lambda r: r["seed"]), baseline)
    done = list(runs.values())
    if done:  # every run's mean per-step gap, pooled over arms: is the gap > 0 (Jensen)?
        gaps = [float(np.mean(r["degeneracy"]["jensen_gap"])) for r in done]
        out["jensen_gap_pooled"] = seed_summary(gaps)
        if len(gaps) >= 2:
            from scipy.stats import ttest_1samp, wilcoxon

            out["jensen_gap_pooled"]["t_test_p"] = float(ttest_1samp(gaps, 0.0).pvalue)
            out["jensen_gap_pooled"]["positive_runs"] = int(np.sum(np.asarray(gaps) > 0))
            if np.any(np.asarray(gaps) != 0):
                out["jensen_gap_pooled"]["wilcoxon_p"] = float(wilcoxon(gaps).pvalue)
    first = arms[0].name
    for other in arms[1:]:
        a, b = _paired_seeds(by_arm[first], by_arm[other.name])
        if not a:
            continue
        out["comparisons"][f"{first}_vs_{other.name}"] = {
            "seeds": [r["seed"] for r in a],
            **{
                metric: welch([_metric(r, metric) for r in a], [_metric(r, metric) for r in b])
                for metric in (
                    "greedy_accuracy",
                    "sample_accuracy",
                    "pass_at_G",
                    "mean_train_reward",
                )
            },
        }
    return out


def by_level(doc: dict[str, Any], level_of: dict[str, int]) -> dict[str, Any]:
    """Greedy and sampled accuracy per task level (seed mean) for the base model and each arm;
    level_of: problem id -> level (from the held-out examples themselves)."""

    def acc(summary: dict[str, Any]) -> dict[str, float]:
        per: dict[int, list[float]] = {}
        for p in summary["per_problem"]:
            per.setdefault(level_of[p["id"]], []).append(p["c"] / p["n"])
        return {str(lv): float(np.mean(v)) for lv, v in sorted(per.items())}

    def mean(dicts: list[dict[str, float]]) -> dict[str, float]:
        return {k: float(np.mean([d[k] for d in dicts])) for k in dicts[0]}

    base = doc["baseline"]
    counts: dict[str, int] = {}
    for p in base["eval_greedy"]["per_problem"]:
        counts[str(level_of[p["id"]])] = counts.get(str(level_of[p["id"]]), 0) + 1
    out: dict[str, Any] = {
        "problems": dict(sorted(counts.items())),
        "base": {"greedy": acc(base["eval_greedy"]), "sampled": acc(base["eval_sampled"])},
    }
    for arm in sorted({r["arm"] for r in doc["runs"].values()}):
        rs = [r for r in doc["runs"].values() if r["arm"] == arm]
        out[arm] = {
            "greedy": mean([acc(r["eval_greedy"]) for r in rs]),
            "sampled": mean([acc(r["eval_sampled"]) for r in rs]),
        }
    return out


def _paired_seeds(a: list[dict], b: list[dict]) -> tuple[list[dict], list[dict]]:
    seeds = sorted({r["seed"] for r in a} & {r["seed"] for r in b})
    pick = lambda rs: [next(r for r in rs if r["seed"] == s) for s in seeds]  # noqa: E731
    return pick(a), pick(b)


def _metric(run: dict[str, Any], name: str) -> float:
    if name == "greedy_accuracy":
        return float(run["eval_greedy"]["accuracy"])
    if name == "sample_accuracy":
        return float(run["eval_sampled"]["accuracy"])
    if name == "pass_at_G":
        curve = run["eval_sampled"]["pass_at_k"]
        return float(curve[str(max(int(k) for k in curve))])
    return float(np.mean(run["degeneracy"]["reward"]))


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
    samples per problem through `sample_and_score`, correct = reward >= 1; the EvalRun summary."""
    import torch

    from pgrpo.evaluate import EvalRun
    from pgrpo.train.rollout import sample_and_score

    torch.manual_seed(seed)
    n, c = [], []
    for start in range(0, len(examples), batch_prompts):
        batch = list(examples[start : start + batch_prompts])
        scored = sample_and_score(
            policy, task, batch, group_size=samples, temperatures=[temperature] * samples,
            max_new_tokens=max_new_tokens, reward_timeout_s=10.0,
        )  # fmt: skip
        correct = (scored.rewards.double().numpy().reshape(len(batch), samples) >= 1 - 1e-9).sum(1)
        n += [samples] * len(batch)
        c += [int(x) for x in correct]
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
    p.add_argument("--deadline", default=None, help="HH:MM UTC: start no run that would end later")
    p.add_argument(
        "--markdown", action="store_true", help="print the docs tables from --out; run nothing"
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
    if args.markdown:
        if not args.out.is_file():
            print(f"error: {args.out} does not exist; run the part first", file=sys.stderr)
            return 2
        doc = json.loads(args.out.read_text())
        if doc.get("runs"):  # the analysis afresh from the per-run records (pure)
            doc["analysis"] = analyse(doc["runs"], doc["baseline"], arms)
            doc["analysis"]["by_level"] = by_level(doc, held_out_levels(settings))
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
    `deadline` (HH:MM UTC today)."""
    secs = [r["seconds"]["total"] for r in done]
    if deadline is None or not secs:
        return False
    now = dt.datetime.now(dt.UTC)
    hh, mm = (int(x) for x in deadline.split(":"))
    end = now.replace(hour=hh, minute=mm, second=0, microsecond=0)
    return now + dt.timedelta(seconds=float(np.mean(secs))) > end


def print_table(doc: dict[str, Any]) -> None:
    base = doc["baseline"]
    print(f"\nbase: greedy {base['eval_greedy']['accuracy']:.3f}", end=", ")
    print(f"pass@k {base['eval_sampled']['pass_at_k']}")
    head = ("arm", "seeds", "greedy acc", "sample acc", "pass@G", "degen obs/iid", "s/run")
    print("{:<20} {:>5} {:>18} {:>18} {:>7} {:>14} {:>6}".format(*head))
    for name, a in doc["analysis"]["arms"].items():
        g, s = a["greedy_accuracy"], a["sample_accuracy"]
        kmax = str(a["search_compression"]["k_max"])
        print(
            f"{name:<20} {g['n']:>5} {_fmt(g):>18} {_fmt(s):>18} "
            f"{a['sampled']['pass_at_k'][kmax]:>7.3f} "
            f"{a['degeneracy_observed']['mean']:>6.3f}/{a['degeneracy_iid']['mean']:.3f} "
            f"{a['seconds']['mean']:>6.0f}"
        )
    for name, cmp in doc["analysis"]["comparisons"].items():
        w = cmp["greedy_accuracy"]
        if w:  # t and p are null (NaN) when both arms' seeds are constant
            t, pv = (f"{w[k]:.3g}" if w[k] is not None else "undefined" for k in ("t", "p"))
            print(f"{name}: greedy diff {w['diff']:+.3f} t {t} p {pv}")


def _ci(x: Sequence[float | None] | None) -> str:
    return "n/a" if not x or None in x else f"[{x[0]:.3f}, {x[1]:.3f}]"


def _num(x: float | None, spec: str = ".3f") -> str:
    return "n/a" if x is None else format(x, spec)


def markdown(doc: dict[str, Any]) -> str:
    """The docs tables (docs/reproductions_lm.md) from a results JSON: accuracy and pass@k per
    arm, Welch's t per comparison, the degeneracy rate along training."""
    base, analysis = doc["baseline"], doc["analysis"]
    lrs = {a["name"]: doc["settings"]["lr"] * a["lr_factor"] for a in doc["arms"]}
    ks = list(base["eval_sampled"]["pass_at_k"])
    lines = [
        "| arm | lr | seeds | greedy accuracy (seed mean, t 95% CI) | CI over problems | "
        + " | ".join(f"pass@{k}" for k in ks)
        + " | verdict | wall s/run |",
        "|---" * (7 + len(ks)) + "|",
        f"| base model | | | {base['eval_greedy']['accuracy']:.3f} | "
        f"{_ci(base['eval_greedy']['accuracy_ci'])} | "
        + " | ".join(f"{base['eval_sampled']['pass_at_k'][k]:.3f}" for k in ks)
        + " | | |",
    ]
    for name, a in analysis["arms"].items():
        g, sc = a["greedy_accuracy"], a["search_compression"]
        lines.append(
            f"| {name} | {lrs[name]:.3g} | {g['n']} | {g['mean']:.3f} {_ci(g['ci'])} | "
            f"{_ci(a['greedy_accuracy_problems']['accuracy_ci'])} | "
            + " | ".join(f"{a['sampled']['pass_at_k'][k]:.3f}" for k in ks)
            + f" | {sc['verdict']} | {a['seconds']['mean']:.0f} |"
        )
    lines += ["", "| comparison | metric | diff | 95% CI | Welch t | dof | p | Hedges g |"]
    lines.append("|---" * 8 + "|")
    for name, cmp in analysis["comparisons"].items():
        for metric in ("greedy_accuracy", "sample_accuracy", "pass_at_G", "mean_train_reward"):
            w = cmp[metric]
            if w:
                lines.append(
                    f"| {name} ({len(cmp['seeds'])} seeds) | {metric} | {w['diff']:+.3f} | "
                    f"{_ci(w['ci'])} | {_num(w['t'], '.2f')} | {_num(w['dof'], '.1f')} | "
                    f"{_num(w['p'], '.3g')} | {_num(w['hedges_g'], '.2f')} |"
                )
    pooled = analysis.get("jensen_gap_pooled")
    if pooled and pooled.get("ci"):
        lines += [
            "",
            f"Jensen gap (observed zero-std share - f_G(batch-mean reward)), each run's mean over "
            f"its steps, pooled over {pooled['n']} runs: {pooled['mean']:+.3f} "
            f"{_ci(pooled['ci'])}, {pooled['positive_runs']} of {pooled['n']} runs > 0, "
            f"t-test p = {pooled['t_test_p']:.3g}, "
            f"Wilcoxon p = {_num(pooled.get('wilcoxon_p'), '.3g')}.",
        ]
    levels = analysis.get("by_level")
    if levels:
        lv = list(levels["problems"])
        head = " | ".join(f"level {k} ({levels['problems'][k]} problems)" for k in lv)
        lines += ["", f"| greedy / sampled accuracy | {head} |", "|---" * (1 + len(lv)) + "|"]
        for name in ["base", *analysis["arms"]]:
            g, smp = levels[name]["greedy"], levels[name]["sampled"]
            cells = " | ".join(f"{g[k]:.3f} / {smp[k]:.3f}" for k in lv)
            lines.append(f"| {name} | {cells} |")
    names = list(analysis["arms"])
    lines += [
        "",
        "| step | " + " | ".join(f"{n}: reward, zero-std / iid / gap" for n in names) + " |",
    ]
    lines.append("|---" * (1 + len(names)) + "|")
    steps = analysis["arms"][names[0]]["degeneracy_by_step"]["step"]
    for i, step in enumerate(steps):
        cells = []
        for n in names:
            d = analysis["arms"][n]["degeneracy_by_step"]
            if i < len(d["step"]):
                cells.append(
                    f"{d['reward'][i]:.3f}, {d['observed'][i]:.3f} / "
                    f"{d['iid_prediction'][i]:.3f} / {d['jensen_gap'][i]:+.3f}"
                )
            else:
                cells.append("")
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _fmt(s: dict[str, Any]) -> str:
    ci = s["ci"]
    return f"{s['mean']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci and None not in ci else "")


PARTS: dict[str, Callable[[Sequence[str]], int]] = {"sign": run_sign}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], add_help=False)
    p.add_argument("--part", required=True, choices=sorted(PARTS))
    args, rest = p.parse_known_args(argv)
    return PARTS[args.part](rest)


if __name__ == "__main__":
    sys.exit(main())
