"""The CPU time of a training step's two parts on the same work, for before/after comparisons.

The `pgrpo demo` workload (SmolLM2-135M-Instruct, arithmetic level 1, B = 8 x G = 4, 16 new
tokens, one thread): `sample` on the same 8 prompts, 4 times, and `trainer.optimize` (K = 1, the
full update incl. optimizer step) on ONE saved rollout, 4 times from the same weights, so two code
versions do exactly the same work. Process CPU time (robust to a shared, loaded machine); the
median of the last 3 repetitions. The first version to run saves the rollout; later ones reuse it.

    rm -f /tmp/rollout.pt
    git archive <old commit> src | tar -x -C /tmp/before
    PYTHONPATH=/tmp/before/src python bench/step_costs.py before
    PYTHONPATH=src python bench/step_costs.py after [key=value ...]

Each run replaces its label's row in bench/results/step_costs.json (label `current` by default).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import time

import torch

from pgrpo.demo import demo_config
from pgrpo.train import trainer
from pgrpo.train.generation import Rollout, sample
from pgrpo.train.setup import build_run

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "step_costs.json")

FIELDS = (
    "input_ids",
    "attention_mask",
    "prompt_len",
    "completion_ids",
    "completion_mask",
    "temperatures",
    "texts",
    "truncated",
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Each run replaces its label's row in bench/results/step_costs.json.",
    )
    parser.add_argument("label", nargs="?", default="current", help="the row's label")
    parser.add_argument("overrides", nargs="*", help="config key=value overrides")
    args = parser.parse_args()
    label, overrides = args.label, args.overrides
    if label.startswith("-") or "=" in label:
        parser.error(f"{label!r} is no label: give the label first, then key=value overrides")
    path = os.environ.get("PGRPO_BENCH_ROLLOUT", "/tmp/rollout.pt")
    torch.set_num_threads(1)
    cfg = demo_config(4, "/tmp/pgrpo-step-costs", ["run.name=ab", *overrides])
    run = build_run(cfg, resume=False)
    prompts = [run.task.prompt(e) for e in run.task.load("train")[:8]]
    if not os.path.exists(path):
        torch.manual_seed(0)
        ro = sample(run.policy, prompts, group_size=4, temperatures=[1.0] * 4, max_new_tokens=16)
        torch.save({k: getattr(ro, k) for k in FIELDS}, path)
    rollout = Rollout(**torch.load(path, weights_only=False))
    adv = torch.randn(rollout.input_ids.shape[0], generator=torch.Generator().manual_seed(0))
    state = {k: v.clone() for k, v in run.policy.model.state_dict().items()}
    gen, upd = [], []
    for i in range(4):
        torch.manual_seed(i)
        t = time.process_time()
        sample(run.policy, prompts, group_size=4, temperatures=[1.0] * 4, max_new_tokens=16)
        gen.append(time.process_time() - t)
        run.policy.model.load_state_dict(state)
        t = time.process_time()
        trainer.optimize(run, rollout, adv)
        upd.append(time.process_time() - t)
    precision = getattr(run.policy, "precision", None)
    out = {
        "label": label,
        "precision": precision.name if precision is not None else "fp32",
        "completion_tokens": int(rollout.completion_mask.sum()),
        "generate_cpu_s": [round(x, 3) for x in gen],
        "update_cpu_s": [round(x, 3) for x in upd],
        "generate_median": round(statistics.median(gen[1:]), 3),
        "update_median": round(statistics.median(upd[1:]), 3),
    }
    print(json.dumps(out))
    doc = {"results": []}
    if os.path.exists(OUT):
        with open(OUT) as fh:
            doc = json.load(fh)
    doc["results"] = [r for r in doc["results"] if r.get("label") != label] + [out]
    doc["command"] = "python bench/step_costs.py LABEL [key=value ...]  (one run per code version)"
    doc["date"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    with open(OUT, "w") as fh:
        json.dump(doc, fh, indent=1)


if __name__ == "__main__":
    main()
