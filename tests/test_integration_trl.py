"""pgrpo inside TRL's GRPOTrainer: end-to-end CPU runs with a tiny random Llama and a tiny
character tokenizer (no downloads), checking the advantages TRL used, the logged diagnostics,
asymmetric KL and multi-temperature sampling."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

trl = pytest.importorskip("trl")
transformers = pytest.importorskip("transformers")
datasets = pytest.importorskip("datasets")

from pgrpo.core.advantages import compute_advantages  # noqa: E402
from pgrpo.integrations.trl import (  # noqa: E402
    PgrpoGRPOConfig,
    PgrpoGRPOTrainer,
    _PerCompletionKLCoef,
)

G = 4
CHARS = list("0123456789+-=abcxyz ")


def _tokenizer():
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    vocab.update({c: i + 3 for i, c in enumerate(CHARS)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )


def _model(tokenizer, seed=0):
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
        initializer_range=0.2,  # spread-out logits: no near-ties at temperature 1e-3
    )
    return transformers.LlamaForCausalLM(cfg)


def odd_digit(completions, **kwargs):
    """Binary reward: the completion contains an odd digit."""
    return [float(any(c in "13579" for c in text)) for text in completions]


def digit_share(completions, **kwargs):
    """Graded reward in [0, 1]: share of characters that are digits."""
    return [sum(c.isdigit() for c in t) / max(len(t), 1) for t in completions]


def _dataset(n=8):
    rows = [{"prompt": f"{i}+{i + 1}=", "num_constraints": 1 + i % 3} for i in range(n)]
    return datasets.Dataset.from_list(rows)


class RecordingTrainer(PgrpoGRPOTrainer):
    """Records the advantages set at generation time and those the loss received."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.generated: list[dict] = []
        self.loss_advantages: list[torch.Tensor] = []

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        n = output["advantages"].numel() * self.accelerator.num_processes  # logs are gathered
        rewards = {k: list(v)[-n:] for k, v in self._logs["rewards"].items()}
        self.generated.append(
            {
                "advantages": output["advantages"].clone(),
                "rewards": rewards,
                "num_constraints": [row.get("num_constraints") for row in inputs],
                "completions": list(self._logs["completion"])[-n:],
            }
        )
        return output

    def _compute_loss(self, model, inputs):
        self.loss_advantages.append(inputs["advantages"].detach().clone())
        return super()._compute_loss(model, inputs)


def _config(tmp_path, **overrides):
    return PgrpoGRPOConfig(**_base_config(tmp_path, **overrides))


def _base_config(tmp_path, **overrides):
    base = dict(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=2 * G,
        num_generations=G,
        max_completion_length=6,
        max_steps=2,
        logging_steps=1,
        learning_rate=1e-3,
        report_to=[],
        save_strategy="no",
        seed=0,
        disable_tqdm=True,
    )
    base.update(overrides)
    return base


def _train(tmp_path, reward, trainer_cls=RecordingTrainer, **overrides):
    tokenizer = _tokenizer()
    model = _model(tokenizer)
    if overrides.get("beta", 0.0) > 0:  # TRL builds the reference from the model's path
        model.save_pretrained(tmp_path / "model")
        tokenizer.save_pretrained(tmp_path / "model")
        model = str(tmp_path / "model")
    trainer = trainer_cls(
        model=model,
        reward_funcs=reward,
        args=_config(tmp_path, **overrides),
        train_dataset=_dataset(),
        processing_class=tokenizer,
    )
    trainer.train()
    return trainer


@pytest.mark.parametrize(
    ("name", "reward", "options"),
    [("sign", odd_digit, {}), ("dual_anchor", digit_share, {"alpha": 0.3})],
)
def test_advantages_and_metrics_end_to_end(tmp_path, name, reward, options):
    trainer = _train(tmp_path, reward, pgrpo_advantage=name, pgrpo_advantage_options=options)
    assert len(trainer.generated) == 2
    for batch in trainer.generated:
        rewards = torch.tensor(batch["rewards"][reward.__name__], dtype=torch.float64)
        kw = dict(options)
        if name == "dual_anchor":
            kw["num_constraints"] = batch["num_constraints"]
        expected = compute_advantages(name, rewards, group_size=G, **kw).advantages
        torch.testing.assert_close(batch["advantages"].double(), expected, rtol=1e-5, atol=1e-6)
    if name == "sign":  # the Sign advantage is +-1 whatever the group
        assert set(torch.cat([b["advantages"] for b in trainer.generated]).tolist()) <= {-1.0, 1.0}
    used = torch.cat(trainer.loss_advantages).sort().values
    set_at_generation = torch.cat([b["advantages"] for b in trainer.generated]).sort().values
    torch.testing.assert_close(used, set_at_generation)

    state = json.loads((Path(trainer.args.output_dir) / "trainer_state.json").read_text())
    steps = [h for h in state["log_history"] if "degeneracy/all_pass" in h]
    assert len(steps) == 2
    for h in steps:
        for key in (
            "degeneracy/all_fail",
            "degeneracy/iid_prediction",
            "reward_within_group_std",
            "frac_gradient_tokens",
            "advantages/mean",
            "frac_reward_zero_std",
            "reward",
        ):
            assert key in h and math.isfinite(h[key]), key
        assert h["group_size"] == G
        assert 0.0 <= h["frac_gradient_tokens"] <= 1.0
    # the logged reward is the batch mean of the rewards the advantages were computed from
    for h, batch in zip(steps, trainer.generated, strict=True):
        rewards = batch["rewards"][reward.__name__]
        assert h["reward"] == pytest.approx(sum(rewards) / len(rewards), abs=1e-6)


def test_per_completion_kl_coefficient():
    w = torch.tensor([0.01, 0.025, 0.01])
    coef = _PerCompletionKLCoef(0.01, w)
    kl = torch.rand(3, 5)
    assert coef != 0.0 and float(coef) == 0.01
    torch.testing.assert_close(coef * kl, w[:, None] * kl)
    assert coef * 2.0 == 0.02


def test_asymmetric_kl_changes_only_negative_rows(tmp_path):
    """TRL's own _compute_loss (loss_type bnpo: token mean) with the swapped beta adds exactly
    (kl_neg - beta) * KL of the A < 0 completions."""
    beta, neg = 0.01, 0.5
    trainer = _train(
        tmp_path,
        digit_share,
        pgrpo_advantage="grpo",
        beta=beta,
        pgrpo_kl_coef_negative=neg,
        loss_type="bnpo",
        max_steps=1,
    )
    inputs = trainer._buffered_inputs[0] if trainer._buffered_inputs else None
    assert inputs is not None
    inputs = dict(inputs)
    # a reference that differs from the policy, so that the KL is not zero
    inputs["ref_per_token_logps"] = inputs["ref_per_token_logps"] - 0.3
    model = trainer.model
    model.eval()  # eval mode: no accumulation scaling in TRL's loss
    with torch.no_grad():
        asym = trainer._compute_loss(model, inputs)
        trainer.args.pgrpo_kl_coef_negative = None
        sym = trainer._compute_loss(model, inputs)
        ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], 1)
        att = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], 1)
        logps, _, _ = trainer._get_per_token_logps_and_entropies(
            model, ids, att, inputs["completion_ids"].size(1)
        )
    lr = inputs["ref_per_token_logps"] - logps
    kl = torch.exp(lr) - lr - 1
    mask = inputs["completion_mask"].float()
    negative = (inputs["advantages"] < 0).float()[:, None]
    expected = (neg - beta) * (kl * mask * negative).sum() / mask.sum()
    assert float(negative.sum()) > 0
    torch.testing.assert_close(asym - sym, expected, rtol=1e-4, atol=1e-7)
    assert trainer.beta == beta and type(trainer.beta) is float  # restored


def test_multi_temperature_sampling(tmp_path):
    """Slots at temperature 1e-3 sample (near) greedily: the same completion for one prompt;
    slots at temperature 50 sample (near) uniformly: different completions."""
    trainer = _train(
        tmp_path,
        odd_digit,
        pgrpo_advantage="sign",
        pgrpo_temperatures=[1e-3, 1e-3, 50.0, 50.0],
        max_steps=1,
    )
    completions = trainer.generated[0]["completions"]
    groups = [completions[i : i + G] for i in range(0, len(completions), G)]
    for group in groups:
        assert group[0] == group[1]
    assert any(group[2] != group[3] for group in groups)
    rewards = torch.tensor(trainer.generated[0]["rewards"]["odd_digit"]).view(-1, G)
    logged = [h for h in trainer.state.log_history if "reward/temperature_50" in h][0]
    assert logged["reward/temperature_50"] == pytest.approx(float(rewards[:, 2:].mean()))
    assert logged["reward/temperature_0.001"] == pytest.approx(float(rewards[:, :2].mean()))


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"pgrpo_advantage": "zscore"}, "valid names"),
        ({"pgrpo_temperatures": [1.0, 0.5]}, "one temperature per group slot"),
        ({"pgrpo_kl_coef_negative": 0.025}, "beta"),
        ({"pgrpo_advantage_options": "{not json"}, "JSON"),
        ({"multi_objective_aggregation": "normalize_then_sum"}, "sum_then_normalize"),
    ],
)
def test_config_errors_name_the_fix(tmp_path, overrides, match):
    with pytest.raises(ValueError, match=match):
        _config(tmp_path, **overrides)


def test_dual_anchor_without_constraint_column_names_the_fix(tmp_path):
    tokenizer = _tokenizer()
    trainer = PgrpoGRPOTrainer(
        model=_model(tokenizer),
        reward_funcs=digit_share,
        args=_config(tmp_path, pgrpo_advantage="dual_anchor", max_steps=1),
        train_dataset=_dataset().remove_columns("num_constraints"),
        processing_class=tokenizer,
    )
    with pytest.raises(ValueError, match="num_constraints"):
        trainer.train()


def test_pgrpo_task_as_trl_dataset_and_reward(tmp_path):
    """A pgrpo task trains in TRL through task_dataset + task_reward_func (safe scorer)."""
    from pgrpo.integrations.trl import task_dataset, task_reward_func
    from pgrpo.tasks import get_task

    task = get_task("arithmetic")
    dataset = task_dataset(task, "train", conversational=False).select(range(8))
    reward = task_reward_func(task)
    example = json.loads(dataset[0]["pgrpo_example"])
    column = [dataset[0]["pgrpo_example"]] * 2
    assert reward(completions=[str(example["answer"]), "no"], pgrpo_example=column) == [1.0, 0.0]
    with pytest.raises(ValueError, match="task_dataset"):
        reward(completions=["1"])
    tokenizer = _tokenizer()
    trainer = RecordingTrainer(
        model=_model(tokenizer),
        reward_funcs=reward,
        args=_config(tmp_path, pgrpo_advantage="sign", max_steps=1),
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    trainer.train()
    history = trainer.state.log_history
    assert any(h.get("reward_errors") == 0.0 and "reward_timeouts" in h for h in history)
    rewards = trainer.generated[0]["rewards"]["arithmetic_reward"]
    assert set(rewards) <= {0.0, 1.0}


@pytest.mark.slow
def test_example_script_then_pgrpo_fit_and_diagnose(tmp_path, monkeypatch):
    """docs/examples/trl_pgrpo_train.py (every field a flag) trains 6 steps; `pgrpo fit` and
    `pgrpo diagnose` read the trainer_state.json it wrote."""
    import runpy
    import sys

    from typer.testing import CliRunner

    from pgrpo.cli import _load_commands, app

    _load_commands()

    tokenizer = _tokenizer()
    _model(tokenizer).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    out = tmp_path / "run"
    root = Path(__file__).resolve().parents[1]
    cmd = [
        str(root / "docs" / "examples" / "trl_pgrpo_train.py"),
        *("--model", str(tmp_path / "model"), "--task", "arithmetic", "--conversational", "false"),
        *("--max_examples", "16", "--output_dir", str(out), "--use_cpu", "true"),
        *("--max_steps", "6", "--num_generations", str(G), "--per_device_train_batch_size", "8"),
        *("--max_completion_length", "2", "--pgrpo_advantage", "sign", "--report_to", "none"),
        *("--pgrpo_advantage_options", "{}", "--pgrpo_temperatures", "0.7", "0.7", "1", "1"),
        *("--save_strategy", "no", "--logging_steps", "1", "--disable_tqdm", "true"),
    ]
    monkeypatch.setattr(sys, "argv", cmd)
    monkeypatch.chdir(tmp_path)
    runpy.run_path(cmd[0], run_name="__main__")  # the script's own argument parsing and main()
    state = out / "trainer_state.json"
    history = json.loads(state.read_text())["log_history"]
    logged = [h for h in history if "degeneracy/all_fail" in h]
    assert len(logged) == 6 and all("reward/temperature_0.7" in h for h in logged)

    runner = CliRunner()
    # both commands take the output directory TRL wrote (they find trainer_state.json in it)
    fit = runner.invoke(app, ["fit", str(out), "--json", "--out", str(tmp_path / "fit")])
    assert fit.exit_code == 0, fit.output
    fitted = json.loads(fit.stdout)
    assert fitted["format"] == "trl" and fitted["n"] == 6 and fitted["reward_key"] == "reward"

    diag = runner.invoke(app, ["diagnose", str(out), "--json"])
    assert diag.exit_code == 0, diag.output
    verdict = json.loads(diag.stdout)
    degeneracy = [m for m in verdict["modes"] if "degeneracy" in m["name"]]
    assert degeneracy, verdict
    all_fail = sum(h["degeneracy/all_fail"] for h in logged) / len(logged)
    assert degeneracy[0]["evidence"].get("all_fail") == pytest.approx(all_fail)


@pytest.mark.slow
def test_two_processes(tmp_path):
    """torchrun, 2 CPU processes (gloo): each process keeps its slice of the advantages computed
    over the gathered batch, constraint counts are gathered, group slots keep their temperature
    across the process boundary, and the metrics are logged once."""
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    worker = Path(__file__).resolve().parent / "trl_two_process_worker.py"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    cmd += ["--master_port", str(port), str(worker), str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert len(ranks[0]) == len(ranks[1]) == 1
    for first, second in zip(*ranks, strict=True):
        assert first["rewards"] == second["rewards"] and len(first["rewards"]) == 3 * G
        assert len(first["advantages"]) == len(second["advantages"]) == 6
        used = torch.tensor(first["advantages"] + second["advantages"], dtype=torch.float64)
        rewards = torch.tensor(first["rewards"], dtype=torch.float64)
        counts = first["num_constraints"]
        assert all(len(set(counts[i : i + G])) == 1 for i in range(0, len(counts), G))
        expected = compute_advantages(
            "dual_anchor", rewards, group_size=G, num_constraints=counts
        ).advantages
        torch.testing.assert_close(used, expected, rtol=1e-5, atol=1e-6)
        completions = first["completions"]
        for i in range(0, len(completions), G):  # the group at 4..7 spans both processes
            assert completions[i] == completions[i + 1]
    state = json.loads((tmp_path / "trainer_state.json").read_text())
    assert len([h for h in state["log_history"] if "degeneracy/all_pass" in h]) == 1


def test_default_grpo_reproduces_trls_own_advantages(tmp_path):
    """pgrpo_advantage="grpo" (the default) gives the advantages TRL computes itself with
    scale_rewards="group": same seed, same completions, same advantages in the loss."""

    class TRLRecorder(trl.GRPOTrainer):
        def _compute_loss(self, model, inputs):
            self.loss_advantages.append(inputs["advantages"].detach().clone())
            return super()._compute_loss(model, inputs)

    runs = {}
    for name, cls, config_cls in (
        ("trl", TRLRecorder, trl.GRPOConfig),
        ("pgrpo", RecordingTrainer, PgrpoGRPOConfig),
    ):
        tokenizer = _tokenizer()
        trainer = cls(
            model=_model(tokenizer),
            reward_funcs=digit_share,
            args=config_cls(**_base_config(tmp_path / name, max_steps=1)),
            train_dataset=_dataset(),
            processing_class=tokenizer,
        )
        trainer.loss_advantages = []
        trainer.train()
        runs[name] = torch.cat(trainer.loss_advantages)
    assert runs["trl"].abs().sum() > 0
    torch.testing.assert_close(runs["pgrpo"], runs["trl"], rtol=1e-5, atol=1e-6)
