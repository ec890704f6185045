"""Fuzz every log reader through the CLI (`diagnose` and `report`): arbitrary bytes, truncated and
garbled files in each supported format give a result or one line + exit code 2, never a
traceback. Example counts are small so the file runs in seconds."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app

FIX = Path(__file__).resolve().parent / "fixtures" / "logs"
_load_commands()
runner = CliRunner()

# format -> (file name in the run folder, a valid file of that format)
FORMATS = {
    "pgrpo": ("metrics.jsonl", (FIX / "pgrpo_run" / "metrics.jsonl").read_bytes()),
    "trl": ("trainer_state.json", (FIX / "trl_output" / "trainer_state.json").read_bytes()),
    "verl": ("gsm8k_grpo.jsonl", (FIX / "verl_run" / "gsm8k_grpo.jsonl").read_bytes()),
    "verl_console": ("console.log", (FIX / "verl_run" / "console.log").read_bytes()),
    "wandb": ("wandb_export.csv", (FIX / "wandb_export.csv").read_bytes()),
    "csv": (
        "run.tsv",
        b"step\treward\tlr\n"
        + b"".join(f"{i}\t{0.1 + 0.01 * i:.3f}\t1e-6\n".encode() for i in range(1, 40)),
    ),
}
FUZZ = settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)

json_values = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def damaged(draw, valid: bytes) -> bytes:
    """A valid file cut short, with bytes replaced, inserted or deleted."""
    data = bytearray(valid[: draw(st.integers(0, len(valid)))])
    for _ in range(draw(st.integers(0, 6))):
        if not data:
            break
        i = draw(st.integers(0, len(data) - 1))
        op = draw(st.sampled_from(["replace", "insert", "delete"]))
        b = draw(st.integers(0, 255))
        if op == "replace":
            data[i] = b
        elif op == "insert":
            data.insert(i, b)
        else:
            del data[i]
    return bytes(data)


@st.composite
def records(draw) -> bytes:
    """JSONL of objects with reward/step keys holding any JSON value."""
    keys = ["step", "reward", "learning_rate", "frac_reward_zero_std", "entropy", "data"]
    lines = []
    for _ in range(draw(st.integers(0, 12))):
        rec = draw(st.dictionaries(st.sampled_from(keys), json_values, max_size=5))
        lines.append(json.dumps(rec))
    return "\n".join(lines).encode()


def _contents(fmt: str) -> st.SearchStrategy[bytes]:
    valid = FORMATS[fmt][1]
    out = st.binary(max_size=600) | damaged(valid)
    return out | records() if fmt in ("pgrpo", "verl") else out


def _check(argv: list[str]) -> None:
    res = runner.invoke(app, argv)
    assert res.exception is None or isinstance(res.exception, SystemExit), (
        f"{argv}: {type(res.exception).__name__}: {res.exception}"
    )
    assert "Traceback" not in res.output
    if res.exit_code != 0:
        lines = res.output.strip().splitlines()
        assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (
            f"{argv}: exit {res.exit_code}: {res.output!r}"
        )


def _fuzz(command: str, fmt: str, data: bytes, as_dir: bool) -> None:
    name = FORMATS[fmt][0]
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        run.mkdir()
        (run / name).write_bytes(data)
        target = run if as_dir else run / name
        argv = [command, str(target)]
        if command == "report":
            argv += ["--out", str(Path(tmp) / "report")]
        _check(argv + ["--json"])


def _make(command: str, fmt: str, examples: int):
    @settings(FUZZ, max_examples=examples)
    @given(data=_contents(fmt), as_dir=st.booleans())
    def test(data: bytes, as_dir: bool) -> None:
        _fuzz(command, fmt, data, as_dir)

    test.__name__ = f"test_fuzz_{command}_{fmt}"
    return test


for _fmt in FORMATS:
    globals()[f"test_fuzz_diagnose_{_fmt}"] = _make("diagnose", _fmt, 12)
    globals()[f"test_fuzz_report_{_fmt}"] = _make("report", _fmt, 4)
