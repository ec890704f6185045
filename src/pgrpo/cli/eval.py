"""`pgrpo eval`: accuracy and unbiased pass@k of a model or checkpoint, seeds aggregated with
intervals, and (with --baseline) a paired comparison and the search-compression analysis."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from pgrpo.cli.app import digit_separator
from pgrpo.cli.common import (
    check_model,
    command,
    config_option,
    emit,
    escape,
    fail,
    json_option,
    out_file,
    read_json,
)
from pgrpo.errors import MAX_SEED, UserError

EVAL = "pgrpo.evaluate.runner:EvalConfig"


def _seeds(text: str) -> list[int]:
    """Distinct seeds in [0, MAX_SEED] (a repeated seed is the same run counted twice)."""
    if not text.strip():
        fail("--seeds needs at least one seed", "e.g. --seeds 0")
    try:
        if digit_separator(text):  # int() reads 1_0 as 10, as every number option refuses
            raise ValueError(text)
        seeds = [int(s) for s in text.split(",")]
    except ValueError:
        fail(f"--seeds must be comma-separated integers, got {text!r}", "e.g. --seeds 0,1,2")
    if any(not 0 <= s <= MAX_SEED for s in seeds):
        fail(f"--seeds {text!r}: each seed must be in [0, {MAX_SEED}] (2^32 - 1)",
             "e.g. --seeds 0,1,2")  # fmt: skip
    if len(set(seeds)) < len(seeds):
        fail(f"--seeds {text!r} repeats a seed: the same run would count twice",
             "give distinct seeds, e.g. --seeds 0,1,2")  # fmt: skip
    return seeds


def _task_options(text: str | None) -> dict[str, Any] | None:
    """--task-options as a YAML/JSON mapping (None: the default of EvalConfig.task_options)."""
    if text is None:
        return None
    import yaml

    from pgrpo.train.yamlvalues import parse  # the YAML of `pgrpo train`'s overrides

    try:
        value = parse(text)
    except yaml.YAMLError as exc:
        fail(f"--task-options is not YAML ({str(exc).splitlines()[0]})", "e.g. '{levels: [1, 2]}'")
    if not isinstance(value, dict):
        fail(f"--task-options must be a mapping, got {text!r}", "e.g. '{levels: [1, 2]}'")
    return value


def _read_eval(path: Path, option: str) -> list[Any]:
    """The EvalRuns of an eval JSON, or a UserError naming the option and the file."""
    from pgrpo.evaluate import read_eval

    read_json(path, option)
    fix = "give a file written by `pgrpo eval --out`"
    try:
        return read_eval(path)
    except UserError as exc:  # says what is wrong with the file and the fix itself
        fail(f"{option} {exc.problem}", exc.fix)
    except (KeyError, TypeError, AttributeError) as exc:
        fail(f"{option} {path} is not a complete `pgrpo eval` JSON (bad or missing {exc})", fix)
    except ValueError as exc:  # e.g. counts outside 0 <= c <= n (`checked_counts`)
        text = str(exc) if str(path) in str(exc) else f"{path}: {exc}"
        fail(f"{option} {text}", fix)


def _curve(rec: dict) -> str:
    """pass@k values, each with its interval over problems when the record has one."""
    cis = rec.get("pass_at_k_ci") or {}
    return ", ".join(
        f"{k}:{v:.3f}" + (f" [{cis[k][0]:.2f}, {cis[k][1]:.2f}]" if k in cis else "")
        for k, v in rec["pass_at_k"].items()
    )


def _print(doc: dict, console: Console) -> None:
    table = Table(title="eval (95% intervals over problems: the problem is the unit)")
    for col in ("result", "step", "problems", "accuracy", "95% CI", "pass@k [95% CI]"):
        table.add_column(col, overflow="fold")
    for rec in doc["results"] + doc.get("baseline", []):
        lo, hi = rec["accuracy_ci"]
        table.add_row(
            escape(rec["name"]), str(rec["step"]), str(rec.get("n_problems", "?")),
            f"{rec['accuracy']:.3f}", f"[{lo:.3f}, {hi:.3f}]", _curve(rec),
        )  # fmt: skip
    console.print(table)
    agg = doc["aggregate"]
    ci, seed_ci = agg["accuracy_ci"], agg.get("seed_ci")
    clipped = " (t interval clipped to [0, 1])" if agg.get("seed_ci_clipped") else ""
    console.print(
        f"mean accuracy over {agg['seeds']} seed(s): {agg['accuracy_mean']:.3f} "
        f"[{ci[0]:.3f}, {ci[1]:.3f}] over problems; "
        + (
            f"seed-to-seed [{seed_ci[0]:.3f}, {seed_ci[1]:.3f}]{clipped}"
            if seed_ci
            else agg["note"]
        )
    )
    console.print(f"pass@k over seeds: {_curve(agg)}")
    if "comparison" in doc:
        _print_comparison(doc["comparison"], doc["search_compression"], console)


def _print_comparison(cmp: dict, sc: dict, console: Console) -> None:
    from pgrpo.diagnose.nullmodel import fmt_p  # how every p of the CLI is printed

    shared = cmp["problems"]
    sizes = (cmp.get("problems_a"), cmp.get("problems_b"))
    of = (
        ""
        if sizes[0] == sizes[1] == shared or None in sizes
        else f" (of {sizes[0]} and {sizes[1]})"
    )
    if "welch_p" not in cmp:
        welch = ""
    elif cmp["welch_p"] is None:
        welch = "; Welch: undefined (no spread between seeds)"
    else:
        welch = f"; Welch {fmt_p(cmp['welch_p'])}"
    if cmp["paired_p"] is None:  # no spread in the per-problem differences
        paired = (
            "paired t and its interval undefined (every shared problem changed by the same "
            "amount: the differences have no spread)"
        )
    else:
        lo, hi = cmp["paired_ci"]
        clipped = " (t interval clipped to [-1, 1])" if cmp.get("paired_ci_clipped") else ""
        paired = f"paired t 95% CI [{lo:+.3f}, {hi:+.3f}]{clipped} {fmt_p(cmp['paired_p'])}"
        if cmp.get("paired_dof", math.inf) <= 3:  # the t quantile at 1-3 dof: 12.7 .. 3.2
            paired += (f" (only {shared} problems: at {cmp['paired_dof']:g} degrees of freedom "
                       "the interval is wide, and no small gain can show)")  # fmt: skip
    console.print(
        f"vs baseline on {shared} shared problems{of}, paired by "
        f"{cmp.get('paired_by', 'problem id')}: diff {cmp['diff']:+.3f}, {paired}{welch}"
    )
    verdict = sc["verdict"] + (f" ({sc['verdict_note']})" if sc.get("verdict_note") else "")
    gains = f"pass@1 gain {sc['gain_pass1']:+.3f}"
    if sc["k_max"] > 1:
        gains += f", pass@{sc['k_max']} gain {sc['gain_pass_kmax']:+.3f}"
    console.print(f"{gains} on the shared problems: {escape(verdict)}")


SAMPLING_OPTIONS = (
    "model", "task", "task_options", "split", "problems", "problem_seed", "samples", "seeds",
    "temperature", "max_new_tokens", "tiny_warmup_steps",
)  # fmt: skip
"""Parameters that only sampling reads: --from refuses them (they would be silently ignored)."""


def _refuse_sampling_options(ctx: typer.Context) -> None:
    """UserError when a sampling option was given (not left at its default) with --from."""
    sources = {name: ctx.get_parameter_source(name) for name in SAMPLING_OPTIONS}
    given = [
        "--" + name.replace("_", "-")
        for name, source in sources.items()
        if source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")
    ]
    if given:
        fail(
            f"--from takes its results from the file; {', '.join(given)} only apply to sampling",
            "drop them, or drop --from to evaluate again",
        )


def _check_out(out: Path) -> None:
    """--out can be written: its folder, and the file itself (made and removed now)."""
    from pgrpo.evaluate.runner import check_writable

    out_file(out)
    try:
        check_writable(out)
    except OSError as exc:
        fail(
            f"--out {out}: cannot write there ({exc.strerror or exc})", "give a writable file path"
        )


def _warn(text: str) -> None:
    typer.echo(f"warning: {text}", err=True)


@command("eval")
def eval_cmd(
    ctx: typer.Context,
    model: str = config_option(EVAL, "model"),
    task: str = config_option(EVAL, "task"),
    task_options: str | None = config_option(EVAL, "task_options", "--task-options"),
    split: str = config_option(EVAL, "split"),
    problems: int = config_option(EVAL, "problems", min=0),
    problem_seed: int = config_option(EVAL, "problem_seed", min=0, max=MAX_SEED),
    samples: int = config_option(EVAL, "samples", min=1),
    seeds: str = typer.Option("0", help="Comma-separated sampling seeds, e.g. 0,1,2."),
    temperature: float = config_option(EVAL, "temperature"),
    max_new_tokens: int = config_option(EVAL, "max_new_tokens", min=1),
    tiny_warmup_steps: int = config_option(EVAL, "tiny_warmup_steps", min=0),
    from_file: Path | None = typer.Option(
        None, "--from", help="Skip sampling: take the results from this eval JSON."
    ),
    baseline: Path | None = typer.Option(
        None, help="Eval JSON of a baseline (e.g. the base model) for the paired comparison."
    ),
    out: Path | None = typer.Option(
        None, help="Write the eval JSON here (diagnose/report read it)."
    ),
    as_json: bool = json_option("the eval document (what --out writes)"),
) -> None:
    """Evaluate; several seeds give an interval over seeds; --baseline adds Welch's t on seed
    means, a paired t over the problems both evaluated (matched by problem id), and pass@k
    curves base vs trained. A baseline evaluated on other problems, task options or decoding
    settings is refused before anything is sampled or written."""
    from pgrpo.evaluate import eval_document, write_eval
    from pgrpo.evaluate.pairing import unchecked_decoding
    from pgrpo.evaluate.runner import failure_warning

    base = _read_eval(baseline, "--baseline") if baseline is not None else None
    if from_file is not None:
        _refuse_sampling_options(ctx)
        runs = _read_eval(from_file, "--from")
        if out is not None:
            _check_out(out)
        for run in runs:
            warning = failure_warning(run)
            if warning is not None:
                _warn(warning)
    else:
        cfg = _config(model, task, task_options, split, problems, problem_seed, samples,
                      temperature, max_new_tokens, tiny_warmup_steps)  # fmt: skip
        runs = _sample(cfg, _seeds(seeds), base, out)
    if from_file is None and base is not None and out is not None:
        write_eval(eval_document(runs), out)  # what was sampled is kept whatever the comparison
    doc = eval_document(runs, base)  # pairs first (UserError): --out is not written before
    files = (("--from", from_file, runs), ("--baseline", baseline, base))
    unchecked = [unchecked_decoding(rs, f"{opt} {path}") for opt, path, rs in files if path]
    for warning in [*unchecked, *doc.get("comparison", {}).get("warnings", [])]:
        if warning is not None:  # said after the checks: bad input stays one line
            _warn(warning)
    if out is not None:
        write_eval(doc, out)
    emit(doc, as_json, lambda console: _print(doc, console))


def _config(
    model: str, task: str, task_options: str | None, split: str, problems: int,
    problem_seed: int, samples: int, temperature: float, max_new_tokens: int,
    tiny_warmup_steps: int,
) -> Any:  # fmt: skip
    """The EvalConfig of the command's options (checked: task, model, options)."""
    from pgrpo.evaluate import EvalConfig
    from pgrpo.tasks import TASKS

    TASKS.get(task)
    check_model(model)
    return EvalConfig(
        model=model,
        task=task,
        task_options=_task_options(task_options),
        split=split,
        problems=problems,
        problem_seed=problem_seed,
        samples=samples,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        tiny_warmup_steps=tiny_warmup_steps,
    )


def _sample(cfg: Any, seeds: list[int], base: list[Any] | None, out: Path | None) -> list[Any]:
    """Evaluate at each seed, after everything that can fail without the model has been
    checked: the split and its problems (`plan_eval`), the baseline against them (same task,
    split, options and decoding, >= 2 shared problems), and --out (bad input writes nothing and
    costs no sampling)."""
    from pgrpo.evaluate.pairing import pair_problems
    from pgrpo.evaluate.runner import evaluate, plan_eval, planned_run

    plan = plan_eval(cfg)
    if base is not None:
        pair_problems([planned_run(cfg, plan)], base)
    if out is not None:
        _check_out(out)
    said: set[str] = set()  # said once, not once per seed

    def on_note(text: str) -> None:
        if text not in said:
            said.add(text)
            typer.echo(text if text.startswith("warning: ") else f"note: {text}", err=True)

    return [evaluate(cfg, seed=s, on_note=on_note, plan=plan) for s in seeds]
