"""A hostile review of the trainer's checkpoints (2026-12-04): an edited config.yaml or a
checkpoint of another shape is refused on resume (a LoRA rank edit crashed it with memory
corruption, an lr edit was taken silently), final/ is whole or absent and a resume writes a
missing one, --overwrite removes the old final/, and a Rust writer's disk-full is recognised."""

from __future__ import annotations

import shutil

import pytest
from conftest import TINY_CLI_ARGS
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.train import checkpoint as ckpt
from pgrpo.train.trainer import final_complete

_load_commands()
runner = CliRunner()
TINY = [*TINY_CLI_ARGS, "forecast_every=0"]


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("PGRPO_CACHE", str(tmp_path_factory.getbasetemp() / "pgrpo-cache"))


@pytest.fixture(scope="module")
def base_run(tmp_path_factory):
    """A finished 2-step tiny run; tests copy it."""
    root = tmp_path_factory.mktemp("base")
    out = runner.invoke(app, ["train", *TINY, f"run.output_dir={root}", "run.name=base", "steps=2"])
    assert out.exit_code == 0, out.output
    return root / "base"


def _resume(run, *extra):
    return runner.invoke(app, ["train", "--config", str(run / "config.yaml"), "--resume",
                               f"run.output_dir={run.parent}", f"run.name={run.name}",
                               *extra])  # fmt: skip


def _error(out) -> str:
    assert out.exit_code == 2, out.output
    lines = [x for x in out.output.splitlines() if x.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in out.output, out.output
    return lines[0]


def test_each_checkpoint_keeps_the_config_it_was_trained_with(base_run):
    copy = base_run / "checkpoints" / "step-2" / ckpt.CONFIG_COPY
    assert copy.read_text() == (base_run / "config.yaml").read_text()


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        ("lr: 0.003", "lr: 0.005", "optim.lr"),
        ("tiny_hidden: 32", "tiny_hidden: 64", "tiny_hidden"),
    ],
)
def test_an_edited_config_yaml_is_refused_on_resume(base_run, tmp_path, old, new, said):
    run = shutil.copytree(base_run, tmp_path / "run")
    cfg = run / "config.yaml"
    assert old in cfg.read_text()
    cfg.write_text(cfg.read_text().replace(old, new))
    line = _error(_resume(run, "run.steps=3"))
    assert "was edited since checkpoint step-2" in line and said in line
    assert "checkpoints/step-2/config.yaml" in line  # where to restore it from


def test_a_checkpoint_of_another_shape_is_refused_without_a_config_copy(base_run, tmp_path):
    """Checkpoints written before the copy existed: the weights' shapes are checked (copy_
    broadcast a [1] tensor silently; a LoRA rank change then crashed fused AdamW)."""
    run = shutil.copytree(base_run, tmp_path / "run")
    (run / "checkpoints" / "step-2" / ckpt.CONFIG_COPY).unlink()
    cfg = run / "config.yaml"
    cfg.write_text(cfg.read_text().replace("tiny_hidden: 32", "tiny_hidden: 64"))
    line = _error(_resume(run, "run.steps=3"))
    assert "does not fit the model loaded now" in line and "--overwrite" in line


def test_a_missing_final_model_is_written_by_a_resume(base_run, tmp_path):
    run = shutil.copytree(base_run, tmp_path / "run")
    shutil.rmtree(run / "final")
    (run / "final").mkdir()  # as a disk that filled left it: configs, no weights
    out = _resume(run, "run.steps=2")
    assert out.exit_code == 0, out.output
    assert "final is missing, incomplete, of another step" in " ".join(out.output.split())
    assert final_complete(run)


def test_overwrite_removes_the_old_final_model(base_run, tmp_path):
    run = shutil.copytree(base_run, tmp_path / "run")
    tiny = [a for a in TINY if not a.startswith("lr=")]
    out = runner.invoke(app, ["train", *tiny, f"run.output_dir={run.parent}", "run.name=run",
                              "steps=2", "optim.lr=2e38", "--overwrite"])  # fmt: skip
    assert out.exit_code == 1, out.output  # diverged: one line, exit 1
    assert not (run / "final").exists()


def test_a_rust_writers_disk_full_is_recognised():
    exc = Exception("Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "
                    '"No space left on device" })')  # fmt: skip
    assert ckpt.is_disk_full(exc)
    assert not ckpt.is_disk_full(Exception("shape mismatch"))


def test_a_hub_name_not_in_the_cache_says_what_the_wait_is(capsys, monkeypatch):
    """`model.name=nonexistent_model_xyz` spent ~50 s in hub retries offline without a word."""
    import pgrpo.cli._models as models
    from pgrpo.cli.common import check_model

    monkeypatch.setenv("HF_HUB_CACHE", "/nonexistent-hf-cache")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(models, "_unreachable_hub", lambda: None)  # a hub that answers
    check_model("someone/not-cached-model", "model.name")
    err = " ".join(capsys.readouterr().err.split())
    assert "not in the local Hugging Face cache" in err and "HF_HUB_OFFLINE=1" in err
    check_model("tiny", "model.name")
    assert capsys.readouterr().err == ""


def test_a_resume_where_auto_precision_resolves_otherwise_says_so(base_run, tmp_path, monkeypatch):
    """model.precision=auto picks bf16 autocast where the CPU has native bf16 and fp32 elsewhere:
    a run resumed on the other kind of host continues, with a note that its resumed steps are
    not bit for bit the uninterrupted run's (the host without bf16 is simulated)."""
    import json

    import pgrpo.train.precision as precision_mod

    run = shutil.copytree(base_run, tmp_path / "run")
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x]
    was = next(r["precision"] for r in reversed(metrics) if "precision" in r)
    if was == "fp32":  # this host has no bf16: the simulated one has it
        monkeypatch.setattr(precision_mod, "bf16_support", lambda device_type="cpu": (True, "sim"))
        now = "bf16-autocast"
    else:
        monkeypatch.setattr(precision_mod, "bf16_support", lambda device_type="cpu": (False, "sim"))
        now = "fp32"
    out = _resume(run, "run.steps=3")
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert f"precision {was} -> {now}" in text and "not bit for bit" in text


def test_a_hub_name_not_in_the_cache_fails_at_once_when_the_hub_cannot_be_reached(monkeypatch):
    """Offline, the loader's retries took ~50 s to fail; a 3 s connection check says it now
    (HF_ENDPOINT at a closed local port stands for an unreachable hub), and HF_HUB_OFFLINE at
    once. Behind a proxy a direct connection proves nothing: the loader is left to try."""
    import time

    from pgrpo.cli.common import check_model
    from pgrpo.errors import UserError

    monkeypatch.setenv("HF_HUB_CACHE", "/nonexistent-hf-cache")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY",
                "all_proxy"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    t = time.monotonic()
    with pytest.raises(UserError, match=r"hub \(127.0.0.1:9\) cannot be reached"):
        check_model("someone/not-cached-model", "model.name")
    assert time.monotonic() - t < 10
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UserError, match="HF_HUB_OFFLINE is set"):
        check_model("someone/not-cached-model", "model.name")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    with pytest.raises(UserError, match="TRANSFORMERS_OFFLINE is set"):
        check_model("someone/not-cached-model", "model.name")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE")
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    check_model("someone/not-cached-model", "model.name")  # a note, no error
