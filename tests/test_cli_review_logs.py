"""The analysis commands on logs as users have them (a hostile review of the readers and the
CLI, 2026-12-03); each test failed on the code before its fix: `fit` left its --out folder
behind on bad input, `watch` never said what the reader repaired, and `diagnose` / `report` had
no way to name a reward or step column that is not a standard name."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from pgrpo.cli import _load_commands, app
from pgrpo.logs import read_log

_load_commands()
runner = CliRunner()


def _curve(path, reward="reward", step="step", nans=0):
    steps = np.arange(1, 101)
    reward_values = [f"{v:.5f}" for v in 0.2 + 0.6 * (1 - np.exp(-steps / 30.0))]
    reward_values[10 : 10 + nans] = ["nan"] * nans
    rows = [f"{step},{reward}"] + [f"{s},{r}" for s, r in zip(steps, reward_values, strict=True)]
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize(
    "case",
    ["one_row", "unknown_format", "missing_reward_column", "missing_step_column"],
)
def test_fit_on_bad_input_leaves_no_out_folder(tmp_path, case):
    log = _curve(tmp_path / "log.csv")
    if case == "one_row":
        log.write_text("step,reward\n1,0.5\n")
    extra = {"unknown_format": ["--format", "nonsense"],
             "missing_reward_column": ["--reward-column", "nope"],
             "missing_step_column": ["--step-column", "nope"]}.get(case, [])  # fmt: skip
    out = tmp_path / "new" / "sub"
    res = runner.invoke(app, ["fit", str(log), "--out", str(out), *extra])
    assert res.exit_code == 2, res.output
    assert [x for x in res.output.splitlines() if x.startswith("error:")], res.output
    assert not (tmp_path / "new").exists()
    if case == "missing_step_column":
        assert "give one of the columns present: reward, step" in res.output


def test_watch_says_what_the_reader_repaired_once(tmp_path):
    log = _curve(tmp_path / "log.csv", nans=4)
    res = runner.invoke(app, ["watch", str(log), "--once"])
    assert res.exit_code == 0, res.output
    assert res.output.count("warning: 4 NaN/inf reward(s) dropped") == 1, res.output
    res = runner.invoke(app, ["watch", str(log), "--once", "--json"])
    line = json.loads(next(x for x in res.stdout.splitlines() if x.startswith("{")))
    assert "4 NaN/inf reward(s) dropped" in line["warnings"]


@pytest.mark.parametrize("command", ["diagnose", "report"])
def test_diagnose_and_report_take_the_reward_and_step_columns(tmp_path, command):
    log = _curve(tmp_path / "log.csv", reward="reward_mean", step="iteration")
    out = ["--out", str(tmp_path / "rep")] if command == "report" else []
    bad = runner.invoke(app, [command, str(log), *out])
    assert bad.exit_code == 2 and "--reward-column NAME" in bad.output, bad.output
    args = [command, str(log), "--reward-column", "reward_mean", "--step-column", "iteration"]
    res = runner.invoke(app, [*args, *out, "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout.strip().splitlines()[-1])
    progress = doc["progress"]["label"] if isinstance(doc["progress"], dict) else doc["progress"]
    assert progress in ("learning", "plateau")
    assert not any("no step column" in w for w in doc["warnings"])  # the step column was used


@pytest.mark.parametrize("command", ["diagnose", "fit", "watch"])
def test_a_csv_with_an_unclosed_quote_or_a_repeated_column_is_refused(tmp_path, command):
    """Review, 2026-12-05: one stray quote made the csv module read the rest of the file as one
    field (18 rows gone, a warning for one), and a header naming `reward` twice read the last
    copy without a word. Both exit 2 with one line; a quoted text field over several lines is
    read as before."""
    rows = [f"{s},{0.2 + 0.01 * s:.3f}" for s in range(1, 41)]
    quote = tmp_path / "quote.csv"
    quote.write_text("step,reward\n" + "\n".join(rows[:20] + ['21,"0.41'] + rows[21:]) + "\n")
    twice = tmp_path / "twice.csv"
    twice.write_text("step,reward,reward\n" + "\n".join(f"{r},9" for r in rows) + "\n")
    extra = ["--once"] if command == "watch" else ["--no-plot"] if command == "fit" else []
    for path, words in ((quote, "never closed"), (twice, "'reward' appears 2 times")):
        res = runner.invoke(app, [command, str(path), *extra])
        assert res.exit_code == 2, res.output
        assert words in res.output and len(res.output.strip().splitlines()) == 1
    text = tmp_path / "text.csv"
    text.write_text("step,reward,sample\n" + "\n".join(
        f'{r},"line one\nline two, with a comma"' for r in rows) + "\n")  # fmt: skip
    res = runner.invoke(app, ["diagnose", str(text), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output[res.output.index("{") :])["metrics"]["steps"] == 40


def test_watch_takes_step_column_and_once_says_one_line(tmp_path):
    """Review, 2026-12-05: `watch` had no --step-column (diagnose, fit and report had), so a
    log whose step is `iteration` was watched on row numbers; and `--once` on a log not ready
    printed a "waiting ... read again" note before its error line."""
    log = _curve(tmp_path / "log.csv", step="iteration")
    res = runner.invoke(app, ["watch", str(log), "--once", "--step-column", "iteration", "--json"])
    assert res.exit_code in (0, 3), res.output
    assert json.loads(res.stdout.strip().splitlines()[0])["step"] == 100  # warnings: stderr
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    res = runner.invoke(app, ["watch", str(empty), "--once"])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output


def test_eval_values_on_rows_of_their_own_are_read(tmp_path):
    """Review, 2026-12-05: eval/accuracy logged on its own rows (every W&B export of an HF/TRL
    run) was dropped with those rows, so reward hacking was missed and diagnose asked for the
    eval accuracy the log held. The same numbers logged either way give the same diagnosis."""
    rng = np.random.default_rng(0)
    train = [{"step": s, "reward": 0.2 + 0.006 * s + rng.normal(0, 0.03)} for s in range(1, 121)]
    evals = {s: 0.6 - 0.004 * s for s in range(10, 121, 10)}
    same = tmp_path / "same.jsonl"
    same.write_text("".join(json.dumps({**r, **({"eval/accuracy": evals[r["step"]]}
                                                  if r["step"] in evals else {})}) + "\n"
                            for r in train))  # fmt: skip
    sep = tmp_path / "sep.jsonl"
    sep.write_text("".join(json.dumps(r) + "\n" + (json.dumps(
        {"step": r["step"], "eval/accuracy": evals[r["step"]]}) + "\n" if r["step"] in evals
        else "") for r in train))  # fmt: skip
    docs = []
    for path in (same, sep):
        res = runner.invoke(app, ["diagnose", str(path), "--json"])
        assert res.exit_code == 0, res.output
        docs.append(json.loads(res.output[res.output.index("{") :]))
    modes = [{m["name"]: (m["detected"], m["evidence"]) for m in d["modes"]} for d in docs]
    assert modes[0]["reward_hacking"] == modes[1]["reward_hacking"]
    assert modes[1]["reward_hacking"][0] is True
    assert any("eval value(s) on rows without a reward" in w for w in docs[1]["warnings"])


def test_a_wandb_export_s_eval_rows_are_not_dropped_training_rows(tmp_path):
    """A W&B export of an HF/TRL run has eval rows whose train/reward cell is empty: they are
    read as eval values and not counted as training rows with a missing reward (they were, with
    a warning, before 2026-12-05); an empty reward on a row with no eval value still is."""
    rows = ["_step,train/global_step,train/reward,eval/accuracy"]
    for s in range(1, 61):
        rows.append(f"{2 * s},{s},{0.3 + 0.005 * s},")
        if s % 10 == 0:
            rows.append(f"{2 * s + 1},{s},,{0.5 + s / 1000}")
    rows.append("200,61,,")  # a training row that lost its reward
    path = tmp_path / "wandb_export.csv"
    path.write_text("\n".join(rows) + "\n")
    log = read_log(path, step_key="train/global_step")
    assert np.isfinite(log.columns["eval/accuracy"]).sum() == 6
    assert log.metrics["dropped_missing"] == 1.0
    assert any("1 row(s) with a missing or non-numeric reward" in w for w in log.warnings)


def test_a_reward_column_of_text_fails_at_once_even_under_watch(tmp_path):
    """Review, 2026-12-05: a reward column whose every cell is text (a wrong --reward-column, a
    decimal comma) read as "not ready yet", so `watch` waited for ever."""
    log = tmp_path / "text.csv"
    log.write_text("step,reward,model\n" + "".join(f"{s},0.{s:02d},qwen\n" for s in range(1, 40)))
    res = runner.invoke(app, ["watch", str(log), "--reward-column", "model", "--timeout", "30"])
    assert res.exit_code == 2 and "holds no numbers" in res.output, res.output
    comma = tmp_path / "comma.csv"  # European Excel: ';' between values, ',' in them: read
    comma.write_text("step;reward\n" + "".join(f"{s};0,{s:02d}\n" for s in range(1, 40)))
    res = runner.invoke(app, ["diagnose", str(comma), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output[res.output.index("{") :])["metrics"]["steps"] == 39
    res = runner.invoke(app, ["fit", str(comma), "--no-plot", "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["n"] == 39, res.output


@pytest.mark.parametrize("tail", [0, 2, 3, 20])
def test_a_run_whose_last_rewards_are_nan_reads_collapsed(tmp_path, tail):
    """Review, 2026-12-05: a run that diverged to NaN (the last 20 of 100 rewards) was headlined
    "Plateaued, still creeping" and `watch` did not stop: the reader dropped the NaN rows and
    every statistic saw a healthy curve. Three or more trailing NaN/inf rewards are a collapse;
    one or two (a row caught mid-write) are not."""
    log = _curve(tmp_path / "log.csv")
    lines = log.read_text().splitlines()
    lines[len(lines) - tail :] = [f"{ln.split(',')[0]},nan" for ln in lines[len(lines) - tail :]]
    log.write_text("\n".join(lines) + "\n")
    res = runner.invoke(app, ["diagnose", str(log), "--json"])
    assert res.exit_code == 0, res.output
    label = json.loads(res.output[res.output.index("{") :])["progress"]["label"]
    assert (label == "collapsed") == (tail >= 3)
    watch = runner.invoke(app, ["watch", str(log), "--once", "--stop-on", "collapse"])
    assert watch.exit_code == (3 if tail >= 3 else 0), watch.output


def test_an_eval_log_of_one_jsonl_line_is_one_record(tmp_path):
    """Review, 2026-12-05: a one-line JSONL eval log parsed as a `pgrpo eval` document and was
    reported as holding no eval results."""
    log = _curve(tmp_path / "log.csv")
    one = tmp_path / "eval.jsonl"
    one.write_text('{"step": 0, "accuracy": 0.4}\n')
    res = runner.invoke(app, ["diagnose", str(log), "--eval-log", str(one)])
    assert res.exit_code == 0, res.output
    one.write_text('{"step": 0, "accuracy": 0.4}\n{"step": 100, "accuracy": 0.2}\n')
    res = runner.invoke(app, ["diagnose", str(log), "--eval-log", str(one), "--json"])
    assert res.exit_code == 0, res.output


def test_a_bad_eval_json_found_in_the_run_folder_is_skipped_with_a_warning(tmp_path):
    """Review, 2026-12-05: a broken RUN_DIR/eval.json, which the user never named, stopped
    diagnose and report with an error about --eval-log."""
    import shutil
    from pathlib import Path

    run = tmp_path / "run"
    shutil.copytree(Path(__file__).parent / "fixtures" / "logs" / "pgrpo_run", run)
    (run / "eval.json").write_text('{"results": [{"step": 5, "accuracy": 1.7}]}')
    for args in (["diagnose", str(run)], ["report", str(run), "--out", str(tmp_path / "rep")]):
        res = runner.invoke(app, args)
        assert res.exit_code == 0, res.output
        assert "(found in the run folder) is not used" in res.output
    given = runner.invoke(app, ["diagnose", str(run), "--eval-log", str(run / "eval.json")])
    assert given.exit_code == 2  # named by the user: still an error


@pytest.mark.parametrize(
    ("column", "value", "option"),
    [("learning_rate", "inf", "--lr"), ("learning_rate", "-1e-06", "--lr"),
     ("refresh_interval", "2.5", "--refresh-interval"), ("refresh_interval", "0",
     "--refresh-interval"), ("group_size", "0", "--group-size"), ("beta1", "1.5", "--beta1")],
)  # fmt: skip
def test_a_setting_column_that_is_not_what_the_setting_must_be_is_not_read(
    tmp_path, column, value, option
):
    """Review, 2026-12-05: settings read from log columns skipped the checks the options get:
    K 2.5 was shown as read and used as 2, 0 as 1; an inf lr rescaled the schedule to 0 and NaN;
    beta1 1.5 stopped `fit` with a message naming neither the column nor the fix."""
    steps = np.arange(1, 61)
    reward = 0.2 + 0.6 * (1 - np.exp(-steps / 15.0))
    vals = [value] + ["1e-06" if column == "learning_rate" else value] * 59
    log = tmp_path / "log.csv"
    log.write_text(f"step,reward,{column}\n" + "".join(
        f"{s},{r:.5f},{v}\n" for s, r, v in zip(steps, reward, vals, strict=True)))  # fmt: skip
    res = runner.invoke(app, ["fit", str(log), "--no-plot", "--json"])
    assert res.exit_code == 0, res.output
    assert f"{column} value(s) are not" in res.output and option in res.output
    doc = json.loads(res.output[res.output.index("{") :])
    assert doc["settings"]["values"].get(column if column != "learning_rate" else "lr") != float(
        value
    )


def test_a_run_config_setting_that_is_not_what_the_setting_must_be_is_not_read(tmp_path):
    """Session 37: a run config's settings were read unchecked (columns were checked since
    2026-12-05): lr 0 and beta1 1.2 were taken as the run's. Each is a warning, and not read;
    a group_size of 1 is a run's setting (one completion per prompt), read, and advantage
    degeneracy does not apply to it (it read "100% of groups have no reward spread ... switch
    to advantage='sign'" on a sign run with G = 1, from its logged zero-spread share of 1)."""
    run = tmp_path / "run"
    run.mkdir()
    rng = np.random.default_rng(0)
    reward = rng.binomial(32, 0.4, 60) / 32
    (run / "metrics.jsonl").write_text(
        "".join(
            json.dumps({"step": i + 1, "reward": float(r), "frac_reward_zero_std": 1.0}) + "\n"
            for i, r in enumerate(reward)
        )
    )
    (run / "config.yaml").write_text("grpo:\n  group_size: 1\n  batch_prompts: 32\n"
                                     "optim:\n  lr: 0.0\n  betas: [1.2, 0.99]\n")  # fmt: skip
    res = runner.invoke(app, ["diagnose", str(run), "--json"])
    assert res.exit_code == 0, res.output
    assert "the run's config gives lr 0: no lr is read" in res.output
    assert "the run's config gives beta1 1.2, not in [0, 1)" in res.output
    assert "give --beta1 for the run's value" in res.output
    assert "group_size" not in res.output.split("{")[0]  # no warning about G = 1
    doc = json.loads(res.output[res.output.index("{") :])
    assert doc["settings"]["values"]["group_size"] == 1
    assert doc["settings"]["values"]["lr"] is None and doc["settings"]["values"]["beta1"] is None
    degeneracy = next(m for m in doc["modes"] if m["name"] == "advantage_degeneracy")
    assert not degeneracy["detected"] and degeneracy["evidence"]["not_applicable"] == 1.0
    about = [f["about"] for f in doc["findings"]]
    assert "advantage_degeneracy (does not apply)" in about
    assert not any("advantage_degeneracy" in f["sentence"] for f in doc["findings"]
                   if f["about"] == "not judged")  # fmt: skip
    text = runner.invoke(app, ["diagnose", str(run)]).output
    assert "Groups of one completion (group_size 1)" in text and "switch to" not in text
    watched = runner.invoke(app, ["watch", str(run), "--once"])  # it alerted on degeneracy
    assert watched.exit_code == 0, watched.output
    alerts = [ln for ln in watched.output.splitlines() if ln.startswith("step ")]
    assert alerts and "degenera" not in alerts[-1]


def test_an_lr_column_of_zeros_is_no_lr(tmp_path):
    """Review, 2026-12-05: an lr column of zeros was shown as `lr 0 (log column)` with the
    closed form said to be fitted, and none was."""
    log = tmp_path / "log.csv"
    log.write_text("step,reward,learning_rate\n" + "".join(
        f"{s},{0.2 + 0.01 * s:.3f},0\n" for s in range(1, 61)))  # fmt: skip
    res = runner.invoke(app, ["fit", str(log), "--no-plot", "--json", "--beta1", "0.9"])
    assert res.exit_code == 0, res.output
    assert "learning_rate column is 0 at every step" in res.output
    doc = json.loads(res.output[res.output.index("{") :])
    assert doc["settings"]["metrics"]["closed_form_fitted"] == 0.0
    assert doc["settings"]["values"].get("lr") is None


def test_reports_of_two_log_files_in_one_folder_do_not_overwrite_each_other(tmp_path):
    """Review, 2026-12-05: without --out both went to FOLDER/report/ and the second replaced the
    first without a word."""
    a, b = _curve(tmp_path / "a.csv"), _curve(tmp_path / "b.csv")
    for log in (a, b):
        assert runner.invoke(app, ["report", str(log)]).exit_code == 0
    assert (tmp_path / "report-a" / "report.html").is_file()
    assert (tmp_path / "report-b" / "report.html").is_file()


def test_a_wandb_export_stepped_by_log_calls_says_so(tmp_path):
    """Review, 2026-12-05: with only W&B's `_step` (log calls) the eval rows between training
    rows read as "gaps (missing rows)", the eval values were dropped, and nothing said the step
    axis counted log calls."""
    rows, k = [], 0
    for s in range(1, 61):
        k += 1
        rows.append(f'{k},{0.2 + 0.01 * s:.3f},""')
        if s % 10 == 0:
            k += 1
            rows.append(f'{k},"",{0.5 - 0.01 * s:.3f}')
    log = tmp_path / "export.csv"
    log.write_text('"_step","train/reward","eval/accuracy"\n' + "\n".join(rows) + "\n")
    res = runner.invoke(app, ["diagnose", str(log), "--json"])
    assert res.exit_code == 0, res.output
    warns = json.loads(res.output[res.output.index("{") :])["warnings"]
    assert any("W&B's `_step`" in w for w in warns)
    assert any("rows without a reward between them" in w for w in warns)
    assert any("6 eval value(s)" in w for w in warns)
