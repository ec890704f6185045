"""`pgrpo predict` for levels outside [0, 1]: stationary_std and D rest on a 0/1 reward's force
noise, so neither is given there unless --noise-var is (review rev41, final: the adam path and D
still gave numbers for --r0 2 --r-inf 10)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app

runner = CliRunner()
OUTSIDE = ("--r0", "2", "--r-inf", "10")


@pytest.fixture(scope="module", autouse=True)
def _commands():
    _load_commands()


def _predict(tmp_path, *extra):
    args = ["predict", "--lr", "0.01", "--kappa", "2", "--beta1", "0.9", "--out", str(tmp_path)]
    return runner.invoke(app, [*args, "--refresh-interval", "1", *extra])


def _json(tmp_path, *extra) -> dict:
    res = _predict(tmp_path, *extra, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.mark.parametrize("optimizer", ["sgd_momentum", "adamw"])
def test_no_stationary_std_or_D_outside_0_1(tmp_path, optimizer):
    """Before, under adamw: stationary_std 0.0499 both here and at --r0 0.2 --r-inf 0.9."""
    out = _json(tmp_path, "--optimizer", optimizer, *OUTSIDE)
    assert out["stationary_std"] is None and out["D"] is None
    assert out["stationary_std_note"].startswith("not supported")
    inside = _json(tmp_path, "--optimizer", optimizer, "--r0", "0.2", "--r-inf", "0.9")
    assert inside["stationary_std"] > 0 and inside["D"] > 0 and inside["stationary_std_note"] == ""
    res = _predict(tmp_path, "--optimizer", optimizer, *OUTSIDE)
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    assert "not supported" in text and "stationary_std is not given" in text


def test_noise_var_gives_them_back_where_it_is_read(tmp_path):
    """sgd_momentum: D = lr^2 V_F / (2 B G) and the std from it; adam's closure does not read
    V_F, so its stationary_std stays unsupported while D is the given noise's."""
    sgd = _json(tmp_path, *OUTSIDE, "--noise-var", "4")
    assert sgd["D"] == pytest.approx(0.01**2 * 4 / (2 * 8)) and sgd["stationary_std"] > 0
    assert sgd["stationary_std_note"] == ""
    default = _json(tmp_path, "--noise-var", "1")  # 0.25 kappa^2 = 1: the default's numbers
    assert default["stationary_std"] == pytest.approx(_json(tmp_path)["stationary_std"])
    adam = _json(tmp_path, "--optimizer", "adam", *OUTSIDE, "--noise-var", "4")
    assert adam["stationary_std"] is None and adam["D"] == pytest.approx(sgd["D"])


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "inf"])
def test_noise_var_must_be_finite_and_positive(tmp_path, bad):
    res = _predict(tmp_path, "--noise-var", bad)
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--noise-var" in lines[0] and "finite number > 0" in lines[0]
