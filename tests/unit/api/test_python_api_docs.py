"""docs/python-api.md runs as written, from any directory, and prints what it
says it prints.

The convention (the page states it too):

- Every ```python block is a whole program, run in a fresh namespace, unless
  its first line is `# continues the previous block`: then it runs after the
  block before it, in that block's namespace (the walk-through's steps are one
  Python session). A run of such blocks is a *session*; each session is one
  test case, its blocks executed in order.
- Each session runs in a new empty temporary directory, with the checkout (and
  the current directory) off `sys.path`, so a block that reads a file by a
  relative path or imports `examples` fails here as it would for a user.
- A block is compiled as the file `prog.py`, so the locations the DSL puts in
  its errors read as they would for `python prog.py`.
- A ```mlir or ```text block whose preceding prose says "prints" is the exact
  standard output of the ```python block just before it; it is compared with
  what that block printed (trailing whitespace aside).

A failure names the line of the page: the statement that raised, or the output
block that differs.
"""

from __future__ import annotations

import builtins
import difflib
import io
import re
import sys
import traceback
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import ROOT

DOC = ROOT / "docs" / "python-api.md"
CONTINUES = "# continues the previous block"
OUTPUT_LANGUAGES = ("mlir", "text")
FENCE = re.compile(r"^```(\S*)\s*$")


@dataclass
class Block:
    """A fenced block of the page: its language, the line of its first code
    line, its code, and the prose between it and the block before it."""

    language: str
    first_line: int
    code: str
    prose_before: str
    expected_output: Block | None = None


@dataclass
class Session:
    """Python blocks that run in order in one namespace."""

    blocks: list[Block] = field(default_factory=list[Block])

    @property
    def line(self) -> int:
        return self.blocks[0].first_line - 1


def fenced_blocks(text: str) -> list[Block]:
    blocks: list[Block] = []
    prose: list[str] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            prose.append(lines[index])
            index += 1
            continue
        start = index + 1
        index = start
        while index < len(lines) and lines[index].rstrip() != "```":
            index += 1
        if index == len(lines):
            raise AssertionError(f"{DOC}:{start}: unterminated ``` block")
        code = "\n".join(lines[start:index]) + "\n"
        blocks.append(Block(opening.group(1), start + 1, code, "\n".join(prose)))
        prose = []
        index += 1
    return blocks


def claims_output(block: Block) -> bool:
    return block.language in OUTPUT_LANGUAGES and "prints" in block.prose_before


def python_blocks(text: str) -> list[Block]:
    """The python blocks, each with the output block that shows what it prints."""
    blocks = fenced_blocks(text)
    found: list[Block] = []
    for previous, block in zip([None, *blocks], blocks, strict=False):
        if block.language == "python":
            found.append(block)
        elif claims_output(block):
            if previous is None or previous.language != "python":
                raise AssertionError(
                    f"{DOC}:{block.first_line - 1}: an output block that does not "
                    "follow a ```python block"
                )
            previous.expected_output = block
    return found


def sessions(text: str) -> list[Session]:
    grouped: list[Session] = []
    for block in python_blocks(text):
        continues = block.code.startswith(CONTINUES)
        if continues and not grouped:
            raise AssertionError(
                f"{DOC}:{block.first_line}: the first block cannot continue another"
            )
        if continues:
            grouped[-1].blocks.append(block)
        else:
            grouped.append(Session([block]))
    return grouped


SESSIONS = sessions(DOC.read_text())


def raised_at(block: Block, error: BaseException) -> int:
    """The page's line of the innermost statement of `block` in the traceback."""
    lines = [
        frame.lineno
        for frame in traceback.extract_tb(error.__traceback__)
        if frame.filename == "prog.py" and frame.lineno is not None
    ]
    return block.first_line + (lines[-1] - 1 if lines else 0)


def run_block(block: Block, namespace: dict[str, object]) -> str:
    """Execute `block` in `namespace`; its standard output."""
    out = io.StringIO()
    failure: Exception | None = None
    try:
        code = compile(block.code, "prog.py", "exec")
        with redirect_stdout(out):
            exec(code, namespace)
    except Exception as error:  # any failure of a snippet is reported
        failure = error
    if failure is None:
        return out.getvalue()
    where = raised_at(block, failure)
    if isinstance(failure, SyntaxError) and failure.lineno is not None:
        where = block.first_line + failure.lineno - 1
    details = "".join(traceback.format_exception(failure)).rstrip()
    pytest.fail(
        f"{DOC}:{where}: the ```python block at line {block.first_line - 1} "
        f"raised {type(failure).__name__}\n{details}",
        pytrace=False,
    )


def check_output(block: Block, printed: str) -> None:
    shown = block.expected_output
    if shown is None:
        return
    expected = [line.rstrip() for line in shown.code.rstrip("\n").splitlines()]
    actual = [line.rstrip() for line in printed.rstrip("\n").splitlines()]
    if expected == actual:
        return
    first = next(
        (i for i, (e, a) in enumerate(zip(expected, actual, strict=False)) if e != a),
        min(len(expected), len(actual)),
    )
    diff = "\n".join(
        difflib.unified_diff(expected, actual, "the page", "printed", lineterm="")
    )
    pytest.fail(
        f"{DOC}:{shown.first_line + first}: the output shown is not what the "
        f"```python block at line {block.first_line - 1} prints\n{diff}",
        pytrace=False,
    )


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cwd; neither the checkout nor the cwd importable."""
    monkeypatch.chdir(tmp_path)
    checkout = ROOT.resolve()
    kept = [p for p in sys.path if p not in ("", ".") and Path(p).resolve() != checkout]
    monkeypatch.setattr(sys, "path", kept)
    for name in list(sys.modules):
        if name == "examples" or name.startswith("examples."):
            monkeypatch.delitem(sys.modules, name)
    return tmp_path


@pytest.mark.parametrize("session", SESSIONS, ids=[f"line{s.line}" for s in SESSIONS])
def test_snippet_runs_and_prints_what_the_page_shows(session: Session, isolated: Path):
    namespace: dict[str, object] = {"__name__": "__main__", "__builtins__": builtins}
    for block in session.blocks:
        check_output(block, run_block(block, namespace))
    assert not any(isolated.iterdir()), "a snippet left files in the cwd"


def test_walk_through_is_one_session_with_checked_output():
    """The walk-through at the top builds, runs, optimizes, schedules, checks
    and prints, in one session whose printed IR is compared with the page."""
    walk_through = SESSIONS[0]
    code = "".join(block.code for block in walk_through.blocks)
    for call in (
        "@cc.function",
        "cc.interpret(",
        'cc.Pipeline("coco-optimize")',
        ".apply(",
        "cc.Schedule(",
        "cc.equivalent(",
        "cc.to_text(",
    ):
        assert call in code, call
    outputs = [b.expected_output for b in walk_through.blocks if b.expected_output]
    assert outputs[0] is walk_through.blocks[0].expected_output
    assert outputs[-1] is not None and outputs[-1].language == "mlir"
    assert "coco.fusion" in outputs[-1].code


def test_every_python_block_runs_somewhere():
    """Every ```python block belongs to a session and no block is empty."""
    blocks = python_blocks(DOC.read_text())
    assert sum(len(s.blocks) for s in SESSIONS) == len(blocks) > 0
    assert all(block.code.strip() for block in blocks)


def test_no_snippet_imports_internal_modules():
    """Snippets use `import coconet_ir as cc`; module paths inside the package
    are not part of the API (pass classes from `coconet_ir.passes` aside)."""
    for block in python_blocks(DOC.read_text()):
        for number, line in enumerate(block.code.splitlines()):
            imported = re.match(r"\s*(?:from|import)\s+(coconet_ir\S*)", line)
            if imported is None or imported.group(1) == "coconet_ir":
                continue
            assert imported.group(1).startswith("coconet_ir.passes."), (
                f"{DOC}:{block.first_line + number}: internal import {line.strip()!r}"
            )
