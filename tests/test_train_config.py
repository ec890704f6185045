"""Run config: overrides, YAML round trip, validation before any model is loaded."""

from __future__ import annotations

import pytest

from pgrpo.train.config import RunConfig, load_config, save_config, valid_keys


def test_overrides_resolve_sections_bare_keys_lists_and_dicts():
    cfg = load_config(
        None,
        [
            "group_size=4",
            "temperatures=[0.1,0.4,0.7,1.0]",
            "optim.lr=1e-5",
            "loss.kl_coef=0.01",
            "grpo.advantage_options.eps=1e-6",
            "task.options={levels: [1, 2]}",
        ],
    )
    assert cfg.grpo.group_size == 4
    assert cfg.generation.temperatures == (0.1, 0.4, 0.7, 1.0)
    assert cfg.optim.lr == 1e-5 and isinstance(cfg.optim.lr, float)
    assert cfg.loss.kl_coef == 0.01 and cfg.loss.uses_reference
    assert cfg.grpo.advantage_options == {"eps": 1e-6}
    assert cfg.task.options == {"levels": [1, 2]}


def test_yaml_round_trip(tmp_path):
    cfg = load_config(None, ["group_size=2", "temperatures=[0.5,1.0]", "steps=7", "lr=3e-4"])
    save_config(cfg, tmp_path / "c.yaml")
    again = load_config(tmp_path / "c.yaml")
    assert again == cfg
    assert load_config(tmp_path / "c.yaml", ["steps=9"]).run.steps == 9


@pytest.mark.parametrize(
    "override, message",
    [
        (["nosuchkey=1"], "valid keys"),
        (["optim.nosuch=1"], "valid keys"),
        (["name=x"], "ambiguous"),
        (["lr=abc"], "expected a number"),
        (["group_size=1"], "advantage=sign"),
        (["temperatures=[0.5,1.0]"], "one temperature per completion"),
        (["refresh_interval=3", "num_minibatches=2"], "multiple of num_minibatches"),
        (["optim.schedule=exp"], "constant"),
        (["loss.aggregator=nope"], "valid names"),
        (["grpo.advantage=nope"], "valid names"),
        (["generation.temperature=0"], "> 0"),
        (["broken"], "key=value"),
    ],
)
def test_bad_values_fail_with_a_fix(override, message):
    with pytest.raises((ValueError, KeyError, TypeError)) as info:
        load_config(None, override)
    assert message in str(info.value)


def test_group_size_one_is_fine_for_the_group_free_sign_advantage():
    cfg = load_config(None, ["group_size=1", "grpo.advantage=sign"])
    assert cfg.grpo.group_size == 1


def test_unknown_section_in_yaml_fails(tmp_path):
    (tmp_path / "c.yaml").write_text("optimizer:\n  lr: 1.0e-5\n")
    with pytest.raises(KeyError, match="valid sections"):
        load_config(tmp_path / "c.yaml")


def test_valid_keys_cover_every_section():
    keys = valid_keys()
    for section in ("model", "task", "generation", "grpo", "loss", "optim", "run"):
        assert any(k.startswith(section + ".") for k in keys)
    assert RunConfig().grpo.group_size == 8  # TRL's num_generations default


def test_a_bare_section_names_it():
    # `pgrpo train task=gsm8k model=tiny`, as the docs write it.
    cfg = load_config(None, ["task=gsm8k", "model=tiny", "task.split=/data/gsm8k/train.jsonl"])
    assert cfg.task.name == "gsm8k" and cfg.model.name == "tiny"
    assert cfg.task.split == "/data/gsm8k/train.jsonl"
    with pytest.raises(TypeError, match="must be a mapping"):
        load_config(None, ["grpo=3"])  # a section without a `name` field stays a section
