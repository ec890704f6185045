"""The papers' headline experiments on a real language model (issue #16), SmolLM2-135M-Instruct.

    python bench/reproduce_lm.py --part sign [options]      # options: --part sign --help

Each part is a resumable experiment in its own module, registered in `PARTS`; it gets the
arguments after `--part NAME`. `sign`: gradient starvation and the Sign advantage
(arXiv 2605.07689), `bench/reproduce_lm_sign.py`, docs/reproductions_lm.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from reproduce_lm_sign import run_sign

PARTS: dict[str, Callable[[Sequence[str]], int]] = {"sign": run_sign}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], add_help=False)
    p.add_argument("--part", required=True, choices=sorted(PARTS))
    args, rest = p.parse_known_args(argv)
    return PARTS[args.part](rest)


if __name__ == "__main__":
    sys.exit(main())
