"""How far the policy has moved from its reference: the level of the logged KL, beside the
`policy_concentration` rule, which reads only its growth (KL over the last tenth against mid-run,
`concentration.KL_RUNAWAY`). A KL that sits high from early on never "grows" and passed unseen:
a review (2026-12-06) found a run holding 1.8-5.7 per token on 74 of its 93 points read
"policy_concentration: no".

The check warns when the mean KL over the last tenth of the run (at least 5 points, as the
truncation check reads it: `lengthstats.window`) is at least `KL_HIGH` per token. TRL (`kl`),
verl (`actor/kl_loss`) and pgrpo's trainer log the mean per-token estimate; a framework that
logs a per-sequence sum is on another scale, which the words say. Like every run check, a
warning counts for `pgrpo diagnose --fail-on warn`.
"""

from __future__ import annotations

import numpy as np

from pgrpo.diagnose.checks import CHECKS, CheckOptions, CheckResult, column, not_enough
from pgrpo.diagnose.lengthstats import window

KL_HIGH = 1.0
"""Per token, over the last tenth. On the 47 real logs with a KL column (the shared corpus and
held-back rounds 15-19; `python bench/kl_levels.py`, 2026-12-06) the last tenth's mean was at
or above 1 on 6: 5 whose reward did not learn (2 degenerate, 1 collapsed, 2 flat) and 1
learning run whose KL reached 2.4e7 (a numerical blow-up beside a rising reward); on the other
20 learning runs it was at most 0.31. Its false alarms are learning runs: 1 of 21, and that one
had a KL no healthy run shows."""
MIN_POINTS = 10


@CHECKS.register("kl_level")
def kl_level(log, options: CheckOptions) -> CheckResult:  # noqa: ANN001, ARG001
    name = "kl_level"
    control = (f"warn only when the KL to the reference averages >= {KL_HIGH:g} per token over "
               "the last tenth (measured on 47 real logs: docs/integrations.md)")  # fmt: skip
    got = column(log, "kl")
    if got is None or got[1].size < MIN_POINTS:
        return not_enough(name, f"no KL column with >= {MIN_POINTS} points", control)
    step, kl = got
    late = float(np.mean(kl[-window(kl.size) :]))  # the last tenth, at least 5 points
    above = np.flatnonzero(kl >= KL_HIGH)
    ev = {"kl_last_tenth": late, "kl_max": float(np.max(kl)),
          "kl_first_above_step": float(step[above[0]]) if above.size else float("nan")}  # fmt: skip
    if late < KL_HIGH:
        return CheckResult(name, "ok", f"KL to the reference {late:.3g} per token over the last "
                           f"tenth, below {KL_HIGH:g}", ev, control)  # fmt: skip
    text = (
        f"KL to the reference averaged {late:.3g} per token over the last tenth (first at or "
        f"above {KL_HIGH:g} at step {ev['kl_first_above_step']:g}): the policy has moved far from "
        "its reference; on the real logs measured, such a level came with a reward that did not "
        "learn on 5 of 6 runs. Check the KL coefficient (beta), the learning rate and the "
        "reward (a policy that drifts for a reward that does not rise is exploiting or "
        "collapsing), and that the logged KL is per token, not per sequence"
    )
    return CheckResult(name, "warn", text, ev, control)
