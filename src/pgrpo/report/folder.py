"""The report's folder: what `pgrpo report --out DIR` may overwrite or remove there.

A report writes report.html and one NAME.png per panel drawn, and removes the PNG of a panel it
cannot draw that an earlier report left. It touches only files it wrote: the folder's
`MANIFEST` lists them with their SHA-256 (a name listed with no hash is one a report was about
to write when it stopped); a folder written before the manifest (2026-12-06) is recognised by
its report.html's title. Anything else at one of those names (a user's file, a file the user
replaced since, a link, a folder) makes `check_out_folder` raise UserError before anything is
read or written. Sent to a folder of the user's own, a report once deleted their kl.png and
replaced their report.html without a word (a hostile user's review, session 36).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

PANELS = ("reward", "degeneracy", "entropy", "kl", "lengths", "stability_margin", "pass_at_k")
"""The panels a report draws (`build._panels`), each as NAME.png beside report.html."""
MANIFEST = ".pgrpo-report.json"
"""The files a report wrote in its folder: name -> SHA-256 (None: about to be written)."""
NAMES = ("report.html", *(f"{n}.png" for n in PANELS))
"""Every name a report writes or removes."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def owned(out: Path) -> dict[str, str | None]:
    """The names in `out` an earlier report wrote, with their SHA-256 (None: any content): the
    manifest's, or, in a folder written before the manifest, report.html and the panel PNGs when
    report.html's title says pgrpo; {} otherwise (an unreadable manifest owns nothing)."""
    try:
        files = json.loads((out / MANIFEST).read_text())["files"]
        if isinstance(files, dict):
            return {str(k): (str(v) if v is not None else None) for k, v in files.items()}
        return {str(n): None for n in files}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    page = out / "report.html"
    if page.is_symlink():
        return {}
    try:
        head = page.read_text(errors="replace")[:512]
    except (OSError, ValueError):
        return {}
    return dict.fromkeys(NAMES) if "<title>pgrpo report:" in head else {}


def _foreign(out: Path, name: str, mine: dict[str, str | None]) -> str | None:
    """Why the report may not touch out / name, as the error names it, or None when it may."""
    path = out / name
    if not os.path.lexists(path):
        return None
    if path.is_symlink():
        return f"{name} (a link)"
    if not path.is_file():
        return f"{name} (not a file)"
    if name not in mine:
        return name
    if mine[name] is not None and _sha256(path) != mine[name]:
        return f"{name} (changed since a report wrote it)"
    return None


def check_out_folder(out: Path) -> None:
    """Raise UserError when `out` holds, at a name a report writes or removes (`NAMES`), anything
    an earlier report did not write as it is now (module docstring)."""
    from pgrpo.errors import UserError

    if os.path.lexists(out) and not out.is_dir():
        return  # not a folder: the caller says so ("--out ... is a file")
    mine = owned(out) if out.is_dir() else {}
    foreign = [why for n in NAMES if (why := _foreign(out, n, mine)) is not None]
    if foreign:
        raise UserError(
            f"the report folder {out} holds {', '.join(foreign)}, which pgrpo report did not "
            "write and would overwrite or remove",
            "give --out a new or empty folder, or move those files",
        )


def claim(out: Path) -> None:
    """Write the manifest before the files: every name a report writes or removes (`NAMES`),
    with no hash, beside the earlier report's, so a report stopped half-way does not lock its
    folder."""
    pending = {**owned(out), **dict.fromkeys(NAMES)}
    _write(out, pending)


def record(out: Path, written: list[Path]) -> None:
    """The final manifest: the files written, with their SHA-256."""
    _write(out, {p.name: _sha256(p) for p in sorted(written)})


def _write(out: Path, files: dict[str, str | None]) -> None:
    (out / MANIFEST).write_text(json.dumps({"written_by": "pgrpo report", "files": files}) + "\n")
