"""Run checks (zero-gradient steps, wasted compute, verifier gaming, entropy floor) and the
`pgrpo diagnose --fail-on` gate: on real logs, on null curves (no false alarm), on constructed
positives, through the CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pgrpo.diagnose.checks import CHECKS, CheckOptions, check_names, run_checks
from pgrpo.diagnose.costs import wasted_compute, zero_gradient_mask, zero_gradient_steps
from pgrpo.diagnose.entropy import entropy_floor, entropy_floor_forecast
from pgrpo.diagnose.gaming import length_vs_reward, reward_function_divergence
from pgrpo.logs import RewardLog, read_log

EXPORT = Path(__file__).parent / "fixtures" / "logs" / "wandb_run_export.json"
OPTS = CheckOptions()


def _log(reward, **cols):
    n = len(reward)
    step = np.arange(1.0, n + 1)
    cols = {k: np.asarray(v, dtype=float) for k, v in cols.items()}
    return RewardLog(step, np.asarray(reward, float), cols, {}, (), "test", "test", "reward",
                     {"log_every": 1.0})  # fmt: skip


def test_registry_holds_every_check():
    names = check_names()  # imports the modules that register checks lazily, as run_checks does
    run_checks(_log(np.zeros(20)))
    assert set(names) == set(CHECKS.names()) == {
        "zero_gradient_steps", "wasted_compute", "length_vs_reward", "reward_function_divergence",
        "entropy_floor", "truncated_completions", "kl_level"}  # fmt: skip


# --- zero-gradient steps --------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=1, max_size=60))
def test_zero_gradient_counts_exactly_the_all_degenerate_points(fracs):
    log = _log(np.full(len(fracs), 0.5), frac_reward_zero_std=fracs)
    mask, used = zero_gradient_mask(log)
    assert used == ["frac_reward_zero_std"]
    assert mask.sum() == sum(f == 1.0 for f in fracs)
    res = zero_gradient_steps(log, CheckOptions(cost_per_step=2.0))
    assert res.evidence["zero_gradient_steps"] == sum(f == 1.0 for f in fracs)
    if any(f == 1.0 for f in fracs):
        assert res.evidence["cost"] == pytest.approx(2.0 * sum(f == 1.0 for f in fracs))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.1, 0.5]), min_size=1, max_size=60))
def test_a_reward_std_of_0_is_a_step_without_gradient(stds):
    """reward_std is 0 only where every group is all-equal (the groups' mean spread, as TRL
    logs it, or the batch's): a one-prompt run with 150 such steps read "not enough evidence"
    (a review, 2026-12-06)."""
    log = _log(np.full(len(stds), 0.5), reward_std=stds)
    mask, used = zero_gradient_mask(log)
    assert used == ["reward_std"] and mask.sum() == sum(x == 0.0 for x in stds)
    res = zero_gradient_steps(log, OPTS)
    assert res.status != "not_enough_evidence"
    assert res.evidence["zero_gradient_points"] == sum(x == 0.0 for x in stds)


def test_a_coarsely_rounded_reward_std_is_not_read_as_zero_gradient():
    """A reward_std printed to 3 decimals with values of a few thousandths: a logged 0 may be a
    small spread, as the degeneracy verdict says, so the checks do not count it (one reading,
    `starvation.zero_spread_share`; a review, 2026-12-06)."""
    rng = np.random.default_rng(0)
    sd = np.round(np.abs(rng.normal(0.0015, 0.0015, 80)), 3)
    assert (sd == 0).sum() > 5
    log = _log(np.full(80, 0.5), reward_std=sd)
    assert zero_gradient_mask(log) == (None, [])
    assert zero_gradient_steps(log, OPTS).status == "not_enough_evidence"


def test_zero_gradient_on_real_logs(shared_data):
    log = read_log(shared_data / "curves" / "f1_strategy_grpo_v1_flat.csv")
    res = zero_gradient_steps(log, CheckOptions(cost_per_gpu_hour=2.0, seconds_per_step=36.0))
    raw = np.genfromtxt(shared_data / "curves" / "f1_strategy_grpo_v1_flat.csv", delimiter=",",
                        names=True)  # fmt: skip
    k = int((raw["frac_reward_zero_std"] >= 1.0).sum())
    assert res.status == "warn" and res.evidence["zero_gradient_points"] == k > 0
    stride = log.metrics["log_every"]
    assert res.evidence["gpu_hours"] == pytest.approx(k * stride * 36.0 / 3600)
    assert res.evidence["cost"] == pytest.approx(res.evidence["gpu_hours"] * 2.0)
    spread = read_log(shared_data / "curves" / "gsm8k_qwen3_1p7b_abl_baseline.csv")
    assert zero_gradient_steps(spread, OPTS).evidence["columns"] == "reward_std"
    no_col = _log(spread.reward)  # the reward alone
    assert zero_gradient_steps(no_col, OPTS).status == "not_enough_evidence"


# --- wasted compute -------------------------------------------------------------------------


def test_wasted_compute_prices_the_steps_past_a_plateau():
    rng = np.random.default_rng(0)
    t = np.arange(1.0, 201)
    log = _log(0.8 - 0.6 * np.exp(-t / 10) + 0.02 * rng.standard_normal(200), _runtime=30.0 * t)
    res = wasted_compute(log, CheckOptions(cost_per_gpu_hour=3.0, gpus=2))
    ev = res.evidence
    assert res.status == "warn" and ev["confirmed"]
    assert 30 <= ev["plateau_step"] <= 100  # 3-10 time constants
    assert ev["wasted_steps"] == pytest.approx(200 - ev["plateau_step"])
    assert ev["gpu_hours"] == pytest.approx(ev["wasted_steps"] * 30.0 * 2 / 3600, rel=1e-6)
    assert ev["cost"] == pytest.approx(ev["gpu_hours"] * 3.0)


def test_wasted_compute_does_not_warn_on_a_rising_run():
    rng = np.random.default_rng(1)
    log = _log(0.004 * np.arange(200) + 0.02 * rng.standard_normal(200))
    assert wasted_compute(log, OPTS).status == "ok"


def test_wasted_compute_on_real_logs(shared_data):
    """A real run that plateaued (the later data confirm it) is priced; a real run the live rule
    would have stopped too early (it rose later) is not counted as waste. (This used
    hotpotqa_agent_grpo_v3 until the AR(1) null took an upper bound on rho: on its 46 points the
    live plateau stop now comes at step 900 of 920, too late to price.)"""
    plateaued = read_log(shared_data / "curves" / "chaos_economy_llama32_3b_500.csv")
    res = wasted_compute(plateaued, CheckOptions(cost_per_step=0.25))
    ev = res.evidence
    assert res.status == "warn" and ev["confirmed"]
    past = plateaued.step[-1] - ev["plateau_step"]  # plus its zero-gradient steps before it
    assert ev["wasted_steps"] == pytest.approx(past + ev["zero_gradient_steps"])
    assert ev["zero_gradient_steps"] > 0
    assert ev["cost"] == pytest.approx(0.25 * ev["wasted_steps"])
    assert ev["gain_after_plateau"] < 1.29 * ev["gain_se"]
    premature = read_log(shared_data / "curves" / "cs336_shibuki_question_only_prompt.csv")
    res = wasted_compute(premature, OPTS)  # the live rule fires mid-run; the reward rose later
    assert 100 <= res.evidence["plateau_step"] <= 150  # step 125 of 200
    assert not res.evidence["confirmed"] and res.evidence["wasted_steps"] == 0
    assert res.status == "ok"
    # it says why nothing counts (was "no confirmed plateau", beside a verdict that read one)
    assert "would fire at step 125, but the reward rose after it by +" in res.summary


def test_wasted_compute_names_only_the_parts_it_found(shared_data):
    """A run with zero-gradient steps and no plateau read "0 past the plateau at step nan";
    85% of groups without spread on 99.69% of them read "100%" (review, 2026-12-04)."""
    log = read_log(shared_data / "curves" / "f1_strategy_grpo_v1_flat.csv")
    res = wasted_compute(log, OPTS)
    assert "without policy gradient" in res.summary
    assert "plateau at step" not in res.summary and "nan" not in res.summary
    # no plateau stop is advised for steps it would not have saved (a review, 2026-12-06:
    # "still learning" beside "a live stop on any plateau would have stopped there")
    assert "PgrpoCallback" not in res.summary and "no plateau stop would have saved" in res.summary
    assert "without policy gradient (read from frac_reward_zero_std, reward_std)" in res.summary


def test_wasted_compute_says_the_reward_fell_after_the_stop():
    """Steps after the replayed stop on a run that then collapsed are not a plateau's idling:
    the words say the reward fell (a review, 2026-12-06: "past the plateau" on collapses)."""
    rng = np.random.default_rng(0)
    t = np.arange(300)
    y = 0.8 * (1 - np.exp(-t / 20)) - 0.5 * (t > 230) + 0.02 * rng.standard_normal(300)
    res = wasted_compute(_log(y), OPTS)
    ev = res.evidence
    assert ev["confirmed"] and ev["gain_after_plateau"] < 0
    assert "the reward then fell by" in res.summary and "PgrpoCallback" in res.summary
    from pgrpo.diagnose.nullmodel import fmt_share

    assert [fmt_share(x) for x in (0.9969, 1.0, 0.0, 0.004, 0.5, 0.9996, 1e-6)] == [
        "99.7%", "100%", "0%", "0.4%", "50%", ">99.9%", "<0.1%"
    ]  # fmt: skip


def test_bad_cost_options_say_how_to_fix():
    with pytest.raises(ValueError, match="cost_per_step must be a finite number >= 0"):
        CheckOptions(cost_per_step=-1.0)
    with pytest.raises(ValueError, match="gpus must be >= 1"):
        CheckOptions(gpus=0)


# --- verifier gaming ------------------------------------------------------------------------


def test_format_rising_while_correctness_flat_warns():
    log = read_log(EXPORT)  # recorded TRL/W&B run: format reward 0.2 -> 1, correctness ~0.1
    res = reward_function_divergence(log, OPTS)
    assert res.status == "warn"
    assert "rewards/format_reward/mean rose" in res.summary
    assert "rewards/correctness_reward/mean stayed flat" in res.summary


def test_reward_functions_rising_together_do_not_warn():
    rng = np.random.default_rng(2)
    t = np.arange(100.0)
    a = 0.2 + 0.006 * t + 0.03 * rng.standard_normal(100)
    b = 0.1 + 0.004 * t + 0.03 * rng.standard_normal(100)
    log = _log(a + b, **{"rewards/fmt/mean": a, "rewards/acc/mean": b})
    assert reward_function_divergence(log, OPTS).status == "ok"


def test_length_rising_against_a_flat_reward_warns_and_rising_together_does_not():
    rng = np.random.default_rng(3)
    t = np.arange(120.0)
    length = 100 + 2.0 * t + 5 * rng.standard_normal(120)
    flat = _log(0.3 + 0.02 * rng.standard_normal(120), completion_length=length)
    assert length_vs_reward(flat, OPTS).status == "warn"
    rising = _log(0.3 + 0.004 * t + 0.02 * rng.standard_normal(120), completion_length=length)
    assert length_vs_reward(rising, OPTS).status == "ok"


@pytest.mark.parametrize("n", [50, 200])
def test_gaming_checks_on_null_columns_rarely_warn(n):
    """Independent noise columns: the measured false-alarm rate stays below 3% (stated: ~1%)."""
    rng = np.random.default_rng(n)
    warns = {"div": 0, "len": 0}
    reps = 150
    for _ in range(reps):
        cols = {"rewards/a/mean": rng.standard_normal(n), "rewards/b/mean": rng.standard_normal(n),
                "completion_length": rng.standard_normal(n)}  # fmt: skip
        log = _log(rng.standard_normal(n), **cols)
        warns["div"] += reward_function_divergence(log, OPTS).status == "warn"
        warns["len"] += length_vs_reward(log, OPTS).status == "warn"
    assert warns["div"] / reps < 0.03 and warns["len"] / reps < 0.03


def test_a_length_pinned_at_its_limit_is_named():
    """A length that climbs to the generation limit and sits there: the warning says the
    completions are being cut; one that rises without a ceiling gets no such clause."""
    rng = np.random.default_rng(1)
    n = 50  # the shape of chaos_economy_llama32_1b_250's length: ~420 to the 512 limit by ~12
    reward = 0.4 + 0.05 * rng.standard_normal(n)
    climb = np.minimum(420 + 8 * np.arange(n) + 20 * rng.standard_normal(n), 512.0)
    got = length_vs_reward(_log(reward, completion_length=climb), OPTS)
    assert got.status == "warn" and "cut at the length limit" in got.summary
    assert got.evidence["length_at_max_late"] == 1.0
    free = 300 + 4 * np.arange(n) + 5 * rng.standard_normal(n)
    got = length_vs_reward(_log(reward, completion_length=free), OPTS)
    assert got.status == "warn" and "length limit" not in got.summary
    assert got.evidence["length_at_max_late"] < 0.5


def test_gaming_checks_on_real_logs_say_what_is_missing(shared_data):
    """The shared real logs have one reward column each: the divergence check says it cannot
    judge. Length vs reward warns on one log, whose completion length rose 424 -> 512 and then
    sat at 512, the length limit, on 24 of its last 25 points, while the reward stayed noise
    (before 2026-12-05 the column's rise to the limit read as AR(1) wander at rho 0.7, and no
    real log warned); the warning says the completions are being cut."""
    index = json.loads((shared_data / "curves" / "index.json").read_text())["runs"]
    warned = {}
    for run in index:
        log = read_log(shared_data / "curves" / run["csv"])
        div = reward_function_divergence(log, OPTS)
        assert div.status == "not_enough_evidence" and "per-function" in div.summary
        got = length_vs_reward(log, OPTS)
        if got.status == "warn":
            warned[run["name"]] = got
        else:
            assert got.status in ("ok", "not_enough_evidence"), run["name"]
    assert list(warned) == ["chaos_economy_llama32_1b_250"]
    got = warned["chaos_economy_llama32_1b_250"]
    assert got.evidence["length_at_max_late"] >= 0.9 and "cut at the length limit" in got.summary


# --- entropy floor --------------------------------------------------------------------------


def test_entropy_floor_recovers_a_known_exponential():
    t = np.arange(1.0, 301)
    rng = np.random.default_rng(4)
    h = 0.2 + 0.8 * np.exp(-t / 40) + 0.01 * rng.standard_normal(300)
    ev = entropy_floor_forecast(t[:120], h[:120])
    assert ev["floor_lo"] <= 0.2 <= ev["floor_hi"]
    assert ev["floor"] == pytest.approx(0.2, abs=0.05)
    assert ev["tau"] == pytest.approx(40, rel=0.3)
    assert ev["floor_step"] == pytest.approx(1 + 40 * math.log(10), rel=0.3)


def test_entropy_collapse_warns_and_real_logs_are_judged(shared_data):
    t = np.arange(1.0, 201)
    rng = np.random.default_rng(5)
    collapsing = _log(np.zeros(200), entropy=0.01 + 1.0 * np.exp(-t / 20)
                      + 0.005 * rng.standard_normal(200))  # fmt: skip
    res = entropy_floor(collapsing, OPTS)
    assert res.status == "warn" and "entropy collapse already" in res.summary  # past its floor
    ev = res.evidence
    assert 0.0 <= ev["floor_lo"] <= ev["floor"] <= ev["floor_hi"]
    falling = _log(
        np.zeros(200),
        entropy=np.maximum(1.0 * np.exp(-t / 20), 0.0) + 0.002 * rng.standard_normal(200) - 0.003,
    )  # a fit heading below 0
    ev = entropy_floor(falling, OPTS).evidence
    assert 0.0 <= ev["floor_lo"] <= ev["floor"] <= ev["floor_hi"]
    log = read_log(shared_data / "curves" / "cs336_shibuki_onpolicy_lr1e-5.csv")
    res = entropy_floor(log, OPTS)
    assert res.status in ("ok", "warn") and res.evidence["floor"] < res.evidence["initial"]
    assert entropy_floor(_log(np.zeros(30)), OPTS).status == "not_enough_evidence"


def test_entropy_floor_words_on_real_logs(shared_data):
    """An entropy never goes below 0, a floor reached before the last step is not "0 steps from
    now", and "from" is the logged start, not the fit's H_0 (-0.706 on a run logged from 0.92;
    review, 2026-12-04)."""
    log = read_log(shared_data / "curves" / "cs336_shibuki_ref_lr4e-5_stdnorm.csv")
    res = entropy_floor(log, OPTS)
    ev = res.evidence
    assert ev["floor_lo"] == 0.0 and ev["steps_to_floor"] == 0.0
    assert "before the last logged step" in res.summary and "0 steps from now" not in res.summary
    log = read_log(shared_data / "curves" / "cs336_shibuki_offpolicy_e16_tb256.csv")
    res = entropy_floor(log, OPTS)
    col = log.columns["entropy"]
    assert res.evidence["start"] == pytest.approx(float(np.mean(col[:3])))
    assert res.evidence["start"] > 0 and res.summary.startswith("entropy rose: ")
    assert "no floor to reach" in res.summary  # it rose x5.7: not a floor (review, 2026-12-06)


# --- CLI: checks in the output, the --fail-on gate ------------------------------------------

from pgrpo.cli import _load_commands, app  # noqa: E402

_load_commands()
runner = CliRunner()


def test_diagnose_json_has_checks_and_gate(shared_data):
    path = shared_data / "curves" / "f1_strategy_grpo_v1_flat.csv"
    out = runner.invoke(app, ["diagnose", str(path), "--json", "--cost-per-step", "0.5"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    checks = {c["name"]: c for c in data["checks"]}
    assert checks["zero_gradient_steps"]["status"] == "warn"
    assert checks["wasted_compute"]["evidence"]["cost"] > 0
    assert data["gate"] == "fail"  # advantage_degeneracy is detected on this flat run


@pytest.mark.parametrize(("fail_on", "code"), [(None, 0), ("fail", 1), ("warn", 1)])
def test_fail_on_exit_codes_on_a_failing_run(shared_data, fail_on, code):
    path = shared_data / "curves" / "f1_strategy_grpo_v1_flat.csv"
    extra = ["--fail-on", fail_on] if fail_on else []
    out = runner.invoke(app, ["diagnose", str(path), *extra])
    assert out.exit_code == code, out.output
    if code:
        assert "gate: fail" in out.output


def test_fail_on_fail_passes_a_warn_only_run(tmp_path):
    """A rising run whose only finding is 10% zero-gradient points: gate 'warn'."""
    rng = np.random.default_rng(0)
    t = np.arange(1, 101)
    reward = 0.2 + 0.5 * (1 - np.exp(-t / 150)) + 0.02 * rng.standard_normal(100)
    frac = np.clip(0.3 + 0.05 * rng.standard_normal(100), 0, 1)
    frac[::10] = 1.0
    path = tmp_path / "run.csv"
    rows = ["step,reward,frac_reward_zero_std"] + [f"{a},{b},{c}" for a, b, c in
                                                   zip(t, reward, frac, strict=True)]  # fmt: skip
    path.write_text("\n".join(rows) + "\n")
    data = json.loads(runner.invoke(app, ["diagnose", str(path), "--json"]).stdout)
    assert data["gate"] == "warn" and data["modes"][-1]["detected"]  # healthy, one check warns
    assert runner.invoke(app, ["diagnose", str(path), "--fail-on", "fail"]).exit_code == 0
    out = runner.invoke(app, ["diagnose", str(path), "--fail-on", "warn"])
    assert out.exit_code == 1 and "gate: warn" in out.output


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--fail-on", "error"], "--fail-on must be one of warn, fail"),
     (["--cost-per-step", "-2"], "cost_per_step must be a finite number")],
)  # fmt: skip
def test_diagnose_bad_gate_options_exit_2(args, message):
    out = runner.invoke(app, ["diagnose", str(EXPORT), *args])
    assert out.exit_code == 2 and message in out.output
