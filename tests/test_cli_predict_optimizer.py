"""`pgrpo predict --optimizer {sgd_momentum,adam}`: the K statement follows the optimizer."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app

runner = CliRunner()


@pytest.fixture(scope="module", autouse=True)
def _commands():
    _load_commands()


def _predict(tmp_path, *extra):
    args = ["predict", "--lr", "1e-6", "--kappa", "2e4", "--beta1", "0.9", "--out", str(tmp_path)]
    return runner.invoke(app, [*args, *extra])


def test_adam_predicts_no_threshold_where_sgd_momentum_diverges(tmp_path):
    sgd = _predict(tmp_path, "--refresh-interval", "500", "--json")
    adam = _predict(tmp_path, "--refresh-interval", "500", "--optimizer", "adam", "--json")
    assert sgd.exit_code == 0 and adam.exit_code == 0, sgd.output + adam.output
    s, a = json.loads(sgd.stdout), json.loads(adam.stdout)
    assert s["optimizer"] == "sgd_momentum" and s["refresh_threshold"] == 118
    assert s["stable"] is False
    assert a["optimizer"] == "adam" and a["refresh_threshold"] is None and a["stable"] is True
    assert a["linear_threshold"] == 118  # the noise-only linearisation, reported separately
    assert "no divergence threshold" in a["refresh_threshold_statement"]
    assert a["a"] < s["a"]  # v above the noise floor: smaller effective stiffness at K = 500
    table = _predict(tmp_path, "--refresh-interval", "500", "--optimizer", "adam")
    assert table.exit_code == 0 and "diverges" not in table.output.replace("\n", " ")
    assert "no divergence threshold" in table.output.replace("\n", " ")


def test_default_is_unchanged_sgd_momentum(tmp_path):
    res = _predict(tmp_path, "--refresh-interval", "4", "--json")
    assert json.loads(res.stdout)["refresh_threshold"] == 118


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        # adamw is read as adam since session 36, as fit / diagnose / report read it
        (("--optimizer", "lion"), "sgd_momentum or adam"),
        (("--optimizer", "adam", "--beta2", "1.5"), "beta2"),
    ],
)
def test_bad_optimizer_input_exits_2_with_one_line(tmp_path, extra, needle):
    res = _predict(tmp_path, *extra)
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0]
    assert not (tmp_path / "predict.png").exists()


def test_the_trainers_lr_schedule(tmp_path):
    """--schedule / --warmup-steps / --schedule-start (session 39, for `pgrpo probe`'s line):
    the mean follows the trainer's schedule from the given step; regime and tau are the peak's."""
    import numpy as np

    from pgrpo.core.schedules import lr_factor
    from pgrpo.dynamics.predict import predict

    base = ["--steps", "300", "--json"]  # with _predict's --lr 1e-6 --kappa 2e4 --beta1 0.9
    flat = json.loads(_predict(tmp_path, *base).stdout)
    warm = _predict(tmp_path, *base, "--schedule", "cosine", "--warmup-steps", "50")
    assert warm.exit_code == 0, warm.output
    out = json.loads(warm.stdout)
    assert out["tau"] == flat["tau"] and out["inflection_time"] != flat["inflection_time"]
    lrs = 1e-6 * lr_factor("cosine", np.arange(100, 300), 300, 50)
    tail = predict(float(lrs.max()), 0.9, 2e4, n_steps=200, lr_schedule=lrs)
    late = _predict(tmp_path, "--steps", "200", "--json", "--schedule", "cosine",
                    "--warmup-steps", "50", "--schedule-start", "100")  # fmt: skip
    assert json.loads(late.stdout)["inflection_time"] == tail.metrics["inflection_time"]
    bad = _predict(tmp_path, "--schedule", "step")
    assert bad.exit_code == 2 and "--schedule step is not a schedule" in bad.output
