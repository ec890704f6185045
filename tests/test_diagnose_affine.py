"""Nothing assumes rewards in [0, 1] (issue #13.2): on the real corpus, `diagnose`'s progress
verdict and failure modes do not change when the reward is mapped to a r + b (a > 0; the logged
reward std scaled by a), for every run whose values are not means of N 0/1 rewards at its
stated N. Those that are carry the binomial null's extra information only on the 0/1 scale:
there a scaled reward may read with less power (measured 2026-12-03: of the 33 runs, only
cs336_shibuki_offpolicy_e16_tb256 changes, collapsed -> flat, because its stay at 0 is
significant by the hypergeometric test on rollouts, p 8e-9, and not by the scale-free one
over steps, p 0.03). With the range stated (`--reward-range LO,HI`, a task's reward_min /
reward_max) the 0/1 tests read the reward on that range's 0/1 scale (`nullmodel.unit_scale`),
and then every run keeps its verdict under any such map."""

from __future__ import annotations

import json
import zlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.diagnose import MODES, diagnose
from pgrpo.diagnose import nullmodel as nm
from pgrpo.logs import read_log

runner = CliRunner()

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "curves"
pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="needs ../shared/data/curves")


def _runs():
    if not CORPUS.is_dir():
        return []
    return json.loads((CORPUS / "index.json").read_text())["runs"]


def _log(meta: dict):
    log = read_log(CORPUS / meta["csv"])
    hp = dict(log.hyperparameters)
    for key, value in (
        ("group_size", meta.get("G")),
        ("batch_prompts", meta.get("prompts_per_step")),
    ):
        if value and key not in hp:
            hp[key] = float(value)
    return replace(log, hyperparameters=hp)


def _verdict(log) -> tuple[str, tuple[str, ...]]:
    d = diagnose(log)
    return d.progress.label, tuple(
        sorted(v.name for v in d.modes if v.detected and v.name in MODES)
    )


def _affine(log, a: float, b: float):
    cols = {k: (v * a if "std" in k and "zero" not in k else v) for k, v in log.columns.items()}
    return replace(log, reward=a * log.reward + b, columns=cols)


@pytest.mark.parametrize("meta", _runs(), ids=lambda m: m["name"])
def test_the_verdict_does_not_depend_on_the_reward_scale(meta):
    log = _log(meta)
    n = (meta.get("G") or 0) * (meta.get("prompts_per_step") or 0) or None
    if nm.is_binary_mean(log.reward, n):
        pytest.skip("means of N 0/1 rewards: the binomial null needs the 0/1 scale")
    base = _verdict(log)
    rng = np.random.default_rng(zlib.crc32(meta["name"].encode()))
    for a, b in [
        (10.0, 0.0),
        (2.0, -1.0),
        *zip(10 ** rng.uniform(-3, 3, 2), rng.uniform(-100, 100, 2), strict=True),
    ]:
        assert _verdict(_affine(log, float(a), float(b))) == base, (a, b)


def _ranged(log, lo: float, hi: float):
    return replace(log, hyperparameters={**log.hyperparameters, "reward_min": lo, "reward_max": hi})


@pytest.mark.parametrize("meta", _runs(), ids=lambda m: m["name"])
def test_with_its_range_stated_no_verdict_depends_on_the_scale(meta):
    """Means of 0/1 rewards included: a r + b with the range [b, a + b] stated reads as the
    reward with [0, 1] stated (which, for a run inside [0, 1], is as if no range were given)."""
    log = _log(meta)
    base = _verdict(_ranged(log, 0.0, 1.0))
    assert base == _verdict(log)
    rng = np.random.default_rng(zlib.crc32(meta["name"].encode()))
    for a, b in [
        (2.0, -1.0),
        *zip(10 ** rng.uniform(-3, 3, 2), rng.uniform(-100, 100, 2), strict=True),
    ]:
        a, b = float(a), float(b)
        assert _verdict(_ranged(_affine(log, a, b), b, a + b)) == base, (a, b)


def test_unit_scale_only_with_a_range_the_values_keep():
    r = np.array([-1.0, 0.0, 1.0])
    assert np.allclose(nm.unit_scale(r, (-1.0, 1.0)), [0.0, 0.5, 1.0])
    assert np.array_equal(nm.unit_scale(r, None), r)
    assert np.array_equal(nm.unit_scale(r, (0.0, 1.0)), r)  # -1 leaves [0, 1]: not a range


def test_a_collapse_of_a_minus_one_plus_one_reward_through_the_cli(tmp_path):
    """cs336_shibuki_offpolicy_e16_tb256 (256 rollouts per step, its reward falls to 0 and
    stays) logged as 2 r - 1: `pgrpo diagnose --reward-range -1,1` reads the collapse."""
    _load_commands()
    meta = next(m for m in _runs() if m["name"] == "cs336_shibuki_offpolicy_e16_tb256")
    log = read_log(CORPUS / meta["csv"])
    rows = "".join(
        f"{int(s)},{float(2 * r - 1)!r},{float(2 * d)!r}\n"
        for s, r, d in zip(log.step, log.reward, log.columns["reward_std"], strict=True)
    )
    path = tmp_path / "pm1.csv"
    path.write_text("step,reward,reward_std\n" + rows)
    args = ["diagnose", str(path), "--group-size", "8", "--batch-prompts", "32", "--json"]
    res = runner.invoke(app, [*args, "--reward-range", "-1,1"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["progress"]["label"] == "collapsed"


def test_a_floor_logged_with_rounding_is_the_floor():
    """A trainer that logs np.mean of per-rollout rewards in {0.1, 0.3} writes its floor as
    0.10000000000000002: on the range's 0/1 scale that was 1.1e-16, not 0, and the collapse of
    cs336 e16 logged that way read `flat` with --reward-range 0.1,0.3 (review, 2026-12-03)."""
    floor = float(np.mean(np.full(256, 0.1)))
    assert floor != 0.1 and nm.unit_scale(np.array([floor, 0.3]), (0.1, 0.3)).tolist() == [0, 1]
    meta = next(m for m in _runs() if m["name"] == "cs336_shibuki_offpolicy_e16_tb256")
    log = _log(meta)
    k = np.rint(log.reward * 256).astype(int)
    logged = np.array([np.mean(np.where(np.arange(256) < j, 0.3, 0.1)) for j in k])
    cols = {**log.columns, "reward_std": 0.2 * log.columns["reward_std"]}
    rounded = _ranged(replace(log, reward=logged, columns=cols), 0.1, 0.3)
    assert _verdict(rounded) == _verdict(log) and _verdict(log)[0] == "collapsed"
