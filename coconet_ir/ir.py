"""Parsing, printing and verifying coco programs, with MLIR-style diagnostics.

Every entry point (coconet-opt, coconet-run, the Python API) goes through these
helpers so that bad input always ends as a `CocoError`: one message of the form
`FILE:LINE:COL: error: 'coco.op' op RULE`, never a Python traceback.
"""

from __future__ import annotations

from dataclasses import replace
from io import StringIO

from xdsl.context import Context
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import DiagnosticException, ParseError, VerifyException
from xdsl.utils.lexer import Span


class CocoError(DiagnosticException):
    """A user-facing error: bad syntax, a broken rule, a bad run request."""


def make_context(allow_unregistered: bool = False) -> Context:
    """A context that knows builtin, func, arith and coco."""
    from xdsl.dialects.arith import Arith
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func

    from coconet_ir.dialects.coco import Coco

    ctx = Context(allow_unregistered=allow_unregistered)
    for dialect in (Builtin, Func, Arith, Coco):
        ctx.load_dialect(dialect)
    return ctx


class LocatingParser(Parser):
    """A parser that gives every operation its `file:line:col` location, so
    that verifier errors can point at the source as mlir-opt does.

    `line_offset` shifts the reported lines (a `--split-input-file` chunk counts
    lines from the start of the whole file); an unknown op is reported where the
    op starts (xDSL points at the token after its name).
    """

    def __init__(self, ctx: Context, text: str, name: str, line_offset: int = 0):
        super().__init__(ctx, text, name)
        self.line_offset = line_offset
        self.op_start: Span | None = None

    def parse_operation(self) -> Operation:
        start = replace(self._current_token.span, line_offset=self.line_offset)
        self.op_start = start
        op = super().parse_operation()
        if not isinstance(op.location, FileLineColLoc):
            where = start.get_location()
            op.location = FileLineColLoc(
                StringAttr(where.file), IntAttr(where.line), IntAttr(where.col)
            )
        return op

    def _get_op_by_name(self, name: str) -> type[Operation]:
        if self.ctx.get_optional_op(
            name, dialect_stack=self._parser_state.dialect_stack
        ):
            return super()._get_op_by_name(name)
        self.raise_error(f"Operation {name} is not registered", self.op_start)


def describe_parse_error(err: ParseError) -> str:
    """`FILE:LINE:COL: error: MESSAGE` followed by the source line and a caret."""
    context = err.span.print_with_context().split("\n", 1)[1].rstrip()
    return f"{err.span.get_location()}: error: {err.msg}\n{context}"


def location_of(op: Operation) -> str:
    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}"
    return "<unknown>"


def op_error(op: Operation, message: str) -> CocoError:
    """An error about one op, in mlir-opt's words."""
    return CocoError(f"{location_of(op)}: error: '{op.name}' op {message}")


def verify(module: Operation) -> None:
    """Verify every op, innermost first; raise a located CocoError on the first
    broken rule."""
    for op in module.walk(reverse=False, region_first=True):
        try:
            op.verify(verify_nested_ops=False)
        except VerifyException as err:
            message = str(err).removeprefix("Operation does not verify: ")
            raise op_error(op, message) from None


def parse(
    source: str | bytes, filename: str = "<input>", ctx: Context | None = None
) -> ModuleOp:
    """Parse and verify a module; raise CocoError on any problem."""
    text = source_text(source, filename)
    try:
        module = LocatingParser(ctx or make_context(), text, filename).parse_module()
    except ParseError as err:
        raise CocoError(describe_parse_error(err)) from None
    except VerifyException as err:  # a type rule broken while parsing
        raise CocoError(str(err).strip()) from None
    verify(module)
    return module


def source_text(source: str | bytes, filename: str, allow_empty: bool = False) -> str:
    """The program text: UTF-8 and, unless `allow_empty`, not empty (comments
    aside); a CocoError otherwise."""
    if isinstance(source, bytes):
        try:
            source = source.decode("utf-8")
        except UnicodeDecodeError as err:
            raise CocoError(
                f"{filename}: error: input is not UTF-8 text (byte {err.start})"
            ) from None
    if not allow_empty and not strip_comments(source):
        raise CocoError(f"{filename}: error: empty input, expected a module")
    return source


def strip_comments(source: str) -> str:
    return "".join(line.split("//", 1)[0] for line in source.splitlines()).strip()


def to_text(module: Operation, generic: bool = False) -> str:
    out = StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(module)
    out.write("\n")
    return out.getvalue()


def parse_file(path: str) -> ModuleOp:
    """Read, parse and verify a `.mlir` file; raise CocoError on any problem."""
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as err:
        raise CocoError(f"{path}: error: cannot read: {err.strerror}") from None
    return parse(source, path)
