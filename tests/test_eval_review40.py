"""`pgrpo eval` review fixes (session 40), through the CLI where a user meets them: one Student-t
interval of a mean, undefined (not zero-width) without spread, in the seed-to-seed interval, the
paired t and the search-compression tolerance; a `--from` or `--baseline` file whose results mix
decoding settings is one line naming the file, both settings and the fix.

Files are written as `pgrpo eval --out` writes them (`test_eval_review39._record`); sampling is
the stub `fake_sampling` (conftest.py)."""

from __future__ import annotations

import json
import re

import pytest
from cli_checks import one_line_error
from test_eval_review import _arithmetic_answer, _cli
from test_eval_review39 import GREEDY, HOT, IDS, _file, _record
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.errors import UserError
from pgrpo.evaluate import EvalRun, aggregate, search_compression
from pgrpo.evaluate.records import Decoding

_load_commands()

# ---------------------------------------------------------- 1. no spread: the interval is undefined


@pytest.mark.parametrize(
    "counts",
    [
        ([8] * 5 + [0] * 5, [0] * 5 + [8] * 5),  # two seeds at exactly 0.5: was [0.500, 0.500]
        ([8] * 7 + [0] * 3, [0] * 3 + [8] * 7, [6] * 8 + [4] * 2),  # three at 0.7: mean(x) != 0.7
    ],
)
def test_seeds_of_one_accuracy_have_no_seed_to_seed_interval(tmp_path, counts):
    """Review: seeds with the same accuracy printed "seed-to-seed [0.500, 0.500]" (a t interval
    claiming certainty from a sample that says nothing about the spread; three seeds at 0.7 gave
    one 1e-16 wide from rounding). Now it is undefined, and said so."""
    records = [_record(IDS, c, seed=s, decoding=HOT) for s, c in enumerate(counts)]
    doc = _file(tmp_path / "a.json", *records)
    res = _cli("--from", str(doc), "--json")
    assert res.exit_code == 0, res.output
    agg = json.loads(res.stdout)["aggregate"]
    assert agg["seed_ci"] is None and "seed_ci_clipped" not in agg
    assert f"all {len(counts)} seeds gave the same accuracy" in agg["note"]
    text = " ".join(_cli("--from", str(doc)).stdout.split())
    assert "seed-to-seed t interval is undefined" in text and "seed-to-seed [" not in text
    assert not re.search(r"\bnan\b", text.lower())


def test_a_paired_t_without_spread_says_why_it_is_undefined(tmp_path):
    a = _file(tmp_path / "a.json", _record(IDS, [5] * 10, decoding=HOT))
    b = _file(tmp_path / "b.json", _record(IDS, [4] * 10, decoding=HOT))
    res = _cli("--from", str(a), "--baseline", str(b))
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    assert "paired t and its interval undefined (every shared problem changed by the same" in text
    assert not re.search(r"\bnan\b", text.lower())
    cmp = json.loads(_cli("--from", str(a), "--baseline", str(b), "--json").stdout)["comparison"]
    assert cmp["paired_ci"] == [None, None] and cmp["paired_p"] is None
    assert cmp["paired_ci_clipped"] is False


def test_an_undefined_tolerance_is_not_a_zero_one(tmp_path):
    """Every problem solved at k_max by both: the pass@k_max difference has no spread, so its
    tolerance is undefined (JSON null; it read 0.0, a tolerance no gain could fail). A pass@k_max
    gain of exactly 0 needs none (search compression stands); a non-zero gain without spread is
    not judged."""
    base = _file(tmp_path / "b.json", _record(IDS, [4] * 10, decoding=HOT))
    sharper = _file(tmp_path / "t.json", _record(IDS, [7] * 8 + [4] * 2, decoding=HOT))
    res = _cli("--from", str(sharper), "--baseline", str(base), "--json")
    sc = json.loads(res.stdout)["search_compression"]
    assert sc["tolerance_pass_kmax"] is None and sc["gain_pass_kmax"] == 0.0
    assert sc["verdict"] == "search compression"
    runs = [EvalRun(s, IDS, [8] * 10, [c] * 10) for s, c in (("base", 4), ("t", 5))]
    flat = search_compression(runs[:1], runs[1:])  # pass@1 up by 1/8 on every problem
    assert flat["verdict"] == "not judged" and "same amount" in flat["verdict_note"]


# ----------------------------------------------- 2. one decoding setting per file of results


def test_a_from_file_mixing_decoding_settings_is_refused(tmp_path):
    """Review: `pgrpo eval --from` averaged greedy seeds with seeds at temperature 2 without a
    word. One line naming the file, both settings and the fix; an existing --out is untouched."""
    mixed = _file(
        tmp_path / "mixed.json",
        _record(IDS, [4] * 10, seed=0, decoding=GREEDY),
        _record(IDS, [5] * 10, seed=1, decoding=HOT),
    )
    out = tmp_path / "kept.json"
    out.write_text("what an earlier run wrote")
    res = _cli("--from", str(mixed), "--out", str(out))
    one_line_error(
        res, f"--from {mixed}: its results mix decoding settings",
        "m/seed0 sampled at temperature 0, max_new_tokens 64",
        "m/seed1 at temperature 2, max_new_tokens 64", "split the file by decoding setting",
    )  # fmt: skip
    assert out.read_text() == "what an earlier run wrote"
    same = _file(tmp_path / "same.json", _record(IDS, [4] * 10, decoding=HOT))
    res = _cli("--from", str(same), "--baseline", str(mixed))
    one_line_error(res, f"--baseline {mixed}: its results mix decoding settings")
    long = Decoding(2.0, 512)  # another length limit is another decoding too
    mixed_len = _file(
        tmp_path / "len.json",
        _record(IDS, [4] * 10, seed=0, decoding=HOT),
        _record(IDS, [5] * 10, seed=1, decoding=long),
    )
    one_line_error(_cli("--from", str(mixed_len)), "max_new_tokens 512")


def test_a_mixed_baseline_is_refused_before_sampling(tmp_path, fake_sampling):
    mixed = _file(
        tmp_path / "mixed.json",
        _record(IDS, [4] * 10, seed=0, decoding=GREEDY),
        _record(IDS, [5] * 10, seed=1, decoding=HOT),
    )
    calls = fake_sampling(_arithmetic_answer)
    res = _cli("--model", "tiny", "--problems", "3", "--samples", "1", "--baseline", str(mixed))
    one_line_error(res, f"--baseline {mixed}: its results mix decoding settings")
    assert calls == []


def test_results_without_decoding_are_averaged_with_a_warning(tmp_path):
    """Records written before 2026-12-06 record no decoding: as against a baseline, they are
    not checked and a warning says so (after the checks, so bad input stays one line)."""
    partly = _file(
        tmp_path / "partly.json",
        _record(IDS, [4] * 10, seed=0, decoding=HOT),
        _record(IDS, [5] * 10, seed=1),
    )
    res = _cli("--from", str(partly))
    assert res.exit_code == 0, res.output
    assert f"warning: --from {partly}: 1 of its 2 results do not record" in res.output
    assert "averaged regardless" in res.output
    one = _file(tmp_path / "one.json", _record(IDS, [5] * 10))
    assert "averaged regardless" not in _cli("--from", str(one)).output  # one seed: no mixing


def test_aggregate_refuses_mixed_decoding_in_code():
    runs = [
        EvalRun("a", IDS, [8] * 10, [4] * 10, decoding=GREEDY),
        EvalRun("b", IDS, [8] * 10, [5] * 10, decoding=HOT),
        EvalRun("c", IDS, [8] * 10, [5] * 10),
    ]
    with pytest.raises(UserError, match="the results mix decoding settings: a sampled at"):
        aggregate(runs)
    assert aggregate(runs[1:])["seeds"] == 2  # an unknown setting is not a second one


# --- diagnose / report --eval-log: one decoding along the run (session 40) ------------------------


def _eval_log(tmp_path, decodings):
    rows = []
    for i, dec in enumerate(decodings):
        rec = {"name": f"m@{10 * i}/seed0", "step": 10 * i, "seed": 0, "accuracy": 0.3 + 0.1 * i,
               "n_problems": 20}  # fmt: skip
        if dec is not None:
            rec["decoding"] = {"temperature": dec, "max_new_tokens": 64}
        rows.append(rec)
    ev = tmp_path / "eval.json"
    ev.write_text(json.dumps({"kind": "pgrpo.eval", "results": rows, "aggregate": {}}))
    log = tmp_path / "log.csv"
    log.write_text("step,reward\n" + "".join(f"{i},{0.1 + 0.01 * i}\n" for i in range(1, 31)))
    return log, ev


def test_diagnose_and_report_refuse_an_eval_log_of_two_decodings(tmp_path):
    """Greedy at step 0 and temperature 1 at step 10 made an 'eval gain' of two ways of
    sampling, silently; now one line naming both records, exit 2, nothing written."""
    log, ev = _eval_log(tmp_path, [0.0, 1.0])
    report = ["report", str(log), "--eval-log", str(ev), "--out", str(tmp_path / "rep")]
    for args in (["diagnose", str(log), "--eval-log", str(ev)], report):
        one_line_error(CliRunner().invoke(app, args), "sampled differently", str(ev))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.json", "log.csv"]


@pytest.mark.parametrize("decodings", [[0.0, 0.0], [None, 1.0], [None, None]])
def test_an_eval_log_of_one_decoding_or_of_records_without_one_is_read(tmp_path, decodings):
    log, ev = _eval_log(tmp_path, decodings)
    res = CliRunner().invoke(app, ["diagnose", str(log), "--eval-log", str(ev), "--json"])
    assert res.exit_code == 0, res.output


def test_a_gain_of_rounding_is_no_gain():
    """The same per-problem counts spread over the seeds in another order gave a pass@1 'gain'
    of 1.1e-16 and 'not judged' (review of session 40); it is no clear gain."""
    import numpy as np

    from pgrpo.evaluate.metrics import search_compression

    rng = np.random.default_rng(0)
    ids, n = ["p0", "p1", "p2"], 7
    for _ in range(300):
        a, b = rng.integers(0, n + 1, 3).tolist(), rng.integers(0, n + 1, 3).tolist()
        base = [EvalRun("b1", ids, [n] * 3, a, seed=0), EvalRun("b2", ids, [n] * 3, b, seed=1)]
        swapped = [[b[0], a[1], a[2]], [a[0], b[1], b[2]]]
        trained = [EvalRun(f"t{s}", ids, [n] * 3, c, seed=s) for s, c in enumerate(swapped)]
        out = search_compression(base, trained)
        assert out["verdict"] == "no clear gain", out
