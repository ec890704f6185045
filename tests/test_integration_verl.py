"""pgrpo inside verl: registration, equivalence with verl's grpo, and verl's own call paths.

Runs only where verl is importable (the separate environment, see docs/integrations.md):
    .venv-verl/bin/python -m pytest tests/test_integration_verl.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.verl

ROOT = Path(__file__).resolve().parents[1]

core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")
OmegaConf = pytest.importorskip("omegaconf").OmegaConf

from pgrpo.core.advantages import ADVANTAGE_ESTIMATORS, compute_advantages  # noqa: E402
from pgrpo.core.losses import LossConfig, policy_loss  # noqa: E402
from pgrpo.integrations import verl as pv  # noqa: E402


def _batch(seed: int, n_groups: int = 6, group_size: int = 4, length: int = 7, shuffle=True):
    """Random verl-style outcome batch: reward on the last response token, ragged masks."""
    g = torch.Generator().manual_seed(seed)
    b = n_groups * group_size
    lengths = torch.randint(1, length + 1, (b,), generator=g)
    mask = (torch.arange(length)[None, :] < lengths[:, None]).float()
    scores = torch.randint(0, 2, (b,), generator=g).float() + 0.1 * torch.rand(b, generator=g)
    rewards = torch.zeros(b, length)
    rewards[torch.arange(b), lengths - 1] = scores
    uid = np.array([f"prompt-{i // group_size}" for i in range(b)], dtype=object)
    if shuffle:
        perm = torch.randperm(b, generator=g)
        rewards, mask, uid, scores = rewards[perm], mask[perm], uid[perm.numpy()], scores[perm]
    return rewards, mask, uid, scores


def test_register_is_idempotent_and_prefixed():
    first = pv.register()
    second = pv.register()
    assert first == second
    for name in ADVANTAGE_ESTIMATORS.names():
        assert core_algos.get_adv_estimator_fn("pgrpo_" + name) is pv._ESTIMATORS[name]
    assert "pgrpo_clipped" in core_algos.POLICY_LOSS_REGISTRY
    assert "pgrpo_reinforce" in core_algos.POLICY_LOSS_REGISTRY
    # verl's own entries are untouched
    assert core_algos.get_adv_estimator_fn("grpo") is core_algos.compute_grpo_outcome_advantage


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("norm", [True, False])
def test_pgrpo_grpo_equals_verl_grpo(seed, norm):
    rewards, mask, uid, _ = _batch(seed)
    rewards, mask = rewards.double(), mask.double()  # float32 z-scores of close rewards round
    ref_adv, ref_ret = core_algos.compute_grpo_outcome_advantage(
        rewards, mask, uid, norm_adv_by_std_in_grpo=norm
    )
    cfg = OmegaConf.create({"norm_adv_by_std_in_grpo": norm})
    adv, ret = core_algos.get_adv_estimator_fn("pgrpo_grpo")(rewards, mask, config=cfg, index=uid)
    torch.testing.assert_close(adv, ref_adv, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(ret, ref_ret, rtol=1e-10, atol=1e-10)


def test_pgrpo_rloo_equals_verl_rloo():
    rewards, mask, uid, _ = _batch(11)
    ref, _ = core_algos.compute_rloo_outcome_advantage(rewards, mask, uid)
    adv, _ = core_algos.get_adv_estimator_fn("pgrpo_rloo")(rewards, mask, index=uid)
    torch.testing.assert_close(adv, ref, rtol=1e-5, atol=1e-6)


def _data_proto(rewards, mask, uid):
    from verl import DataProto

    return DataProto.from_dict(
        tensors={"token_level_rewards": rewards.clone(), "response_mask": mask.clone()},
        non_tensors={"uid": uid},
    )


def test_sign_through_verl_compute_advantage():
    from verl.trainer.ppo.ray_trainer import compute_advantage

    rewards, mask, uid, scores = _batch(3)
    binary = (scores >= 1).float()
    rewards = torch.where(rewards > 0, binary[:, None].expand_as(rewards), rewards) * mask
    cfg = OmegaConf.create({"adv_estimator": "pgrpo_sign"})
    out = compute_advantage(_data_proto(rewards, mask, uid), adv_estimator="pgrpo_sign", config=cfg)
    expected = (2 * binary - 1)[:, None] * mask
    torch.testing.assert_close(out.batch["advantages"], expected)
    torch.testing.assert_close(out.batch["returns"], expected)


def test_dual_anchor_through_verl_compute_advantage():
    from verl.trainer.ppo.ray_trainer import compute_advantage

    rewards, mask, uid, scores = _batch(4)
    cfg = OmegaConf.create(
        {
            "adv_estimator": "pgrpo_dual_anchor",
            "pgrpo": {"options": {"num_constraints": 3, "alpha": 0.3}},
        }
    )
    data = _data_proto(rewards, mask, uid)
    out = compute_advantage(data, adv_estimator="pgrpo_dual_anchor", config=cfg)
    expected = compute_advantages(
        "dual_anchor", scores, group_ids=uid, num_constraints=3, alpha=0.3
    ).advantages
    torch.testing.assert_close(out.batch["advantages"], expected[:, None] * mask)
    # padding positions carry no advantage
    assert bool((out.batch["advantages"][mask == 0] == 0).all())


def test_dual_anchor_without_constraints_names_the_fix():
    from verl.trainer.ppo.ray_trainer import compute_advantage

    rewards, mask, uid, _ = _batch(5)
    cfg = OmegaConf.create({"adv_estimator": "pgrpo_dual_anchor"})
    with pytest.raises(ValueError, match="num_constraints"):
        compute_advantage(_data_proto(rewards, mask, uid), "pgrpo_dual_anchor", config=cfg)


def test_transform_and_unknown_keys_from_config():
    rewards, mask, uid, scores = _batch(6)
    fn = core_algos.get_adv_estimator_fn("pgrpo_sign")
    cfg = OmegaConf.create({"pgrpo": {"transform": "prospect"}})
    adv, _ = fn(rewards, mask, config=cfg, index=uid)
    expected = compute_advantages("sign", scores, group_ids=uid, transform="prospect").advantages
    torch.testing.assert_close(adv, expected[:, None] * mask)
    with pytest.raises(ValueError, match="unknown key"):
        fn(rewards, mask, config=OmegaConf.create({"pgrpo": {"optoins": {}}}), index=uid)


def test_group_estimator_without_uid_fails_clearly():
    rewards, mask, _, _ = _batch(7)
    with pytest.raises(ValueError, match="single completion"):
        core_algos.get_adv_estimator_fn("pgrpo_grpo")(rewards, mask)


def test_nan_reward_error_names_the_verl_config_key():
    """The default nan="error" stops the step with the fix in verl's terms (the key a verl user
    sets), not pgrpo's own `nan='mask'` / `pgrpo train` wording; the key then works."""
    from verl.trainer.ppo.ray_trainer import compute_advantage

    rewards, mask, uid, _ = _batch(8)
    rewards[3] = torch.nan
    with pytest.raises(ValueError, match=r"NaN or infinite.*\+algorithm\.pgrpo\.nan=mask") as err:
        compute_advantage(
            _data_proto(rewards, mask, uid),
            "pgrpo_grpo",
            config=OmegaConf.create({"adv_estimator": "pgrpo_grpo"}),
        )
    assert "pgrpo train" not in str(err.value) and "nan='mask'" not in str(err.value)
    cfg = OmegaConf.create({"adv_estimator": "pgrpo_grpo", "pgrpo": {"nan": "mask"}})
    out = compute_advantage(_data_proto(rewards, mask, uid), "pgrpo_grpo", config=cfg)
    adv = out.batch["advantages"]
    assert bool(adv.isfinite().all()) and bool((adv[3] == 0).all())


# ---------------------------------------------------------------------------------------------
# Policy losses
# ---------------------------------------------------------------------------------------------


def _actor_config(loss_mode: str, agg: str = "token-mean", **overrides):
    from verl.workers.config import ActorConfig, PolicyLossConfig

    return ActorConfig(
        strategy="fsdp",
        rollout_n=4,
        ppo_micro_batch_size_per_gpu=2,
        clip_ratio_low=0.2,
        clip_ratio_high=0.28,
        loss_agg_mode=agg,
        policy_loss=PolicyLossConfig(loss_mode=loss_mode),
        **overrides,
    )


def _loss_inputs(seed: int, b: int = 8, t: int = 6):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(b, t, generator=g) * 3
    new = old + 0.3 * torch.randn(b, t, generator=g)  # ratios within (1/3, 3): no dual clip
    adv = torch.randn(b, generator=g)[:, None].expand(b, t).clone()
    lengths = torch.randint(1, t + 1, (b,), generator=g)
    mask = (torch.arange(t)[None, :] < lengths[:, None]).float()
    return old, new, adv * mask, mask


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_pgrpo_clipped_equals_verl_vanilla_and_pgrpo_policy_loss(agg):
    old, new, adv, mask = _loss_inputs(0)
    cfg = _actor_config("pgrpo_clipped", agg)
    fn = core_algos.get_policy_loss_fn("pgrpo_clipped")
    loss, metrics = fn(old, new, adv, mask, agg, cfg, None)
    ref, ref_metrics = core_algos.compute_policy_loss_vanilla(old, new, adv, mask, agg, cfg, None)
    torch.testing.assert_close(loss, ref)
    assert metrics["actor/ppo_kl"] == pytest.approx(ref_metrics["actor/ppo_kl"], abs=1e-6)
    ours = policy_loss(
        new,
        old,
        adv,
        mask,
        LossConfig(aggregator=pv.AGG_MODES[agg], epsilon_low=0.2, epsilon_high=0.28, dual_clip=3.0),
    )
    torch.testing.assert_close(loss, ours.loss)
    assert metrics["actor/pgrpo/frac_gradient_tokens"] == ours.metrics["frac_gradient_tokens"]
    assert metrics["actor/pg_clipfrac"] == pytest.approx(ours.metrics["clip_ratio/region_mean"])
    lower = ours.metrics["clip_ratio/dual_mean"]
    assert metrics["actor/pg_clipfrac_lower"] == pytest.approx(lower)
    assert ref_metrics["actor/pg_clipfrac_lower"] == pytest.approx(lower, abs=1e-6)


AGGS = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
VANILLA_METRICS = ("actor/ppo_kl", "actor/pg_clipfrac", "actor/pg_clipfrac_lower")


def _extreme_inputs(seed: int):
    """_loss_inputs with in-mask log-ratios mixing N(0, 1.5) (ratios around and past 3) with
    +-30 and +-200 (past the +-20 clamp), and advantages > 0, < 0 and = 0 by token."""
    old, new, adv, mask = _loss_inputs(seed)
    g = torch.Generator().manual_seed(100 + seed)
    log_ratio = 1.5 * torch.randn(old.shape, generator=g)
    pick = torch.randint(0, 4, old.shape, generator=g)
    extreme = torch.tensor([30.0, -30.0, 200.0, -200.0])[pick]
    log_ratio = torch.where(torch.rand(old.shape, generator=g) < 0.3, extreme, log_ratio)
    adv = torch.randn(old.shape, generator=g) * (torch.rand(old.shape, generator=g) > 0.2)
    # the first token (always in the mask): both signs, 0, and each extreme
    adv[:, 0] = torch.tensor([1.0, -1.0, 0.0, 0.5, -0.5, 2.0, -2.0, 0.0])
    log_ratio[:, 0] = torch.tensor([200.0, 200.0, 200.0, -200.0, -200.0, 30.0, -30.0, -30.0])
    return new - log_ratio, new, adv * mask, mask


@pytest.mark.parametrize("agg", AGGS)
@pytest.mark.parametrize("seed", range(3))
def test_pgrpo_clipped_equals_verl_vanilla_with_the_dual_clip_and_the_clamp(agg, seed):
    """In-mask log-ratios of +-30 and +-200 and ratios either side of clip_ratio_c (A > 0, < 0,
    = 0): verl's vanilla clamps log(ratio) to +-20 and dual-clips tokens with A < 0 at
    clip_ratio_c; so does pgrpo_clipped (since session 41 the dual clip too: before, its loss
    kept -ratio A past clip_ratio_c, and its gradient ratio |A| up to e^20). Loss and gradient
    are vanilla's bit for bit, the metrics (pg_clipfrac_lower included) to rounding, at verl's
    default clip_ratio_c = 3, at 1.5 and with the dual clip out of reach (1e10)."""
    old, new, adv, mask = _extreme_inputs(seed)
    for clip_ratio_c in (3.0, 1.5, 1e10):
        cfg = _actor_config("pgrpo_clipped", agg, clip_ratio_c=clip_ratio_c)
        results = {}
        for name, fn in (
            ("ours", core_algos.get_policy_loss_fn("pgrpo_clipped")),
            ("verl", core_algos.compute_policy_loss_vanilla),
        ):
            log_prob = new.clone().requires_grad_()
            loss, metrics = fn(old, log_prob, adv, mask, agg, cfg, None)
            loss.backward()
            results[name] = (loss.detach(), log_prob.grad, metrics)
        (loss, grad, metrics), (ref, ref_grad, ref_metrics) = results["ours"], results["verl"]
        assert bool(loss.isfinite()) and bool(grad.isfinite().all())
        assert torch.equal(loss, ref) and torch.equal(grad, ref_grad), clip_ratio_c
        for key in VANILLA_METRICS:
            assert metrics[key] == pytest.approx(ref_metrics[key], abs=1e-6), key
        if clip_ratio_c == 3.0:  # the case is not empty: some tokens are dual-clipped
            assert ref_metrics["actor/pg_clipfrac_lower"] > 0
        if clip_ratio_c == 1e10:
            assert metrics["actor/pg_clipfrac_lower"] == 0


def test_rollout_is_weights_scale_the_per_token_loss():
    old, new, adv, mask = _loss_inputs(1)
    cfg = _actor_config("pgrpo_reinforce")
    fn = core_algos.get_policy_loss_fn("pgrpo_reinforce")
    w = torch.full_like(old, 0.5)
    full, _ = fn(old, new, adv, mask, "token-mean", cfg, None)
    half, _ = fn(old, new, adv, mask, "token-mean", cfg, w)
    torch.testing.assert_close(half, 0.5 * full)


def test_policy_loss_through_verl_ppo_loss():
    """verl's actor loss (`workers.utils.losses.ppo_loss`) dispatches to pgrpo_clipped by name."""
    from tensordict import TensorDict
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.losses import ppo_loss

    b, p, t = 4, 3, 5
    old, new, adv, mask = _loss_inputs(2, b, t)
    attention = torch.cat([torch.ones(b, p), mask], dim=1).long()
    # flat log-probs of the unpadded sequences: the response token j of row i sits at
    # offset_i + p - 1 + j (verl shifts model outputs left by one)
    flat = []
    for i in range(b):
        n_resp = int(mask[i].sum())
        row = torch.zeros(p + n_resp)
        row[p - 1 : p - 1 + n_resp] = new[i, :n_resp]
        flat.append(row)
    data = TensorDict(
        {
            "prompts": torch.ones(b, p, dtype=torch.long),
            "responses": torch.ones(b, t, dtype=torch.long),
            "attention_mask": attention,
            "response_mask": mask,
            "old_log_probs": old,
            "advantages": adv,
        },
        batch_size=[b],
    )
    tu.assign_non_tensor(data, dp_size=1, batch_num_tokens=None, global_batch_size=None)
    results = {}
    for mode in ("vanilla", "pgrpo_clipped", "pgrpo_reinforce"):
        cfg = _actor_config(mode)
        loss, metrics = ppo_loss(cfg, {"log_probs": torch.cat(flat)}, data.clone())
        results[mode] = loss
    torch.testing.assert_close(results["pgrpo_clipped"], results["vanilla"])
    # and the name really selects the loss: REINFORCE is a different objective off-policy
    assert not torch.allclose(results["pgrpo_reinforce"], results["vanilla"])


def test_registration_in_a_fresh_verl_process():
    """How a Ray worker gets the names: VERL_USE_EXTERNAL_MODULES imports pgrpo inside
    `import verl` (the same hook as the `verl.plugins` entry point)."""
    code = (
        "from verl.trainer.ppo import core_algos as c;"
        "assert 'pgrpo_sign' in c.ADV_ESTIMATOR_REGISTRY, sorted(c.ADV_ESTIMATOR_REGISTRY);"
        "assert 'pgrpo_clipped' in c.POLICY_LOSS_REGISTRY"
    )
    env = {**os.environ, "VERL_USE_EXTERNAL_MODULES": "pgrpo.integrations.verl"}
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_docs_example_config_composes_with_verl():
    """docs/examples/verl_pgrpo_sign.yaml: composes with verl's ppo_trainer config, sets only keys
    verl knows (besides pgrpo's own block and the Ray env var) and drives compute_advantage."""
    import verl
    import yaml
    from hydra import compose, initialize_config_dir
    from verl.trainer.ppo.ray_trainer import compute_advantage

    example = ROOT / "docs" / "examples" / "verl_pgrpo_sign.yaml"
    verl_configs = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(verl_configs), version_base=None):
        base = compose("ppo_trainer")
    with initialize_config_dir(config_dir=str(example.parent), version_base=None):
        cfg = compose(example.stem)
    raw = yaml.safe_load(example.read_text())
    own = ("algorithm.pgrpo", "ray_kwargs.ray_init.runtime_env.env_vars")
    for key in _flat_keys({k: v for k, v in raw.items() if k not in ("hydra", "defaults")}):
        if not key.startswith(own):
            assert _has_key(base, key), f"{key} is not a verl 0.9.1 config key"
        assert _has_key(cfg, key), key
    assert cfg.algorithm.adv_estimator == "pgrpo_sign"
    rewards, mask, uid, scores = _batch(8)
    binary = (scores >= 1).float()
    rewards = torch.where(rewards > 0, binary[:, None].expand_as(rewards), rewards) * mask
    data = _data_proto(rewards, mask, uid)
    out = compute_advantage(data, cfg.algorithm.adv_estimator, config=cfg.algorithm)
    torch.testing.assert_close(out.batch["advantages"], (2 * binary - 1)[:, None] * mask)


def _has_key(cfg, key):
    parent, _, last = key.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg
    return node is not None and last in node.keys()  # `in node` is False for ??? values


def _flat_keys(tree, prefix=""):
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            yield from _flat_keys(value, path + ".")
        else:
            yield path


def test_registration_through_a_verl_plugins_entry_point(tmp_path):
    """`import verl` loads `verl.plugins` entry points in every process: a distribution that
    declares `pgrpo = pgrpo.integrations.verl` there (what pyproject can declare) registers the
    names with no config at all."""
    dist = tmp_path / "pgrpo_verl_plugin-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: pgrpo-verl-plugin\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[verl.plugins]\npgrpo = pgrpo.integrations.verl\n")
    code = (
        "from verl.trainer.ppo import core_algos as c;"
        "assert 'pgrpo_dual_anchor' in c.ADV_ESTIMATOR_REGISTRY, sorted(c.ADV_ESTIMATOR_REGISTRY);"
        "assert 'pgrpo_reinforce' in c.POLICY_LOSS_REGISTRY"
    )
    env = {k: v for k, v in os.environ.items() if k != "VERL_USE_EXTERNAL_MODULES"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_verl_file_log_is_read_and_fitted_by_pgrpo(tmp_path, monkeypatch):
    """A synthetic GRPO run through verl's own pieces: rewards with a rising success rate,
    pgrpo_sign advantages via verl's compute_advantage, verl's compute_data_metrics, verl's
    `file` logger. pgrpo's log reader reads that JSONL and `pgrpo fit` fits it."""
    import json as _json

    from typer.testing import CliRunner
    from verl.trainer.ppo.metric_utils import compute_data_metrics
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.utils.tracking import Tracking

    from pgrpo.cli import _load_commands, app
    from pgrpo.logs import read_log

    log_path = tmp_path / "verl_run.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(log_path))
    tracker = Tracking("pgrpo", "sign", default_backend=["file"])
    gen = torch.Generator().manual_seed(0)
    b, p, t, steps = 32, 3, 5, 12
    cfg = OmegaConf.create({"adv_estimator": "pgrpo_sign"})
    means = []
    for step in range(1, steps + 1):
        success = 0.8 - 0.6 * np.exp(-step / 4)  # a saturating reward curve
        scores = (torch.rand(b, generator=gen) < success).float()
        mask = torch.ones(b, t)
        rewards = torch.zeros(b, t)
        rewards[:, -1] = scores
        uid = np.array([f"s{step}-{i // 4}" for i in range(b)], dtype=object)
        data = _data_proto(rewards, mask, uid)
        data.batch["token_level_scores"] = rewards.clone()
        data.batch["prompts"] = torch.ones(b, p, dtype=torch.long)
        data.batch["responses"] = torch.ones(b, t, dtype=torch.long)
        data.batch["attention_mask"] = torch.ones(b, p + t, dtype=torch.long)
        data = compute_advantage(data, "pgrpo_sign", config=cfg)
        metrics = compute_data_metrics(data, use_critic=False)
        tracker.log(metrics, step=step)
        means.append(float(scores.mean()))
    tracker.logger["file"].finish()
    first = _json.loads(log_path.read_text().splitlines()[0])
    assert "critic/score/mean" in first["data"]

    log = read_log(log_path)
    assert log.format == "verl" and list(log.step) == list(range(1, steps + 1))
    np.testing.assert_allclose(log.reward, means, rtol=1e-6)

    _load_commands()
    fit = CliRunner().invoke(app, ["fit", str(log_path), "--json", "--out", str(tmp_path)])
    assert fit.exit_code == 0, fit.output
    fitted = _json.loads(fit.stdout)
    assert fitted["format"] == "verl" and fitted["n"] == steps
    assert fitted["params"]["R_inf"] > fitted["params"]["R_0"]  # the curve rises
