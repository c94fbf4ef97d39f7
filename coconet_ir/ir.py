"""Parsing, printing and verifying coco programs, with MLIR-style diagnostics.

Every entry point (coconet-opt, coconet-run, the Python API) goes through these
helpers so that bad input always ends as a `CocoError`: one message of the form
`FILE:LINE:COL: error: 'coco.op' op RULE`, never a Python traceback.
`verify` is the one verifier: every op's own rules, then the rules about the
whole module (the pipeline channels match).
"""

from __future__ import annotations

import os
from dataclasses import replace
from io import StringIO

from xdsl.context import Context
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError, VerifyException
from xdsl.utils.lexer import Span

from coconet_ir.diagnostics import CocoError, LocatedRuleError, location_of

__all__ = [
    "CocoError",
    "LocatingParser",
    "location_of",
    "make_context",
    "parse",
    "parse_error",
    "parse_file",
    "source_text",
    "to_text",
    "verify",
]


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


def parse_error(err: ParseError) -> CocoError:
    """`FILE:LINE:COL: error: MESSAGE` followed by the source line and a caret."""
    context = err.span.print_with_context().split("\n", 1)[1].rstrip()
    return CocoError(err.msg, str(err.span.get_location()), context=context)


def verify(module: Operation) -> None:
    """Verify every op, innermost first, then the module's pipeline channels;
    raise a located CocoError on the first broken rule."""
    from coconet_ir.analysis.channels import PipelineChannels
    from coconet_ir.dialects.coco import LayoutError

    for op in module.walk(reverse=False, region_first=True):
        try:
            op.verify(verify_nested_ops=False)
        except VerifyException as err:
            rule = err.rule if isinstance(err, LayoutError) else str(err)
            raise CocoError(rule, op) from None
    if isinstance(module, ModuleOp):
        for op, problem in PipelineChannels.of(module).problems():
            raise CocoError(problem, op)


def parse(
    source: str | bytes, filename: str = "<input>", ctx: Context | None = None
) -> ModuleOp:
    """Parse and verify a module; raise CocoError on any problem."""
    text = source_text(source, filename)
    try:
        module = LocatingParser(ctx or make_context(), text, filename).parse_module()
    except ParseError as err:
        raise parse_error(err) from None
    except LocatedRuleError as err:  # a type rule broken while parsing
        raise CocoError(err.diagnostic) from None
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
                f"input is not UTF-8 text (byte {err.start})", filename
            ) from None
    if not allow_empty and not strip_comments(source):
        raise CocoError("empty input, expected a module", filename)
    return source


def strip_comments(source: str) -> str:
    return "".join(line.split("//", 1)[0] for line in source.splitlines()).strip()


def to_text(module: Operation, generic: bool = False) -> str:
    out = StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(module)
    out.write("\n")
    return out.getvalue()


def parse_file(path: str | os.PathLike[str]) -> ModuleOp:
    """Read, parse and verify a `.mlir` file; raise CocoError on any problem."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as err:
        raise CocoError(f"cannot read: {err.strerror}", path) from None
    return parse(source, path)
