"""One shape for every message a user reads: mlir-opt's.

    FILE:LINE:COL: error: 'coco.norm' op operand must be replicated or local, ...
    error: coco-overlap: option chunks must be >= 1, got 0

Every layer (the dialect's verifiers, the passes, the interpreter, the DSL, the
command-line tools) builds its user-facing errors with the one constructor,
`CocoError(message, at)`, from the op the message is about (its location and
name), a location, a file name, or nothing. No layer strips or re-adds
prefixes: the parts are kept apart (`CocoError.diagnostic`) and joined only
when the message is shown. Warnings have the same shape (`warn`). See
docs/cli.md, "Diagnostics".
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from enum import auto

from xdsl.dialects.builtin import ArrayAttr, FileLineColLoc, FusedLoc
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.utils.exceptions import DiagnosticException, VerifyException
from xdsl.utils.str_enum import StrEnum


class Severity(StrEnum):
    ERROR = auto()
    WARNING = auto()


Where = Operation | FileLineColLoc | str | None
"""What a diagnostic is about: an op (its location and its name), a source
location, a file name, or nothing (a message about the whole request)."""


def location_text(where: Where) -> str | None:
    """`FILE:LINE:COL` (or `FILE`) for `where`; None when it has no location.
    An op a pass made from several carries their fused location: as
    mlir-opt, the first of them is shown."""
    location = where.location if isinstance(where, Operation) else where
    while isinstance(location, FusedLoc) and isinstance(location.locations, ArrayAttr):
        if not location.locations.data:
            return None
        location = location.locations.data[0]
    if isinstance(location, FileLineColLoc):
        return f"{location.filename.data}:{location.line.data}:{location.column.data}"
    return location if isinstance(location, str) else None


def value_name(value: SSAValue) -> str:
    """`%x` for a value with a name, else `#N` for a block argument (its
    position) or `%?`, for messages about a value."""
    if value.name_hint:
        return f"%{value.name_hint}"
    return f"#{value.index}" if isinstance(value, BlockArgument) else "%?"


def location_of(op: Operation) -> str:
    """`FILE:LINE:COL` of `op`, for messages that point at another op."""
    return location_text(op) or "<unknown>"


@dataclass(frozen=True)
class Diagnostic:
    """The parts of one message, joined by `str()`:
    `LOCATION: SEVERITY: 'OP' op MESSAGE` and any context lines after it."""

    message: str
    location: str | None = None
    op_name: str | None = None
    severity: Severity = Severity.ERROR
    context: str = ""
    """Lines shown after the message (the source line and a caret)."""

    @staticmethod
    def about(
        at: Where,
        message: str,
        *,
        op_name: str | None = None,
        severity: Severity = Severity.ERROR,
        context: str = "",
    ) -> Diagnostic:
        """The diagnostic about `at`; an op also names itself (`op_name` names
        an op that is not built yet, e.g. in a builder)."""
        if op_name is None and isinstance(at, Operation):
            op_name = at.name
        return Diagnostic(message, location_text(at), op_name, severity, context)

    def __str__(self) -> str:
        where = f"{self.location}: " if self.location else ""
        subject = f"'{self.op_name}' op " if self.op_name else ""
        text = f"{where}{self.severity}: {subject}{self.message}"
        return f"{text}\n{self.context}" if self.context else text


class CocoError(DiagnosticException):
    """A user-facing error: bad syntax, a broken rule, a refused transformation,
    a bad run request. `str()` is the one-message diagnostic."""

    def __init__(
        self,
        message: str | Diagnostic,
        at: Where = None,
        *,
        op_name: str | None = None,
        context: str = "",
    ):
        if not isinstance(message, Diagnostic):
            message = Diagnostic.about(at, message, op_name=op_name, context=context)
        self.diagnostic = message
        super().__init__(str(message))


class LocatedRuleError(VerifyException):
    """A rule broken at a source location, found while parsing (a bad
    `!coco.tensor`): a VerifyException, so that `--verify-diagnostics` reports
    it where a ParseError would end the run."""

    def __init__(self, diagnostic: Diagnostic):
        self.diagnostic = diagnostic
        super().__init__(str(diagnostic))


class CocoWarning(UserWarning):
    """A warning about the user's request (an option that matched nothing);
    `str()` is the one-message diagnostic."""


def warn(message: str, at: Where = None) -> None:
    """Issue a warning in the diagnostic shape. The command-line tools print it
    as it is (`FILE:LINE:COL: warning: ...`); from Python it is an ordinary
    `CocoWarning`."""
    text = str(Diagnostic.about(at, message, severity=Severity.WARNING))
    warnings.warn(CocoWarning(text), stacklevel=2)


# ============================================================================
# Optimization remarks (docs/cli.md, "Remarks")
# ============================================================================


class RemarkKind(StrEnum):
    """What a remark says, as MLIR's remark kinds."""

    PASSED = "Passed"
    """A transformation was applied."""
    MISSED = "Missed"
    """A transformation did not apply, and why."""
    FAILURE = "Failure"
    """A transformation was tried and given up."""
    ANALYSIS = "Analysis"
    """What a decision was based on (the cost model's numbers)."""


@dataclass(frozen=True)
class Remark:
    """One optimization remark, printed as mlir-opt prints its remarks:
    `LOC: remark: [Missed] NAME | Category:PASS | Function=F | Reason="..."`."""

    kind: RemarkKind
    category: str
    """The pass (or conversion) that emits it; what the filters match."""
    name: str
    """What it is about, in one word (`FusedCollective`, `OneKernel`)."""
    message: str
    location: str | None = None
    function: str | None = None

    def __str__(self) -> str:
        where = f"{self.location}: " if self.location else ""
        function = f" | Function={self.function}" if self.function else ""
        failed = self.kind in (RemarkKind.MISSED, RemarkKind.FAILURE)
        key = "Reason" if failed else "Remark"
        return (
            f"{where}remark: [{self.kind}] {self.name} | Category:{self.category}"
            f'{function} | {key}="{self.message}"'
        )


@dataclass(frozen=True)
class RemarkFilter:
    """Which remarks to show, as mlir-opt's `--remarks-filter*` options: a
    regular expression over the category (the pass name), matched whole, for
    every kind (`all`) or for one kind."""

    all: str | None = None
    passed: str | None = None
    missed: str | None = None
    failed: str | None = None
    analysis: str | None = None

    def accepts(self, remark: Remark) -> bool:
        own = {
            RemarkKind.PASSED: self.passed,
            RemarkKind.MISSED: self.missed,
            RemarkKind.FAILURE: self.failed,
            RemarkKind.ANALYSIS: self.analysis,
        }[remark.kind]
        return any(
            pattern is not None and re.fullmatch(pattern, remark.category) is not None
            for pattern in (self.all, own)
        )

    @property
    def enabled(self) -> bool:
        return any(
            p is not None
            for p in (self.all, self.passed, self.missed, self.failed, self.analysis)
        )


_REMARK_SINK: ContextVar[Callable[[Remark], None] | None] = ContextVar(
    "coco_remark_sink", default=None
)


def remark(
    kind: RemarkKind,
    category: str,
    name: str,
    message: str | Callable[[], str],
    at: Where = None,
    *,
    function: str | None = None,
) -> None:
    """Emit a remark about `at` (an op: its location and function), if anyone
    listens (`remarks_to`); otherwise nothing is built: `message` may be a
    function that words it."""
    sink = _REMARK_SINK.get()
    if sink is None:
        return
    text = message() if callable(message) else message
    if function is None and isinstance(at, Operation):
        function = function_name(at)
    sink(Remark(kind, category, name, text, location_text(at), function))


def remarks_on() -> bool:
    """Whether remarks are being listened to (to skip work only they need)."""
    return _REMARK_SINK.get() is not None


def function_name(op: Operation | None) -> str | None:
    """The name of the `func.func` holding `op` (or being it), if any."""
    while op is not None and op.name != "func.func":
        op = op.parent_op()
    symbol = None if op is None else op.properties.get("sym_name")
    return getattr(symbol, "data", None)


@contextmanager
def remarks_to(
    handler: Callable[[Remark], None], accept: RemarkFilter = RemarkFilter(all=".*")
) -> Iterator[None]:
    """Within the block, every remark `accept` lets through goes to `handler`.

    ```python
    found = []
    with remarks_to(found.append):
        cc.Pipeline("coco-optimize,convert-coco-to-gpu{world=4}")(module)
    ```
    """

    def sink(remark: Remark) -> None:
        if accept.accepts(remark):
            handler(remark)

    token = _REMARK_SINK.set(sink)
    try:
        yield
    finally:
        _REMARK_SINK.reset(token)
