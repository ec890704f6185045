"""A hostile review of the live paths (2026-12-05): TRL's None rewards, NaN rows in `pgrpo
watch`, the forecast keys on noise, pgrpo's own verl key, a stale stop file, a log whose every
reward is NaN. Each test failed before its fix."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.diagnose.live import LiveConfig, assess_live
from pgrpo.diagnose.watch import _prefix, rows
from pgrpo.logs import read_log

_load_commands()
runner = CliRunner()


def _trainer_state(path, finite: int, nulls: int):
    """A trainer_state.json as TRL writes it when the reward turns NaN: None (JSON null)."""
    hist = [{"reward": float(i % 3) / 3, "step": i} for i in range(1, finite + 1)]
    hist += [{"reward": None, "step": i} for i in range(finite + 1, finite + nulls + 1)]
    path.write_text(json.dumps({"log_history": hist, "global_step": finite + nulls}))
    return path


def test_trl_s_none_rewards_are_a_nan_tail(tmp_path):
    log = read_log(_trainer_state(tmp_path / "trainer_state.json", 29, 30))
    assert log.metrics["nonfinite_tail"] == 30.0 and log.metrics["nonfinite_from"] == 30.0
    res = runner.invoke(app, ["diagnose", str(tmp_path / "trainer_state.json"), "--json"])
    doc = json.loads(res.output[res.output.index("{") :])
    assert doc["progress"]["label"] == "collapsed"
    console = tmp_path / "train.log"  # the same on the console: 'reward': None
    console.write_text("".join(f"{{'loss': 0.0, 'reward': {v}}}\n" for v in
                               [0.1 * (i % 3) for i in range(29)] + [None] * 5))  # fmt: skip
    assert read_log(console).metrics["nonfinite_tail"] == 5.0


def test_watch_counts_the_nan_rows_and_stops_once_the_tail_holds(tmp_path):
    """The rows a watcher sees include the NaN tail: `--once` on 29 points + 30 NaN rows stops
    on collapse (exit 3; it read 'plateau' and exited 0). A tail of NaN / inf rewards is no
    noise to wait out: the collapse stops at the first assessment that sees three of them,
    whatever the rule's patience (with `--every 1`: 2 NaN rows do not stop, 3 do; before, the
    replay gave every earlier prefix the whole tail, and a live watch never assessed again)."""
    path = _trainer_state(tmp_path / "trainer_state.json", 29, 30)
    res = runner.invoke(app, ["watch", str(path), "--once", "--stop-on", "collapse"])
    assert res.exit_code == 3, res.output
    rng = np.random.default_rng(0)
    base = [{"step": s, "reward": 0.5 + 0.05 * rng.standard_normal()} for s in range(1, 63)]
    for tail, code in ((2, 0), (3, 3), (7, 3)):
        p = tmp_path / f"nan{tail}.jsonl"
        p.write_text("".join(json.dumps(r) + "\n" for r in base) + "".join(
            json.dumps({"step": 62 + k, "reward": float("nan")}) + "\n"
            for k in range(1, tail + 1)))  # fmt: skip
        res = runner.invoke(app, ["watch", str(p), "--once", "--stop-on", "collapse",
                                  "--every", "1"])  # fmt: skip
        assert res.exit_code == code, (tail, res.output)


def test_a_replayed_prefix_has_only_the_nan_rows_seen_by_then(tmp_path):
    log = read_log(_trainer_state(tmp_path / "trainer_state.json", 40, 4))
    assert rows(log) == 44
    assert "nonfinite_tail" not in _prefix(log, 30).metrics and len(_prefix(log, 30)) == 30
    part = _prefix(log, 42)
    assert len(part) == 40 and part.metrics["nonfinite_tail"] == 2.0


def test_no_gain_or_timing_keys_on_a_flat_verdict():
    """On noise the fitted gain gave `pgrpo/progress` and `pgrpo/steps_to_90` on 86 of 100
    flat curves ("95 steps to 90%" of a gain that is not there)."""
    from pgrpo.logs import RewardLog

    rng = np.random.default_rng(1)
    given = 0
    for _ in range(40):
        y = 0.5 + 0.05 * rng.standard_normal(40)
        log = RewardLog(np.arange(1.0, 41.0), y, {}, {}, (), "test", "pgrpo", "reward", {})
        status = assess_live(log, LiveConfig())
        if status.verdict == "flat":
            given += "pgrpo/progress" in status.metrics or "pgrpo/steps_to_90" in status.metrics
    assert given == 0


def test_pgrpo_s_own_verl_key_for_gradient_tokens_is_read(tmp_path):
    """The verl hook logs `actor/pgrpo/frac_gradient_tokens`; the reader knew only the bare name,
    so the zero-gradient check (and the CI gate) missed a verl run without gradient."""
    path = tmp_path / "verl.jsonl"
    path.write_text("".join(json.dumps({"step": s, "critic/score/mean": 0.5,
                                        "actor/pgrpo/frac_gradient_tokens": 0.4 if s <= 10
                                        else 0.0}) + "\n" for s in range(1, 41)))  # fmt: skip
    log = read_log(path)
    assert np.count_nonzero(log.columns["frac_gradient_tokens"] == 0.0) == 30
    res = runner.invoke(app, ["diagnose", str(path), "--json"])
    doc = json.loads(res.output[res.output.index("{") :])
    check = next(c for c in doc["checks"] if c["name"] == "zero_gradient_steps")
    assert check["status"] == "warn", check


def test_a_stop_file_left_by_an_earlier_watch_is_removed(tmp_path):
    log = tmp_path / "m.jsonl"
    log.write_text("".join(json.dumps({"step": s, "reward": 0.1 * s}) + "\n" for s in range(30)))
    stop = tmp_path / "STOP"
    stop.touch()
    res = runner.invoke(app, ["watch", str(log), "--once", "--stop-file", str(stop)])
    assert res.exit_code == 0 and not stop.exists(), res.output
    assert "removed" in res.output


def test_a_log_whose_every_reward_is_nan_says_the_run_diverged(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps({"step": s, "reward": float("nan")}) + "\n"
                            for s in range(1, 41)))  # fmt: skip
    res = runner.invoke(app, ["diagnose", str(path)])
    assert res.exit_code == 2 and "diverged" in res.output, res.output
    res = runner.invoke(app, ["watch", str(path), "--timeout", "5"])
    assert res.exit_code == 2 and "diverged" in res.output, res.output


# --- the findings left on 2026-12-05 (F7, F8, F11), fixed the next session --------------------


def _flat_rows(n: int, seed: int = 3) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"step": s, "reward": 0.5 + 0.05 * rng.standard_normal()} for s in range(1, n + 1)]


def test_a_log_written_in_chunks_stops_live_where_once_does(tmp_path):
    """F7: a trainer_state.json rewritten at each checkpoint (20 logged steps each). The live
    watch made one assessment per read, so `--stop-on flat --every 5` (patience 8) never
    stopped in 4 reads, where `--once` on the 60-row file stops; now a read that brings 20 rows
    makes the assessments in between, and the live watch stops at the same step."""
    from pgrpo.diagnose.watch import watch_log

    rows_ = _flat_rows(80)
    path = tmp_path / "trainer_state.json"
    chunks = [rows_[:n] for n in (20, 40, 60, 80)]

    def write(hist):
        path.write_text(json.dumps({"log_history": hist, "global_step": hist[-1]["step"]}))

    def on_status(status, log):
        if chunks:
            write(chunks.pop(0))

    write(chunks.pop(0))
    cfg = LiveConfig(stop_on=("flat",))
    live = watch_log(path, cfg, every=5, poll_s=0.01, idle_s=0.5, on_status=on_status)
    once = tmp_path / "once.json"
    once.write_text(json.dumps({"log_history": rows_[:60], "global_step": 60}))
    res = runner.invoke(app, ["watch", str(once), "--once", "--stop-on", "flat"])
    assert res.exit_code == 3 and "at step 60" in res.output, res.output
    assert live.ended == "stop" and live.status.step == 60, (live.ended, live.points)


def test_a_degeneracy_rule_the_log_cannot_trigger_is_said_once(tmp_path):
    """F8: with no zero-spread column (every verl log) `--stop-on degeneracy` could never fire,
    and nothing said so. It is said once; a log with reward_std but no share now stops on a
    run of steps whose reward_std is 0 (every group without spread: the lower bound that
    `pgrpo diagnose` reads too)."""
    bare = tmp_path / "bare.jsonl"
    bare.write_text("".join(json.dumps(r) + "\n" for r in _flat_rows(60)))
    res = runner.invoke(app, ["watch", str(bare), "--once", "--stop-on", "degeneracy"])
    assert res.exit_code == 0 and res.output.count("degeneracy stop rule cannot fire") == 1
    res = runner.invoke(app, ["watch", str(bare), "--once", "--stop-on", "plateau"])
    assert "cannot fire" not in res.output
    rows_ = [{**r, "reward_std": 0.3536 if r["step"] <= 30 else 0.0} for r in _flat_rows(60)]
    for r in rows_[30:]:
        r["reward"] = 1.0  # every group all-pass
    std = tmp_path / "std.jsonl"
    std.write_text("".join(json.dumps(r) + "\n" for r in rows_))
    res = runner.invoke(app, ["watch", str(std), "--once", "--stop-on", "degeneracy"])
    assert res.exit_code == 3 and "degeneracy" in res.output and "cannot" not in res.output
    status = assess_live(read_log(std), LiveConfig())
    assert "pgrpo/degeneracy" not in status.metrics  # a lower bound is no share to log


def test_an_empty_stop_rule_list_is_refused_not_read_as_none(tmp_path):
    """F11: `--stop-on "$RULES"` with RULES unset meant no stop, without a word."""
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _flat_rows(40)))
    for value in ("", " , ", "none,plateau"):
        res = runner.invoke(app, ["watch", str(path), "--once", "--stop-on", value])
        assert res.exit_code == 2 and "--stop-on" in res.output, (value, res.output)
    assert runner.invoke(app, ["watch", str(path), "--once", "--stop-on", "none"]).exit_code == 0


def test_a_reward_outside_the_given_range_is_warned_once(tmp_path):
    """F11: `pgrpo diagnose --reward-range` warned that the reward leaves the range; `watch` and
    the callback did not, though the verdict then ignores the range."""
    import warnings

    from pgrpo.integrations.callback import PgrpoCallback

    rows_ = [{"step": s, "reward": 0.3 + 0.02 * s} for s in range(1, 61)]
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows_))
    res = runner.invoke(app, ["watch", str(path), "--once", "--every", "20",
                              "--reward-range", "0,1"])  # fmt: skip
    assert res.output.count("leaves the stated range [0, 1]") == 1, res.output
    res = runner.invoke(app, ["watch", str(path), "--once", "--reward-range", "0,2"])
    assert "leaves the stated range" not in res.output
    cb = PgrpoCallback(every=20, reward_range=(0, 1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for end in (40, 50, 60):
            cb._assess(rows_[:end])
    said = [w for w in caught if "leaves the stated range" in str(w.message)]
    assert len(said) == 1 and cb.report()["warnings"] == [str(said[0].message)[15:]]


def _chunked_watch(tmp_path, rows_, chunk: int, every: int, cfg):
    """A live watch of a trainer_state.json rewritten `chunk` rows at a time; returns the
    result and the chunk sizes written."""
    from pgrpo.diagnose.watch import watch_log

    path = tmp_path / "trainer_state.json"
    sizes = list(range(chunk, len(rows_) + 1, chunk))
    todo = list(sizes)

    def write(n):
        path.write_text(json.dumps({"log_history": rows_[:n], "global_step": n}))

    def on_status(status, log):
        if todo:
            write(todo.pop(0))

    write(todo.pop(0))
    return watch_log(path, cfg, every=every, poll_s=0.01, idle_s=0.5, on_status=on_status), sizes


def test_a_read_a_little_over_every_rows_counts_as_the_rows_it_brings(tmp_path):
    """Review of the F7 fix: reads of 19 rows at `--every 10` (or 39 at 20) were still one
    assessment each, since the catch-up only ran for reads of twice `--every` or more: the live
    watch stopped at row 171 (never, in 300 rows, at 39 / 20) where `--once` first stops at
    row 95 (195). The watch now assesses at the multiples of `every` (the last at the newest
    row), so the live stop comes at the first chunk where `--once` stops."""
    from pgrpo.diagnose.watch import watch_log

    # seed 3: a null curve whose flat verdicts show no possible rise where the stops fall (seed
    # 5's drift up over rows 200-270 reads "a possible rise", which since session 36 does not
    # raise the flat stop, so at 39 / 20 neither watch stopped and the test compared nothing)
    rows_ = _flat_rows(300, seed=3)
    cfg = LiveConfig(stop_on=("flat",))
    for chunk, every in ((19, 10), (39, 20)):
        live, sizes = _chunked_watch(tmp_path, rows_, chunk, every, cfg)
        first = None
        for n in sizes:  # --once on each file the live watch saw
            (tmp_path / "once.json").write_text(json.dumps({"log_history": rows_[:n]}))
            once = watch_log(tmp_path / "once.json", cfg, every=every, once=True)
            if once.ended == "stop":
                first = n
                break
        assert first is not None and live.ended == "stop", (chunk, live.ended, first)
        assert live.points == first, (chunk, every, live.points, first)


def test_degeneracy_reads_only_the_newest_rows_and_no_rounded_zero(tmp_path):
    """Review: (a) zeros of reward_std logged long ago, then no reward_std, made a run of
    degenerate points (the run skipped rows without the column) and stopped a rising run;
    (b) a console that prints 3 decimals logs a continuous reward's spread of 0.0004 as 0.000,
    and those zeros stopped a run; the watch now says why the rule cannot fire."""
    rising = [{"step": s, "reward": 0.3 + 0.01 * s} for s in range(1, 61)]
    old_zeros = [{**r, "reward_std": 0.0} if r["step"] <= 6 else r for r in rising]
    path = tmp_path / "old.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in old_zeros))
    res = runner.invoke(app, ["watch", str(path), "--once", "--stop-on", "degeneracy"])
    assert res.exit_code == 0, res.output
    rng = np.random.default_rng(2)
    rounded = [{"step": s, "reward": 0.5 + 0.01 * rng.standard_normal(),
                "reward_std": round(abs(0.002 * rng.standard_normal()), 3)}
               for s in range(1, 61)]  # fmt: skip
    for r in rounded[-8:]:  # eight spreads under 0.0005 in a row at the end
        r["reward_std"] = 0.0
    path = tmp_path / "rounded.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rounded))
    res = runner.invoke(app, ["watch", str(path), "--once", "--stop-on", "degeneracy"])
    assert res.exit_code == 0 and "rounded to steps of 0.001" in res.output, res.output


def test_warnings_with_signs_and_exponents_are_one_kind_and_none_is_not_a_rule(tmp_path):
    """Review: the warning kind kept '-' and 'e-', so the range warning was said again when the
    minimum turned negative; `--stop-on none,plateau` said "unknown stop rule(s) none ... or
    'none'"; `PgrpoCallback(stop_on="none")` raised where the CLI takes `none`."""
    from pgrpo.diagnose.live import warning_kind
    from pgrpo.integrations.callback import PgrpoCallback

    a = warning_kind("the logged reward (0.32 to 1.6) leaves the stated range [0, 1]")
    assert a == warning_kind("the logged reward (-0.439 to 1.7e-05) leaves the stated range [0, 1]")
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _flat_rows(40)))
    res = runner.invoke(app, ["watch", str(path), "--once", "--stop-on", "none,plateau"])
    assert res.exit_code == 2 and "cannot be listed with others" in res.output, res.output
    assert PgrpoCallback(stop_on="none").config.stop_on == ()
