"""The `truncated_completions` run check and its reading (`pgrpo.diagnose.lengthstats`): each
source (logged share, stated limit, pinned maximum) on synthetic logs, the not-enough-evidence
paths, columns repeated for a benign reason, the readers' clipped-ratio keys, the degeneracy
action it feeds, and `pgrpo diagnose --max-completion-length` through the CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.signal import lfilter
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.diagnose import diagnose
from pgrpo.diagnose.checks import CheckOptions, run_checks
from pgrpo.diagnose.lengthstats import (
    CLIPPED,
    DENSE_PILEUP,
    MAX_REPEAT,
    MIN_PINNED_LENGTH,
    NEIGHBOURS,
    PILEUP,
    TRUNCATION_MAX,
    pinned_maximum,
    truncation_reading,
    window,
)
from pgrpo.diagnose.signals import MAX_POINTS
from pgrpo.diagnose.truncation import truncated_completions
from pgrpo.logs import RewardLog, read_log

_load_commands()
runner = CliRunner()


def _log(reward, **cols) -> RewardLog:
    n = len(reward)
    cols = {k: np.asarray(v, dtype=float) for k, v in cols.items()}
    return RewardLog(np.arange(1.0, n + 1), np.asarray(reward, float), cols, {}, (), "test",
                     "test", "reward", {"log_every": 1.0})  # fmt: skip


def _lengths(rng, n: int, limit: int, g: int, p_cut) -> tuple[np.ndarray, np.ndarray]:
    """[n] mean lengths of g whole-token completions, each cut at `limit` with probability
    p_cut (a scalar or [n]), and [n] the share cut."""
    p = np.broadcast_to(np.asarray(p_cut, dtype=float), (n,))
    cut = rng.random((n, g)) < p[:, None]
    free = rng.integers(limit // 4, limit, size=(n, g))  # finished before the limit
    lengths = np.where(cut, limit, free)
    return lengths.mean(axis=1), cut.mean(axis=1)


# --- 1. a logged share ----------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=5, max_size=300))
def test_a_logged_share_is_read_as_it_is_and_warns_above_the_threshold(shares):
    res = truncated_completions(_log(np.zeros(len(shares)), **{CLIPPED: shares}), CheckOptions())
    w = window(len(shares))
    late = float(np.mean(shares[-w:]))
    assert res.evidence["source"] == "logged" and res.evidence["late_points"] == w
    assert res.evidence["late_share"] == pytest.approx(late)
    assert res.status == ("warn" if late > TRUNCATION_MAX else "ok")
    if res.status == "warn":
        assert "mask_truncated_completions=True" in res.summary and f"{late:.0%}" in res.summary


def test_a_logged_share_beats_a_stated_limit_and_a_pinned_length():
    n = 40
    log = _log(np.zeros(n), **{CLIPPED: np.full(n, 0.02), "completion_length": np.full(n, 256.0)})
    res = truncated_completions(log, CheckOptions(max_completion_length=256))
    assert res.status == "ok" and res.evidence["source"] == "logged"
    assert "2.0% of completions cut" in res.summary


def test_a_rising_share_is_recorded():
    """The policy learns to write longer until it hits the wall: 0 -> 60% cut."""
    share = np.clip(np.linspace(-0.2, 0.6, 60), 0, None)
    res = truncated_completions(_log(np.zeros(60), **{CLIPPED: share}), CheckOptions())
    assert res.status == "warn" and res.evidence["rising"] is True
    assert res.evidence["share_gain"] > 0.3 and "rising" in res.summary


def test_a_logged_share_outside_0_1_is_not_read_as_one():
    log = _log(np.zeros(20), **{CLIPPED: np.full(20, 35.0)})
    res = truncated_completions(log, CheckOptions())
    assert res.status == "not_enough_evidence" and "not a share in [0, 1]" in res.summary


# --- 2. a stated limit ----------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(5, 400), g=st.sampled_from([2, 4, 8, 16]),
       limit=st.sampled_from([64, 200, 512, 1024]), p_cut=st.floats(0.0, 1.0))  # fmt: skip
def test_a_stated_limit_counts_the_steps_with_every_completion_cut(seed, n, g, limit, p_cut):
    """Every step with all g completions cut counts, and a step counts only when its g
    completions are less than g / 2 tokens short of the limit in all (LIMIT_TOLERANCE); mean /
    limit bounds the share cut from above."""
    rng = np.random.default_rng(seed)
    length, share = _lengths(rng, n, limit, g, p_cut)
    reading, why = truncation_reading({"completion_length": length}, np.arange(n), limit)
    assert reading is not None and reading.source == "limit", why
    counted = reading.share == 1.0
    assert np.all(counted[share == 1.0]) and np.all(g * (limit - length[counted]) <= g / 2)
    assert np.all(share <= reading.upper + 1e-12)
    res = truncated_completions(_log(np.zeros(n), completion_length=length),
                                CheckOptions(max_completion_length=limit))  # fmt: skip
    late = float(np.mean(counted[-window(n) :]))
    assert res.status == ("warn" if late > TRUNCATION_MAX else "ok")


def test_a_mean_length_above_the_stated_limit_is_not_enough_evidence():
    log = _log(np.zeros(20), completion_length=np.linspace(100, 300, 20))
    res = truncated_completions(log, CheckOptions(max_completion_length=256))
    assert res.status == "not_enough_evidence" and "above the stated max_completion_length" in (
        res.summary
    )


def test_a_mean_near_the_limit_is_a_hint_not_a_count():
    log = _log(np.zeros(30), completion_length=np.full(30, 240.0))
    res = truncated_completions(log, CheckOptions(max_completion_length=256))
    assert res.status == "ok" and res.evidence["late_share"] == 0.0
    assert "a hint, not a count" in res.summary and res.evidence["late_upper"] == pytest.approx(
        240 / 256
    )


def test_a_stated_limit_above_a_pinned_maximum_says_so():
    length = np.r_[np.linspace(150, 190, 20), np.full(30, 200.0)]
    res = truncated_completions(_log(np.zeros(50), completion_length=length),
                                CheckOptions(max_completion_length=2048))  # fmt: skip
    assert res.status == "ok" and res.evidence["pinned_below_limit"] == 200.0
    assert "--max-completion-length 200" in res.summary


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "96"])
def test_a_bad_limit_is_refused_naming_the_fix(bad):
    with pytest.raises(ValueError, match="max_completion_length must be a whole number of tokens"):
        CheckOptions(max_completion_length=bad)


# --- 3. a mean length pinned at its own maximum ----------------------------------------------


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(30, 400), g=st.sampled_from([2, 4, 8]),
       limit=st.sampled_from([96, 256, 1024]), p_cut=st.floats(0.5, 1.0))  # fmt: skip
def test_a_length_pinned_at_its_maximum_is_read_as_the_limit(seed, n, g, limit, p_cut):
    """Means of g whole-token completions, each cut at `limit` with probability p_cut: the steps
    with every completion cut are recovered exactly, at the true limit, whenever the wall stands
    out of the rest of the column (PILEUP, MAX_REPEAT); a column too coarse for that is read as
    no wall, never as a wrong one."""
    rng = np.random.default_rng(seed)
    length, share = _lengths(rng, n, limit, g, p_cut)
    full = share == 1.0
    reading, _ = truncation_reading({"completion_length": length}, np.arange(n))
    others, k = length[~full], int(full.sum())
    near = np.mean(np.unique(others, return_counts=True)[1][-NEIGHBOURS:]) if others.size else 0
    fine = near <= MAX_REPEAT and k >= PILEUP * near
    assert (reading is not None) == (k >= 3 and (fine or k >= DENSE_PILEUP * near))
    if reading is not None:
        assert reading.source == "pinned" and reading.limit == limit
        np.testing.assert_array_equal(reading.share, full.astype(float))


def test_the_shared_flat_log_warns_from_its_pinned_length():
    """f1_strategy_grpo_v1_flat: completion_length 96.0 on all 80 rows, every group all-equal
    (its corpus note: all completions truncated at 96 tokens)."""
    n = 80
    log = _log(np.full(n, 0.88), completion_length=np.full(n, 96.0),
               frac_reward_zero_std=np.ones(n))  # fmt: skip
    res = truncated_completions(log, CheckOptions())
    assert res.status == "warn" and res.evidence["source"] == "pinned"
    assert res.evidence["limit"] == 96.0 and res.evidence["cut_steps"] == n
    assert "96 tokens" in res.summary and "lower bound" in res.summary


def test_a_short_fixed_format_answer_is_not_a_limit():
    """econagent_qwen25_7b_verl_grpo: a JSON answer of exactly 20 tokens on 565 of 699 steps
    under a limit of 128: repeated, but below MIN_PINNED_LENGTH."""
    rng = np.random.default_rng(0)
    length = np.r_[17 + rng.integers(0, 24, 134) / 8, np.full(565, 20.0)]
    assert 20.0 < MIN_PINNED_LENGTH and pinned_maximum(length) is None
    res = truncated_completions(_log(np.zeros(length.size), completion_length=length),
                                CheckOptions())  # fmt: skip
    assert res.status == "not_enough_evidence" and "--max-completion-length" in res.summary
    res = truncated_completions(_log(np.zeros(length.size), completion_length=length),
                                CheckOptions(max_completion_length=128))  # fmt: skip
    assert res.status == "ok"


def _null_lengths(rng) -> np.ndarray:
    """A mean length with no wall: AR(1) noise of 0.3-60 tokens (rho 0, 0.5, 0.9) around 150 or
    a rise of 0.2 or 1 token a step, 20-2,000 points, printed to 0, 1 or 2 decimals."""
    n = int(np.exp(rng.uniform(np.log(20), np.log(2000))))
    sd = float(np.exp(rng.uniform(np.log(0.3), np.log(60))))
    rho, decimals = float(rng.choice([0.0, 0.5, 0.9])), int(rng.choice([0, 1, 2]))
    slope = float(rng.choice([0.0, 0.2, 1.0]))
    z = rng.normal(size=n)
    z[1:] *= math.sqrt(1 - rho**2)
    e = lfilter([1.0], [1.0, -rho], z)  # e_t = rho e_(t-1) + sqrt(1 - rho^2) z_t, stationary
    return np.round(150 + slope * np.arange(n) + sd * e, decimals)


def test_rounded_noise_without_a_limit_is_seldom_pinned():
    """A mean length that varies repeats values once rounded, but its maximum no more than the
    values below it: 20,000 null columns, the rate `lengthstats.DENSE_PILEUP` cites."""
    rng = np.random.default_rng(1)
    hits = sum(pinned_maximum(_null_lengths(rng)) is not None for _ in range(20_000))
    assert hits <= 18, hits


def test_a_long_log_is_pinned_at_its_wall_and_only_there():
    """Long logs fill their grid (a 2-decimal value recurs): 300 null columns of 5,000-200,000
    points are never pinned, a wall at 512 on 15% of 200,000 points is."""
    for seed in range(300):
        rng = np.random.default_rng(100 + seed)
        n, decimals = int(rng.integers(5_000, 200_000)), int(rng.choice([0, 1, 2]))
        rise = float(rng.choice([0.0, 0.001])) * np.arange(n)
        noise = float(rng.uniform(0.5, 60)) * rng.normal(size=n)
        assert pinned_maximum(np.round(300 + rise + noise, decimals)) is None, seed
    rng = np.random.default_rng(0)
    for decimals in (0, 2):
        wall = np.minimum(np.round(300 + 200 * rng.normal(size=200_000), decimals), 512.0)
        assert pinned_maximum(wall) == 512.0


def test_no_length_and_no_share_is_not_enough_evidence():
    res = truncated_completions(_log(np.zeros(30)), CheckOptions())
    assert res.status == "not_enough_evidence"
    assert CLIPPED in res.summary and "completion length" in res.summary
    short = _log(np.zeros(4), completion_length=np.full(4, 96.0))
    assert truncated_completions(short, CheckOptions()).status == "not_enough_evidence"


def test_the_check_runs_with_the_others():
    names = [c.name for c in run_checks(_log(np.zeros(20)))]
    assert "truncated_completions" in names


# --- the readers' keys ------------------------------------------------------------------------


KEYS = ["completions/clipped_ratio", "train/completions/clipped_ratio",
        "response_length/clip_ratio", "train/response_clip_ratio"]  # fmt: skip
"""pgrpo / TRL, TRL through W&B, verl, OpenRLHF through W&B or TensorBoard."""


@pytest.mark.parametrize("key", KEYS)
def test_every_framework_key_reaches_the_canonical_column(tmp_path, key):
    rows = ["step,reward," + key] + [f"{s},0.5,{0.5 if s > 20 else 0.0}" for s in range(1, 31)]
    (tmp_path / "log.csv").write_text("\n".join(rows) + "\n")
    log = read_log(tmp_path / "log.csv")
    assert CLIPPED in log.columns
    res = truncated_completions(log, CheckOptions())
    assert res.status == "warn" and res.evidence["column"] == CLIPPED


@pytest.mark.parametrize(
    "key", ["completions/mean_length", "completion_length", "response_length/mean"]
)
def test_every_framework_mean_length_key_reaches_completion_length(tmp_path, key):
    """TRL, older TRL and verl: the mean length is read, so a length pinned at a stated limit is
    found from it."""
    rows = ["step,reward," + key] + [f"{s},0.5,256" for s in range(1, 31)]
    (tmp_path / "log.csv").write_text("\n".join(rows) + "\n")
    log = read_log(tmp_path / "log.csv")
    assert np.allclose(log.columns["completion_length"], 256.0)
    res = truncated_completions(log, CheckOptions(max_completion_length=256))
    assert res.status == "warn"


@pytest.mark.parametrize("key", ["response_length", "train/response_length"])
def test_a_bare_response_length_is_not_read_as_the_mean(tmp_path, key):
    """Custom logs use `response_length` for per-step maxima and character counts: read as a
    mean, a maximum pinned at the limit said every completion was cut (review s34)."""
    rows = ["step,reward," + key] + [f"{s},0.5,{512 if s % 3 else 300}" for s in range(1, 61)]
    (tmp_path / "log.csv").write_text("\n".join(rows) + "\n")
    log = read_log(tmp_path / "log.csv")
    assert "completion_length" not in log.columns
    res = truncated_completions(log, CheckOptions(max_completion_length=512))
    assert res.status != "warn"


def test_a_tensorboard_run_carries_the_share(tmp_path):
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(tmp_path / "runs" / "a"))
    for s in range(1, 21):
        w.add_scalar("train/reward", 0.5, s)
        w.add_scalar("train/completions/clipped_ratio", 0.5, s)
    w.close()
    res = truncated_completions(read_log(tmp_path), CheckOptions())
    assert res.status == "warn" and res.evidence["column"] == CLIPPED


def test_trl_state_and_verl_logs_carry_the_share(tmp_path):
    hist = [{"step": s, "reward": 0.5, "completions/clipped_ratio": 0.25} for s in range(1, 21)]
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": hist}))
    assert read_log(tmp_path / "trainer_state.json").columns[CLIPPED][-1] == 0.25
    lines = [json.dumps({"step": s, "data": {"critic/score/mean": 0.5,
                                             "response_length/clip_ratio": 0.125}})
             for s in range(1, 21)]  # fmt: skip
    (tmp_path / "verl.jsonl").write_text("\n".join(lines) + "\n")
    assert read_log(tmp_path / "verl.jsonl").columns[CLIPPED][-1] == 0.125
    body = "".join(f"step:{s} - critic/score/mean:0.5 - response_length/clip_ratio:0.75\n"
                   for s in range(1, 21))  # fmt: skip
    (tmp_path / "train.log").write_text(body)
    assert read_log(tmp_path / "train.log").columns[CLIPPED][-1] == 0.75


# --- the degeneracy action --------------------------------------------------------------------


def _degenerate(length: np.ndarray, **hyper) -> RewardLog:
    n = length.size
    cols = {"frac_reward_zero_std": np.ones(n), "completion_length": length,
            "group_size": np.full(n, 8.0)}  # fmt: skip
    return RewardLog(np.arange(1.0, n + 1), np.zeros(n), cols, hyper, (), "test", "test", "reward")


def test_every_completion_cut_leads_the_degeneracy_action():
    mode = diagnose(_degenerate(np.full(60, 256.0))).mode("advantage_degeneracy")
    assert mode.detected and mode.evidence["truncated_source"] == "pinned"
    assert mode.action.startswith("every completion was cut at the length limit (256 tokens)")
    assert "mask_truncated_completions" in mode.action and "bimodal" not in mode.action
    # the stated limit reaches the rule through the run's settings, as `pgrpo diagnose` passes it
    rng = np.random.default_rng(1)
    varied = np.r_[rng.uniform(100, 300, 20), np.full(40, 300.0)]
    stated = diagnose(_degenerate(varied, max_completion_length=300.0))
    assert stated.mode("advantage_degeneracy").evidence["truncated_source"] == "limit"


def test_without_a_cut_the_degeneracy_action_is_unchanged():
    rng = np.random.default_rng(2)
    mode = diagnose(_degenerate(rng.uniform(100, 300, 60))).mode("advantage_degeneracy")
    assert mode.detected and "truncated_share" not in mode.evidence
    assert "length limit" not in mode.action


# --- the CLI ----------------------------------------------------------------------------------


def _flat_csv(tmp_path):
    path = tmp_path / "log.csv"
    rows = ["step,reward,reward_std,frac_reward_zero_std,completion_length"]
    rows += [f"{10 * i},0.88,0.0,1.0,96.0" for i in range(1, 81)]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_cli_shows_the_check_and_json_carries_it(tmp_path):
    log = str(_flat_csv(tmp_path))
    res = runner.invoke(app, ["diagnose", log, "--max-completion-length", "96"],
                        env={"COLUMNS": "200"})  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "truncated_completions" in res.output and "96 tokens" in res.output
    res = runner.invoke(app, ["diagnose", log, "--max-completion-length", "96", "--json"])
    checks = {c["name"]: c for c in json.loads(res.stdout)["checks"]}
    check = checks["truncated_completions"]
    assert check["status"] == "warn" and check["evidence"]["source"] == "limit"
    assert check["evidence"]["limit"] == 96.0 and check["false_alarm"]


@pytest.mark.parametrize("bad", ["0", "-5", "1.5", "abc"])
def test_cli_refuses_a_bad_limit_in_one_line(tmp_path, bad):
    res = runner.invoke(app, ["diagnose", str(_flat_csv(tmp_path)), "--max-completion-length", bad])
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert "max-completion-length" in lines[0] or "max_completion_length" in lines[0]


# --- a review of the diff (2026-12-06) ------------------------------------------------------


def test_a_stated_limit_below_the_lengths_is_set_aside_and_said():
    """A limit the mean length exceeds is not the run's: the pinned reading stands, the summary
    says the limit was set aside, and the degeneracy action keeps its cut clause (it read 'not
    enough evidence' and the clause was gone)."""
    n = 80
    log = _log(np.full(n, 0.88), completion_length=np.full(n, 96.0),
               frac_reward_zero_std=np.ones(n))  # fmt: skip
    res = truncated_completions(log, CheckOptions(max_completion_length=64))
    assert res.status == "warn" and res.evidence["source"] == "pinned"
    assert "above the stated max_completion_length 64, which is set aside" in res.summary
    mode = diagnose(_degenerate(np.full(60, 256.0), max_completion_length=128.0))
    assert mode.mode("advantage_degeneracy").evidence["truncated_source"] == "pinned"


def test_a_long_log_binned_for_the_rule_reads_the_share_per_step():
    """Past MAX_POINTS steps the rules read bin means; a bin's mean length sits at the limit only
    where all its steps did, so the rule reads the share per step, as the check does."""
    rng = np.random.default_rng(0)
    n = 3 * MAX_POINTS + 7
    length = np.where(rng.random(n) < 0.3, 512.0, rng.uniform(100, 500, n).round())
    log = _degenerate(length)
    check = truncated_completions(log, CheckOptions())
    mode = diagnose(log).mode("advantage_degeneracy")
    assert diagnose(log).metrics["bin_steps"] > 1
    assert check.evidence["source"] == "pinned" and check.status == "warn"
    late = check.evidence["late_share"]
    assert late > 0.2 and mode.evidence["truncated_share"] == pytest.approx(late, abs=1e-12)
