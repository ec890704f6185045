"""Loading benchmark examples from local JSONL files or the Hugging Face Hub, with clear errors.

`load_examples(task, data, split_or_path, ...)` resolves, in order:
1. `split_or_path` is a file path (exists, ends in .jsonl/.json, or contains a path separator):
   read that file;
2. otherwise it is a split name, and the task's `data` option says where splits live:
   - a directory: the first of `file_names(split)` that exists in it (e.g. `test.jsonl`);
   - a file: that file, whatever the split;
   - anything else: a Hugging Face dataset name, loaded with `datasets.load_dataset`
     (needs the internet or a local HF cache; offline, the error says to pass a local path).
A missing file names the path and the fix; a malformed line names the file and line number.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def _looks_like_path(s: str) -> bool:
    return (
        s.endswith((".jsonl", ".json"))
        or s.startswith((".", "/", "~"))
        or s.count("/") > 1
        or os.sep != "/"
        and os.sep in s
    )


def read_jsonl(path: str | Path, *, required: Sequence[str] = (), task: str = "") -> list[dict]:
    """One dict per non-empty line. Errors name the file, the line number and the fix."""
    path = Path(path).expanduser()
    what = f"{task} data" if task else "data"
    if not path.is_file():
        raise FileNotFoundError(
            f"{what} file not found: {path}. Pass an existing JSONL file (one JSON object per "
            f"line) or a folder holding <split>.jsonl"
        )
    out = []
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(
                    f"{path}:{lineno}: malformed JSON ({exc.msg} at column {exc.colno}); "
                    "each line must be one JSON object: fix or remove this line"
                ) from None
            if not isinstance(obj, dict):
                raise ValueError(
                    f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}"
                )
            missing = [k for k in required if k not in obj]
            if missing:
                raise ValueError(
                    f"{path}:{lineno}: missing field(s) {', '.join(missing)}; each {what} line "
                    f"needs {', '.join(required)}"
                )
            out.append(obj)
    if not out:
        raise ValueError(f"{path} holds no examples (empty file)")
    return out


def _from_hub(
    task: str, name: str, config: str | None, split: str, required: Sequence[str]
) -> list[dict]:
    try:
        import datasets

        ds = datasets.load_dataset(name, config, split=split)
    except Exception as exc:  # bad input (no network, no such dataset): one line, exit 2
        from pgrpo.errors import UserError

        raise UserError(
            f"could not load {task} split {split!r} from the Hugging Face dataset {name!r}"
            f"{f' (config {config!r})' if config else ''} ({type(exc).__name__}: "
            f"{str(exc)[:120]}) and no local path {name!r} exists",
            f"Offline? Pass a local path: task.options.data=path/to/{split}.jsonl (or a folder "
            f"holding it) on the pgrpo command line, get_task({task!r}, data=...) in Python",
        ) from exc
    rows = [dict(row) for row in ds]
    for i, row in enumerate(rows):
        missing = [k for k in required if k not in row]
        if missing:
            raise ValueError(f"{name} row {i} lacks field(s) {', '.join(missing)}")
    return rows


def load_examples(
    task: str,
    data: str | Path | None,
    split_or_path: str,
    *,
    file_names: Callable[[str], Sequence[str]],
    hub: tuple[str, str | None],
    required: Sequence[str],
) -> list[dict[str, Any]]:
    """Examples of `task` for a split name or a file path (see the module docstring).

    `data`: the task's data option (folder, file, HF name, or None for `hub`'s default name).
    `file_names(split)`: file names tried inside a folder. `hub`: (default HF name, config).
    """
    target = str(split_or_path)
    path = Path(target).expanduser()
    if path.is_file() or (not path.is_dir() and _looks_like_path(target)):
        return read_jsonl(path, required=required, task=task)
    if path.is_dir():
        raise ValueError(
            f"{target} is a folder: pass a split name with data={target!r} (e.g. "
            f"get_task({task!r}, data={target!r}).load('test')) or the path of a .jsonl file"
        )
    split = target
    source = hub[0] if data is None else str(data)
    src_path = Path(source).expanduser()
    if src_path.is_dir():
        tried = [src_path / name for name in file_names(split)]
        for candidate in tried:
            if candidate.is_file():
                return read_jsonl(candidate, required=required, task=task)
        raise FileNotFoundError(
            f"no {task} file for split {split!r} in {src_path}: tried "
            f"{', '.join(str(p) for p in tried)}. Put the split there or pass the file path"
        )
    if src_path.is_file():
        return read_jsonl(src_path, required=required, task=task)
    if _looks_like_path(source):
        return read_jsonl(src_path, required=required, task=task)  # raises: names the path
    return _from_hub(
        task, source, hub[1] if data is None or source == hub[0] else None, split, required
    )
