"""A live warning is withdrawn once it no longer holds. `pgrpo watch --stop-on degeneracy` and
`PgrpoCallback` said "the degeneracy stop rule cannot fire on this log" while the log had no
zero-spread column, and the warning stood after the column appeared and the rule could fire
(2026-12-05). `live.unsaid` now says each kind once while it holds, "no longer so: ..." once when
it stops holding, and the kind again if it comes back."""

from __future__ import annotations

import json
import threading
import time
import warnings

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.diagnose.live import WITHDRAWN, unsaid, warning_kind

_load_commands()
runner = CliRunner()
CANNOT = "the degeneracy stop rule cannot fire"


def _rows(n: int, start: int = 1, share: bool = False, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for s in range(start, start + n):
        row = {"step": s, "reward": float(rng.binomial(8, 0.5) / 8)}
        if share:
            row["frac_reward_zero_std"] = 0.1
        out.append(row)
    return out


KINDS = ["a rule cannot fire: no column", "reward leaves [0, 1] (0.2 to 1.5)",
         "3 malformed line(s) skipped"]  # fmt: skip


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sets(st.sampled_from(range(len(KINDS)))), min_size=1, max_size=12))
def test_each_kind_is_said_once_while_it_holds_and_withdrawn_once(seq):
    said: dict[str, str] = {}
    before: set[int] = set()
    for now in seq:
        out = unsaid([KINDS[i] for i in sorted(now)], said)
        new = [t for t in out if not t.startswith(WITHDRAWN)]
        gone = [t[len(WITHDRAWN) :] for t in out if t.startswith(WITHDRAWN)]
        assert sorted(new) == sorted(KINDS[i] for i in now - before)
        assert sorted(gone) == sorted(KINDS[i] for i in before - now)
        assert set(said) == {warning_kind(KINDS[i]) for i in now}
        before = set(now)


def test_numbers_that_change_are_one_kind_not_a_withdrawal():
    said: dict[str, str] = {}
    assert unsaid(["3 malformed line(s) skipped (first at line 7)"], said)
    assert unsaid(["4 malformed line(s) skipped (first at line 9)"], said) == []


def test_the_callback_withdraws_the_cannot_fire_warning():
    from pgrpo.integrations.callback import PgrpoCallback

    rows_ = _rows(40) + _rows(40, start=41, share=True)
    cb = PgrpoCallback(every=10, stop_on="degeneracy")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for end in range(10, 81, 10):
            cb._assess(rows_[:end])
    said = [str(w.message) for w in caught if CANNOT in str(w.message)]
    assert len(said) == 2, said
    assert not said[0].startswith(f"PgrpoCallback: {WITHDRAWN}")
    assert said[1].startswith(f"PgrpoCallback: {WITHDRAWN}{CANNOT}")
    assert cb.report()["warnings"] == [s[len("PgrpoCallback: ") :] for s in said]


def test_the_watch_withdraws_it_when_the_column_appears(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows(40)))

    def grow():
        time.sleep(1.0)
        with path.open("a") as fh:
            fh.write("".join(json.dumps(r) + "\n" for r in _rows(40, start=41, share=True)))

    writer = threading.Thread(target=grow)
    writer.start()
    res = runner.invoke(app, ["watch", str(path), "--stop-on", "degeneracy", "--every", "10",
                              "--poll", "0.05", "--idle", "3"])  # fmt: skip
    writer.join()
    assert res.exit_code == 0, res.output
    assert res.output.count(CANNOT) == 2, res.output
    assert f"warning: {WITHDRAWN}{CANNOT}" in res.output


def test_the_readers_repairs_are_said_once_and_never_withdrawn(tmp_path):
    """Review: a reward that is NaN at a few isolated steps made the reader's warning ("the last
    1 logged reward(s) are NaN or inf") come and go with the newest row, and the watch said it
    and withdrew it at each NaN. The reader's repairs are said once, as before."""
    path = tmp_path / "log.jsonl"
    rows = _rows(120)
    for i in (40, 70, 100):
        rows[i]["reward"] = float("nan")
    chunks = [rows[:41], rows[41:42], rows[42:71], rows[71:72], rows[72:101], rows[101:]]
    path.write_text("")

    def grow():
        for chunk in chunks:
            with path.open("a") as fh:
                fh.write("".join(json.dumps(r) + "\n" for r in chunk))
            time.sleep(0.4)

    writer = threading.Thread(target=grow)
    writer.start()
    res = runner.invoke(app, ["watch", str(path), "--every", "1", "--poll", "0.05",
                              "--idle", "2.5"])  # fmt: skip
    writer.join()
    assert res.exit_code == 0, res.output
    assert WITHDRAWN not in res.output
    assert res.output.count("NaN or inf") <= 1, res.output
