"""xDSL's upstream `linalg` dialect with the elementwise ops of MLIR 22's that
it lacks.

xDSL 0.74 has `linalg.add sub mul max min exp log sqrt select` but not MLIR's
`linalg.div`, the other unary and binary named elementwise ops (`abs`, `negf`,
`rsqrt`, `tanh`, `erf`, `floor`, `ceil`, `round`, `reciprocal`, `square`,
`powf`) nor the category op `linalg.elementwise` with its
`#linalg.elementwise_kind<...>` attribute, which sharded MLIR programs use
(docs/mlir-interop.md). This module defines them with MLIR 22's syntax and
hidden bodies, and `Linalg` is xDSL's dialect with them added; `coconet-opt`
and `ir.make_context` load it in place of xDSL's.

    %e = linalg.elementwise kind=#linalg.elementwise_kind<exp>
        ins(%x : tensor<8x32xf32>) outs(%init : tensor<8x32xf32>) -> tensor<8x32xf32>
    %q = linalg.div ins(%a, %b : tensor<4xf32>, tensor<4xf32>)
        outs(%init : tensor<4xf32>) -> tensor<4xf32>
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar, cast

from xdsl.builder import Builder
from xdsl.dialects import arith, linalg, math
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AnyFloat,
    ArrayAttr,
    FloatAttr,
    IntegerType,
)
from xdsl.dialects.linalg.abstract_ops import ElementwiseOperation
from xdsl.dialects.linalg.ops import YieldOp
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, BlockArgument, Operation, Region, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.irdl import irdl_attr_definition, irdl_op_definition, opt_prop_def, prop_def
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.utils.str_enum import StrEnum

from coconet_ir.dialects import with_added


class ElementwiseKind(StrEnum):
    """MLIR 22's `linalg::ElementwiseKind`, in its order."""

    EXP = "exp"
    LOG = "log"
    ABS = "abs"
    CEIL = "ceil"
    FLOOR = "floor"
    NEGF = "negf"
    RECIPROCAL = "reciprocal"
    ROUND = "round"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    SQUARE = "square"
    TANH = "tanh"
    ERF = "erf"
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    DIV_UNSIGNED = "div_unsigned"
    MAX_SIGNED = "max_signed"
    MIN_SIGNED = "min_signed"
    MAX_UNSIGNED = "max_unsigned"
    MIN_UNSIGNED = "min_unsigned"
    POWF = "powf"
    SELECT = "select"


@irdl_attr_definition
class ElementwiseKindAttr(EnumAttribute[ElementwiseKind]):
    """`#linalg.elementwise_kind<exp>`: what a `linalg.elementwise` computes."""

    name = "linalg.elementwise_kind"

    def print_parameter(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            super().print_parameter(printer)

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> ElementwiseKind:
        with parser.in_angle_brackets():
            return super().parse_parameter(parser)


ScalarOp = Callable[..., Operation]
"""Builds the scalar op of a body from the body's input arguments (an op
class, or a function of them), inserted by the enclosing implicit builder."""


def _reciprocal(x: SSAValue) -> Operation:
    one = arith.ConstantOp(FloatAttr(1.0, cast(AnyFloat, x.type)))
    return arith.DivfOp(one, x)


def _square(x: SSAValue) -> Operation:
    return arith.MulfOp(x, x)


SCALAR_OPS: dict[ElementwiseKind, tuple[ScalarOp | None, ScalarOp | None]] = {
    ElementwiseKind.EXP: (math.ExpOp, None),
    ElementwiseKind.LOG: (math.LogOp, None),
    ElementwiseKind.ABS: (math.AbsFOp, None),
    ElementwiseKind.CEIL: (math.CeilOp, None),
    ElementwiseKind.FLOOR: (math.FloorOp, None),
    ElementwiseKind.NEGF: (arith.NegfOp, None),
    ElementwiseKind.RECIPROCAL: (_reciprocal, None),
    ElementwiseKind.ROUND: (math.RoundOp, None),
    ElementwiseKind.SQRT: (math.SqrtOp, None),
    ElementwiseKind.RSQRT: (math.RsqrtOp, None),
    ElementwiseKind.SQUARE: (_square, None),
    ElementwiseKind.TANH: (math.TanhOp, None),
    ElementwiseKind.ERF: (math.ErfOp, None),
    ElementwiseKind.ADD: (arith.AddfOp, arith.AddiOp),
    ElementwiseKind.SUB: (arith.SubfOp, arith.SubiOp),
    ElementwiseKind.MUL: (arith.MulfOp, arith.MuliOp),
    ElementwiseKind.DIV: (arith.DivfOp, arith.DivSIOp),
    ElementwiseKind.DIV_UNSIGNED: (None, arith.DivUIOp),
    ElementwiseKind.MAX_SIGNED: (arith.MaximumfOp, arith.MaxSIOp),
    ElementwiseKind.MIN_SIGNED: (arith.MinimumfOp, arith.MinSIOp),
    ElementwiseKind.MAX_UNSIGNED: (None, arith.MaxUIOp),
    ElementwiseKind.MIN_UNSIGNED: (None, arith.MinUIOp),
    ElementwiseKind.POWF: (math.PowFOp, None),
    ElementwiseKind.SELECT: (arith.SelectOp, arith.SelectOp),
}
"""The scalar op of each kind on floats and on integers (None: it does not
take them), as MLIR's `linalg` op definitions."""

ARITY: dict[ElementwiseKind, int] = {
    **{kind: 1 for kind in ElementwiseKind},
    **{
        kind: 2
        for kind in (
            ElementwiseKind.ADD,
            ElementwiseKind.SUB,
            ElementwiseKind.MUL,
            ElementwiseKind.DIV,
            ElementwiseKind.DIV_UNSIGNED,
            ElementwiseKind.MAX_SIGNED,
            ElementwiseKind.MIN_SIGNED,
            ElementwiseKind.MAX_UNSIGNED,
            ElementwiseKind.MIN_UNSIGNED,
            ElementwiseKind.POWF,
        )
    },
    ElementwiseKind.SELECT: 3,
}
"""How many inputs each kind takes."""


def elementwise_body(
    kind: ElementwiseKind, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]
) -> Region:
    """The hidden body of an elementwise op of `kind`: the scalar op on the
    input arguments, yielded (the output argument is unused)."""
    arg_types = ElementwiseOperation.body_arg_types((*inputs, *outputs))
    if len(inputs) != ARITY[kind]:
        raise ValueError(f"{kind} takes {ARITY[kind]} inputs, got {len(inputs)}")
    on_floats, on_integers = SCALAR_OPS[kind]
    element = arg_types[-1]
    build = (
        on_floats
        if isinstance(element, AnyFloat)
        else on_integers
        if isinstance(element, IntegerType)
        else None
    )
    if build is None:
        raise ValueError(f"{kind} does not take {element}")

    @Builder.implicit_region(arg_types)
    def body(args: tuple[BlockArgument, ...]) -> None:
        YieldOp(build(*args[: ARITY[kind]]))

    return body


class KindElementwiseOp(ElementwiseOperation):
    """A named elementwise op whose body is that of one elementwise kind."""

    KIND: ClassVar[ElementwiseKind]

    def __init__(
        self,
        inputs: Sequence[SSAValue],
        outputs: Sequence[SSAValue] = (),
        res: Sequence[Attribute] | None = None,
        attributes: dict[str, Attribute] | None = None,
    ):
        super().__init__(
            ins=inputs,
            outs=outputs,
            result_types=res if res is not None else [o.type for o in outputs],
            attributes=attributes,
            hidden_region=self.get_hidden_region(inputs, outputs),
        )

    @classmethod
    def get_hidden_region(
        cls, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]
    ) -> Region:
        return elementwise_body(cls.KIND, inputs, outputs)


@irdl_op_definition
class DivOp(KindElementwiseOp):
    """Elementwise `a / b`."""

    name = "linalg.div"
    KIND: ClassVar[ElementwiseKind] = ElementwiseKind.DIV


@irdl_op_definition
class PowFOp(KindElementwiseOp):
    """Elementwise `a ** b`."""

    name = "linalg.powf"
    KIND: ClassVar[ElementwiseKind] = ElementwiseKind.POWF


@irdl_op_definition
class AbsOp(KindElementwiseOp):
    """Elementwise `|x|`."""

    name = "linalg.abs"
    KIND: ClassVar[ElementwiseKind] = ElementwiseKind.ABS


@irdl_op_definition
class NegFOp(KindElementwiseOp):
    """Elementwise `-x`."""

    name = "linalg.negf"
    KIND: ClassVar[ElementwiseKind] = ElementwiseKind.NEGF


@irdl_op_definition
class RsqrtOp(KindElementwiseOp):
    """Elementwise `1 / sqrt(x)`."""

    name = "linalg.rsqrt"
    KIND: ClassVar[ElementwiseKind] = ElementwiseKind.RSQRT


@irdl_op_definition
class TanhOp(KindElementwiseOp):
    """Elementwise `tanh(x)`."""

    name = "linalg.tanh"
    KIND: ClassVar[ElementwiseKind] = ElementwiseKind.TANH


@irdl_op_definition
class ErfOp(KindElementwiseOp):
    """Elementwise `erf(x)`."""

    name = "linalg.erf"
    KIND: ClassVar[ElementwiseKind] = ElementwiseKind.ERF


@irdl_op_definition
class FloorOp(KindElementwiseOp):
    """Elementwise `floor(x)`."""

    name = "linalg.floor"
    KIND: ClassVar[ElementwiseKind] = ElementwiseKind.FLOOR


@irdl_op_definition
class CeilOp(KindElementwiseOp):
    """Elementwise `ceil(x)`."""

    name = "linalg.ceil"
    KIND: ClassVar[ElementwiseKind] = ElementwiseKind.CEIL


@irdl_op_definition
class RoundOp(KindElementwiseOp):
    """Elementwise `round(x)`, halves away from zero."""

    name = "linalg.round"
    KIND: ClassVar[ElementwiseKind] = ElementwiseKind.ROUND


@irdl_op_definition
class ReciprocalOp(KindElementwiseOp):
    """Elementwise `1 / x`."""

    name = "linalg.reciprocal"
    KIND: ClassVar[ElementwiseKind] = ElementwiseKind.RECIPROCAL


@irdl_op_definition
class SquareOp(KindElementwiseOp):
    """Elementwise `x * x`."""

    name = "linalg.square"
    KIND: ClassVar[ElementwiseKind] = ElementwiseKind.SQUARE


@irdl_op_definition
class ElementwiseOp(ElementwiseOperation):
    """`linalg.elementwise kind=#linalg.elementwise_kind<K> ins(...) outs(...)`:
    the elementwise op of kind K (MLIR 22's category op)."""

    name = "linalg.elementwise"

    kind = prop_def(ElementwiseKindAttr)
    indexing_maps = opt_prop_def(ArrayAttr[AffineMapAttr])

    def __init__(
        self,
        kind: ElementwiseKind,
        inputs: Sequence[SSAValue],
        outputs: Sequence[SSAValue],
        res: Sequence[Attribute] | None = None,
    ):
        super().__init__(
            ins=inputs,
            outs=outputs,
            result_types=res if res is not None else [o.type for o in outputs],
            properties={"kind": ElementwiseKindAttr(kind)},
            hidden_region=elementwise_body(kind, inputs, outputs),
        )

    @classmethod
    def get_hidden_region(
        cls, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]
    ) -> Region:
        raise NotImplementedError("the body depends on the kind: elementwise_body")

    def get_default_indexing_maps(self) -> Sequence[AffineMap]:
        if self.indexing_maps is not None:
            return tuple(m.data for m in self.indexing_maps.data)
        return super().get_default_indexing_maps()

    @classmethod
    def parse(cls, parser: Parser) -> ElementwiseOp:
        parser.parse_keyword("kind")
        parser.parse_punctuation("=")
        kind = parser.parse_attribute()
        if not isinstance(kind, ElementwiseKindAttr):
            parser.raise_error("expected #linalg.elementwise_kind<...>")
        properties: dict[str, Attribute] = {"kind": kind}
        if parser.parse_optional_keyword("indexing_maps"):
            parser.parse_punctuation("=")
            properties["indexing_maps"] = parser.parse_attribute()
        pos = parser.pos
        ins = _parse_operand_group(parser, "ins")
        outs = _parse_operand_group(parser, "outs")
        attributes = parser.parse_optional_attr_dict()
        result_types: list[Attribute] = []
        if parser.parse_optional_punctuation("->"):
            result_types = parser.parse_comma_separated_list(
                parser.Delimiter.NONE, parser.parse_type
            )
        try:
            body = elementwise_body(kind.data, ins, outs)
        except ValueError as err:
            parser.raise_error(str(err), pos, parser.pos)
        return cls.build(
            operands=(ins, outs),
            result_types=(result_types,),
            properties=properties,
            attributes=attributes,
            regions=(body,),
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" kind=")
        printer.print_attribute(self.kind)
        if self.indexing_maps is not None:
            printer.print_string(" indexing_maps = ")
            printer.print_attribute(self.indexing_maps)
        for keyword, values in (("ins", self.inputs), ("outs", self.outputs)):
            printer.print_string(f" {keyword}(")
            printer.print_list(values, printer.print_ssa_value)
            printer.print_string(" : ")
            printer.print_list(values.types, printer.print_attribute)
            printer.print_string(")")
        if self.attributes:
            printer.print_op_attributes(self.attributes)
        if self.res:
            printer.print_string(" -> ")
            printer.print_list(self.res.types, printer.print_attribute)


def _parse_operand_group(parser: Parser, keyword: str) -> list[SSAValue]:
    """`KEYWORD(%a, %b : T1, T2)`, resolved."""
    pos = parser.pos
    parser.parse_keyword(keyword)
    parser.parse_punctuation("(")
    names = parser.parse_comma_separated_list(
        parser.Delimiter.NONE, parser.parse_unresolved_operand
    )
    parser.parse_punctuation(":")
    types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
    parser.parse_punctuation(")")
    return list(parser.resolve_operands(names, types, pos))


ADDED = (
    DivOp,
    PowFOp,
    AbsOp,
    NegFOp,
    RsqrtOp,
    TanhOp,
    ErfOp,
    FloorOp,
    CeilOp,
    RoundOp,
    ReciprocalOp,
    SquareOp,
    ElementwiseOp,
)
"""The elementwise ops of MLIR 22's linalg dialect that xDSL 0.74's lacks."""

Linalg = with_added(linalg.Linalg, ADDED, [ElementwiseKindAttr])
"""xDSL's `linalg` dialect, with MLIR 22's elementwise ops."""

__all__ = [
    "ADDED",
    "ElementwiseKind",
    "ElementwiseKindAttr",
    "ElementwiseOp",
    "KindElementwiseOp",
    "Linalg",
    "elementwise_body",
]
