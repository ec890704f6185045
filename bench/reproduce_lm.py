"""The papers' headline experiments on a real language model (issue #16), SmolLM2-135M-Instruct.

    python bench/reproduce_lm.py --part sign [options]      # options: --part sign --help
    python bench/reproduce_lm.py --part mdp [options]       # or --part rank; --report: tables

Each part is a resumable experiment in its own module, registered in `PARTS`; it gets the
arguments after `--part NAME`. `sign`: gradient starvation and the Sign advantage
(arXiv 2605.07689), `bench/reproduce_lm_sign.py`; `mdp`: MDP-GRPO vs GRPO (arXiv 2606.06058) and
`rank`: the effective rank and sparsity of SmolLM2 policy gradients (arXiv 2606.29238), both
`bench/reproduce_lm_mdp.py` (the rank part in `bench/reproduce_lm_rank.py`).
Results: docs/reproductions_lm.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from reproduce_lm_sign import run_sign


def _mdp_part(part: str) -> Callable[[Sequence[str]], int]:
    def run(rest: Sequence[str]) -> int:
        from reproduce_lm_mdp import main as mdp_main

        mdp_main(["--part", part, *rest])
        return 0

    return run


PARTS: dict[str, Callable[[Sequence[str]], int]] = {
    "sign": run_sign,
    "mdp": _mdp_part("mdp"),
    "rank": _mdp_part("rank"),
}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], add_help=False)
    p.add_argument(
        "--part", choices=sorted(PARTS), help="the experiment; --part NAME --help: its options"
    )
    args, rest = p.parse_known_args(argv)
    if args.part is None:
        if {"-h", "--help"} & set(rest):
            p.print_help()
            return 0
        p.error("the following arguments are required: --part")
    return PARTS[args.part](rest)


if __name__ == "__main__":
    sys.exit(main())
