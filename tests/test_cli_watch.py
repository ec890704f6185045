"""`pgrpo watch`: follows a log being written by another process, exits 3 and touches the stop
file on a plateau; follows a real `pgrpo train` run; bad input exits 2 with one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_CLI_ARGS
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.cli.watch import EXIT_STOP

_load_commands()
runner = CliRunner()
SRC = str(Path(__file__).resolve().parents[1] / "src")

WRITER = textwrap.dedent(
    """
    import json, math, sys, time
    import numpy as np
    path, n, tau = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    rng = np.random.default_rng(0)
    with open(path, "a") as fh:
        for step in range(1, n + 1):
            r = 0.8 - 0.6 * math.exp(-step / tau) + 0.02 * rng.standard_normal()
            fh.write(json.dumps({"step": step, "reward": r}) + "\\n")
            fh.flush()
            time.sleep(0.03)
    """
)


def _env():
    return {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1"}


@pytest.fixture
def writer(tmp_path):
    log = tmp_path / "run" / "metrics.jsonl"
    log.parent.mkdir()
    procs = []

    def start(n, tau):
        procs.append(
            subprocess.Popen([sys.executable, "-c", WRITER, str(log), str(n), str(tau)], env=_env())
        )
        return procs[-1]

    yield log, start
    for p in procs:
        if p.poll() is None:
            p.terminate()
            p.wait(timeout=10)


def test_follows_a_growing_log_and_stops_on_the_plateau(tmp_path, writer):
    log, start = writer
    proc = start(400, 8.0)  # plateau after ~5 tau = 40 steps; 400 steps take ~12 s
    stop = tmp_path / "STOP"
    out = runner.invoke(
        app,
        ["watch", str(log), "--stop-on", "plateau", "--stop-file", str(stop), "--poll", "0.2",
         "--timeout", "120", "--every", "4"],
    )  # fmt: skip
    assert out.exit_code == EXIT_STOP, out.output
    assert stop.is_file()
    lines = [x for x in out.stdout.splitlines() if x.startswith("step ")]
    assert len(lines) >= 2 and "verdict" in lines[-1] and "forecast" in lines[-1]
    stopped_at = float(lines[-1].split()[1])
    assert 30 <= stopped_at < 400  # after the plateau is reached, before the run ends
    assert proc.poll() is None or stopped_at < 400  # it followed the log while it was written
    assert "plateau" in out.stderr


def test_a_rising_log_never_stops(tmp_path, writer):
    log, start = writer
    proc = start(60, 1e4)  # ~linear rise for the whole run
    out = runner.invoke(
        app, ["watch", str(log), "--poll", "0.2", "--idle", "3", "--timeout", "120"]
    )
    proc.wait(timeout=60)
    assert out.exit_code == 0, out.output
    assert "no stop condition" in out.stderr
    assert [x for x in out.stdout.splitlines() if x.startswith("step ")]


TINY = TINY_CLI_ARGS


def test_follows_a_real_pgrpo_train_run(tmp_path):
    env = {**_env(), "PGRPO_CACHE": str(tmp_path / "cache")}
    cmd = [sys.executable, "-c", "from pgrpo.cli import main; main()", "train", *TINY,
           "steps=80", "forecast_every=1000", f"run.output_dir={tmp_path}", "--json"]  # fmt: skip
    train = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out = runner.invoke(
            app,
            ["watch", str(tmp_path / "grpo"), "--poll", "0.2", "--timeout", "240", "--json",
             "--stop-file", str(tmp_path / "STOP"),
             "--stop-on", "plateau,flat,collapse,degeneracy", "--plateau-patience", "3"],
        )  # fmt: skip
        rows = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
        assert rows, out.output
        # the tiny model's reward is flat (all groups fail): with the flat rule chosen (it is not
        # a default: docs/integrations.md), the watch stops the run's follower
        assert out.exit_code == EXIT_STOP, out.output
        assert (tmp_path / "STOP").is_file()
        # collapsed: the progress verdict of a reward stuck at its floor with no spread in
        # the groups, below where it started
        assert rows[-1]["verdict"] in ("flat", "plateau", "saturated", "collapsed", "learning")
        alerts = ("plateau", "flat", "collapse", "degeneracy")
        assert any(rows[-1][f"pgrpo/alert/{a}"] for a in alerts)
        assert rows[-1]["step"] < 80 or train.poll() is not None
    finally:
        if train.poll() is None:
            train.terminate()
        train.wait(timeout=60)


def test_once_on_a_real_log(shared_data):
    out = runner.invoke(app, ["watch", str(shared_data / "curves" / "countdown_trl_grpo.csv"),
                              "--once", "--json"])  # fmt: skip
    assert out.exit_code in (0, EXIT_STOP), out.output
    row = json.loads(out.stdout.strip().splitlines()[-1])
    assert {"pgrpo/forecast_plateau", "pgrpo/forecast_lo", "pgrpo/forecast_hi"} <= set(row)


def test_once_stops_on_a_probable_plateau_only_with_plateau_any(tmp_path):
    """A rise then a noisy second half whose bound does not say the rise stopped: the default
    watch does not stop and says why; --plateau-any stops (exit 3)."""
    rng = np.random.default_rng(0)
    t = np.arange(120.0)
    reward = 0.2 + 0.3 * (1 - np.exp(-t / 20)) + rng.normal(0, 0.08, t.size)
    log = tmp_path / "run.csv"
    log.write_text("step,reward\n" + "".join(f"{i + 1},{r}\n" for i, r in enumerate(reward)))
    out = runner.invoke(app, ["watch", str(log), "--once", "--stop-on", "plateau"])
    assert out.exit_code == 0, out.output
    assert "verdict plateau (not confirmed)" in out.stdout and "Probably plateaued" in out.stderr
    out = runner.invoke(app, ["watch", str(log), "--once", "--stop-on", "plateau", "--plateau-any"])
    assert out.exit_code == EXIT_STOP, out.output
    assert "stop: plateau" in out.stderr and "Probably plateaued" in out.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/no/such/log", "--once"], "no such file"),
        (["x", "--stop-on", "plato"], "unknown stop rule"),
        (["x", "--format", "nope"], "unknown log reader"),
        (["x", "--confidence", "1.5", "--once"], "confidence must be in (0, 1)"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, message):
    out = runner.invoke(app, ["watch", *args])
    assert out.exit_code == 2
    assert message in out.output


def test_empty_log_times_out_as_an_error(tmp_path):
    log = tmp_path / "metrics.jsonl"
    log.write_text("")
    t = time.monotonic()
    out = runner.invoke(app, ["watch", str(log), "--poll", "0.1", "--timeout", "1"])
    assert out.exit_code == 2 and time.monotonic() - t < 30
    assert "error:" in out.output


COPIER = textwrap.dedent(
    """
    import sys, time
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as fh, open(dst, "a") as out:
        for line in fh:
            out.write(line)
            out.flush()
            time.sleep(0.02)
    """
)
FIX = Path(__file__).parent / "fixtures" / "logs"


@pytest.mark.parametrize("name", ["verl_run/console.log", "verl_run/gsm8k_grpo.jsonl"])
def test_follows_a_verl_log_as_it_is_written(tmp_path, name):
    """verl's console output (tee'd to a file) and its file-logger JSONL, appended line by line
    by another process: the watch reads each as it grows (format auto-detected)."""
    dst = tmp_path / Path(name).name
    dst.write_text("")
    proc = subprocess.Popen([sys.executable, "-c", COPIER, str(FIX / name), str(dst)], env=_env())
    try:
        out = runner.invoke(app, ["watch", str(dst), "--poll", "0.1", "--idle", "3",
                                  "--timeout", "120", "--stop-on", "none", "--json"])  # fmt: skip
    finally:
        proc.wait(timeout=60)
    assert out.exit_code == 0, out.output
    rows = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    assert len(rows) >= 3 and rows[-1]["step"] == 80  # followed to the end of the log
    assert rows[0]["pgrpo/points"] < rows[-1]["pgrpo/points"]  # seen while it grew


@pytest.mark.parametrize(
    "name", ["trl_output", "wandb_export.csv", "pgrpo_run", "verl_run/console.log"]
)
def test_once_on_every_format(name):
    out = runner.invoke(app, ["watch", str(FIX / name), "--once"])
    assert out.exit_code in (0, EXIT_STOP), out.output
    assert out.stdout.startswith("step ") and "verdict" in out.stdout


def test_the_cadence_defaults_agree_across_cli_library_and_callback():
    """`pgrpo watch`, `watch_log` and `PgrpoCallback` assess every 5 logged points by default
    (the cadence the live false-alarm rates in docs/integrations.md were measured at), and the CLI
    polls as often as the library."""
    import inspect

    from pgrpo.cli.watch import watch_cmd
    from pgrpo.diagnose.watch import watch_log
    from pgrpo.integrations.callback import PgrpoCallback

    lib = inspect.signature(watch_log).parameters
    cli = inspect.signature(watch_cmd).parameters
    callback = inspect.signature(PgrpoCallback.__init__).parameters
    assert cli["every"].default.default == lib["every"].default == callback["every"].default
    assert cli["poll"].default.default == lib["poll_s"].default


def test_watch_takes_the_sizes_diagnose_takes():
    """Without G and B a watch read the corpus's collapse `flat`, which `pgrpo diagnose` given
    the sizes reads `collapsed` (a hostile user's review, session 35); an alert that has not yet
    held for its patience is said beside "no stop condition"."""
    from conftest import SHARED_DATA

    path = SHARED_DATA / "curves" / "cs336_shibuki_offpolicy_e16_tb256.csv"
    if not path.is_file():
        pytest.skip("needs ../shared/data/curves")
    sizes = ["--group-size", "8", "--batch-prompts", "32"]
    diag = runner.invoke(app, ["diagnose", str(path), *sizes, "--json"])
    label = json.loads(diag.stdout)["progress"]["label"]
    watched = runner.invoke(app, ["watch", str(path), "--once", "--json", *sizes])
    assert watched.exit_code == 0, watched.output
    last = json.loads(watched.stdout.strip().splitlines()[-1])
    assert last["verdict"] == label == "collapsed"
    assert "collapse" in last["alerts"] and "not yet held long enough" in watched.stderr
    unsized = runner.invoke(app, ["watch", str(path), "--once", "--json"])
    assert json.loads(unsized.stdout.strip().splitlines()[-1])["verdict"] != "collapsed"
    bad = runner.invoke(app, ["watch", str(path), "--once", "--group-size", "0"])
    assert bad.exit_code == 2


def test_a_stop_file_in_a_folder_not_yet_made_is_said(tmp_path):
    log = tmp_path / "log.csv"
    log.write_text("step,reward\n" + "".join(f"{s},{0.5 + 0.01 * (s % 3)}\n" for s in range(1, 30)))
    stop = tmp_path / "typo" / "STOP"
    res = runner.invoke(app, ["watch", str(log), "--once", "--stop-file", str(stop)])
    assert res.exit_code == 0, res.output
    assert f"note: --stop-file's folder {stop.parent} does not exist yet" in res.stderr
    here = runner.invoke(app, ["watch", str(log), "--once", "--stop-file", str(tmp_path / "S")])
    assert "does not exist yet" not in here.stderr
