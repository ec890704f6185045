"""pgrpo probe through the CLI on a synthetic gradient field of known curvature (the model and
task loaders replaced, so each case takes well under a second): the text output when the
prediction diverges, the run optimizer's reduction and preconditioner, the `pgrpo predict`
command it prints (pasted, it reproduces the prediction), degenerate and non-finite probes."""

from __future__ import annotations

import json
import shlex
from types import SimpleNamespace

import pytest
import torch
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.measure.probe import ProbeResult

N = 3  # parameters of the synthetic policy
TINY = ["model.name=tiny", "grpo.group_size=8", "grpo.batch_prompts=8"]


def _linear_force(kappa: float, spread: float = 0.1):
    """grad(theta, seed) = -kappa (1 + spread z_seed) (theta - 1): the pair with seed s measures
    kappa (1 + spread z_s) along P = I (the ascent gradient of a quadratic of stiffness kappa)."""

    def grad_fn(theta: torch.Tensor, seed: int) -> torch.Tensor:
        z = float(torch.randn(1, generator=torch.Generator().manual_seed(seed)))
        return -kappa * (1 + spread * z) * (theta - 1)

    return grad_fn


@pytest.fixture
def fake_model(monkeypatch):
    """Replace the model/task loading and the LM gradient by `grad_fn` (set by the test)."""
    import pgrpo.measure.probe as mp
    import pgrpo.train.rollout as ro

    weights = torch.nn.Parameter(torch.zeros(N))
    policy = SimpleNamespace(
        trainable_parameters=lambda: [weights], precision=SimpleNamespace(name="fp32")
    )
    task = SimpleNamespace(load=lambda split: [{}] * 8)
    monkeypatch.setattr(ro, "load_task_and_policy", lambda c, checkpoint=None: (task, policy))
    field = {"grad_fn": _linear_force(50.0)}
    monkeypatch.setattr(
        mp, "lm_gradient", lambda *a: (field["grad_fn"], torch.zeros(N, dtype=torch.float64))
    )
    return field


def _probe(*args: str):
    _load_commands()
    return CliRunner().invoke(app, ["probe", *TINY, *args])


def _json(*args: str) -> dict:
    res = _probe(*args, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_an_unstable_prediction_prints_the_divergence(fake_model):
    """K = 200 >= K* at lr kappa = 0.05 under SGD momentum: tau is None; the text said
    `unsupported format string passed to NoneType.__format__` and exited 2."""
    args = ["optim.name=sgd_momentum", "optim.lr=1e-3", "grpo.refresh_interval=200"]
    out = _json(*args)
    assert out["prediction"]["regime"] == "unstable" and out["prediction"]["tau"] is None
    res = _probe(*args)
    assert res.exit_code == 0, res.output
    k_star = out["prediction"]["refresh_threshold"]
    text = " ".join(res.stdout.split())  # rich wraps at the console's width
    assert f"K=200 >= K*={k_star}: the mean diverges" in text
    assert "lower the refresh interval or the learning rate" in text


@pytest.mark.parametrize(
    ("optim", "reduction", "preconditioner"),
    [("adamw", "adam", "adam"), ("sgd_momentum", "sgd_momentum", "sgd")],
)
def test_the_run_optimizer_sets_reduction_preconditioner_and_predict_command(
    fake_model, optim, reduction, preconditioner, tmp_path
):
    """The prediction uses optim.name's reduction, the preconditioner follows it, and the printed
    `pgrpo predict` line, run as printed, gives the same regime and tau."""
    args = [f"optim.name={optim}", "optim.lr=1e-3", "optim.beta2=0.99", "grpo.refresh_interval=4"]
    out = _json(*args)
    assert out["optimizer"] == reduction and out["preconditioner"] == preconditioner
    assert (out["prediction"]["refresh_threshold"] is None) == (reduction == "adam")
    res = _probe(*args)
    assert res.exit_code == 0, res.output
    (line,) = [x for x in res.stdout.splitlines() if x.startswith("forecast a run: ")]
    words = shlex.split(line.removeprefix("forecast a run: "))
    assert words[:2] == ["pgrpo", "predict"] and line.endswith(out["predict_command"])
    assert ("--beta2" in words) == (reduction == "adam")
    pasted = CliRunner().invoke(app, [*words[1:], "--out", str(tmp_path), "--json"])
    assert pasted.exit_code == 0, pasted.output
    pred = json.loads(pasted.stdout)
    assert pred["regime"] == out["prediction"]["regime"]
    assert pred["tau"] == out["prediction"]["tau"]
    assert pred["refresh_threshold"] == out["prediction"]["refresh_threshold"]


def test_a_preconditioner_that_contradicts_the_optimizer_is_warned_about(fake_model):
    out = _json("optim.name=sgd_momentum", "--preconditioner", "adam")
    assert out["preconditioner"] == "adam" and out["prediction"] is None
    assert any("contradicts optim.name=sgd_momentum" in w for w in out["warnings"])
    assert _json("optim.name=sgd_momentum", "--preconditioner", "sgd")["prediction"] is not None


def test_pairs_with_equal_gradients_are_no_measurement(fake_model):
    """Every group degenerate at both ends: each pair's difference is exactly 0; the probe said
    `kappa = 0 +- 0` and not noise-dominated."""
    fake_model["grad_fn"] = lambda theta, seed: torch.ones(N, dtype=torch.float64)
    out = _json()
    assert out["kappa"] is None and out["stderr"] is None and out["prediction"] is None
    assert out["zero_pairs"] == len(out["samples"]) and out["noise_dominated"] is True
    res = _probe()
    text = " ".join(res.stdout.split())
    assert res.exit_code == 0 and "no measurement: every pair's gradients were equal" in text
    assert "kappa =" not in text and "raise grpo.group_size" in text


def test_a_noisy_direction_is_warned_about(fake_model):
    def noisy(theta: torch.Tensor, seed: int) -> torch.Tensor:
        z = torch.randn(N, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        return _linear_force(50.0)(theta, seed) + 1e3 * z

    fake_model["grad_fn"] = noisy
    out = _json("--direction-batches", "2")
    assert out["metrics"]["direction_snr"] < 2
    assert any("raise --direction-batches" in w for w in out["warnings"])
    fake_model["grad_fn"] = _linear_force(50.0)
    clean = _json("--direction-batches", "2")
    assert not any("direction" in w for w in clean["warnings"])


def test_a_non_finite_kappa_is_an_error(fake_model):
    fake_model["grad_fn"] = lambda theta, seed: -50.0 * theta**3 + 1
    res = _probe("--step-lrs", "1e300")
    assert res.exit_code == 2 and "not finite" in res.output
    assert "lower --step-lrs" in res.output


def test_noise_dominated_includes_the_boundary():
    """stderr >= half of |kappa| (0 +- 0 included) is noise-dominated."""
    from pgrpo.measure.config import ProbeConfig
    from pgrpo.measure.probe_run import _verdict
    from pgrpo.train.config import load_config
    from pgrpo.train.setup import run_lr_horizon

    c = load_config(None, ["model.name=tiny", "optim.name=sgd_momentum"])
    cfg = ProbeConfig(preconditioner="sgd")
    at, horizon = {"near_plateau": False, "plateau_evidence": "x"}, run_lr_horizon(c, 0)
    for kappa, stderr, dominated in ((1.0, 0.5, True), (1.0, 0.49, False), (0.0, 0.0, True)):
        res = ProbeResult(kappa, stderr, (kappa - stderr, kappa + stderr))
        assert _verdict(res, cfg, c, "sgd_momentum", at, horizon)["noise_dominated"] is dominated


def test_a_missing_model_folder_fails_before_loading(fake_model):
    """As train: `load_run_config` runs `check_model` before any loading (the fake loader would
    otherwise succeed). A bare name such as `nonexistent_model_xyz` is not checked there: the hub
    loader retries it (~50 s offline), in train as in probe (cli/common.py's check_model)."""
    _load_commands()
    res = CliRunner().invoke(app, ["probe", "model.name=./no_such_model_folder"])
    assert res.exit_code == 2 and "no such model folder" in res.output


# ---------------------------------------------------------------------------------------------
# session 39: what the probe measured, the horizon and schedule, the step's linear regime
# ---------------------------------------------------------------------------------------------


def test_at_the_initial_policy_the_prediction_is_marked_not_supported(fake_model):
    """The probe at the initial policy measures the local slope there, not the plateau's
    stiffness: the prediction was printed as the run's; now it is kept with the caveat."""
    out = _json("optim.name=sgd_momentum", "optim.lr=1e-3")
    assert out["probed_at"] == "initial policy" and "local slope" in out["measured"]
    assert out["near_plateau"] is False and out["prediction_supported"] is False
    assert "not supported by this measurement" in out["caveat"]
    assert "bench/probe_init_bandit.py" in out["caveat"]
    text = " ".join(_probe("optim.name=sgd_momentum", "optim.lr=1e-3").stdout.split())
    assert "measured: the local slope of the restoring force" in text
    assert "caveat: a prediction from this kappa is not supported" in text
    assert "IF this were the plateau's kappa" in text


def _run_dir(tmp_path, rewards):
    """A run folder as `pgrpo train` leaves it, for the fake loader: config, a checkpoint
    pointer, a state file and the checkpoint's copy of the log."""
    run = tmp_path / "run"
    ckpt = run / "checkpoints" / f"step-{len(rewards)}"
    ckpt.mkdir(parents=True)
    (run / "checkpoints" / "latest").write_text(ckpt.name)
    (ckpt / "state.pt").write_bytes(b"")
    lines = [json.dumps({"step": i + 1, "reward": r}) for i, r in enumerate(rewards)]
    (ckpt / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (run / "config.yaml").write_text(
        "model: {name: tiny}\ngrpo: {group_size: 8, batch_prompts: 8, refresh_interval: 2}\n"
        "optim: {name: sgd_momentum, lr: 0.001}\nrun: {steps: 100}\n"
    )
    return run


def test_a_checkpoint_on_its_plateau_gives_a_supported_prediction(fake_model, tmp_path):
    """--run: the run's own log up to the checkpoint decides; the horizon is what is left of the
    run's optimizer steps."""
    import numpy as np

    noise = np.random.default_rng(0).normal(0, 0.02, 60)
    flat_top = (0.8 - 0.6 * np.exp(-np.arange(60) / 8) + noise).tolist()
    _load_commands()
    res = CliRunner().invoke(app, ["probe", "--run", str(_run_dir(tmp_path, flat_top)), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["probed_at"] == "checkpoint step-60" and out["near_plateau"] is True
    assert out["prediction_supported"] is True
    # supported: the estimand is the model's; the caveat says the curve may still not follow it
    assert out["caveat"].startswith("the probe measured the plateau's stiffness")
    assert out["start_step"] == 120 and out["steps"] == 200 - 120
    rising = (0.2 + 0.01 * np.arange(60) + noise).tolist()
    (tmp_path / "run").rename(tmp_path / "old")
    res = CliRunner().invoke(app, ["probe", "--run", str(_run_dir(tmp_path, rising)), "--json"])
    out = json.loads(res.stdout)
    assert out["near_plateau"] is False and out["prediction_supported"] is False
    assert "reads 'learning'" in out["caveat"]


def test_the_horizon_is_in_optimizer_steps(fake_model):
    """run.steps counts rollout batches; the model's step is the optimizer step (K per batch):
    the probe predicted, and printed `--steps`, run.steps."""
    out = _json("optim.name=sgd_momentum", "run.steps=30", "grpo.refresh_interval=4")
    assert out["rollout_batches"] == 30 and out["steps"] == 120
    assert "--steps 120" in out["predict_command"]


def test_the_runs_lr_schedule_enters_the_prediction(fake_model, tmp_path):
    """Warm-up and decay change the predicted mean (its steepest step); the probe ignored them.
    The printed command carries the schedule and, pasted, gives the same inflection."""
    base = ["optim.name=sgd_momentum", "optim.lr=1e-3", "run.steps=200"]
    flat = _json(*base)["prediction"]
    out = _json(*base, "optim.warmup_steps=60", "optim.schedule=cosine")
    assert out["prediction"]["inflection_time"] != flat["inflection_time"]
    words = shlex.split(out["predict_command"])
    assert words[words.index("--schedule") + 1] == "cosine"
    assert words[words.index("--warmup-steps") + 1] == "60"
    pasted = CliRunner().invoke(app, [*words[1:], "--out", str(tmp_path), "--json"])
    assert pasted.exit_code == 0, pasted.output
    pred = json.loads(pasted.stdout)
    assert pred["inflection_time"] == out["prediction"]["inflection_time"]
    assert pred["tau"] == out["prediction"]["tau"]


def test_a_step_that_wrecks_the_policy_is_an_error(fake_model):
    """--step-lrs 1000: every group degenerate at theta +- eps u (gradient exactly 0) while the
    direction batches at theta were not: an error, exit 2 (it read 'no measurement', exit 0)."""

    def cliff(theta: torch.Tensor, seed: int) -> torch.Tensor:
        far = float(theta.abs().max()) > 5  # past here the policy is wrecked: all groups fail
        return torch.zeros(N, dtype=torch.float64) if far else _linear_force(50.0)(theta, seed)

    fake_model["grad_fn"] = cliff
    sgd = ["optim.name=sgd_momentum", "optim.lr=1e-3"]
    res = _probe(*sgd, "--step-lrs", "1000", "--pairs", "8")
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert "left the linear regime" in text and "16 of 16" in text and "lower --step-lrs" in text
    assert len(res.output.strip().splitlines()) == 1
    assert _json(*sgd)["kappa"] == pytest.approx(50.0, rel=0.2)  # the default step is linear


def test_levels_the_probe_does_not_measure_are_left_out(fake_model):
    """final_mean needs R_inf: the probe passed none, so it came from predict's 0.2 -> 0.8."""
    out = _json("optim.name=sgd_momentum")
    assert out["prediction"]["final_mean"] is None
    assert out["reward_mean"] is None  # the fake gradient records no reward


def test_bad_flags_are_named(fake_model):
    res = _probe("--step-lrs", "-1")
    assert res.exit_code == 2 and "--step-lrs -1" in res.output
    res = _probe("--pairs", "2", "--direction-batches", "3")
    assert res.exit_code == 2 and "--pairs 2 is fewer than --direction-batches 3" in res.output
    fake_model["grad_fn"] = lambda theta, seed: torch.zeros(N, dtype=torch.float64)
    res = _probe()
    assert res.exit_code == 2 and "expected gradient is zero" in res.output
    assert "raise grpo.group_size, grpo.batch_prompts" in " ".join(res.output.split())


def test_at_the_runs_end_there_is_nothing_to_predict(fake_model, tmp_path):
    """--run at a finished run's last checkpoint (step-100 of run.steps 100, K = 2: optimizer
    step 200 of 200): the probe predicted over a made-up one-step horizon at step 199's lr and
    printed a `pgrpo predict` line whose schedule ran that step at another lr (`--steps 1
    --schedule-start 200` is a 201-step schedule). Now kappa is reported and the prediction is
    withheld in one note; one batch earlier the horizon is the last K steps."""
    import numpy as np

    noise = np.random.default_rng(0).normal(0, 0.02, 100)
    flat_top = (0.8 - 0.6 * np.exp(-np.arange(100) / 8) + noise).tolist()
    run = _run_dir(tmp_path, flat_top)
    config = run / "config.yaml"
    config.write_text(config.read_text().replace("lr: 0.001}", "lr: 0.001, schedule: linear}"))
    _load_commands()
    res = CliRunner().invoke(app, ["probe", "--run", str(run), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["kappa"] == pytest.approx(50.0, rel=0.2) and out["near_plateau"] is True
    assert out["prediction"] is None and "predict_command" not in out
    assert (out["start_step"], out["total_steps"]) == (200, 200)
    assert out["steps"] == 0 and out["peak_lr"] is None
    assert out["note"].startswith("no prediction: the checkpoint step-100 is at or past the run")
    text = CliRunner().invoke(app, ["probe", "--run", str(run)])
    assert text.exit_code == 0, text.output
    flat = " ".join(text.stdout.split())
    assert "optimizer step 200 of run.steps x K = 200), so no steps are left to predict" in flat
    assert "IF this were" not in flat and "forecast a run" not in flat
    # a batch before the end: the last K = 2 steps, and the pasted line predicts the same
    (run / "checkpoints" / "step-100").rename(run / "checkpoints" / "step-99")
    (run / "checkpoints" / "latest").write_text("step-99")
    out = json.loads(CliRunner().invoke(app, ["probe", "--run", str(run), "--json"]).stdout)
    assert (out["start_step"], out["steps"]) == (198, 2) and out["prediction"] is not None
    words = shlex.split(out["predict_command"])
    assert words[words.index("--schedule-start") + 1] == "198" and "--steps" in words
    pasted = CliRunner().invoke(app, [*words[1:], "--out", str(tmp_path), "--json"])
    assert pasted.exit_code == 0, pasted.output
    assert json.loads(pasted.stdout)["tau"] == out["prediction"]["tau"]
