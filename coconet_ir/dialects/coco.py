"""The `coco` dialect: distributed tensors, compute ops and collectives.

This is COCO_DIALECT.md made executable. A `!coco.tensor<SHAPE x ELT, LAYOUT>`
carries its distribution in its type; every compute op infers its result type
from its operands by the layout rules (section "Layout inference" below), and
its verifier rejects a result type that disagrees. Collectives are the only ops
that communicate; `coco.send`/`coco.recv` connect the stages of a pipeline.

When the enclosing module carries `coco.world_size = N : i64`, verifiers also
check that every sliced dimension is divisible by `N`.

Verifier messages state the broken rule; the diagnostic that reports them
(`coconet_ir.ir.verify`) prefixes the op, as mlir-opt does:
`FILE:LINE:COL: error: 'coco.norm' op operand must be replicated or local, ...`.
Builders raise the same `LayoutError` with the `'coco.OP' op` prefix.
"""

from __future__ import annotations

import math
import struct
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import auto
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    BFloat16Type,
    DenseArrayBase,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    StringAttr,
    SymbolRefAttr,
    bf16,
    f16,
    f32,
    f64,
    i1,
    i32,
    i64,
)
from xdsl.dialects.func import FuncOp
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import (
    Attribute,
    Block,
    BlockArgument,
    Dialect,
    Operation,
    ParametrizedAttribute,
    SpacedOpaqueSyntaxAttribute,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.pattern_rewriter import RewritePattern
from xdsl.printer import Printer
from xdsl.traits import (
    HasCanonicalizationPatternsTrait,
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    Pure,
)
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.lexer import Position, Span
from xdsl.utils.str_enum import StrEnum

# ============================================================================
# Layouts and the distributed tensor type
# ============================================================================

ELEMENT_TYPES: dict[str, Attribute] = {
    "f16": f16,
    "bf16": bf16,
    "f32": f32,
    "f64": f64,
    "i32": i32,
    "i1": i1,
}
"""The element types a `!coco.tensor` may hold, by their MLIR spelling."""

FLOAT_TYPES = (Float16Type, BFloat16Type, Float32Type, Float64Type)

WORLD_SIZE_ATTR = "coco.world_size"
"""The module attribute that fixes the world size `N` (`coco.world_size = 4 : i64`)."""


def is_float(element_type: Attribute) -> bool:
    return isinstance(element_type, FLOAT_TYPES)


def element_type_name(element_type: Attribute) -> str:
    for name, elt in ELEMENT_TYPES.items():
        if elt == element_type:
            return name
    raise ValueError(f"not a coco element type: {element_type}")


def _as_element_type(element_type: Attribute | str) -> Attribute:
    """An element type given as an attribute or by its spelling (`"f32"`)."""
    if not isinstance(element_type, str):
        return element_type
    if element_type not in ELEMENT_TYPES:
        raise ValueError(
            f"not a coco element type: {element_type!r} (expected one of "
            f"{', '.join(ELEMENT_TYPES)})"
        )
    return ELEMENT_TYPES[element_type]


def _located(parser: AttrParser, at: Position, message: str) -> VerifyException:
    """A type-rule error found while parsing, located like a verifier error so that
    `--verify-diagnostics` reports it (a ParseError would end the run)."""
    line_offset = getattr(parser, "line_offset", 0)  # a --split-input-file chunk
    where = Span(at, at, parser.lexer.input, line_offset).get_location()
    return VerifyException(f"{where}: error: {message}")


class LayoutKind(StrEnum):
    REPLICATED = auto()
    LOCAL = auto()
    SLICED = auto()


@irdl_attr_definition
class LayoutAttr(ParametrizedAttribute):
    """How a distributed tensor lives on the ranks: `replicated`, `local` or
    `sliced<D>` (rank `r` holds block `r` of dim `D`).

    It only appears inside `!coco.tensor`; `dim` is -1 unless the layout is sliced.
    """

    name = "coco.layout"

    kind: StringAttr
    dim: IntAttr

    @staticmethod
    def replicated() -> LayoutAttr:
        return LayoutAttr(StringAttr(LayoutKind.REPLICATED), IntAttr(-1))

    @staticmethod
    def local() -> LayoutAttr:
        return LayoutAttr(StringAttr(LayoutKind.LOCAL), IntAttr(-1))

    @staticmethod
    def sliced(dim: int) -> LayoutAttr:
        return LayoutAttr(StringAttr(LayoutKind.SLICED), IntAttr(dim))

    @property
    def is_replicated(self) -> bool:
        return self.kind.data == LayoutKind.REPLICATED

    @property
    def is_local(self) -> bool:
        return self.kind.data == LayoutKind.LOCAL

    @property
    def is_sliced(self) -> bool:
        return self.kind.data == LayoutKind.SLICED

    @property
    def sliced_dim(self) -> int:
        """The dimension this layout cuts; only meaningful when sliced."""
        return self.dim.data

    def verify(self) -> None:
        if self.kind.data not in set(LayoutKind):
            raise VerifyException(
                f"unknown layout '{self.kind.data}' (expected replicated, local "
                "or sliced<D>)"
            )
        if self.is_sliced != (self.dim.data >= 0):
            raise VerifyException(
                "only a sliced layout has a dimension, and it is non-negative"
            )

    def __str__(self) -> str:
        if self.is_sliced:
            return f"sliced<{self.sliced_dim}>"
        return self.kind.data

    @classmethod
    def parse_layout(cls, parser: AttrParser) -> LayoutAttr:
        """`replicated`, `local` or `sliced<D>`."""
        kind = parser.parse_str_enum(LayoutKind)
        if kind != LayoutKind.SLICED:
            return LayoutAttr(StringAttr(kind), IntAttr(-1))
        parser.parse_punctuation("<", " after 'sliced'")
        at = parser.pos
        dim = parser.parse_integer(
            allow_boolean=False, context_msg=" as the dimension of sliced<D>"
        )
        if dim < 0:
            parser.raise_error(
                f"the dimension of sliced<D> must be non-negative, got {dim}", at
            )
        parser.parse_punctuation(">", " to close 'sliced<'")
        return LayoutAttr.sliced(dim)


REPLICATED = LayoutAttr.replicated()
LOCAL = LayoutAttr.local()


def _shape_text(dims: Sequence[int]) -> str:
    return "x".join(str(d) if d >= 0 else "?" for d in dims) or "rank 0"


def shape_problem(dims: Sequence[int]) -> str | None:
    """Why `dims` is not a valid `!coco.tensor` shape, or None."""
    if all(d >= 1 for d in dims):
        return None
    return (
        "!coco.tensor shape must be static with positive sizes, got "
        f"{_shape_text(dims)}"
    )


def element_type_problem(element_type: Attribute) -> str | None:
    """Why `element_type` may not be a `!coco.tensor` element type, or None."""
    if element_type in ELEMENT_TYPES.values():
        return None
    return (
        f"!coco.tensor element type must be one of {', '.join(ELEMENT_TYPES)}, "
        f"got {element_type}"
    )


def layout_problem(layout: LayoutAttr, rank: int) -> str | None:
    """Why `layout` does not fit a tensor of `rank`, or None."""
    if not layout.is_sliced or layout.sliced_dim < rank:
        return None
    if rank == 0:
        return f"{layout} is out of range: a rank-0 tensor cannot be sliced"
    return (
        f"{layout} is out of range for a tensor of rank {rank} (the sliced "
        f"dimension must be in 0..{rank - 1})"
    )


@irdl_attr_definition
class TensorType(ParametrizedAttribute, TypeAttribute):
    """`!coco.tensor<SHAPE x ELT, LAYOUT>`: a distributed tensor.

    SHAPE is the global, static shape; ELT one of f16, bf16, f32, f64, i32, i1;
    LAYOUT `replicated`, `local` or `sliced<D>`.
    """

    name = "coco.tensor"

    shape: ArrayAttr[IntAttr]
    element_type: Attribute
    layout: LayoutAttr

    def __init__(
        self,
        shape: Sequence[int],
        element_type: Attribute,
        layout: LayoutAttr,
    ):
        super().__init__(ArrayAttr(IntAttr(d) for d in shape), element_type, layout)

    @property
    def dims(self) -> tuple[int, ...]:
        return tuple(d.data for d in self.shape.data)

    @property
    def rank(self) -> int:
        return len(self.shape.data)

    def with_layout(self, layout: LayoutAttr) -> TensorType:
        return TensorType(self.dims, self.element_type, layout)

    def with_element_type(self, element_type: Attribute) -> TensorType:
        return TensorType(self.dims, element_type, self.layout)

    def with_shape(self, shape: Sequence[int]) -> TensorType:
        return TensorType(shape, self.element_type, self.layout)

    def verify(self) -> None:
        problem = (
            element_type_problem(self.element_type)
            or shape_problem(self.dims)
            or layout_problem(self.layout, self.rank)
        )
        if problem is not None:
            raise VerifyException(problem)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        parser.parse_punctuation("<", " to open !coco.tensor")
        shape_at = parser.pos
        shape, element_type = parser.parse_ranked_shape()
        problem = shape_problem(shape)
        if problem is not None:
            raise _located(parser, shape_at, problem)
        problem = element_type_problem(element_type)
        if problem is not None:
            raise _located(parser, shape_at, problem)
        parser.parse_punctuation(",", " between the element type and the layout")
        layout_at = parser.pos
        layout = LayoutAttr.parse_layout(parser)
        problem = layout_problem(layout, len(shape))
        if problem is not None:
            raise _located(parser, layout_at, problem)
        parser.parse_punctuation(">", " to close !coco.tensor")
        return [ArrayAttr(IntAttr(d) for d in shape), element_type, layout]

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            for d in self.dims:
                printer.print_string(f"{d}x")
            printer.print_attribute(self.element_type)
            printer.print_string(f", {self.layout}")


def tensor(
    shape: Sequence[int], element_type: Attribute | str, layout: LayoutAttr
) -> TensorType:
    """Shorthand: `tensor([1024], "f32", LOCAL)`."""
    return TensorType(shape, _as_element_type(element_type), layout)


# ============================================================================
# Enumerated properties
# ============================================================================


class ReductionKind(StrEnum):
    SUM = auto()
    PROD = auto()
    MAX = auto()
    MIN = auto()


@irdl_attr_definition
class ReductionKindAttr(EnumAttribute[ReductionKind], SpacedOpaqueSyntaxAttribute):
    """How a collective combines the ranks' values: `sum`, `prod`, `max`, `min`.

    Generic form: `#coco<reduction sum>`."""

    name = "coco.reduction"


class ReduceKind(StrEnum):
    SUM = auto()
    MAX = auto()
    MIN = auto()


@irdl_attr_definition
class ReduceKindAttr(EnumAttribute[ReduceKind], SpacedOpaqueSyntaxAttribute):
    """How `coco.reduce` combines elements: `sum`, `max`, `min`.

    Generic form: `#coco<reduce_kind sum>`."""

    name = "coco.reduce_kind"


class ComparePredicate(StrEnum):
    EQ = auto()
    NE = auto()
    LT = auto()
    LE = auto()
    GT = auto()
    GE = auto()


@irdl_attr_definition
class ComparePredicateAttr(
    EnumAttribute[ComparePredicate], SpacedOpaqueSyntaxAttribute
):
    """The predicate of `coco.cmp`: `eq ne lt le gt ge`.

    Generic form: `#coco<predicate gt>`."""

    name = "coco.predicate"


# ============================================================================
# Layout inference
#
# Each rule takes operand types and returns the result type, or raises a
# LayoutError whose message states the rule. Builders call them to compute
# result types; verifiers call them to check the declared one.
# ============================================================================


class LayoutError(VerifyException):
    """A layout, shape or element-type rule of COCO_DIALECT.md is broken."""


def broadcast_shapes(shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """numpy broadcasting of trailing dims; raises LayoutError on a mismatch."""
    rank = max(len(s) for s in shapes)
    result: list[int] = []
    for axis in range(rank):
        sizes = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            raise LayoutError(
                f"operand shapes {' and '.join(str(list(s)) for s in shapes)} do "
                f"not broadcast (dimension {axis} of the result has sizes "
                f"{sorted(sizes)})"
            )
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


def elementwise_layout(types: Sequence[TensorType], result_rank: int) -> LayoutAttr:
    """The layout rule for elementwise ops.

    Equal layouts keep it; `replicated` takes the layout of the other operands;
    sliced operands must cut the same (right-aligned) result dimension; `local`
    with `sliced` is an error.
    """
    sliced_dims: set[int] = set()
    has_local = False
    for t in types:
        if t.layout.is_local:
            has_local = True
        elif t.layout.is_sliced:
            sliced_dims.add(t.layout.sliced_dim + result_rank - t.rank)
    if has_local and sliced_dims:
        raise LayoutError(
            "cannot combine a local operand with a sliced one (local with sliced "
            "is an error: all_reduce the local operand or all_gather the sliced "
            "one first)"
        )
    if len(sliced_dims) > 1:
        raise LayoutError(
            "sliced operands must cut the same dimension of the result, got "
            f"dimensions {sorted(sliced_dims)} (use coco.all_to_all)"
        )
    if has_local:
        return LOCAL
    if not sliced_dims:
        return REPLICATED
    return LayoutAttr.sliced(sliced_dims.pop())


def _check_sliced_not_broadcast(
    types: Sequence[TensorType], shape: tuple[int, ...], layout: LayoutAttr
) -> None:
    """A sliced operand must have the full size along its sliced dimension."""
    if not layout.is_sliced:
        return
    for t in types:
        if (
            t.layout.is_sliced
            and t.dims[t.layout.sliced_dim] != shape[layout.sliced_dim]
        ):
            raise LayoutError(
                f"a sliced operand cannot be broadcast along its sliced dimension "
                f"({t} against result shape {list(shape)})"
            )


def infer_elementwise(
    types: Sequence[TensorType], result_element_type: Attribute | None = None
) -> TensorType:
    """Shape by broadcasting, layout by `elementwise_layout`; the element type is
    the first operand's unless `result_element_type` says otherwise."""
    shape = broadcast_shapes([t.dims for t in types])
    layout = elementwise_layout(types, len(shape))
    _check_sliced_not_broadcast(types, shape, layout)
    if result_element_type is None:
        result_element_type = types[0].element_type
    return TensorType(shape, result_element_type, layout)


def check_same_element_type(op_name: str, types: Sequence[TensorType]) -> None:
    """Operands of elementwise ops and matmul share one element type.

    `op_name` is kept for callers of the original signature; the message states
    the rule and the diagnostic names the op."""
    kinds = {t.element_type for t in types}
    if len(kinds) > 1:
        raise LayoutError(
            "operands must have the same element type (use coco.convert), got "
            f"{', '.join(str(t.element_type) for t in types)}"
        )


def infer_reduce(operand: TensorType, dims: Sequence[int]) -> TensorType:
    """Reductions: replicated → replicated, local → local; on sliced<D> a set of
    dims including D gives local partials, excluding D gives sliced (renumbered)."""
    if not dims:
        raise LayoutError("needs at least one dimension to reduce (dims = [...])")
    if len(set(dims)) != len(dims):
        raise LayoutError(f"dims must be distinct, got {list(dims)}")
    for d in dims:
        if not 0 <= d < operand.rank:
            raise LayoutError(
                f"dim {d} is out of range for an operand of rank {operand.rank}"
            )
    shape = [s for axis, s in enumerate(operand.dims) if axis not in dims]
    layout = operand.layout
    if layout.is_sliced:
        cut = layout.sliced_dim
        if cut in dims:
            layout = LOCAL
        else:
            layout = LayoutAttr.sliced(cut - sum(1 for d in dims if d < cut))
    return TensorType(shape, operand.element_type, layout)


MATMUL_RULES = (
    "replicated x replicated -> replicated, sliced<d not last> x replicated -> "
    "sliced<d>, replicated x sliced<1> -> sliced<last>, sliced<last> x sliced<0> "
    "-> local, local x replicated -> local"
)
"""The matmul table of COCO_DIALECT.md section 3, as error messages quote it."""


def matmul_layout(lhs: TensorType, rhs: TensorType) -> LayoutAttr | None:
    """The result layout by the matmul table, or None when no row matches."""
    last = lhs.rank - 1
    a, b = lhs.layout, rhs.layout
    if b.is_replicated:
        if a.is_replicated:
            return REPLICATED
        if a.is_sliced and a.sliced_dim != last:
            return a
        if a.is_local:
            return LOCAL
        return None
    if a.is_replicated and b.is_sliced and b.sliced_dim == 1:
        return LayoutAttr.sliced(last)
    if a.is_sliced and a.sliced_dim == last and b.is_sliced and b.sliced_dim == 0:
        return LOCAL
    return None


def infer_matmul(lhs: TensorType, rhs: TensorType) -> TensorType:
    """`a: [..., K]` times `b: [K, M]` gives `[..., M]`, laid out by the table."""
    if lhs.rank < 2 or rhs.rank != 2:
        raise LayoutError(
            "needs a lhs of rank >= 2 and a rhs of rank 2, got ranks "
            f"{lhs.rank} and {rhs.rank}"
        )
    if lhs.dims[-1] != rhs.dims[0]:
        raise LayoutError(
            f"contraction sizes differ: lhs {list(lhs.dims)} has K = {lhs.dims[-1]}"
            f" but rhs {list(rhs.dims)} has K = {rhs.dims[0]}"
        )
    layout = matmul_layout(lhs, rhs)
    if layout is None:
        raise LayoutError(
            f"has no layout rule for lhs {lhs.layout} and rhs {rhs.layout} "
            f"(allowed: {MATMUL_RULES})"
        )
    shape = (*lhs.dims[:-1], rhs.dims[1])
    return TensorType(shape, lhs.element_type, layout)


# ============================================================================
# Helpers shared by the ops
# ============================================================================


def world_size_of(op: Operation) -> int | None:
    """The world size fixed by an enclosing `coco.world_size` attribute, if any."""
    parent = op.parent_op()
    while parent is not None:
        attr = parent.attributes.get(WORLD_SIZE_ATTR)
        if attr is not None:
            return _world_size_value(attr)
        parent = parent.parent_op()
    return None


def _world_size_value(attr: Attribute) -> int:
    if (
        not isinstance(attr, IntegerAttr)
        or not isinstance(attr.type, IntegerType)
        or attr.type == i1
        or attr.value.data < 1
    ):
        raise LayoutError(
            f"{WORLD_SIZE_ATTR} must be a positive integer (e.g. "
            f"{WORLD_SIZE_ATTR} = 4 : i64), got {attr}"
        )
    return attr.value.data


def check_divisible(op: Operation, types: Sequence[Attribute]) -> None:
    """With a known world size N, every sliced dim must be divisible by N."""
    world = world_size_of(op)
    if world is None:
        return
    for t in types:
        if not isinstance(t, TensorType) or not t.layout.is_sliced:
            continue
        size = t.dims[t.layout.sliced_dim]
        if size % world:
            raise LayoutError(
                f"dimension {t.layout.sliced_dim} of {t} (size {size}) is not "
                f"divisible by the world size {world} ({WORLD_SIZE_ATTR})"
            )


def as_tensor_type(value: SSAValue, what: str) -> TensorType:
    if not isinstance(value.type, TensorType):
        raise LayoutError(f"{what} must be a !coco.tensor, got {value.type}")
    return value.type


def tensor_type(value: SSAValue) -> TensorType:
    """The type of a value of verified IR, where it must be a `!coco.tensor`
    (passes, analyses); `as_tensor_type` is for values not yet verified."""
    assert isinstance(value.type, TensorType)
    return value.type


def check_result_type(op_name: str, declared: Attribute, inferred: TensorType) -> None:
    """The declared result type must be the inferred one. `op_name` is kept for
    callers of the original signature; the diagnostic names the op."""
    if declared != inferred:
        raise LayoutError(
            f"result type must be {inferred} by the layout rules, got {declared}"
        )


def check_dim_in_range(what: str, dim: int, operand: TensorType) -> None:
    if not 0 <= dim < operand.rank:
        raise LayoutError(
            f"{what} {dim} is out of range for an operand of rank {operand.rank}"
        )


def inferred_by(op_name: str, infer: Callable[[], TensorType]) -> TensorType:
    """Run a builder's inference; name the op in the error, as diagnostics do."""
    try:
        return infer()
    except LayoutError as err:
        raise LayoutError(f"'{op_name}' op {err}") from None


class CocoOp(IRDLOperation, ABC):
    """Fields and checks every coco op shares: an optional `name` attribute
    (CoCoNet's stage name, which passes target) and the divisibility check."""

    stage_name = opt_attr_def(StringAttr, attr_name="name")

    def verify_(self) -> None:
        check_divisible(
            self, [*(o.type for o in self.operands), *(r.type for r in self.results)]
        )
        self.verify_types()

    def verify_types(self) -> None:
        """The op's own type rules; raise LayoutError stating the rule."""


class InferredResultOp(CocoOp, ABC):
    """An op with one result whose type the layout rules infer from its operands
    (and properties): the builder computes that type, the verifier checks the
    declared one against it."""

    @abstractmethod
    def inferred_type(self) -> TensorType:
        """The result type the rules give for this op; raises LayoutError."""

    def verify_types(self) -> None:
        check_result_type(self.name, self.results[0].type, self.inferred_type())


def _name_attr(name: str | None) -> dict[str, Attribute | None]:
    return {"name": StringAttr(name) if name is not None else None}


def _literal_text(parser: Parser, start: Position) -> str:
    """The source text of the literal just parsed from `start`."""
    return parser.lexer.input.content[start : parser.pos].strip()


def _parse_keyword_value(parser: Parser, keyword: str) -> tuple[Position, float | int]:
    """`KEYWORD = NUMBER`; returns where the number starts and its value."""
    parser.parse_keyword(keyword)
    parser.parse_punctuation("=")
    at = parser.pos
    return at, parser.parse_number(context_msg=f" after '{keyword} ='")


# ============================================================================
# Canonicalization patterns (in coconet_ir/passes/canonicalization.py, imported
# lazily as xDSL's arith dialect does)
# ============================================================================


class AllSliceOpHasCanonicalizationPatterns(HasCanonicalizationPatternsTrait):
    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        from coconet_ir.passes.canonicalization import SliceOfGather

        return (SliceOfGather(),)


class AllGatherOpHasCanonicalizationPatterns(HasCanonicalizationPatternsTrait):
    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        from coconet_ir.passes.canonicalization import GatherOfScatter, GatherOfSlice

        return (GatherOfSlice(), GatherOfScatter())


class AllReduceOpHasCanonicalizationPatterns(HasCanonicalizationPatternsTrait):
    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        from coconet_ir.passes.canonicalization import ReplicatedIdempotentAllReduce

        return (ReplicatedIdempotentAllReduce(),)


class ConvertOpHasCanonicalizationPatterns(HasCanonicalizationPatternsTrait):
    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        from coconet_ir.passes.canonicalization import SameTypeConvert

        return (SameTypeConvert(),)


# ============================================================================
# Compute ops
# ============================================================================


class BinaryOp(InferredResultOp, ABC):
    """`coco.OP %a, %b`: an op on two tensors whose result type is
    `infer(lhs, rhs)`."""

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure())
    assembly_format = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)"

    def __init__(
        self,
        lhs: SSAValue | Operation,
        rhs: SSAValue | Operation,
        *,
        name: str | None = None,
    ):
        lhs_v, rhs_v = SSAValue.get(lhs), SSAValue.get(rhs)
        super().__init__(
            operands=[lhs_v, rhs_v],
            result_types=[inferred_by(self.name, lambda: self.infer_for(lhs_v, rhs_v))],
            attributes=_name_attr(name),
        )

    @classmethod
    @abstractmethod
    def infer(cls, lhs: TensorType, rhs: TensorType) -> TensorType:
        """The result type for operands of these types; raises LayoutError."""

    def infer_for(self, lhs: SSAValue, rhs: SSAValue) -> TensorType:
        """`infer` on the types of the values `lhs` and `rhs`."""
        return self.infer(as_tensor_type(lhs, "lhs"), as_tensor_type(rhs, "rhs"))

    def inferred_type(self) -> TensorType:
        return self.infer_for(self.lhs, self.rhs)


class UnaryOp(InferredResultOp, ABC):
    """`coco.OP %a`: an op on one tensor whose result type is `infer(operand)`."""

    operand = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure())
    assembly_format = "$operand attr-dict `:` functional-type(operands, results)"

    def __init__(self, operand: SSAValue | Operation, *, name: str | None = None):
        value = SSAValue.get(operand)
        result_type = inferred_by(
            self.name, lambda: self.infer(as_tensor_type(value, "operand"))
        )
        super().__init__(
            operands=[value], result_types=[result_type], attributes=_name_attr(name)
        )

    @classmethod
    @abstractmethod
    def infer(cls, operand: TensorType) -> TensorType:
        """The result type for an operand of this type; raises LayoutError."""

    def inferred_type(self) -> TensorType:
        return self.infer(as_tensor_type(self.operand, "operand"))


class ElementwiseBinaryOp(BinaryOp, ABC):
    """`coco.OP %a, %b`: elementwise with numpy broadcasting of trailing dims."""

    FLOAT_ONLY_BINARY: ClassVar[bool] = False
    """Whether the op only makes sense on floats (e.g. pow)."""

    @classmethod
    def infer(cls, lhs: TensorType, rhs: TensorType) -> TensorType:
        check_same_element_type(cls.name, [lhs, rhs])
        if lhs.element_type == i1:
            raise LayoutError(
                "does not take i1 operands (i1 is not arithmetic; use coco.select)"
            )
        if cls.FLOAT_ONLY_BINARY and not is_float(lhs.element_type):
            raise LayoutError(f"needs floating-point operands, got {lhs.element_type}")
        return infer_elementwise([lhs, rhs])


@irdl_op_definition
class AddOp(ElementwiseBinaryOp):
    """Elementwise `a + b`."""

    name = "coco.add"


@irdl_op_definition
class SubOp(ElementwiseBinaryOp):
    """Elementwise `a - b`."""

    name = "coco.sub"


@irdl_op_definition
class MulOp(ElementwiseBinaryOp):
    """Elementwise `a * b`."""

    name = "coco.mul"


@irdl_op_definition
class DivOp(ElementwiseBinaryOp):
    """Elementwise `a / b` (truncating division on i32)."""

    name = "coco.div"


@irdl_op_definition
class MaxOp(ElementwiseBinaryOp):
    """Elementwise maximum."""

    name = "coco.max"


@irdl_op_definition
class MinOp(ElementwiseBinaryOp):
    """Elementwise minimum."""

    name = "coco.min"


@irdl_op_definition
class PowOp(ElementwiseBinaryOp):
    """Elementwise `a ** b` on floats."""

    name = "coco.pow"
    FLOAT_ONLY_BINARY: ClassVar[bool] = True


@irdl_op_definition
class CmpOp(BinaryOp):
    """`coco.cmp %a, %b predicate = P`: elementwise comparison, result `i1`."""

    name = "coco.cmp"

    predicate = prop_def(ComparePredicateAttr)

    assembly_format = (
        "$lhs `,` $rhs `predicate` `=` $predicate attr-dict `:` "
        "functional-type(operands, results)"
    )

    def __init__(
        self,
        lhs: SSAValue | Operation,
        rhs: SSAValue | Operation,
        predicate: ComparePredicate | str,
        *,
        name: str | None = None,
    ):
        lhs_v, rhs_v = SSAValue.get(lhs), SSAValue.get(rhs)
        # Not BinaryOp's builder, which takes no predicate.
        IRDLOperation.__init__(
            self,
            operands=[lhs_v, rhs_v],
            result_types=[inferred_by(self.name, lambda: self.infer_for(lhs_v, rhs_v))],
            properties={"predicate": ComparePredicateAttr(ComparePredicate(predicate))},
            attributes=_name_attr(name),
        )

    @classmethod
    def infer(cls, lhs: TensorType, rhs: TensorType) -> TensorType:
        check_same_element_type("coco.cmp", [lhs, rhs])
        return infer_elementwise([lhs, rhs], result_element_type=i1)


@irdl_op_definition
class SelectOp(InferredResultOp):
    """`coco.select %c, %a, %b`: elementwise `c ? a : b`; `c` is `i1`."""

    name = "coco.select"

    condition = operand_def(TensorType)
    true_value = operand_def(TensorType)
    false_value = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure())
    assembly_format = (
        "$condition `,` $true_value `,` $false_value attr-dict `:` "
        "functional-type(operands, results)"
    )

    def __init__(
        self,
        condition: SSAValue | Operation,
        true_value: SSAValue | Operation,
        false_value: SSAValue | Operation,
        *,
        name: str | None = None,
    ):
        values = [SSAValue.get(v) for v in (condition, true_value, false_value)]
        result_type = inferred_by(
            self.name,
            lambda: self.infer(*(as_tensor_type(v, "operand") for v in values)),
        )
        super().__init__(
            operands=values, result_types=[result_type], attributes=_name_attr(name)
        )

    @staticmethod
    def infer(
        condition: TensorType, true_value: TensorType, false_value: TensorType
    ) -> TensorType:
        if condition.element_type != i1:
            raise LayoutError(
                f"condition must have element type i1, got {condition.element_type}"
            )
        check_same_element_type("coco.select", [true_value, false_value])
        return infer_elementwise(
            [condition, true_value, false_value],
            result_element_type=true_value.element_type,
        )

    def inferred_type(self) -> TensorType:
        return self.infer(*(as_tensor_type(v, "operand") for v in self.operands))


class ElementwiseUnaryOp(UnaryOp, ABC):
    """`coco.OP %a`: elementwise, same type in and out."""

    FLOAT_ONLY: ClassVar[bool] = True

    @classmethod
    def infer(cls, operand: TensorType) -> TensorType:
        if operand.element_type == i1:
            raise LayoutError("does not take an i1 operand (i1 is not arithmetic)")
        if cls.FLOAT_ONLY and not is_float(operand.element_type):
            raise LayoutError(
                f"needs a floating-point operand, got {operand.element_type}"
            )
        return operand


@irdl_op_definition
class NegOp(ElementwiseUnaryOp):
    """Elementwise `-a`."""

    name = "coco.neg"
    FLOAT_ONLY: ClassVar[bool] = False


@irdl_op_definition
class AbsOp(ElementwiseUnaryOp):
    """Elementwise `|a|`."""

    name = "coco.abs"
    FLOAT_ONLY: ClassVar[bool] = False


@irdl_op_definition
class SqrtOp(ElementwiseUnaryOp):
    """Elementwise square root."""

    name = "coco.sqrt"


@irdl_op_definition
class RsqrtOp(ElementwiseUnaryOp):
    """Elementwise `1 / sqrt(a)`."""

    name = "coco.rsqrt"


@irdl_op_definition
class ExpOp(ElementwiseUnaryOp):
    """Elementwise `e ** a`."""

    name = "coco.exp"


@irdl_op_definition
class LogOp(ElementwiseUnaryOp):
    """Elementwise natural logarithm."""

    name = "coco.log"


@irdl_op_definition
class TanhOp(ElementwiseUnaryOp):
    """Elementwise hyperbolic tangent."""

    name = "coco.tanh"


@irdl_op_definition
class ReluOp(ElementwiseUnaryOp):
    """Elementwise `max(a, 0)`."""

    name = "coco.relu"
    FLOAT_ONLY: ClassVar[bool] = False


@irdl_op_definition
class GeluOp(ElementwiseUnaryOp):
    """Elementwise GELU, tanh approximation:
    `0.5 x (1 + tanh(0.7978845608 (x + 0.044715 x^3)))`."""

    name = "coco.gelu"


@irdl_op_definition
class ConvertOp(InferredResultOp):
    """`coco.convert %a`: element type change; shape and layout are kept."""

    name = "coco.convert"

    operand = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure(), ConvertOpHasCanonicalizationPatterns())
    assembly_format = "$operand attr-dict `:` functional-type(operands, results)"

    def __init__(
        self,
        operand: SSAValue | Operation,
        element_type: Attribute | str,
        *,
        name: str | None = None,
    ):
        value = SSAValue.get(operand)
        element_type = _as_element_type(element_type)
        result_type = inferred_by(
            self.name,
            lambda: as_tensor_type(value, "operand").with_element_type(element_type),
        )
        super().__init__(
            operands=[value], result_types=[result_type], attributes=_name_attr(name)
        )

    def inferred_type(self) -> TensorType:
        operand = as_tensor_type(self.operand, "operand")
        result = as_tensor_type(self.result, "result")
        return operand.with_element_type(result.element_type)


I32_RANGE = range(-(2**31), 2**31)


FLOAT_BIT_FORMATS: dict[str, tuple[str, int]] = {
    "f16": ("<e", 2),
    "f32": ("<f", 4),
    "f64": ("<d", 8),
}
"""struct formats for the bit patterns of the float element types (bf16 is the
upper half of an f32)."""


def float_from_bits(bits: int, element_type: Attribute) -> float:
    """The float whose bit pattern in `element_type` is `bits` (MLIR's meaning of
    a hexadecimal float literal)."""
    name = element_type_name(element_type)
    if name == "bf16":
        return float_from_bits(bits << 16, f32)
    fmt, size = FLOAT_BIT_FORMATS[name]
    return struct.unpack(fmt, bits.to_bytes(size, "little"))[0]


def float_bits(value: float, element_type: Attribute) -> str:
    """`0x...`: the bit pattern of `value` in `element_type`, as MLIR prints
    non-finite floats."""
    name = element_type_name(element_type)
    if name == "bf16":
        return f"0x{int(float_bits(value, f32), 16) >> 16:04X}"
    fmt, size = FLOAT_BIT_FORMATS[name]
    bits = int.from_bytes(struct.pack(fmt, value), "little")
    return f"0x{bits:0{2 * size}X}"


@irdl_op_definition
class ConstantOp(CocoOp):
    """`coco.constant VALUE : !coco.tensor<ELT, replicated>`: a rank-0
    replicated constant.

    VALUE is a float literal for a float ELT (an integer literal is accepted and
    printed as a float; a hexadecimal literal is the bit pattern in ELT, as MLIR
    reads it and as inf and nan print), an integer for i32, `true`/`false` (or
    1/0) for i1. The value is stored as an f64 or i64 property `value`.
    """

    name = "coco.constant"

    value = prop_def(FloatAttr | IntegerAttr)
    result = result_def(TensorType)

    traits = traits_def(Pure())

    def __init__(
        self,
        value: float | int | bool,
        element_type: Attribute | str = f32,
        *,
        name: str | None = None,
    ):
        element_type = _as_element_type(element_type)
        super().__init__(
            result_types=[TensorType([], element_type, REPLICATED)],
            properties={"value": self.make_value(value, element_type)},
            attributes=_name_attr(name),
        )

    @staticmethod
    def make_value(value: float | int | bool, element_type: Attribute) -> Attribute:
        if is_float(element_type):
            return FloatAttr(float(value), f64)
        return IntegerAttr(int(value), i64)

    @property
    def python_value(self) -> float | int:
        return self.value.value.data

    def verify_types(self) -> None:
        result = as_tensor_type(self.result, "result")
        if result.rank != 0 or not result.layout.is_replicated:
            raise LayoutError(
                f"result must be a rank-0 replicated tensor, got {result}"
            )
        problem = self.value_problem(self.python_value, result.element_type)
        if problem is not None:
            raise LayoutError(problem)

    @staticmethod
    def value_problem(value: float | int, element_type: Attribute) -> str | None:
        """Why `value` cannot be a constant of `element_type`, or None."""
        if is_float(element_type):
            return None
        if isinstance(value, float):
            return (
                f"value {value} is not an integer but the element type is "
                f"{element_type}"
            )
        if element_type == i1 and value not in (0, 1):
            return f"an i1 value must be true or false (1 or 0), got {value}"
        if element_type == i32 and value not in I32_RANGE:
            return f"value {value} does not fit in i32"
        return None

    @staticmethod
    def literal_problem(literal: str, element_type: Attribute) -> str | None:
        """Why the literal's spelling does not suit `element_type`, or None."""
        if literal in ("true", "false") and element_type != i1:
            return f"{literal} is only a value of i1, not of {element_type}"
        if not literal.startswith("0x") or not is_float(element_type):
            return None
        digits = len(literal) - 2
        width = element_type.bitwidth // 4  # pyright: ignore[reportAttributeAccessIssue]
        if digits != width:
            return (
                f"hexadecimal value {literal} must have {width} digits, the bit "
                f"pattern of {element_type}"
            )
        return None

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        at = parser.pos
        number = parser.parse_number(allow_boolean=True, context_msg=" as the value")
        literal = _literal_text(parser, at).lower()
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        type_at = parser.pos
        result_type = parser.parse_type()
        if not isinstance(result_type, TensorType):
            parser.raise_error(
                f"coco.constant must have a !coco.tensor type, got {result_type}",
                type_at,
            )
        element_type = result_type.element_type
        problem = cls.literal_problem(literal, element_type)
        if problem is None and literal.startswith("0x") and is_float(element_type):
            number = float_from_bits(int(literal, 16), element_type)
        if problem is not None:
            parser.raise_error(f"coco.constant {problem}", at)
        # A float literal for an integer type stays a float: the verifier says why
        # it does not fit, as it does for the generic form.
        value = (
            FloatAttr(float(number), f64)
            if isinstance(number, float)
            else cls.make_value(number, element_type)
        )
        return cls.create(
            properties={"value": value},
            attributes=attributes,
            result_types=[result_type],
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        value = self.python_value
        element_type = as_tensor_type(self.result, "result").element_type
        if isinstance(self.value, FloatAttr) and not math.isfinite(value):
            printer.print_string(float_bits(value, element_type))
        elif isinstance(self.value, FloatAttr):
            printer.print_float(float(value), f64)
        elif element_type == i1:
            printer.print_string("true" if value else "false")
        else:
            printer.print_string(str(value))
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)


@irdl_op_definition
class DropoutOp(CocoOp):
    """`coco.dropout %a p = P seed = S`: `a * keep / (1 - p)` with
    `keep = u(seed, i) >= p` at the element's global linear index `i`.

    `p` is an f64 property in [0, 1) (an integer literal such as `p = 0` is
    accepted); `seed` a non-negative i64."""

    name = "coco.dropout"

    operand = operand_def(TensorType)
    result = result_def(TensorType)
    p = prop_def(FloatAttr[Float64Type])
    seed = prop_def(IntegerAttr[I64])

    traits = traits_def(Pure())

    def __init__(
        self,
        operand: SSAValue | Operation,
        p: float,
        seed: int,
        *,
        name: str | None = None,
    ):
        value = SSAValue.get(operand)
        super().__init__(
            operands=[value],
            result_types=[
                inferred_by(self.name, lambda: as_tensor_type(value, "operand"))
            ],
            properties={"p": FloatAttr(float(p), f64), "seed": IntegerAttr(seed, i64)},
            attributes=_name_attr(name),
        )

    @property
    def probability(self) -> float:
        return self.p.value.data

    def verify_types(self) -> None:
        operand = as_tensor_type(self.operand, "operand")
        if not is_float(operand.element_type):
            raise LayoutError(
                f"needs a floating-point operand, got {operand.element_type}"
            )
        if not 0.0 <= self.probability < 1.0:
            raise LayoutError(
                f"probability must satisfy 0 <= p < 1, got p = {self.probability}"
            )
        if self.seed.value.data < 0:
            raise LayoutError(f"seed must be >= 0, got {self.seed.value.data}")
        check_result_type(self.name, self.result.type, operand)

    @classmethod
    def parse(cls, parser: Parser) -> DropoutOp:
        operand = parser.parse_unresolved_operand()
        _, p = _parse_keyword_value(parser, "p")
        seed_at, seed = _parse_keyword_value(parser, "seed")
        if not isinstance(seed, int):
            parser.raise_error(
                f"coco.dropout seed must be an integer, got {seed}", seed_at
            )
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        type_at = parser.pos
        function_type = parser.parse_function_type()
        (value,) = parser.resolve_operands(
            [operand], function_type.inputs.data, type_at
        )
        return cls.create(
            operands=[value],
            result_types=function_type.outputs.data,
            properties={"p": FloatAttr(float(p), f64), "seed": IntegerAttr(seed, i64)},
            attributes=attributes,
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.operand)
        printer.print_string(" p = ")
        printer.print_float(self.probability, f64)
        printer.print_string(f" seed = {self.seed.value.data}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_function_type([self.operand.type], [self.result.type])


@irdl_op_definition
class ReduceOp(InferredResultOp):
    """`coco.reduce %a kind = K dims = [...]`: reduce over the given dims
    (removed from the shape)."""

    name = "coco.reduce"

    operand = operand_def(TensorType)
    result = result_def(TensorType)
    kind = prop_def(ReduceKindAttr)
    dims = prop_def(DenseArrayBase[I64])

    traits = traits_def(Pure())
    assembly_format = (
        "$operand `kind` `=` $kind `dims` `=` $dims attr-dict `:` "
        "functional-type(operands, results)"
    )

    def __init__(
        self,
        operand: SSAValue | Operation,
        kind: ReduceKind | str,
        dims: Sequence[int],
        *,
        name: str | None = None,
    ):
        value = SSAValue.get(operand)
        result_type = inferred_by(
            self.name, lambda: self.infer(as_tensor_type(value, "operand"), dims)
        )
        super().__init__(
            operands=[value],
            result_types=[result_type],
            properties={
                "kind": ReduceKindAttr(ReduceKind(kind)),
                "dims": DenseArrayBase.from_list(i64, dims),
            },
            attributes=_name_attr(name),
        )

    @property
    def reduced_dims(self) -> tuple[int, ...]:
        return self.dims.get_values()

    @staticmethod
    def infer(operand: TensorType, dims: Sequence[int]) -> TensorType:
        if operand.element_type == i1:
            raise LayoutError("does not take an i1 operand (i1 is not arithmetic)")
        return infer_reduce(operand, dims)

    def inferred_type(self) -> TensorType:
        return self.infer(as_tensor_type(self.operand, "operand"), self.reduced_dims)


@irdl_op_definition
class NormOp(UnaryOp):
    """`coco.norm %a`: L2 norm `sqrt(sum(a*a))` over all elements, rank 0.

    The operand must be replicated or local; the result has its layout."""

    name = "coco.norm"

    @classmethod
    def infer(cls, operand: TensorType) -> TensorType:
        if operand.layout.is_sliced:
            raise LayoutError(
                f"operand must be replicated or local, got {operand.layout} (the "
                "norm of a sliced value is sqrt(all_reduce(reduce(a*a))))"
            )
        if not is_float(operand.element_type):
            raise LayoutError(
                f"needs a floating-point operand, got {operand.element_type}"
            )
        return TensorType([], operand.element_type, operand.layout)


@irdl_op_definition
class MatmulOp(BinaryOp):
    """`coco.matmul %a, %b`: `a: [..., K]` times `b: [K, M]` gives `[..., M]`."""

    name = "coco.matmul"

    @classmethod
    def infer(cls, lhs: TensorType, rhs: TensorType) -> TensorType:
        check_same_element_type("coco.matmul", [lhs, rhs])
        if lhs.element_type == i1:
            raise LayoutError("does not take i1 operands (i1 is not arithmetic)")
        return infer_matmul(lhs, rhs)


@irdl_op_definition
class AllSliceOp(InferredResultOp):
    """`coco.all_slice %a dim = D`: replicated → sliced<D>, each rank keeps its
    block. No communication."""

    name = "coco.all_slice"

    operand = operand_def(TensorType)
    result = result_def(TensorType)
    dim = prop_def(IntegerAttr[I64])

    traits = traits_def(Pure(), AllSliceOpHasCanonicalizationPatterns())
    assembly_format = (
        "$operand `dim` `=` $dim attr-dict `:` functional-type(operands, results)"
    )

    def __init__(
        self, operand: SSAValue | Operation, dim: int, *, name: str | None = None
    ):
        value = SSAValue.get(operand)
        result_type = inferred_by(
            self.name, lambda: self.infer(as_tensor_type(value, "operand"), dim)
        )
        super().__init__(
            operands=[value],
            result_types=[result_type],
            properties={"dim": IntegerAttr(dim, i64)},
            attributes=_name_attr(name),
        )

    @staticmethod
    def infer(operand: TensorType, dim: int) -> TensorType:
        if not operand.layout.is_replicated:
            raise LayoutError(f"operand must be replicated, got {operand.layout}")
        check_dim_in_range("dim", dim, operand)
        return operand.with_layout(LayoutAttr.sliced(dim))

    def inferred_type(self) -> TensorType:
        operand = as_tensor_type(self.operand, "operand")
        return self.infer(operand, self.dim.value.data)


@irdl_op_definition
class UpdateOp(CocoOp):
    """`coco.update %param, %value : T`: at function exit the parameter's buffer
    holds `value`. `param` is an argument of the enclosing function, updated at
    most once; `value` has its type."""

    name = "coco.update"

    param = operand_def(TensorType)
    value = operand_def(TensorType)

    def __init__(
        self,
        param: SSAValue | Operation,
        value: SSAValue | Operation,
        *,
        name: str | None = None,
    ):
        super().__init__(
            operands=[SSAValue.get(param), SSAValue.get(value)],
            attributes=_name_attr(name),
        )

    def verify_types(self) -> None:
        if self.param.type != self.value.type:
            raise LayoutError(
                f"value type {self.value.type} must equal the parameter type "
                f"{self.param.type}"
            )
        func = self.parent_op()
        param = self.param
        if (
            not isinstance(func, FuncOp)
            or not isinstance(param, BlockArgument)
            or param.owner is not func.body.block
        ):
            raise LayoutError(
                "parameter must be an argument of the enclosing function (and the "
                "update must sit directly in its body)"
            )
        updates = [
            use.operation
            for use in param.uses
            if isinstance(use.operation, UpdateOp) and use.index == 0
        ]
        if len(updates) > 1:
            which = f"%{param.name_hint}" if param.name_hint else f"#{param.index}"
            raise LayoutError(
                f"parameter {which} is updated {len(updates)} times; a parameter "
                "may be updated by at most one coco.update"
            )

    @classmethod
    def parse(cls, parser: Parser) -> UpdateOp:
        param = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        value = parser.parse_unresolved_operand()
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        type_at = parser.pos
        param_type = parser.parse_type()
        operands = parser.resolve_operands(
            [param, value], [param_type, param_type], type_at
        )
        return cls.create(operands=list(operands), attributes=attributes)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.param)
        printer.print_string(", ")
        printer.print_operand(self.value)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.param.type)


ELEMENTWISE_OPS = (
    ElementwiseBinaryOp,
    ElementwiseUnaryOp,
    CmpOp,
    SelectOp,
    ConvertOp,
    DropoutOp,
)
"""The compute ops that work element by element: they run unchanged on slices
and chunks (dropout too: its mask is drawn at global indices)."""


# ============================================================================
# Communication ops
# ============================================================================


class CollectiveOp(InferredResultOp, ABC):
    """A collective: every rank of the group takes part; `: T_in -> T_out`."""

    operand = operand_def(TensorType)
    result = result_def(TensorType)

    @abstractmethod
    def expected_result(self, operand: TensorType) -> TensorType:
        """The result type the collective's rule gives for `operand`."""

    def inferred_type(self) -> TensorType:
        return self.expected_result(as_tensor_type(self.operand, "operand"))


def require_layout(operand: TensorType, *allowed: str) -> None:
    """The operand's layout kind must be one of `allowed`."""
    if operand.layout.kind.data not in allowed:
        raise LayoutError(
            f"operand must be {' or '.join(allowed)}, got {operand.layout}"
        )


def all_reduce_result(operand: TensorType) -> TensorType:
    require_layout(operand, LayoutKind.LOCAL, LayoutKind.REPLICATED)
    return operand.with_layout(REPLICATED)


def reduce_scatter_result(operand: TensorType, dim: int) -> TensorType:
    require_layout(operand, LayoutKind.LOCAL)
    check_dim_in_range("dim", dim, operand)
    return operand.with_layout(LayoutAttr.sliced(dim))


def all_gather_result(operand: TensorType) -> TensorType:
    require_layout(operand, LayoutKind.SLICED)
    return operand.with_layout(REPLICATED)


def broadcast_result(operand: TensorType) -> TensorType:
    require_layout(operand, LayoutKind.LOCAL)
    return operand.with_layout(REPLICATED)


def all_to_all_result(operand: TensorType, dim: int) -> TensorType:
    require_layout(operand, LayoutKind.SLICED)
    check_dim_in_range("dim", dim, operand)
    return operand.with_layout(LayoutAttr.sliced(dim))


@irdl_op_definition
class AllReduceOp(CollectiveOp):
    """`coco.all_reduce %a reduction = R`: local or replicated → replicated,
    the reduction over ranks."""

    name = "coco.all_reduce"

    reduction = prop_def(ReductionKindAttr)
    traits = traits_def(AllReduceOpHasCanonicalizationPatterns())
    assembly_format = (
        "$operand `reduction` `=` $reduction attr-dict `:` type($operand) `->` "
        "type($result)"
    )

    def __init__(
        self,
        operand: SSAValue | Operation,
        reduction: ReductionKind | str = ReductionKind.SUM,
        *,
        name: str | None = None,
    ):
        value = SSAValue.get(operand)
        result_type = inferred_by(
            self.name, lambda: all_reduce_result(as_tensor_type(value, "operand"))
        )
        super().__init__(
            operands=[value],
            result_types=[result_type],
            properties={"reduction": ReductionKindAttr(ReductionKind(reduction))},
            attributes=_name_attr(name),
        )

    def expected_result(self, operand: TensorType) -> TensorType:
        return all_reduce_result(operand)


@irdl_op_definition
class ReduceScatterOp(CollectiveOp):
    """`coco.reduce_scatter %a reduction = R dim = D`: local → sliced<D>; rank
    `r` gets block `r` of the reduction over ranks."""

    name = "coco.reduce_scatter"

    reduction = prop_def(ReductionKindAttr)
    dim = prop_def(IntegerAttr[I64])
    assembly_format = (
        "$operand `reduction` `=` $reduction `dim` `=` $dim attr-dict `:` "
        "type($operand) `->` type($result)"
    )

    def __init__(
        self,
        operand: SSAValue | Operation,
        reduction: ReductionKind | str = ReductionKind.SUM,
        dim: int = 0,
        *,
        name: str | None = None,
    ):
        value = SSAValue.get(operand)
        result_type = inferred_by(
            self.name,
            lambda: reduce_scatter_result(as_tensor_type(value, "operand"), dim),
        )
        super().__init__(
            operands=[value],
            result_types=[result_type],
            properties={
                "reduction": ReductionKindAttr(ReductionKind(reduction)),
                "dim": IntegerAttr(dim, i64),
            },
            attributes=_name_attr(name),
        )

    def expected_result(self, operand: TensorType) -> TensorType:
        return reduce_scatter_result(operand, self.dim.value.data)


@irdl_op_definition
class AllGatherOp(CollectiveOp):
    """`coco.all_gather %a`: sliced<D> → replicated, the concatenation of the
    ranks' blocks."""

    name = "coco.all_gather"

    traits = traits_def(AllGatherOpHasCanonicalizationPatterns())
    assembly_format = "$operand attr-dict `:` type($operand) `->` type($result)"

    def __init__(self, operand: SSAValue | Operation, *, name: str | None = None):
        value = SSAValue.get(operand)
        result_type = inferred_by(
            self.name, lambda: all_gather_result(as_tensor_type(value, "operand"))
        )
        super().__init__(
            operands=[value],
            result_types=[result_type],
            attributes=_name_attr(name),
        )

    def expected_result(self, operand: TensorType) -> TensorType:
        return all_gather_result(operand)


@irdl_op_definition
class BroadcastOp(CollectiveOp):
    """`coco.broadcast %a root = K`: local → replicated, rank K's value."""

    name = "coco.broadcast"

    root = prop_def(IntegerAttr[I64])
    assembly_format = (
        "$operand `root` `=` $root attr-dict `:` type($operand) `->` type($result)"
    )

    def __init__(
        self, operand: SSAValue | Operation, root: int = 0, *, name: str | None = None
    ):
        value = SSAValue.get(operand)
        result_type = inferred_by(
            self.name, lambda: broadcast_result(as_tensor_type(value, "operand"))
        )
        super().__init__(
            operands=[value],
            result_types=[result_type],
            properties={"root": IntegerAttr(root, i64)},
            attributes=_name_attr(name),
        )

    def expected_result(self, operand: TensorType) -> TensorType:
        result = broadcast_result(operand)
        root = self.root.value.data
        world = world_size_of(self)
        if root < 0 or (world is not None and root >= world):
            group = f" of {world}" if world is not None else ""
            raise LayoutError(f"root {root} is not a rank of the group{group}")
        return result


@irdl_op_definition
class AllToAllOp(CollectiveOp):
    """`coco.all_to_all %a dim = E`: sliced<D> → sliced<E>, the same global value
    cut along E."""

    name = "coco.all_to_all"

    dim = prop_def(IntegerAttr[I64])
    assembly_format = (
        "$operand `dim` `=` $dim attr-dict `:` type($operand) `->` type($result)"
    )

    def __init__(
        self, operand: SSAValue | Operation, dim: int, *, name: str | None = None
    ):
        value = SSAValue.get(operand)
        result_type = inferred_by(
            self.name,
            lambda: all_to_all_result(as_tensor_type(value, "operand"), dim),
        )
        super().__init__(
            operands=[value],
            result_types=[result_type],
            properties={"dim": IntegerAttr(dim, i64)},
            attributes=_name_attr(name),
        )

    def expected_result(self, operand: TensorType) -> TensorType:
        return all_to_all_result(operand, self.dim.value.data)


# ============================================================================
# Pipelines: send and recv between stages
# ============================================================================


def enclosing_function(op: Operation) -> FuncOp | None:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, FuncOp):
        parent = parent.parent_op()
    return parent


def find_stage(op: Operation, stage: SymbolRefAttr) -> FuncOp:
    """The `func.func` named by a send/recv's stage symbol, in the same module."""
    func = enclosing_function(op)
    module = func.parent_op() if func is not None else None
    if func is None or not isinstance(module, ModuleOp):
        raise LayoutError("must be inside a func.func directly inside a module")
    if stage.nested_references.data:
        raise LayoutError(f"stage must be a flat symbol (@name), got {stage}")
    target = stage.root_reference.data
    for other in module.ops:
        if isinstance(other, FuncOp) and other.sym_name.data == target:
            if other is func:
                raise LayoutError(f"cannot name its own stage @{target}")
            return other
    raise LayoutError(f"names stage @{target}, which is not a function of the module")


@dataclass(frozen=True)
class ChannelEnd:
    """One end of a pipeline channel: (from stage, to stage, channel)."""

    source: str
    dest: str
    channel: int


def channel_of(op: SendOp | RecvOp) -> ChannelEnd:
    """The (source, dest, channel) a send or recv belongs to."""
    here = enclosing_function(op)
    assert here is not None
    there = op.stage.root_reference.data
    if isinstance(op, SendOp):
        return ChannelEnd(here.sym_name.data, there, op.channel.value.data)
    return ChannelEnd(there, here.sym_name.data, op.channel.value.data)


def _ends_in(
    stage: FuncOp, kind: type[SendOp] | type[RecvOp], channel: ChannelEnd
) -> list[Operation]:
    """The sends or recvs of `stage` that belong to `channel`."""
    return [
        op for op in stage.walk() if isinstance(op, kind) and channel_of(op) == channel
    ]


@irdl_op_definition
class SendOp(CocoOp):
    """`coco.send %a to @STAGE channel = C : T`: rank `r` of this stage sends its
    value to rank `r` of stage @STAGE. Exactly one `coco.recv` of type T in
    @STAGE receives from this stage on channel C."""

    name = "coco.send"

    operand = operand_def(TensorType)
    stage = prop_def(SymbolRefAttr, prop_name="to")
    channel = prop_def(IntegerAttr[I64])

    assembly_format = (
        "$operand `to` $to `channel` `=` $channel attr-dict `:` type($operand)"
    )

    def __init__(
        self,
        operand: SSAValue | Operation,
        to: str,
        channel: int = 0,
        *,
        name: str | None = None,
    ):
        super().__init__(
            operands=[SSAValue.get(operand)],
            properties={"to": SymbolRefAttr(to), "channel": IntegerAttr(channel, i64)},
            attributes=_name_attr(name),
        )

    def verify_types(self) -> None:
        dest = find_stage(self, self.stage)
        channel = channel_of(self)
        recvs = _ends_in(dest, RecvOp, channel)
        if len(recvs) != 1:
            raise LayoutError(
                f"needs exactly one coco.recv from @{channel.source} on channel "
                f"{channel.channel} in stage @{channel.dest}, found {len(recvs)}"
            )
        received = recvs[0].results[0].type
        if received != self.operand.type:
            raise LayoutError(
                f"sends {self.operand.type} but the matching coco.recv in "
                f"@{channel.dest} receives {received}"
            )


@irdl_op_definition
class RecvOp(CocoOp):
    """`%b = coco.recv from @STAGE channel = C : T`: receives what rank `r` of
    @STAGE sent on channel C. Exactly one `coco.send` of @STAGE matches."""

    name = "coco.recv"

    result = result_def(TensorType)
    stage = prop_def(SymbolRefAttr, prop_name="from")
    channel = prop_def(IntegerAttr[I64])

    assembly_format = "`from` $from `channel` `=` $channel attr-dict `:` type($result)"

    def __init__(
        self,
        result_type: TensorType,
        source: str,
        channel: int = 0,
        *,
        name: str | None = None,
    ):
        super().__init__(
            result_types=[result_type],
            properties={
                "from": SymbolRefAttr(source),
                "channel": IntegerAttr(channel, i64),
            },
            attributes=_name_attr(name),
        )

    def verify_types(self) -> None:
        source = find_stage(self, self.stage)
        channel = channel_of(self)
        sends = _ends_in(source, SendOp, channel)
        if len(sends) != 1:
            raise LayoutError(
                f"needs exactly one coco.send to @{channel.dest} on channel "
                f"{channel.channel} in stage @{channel.source}, found {len(sends)}"
            )
        sent = sends[0].operands[0].type
        if sent != self.result.type:
            raise LayoutError(
                f"receives {self.result.type} but the matching coco.send in "
                f"@{channel.source} sends {sent}"
            )


# ============================================================================
# Regions created by transformations (COCO_DIALECT.md section 7)
# ============================================================================


def chunk_type(t: TensorType, dim: int, chunks: int) -> TensorType:
    """The type of one of `chunks` equal chunks of `t` along `dim` (-1: whole)."""
    if dim < 0:
        return t
    return t.with_shape([d // chunks if i == dim else d for i, d in enumerate(t.dims)])


def _elementwise_chunk_dim(op: Operation, operand_dims: Sequence[int]) -> int | str:
    """Chunked operands must cut the same (right-aligned) dim of the result; an
    operand passed whole must be broadcast along it."""
    result = as_tensor_type(op.results[0], "result")
    cut_dims = {
        d + result.rank - as_tensor_type(v, "operand").rank
        for v, d in zip(op.operands, operand_dims)
        if d >= 0
    }
    if len(cut_dims) > 1:
        return f"its operands are chunked along different dims {sorted(cut_dims)}"
    if not cut_dims:
        return -1
    dim = cut_dims.pop()
    for v, d in zip(op.operands, operand_dims):
        t = as_tensor_type(v, "operand")
        aligned = dim - result.rank + t.rank
        if d < 0 and aligned >= 0 and t.dims[aligned] != 1:
            return (
                f"operand {t} is passed whole but is not broadcast along the "
                f"chunk dim {dim}"
            )
    return dim


def _matmul_chunk_dim(op: MatmulOp, lhs_dim: int, rhs_dim: int) -> int | str:
    last = as_tensor_type(op.lhs, "lhs").rank - 1
    if lhs_dim == last or rhs_dim == 0:
        return "the contracted dim cannot be chunked"
    if lhs_dim >= 0 and rhs_dim >= 0:
        return "only one matmul operand may be chunked"
    if rhs_dim == 1:
        return last
    return lhs_dim


def _reduce_chunk_dim(op: ReduceOp, dim: int) -> int | str:
    if dim < 0:
        return -1
    if dim in op.reduced_dims:
        return f"it reduces the chunk dim {dim}"
    return dim - sum(1 for d in op.reduced_dims if d < dim)


def result_chunk_dim(op: Operation, operand_dims: Sequence[int]) -> int | str:
    """The dim along which the result of `op` is chunked when its operands are
    chunked along `operand_dims` (-1: whole), or why `op` cannot run on chunks.

    Region ops (a fusion nested in an overlap) are walked by `chunk_dims`."""
    if isinstance(op, ConstantOp):
        return -1
    if isinstance(op, ELEMENTWISE_OPS):
        return _elementwise_chunk_dim(op, operand_dims)
    if isinstance(op, AllSliceOp | CollectiveOp):
        # The result has the operand's shape: a chunk maps to a chunk.
        return operand_dims[0]
    if isinstance(op, MatmulOp):
        return _matmul_chunk_dim(op, *operand_dims)
    if isinstance(op, ReduceOp):
        return _reduce_chunk_dim(op, operand_dims[0])
    if isinstance(op, NormOp) and operand_dims[0] < 0:
        return -1
    return f"'{op.name}' cannot run chunk by chunk"


@dataclass
class ChunkDims:
    """Which dim of each value of a chunked body is cut (-1: the value is
    whole), as `chunk_dims` propagates it from the block arguments."""

    dims: dict[SSAValue, int]
    problem: tuple[Operation, str] | None = None
    """The first op that cannot run on chunks, and why (propagation stops)."""


def chunk_dims(block: Block, arg_dims: Sequence[int]) -> ChunkDims:
    """Propagate chunk dims from a block's arguments through its ops (into
    nested fusion regions too): what element of the un-chunked value each
    element of a chunk is, so that dropout keeps its global index."""
    found = ChunkDims(dict(zip(block.args, arg_dims)))
    for op in block.ops:
        if isinstance(op, YieldOp):
            continue
        operand_dims = [found.dims.get(v, -1) for v in op.operands]
        if isinstance(op, FusionOp):
            inner = chunk_dims(op.block, operand_dims)
            found.dims.update(inner.dims)
            if inner.problem is not None:
                found.problem = inner.problem
                return found
            found.dims.update(
                (r, inner.dims.get(v, -1))
                for r, v in zip(op.results, op.yield_op.values)
            )
            continue
        dim = result_chunk_dim(op, operand_dims)
        if isinstance(dim, str):
            found.problem = (op, dim)
            return found
        found.dims.update((r, dim) for r in op.results)
    return found


def _check_types(
    what: str, actual: Sequence[Attribute], expected: Sequence[TensorType]
) -> None:
    """The `what` types (block arguments, yielded values) must be `expected`."""
    if list(actual) != list(expected):
        raise LayoutError(
            f"{what} types must be ({', '.join(map(str, expected))}), got "
            f"({', '.join(map(str, actual))})"
        )


class RegionOp(CocoOp, ABC):
    """An op holding one block that reads only its own arguments (its inputs,
    bound to block arguments) and ends in `coco.yield`."""

    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    body = region_def("single_block")

    traits = traits_def(IsolatedFromAbove())

    @property
    def block(self) -> Block:
        return self.body.block

    @property
    def yield_op(self) -> YieldOp:
        terminator = self.block.last_op
        if not isinstance(terminator, YieldOp):
            raise LayoutError("the region must end with coco.yield")
        return terminator

    def expected_argument_types(self) -> list[TensorType]:
        return [as_tensor_type(v, "input") for v in self.inputs]

    def expected_yield_types(self) -> list[TensorType]:
        return [as_tensor_type(r, "output") for r in self.outputs]

    def verify_types(self) -> None:
        _check_types(
            "block argument",
            [a.type for a in self.block.args],
            self.expected_argument_types(),
        )
        _check_types(
            "coco.yield",
            [v.type for v in self.yield_op.values],
            self.expected_yield_types(),
        )


@irdl_op_definition
class FusionOp(RegionOp):
    """`coco.fusion (%in...) : (T...) -> (R...) { ^bb0(...): ... coco.yield }`:
    ops that the lowering turns into one kernel — a reduce_scatter, elementwise
    compute on the slices and an all_gather (CoCoNet's fused all-reduce), an
    elementwise chain, or reduce_scatter + compute + send. Its meaning is the
    body's, run once."""

    name = "coco.fusion"

    assembly_format = (
        "` ` `(` $inputs `)` attr-dict `:` functional-type($inputs, $outputs) $body"
    )


@irdl_op_definition
class OverlapOp(RegionOp):
    """`coco.overlap chunks = K (%in...) dims = [...] -> [...] : ... { ... }`:
    the body runs `K` times, chunk by chunk, so that chunk `c+1`'s compute can
    overlap chunk `c`'s communication. Input `i` is cut into `K` equal chunks
    along `input_dims[i]` (-1: passed whole); the body sees one chunk; output
    `j` is the concatenation of the chunks the body yields, along
    `output_dims[j]` (every output is chunked). A chunk dimension is never a
    sliced dimension."""

    name = "coco.overlap"

    chunks = prop_def(IntegerAttr[I64])
    input_dims = prop_def(DenseArrayBase[I64])
    output_dims = prop_def(DenseArrayBase[I64])

    assembly_format = (
        "`chunks` `=` $chunks ` ` `(` $inputs `)` `dims` `=` $input_dims `->` "
        "$output_dims attr-dict `:` functional-type($inputs, $outputs) $body"
    )

    @property
    def chunk_count(self) -> int:
        return self.chunks.value.data

    def expected_argument_types(self) -> list[TensorType]:
        return [
            chunk_type(t, d, self.chunk_count)
            for t, d in zip(
                super().expected_argument_types(), self.input_dims.get_values()
            )
        ]

    def expected_yield_types(self) -> list[TensorType]:
        return [
            chunk_type(t, d, self.chunk_count)
            for t, d in zip(
                super().expected_yield_types(), self.output_dims.get_values()
            )
        ]

    def verify_types(self) -> None:
        if self.chunk_count < 1:
            raise LayoutError(f"chunks must be >= 1, got {self.chunk_count}")
        for what, values, dims in (
            ("input", self.inputs, self.input_dims.get_values()),
            ("output", self.outputs, self.output_dims.get_values()),
        ):
            if len(dims) != len(values):
                raise LayoutError(
                    f"{len(values)} {what}s need {len(values)} chunk dims, "
                    f"got {len(dims)}"
                )
            for value, dim in zip(values, dims):
                self._check_chunk_dim(what, as_tensor_type(value, what), dim)
        super().verify_types()

    def _check_chunk_dim(self, what: str, t: TensorType, dim: int) -> None:
        if dim == -1 and what == "input":
            return
        check_dim_in_range(f"{what} chunk dim", dim, t)
        if t.layout.is_sliced and t.layout.sliced_dim == dim:
            raise LayoutError(
                f"an {what} cannot be chunked along its sliced dimension ({t})"
            )
        if t.dims[dim] % self.chunk_count:
            raise LayoutError(
                f"dimension {dim} of {what} {t} (size {t.dims[dim]}) is not "
                f"divisible into {self.chunk_count} chunks"
            )


@irdl_op_definition
class YieldOp(IRDLOperation):
    """`coco.yield %v... : T...`: the values a fusion or overlap region gives."""

    name = "coco.yield"

    values = var_operand_def(TensorType)

    traits = traits_def(IsTerminator(), HasParent(FusionOp, OverlapOp), Pure())
    assembly_format = "attr-dict ($values^ `:` type($values))?"

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[[SSAValue.get(v) for v in values]])


Coco = Dialect(
    "coco",
    [
        AddOp,
        SubOp,
        MulOp,
        DivOp,
        MaxOp,
        MinOp,
        PowOp,
        CmpOp,
        SelectOp,
        NegOp,
        AbsOp,
        SqrtOp,
        RsqrtOp,
        ExpOp,
        LogOp,
        TanhOp,
        ReluOp,
        GeluOp,
        ConvertOp,
        ConstantOp,
        DropoutOp,
        ReduceOp,
        NormOp,
        MatmulOp,
        AllSliceOp,
        UpdateOp,
        AllReduceOp,
        ReduceScatterOp,
        AllGatherOp,
        BroadcastOp,
        AllToAllOp,
        SendOp,
        RecvOp,
        FusionOp,
        OverlapOp,
        YieldOp,
    ],
    [
        TensorType,
        LayoutAttr,
        ReductionKindAttr,
        ReduceKindAttr,
        ComparePredicateAttr,
    ],
)
