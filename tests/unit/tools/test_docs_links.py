"""The documentation a user's clone gets is self-contained: every relative
link in README.md and docs/ lands on a file of the checkout (and, with an
`#anchor`, on a heading of that page, named as GitHub names it), nothing in
the checkout points outside it (the design notes this project was written
from are not shipped), and every docs/ page a source file or test cites
exists, with the heading it names where it names one on a docs/gpu/ page."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from helpers import ROOT

DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
CODE_DIRS = ("coconet_ir", "tests", "examples", "benchmarks", "tools", ".ci")
CODE_SUFFIXES = {".py", ".mlir", ".h", ".cu", ".supp", ".cfg", ".toml", ".sh", ""}
SKIPPED_DIRS = {".venv", "build", ".git", "__pycache__", "node_modules", "Output"}

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
OUTSIDE = "../" + "shared"  # spelled apart so that this file does not match
DESIGN_NOTES = re.compile(r"\b(COCO_DIALECT|ARCHITECTURE|STYLE)\.md\b")
CITATION = re.compile(r"\bdocs/[\w./-]+\.md")
GPU_CITATION = re.compile(r'\b(docs/gpu/[\w-]+\.md),\s*"([^"]*)"?')
COMMENT_LEAD = re.compile(r"^\s*(?://+|#+|\*+|--)?\s*")


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def prose_lines(path: Path) -> list[tuple[int, str]]:
    """The lines of a Markdown file outside fenced code blocks, with inline
    code spans removed (a link inside backticks is not a link)."""
    lines: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, re.sub(r"`[^`]*`", "``", line)))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, every
    character but letters, digits, `_`, `-` and spaces removed, spaces
    become `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


@cache
def headings(path: Path) -> tuple[str, ...]:
    """The text of every heading of a Markdown page, in order."""
    found: list[str] = []
    fenced = False
    for line in path.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and (match := HEADING.match(line)):
            found.append(match.group(2))
    return tuple(found)


@cache
def anchors(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    result: set[str] = set()
    for heading in headings(path):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return frozenset(result)


def links(path: Path) -> list[tuple[int, str]]:
    return [
        (number, target)
        for number, line in prose_lines(path)
        for target in LINK.findall(line)
        if not re.match(r"[a-z][a-z0-9+.-]*:", target)  # http:, mailto:, ...
    ]


@pytest.mark.parametrize("page", DOCS, ids=rel)
def test_every_relative_link_resolves(page: Path):
    broken: list[str] = []
    for number, target in links(page):
        file_part, _, anchor = target.partition("#")
        destination = (page.parent / file_part).resolve() if file_part else page
        where = f"{rel(page)}:{number}: {target}"
        if not destination.exists():
            broken.append(f"{where}: no such file")
        elif ROOT.resolve() not in destination.parents and destination != ROOT:
            broken.append(f"{where}: outside the checkout")
        elif anchor and destination.suffix == ".md":
            if anchor not in anchors(destination):
                broken.append(f"{where}: no heading with that anchor")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("page", DOCS, ids=rel)
def test_docs_cite_nothing_outside_the_checkout(page: Path):
    text = page.read_text()
    assert OUTSIDE not in text, f"{rel(page)} points to {OUTSIDE}"
    cited = sorted(set(DESIGN_NOTES.findall(text)))
    assert not cited, (
        f"{rel(page)} cites design notes a clone does not have: "
        + ", ".join(f"{name}.md" for name in cited)
    )


def source_files() -> list[Path]:
    files: list[Path] = []
    for directory in CODE_DIRS:
        for path in (ROOT / directory).rglob("*"):
            if SKIPPED_DIRS.intersection(path.relative_to(ROOT).parts):
                continue
            if path.is_file() and path.suffix in CODE_SUFFIXES:
                files.append(path)
    return sorted(files)


def test_no_file_points_outside_the_checkout():
    offenders = [
        rel(path)
        for path in [*source_files(), *DOCS]
        if OUTSIDE in path.read_text(errors="replace")
    ]
    assert not offenders, f"these files point to {OUTSIDE}: {offenders}"


def cited_heading(lines: list[str], index: int, start: int) -> str:
    """The quoted heading name that starts at column `start` of line `index`,
    joined with the next line when the quote is closed there (a comment's
    or docstring's line break)."""
    text = lines[index][start:]
    if '"' not in text and index + 1 < len(lines):
        following = COMMENT_LEAD.sub("", lines[index + 1], count=1)
        text = f"{text} {following}"
    return text.split('"', 1)[0]


def normalized(text: str) -> str:
    return " ".join(re.sub(r"[`*]", "", text).split()).lower()


def test_cited_docs_pages_exist():
    """Code and tests cite docs/ pages by path ("docs/passes.md",
    `docs/gpu/cuda.md, "Vectorization"`): the page exists, and a heading
    named on a docs/gpu/ page is the start of one of its headings."""
    missing: list[str] = []
    for path in source_files():
        lines = path.read_text(errors="replace").splitlines()
        for index, line in enumerate(lines):
            where = f"{rel(path)}:{index + 1}"
            for cited in CITATION.findall(line):
                if not (ROOT / cited).is_file():
                    missing.append(f"{where}: {cited} does not exist")
            for match in GPU_CITATION.finditer(line):
                page = ROOT / match.group(1)
                if not page.is_file():
                    continue
                name = normalized(cited_heading(lines, index, match.start(2)))
                if not any(normalized(h).startswith(name) for h in headings(page)):
                    missing.append(f'{where}: {match.group(1)} has no heading "{name}"')
    assert not missing, "\n".join(missing)
