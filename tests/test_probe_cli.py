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
    from pgrpo.measure.probe import _verdict
    from pgrpo.train.config import load_config

    c = load_config(None, ["model.name=tiny", "optim.name=sgd_momentum"])
    cfg = ProbeConfig(preconditioner="sgd")
    for kappa, stderr, dominated in ((1.0, 0.5, True), (1.0, 0.49, False), (0.0, 0.0, True)):
        res = ProbeResult(kappa, stderr, (kappa - stderr, kappa + stderr))
        assert _verdict(res, cfg, c, "sgd_momentum")["noise_dominated"] is dominated


def test_a_missing_model_folder_fails_before_loading(fake_model):
    """As train: `load_run_config` runs `check_model` before any loading (the fake loader would
    otherwise succeed). A bare name such as `nonexistent_model_xyz` is not checked there: the hub
    loader retries it (~50 s offline), in train as in probe (cli/common.py's check_model)."""
    _load_commands()
    res = CliRunner().invoke(app, ["probe", "model.name=./no_such_model_folder"])
    assert res.exit_code == 2 and "no such model folder" in res.output
