"""The trainer's optimizer registry: `optim.name` = adamw (default) or sgd_momentum."""

from __future__ import annotations

import pytest
import torch

from pgrpo._registry import UnknownNameError
from pgrpo.dynamics.optimizers import OPTIMIZER_REDUCTIONS
from pgrpo.train.config import load_config
from pgrpo.train.optimizers import TRAIN_OPTIMIZERS, build_optimizer


def test_names_and_their_reductions():
    assert TRAIN_OPTIMIZERS.names() == ["adamw", "sgd_momentum"]
    for name in TRAIN_OPTIMIZERS.names():
        assert TRAIN_OPTIMIZERS.get(name).reduction in OPTIMIZER_REDUCTIONS
    with pytest.raises(UnknownNameError, match="adamw, sgd_momentum"):
        TRAIN_OPTIMIZERS.get("sgd")


def test_config_default_and_bad_name():
    assert load_config(None, []).optim.name == "adamw"
    assert load_config(None, ["optim=sgd_momentum"]).optim.name == "sgd_momentum"
    with pytest.raises(ValueError, match="optim.name='adam' is invalid: use one of adamw"):
        load_config(None, ["optim.name=adam"])


def test_builders_make_the_named_torch_optimizers():
    p = [torch.nn.Parameter(torch.zeros(3))]
    cfg = load_config(None, ["optim.name=sgd_momentum", "optim.beta1=0.8", "optim.lr=0.1"]).optim
    opt = build_optimizer(p, cfg)
    assert isinstance(opt, torch.optim.SGD)
    assert opt.defaults["momentum"] == opt.defaults["dampening"] == 0.8
    assert isinstance(build_optimizer(p, load_config(None, []).optim), torch.optim.AdamW)


def test_sgd_momentum_is_the_ema_momentum_of_the_dynamics_model():
    # v <- b v + (1 - b) g, theta <- theta - lr v, from the second step on (torch seeds v = g1)
    torch.manual_seed(0)
    b, lr = 0.9, 0.05
    theta = torch.nn.Parameter(torch.zeros(4))
    cfg = load_config(None, ["optim.name=sgd_momentum", f"optim.beta1={b}", f"optim.lr={lr}"])
    opt = build_optimizer([theta], cfg.optim)
    grads = torch.randn(6, 4)
    ref = torch.zeros(4)
    v = None
    for g in grads:
        opt.zero_grad()
        theta.grad = g.clone()
        opt.step()
        v = g.clone() if v is None else b * v + (1 - b) * g
        ref = ref - lr * v
        torch.testing.assert_close(theta.detach(), ref, rtol=0, atol=1e-6)


def test_a_tiny_run_trains_with_sgd_momentum(tmp_path, monkeypatch):
    from pgrpo.train.trainer import build_run, train

    monkeypatch.setenv("PGRPO_CACHE", str(tmp_path / "cache"))
    cfg = load_config(
        None,
        [
            "model.name=tiny",
            "model.tiny_hidden=32",
            "model.tiny_warmup_steps=60",
            "task.options={levels: [1], n: 200}",
            "steps=2",
            "group_size=4",
            "batch_prompts=4",
            "max_new_tokens=4",
            "optim.name=sgd_momentum",
            "lr=0.5",
            "torch_threads=1",
            "forecast_every=0",
            f"run.output_dir={tmp_path}",
        ],
    )
    run = build_run(cfg, resume=False)
    assert isinstance(run.optimizer, torch.optim.SGD)
    before = {n: p.detach().clone() for n, p in run.policy.model.named_parameters()}
    result = train(cfg)
    assert "sgd_momentum" in (result.run_dir / "config.yaml").read_text()
    state = torch.load(result.run_dir / "checkpoints" / "step-2" / "state.pt", weights_only=False)
    after = state["model"]
    assert any(not torch.equal(before[k], after[k]) for k in after)  # SGD moved the policy
    assert "momentum_buffer" in str(state["optimizer"])  # an SGD state, not Adam's exp_avg
