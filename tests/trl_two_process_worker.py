"""Worker of test_integration_trl.py::test_two_processes (run by torchrun, 2 CPU processes).

Trains 1 step of dual_anchor with multi-temperature sampling where groups span processes
(6 completions per process, G = 4) and writes what each rank saw to OUT/rank<r>.json.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from accelerate.utils import gather_object

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_integration_trl import G, RecordingTrainer, _dataset, _model, _tokenizer, digit_share  # noqa: E402

from pgrpo.integrations.trl import PgrpoGRPOConfig  # noqa: E402


def main(out: Path) -> None:
    tokenizer = _tokenizer()
    args = PgrpoGRPOConfig(
        output_dir=str(out),
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=6,  # 12 completions per step: group 2 spans both processes
        num_generations=G,
        max_completion_length=4,
        max_steps=1,
        logging_steps=1,
        learning_rate=1e-3,
        report_to=[],
        save_strategy="no",
        seed=0,
        disable_tqdm=True,
        pgrpo_advantage="dual_anchor",
        pgrpo_temperatures=[1e-3, 1e-3, 50.0, 50.0],
    )
    trainer = RecordingTrainer(
        model=_model(tokenizer),
        reward_funcs=digit_share,
        args=args,
        train_dataset=_dataset(12),
        processing_class=tokenizer,
    )
    trainer.train()
    records = [
        {
            "advantages": batch["advantages"].tolist(),
            "rewards": batch["rewards"]["digit_share"],
            "num_constraints": gather_object(batch["num_constraints"]),
            "completions": batch["completions"],
        }
        for batch in trainer.generated
    ]
    rank = trainer.accelerator.process_index
    (out / f"rank{rank}.json").write_text(json.dumps(records))
    trainer.accelerator.wait_for_everyone()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
    # Skip the interpreter's teardown: there, a joinable C++ thread of the distributed
    # runtime is sometimes destroyed ("terminate called without an active exception"),
    # a rank dies with SIGABRT and torchrun fails a run whose results are all written
    # (5 runs in 10 on 2 cores, torch 2.13, gloo; 0 in 10 with this exit).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
