"""Parsing, printing and verifying coco programs, with MLIR-style diagnostics.

Every entry point (coconet-opt, coconet-run, the Python API) goes through these
helpers so that bad input always ends as a `CocoError`: one message of the form
`FILE:LINE:COL: error: 'coco.op' op RULE`, never a Python traceback.
`verify` is the one verifier: every op's own rules, then the rules about the
whole module (the pipeline channels match).
"""

from __future__ import annotations

import os
import re
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import replace
from functools import cached_property
from io import StringIO

from xdsl.context import Context
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp
from xdsl.ir import (
    AttributeInvT,
    BlockArgument,
    Dialect,
    Operation,
    Region,
    SSAValue,
    TypeAttribute,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import NoTerminator
from xdsl.utils.exceptions import ParseError, VerifyException
from xdsl.utils.lexer import Position, Span

from coconet_ir.diagnostics import (
    CocoError,
    LocatedRuleError,
    location_of,
    value_name,
)

__all__ = [
    "CocoError",
    "LocatingParser",
    "declared_world_size",
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
    """A context that knows builtin, func, arith and coco, and (loaded when
    first used) the device level's gpu, memref, scf, math, vector and
    coco_gpu, and the tensor, linalg and shard programs `coco-import-shard`
    reads (gpu, linalg and shard with MLIR 22's syntax and ops)."""
    from xdsl.dialects import get_all_dialects
    from xdsl.dialects.arith import Arith
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func

    from coconet_ir.dialects.coco import Coco

    ctx = Context(allow_unregistered=allow_unregistered)
    for dialect in (Builtin, Func, Arith, Coco):
        ctx.load_dialect(dialect)
    upstream = get_all_dialects()
    for name in ("memref", "scf", "math", "vector", "cf", "tensor"):
        ctx.register_dialect(name, upstream[name])
    ctx.register_dialect("gpu", _gpu)
    ctx.register_dialect("linalg", _linalg)
    ctx.register_dialect("shard", _shard)
    ctx.register_dialect("coco_gpu", _coco_gpu)
    return ctx


# xDSL's gpu, linalg and shard with MLIR 22's syntax and missing ops, as
# coconet-opt loads them (universe.MLIR_SYNTAX_DIALECTS; `ir` may not import
# the universe).
def _gpu() -> Dialect:
    from coconet_ir.dialects.gpu import GPU

    return GPU


def _linalg() -> Dialect:
    from coconet_ir.dialects.linalg import Linalg

    return Linalg


def _shard() -> Dialect:
    from coconet_ir.dialects.shard import Shard

    return Shard


def _coco_gpu() -> Dialect:
    from coconet_ir.dialects.coco_gpu import CocoGpu

    return CocoGpu


TENSOR_TYPE = "!coco.tensor<"


def tensor_type_end(text: str, start: int) -> int | None:
    """Where the `!coco.tensor<...>` type at `start` of `text` ends (after
    its matching `>`, counting `sliced<D>`'s), or None when there is none
    there or its spelling holds anything but a type's characters."""
    if not text.startswith(TENSOR_TYPE, start):
        return None
    depth = 0
    for at in range(start + len(TENSOR_TYPE) - 1, len(text)):
        char = text[at]
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
            if depth == 0:
                return at + 1
        elif not (char.isalnum() or char in "x,. _"):
            return None
    return None


class LocatingParser(Parser):
    """A parser that gives every operation its `file:line:col` location, so
    that verifier errors can point at the source as mlir-opt does.

    `line_offset` shifts the reported lines (a `--split-input-file` chunk counts
    lines from the start of the whole file). An unknown op is reported where the
    op starts (xDSL points at the token after its name); a value used but never
    defined, where it is first used (xDSL reports it at the end of the input).

    A location costs a bisection of a table of line starts built once (xDSL's
    `Span.get_location` counts the newlines from the start of the input, which
    made parsing quadratic). A `!coco.tensor` type is parsed once per spelling
    (`parse_optional_type`).
    """

    def __init__(self, ctx: Context, text: str, name: str, line_offset: int = 0):
        super().__init__(ctx, text, name)
        self.line_offset = line_offset
        self.op_start: Position = 0
        """Where the op being parsed starts (at its results, if any)."""
        self._filename = StringAttr(name)
        self._first_uses: dict[str, Span] = {}
        """Where each forward-referenced value name was first used."""
        self._tensor_types: dict[str, TypeAttribute] = {}
        """Each `!coco.tensor<...>` spelling parsed so far, and its type."""

    @cached_property
    def _line_starts(self) -> list[Position]:
        """The position where each line of the input starts."""
        text = self.lexer.input.content
        return [0, *(newline.end() for newline in re.finditer("\n", text))]

    def location_at(self, pos: Position) -> FileLineColLoc:
        """The `file:line:col` location of a position in the input."""
        line = bisect_right(self._line_starts, pos)
        column = pos - self._line_starts[line - 1] + 1
        return FileLineColLoc(
            self._filename, IntAttr(line + self.line_offset), IntAttr(column)
        )

    def parse_module(self, allow_implicit_module: bool = True) -> ModuleOp:
        """As xDSL's; a value used but never defined is reported where it is
        first used (mlir-opt: "use of undeclared SSA value name"), where xDSL
        reports the list of such values at the end of the input."""
        try:
            return super().parse_module(allow_implicit_module)
        except ParseError as err:
            if not err.msg.startswith(UNDEFINED_VALUES) or not self._first_uses:
                raise
            use = min(
                (self._first_uses[name] for name in self.forward_ssa_references),
                key=lambda span: span.start,
            )
            use = replace(use, line_offset=self.line_offset)
            self.raise_error(f"use of undefined value '{use.text}'", use)

    def parse_optional_type(self) -> TypeAttribute | None:
        """As xDSL's; a `!coco.tensor<...>` spelled as one parsed before is
        that type, and the parser resumes after it. A program's ops spell a
        few types many times, and lexing them was a large part of parsing it. Only a
        type that parsed is remembered, and only when nothing but blanks
        separate its closing `>` from the next token, so a spelling is always
        what the parser consumed."""
        start = self.pos
        end = tensor_type_end(self.lexer.input.content, start)
        if end is None:
            return super().parse_optional_type()
        spelling = self.lexer.input.content[start:end]
        known = self._tensor_types.get(spelling)
        if known is not None:
            self._resume_from(end)
            return known
        parsed = super().parse_optional_type()
        if parsed is not None and not self.lexer.input.content[end : self.pos].strip():
            self._tensor_types[spelling] = parsed
        return parsed

    def parse_operation(self) -> Operation:
        start = self.op_start = self.pos
        op = super().parse_operation()
        if not isinstance(op.location, FileLineColLoc):
            op.location = self.location_at(start)
        return op

    def parse_optional_region(
        self, arguments: Iterable[Parser.Argument] | None = None
    ) -> Region | None:
        """As xDSL's, and the entry block's arguments (a function's parameters)
        get the locations where they are written."""
        arguments = None if arguments is None else list(arguments)
        region = super().parse_optional_region(arguments)
        if region is not None and arguments and region.blocks:
            for arg, written in zip(region.blocks[0].args, arguments):
                if not isinstance(arg.location, FileLineColLoc):
                    arg.location = self.location_at(written.name.start)
        return region

    def resolve_operand(
        self, operand: UnresolvedOperand, type: AttributeInvT
    ) -> SSAValue[AttributeInvT]:
        name = operand.operand_name
        if name not in self.ssa_values and name not in self.forward_ssa_references:
            self._first_uses[name] = operand.span
        return super().resolve_operand(operand, type)

    def _get_op_by_name(self, name: str) -> type[Operation]:
        """As xDSL's, but an unknown op is reported where the op starts (xDSL
        has no public hook for it)."""
        try:
            return super()._get_op_by_name(name)
        except ParseError as err:
            at = Span(self.op_start, self.op_start, self.lexer.input, self.line_offset)
            self.raise_error(err.msg, at)


UNDEFINED_VALUES = "values used but not defined"
"""How xDSL's parser begins its end-of-input error for undefined values."""


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
            verify_blocks(op)
        except VerifyException as err:
            rule = err.rule if isinstance(err, LayoutError) else str(err)
            raise CocoError(rule, op) from None
    if isinstance(module, ModuleOp):
        check_arguments_divisible(module)
        for op, problem in PipelineChannels.of(module).problems():
            raise CocoError(problem, op)


def argument_location(arg: BlockArgument) -> FileLineColLoc | str | None:
    """Where the argument is written; else where its block's op is."""
    if isinstance(arg.location, FileLineColLoc):
        return arg.location
    owner = arg.block.parent_op()
    return None if owner is None else location_of(owner)


def describe_argument(arg: BlockArgument) -> str:
    """`argument %x of @f` (or `#2`), for messages about a block argument."""
    owner = arg.block.parent_op()
    if isinstance(owner, FuncOp):
        return f"argument {value_name(arg)} of @{owner.sym_name.data}"
    return f"block argument {value_name(arg)}"


def declared_world_size(module: ModuleOp, at: str | None = None) -> int | None:
    """The module's `coco.world_size`, if it has one; a CocoError (at `at`, a
    file name) if it is not a positive integer."""
    from coconet_ir.dialects.coco import LayoutError, world_size

    try:
        return world_size(module)
    except LayoutError as err:
        raise CocoError(err.rule, at) from None


def check_arguments_divisible(module: ModuleOp) -> None:
    """With a known world size, every sliced function argument's sliced dim
    must be divisible by it (the ops check their own operands and results)."""
    from coconet_ir.dialects.coco import divisibility_problem

    world = declared_world_size(module)
    if world is None:
        return
    for func in module.ops:
        if not isinstance(func, FuncOp) or func.is_declaration:
            continue
        for arg in func.body.block.args:
            problem = divisibility_problem(arg.type, world)
            if problem is not None:
                raise CocoError(
                    f"{describe_argument(arg)}: {problem} (coco.world_size)",
                    argument_location(arg),
                )


def verify_blocks(op: Operation) -> None:
    """What xDSL's `Block.verify` checks besides the ops, which
    `verify_nested_ops=False` skips: the one block of a region must hold at least
    a terminator, unless the op has no terminators."""
    for region in op.regions:
        if (
            len(region.blocks) == 1
            and region.block.first_op is None
            and not op.has_trait(NoTerminator)
        ):
            raise VerifyException("empty block: expect at least a terminator")


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
    if not allow_empty and not has_code(source):
        raise CocoError("empty input, expected a module", filename)
    return source


_CODE_LINE = re.compile(r"^[ \t]*(?!//)\S", re.MULTILINE)
"""A line with something other than blanks and a `//` comment."""


def has_code(source: str) -> bool:
    """Whether `source` holds more than blanks and comments (it reads up to the
    first line that does, not the whole file)."""
    return _CODE_LINE.search(source) is not None


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
