"""`pgrpo report --out DIR` touches only what a report wrote (a hostile user's review, session
36): sent to a folder of the user's own, it deleted their kl.png / entropy.png (panels this run
cannot draw) and replaced their report.html, exit 0 and not a word. Now such a folder is refused
before anything is read or written (one line, exit 2, every file as it was), and a report's own
folder (its manifest, or an earlier version's report.html) is still refreshed in place."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.report.build import _panels
from pgrpo.report.folder import MANIFEST, PANELS, check_out_folder

_load_commands()
runner = CliRunner()


def _csv(path, n: int = 30):
    rng = np.random.default_rng(0)
    reward = np.clip(
        0.2 + 0.5 * (1 - np.exp(-np.arange(n) / 8)) + 0.03 * rng.standard_normal(n), 0, 1
    )
    path.write_text("step,reward\n" + "".join(f"{i + 1},{r}\n" for i, r in enumerate(reward)))
    return path


def _report(log, out):
    return runner.invoke(app, ["report", str(log), "--out", str(out)])


def test_panel_names_are_the_panels_drawn():
    import inspect

    src = inspect.getsource(_panels)
    assert all(f'"{name}": (' in src for name in PANELS)
    assert src.count('": (') == len(PANELS)


@pytest.mark.parametrize("mine", [["kl.png"], ["entropy.png", "report.html"], ["reward.png"]])
def test_a_folder_with_files_the_report_did_not_write_is_refused_and_left_as_it_was(tmp_path, mine):
    log, out = _csv(tmp_path / "run.csv"), tmp_path / "plots"
    out.mkdir()
    (out / "notes.txt").write_text("other files are never touched")
    for name in mine:
        (out / name).write_text(f"mine: {name}")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    res = _report(log, out)
    assert res.exit_code == 2, res.output
    assert "did not write" in res.output and all(n in res.output for n in mine)
    assert "Traceback" not in res.output and res.output.count("\n") == 1
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_report_s_own_folder_is_refreshed_and_its_stale_panels_removed(tmp_path):
    log, out = _csv(tmp_path / "run.csv"), tmp_path / "rep"
    assert _report(log, out).exit_code == 0
    written = json.loads((out / MANIFEST).read_text())["files"]
    assert "report.html" in written and "reward.png" in written
    assert sorted(p.name for p in out.iterdir() if p.name != MANIFEST) == sorted(written)
    (out / "kl.png").write_bytes(b"an earlier report of a run with KL")  # as if it wrote it
    manifest = json.loads((out / MANIFEST).read_text())
    (out / MANIFEST).write_text(json.dumps({**manifest, "files": [*written, "kl.png"]}))
    assert _report(log, out).exit_code == 0
    assert not (out / "kl.png").exists()  # this run has no KL: its stale figure is gone


def test_a_folder_of_an_earlier_version_without_a_manifest_is_refreshed(tmp_path):
    log, out = _csv(tmp_path / "run.csv"), tmp_path / "rep"
    out.mkdir()
    (out / "report.html").write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8">\n<title>pgrpo report: x</title>'
    )
    (out / "kl.png").write_bytes(b"old panel")
    assert _report(log, out).exit_code == 0
    assert not (out / "kl.png").exists() and (out / MANIFEST).exists()


def test_an_unreadable_manifest_owns_nothing(tmp_path):
    out = tmp_path / "rep"
    out.mkdir()
    (out / MANIFEST).write_text("{not json")
    (out / "reward.png").write_bytes(b"mine")
    with pytest.raises(ValueError, match="did not write"):
        check_out_folder(out)
    check_out_folder(tmp_path / "new")  # a folder that does not exist yet: nothing to refuse


def test_links_and_folders_at_a_report_s_names_are_refused_and_nothing_is_written_through(tmp_path):
    """A link at reward.png was written through (a PNG appeared at its target outside --out) and
    a dangling link at kl.png was deleted: `exists()` is False for a dangling link (a review of
    the first fix, session 36)."""
    log, out, elsewhere = _csv(tmp_path / "run.csv"), tmp_path / "rep", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "reward.png").symlink_to(elsewhere / "precious.png")  # dangling
    (out / "kl.png").symlink_to(elsewhere / "gone.png")
    res = _report(log, out)
    assert res.exit_code == 2 and "reward.png (a link)" in res.output, res.output
    assert not list(elsewhere.iterdir()) and (out / "kl.png").is_symlink()
    for link in ("reward.png", "kl.png"):
        (out / link).unlink()
    (out / "entropy.png").mkdir()
    res = _report(log, out)
    assert res.exit_code == 2 and "entropy.png (not a file)" in res.output, res.output


def test_a_listed_file_the_user_replaced_since_is_refused(tmp_path):
    log, out = _csv(tmp_path / "run.csv"), tmp_path / "rep"
    assert _report(log, out).exit_code == 0
    (out / "reward.png").write_text("the user's own figure, saved over the report's")
    res = _report(log, out)
    assert res.exit_code == 2 and "reward.png (changed since a report wrote it)" in res.output
    assert (out / "reward.png").read_text().startswith("the user's own")


def test_a_report_stopped_half_way_does_not_lock_its_folder(tmp_path, monkeypatch):
    """The manifest is claimed before the first PNG: a report stopped after writing some PNGs
    (no manifest then, no report.html) made the next run refuse its own files."""
    import pgrpo.report.build as build

    log, out = _csv(tmp_path / "run.csv"), tmp_path / "rep"
    real = build.folder.record

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(build.folder, "record", stop)
    with pytest.raises(KeyboardInterrupt):
        build.build_report(log, out_dir=out)
    assert (out / "reward.png").exists()
    monkeypatch.setattr(build.folder, "record", real)
    assert _report(log, out).exit_code == 0
    files = json.loads((out / MANIFEST).read_text())["files"]
    assert all(isinstance(v, str) and len(v) == 64 for v in files.values())  # hashes now
