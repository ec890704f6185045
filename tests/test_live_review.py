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
