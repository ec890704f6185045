"""`pgrpo watch --stop-file` never deletes the user's files (a hostile review, session 41): a
stop file that is the watched log, lies in the watched run folder, is not a regular file or
holds content is refused in one line with exit 2, the file left as it was; only an empty
marker (what a watch touches) left by an earlier watch is removed."""

from __future__ import annotations

from cli_checks import one_line_error
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app

_load_commands()
runner = CliRunner()
ROWS = "".join(f'{{"step": {s}, "reward": {0.5 + 0.01 * (s % 3)}}}\n' for s in range(1, 30))


def _watch(log, stop):
    return runner.invoke(app, ["watch", str(log), "--once", "--stop-on", "none",
                               "--stop-file", str(stop)])  # fmt: skip


def test_the_watched_log_as_stop_file_is_refused_and_kept(tmp_path, monkeypatch):
    log = tmp_path / "precious.jsonl"
    log.write_text(ROWS)
    one_line_error(_watch(log, log), "is the watched log", "outside")
    assert log.read_text() == ROWS
    monkeypatch.chdir(tmp_path)  # the same file named two ways
    one_line_error(_watch("precious.jsonl", "./sub/../precious.jsonl"), "is the watched log")
    assert log.read_text() == ROWS


def test_a_stop_file_in_the_watched_folder_is_refused_and_kept(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "log.jsonl").write_text(ROWS)
    one_line_error(_watch(run, run / "log.jsonl"), "inside the watched", "outside")
    one_line_error(_watch(run, run / "STOP"), "inside the watched")  # even a new file there
    assert (run / "log.jsonl").read_text() == ROWS and not (run / "STOP").exists()


def test_a_file_with_content_or_not_regular_is_refused_and_kept(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text(ROWS)
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    one_line_error(_watch(log, notes), "not empty", "remove it yourself")
    assert notes.read_text() == "mine\n"
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "empty")
    (tmp_path / "empty").touch()
    one_line_error(_watch(log, link), "not a regular file")
    assert link.is_symlink() and (tmp_path / "empty").is_file()


def test_an_empty_marker_from_an_earlier_watch_is_still_removed(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text(ROWS)
    stop = tmp_path / "STOP"
    stop.touch()  # what a watch leaves on a stop
    res = _watch(log, stop)
    assert res.exit_code == 0, res.output
    assert f"note: removed {stop}, left by an earlier watch" in res.stderr
    assert not stop.exists() and log.read_text() == ROWS
