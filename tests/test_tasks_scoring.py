"""Safe reward scoring (exceptions, hangs, NaN, crashes; scoring continues) and user tasks."""

from __future__ import annotations

import os
import threading
import time

import pytest

from pgrpo.tasks import (
    TASKS,
    FunctionTask,
    get_task,
    register_task,
    score_completions,
)

# Module-level functions so the tasks pickle into the reward worker process.


def _prompt(example):
    return f"Say {example['target']}."


def exact_reward(completion, example):
    return float(completion.strip() == example["target"])


def picky_reward(completion, example):
    """Raises on 'boom', hangs on 'hang', dies on 'crash', returns NaN on 'nan'."""
    if completion == "boom":
        raise RuntimeError("user reward exploded")
    if completion == "hang":
        while True:  # pure-Python infinite loop
            pass
    if completion == "sleep":
        time.sleep(60)
    if completion == "crash":
        os._exit(3)
    if completion == "nan":
        return float("nan")
    if completion == "inf":
        return float("inf")
    if completion == "text":
        return "one"
    if completion == "swallow_all":
        while True:  # catches every exception a timer could raise, forever
            try:
                time.sleep(0.01)
            except BaseException:
                pass
    if completion == "swallow_once":
        try:  # swallows the first timeout and returns a reward late: still a timeout
            while True:
                pass
        except BaseException:
            return 1.0
    if completion == "swallow":
        try:  # a reward that swallows exceptions must still time out
            while True:
                pass
        except Exception:
            return 1.0
    return exact_reward(completion, example)


EXAMPLES = [{"target": "yes"}]


def _task(fast: bool) -> FunctionTask:
    return FunctionTask(
        "picky", examples=EXAMPLES, prompt=_prompt, reward=picky_reward, reward_is_fast=fast
    )


@pytest.mark.parametrize("isolation", ["process", "fork", "signal"])
def test_raising_hanging_and_nan_rewards_score_zero_and_scoring_continues(isolation):
    completions = [
        *("yes", "boom", "no", "hang", "yes", "nan", "inf", "text", "swallow", "yes"),
        "swallow_once",
    ]
    t0 = time.perf_counter()
    res = score_completions(
        _task(fast=False),
        completions,
        EXAMPLES * len(completions),
        timeout_s=1.0,
        isolation=isolation,
    )
    assert res.isolation == isolation
    assert res.rewards == [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    assert res.timeouts == 3  # "hang", "swallow" and "swallow_once"
    assert res.errors == 4  # boom, nan, inf, text
    joined = " | ".join(res.error_messages)
    assert "completion 1: error: RuntimeError: user reward exploded" in joined
    assert "completion 3: timeout after 1 s" in joined
    assert "not finite" in joined
    assert len(res.error_messages) == 5  # capped
    assert res.metrics["reward_errors"] == 4.0 and res.metrics["reward_timeouts"] == 3.0
    assert time.perf_counter() - t0 < 30


def test_worker_crash_and_sleep_are_counted_and_the_worker_restarts():
    completions = ["crash", "yes", "sleep", "yes"]
    res = score_completions(
        _task(fast=False), completions, EXAMPLES * 4, timeout_s=1.0, isolation="process"
    )
    assert res.rewards == [0.0, 1.0, 0.0, 1.0]
    assert res.errors == 1 and res.timeouts == 1
    assert "crashed" in res.error_messages[0]
    # the next batch reuses a healthy worker
    again = score_completions(_task(fast=False), ["yes"], EXAMPLES, isolation="process")
    assert again.rewards == [1.0] and again.errors == again.timeouts == 0


def _lambda_task() -> FunctionTask:
    return FunctionTask(
        "lambda_task",
        examples=EXAMPLES,
        prompt=lambda e: "x",
        reward=lambda c, e: picky_reward(c, e),
    )


@pytest.mark.timeout(120, method="thread")  # the old in-process timer hung here for good
@pytest.mark.parametrize("kind", ["fast", "slow", "unpicklable"])
def test_every_auto_path_stops_a_reward_that_swallows_base_exception(kind):
    task = {"fast": _task(True), "slow": _task(False), "unpicklable": _lambda_task()}[kind]
    completions = ["yes", "swallow_all", "yes", "hang", "sleep", "yes"]
    t0 = time.perf_counter()
    res = score_completions(task, completions, EXAMPLES * 6, timeout_s=0.5)
    assert res.isolation == ("process" if kind == "slow" else "fork")
    assert res.rewards == [1.0, 0.0, 1.0, 0.0, 0.0, 1.0]
    assert res.timeouts == 3 and res.errors == 0
    assert time.perf_counter() - t0 < 20


def test_fast_task_runs_in_one_forked_child_per_batch(monkeypatch):
    """What keeps a fast task cheap (its speed is measured by benchmarks, not here): the whole
    batch is scored by one forked child, not a process per completion."""
    import multiprocessing.context as mpc

    starts: list[int] = []
    start = mpc.ForkProcess.start

    def counting(self):  # noqa: ANN001
        starts.append(1)
        return start(self)

    monkeypatch.setattr(mpc.ForkProcess, "start", counting)
    task = get_task("arithmetic", n=50, levels=[1])
    examples = task.load("train")
    completions = [str(e["answer"]) for e in examples] * 40
    res = score_completions(task, completions, examples * 40)
    assert res.isolation == "fork"
    assert res.rewards == [1.0] * 2000 and res.errors == 0
    assert len(starts) == 1


def test_signal_path_restores_an_outer_timer():
    import signal

    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *a: fired.append(True))
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.5)
        res = score_completions(
            _task(fast=True), ["hang", "yes"], EXAMPLES * 2, timeout_s=0.3, isolation="signal"
        )
        assert res.isolation == "signal" and res.timeouts == 1
        remaining = signal.getitimer(signal.ITIMER_REAL)[0]
        assert 0.5 < remaining < 1.3  # the outer timer is armed again with what it had left
        time.sleep(remaining + 0.3)
        assert fired == [True]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_fast_task_off_main_thread_still_times_out():
    out = {}

    def run():
        out["res"] = score_completions(
            _task(fast=True), ["yes", "hang", "yes"], EXAMPLES * 3, timeout_s=1.0
        )

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    res = out["res"]
    assert res.isolation == "fork"
    assert res.rewards == [1.0, 0.0, 1.0] and res.timeouts == 1


def test_unpicklable_task_runs_in_a_forked_child_with_a_timeout():
    task = _lambda_task()
    res = score_completions(task, ["hang", "yes"], EXAMPLES * 2, timeout_s=0.5)
    assert res.isolation == "fork"
    assert res.rewards == [0.0, 1.0] and res.timeouts == 1
    with pytest.raises(ValueError, match="picklable"):
        score_completions(task, ["yes"], EXAMPLES, isolation="process")


def test_caller_errors_raise():
    with pytest.raises(ValueError, match="one example per completion"):
        score_completions(_task(True), ["a", "b"], EXAMPLES)
    with pytest.raises(ValueError, match="unknown isolation"):
        score_completions(_task(True), ["a"], EXAMPLES, isolation="thread")
    with pytest.raises(ValueError, match="timeout_s"):
        score_completions(_task(True), ["a"], EXAMPLES, timeout_s=0)
    assert score_completions(_task(False), [], []).rewards == []


def test_register_task_from_functions_and_from_a_factory():
    register_task(
        "test_echo",
        examples={"train": [{"target": "a"}], "test": [{"target": "b"}]},
        prompt=_prompt,
        reward=exact_reward,
    )
    task = get_task("test_echo")
    assert task.load("test") == [{"target": "b"}]
    assert task.prompt({"target": "b"}) == "Say b."
    res = score_completions(task, ["b", "c"], task.load("test") * 2)
    assert res.rewards == [1.0, 0.0] and res.isolation == "process"
    assert task.metrics(["b", "c"], task.load("test") * 2, res.rewards) == {"reward_mean": 0.5}
    with pytest.raises(KeyError, match="valid splits: train, test"):
        task.load("validation")
    with pytest.raises(TypeError, match="takes no options"):
        get_task("test_echo", n=3)
    with pytest.raises(ValueError, match="already registered"):
        register_task("test_echo", examples=[], prompt=_prompt, reward=exact_reward)
    with pytest.raises(TypeError, match="needs factory"):
        register_task("test_incomplete", prompt=_prompt)

    def factory(**options):
        return FunctionTask(
            "test_factory",
            examples=lambda split: [{"target": split}] * options.get("n", 1),
            prompt=_prompt,
            reward=exact_reward,
        )

    register_task("test_factory", factory)
    assert get_task("test_factory", n=3).load("x") == [{"target": "x"}] * 3
    assert "test_factory" in TASKS.names()


def test_function_task_rejects_bad_loader_output():
    task = FunctionTask(
        "bad", examples=lambda split: {"target": 1}, prompt=_prompt, reward=exact_reward
    )
    with pytest.raises(TypeError, match="list of example dicts"):
        task.load("train")
    task = FunctionTask(
        "bad2", examples=[{"target": 1}, "oops"], prompt=_prompt, reward=exact_reward
    )
    with pytest.raises(TypeError, match="example 1 is a str"):
        task.load("train")


def test_docs_custom_task_example_runs():
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "docs" / "examples" / "custom_task.py"
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert "rewards [1.0, 0.0] errors 0 timeouts 1" in out
    assert "isolation process" in out


# Before the fix, multiprocessing's exit handler ran before pgrpo's, SIGTERMed the worker (which
# ignores SIGTERM) and joined it for ever: every such script printed its result, then hung.
EXIT_SCRIPT = """
import os
from pgrpo.tasks import get_task, score_completions
from pgrpo.tasks.scoring_worker import WORKER
task = get_task("arithmetic", n=4, levels=[1])
examples = task.load("test")[:2]
result = score_completions(task, ["1", "2"], examples, isolation="process")
print("pid", WORKER.proc.pid, result.isolation, flush=True)
"""


def _exits_in_time(args, **kwargs):
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=60, check=True, **kwargs
    ).stdout


def test_a_script_that_scored_in_the_worker_exits_and_the_worker_dies():
    out = _exits_in_time(["-c", EXIT_SCRIPT])  # no `import torch` first (that hid the bug)
    assert " process" in out
    pid = int(out.split()[1])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    pytest.fail(f"reward worker {pid} outlived its parent")


def test_docs_tasks_md_custom_task_snippet_runs_and_exits(tmp_path):
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "tasks.md").read_text()
    section = doc.split("## Your own task", 1)[1]
    snippet = section.split("```python\n", 1)[1].split("```", 1)[0]
    script = tmp_path / "letter.py"
    script.write_text(snippet)
    assert _exits_in_time([str(script)], cwd=tmp_path).strip() == "[1.0, 0.0]"
