"""Log readers, one per framework, behind the `LOG_READERS` registry (auto-detected in order).

- pgrpo:  RUN_DIR/metrics.jsonl (one JSON object per step) + RUN_DIR/config.yaml
- trl:    `pgrpo.logs.trl_state` (trainer_state.json, or an output dir holding it)
- verl, verl_console: `pgrpo.logs.verl` (the file logger's JSONL, the console output)
- wandb:  a W&B history CSV export (`_step`, `train/reward`, ...)
- csv:    any CSV/TSV with a header; name the columns with reward_key= / step_key= if needed
  (the two CSV readers: `pgrpo.logs.csvlog`)

Every reader takes `live=True` for a log still being written (`pgrpo watch`): the line-based
ones (JSONL, CSV, verl console) leave a last line without its newline for the next read, and
`assemble` keeps only the newest run in the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import yaml

try:
    import orjson as _orjson
except ImportError:  # optional accelerator; the json module reads the same logs
    _orjson = None

from pgrpo._memory import release_free_heap
from pgrpo._registry import Registry
from pgrpo.logs.base import (
    LogFormatError,
    LogNotReadyError,
    LogReader,
    RewardLog,
    assemble,
    wanted_keys,
)
from pgrpo.logs.columns import ColumnStore
from pgrpo.logs.runconfig import _find_mapping, find_key, hyperparameters_from_config
from pgrpo.logs.typed import TypedChunks

LOG_READERS: Registry[LogReader] = Registry("log reader")


def cannot_read(path: Path, exc: OSError) -> LogFormatError:
    """The error for a file that could not be opened: one that is gone (not written yet, or
    removed by its writer: old checkpoints) may be there at the next read."""
    kind = LogNotReadyError if isinstance(exc, FileNotFoundError) else LogFormatError
    return kind(f"{path}: cannot read ({exc.strerror or exc})")


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig", errors="replace")
    except OSError as exc:
        raise cannot_read(path, exc) from None


def _ends_line(line: str | bytes) -> bool:
    return line[-1:] in ("\n", "\r", b"\n", b"\r")


def complete_lines(lines: Iterable[Any]) -> Iterator[Any]:
    """The lines (str or bytes) that end with a newline: in a log still being written, a last
    line without one may be cut mid-value (`4,0.5` of `4,0.55`) and is read at the next poll."""
    return filter(_ends_line, lines)


def _loads(line: bytes) -> Any:
    """One JSON value; orjson when installed (3-4x faster), else, or where orjson refuses what
    the json module accepts (NaN/Infinity literals, huge ints, invalid UTF-8), the json module."""
    if _orjson is not None:
        try:
            return _orjson.loads(line)
        except _orjson.JSONDecodeError:
            pass
    return json.loads(line.decode("utf-8", errors="replace"))


def iter_jsonl_chunks(
    path: Path, bad: list[int], chunk_bytes: int | None = None, live: bool = False
) -> Iterator[list[dict[str, Any]]]:
    """The objects of a JSONL file, a few MiB of lines at a time (the file is never held whole).
    Malformed / non-object lines are skipped; `bad` collects their line numbers. live: see
    `complete_lines`."""
    for first, lines in _line_chunks(path, chunk_bytes, live):
        yield _objects(lines, first, bad)


CHUNK_BYTES = 1 << 22
"""About how many bytes of lines a JSONL reader parses at a time."""
UTF8_BOM = b"\xef\xbb\xbf"
"""The byte-order mark Excel and Windows editors put first; every reader skips it (a CSV's first
header read '\\ufeffstep', so the step column was lost and the record order used instead)."""


def _line_chunks(
    path: Path, chunk_bytes: int | None = None, live: bool = False
) -> Iterator[tuple[int, list[bytes]]]:
    """(number of the first line, lines) of a file, ~CHUNK_BYTES at a time; live: without a
    last line that has no newline yet (`complete_lines`)."""
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise cannot_read(path, exc) from None
    first = 1
    with fh:
        while lines := fh.readlines(chunk_bytes):
            if first == 1 and lines[0].startswith(UTF8_BOM):  # Windows editors write one
                lines[0] = lines[0][len(UTF8_BOM) :]
            if live and not _ends_line(lines[-1]):  # (`complete_lines`; readlines gives whole
                lines = lines[:-1]  # lines, so only the file's last can lack its newline)
            if lines:
                yield first, lines
            first += len(lines)


def _objects(lines: list[bytes], first: int, bad: list[int]) -> list[dict[str, Any]]:
    """The JSON objects of a chunk of lines (numbered from `first`; bad ones skipped)."""
    try:  # the common case: every line one JSON object
        objs = list(map(_orjson.loads, lines)) if _orjson is not None else None
    except _orjson.JSONDecodeError:
        objs = None
    if objs is None or not all(type(o) is dict for o in objs):
        objs = list(_parse_lines(lines, first, bad))
    return objs


def _parse_lines(lines: list[bytes], first: int, bad: list[int]) -> Iterator[dict[str, Any]]:
    for i, line in enumerate(lines, start=first):
        if not line.strip():
            continue
        try:
            obj = _loads(line)
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict):
            yield obj
        else:
            bad.append(i)


def iter_jsonl(path: Path, bad: list[int]) -> Iterator[dict[str, Any]]:
    """The objects of a JSONL file one by one (see `iter_jsonl_chunks`)."""
    for chunk in iter_jsonl_chunks(path, bad):
        yield from chunk


def _bad_lines(bad: list[int]) -> list[str]:
    return [f"{len(bad)} malformed line(s) skipped (first at line {bad[0]})"] if bad else []


def check_some_objects(n: int, bad: list[int], path: Path, fmt: str) -> None:
    """Complete lines but not one JSON object among them: not a JSONL log (or not this one),
    which no later line changes (a file with no complete line yet is `assemble`'s not-ready)."""
    if n == 0 and bad:
        raise LogFormatError(
            f"{path}: none of its {len(bad)} line(s) is a JSON object, so it is not a {fmt} "
            "JSONL log",
            f"give the log file itself, or --format (one of {', '.join(LOG_READERS.names())})",
        )


def read_jsonl(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Objects of a JSONL file; malformed / non-object lines are skipped and reported."""
    bad: list[int] = []
    records = list(iter_jsonl(path, bad))
    return records, _bad_lines(bad)


def _first_object(path: Path) -> dict[str, Any] | None:
    try:
        with path.open(encoding="utf-8-sig", errors="replace") as fh:
            for _, line in zip(range(50), fh, strict=False):
                try:
                    obj = json.loads(line)
                except (json.JSONDecodeError, RecursionError):
                    continue
                if isinstance(obj, dict):
                    return obj
    except OSError:
        return None
    return None


def _load_config(path: Path) -> Any:
    """A YAML/JSON config, or None when absent or unreadable (never fatal)."""
    if not path.is_file():
        return None
    try:
        text = _read_text(path)
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError, LogFormatError):
        return None


def _config_optimizer(cfg: Any) -> str | None:
    """The optimizer a config names (the dynamics model picks its reduction from it): pgrpo
    `optim.name`, TRL `optim` (e.g. adamw_torch), verl `optim.optimizer`, or an `optimizer` key."""
    optim = _find_mapping(cfg, "optim")
    name = optim.get("name") if optim is not None else None
    name = name or find_key(cfg, ("optim", "optimizer"))
    return name if isinstance(name, str) else None


_MOVED: ContextVar[tuple[Path, Path] | None] = ContextVar("pgrpo_log_moved", default=None)
"""(temporary folder, original folder) while `_read_gzip` reads a log written out elsewhere."""


def _beside_original(c: Path) -> Path:
    """A config path a reader built beside the log it read, moved to the same place beside the
    original file where the log is a decompressed copy (`_read_gzip`): the run's config.yaml /
    training_args.json are beside the .gz, not in the temporary folder (review 41 final)."""
    moved = _MOVED.get()
    if moved is None:
        return c
    tmp, orig = moved
    for up, base in enumerate((tmp, tmp.parent, tmp.parent.parent)):
        try:
            rel = c.relative_to(base)
        except ValueError:
            continue
        for _ in range(up):
            orig = orig.parent
        return orig / rel
    return c


def _config_hyper(candidates: list[Path], warns: list[str]) -> dict[str, Any]:
    for c in map(_beside_original, candidates):
        cfg = _load_config(c)
        if cfg is not None:
            hyper: dict[str, Any] = hyperparameters_from_config(cfg, warns)
            if hyper and (name := _config_optimizer(cfg)) is not None:
                hyper["optimizer"] = name
            if hyper:
                return hyper
        elif c.is_file():
            warns.append(f"config {c.name} could not be parsed; hyperparameters from columns only")
    return {}


# --- pgrpo ----------------------------------------------------------------------------------------


def _pgrpo_file(path: Path) -> Path:
    return path / "metrics.jsonl" if path.is_dir() else path


def detect_pgrpo(path: Path) -> bool:
    f = _pgrpo_file(path)
    if path.is_dir():
        return f.is_file()
    if f.suffix != ".jsonl":
        return False
    obj = _first_object(f)  # any JSONL of flat records (a first record without a reward too)
    return obj is not None and "data" not in obj


def _keep(options: dict[str, Any]) -> Any:
    """The key filter of a streamed reader asked for `columns` (see `assemble`)."""
    return wanted_keys(options.get("columns"), options.get("reward_key"), options.get("step_key"))


def _every_key(key: str) -> bool:
    return True


def read_pgrpo(path: Path, **options: Any) -> RewardLog:
    f = _pgrpo_file(path)
    bad: list[int] = []
    keep = _keep(options)
    records = ColumnStore(keep)
    typed = TypedChunks(records, keep or _every_key)  # msgspec's typed decode, where it fits
    for first, lines in _line_chunks(f, live=options.get("live", False)):
        if not typed.add(lines):
            chunk = _objects(lines, first, bad)
            records.add(chunk)
            typed.learn(chunk)
    check_some_objects(records.n, bad, f, "pgrpo")
    warns = _bad_lines(bad)
    hyper = _config_hyper([f.parent / "config.yaml"], warns)
    return assemble(
        records, fmt="pgrpo", source=str(f), warnings=warns, hyperparameters=hyper, **options
    )


LOG_READERS.add(
    "pgrpo",
    LogReader("pgrpo", detect_pgrpo, read_pgrpo, "pgrpo RUN_DIR/metrics.jsonl (+ config.yaml)"),
)  # the CSV readers (wandb, csv): `pgrpo.logs.csvlog`


RELEASE_ROWS = 20_000
"""A log of at least this many rows hands the heap's free pages back once read (`_released`)."""


def _released(log: RewardLog) -> RewardLog:
    """The log, after `release_free_heap` where it was long enough for its parse to leave
    tens of MB of freed pages behind (a 200,000-step log: ~70 MB; a short log, read again and
    again by `pgrpo watch`, skips the call)."""
    if len(log) >= RELEASE_ROWS:
        release_free_heap()
    return log


def read_log(path: str | Path, format: str | None = None, **options: Any) -> RewardLog:
    """Read a training log into a RewardLog, auto-detecting the format unless `format` is given.

    options: reward_key= / step_key= (column names, for logs whose names are not standard);
    columns= (canonical column names to keep, e.g. `FIT_COLUMNS`; None: all; the streamed JSONL
    readers then convert only those keys: less time and memory on a long log); live=True (a log
    still being written: see the module docstring).
    Raises LogFormatError (a ValueError) naming the file, the problem and the fix; its subclass
    LogNotReadyError where the file may yet become readable (see there).
    """
    p = Path(path)
    if not p.exists():
        raise LogNotReadyError(f"{p}: no such file or directory")
    unknown = set(options) - {"reward_key", "step_key", "columns", "live"}
    if unknown:
        raise TypeError(
            f"unknown read_log option(s) {sorted(unknown)}; valid: reward_key, step_key, "
            "columns, live"
        )
    if not p.is_file() and not p.is_dir():  # a pipe: `<(cat run.csv)`, /dev/stdin
        raise LogFormatError(
            f"{p}: not a regular file but a stream (a pipe or a process substitution such as "
            "<(cat run.csv)), which the readers cannot read twice",
            "save it to a file first (cat ... > run.csv) and give that file; a .gz log is read "
            "as it is",
        )
    head = _head(p) if p.is_file() else None
    if head is not None and head.startswith(GZIP_MAGIC):
        return _read_gzip(p, format, options)
    if head is not None and not head.strip():
        raise LogNotReadyError(f"{p}: empty file", "point at a log with at least one logged step")
    if head is not None and head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise LogFormatError(
            f"{p}: UTF-16 text (Excel's 'Unicode text'), which no reader decodes",
            "save it as UTF-8 (Excel: 'CSV UTF-8') and give that file",
        )
    if format is not None:
        try:
            return _released(LOG_READERS.get(format).read(p, **options))
        except LogFormatError as exc:  # nothing this format reads: is it another's?
            found = None if options.get("live") else _detected(p)
            if found is None or found == format:
                raise
            problem = exc.problem
            if isinstance(exc, LogNotReadyError):  # "no records ...; is the file empty?"
                problem = (f"{p}: no usable {LOG_READERS.get(format).description} records in "
                           f"it (--format {format})")  # fmt: skip
            raise LogFormatError(problem, f"it reads as {found}: give --format {found}, or "
                                 "leave --format out to detect the format") from exc  # fmt: skip
    if (name := _detected(p)) is not None:
        return _released(LOG_READERS.get(name).read(p, **options))
    if p.is_dir():  # a run folder made before its log
        raise LogNotReadyError(*_no_log_in_folder(p))
    if head is not None and b"\x00" in head:
        raise LogFormatError(
            f"{p}: binary data (NUL bytes) in no format pgrpo reads",
            "give the JSONL/JSON/CSV log the trainer wrote",
        )
    # not final: a console log's start-up output, or a first JSON line still being written
    raise LogNotReadyError(
        f"{p}: unrecognised log format (a run dir with metrics.jsonl, trainer_state.json, verl "
        "JSONL or console log, TRL console output, W&B CSV / JSON export, TensorBoard events, "
        "or any CSV / JSONL)",
        f"pass --format (format= in Python) one of {', '.join(LOG_READERS.names())}",
    )


def _detected(path: Path) -> str | None:
    """The name of the first reader (in `_ORDER`, then the rest) that detects `path`."""
    for name in (*_ORDER, *(n for n in LOG_READERS.names() if n not in _ORDER)):
        if LOG_READERS.get(name).detect(path):
            return name
    return None


GZIP_MAGIC = b"\x1f\x8b"


def _read_gzip(path: Path, format: str | None, options: dict[str, Any]) -> RewardLog:
    """A gzip-compressed log (run.csv.gz, metrics.jsonl.gz), read as the file it holds: written
    out under its own name (run.csv) in a temporary folder, where the readers detect it by name
    as they do the uncompressed file; messages name `path` (review rev41, L3: "binary data")."""
    import gzip
    import shutil
    import tempfile
    import zlib
    from dataclasses import replace

    if options.get("live"):  # its end is not readable until the writer closes it
        raise LogFormatError(f"{path}: gzip-compressed, which a log being written is not",
                             "give the uncompressed log the trainer is writing")  # fmt: skip
    inner = path.name.removesuffix(".gz") if path.name.endswith(".gz") else path.name
    with tempfile.TemporaryDirectory(prefix="pgrpo-gz-") as tmp:
        plain = Path(tmp) / inner
        try:
            with gzip.open(path, "rb") as src, plain.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except (OSError, EOFError, zlib.error) as exc:
            raise LogFormatError(f"{path}: gzip data that does not decompress ({exc})",
                                 "check the file with gunzip -t and give an intact copy"
                                 ) from None  # fmt: skip
        moved = _MOVED.set((Path(tmp), path.absolute().parent))  # its config: beside `path`
        try:
            log = read_log(plain, format, **options)
        except LogFormatError as exc:  # a message about `plain` is one about `path`
            named = (exc.problem.replace(str(plain), str(path)), exc.fix)
            raise type(exc)(*named) from None
        finally:
            _MOVED.reset(moved)
    return replace(log, source=str(path))


def check_log_folder(path: str | Path) -> None:
    """Raise the LogFormatError `read_log` would for a folder in which no reader finds a log,
    without reading anything (the readers' detection only): for commands that create their
    output folder before the work, so that a folder without a log is not given one."""
    p = Path(path)
    if p.is_dir() and not any(LOG_READERS.get(n).detect(p) for n in LOG_READERS.names()):
        raise LogFormatError(*_no_log_in_folder(p))


def _no_log_in_folder(path: Path) -> tuple[str, str]:
    """(problem, fix) for a folder no reader recognises: what was looked for, what it holds."""
    held = sorted(f.name for f in path.iterdir())
    looked = ("looked for metrics.jsonl, trainer_state.json (also in checkpoint-*/), a verl "
              "JSONL or console log, TensorBoard events.out.tfevents.*")  # fmt: skip
    if not held:
        return f"{path} has no log file ({looked})", "give the run's output folder or its log"
    shown = ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "")
    return (
        f"{path} has no log file pgrpo recognises ({looked}; it holds {shown})",
        "give the log file itself (a CSV or JSONL is read when named), or --format",
    )


def _head(path: Path) -> bytes:
    """The first 64 KiB of a file (empty and binary files get their own message)."""
    try:
        with path.open("rb") as fh:
            return fh.read(1 << 16)
    except OSError as exc:
        raise cannot_read(path, exc) from None


_ORDER = ("pgrpo", "trl", "verl", "verl_console", "trl_console", "wandb", "csv")
