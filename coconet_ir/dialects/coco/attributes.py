"""The attributes and types of the coco dialect: layouts, `!coco.tensor`, the
enumerated properties of the ops, and the module's world size
(docs/dialect.md, "The distributed tensor type" and "The world size").
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import auto

from xdsl.dialects.builtin import (
    ArrayAttr,
    IntAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    i1,
)
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import (
    Attribute,
    Operation,
    ParametrizedAttribute,
    SpacedOpaqueSyntaxAttribute,
    TypeAttribute,
)
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.lexer import Position, Span
from xdsl.utils.str_enum import StrEnum

from coconet_ir.diagnostics import Diagnostic, LocatedRuleError
from coconet_ir.dialects.coco.element_types import (
    ELEMENT_TYPES,
    as_element_type,
)


class LayoutError(VerifyException):
    """A layout, shape or element-type rule of the dialect is broken.

    `rule` states the rule; when the error comes from building an op,
    `op_name` names the op and `str()` reads `'coco.OP' op RULE`."""

    def __init__(self, rule: str, op_name: str | None = None):
        self.rule = rule
        self.op_name = op_name
        super().__init__(rule if op_name is None else f"'{op_name}' op {rule}")


# ============================================================================
# Layouts and the distributed tensor type
# ============================================================================


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


def _located(parser: AttrParser, at: Position, message: str) -> LocatedRuleError:
    """A type-rule error found while parsing, located like a verifier error."""
    line_offset = getattr(parser, "line_offset", 0)  # a --split-input-file chunk
    where = Span(at, at, parser.lexer.input, line_offset).get_location()
    return LocatedRuleError(Diagnostic.about(str(where), message))


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
    return TensorType(shape, as_element_type(element_type), layout)


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


class Pooling(StrEnum):
    SUM = auto()
    MEAN = auto()
    MAX = auto()


@irdl_attr_definition
class PoolingAttr(EnumAttribute[Pooling], SpacedOpaqueSyntaxAttribute):
    """How `coco.embedding` pools a bag's rows: `sum`, `mean`, `max`.

    Generic form: `#coco<pooling sum>`."""

    name = "coco.pooling"


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
# The world size
# ============================================================================

WORLD_SIZE_ATTR = "coco.world_size"
"""The module attribute that fixes the world size `N` (`coco.world_size = 4 : i64`)."""


def world_size(op: Operation) -> int | None:
    """The world size fixed by `coco.world_size` on `op` or the nearest op
    enclosing it (the module), if any; a LayoutError if the attribute is not a
    positive integer."""
    holder: Operation | None = op
    while holder is not None:
        attr = holder.attributes.get(WORLD_SIZE_ATTR)
        if attr is not None:
            return _world_size_value(attr)
        holder = holder.parent_op()
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
