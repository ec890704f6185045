"""A second `pgrpo train` on a folder another process writes says so in one line, before the
progress bar prints anything (it printed its 'loading model...' line first; session 39)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from conftest import TINY_CLI_ARGS
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.train.runlock import LOCK_FILE, check_unlocked

_load_commands()

HOLDER = textwrap.dedent(
    """
    import sys, time
    from pgrpo.train.runlock import run_lock
    with run_lock(sys.argv[1]):
        print("held", flush=True)
        time.sleep(120)
    """
)


def test_the_lock_error_is_the_only_output(tmp_path):
    run_dir = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(run_dir)],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        res = CliRunner().invoke(app, ["train", *TINY_CLI_ARGS, f"run.output_dir={tmp_path}",
                                       "run.name=run", "steps=2", "--resume"])  # fmt: skip
    finally:
        holder.kill()
        holder.wait()
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    assert "being written by another pgrpo process" in lines[0]


def test_a_free_or_missing_folder_passes_and_is_not_made(tmp_path):
    check_unlocked(tmp_path / "nothing")
    assert not (tmp_path / "nothing").exists()
    (tmp_path / "free").mkdir()
    (tmp_path / "free" / LOCK_FILE).write_text("123\n")  # a lock file no process holds
    check_unlocked(tmp_path / "free")
