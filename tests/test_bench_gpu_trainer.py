"""bench/gpu_trainer.py (issue #14.5): the CPU dry run end to end (a 2-layer model of SmolLM2's
tokenizer, pgrpo and TRL each in a fresh process), the derived figures, the budget and failure
paths, and bad options through the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "gpu_trainer.py"
sys.path.insert(0, str(ROOT / "bench"))

import gpu_trainer  # noqa: E402


def _run(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("OUT", None)
    cmd = [sys.executable, str(SCRIPT), *argv]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def assets(tmp_path_factory) -> Path:
    pytest.importorskip("transformers")
    try:
        from pgrpo.train.policies import smollm2_dir

        smollm2_dir()
    except Exception as exc:  # no converted SmolLM2 (its tokenizer) on this machine
        pytest.skip(f"SmolLM2 is not available: {exc}")
    path = tmp_path_factory.mktemp("assets")
    done = _run("--prepare", "--no-wheels", "--assets", str(path))
    assert done.returncode == 0, done.stderr
    names = {p.name for p in (path / "smollm2-135m").iterdir()}
    assert names == set(gpu_trainer.CONFIG_FILES)  # the tokenizer and config, no weights
    return path


@pytest.fixture(scope="module")
def dry(assets, tmp_path_factory) -> dict:
    pytest.importorskip("trl")
    out = tmp_path_factory.mktemp("dry") / "dry.json"
    done = _run("--dry-run", "--assets", str(assets), "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "pgrpo-bf16" in done.stdout and "trl-bf16" in done.stdout  # the table
    return json.loads(out.read_text())


def test_dry_run_records_the_run_and_both_variants(dry):
    assert dry["command"].startswith("python bench/gpu_trainer.py --dry-run")
    assert dry["date"].endswith("UTC") and dry["dry_run"] is True
    assert dry["environment"]["device_name"].startswith("CPU")
    assert dry["trl"]["ok"] and dry["trl"]["version"] == "1.16.0"
    assert dry["failed"] == [] and dry["skipped"] == []
    assert dry["matmul"]["tflops"] > 0 and len(dry["matmul"]["times"]) == 10
    cfg = dry["model"]["config"]
    for key, value in gpu_trainer.DRY_MODEL.items():
        assert cfg[key] == value
    assert cfg["vocab_size"] == 49152  # SmolLM2's tokenizer
    assert [(r["cell"], r["variant"]) for r in dry["rows"]] == [
        ("2x2x4", "pgrpo-bf16"),
        ("2x2x4", "trl-bf16"),
    ]


def test_dry_run_rows_hold_consistent_figures(dry):
    peak = dry["matmul"]["tflops"]
    for r in dry["rows"]:
        assert r["precision"] == "bf16-autocast"  # both in bf16 autocast, fp32 master weights
        assert r["params"] == dry["model"]["params"]  # the same random model in both
        assert r["param_device"] == "cpu" and r["peak_gpu_mb"] is None and r["peak_rss_mb"] > 0
        assert len(r["step_times"]) == dry["timed_steps"] == 1
        assert r["seconds_per_step"] == pytest.approx(r["step_times"][0])
        assert 0 < r["generated_tokens_per_step"] <= r["B"] * r["G"] * r["T"]
        s, gen = r["seconds_per_step"], r["generated_tokens_per_step"]
        trained = r["trained_tokens_per_step"]
        assert r["generated_tokens_per_s"] == pytest.approx(gen / s)
        assert r["trained_tokens_per_s"] == pytest.approx(trained / s)
        flops = 6 * r["params"] * trained + 2 * r["params"] * gen
        assert r["tflop_per_step"] == pytest.approx(flops / 1e12)
        assert r["share_of_measured_bf16_peak"] == pytest.approx(flops / s / 1e12 / peak)
        assert r["share_of_nominal_bf16_peak"] is None  # no nominal peak known for a CPU
    pgrpo, trl = dry["rows"]
    assert "after build_run" in pgrpo["device_path"] or "model.device" in pgrpo["device_path"]
    assert trl["trl_args"] == {"gradient_checkpointing": True, "bf16": True}  # TRL's defaults
    ratio = dry["ratios"]["2x2x4:steps_per_s_pgrpo_over_trl"]
    assert ratio == pytest.approx(pgrpo["steps_per_s"] / trl["steps_per_s"])


def _fake_out(seconds: float) -> dict:
    return {
        "times": [9.0, seconds, 3 * seconds, seconds],
        "generated_tokens": [1.0, 10.0, 30.0, 20.0],
        "prompt_tokens": 50.0,
        "params": 1000,
        "precision": "bf16-autocast",
        "peak_gpu_mb": 100.0,
        "peak_rss_mb": 10.0,
    }


def test_row_of_takes_medians_after_the_warm_up():
    r = gpu_trainer.row_of("pgrpo-bf16", {"B": 2, "G": 2, "T": 8}, _fake_out(2.0), 3, 0.5)
    assert r["seconds_per_step"] == 2.0 and r["warmup_s"] == 9.0
    assert r["generated_tokens_per_step"] == 20.0 and r["trained_tokens_per_step"] == 70.0
    flops = 6 * 1000 * 70 + 2 * 1000 * 20
    assert r["model_tflops"] == pytest.approx(flops / 2.0 / 1e12)
    assert r["share_of_measured_bf16_peak"] == pytest.approx(flops / 2.0 / 1e12 / 0.5)
    assert r["generated_tokens_per_s"] == 10.0 and r["share_of_nominal_bf16_peak"] is None
    r = gpu_trainer.row_of("trl-bf16", {"B": 2, "G": 2, "T": 8}, _fake_out(2.0), 3, 0.5, 2.0)
    assert r["share_of_nominal_bf16_peak"] == pytest.approx(flops / 2.0 / 1e12 / 2.0)


@pytest.fixture
def grid_args(tmp_path, monkeypatch):
    (tmp_path / "smollm2-135m").mkdir()
    (tmp_path / "smollm2-135m" / "tokenizer.json").write_text("{}")
    monkeypatch.setattr(gpu_trainer, "ASSETS", tmp_path)
    monkeypatch.setattr(sys, "argv", ["gpu_trainer.py"])

    def make(budget: float):
        args = gpu_trainer.parse_args(["--dry-run", "--assets", str(tmp_path)])
        args.cell_list = [{"B": 2, "G": 2, "T": 4}, {"B": 4, "G": 2, "T": 4}]
        args.budget_s, args.steps, args.out = budget, 3, tmp_path / "r.json"
        return args

    return make


def _result(trl_ok: bool) -> dict:
    trl = {"ok": True} if trl_ok else {"ok": False, "error": "trl is not installed"}
    return {
        "trl": trl,
        "matmul": {"tflops": 1.0},
        "nominal_bf16_tflops": 2.0,
        **{"rows": [], "failed": [], "skipped": []},
    }


def test_a_failed_variant_is_recorded_and_the_others_still_run(grid_args, monkeypatch):
    def launch(args, worker, extra, timeout):
        if worker == "pgrpo":
            raise RuntimeError(
                "exit 1: RuntimeError: Expected all tensors to be on the same device"
            )
        return _fake_out(1.0)

    monkeypatch.setattr(gpu_trainer, "launch", launch)
    args, result = grid_args(1e9), _result(True)
    gpu_trainer.run_grid(args, result, "model", t0=0.0)
    assert [r["variant"] for r in result["rows"]] == ["trl-bf16", "trl-bf16"]
    assert [f["variant"] for f in result["failed"]] == ["pgrpo-bf16", "pgrpo-bf16"]
    assert "same device" in result["failed"][0]["error"]
    assert json.loads(args.out.read_text())["failed"] == result["failed"]  # written as it goes


def test_without_trl_pgrpo_runs_alone_and_the_budget_stops_new_variants(grid_args, monkeypatch):
    calls = []
    monkeypatch.setattr(gpu_trainer, "launch", lambda a, w, e, t: calls.append(w) or _fake_out(1))
    args, result = grid_args(1e9), _result(False)
    gpu_trainer.run_grid(args, result, "model", t0=0.0)
    assert calls == ["pgrpo", "pgrpo"]
    assert result["skipped"] == [{"variant": "trl-bf16", "why": "trl is not installed"}]
    calls.clear()
    args, result = grid_args(-1.0), _result(True)  # budget spent: nothing starts
    gpu_trainer.run_grid(args, result, "model", t0=0.0)
    assert calls == [] and result["rows"] == []
    assert {s["why"] for s in result["skipped"]} == {"budget"} and len(result["skipped"]) == 4


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--dry-run", "--cells", "8x4"], "bad cell"),
        (["--dry-run", "--variants", "pgrpo"], "unknown --variants"),
        (["--dry-run", "--steps", "0"], "--steps 0"),
        (["--dry-run", "--assets", "{tmp}"], "run `python bench/gpu_trainer.py --prepare`"),
    ],
)
def test_bad_options_fail_with_one_line_and_exit_code_2(argv, message, tmp_path):
    argv = [a.format(tmp=tmp_path) for a in argv]
    done = _run(*argv, "--out", str(tmp_path / "x.json"))
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert message in last and "Traceback" not in done.stderr
    assert not (tmp_path / "x.json").exists()


def test_without_cuda_the_gpu_run_says_so(assets, tmp_path):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    done = _run("--assets", str(assets), "--out", str(tmp_path / "x.json"))
    assert done.returncode == 2
    assert "no CUDA device here" in done.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "x.json").exists()


def test_a_failed_set_up_is_one_line_exit_1_and_keeps_the_json(grid_args, monkeypatch, capsys):
    args = grid_args(1e9)

    def launch(args, worker, extra, timeout):
        raise RuntimeError(f"exit 1: {worker}: OSError: no such file tokenizer.json")

    monkeypatch.setattr(gpu_trainer, "launch", launch)
    monkeypatch.setattr(gpu_trainer, "trl_available", lambda: {"ok": True})
    argv = ["--dry-run", "--assets", str(gpu_trainer.ASSETS), "--out", str(args.out)]
    with pytest.raises(SystemExit, match="set-up failed .* matmul: OSError"):
        gpu_trainer.main(argv)
    saved = json.loads(args.out.read_text())
    assert saved["failed"][0]["variant"] == "set-up" and saved["rows"] == []
