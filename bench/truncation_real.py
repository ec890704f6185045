"""The `truncated_completions` run check on every real log of the corpus folders: which warn,
which are ok, which lack the evidence, and from which source (a logged clipped ratio, a stated
limit, a mean length pinned at its maximum).

    python bench/truncation_real.py [FOLDER ...]     # default: the shared corpus + held-back rounds

Two passes: the check as `pgrpo diagnose` runs it on a bare CSV (no limit given), and again with
the limit that the run's corpus note reads from its own config (`STATED`), as
`--max-completion-length` would give it. Writes bench/results/truncation_real.json.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

from pgrpo.diagnose.checks import CheckOptions
from pgrpo.diagnose.truncation import truncated_completions
from pgrpo.logs import read_log

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_results  # noqa: E402
from corpus_entry import missing_index, with_metadata  # noqa: E402

WORK = Path(__file__).resolve().parents[2]
FOLDERS = [WORK / "shared" / "data" / "curves",
           *(WORK / f"holdout{k}" / "all" / "curves" for k in range(15, 20))]  # fmt: skip
OUT = Path(__file__).resolve().parent / "results" / "truncation_real.json"
STATED = {
    "econagent_qwen25_7b_verl_grpo": 128,  # the log's printed verl config, data.max_response_length
    "f1_strategy_grpo_v1_flat": 96,
    "unsloth_official_phi4_14b_gsm8k_grpo": 200,
    "unsloth_mistral7b_v03_gsm8k_grpo_250": 768,
    "jzystar_qwen25_3b_gsm8k_unsloth_grpo_partial": 200,
    "madhurachanna_mathphi4_qwen25_3b_gsm8k_grpo_1000": 200,
    "xun3_grpo_qwen25_3b_gsm8k_grpo_250": 200,
    "panacea_qwen25_15b_pomdp_oversight_unsloth_grpo": 256,
    "hoa10_grpo_unsloth_llama31_8b_gsm8k1k_g4": 256,
    "pokeagent_emerald_gemma4_26b_offline_grpo_sampled": 1024,
    "shamanez_verl_grpo_qwen15b_gsm8k_exp38": 2048,
    "shamanez_verl_grpo_qwen15b_gsm8k_powersgd_exp37": 2048,
    "shamanez_verl_grpo_qwen15b_bigmath_exp38": 16384,
    "th3ctrlkey_marinehydro_qwen25_3b_grpo_run5": 1024,
    "h15a_nemorl_grpo_gemma3_1b_openmath": 1024,
}
"""Runs whose corpus note (index.json) gives the run's own limit (TRL max_completion_length,
verl max_response_length, max_new_tokens), or, for econagent, its logged config; not a limit
inferred from the lengths, nor one from another run's config."""


def rows_of(folder: Path, stated: bool) -> list[dict]:
    """One row per run of `folder` with a stated limit (stated) or every run (not stated)."""
    rows = []
    for run in json.loads((folder / "index.json").read_text())["runs"]:
        limit = STATED.get(run["name"]) if stated else None
        if stated and limit is None:
            continue
        log = with_metadata(read_log(folder / run["csv"]), run)
        res = truncated_completions(log, CheckOptions(max_completion_length=limit))
        ev = res.evidence
        rows.append({"folder": folder.parent.parent.name if "holdout" in str(folder) else "shared",
                     "name": run["name"], "given_limit": limit, "status": res.status,
                     "source": ev.get("source"), "limit": ev.get("limit"),
                     "late_share": ev.get("late_share"), "early_share": ev.get("early_share"),
                     "cut_steps": ev.get("cut_steps"), "points": ev.get("points"),
                     "rising": ev.get("rising")})  # fmt: skip
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", nargs="*", type=Path)
    args = ap.parse_args()
    folders = args.folders or [f for f in FOLDERS if f.is_dir()]
    if missing_index(folders):
        sys.exit(2)
    bare = [r for f in folders for r in rows_of(f, stated=False)]
    given = [r for f in folders for r in rows_of(f, stated=True)]
    counts = {name: dict(collections.Counter(r["status"] for r in rows))
              for name, rows in (("no_limit", bare), ("stated_limit", given))}  # fmt: skip
    write_results(OUT, "truncation_real.py", None, machine="2-core CPU, no GPU",
                  folders=[str(f) for f in folders], counts=counts, rows=bare,
                  stated_rows=given)  # fmt: skip
    print(json.dumps(counts))
    for r in bare + given:
        if r["status"] == "warn":
            print(f"warn {r['name']} ({r['source']}, limit {r['limit']}): {r['late_share']:.0%}")


if __name__ == "__main__":
    main()
