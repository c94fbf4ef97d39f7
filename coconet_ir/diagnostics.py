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

import warnings
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
