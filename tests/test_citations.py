"""The package cites its own docs: every `docs/<page>.md` named in src/pgrpo exists, and no source
file cites notes or data outside the repository (the package reads nothing beside it)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "pgrpo"
PAGE = re.compile(r"docs/([A-Za-z0-9_]+\.md)")
OUTSIDE = re.compile(r"\.\./shared|shared/(notes|data|seeds)|\bnotes/[a-z_]+\.md|/work/")


def _sources() -> dict[str, str]:
    return {p.relative_to(SRC).as_posix(): p.read_text() for p in sorted(SRC.rglob("*.py"))}


def test_every_cited_docs_page_exists():
    missing = [
        f"{rel}: docs/{page}"
        for rel, text in _sources().items()
        for page in PAGE.findall(text)
        if not (ROOT / "docs" / page).is_file()
    ]
    assert not missing, "cited pages that do not exist:\n" + "\n".join(missing)


def test_no_citation_of_files_outside_the_repository():
    found = [
        f"{rel}:{text[: m.start()].count(chr(10)) + 1}: {m.group(0)}"
        for rel, text in _sources().items()
        for m in OUTSIDE.finditer(text)
    ]
    assert not found, "cite a docs/ page instead:\n" + "\n".join(found)


def test_the_patterns_catch_what_they_are_for():
    assert OUTSIDE.search("see notes/advantages.md section 1")
    assert OUTSIDE.search("read ../shared/data/gsm8k")
    assert not OUTSIDE.search("docs/dynamics.md, the notes' force")
    assert PAGE.findall("docs/core.md and docs/trainer.md") == ["core.md", "trainer.md"]
