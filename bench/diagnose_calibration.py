"""Confusion matrix of `pgrpo diagnose` on runs driven into each failure mode
(pgrpo.bandit.scenarios.SCENARIOS): detection rate of every mode on every scenario over seeds.
The ratio thresholds (entropy, KL, length, clip) were tuned on seeds 0-4; the reward-curve tests
are calibrated on null curves (pgrpo.diagnose.nullmodel), not here. This reports seeds 0-4 and
held-out seeds 10-29; the real-run counterpart is bench/real_runs.py.
Writes bench/results/diagnose_calibration.json.

    python bench/diagnose_calibration.py
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from pathlib import Path

from pgrpo.bandit.scenarios import SCENARIOS
from pgrpo.diagnose import MODES
from pgrpo.diagnose.calibration import calibration_table

SHORT = {
    "reward_hacking": "hacking",
    "advantage_degeneracy": "degeneracy",
    "policy_concentration": "concentration",
    "dynamical_instability": "instability",
}


def show(title: str, table: dict) -> None:
    print(f"\n{title}")
    head = (
        f"| {'scenario':<28} | expected | " + " | ".join(SHORT[m] for m in MODES) + " | correct |"
    )
    print(head)
    print("|" + "---|" * (len(MODES) + 3))
    for name, row in table.items():
        exp = ",".join(SHORT[m] for m in sorted(SCENARIOS.get(name).expected)) or "none"
        cells = " | ".join(f"{row[m]:.2f}" for m in MODES)
        print(f"| {name:<28} | {exp} | {cells} | {row['correct']:.2f} |")


def main() -> None:
    argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0]
    ).parse_args()  # no options: --help only
    t0 = time.time()
    tuned = calibration_table(tuple(range(5)))
    held = calibration_table(tuple(range(10, 30)))
    show("tuning seeds 0-4", tuned)
    show("held-out seeds 10-29", held)
    blind = calibration_table(tuple(range(10, 30)), drop_config=("kappa",))
    show("held-out seeds 10-29, kappa hidden (reward curve, lr and K only)", blind)
    print(f"\n{time.time() - t0:.0f} s")
    out = Path("bench/results/diagnose_calibration.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "command": "python bench/diagnose_calibration.py",
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "seconds": round(time.time() - t0, 1),
        "tuning_seeds": list(range(5)),
        "held_out_seeds": list(range(10, 30)),
        "tuning": tuned,
        "held_out": held,
        "held_out_without_kappa": blind,
        "allowed": {k: sorted(SCENARIOS.get(k).allowed) for k in SCENARIOS},
    }
    out.write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
