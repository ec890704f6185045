"""bench/run_all.py: runs benchmark scripts one at a time and renders any result shape."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("run_all", ROOT / "bench" / "run_all.py")
run_all = importlib.util.module_from_spec(spec)
sys.modules["run_all"] = run_all
spec.loader.exec_module(run_all)

GOOD = '''"""Toy benchmark: squares.

More text that is not the first paragraph.
"""
import json, sys
from pathlib import Path
out = Path(__file__).parent / "results"
out.mkdir(exist_ok=True)
rows = [{"variant": "ours", "seconds": 0.5, "speedup_vs_theirs": 2.0, "times": [1, 2]},
        {"variant": "theirs", "seconds": 1.0, "speedup_vs_theirs": 1.0, "extra": {"a": 1}}]
(out / "good.json").write_text(json.dumps(
    {"meta": {"command": "python bench/good.py", "date": "2026-11-29", "machine": "toy",
              "n": 3}, "rows": rows}))
'''
BAD = '''"""Toy benchmark that fails."""
raise SystemExit("no data here")
'''


def test_runs_scripts_and_renders_results(tmp_path):
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "good.py").write_text(GOOD)
    (bench / "bad.py").write_text(BAD)
    (bench / "_helper.py").write_text("raise SystemExit(1)\n")  # private: not a benchmark
    doc = tmp_path / "benchmarks.md"
    code = run_all.main(["--bench-dir", str(bench), "--out", str(doc), "--nice", "0"])
    assert code == 1  # bad.py failed
    text = doc.read_text()
    assert "## good" in text and "Toy benchmark: squares." in text
    assert "More text" not in text
    assert "- command: `python bench/good.py`" in text and "- machine: toy" in text
    assert "| variant | seconds | speedup_vs_theirs | extra/a |" in text
    assert "| ours | 0.5 | 2 | - |" in text
    assert "times" not in text  # list fields are left out of the table
    assert "- ours: `speedup_vs_theirs` = 2" in text
    assert "`bench/bad.py` (last run failed: no data here)" in text
    assert "_helper" not in text


def test_from_results_renders_other_shapes(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    trainer_like = {
        "command": "nice -n 10 python bench/trainer.py",
        "date": "2026-11-29",
        "machine": "2-core CPU, 24 GiB, no GPU",
        "results": [{"variant": "pgrpo", "seconds_per_step": 10.0, "pass_at_k": {"1": 0.2}}],
        "ratios": {"speedup_vs_trl": 1.5},
        "targets": {"speedup_vs_trl": ">= 1.3"},
    }
    (results / "trainer.json").write_text(json.dumps(trainer_like))
    (results / "plain.json").write_text(json.dumps([{"k": 1, "x": float("nan")}]))
    (results / "broken.json").write_text("{not json")
    fit_like = {
        "command": "python bench/fit.py",
        "fit_time_ms_median": {"rom": 61.3, "exponential": 2.8},
        "accuracy": {"slow_start": {"n": 10, "r2": 0.3}, "all": {"n": 40, "r2": 0.2}},
        "settings": {"seed": 0, "mode": "x"},
    }
    (results / "fit.json").write_text(json.dumps(fit_like))
    doc = tmp_path / "b.md"
    code = run_all.main(
        ["--from-results", "--bench-dir", str(tmp_path), "--results-dir", str(results)]
        + ["--out", str(doc)]
    )
    assert code == 0
    text = doc.read_text()
    assert "- command: `nice -n 10 python bench/trainer.py`" in text
    assert "| variant | seconds_per_step | pass_at_k/1 |" in text
    assert "- `speedup_vs_trl`: 1.5 (target >= 1.3)" in text
    assert "| 1 | nan |" in text and "- command: `not recorded`" in text
    assert "unreadable result broken.json" in text
    assert "### fit_time_ms_median" in text and "| rom | 61.3 |" in text
    assert "### accuracy" in text and "| name | n | r2 |" in text and "| all | 40 | 0.2 |" in text
    assert "### settings" not in text  # a dict of mixed values is not a table


def test_recorded_command_reuses_interpreter(tmp_path):
    (tmp_path / "x.json").write_text(
        json.dumps({"meta": {"command": "nice -n 10 python bench/x.py --repeats 3"}})
    )
    assert run_all.recorded_command(tmp_path / "x.json") == [
        sys.executable,
        "bench/x.py",
        "--repeats",
        "3",
    ]
    script = tmp_path / "x.py"
    assert run_all.command_for(script, tmp_path)[1:] == ["bench/x.py", "--repeats", "3"]
    (tmp_path / "x.json").write_text(json.dumps({"command": "/no/such/python bench/x.py"}))
    assert run_all.command_for(script, tmp_path) == [sys.executable, str(script)]


def test_unknown_benchmark_name_lists_the_valid_ones(tmp_path, capsys):
    (tmp_path / "good.py").write_text(GOOD)
    with pytest.raises(SystemExit):
        run_all.main(["--only", "nope", "--bench-dir", str(tmp_path), "--out", str(tmp_path / "d")])
    assert "available: good" in capsys.readouterr().err


def test_meta_from_rows_and_wide_tables(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    same = {"tasks": {t: {"command": "python bench/t.py", "date": "d1", "acc": 0.5} for t in "ab"}}
    wide = {f"c{i}": float(i) for i in range(20)}
    differ = {
        "rows": [
            {"command": "python bench/t.py --x 1", "name": "one", **wide},
            {"command": "python bench/t.py --x 2", "name": "two", **wide},
        ]
    }
    (results / "same.json").write_text(json.dumps(same))
    (results / "differ.json").write_text(json.dumps(differ))
    doc = tmp_path / "b.md"
    run_all.main(
        ["--from-results", "--bench-dir", str(tmp_path), "--results-dir", str(results)]
        + ["--out", str(doc)]
    )
    text = doc.read_text()
    same_part = text[text.index("## same") :]
    assert "- command: `python bench/t.py`" in same_part and "- date: d1" in same_part
    differ_part = text[text.index("## differ") : text.index("## same")]
    assert "- command: `per row (see the table)`" in differ_part
    assert "not recorded (result file written" in differ_part  # no date anywhere: file time
    # 22 columns, 2 rows: transposed, one column per row
    assert "| name | one | two |" in differ_part
    assert "| command | python bench/t.py --x 1 | python bench/t.py --x 2 |" in differ_part
    assert "| c19 | 19 | 19 |" in differ_part


def test_a_result_without_a_date_gets_its_commit_time_not_the_checkout_time(tmp_path):
    """A result file that records no date is dated by its last commit while git has it
    unchanged (a fresh clone's mtimes are the checkout's, so docs/benchmarks.md changed with
    every clone), and by its mtime once it is edited or untracked."""
    import subprocess

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True,
                       env={"GIT_AUTHOR_DATE": "2026-01-02T03:04:00+00:00",
                            "GIT_COMMITTER_DATE": "2026-01-02T03:04:00+00:00",
                            "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
                            "PATH": "/usr/bin:/bin"})  # fmt: skip

    path = tmp_path / "r.json"
    path.write_text('{"rows": []}')
    assert run_all._file_time(path).startswith("result file written")  # not in git
    git("init", "-q")
    git("add", "r.json")
    git("commit", "-qm", "r")
    assert run_all._file_time(path) == "result file committed 2026-01-02 03:04 UTC"
    path.write_text('{"rows": [1]}')
    assert run_all._file_time(path).startswith("result file written")
