"""The `coco` dialect: distributed tensors, compute ops and collectives.

This is COCO_DIALECT.md made executable. A `!coco.tensor<SHAPE x ELT, LAYOUT>`
carries its distribution in its type; every compute op infers its result type
from its operands by the layout rules (section "Layout inference" below), and
its verifier rejects a result type that disagrees. Collectives are the only ops
that communicate; `coco.send`/`coco.recv` connect the stages of a pipeline.

When the enclosing module carries `coco.world_size = N`, verifiers also check
that every sliced dimension is divisible by `N`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
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
    Dialect,
    Operation,
    ParametrizedAttribute,
    SpacedOpaqueSyntaxAttribute,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException
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


def is_float(element_type: Attribute) -> bool:
    return isinstance(element_type, FLOAT_TYPES)


def element_type_name(element_type: Attribute) -> str:
    for name, elt in ELEMENT_TYPES.items():
        if elt == element_type:
            return name
    raise ValueError(f"not a coco element type: {element_type}")


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
            raise VerifyException(f"unknown layout '{self.kind.data}'")
        if self.is_sliced != (self.dim.data >= 0):
            raise VerifyException("only a sliced layout has a dimension")

    def __str__(self) -> str:
        if self.is_sliced:
            return f"sliced<{self.sliced_dim}>"
        return self.kind.data

    @classmethod
    def parse_layout(cls, parser: AttrParser) -> LayoutAttr:
        kind = parser.parse_str_enum(LayoutKind)
        if kind != LayoutKind.SLICED:
            return LayoutAttr(StringAttr(kind), IntAttr(-1))
        parser.parse_punctuation("<", " after 'sliced'")
        dim = parser.parse_integer(allow_boolean=False, allow_negative=False)
        parser.parse_punctuation(">", " to close 'sliced<'")
        return LayoutAttr.sliced(dim)


REPLICATED = LayoutAttr.replicated()
LOCAL = LayoutAttr.local()


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
        if self.element_type not in ELEMENT_TYPES.values():
            raise VerifyException(
                f"!coco.tensor element type must be one of "
                f"{', '.join(ELEMENT_TYPES)}, got {self.element_type}"
            )
        if any(d < 1 for d in self.dims):
            raise VerifyException(
                f"!coco.tensor dimensions must be static and positive, got {self.dims}"
            )
        if self.layout.is_sliced and self.layout.sliced_dim >= self.rank:
            raise VerifyException(
                f"sliced<{self.layout.sliced_dim}> is out of range for a tensor "
                f"of rank {self.rank}"
            )

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        parser.parse_punctuation("<", " to open !coco.tensor")
        shape, element_type = parser.parse_ranked_shape()
        parser.parse_punctuation(",", " between the element type and the layout")
        layout = LayoutAttr.parse_layout(parser)
        parser.parse_punctuation(">", " to close !coco.tensor")
        return [ArrayAttr(IntAttr(d) for d in shape), element_type, layout]

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            for d in self.dims:
                printer.print_string(f"{d}x")
            printer.print_attribute(self.element_type)
            printer.print_string(f", {self.layout}")


def tensor(shape: Sequence[int], element_type: Attribute | str, layout: LayoutAttr) -> TensorType:
    """Shorthand: `tensor([1024], "f32", LOCAL)`."""
    if isinstance(element_type, str):
        element_type = ELEMENT_TYPES[element_type]
    return TensorType(shape, element_type, layout)


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
    """How a collective combines the ranks' values: `sum`, `prod`, `max`, `min`."""

    name = "coco.reduction"


class ReduceKind(StrEnum):
    SUM = auto()
    MAX = auto()
    MIN = auto()


@irdl_attr_definition
class ReduceKindAttr(EnumAttribute[ReduceKind], SpacedOpaqueSyntaxAttribute):
    """How `coco.reduce` combines elements: `sum`, `max`, `min`."""

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
    """The predicate of `coco.cmp`: `eq ne lt le gt ge`."""

    name = "coco.predicate"


# ============================================================================
# Layout inference
#
# Each rule takes operand types and returns the result type, or raises a
# LayoutError whose message names the rule. Builders call them to compute result
# types; verifiers call them to check the declared one.
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
                f"shapes {', '.join(str(list(s)) for s in shapes)} do not broadcast "
                f"(dimension {axis} has sizes {sorted(sizes)})"
            )
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


def elementwise_layout(types: Sequence[TensorType], result_rank: int) -> LayoutAttr:
    """The layout rule for elementwise ops.

    Equal layouts keep it; `replicated` takes the layout of the other operands;
    sliced operands must cut the same (right-aligned) result dimension and must
    not be broadcast along it; `local` with `sliced` is an error.
    """
    sliced_dims: set[int] = set()
    has_local = False
    for t in types:
        if t.layout.is_local:
            has_local = True
        elif t.layout.is_sliced:
            aligned = t.layout.sliced_dim + result_rank - t.rank
            sliced_dims.add(aligned)
    if has_local and sliced_dims:
        raise LayoutError("a local operand cannot be combined with a sliced one")
    if len(sliced_dims) > 1:
        raise LayoutError(
            "sliced operands must be sliced along the same dimension of the "
            f"result, got dimensions {sorted(sliced_dims)}"
        )
    if has_local:
        return LOCAL
    if not sliced_dims:
        return REPLICATED
    dim = sliced_dims.pop()
    return LayoutAttr.sliced(dim)


def infer_elementwise(
    types: Sequence[TensorType], result_element_type: Attribute | None = None
) -> TensorType:
    shape = broadcast_shapes([t.dims for t in types])
    layout = elementwise_layout(types, len(shape))
    if layout.is_sliced:
        for t in types:
            if t.layout.is_sliced and t.dims[t.layout.sliced_dim] != shape[layout.sliced_dim]:
                raise LayoutError(
                    f"a sliced operand cannot be broadcast along its sliced "
                    f"dimension ({t} against result shape {list(shape)})"
                )
    element_type = types[0].element_type
    if result_element_type is None:
        result_element_type = element_type
    return TensorType(shape, result_element_type, layout)


def check_same_element_type(op_name: str, types: Sequence[TensorType]) -> None:
    kinds = {t.element_type for t in types}
    if len(kinds) > 1:
        raise LayoutError(
            f"'{op_name}' operands must have the same element type (use "
            f"coco.convert), got {', '.join(str(t.element_type) for t in types)}"
        )


def infer_reduce(operand: TensorType, dims: Sequence[int]) -> TensorType:
    """Reductions: replicated → replicated, local → local; on sliced<D> a set of
    dims including D gives local partials, excluding D gives sliced (renumbered)."""
    if not dims:
        raise LayoutError("coco.reduce needs at least one dimension")
    if len(set(dims)) != len(dims):
        raise LayoutError(f"coco.reduce dims must be distinct, got {list(dims)}")
    for d in dims:
        if not 0 <= d < operand.rank:
            raise LayoutError(
                f"coco.reduce dim {d} is out of range for rank {operand.rank}"
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


def infer_matmul(lhs: TensorType, rhs: TensorType) -> TensorType:
    """The matmul table of COCO_DIALECT.md section 3."""
    if lhs.rank < 2 or rhs.rank != 2:
        raise LayoutError(
            "coco.matmul needs a lhs of rank >= 2 and a rhs of rank 2, got ranks "
            f"{lhs.rank} and {rhs.rank}"
        )
    if lhs.dims[-1] != rhs.dims[0]:
        raise LayoutError(
            f"coco.matmul contraction sizes differ: lhs {list(lhs.dims)} and rhs "
            f"{list(rhs.dims)}"
        )
    last = lhs.rank - 1
    a, b = lhs.layout, rhs.layout
    layout: LayoutAttr | None = None
    if a.is_replicated and b.is_replicated:
        layout = REPLICATED
    elif a.is_sliced and a.sliced_dim != last and b.is_replicated:
        layout = a
    elif a.is_replicated and b.is_sliced and b.sliced_dim == 1:
        layout = LayoutAttr.sliced(last)
    elif a.is_sliced and a.sliced_dim == last and b.is_sliced and b.sliced_dim == 0:
        layout = LOCAL
    elif a.is_local and b.is_replicated:
        layout = LOCAL
    if layout is None:
        raise LayoutError(
            f"coco.matmul has no layout rule for lhs {a} and rhs {b} (allowed: "
            "replicated x replicated, sliced<d not last> x replicated, replicated "
            "x sliced<1>, sliced<last> x sliced<0>, local x replicated)"
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
        attr = parent.attributes.get("coco.world_size")
        if isinstance(attr, IntegerAttr):
            return attr.value.data
        parent = parent.parent_op()
    return None


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
                f"divisible by the world size {world}"
            )


def as_tensor_type(value: SSAValue, what: str) -> TensorType:
    if not isinstance(value.type, TensorType):
        raise LayoutError(f"{what} must be a !coco.tensor, got {value.type}")
    return value.type


def check_result_type(op_name: str, declared: Attribute, inferred: TensorType) -> None:
    if declared != inferred:
        raise LayoutError(
            f"'{op_name}' result type must be {inferred} by the layout rules, "
            f"got {declared}"
        )


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
        """The op's own type rules; raise LayoutError naming the rule."""


def _name_attr(name: str | None) -> dict[str, Attribute | None]:
    return {"name": StringAttr(name) if name is not None else None}


# ============================================================================
# Compute ops
# ============================================================================


class ElementwiseBinaryOp(CocoOp, ABC):
    """`coco.OP %a, %b`: elementwise with numpy broadcasting of trailing dims."""

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure())
    assembly_format = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)"

    FLOAT_ONLY_BINARY: ClassVar[bool] = False
    """Whether the op only makes sense on floats (e.g. pow)."""

    def __init__(
        self,
        lhs: SSAValue | Operation,
        rhs: SSAValue | Operation,
        *,
        name: str | None = None,
    ):
        lhs_v, rhs_v = SSAValue.get(lhs), SSAValue.get(rhs)
        result_type = self.infer(
            as_tensor_type(lhs_v, "lhs"), as_tensor_type(rhs_v, "rhs")
        )
        super().__init__(
            operands=[lhs_v, rhs_v],
            result_types=[result_type],
            attributes=_name_attr(name),
        )

    @classmethod
    def infer(cls, lhs: TensorType, rhs: TensorType) -> TensorType:
        check_same_element_type(cls.name, [lhs, rhs])
        if lhs.element_type == i1:
            raise LayoutError(f"'{cls.name}' does not take i1 operands")
        if cls.FLOAT_ONLY_BINARY and not is_float(lhs.element_type):
            raise LayoutError(f"'{cls.name}' needs floating-point operands")
        return infer_elementwise([lhs, rhs])

    def verify_types(self) -> None:
        inferred = self.infer(
            as_tensor_type(self.lhs, "lhs"), as_tensor_type(self.rhs, "rhs")
        )
        check_result_type(self.name, self.result.type, inferred)


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
class CmpOp(CocoOp):
    """`coco.cmp %a, %b predicate = P`: elementwise comparison, result `i1`."""

    name = "coco.cmp"

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    predicate = prop_def(ComparePredicateAttr)

    traits = traits_def(Pure())
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
        result_type = self.infer(
            as_tensor_type(lhs_v, "lhs"), as_tensor_type(rhs_v, "rhs")
        )
        super().__init__(
            operands=[lhs_v, rhs_v],
            result_types=[result_type],
            properties={
                "predicate": ComparePredicateAttr(ComparePredicate(predicate))
            },
            attributes=_name_attr(name),
        )

    @staticmethod
    def infer(lhs: TensorType, rhs: TensorType) -> TensorType:
        check_same_element_type("coco.cmp", [lhs, rhs])
        return infer_elementwise([lhs, rhs], result_element_type=i1)

    def verify_types(self) -> None:
        inferred = self.infer(
            as_tensor_type(self.lhs, "lhs"), as_tensor_type(self.rhs, "rhs")
        )
        check_result_type(self.name, self.result.type, inferred)


@irdl_op_definition
class SelectOp(CocoOp):
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
        result_type = self.infer(*(as_tensor_type(v, "operand") for v in values))
        super().__init__(
            operands=values, result_types=[result_type], attributes=_name_attr(name)
        )

    @staticmethod
    def infer(
        condition: TensorType, true_value: TensorType, false_value: TensorType
    ) -> TensorType:
        if condition.element_type != i1:
            raise LayoutError(
                f"coco.select condition must have element type i1, got "
                f"{condition.element_type}"
            )
        check_same_element_type("coco.select", [true_value, false_value])
        return infer_elementwise(
            [condition, true_value, false_value],
            result_element_type=true_value.element_type,
        )

    def verify_types(self) -> None:
        inferred = self.infer(
            *(as_tensor_type(v, "operand") for v in self.operands)
        )
        check_result_type(self.name, self.result.type, inferred)


class ElementwiseUnaryOp(CocoOp, ABC):
    """`coco.OP %a`: elementwise, same type in and out."""

    operand = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure())
    assembly_format = "$operand attr-dict `:` functional-type(operands, results)"

    FLOAT_ONLY: ClassVar[bool] = True

    def __init__(self, operand: SSAValue | Operation, *, name: str | None = None):
        value = SSAValue.get(operand)
        result_type = self.infer(as_tensor_type(value, "operand"))
        super().__init__(
            operands=[value], result_types=[result_type], attributes=_name_attr(name)
        )

    @classmethod
    def infer(cls, operand: TensorType) -> TensorType:
        if cls.FLOAT_ONLY and not is_float(operand.element_type):
            raise LayoutError(f"'{cls.name}' needs a floating-point operand")
        if operand.element_type == i1:
            raise LayoutError(f"'{cls.name}' does not take an i1 operand")
        return operand

    def verify_types(self) -> None:
        inferred = self.infer(as_tensor_type(self.operand, "operand"))
        check_result_type(self.name, self.result.type, inferred)


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
class ConvertOp(CocoOp):
    """`coco.convert %a`: element type change; shape and layout are kept."""

    name = "coco.convert"

    operand = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure())
    assembly_format = "$operand attr-dict `:` functional-type(operands, results)"

    def __init__(
        self,
        operand: SSAValue | Operation,
        element_type: Attribute | str,
        *,
        name: str | None = None,
    ):
        value = SSAValue.get(operand)
        if isinstance(element_type, str):
            element_type = ELEMENT_TYPES[element_type]
        result_type = as_tensor_type(value, "operand").with_element_type(element_type)
        super().__init__(
            operands=[value], result_types=[result_type], attributes=_name_attr(name)
        )

    def verify_types(self) -> None:
        operand = as_tensor_type(self.operand, "operand")
        result = as_tensor_type(self.result, "result")
        check_result_type(
            self.name, result, operand.with_element_type(result.element_type)
        )


@irdl_op_definition
class ConstantOp(CocoOp):
    """`coco.constant VALUE : !coco.tensor<ELT, replicated>`: a rank-0
    replicated constant."""

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
        if isinstance(element_type, str):
            element_type = ELEMENT_TYPES[element_type]
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
                f"coco.constant must be a rank-0 replicated tensor, got {result}"
            )
        if is_float(result.element_type) != isinstance(self.value, FloatAttr):
            raise LayoutError(
                f"coco.constant value {self.python_value} does not fit element "
                f"type {result.element_type}"
            )
        if result.element_type == i1 and self.python_value not in (0, 1):
            raise LayoutError("an i1 coco.constant must be 0 or 1 (false or true)")

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        if parser.parse_optional_keyword("true") is not None:
            number: float | int = 1
        elif parser.parse_optional_keyword("false") is not None:
            number = 0
        else:
            number = parser.parse_number()
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        result_type = parser.parse_type()
        if not isinstance(result_type, TensorType):
            parser.raise_error(f"coco.constant must have a !coco.tensor type, got {result_type}")
        element_type = result_type.element_type
        if isinstance(number, float) and not is_float(element_type):
            parser.raise_error(
                f"coco.constant value {number} is not an integer but the element "
                f"type is {element_type}"
            )
        op = cls.create(
            properties={"value": cls.make_value(number, element_type)},
            attributes=attributes,
            result_types=[result_type],
        )
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        if isinstance(self.value, FloatAttr):
            printer.print_float(self.value.value.data, f64)
        else:
            printer.print_string(str(self.value.value.data))
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)


@irdl_op_definition
class DropoutOp(CocoOp):
    """`coco.dropout %a p = P seed = S`: `a * keep / (1 - p)` with
    `keep = u(seed, i) >= p` at the element's global linear index `i`."""

    name = "coco.dropout"

    operand = operand_def(TensorType)
    result = result_def(TensorType)
    p = prop_def(FloatAttr[Float64Type])
    seed = prop_def(IntegerAttr[I64])

    traits = traits_def(Pure())
    assembly_format = (
        "$operand `p` `=` $p `seed` `=` $seed attr-dict `:` "
        "functional-type(operands, results)"
    )

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
            result_types=[as_tensor_type(value, "operand")],
            properties={"p": FloatAttr(p, f64), "seed": IntegerAttr(seed, i64)},
            attributes=_name_attr(name),
        )

    @property
    def probability(self) -> float:
        return self.p.value.data

    def verify_types(self) -> None:
        operand = as_tensor_type(self.operand, "operand")
        if not is_float(operand.element_type):
            raise LayoutError("coco.dropout needs a floating-point operand")
        if not 0.0 <= self.probability < 1.0:
            raise LayoutError(
                f"coco.dropout probability must satisfy 0 <= p < 1, got {self.probability}"
            )
        if self.seed.value.data < 0:
            raise LayoutError(f"coco.dropout seed must be >= 0, got {self.seed.value.data}")
        check_result_type(self.name, self.result.type, operand)


@irdl_op_definition
class ReduceOp(CocoOp):
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
        result_type = infer_reduce(as_tensor_type(value, "operand"), dims)
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

    def verify_types(self) -> None:
        operand = as_tensor_type(self.operand, "operand")
        if operand.element_type == i1:
            raise LayoutError("coco.reduce does not take an i1 operand")
        inferred = infer_reduce(operand, self.reduced_dims)
        check_result_type(self.name, self.result.type, inferred)


@irdl_op_definition
class NormOp(CocoOp):
    """`coco.norm %a`: L2 norm `sqrt(sum(a*a))` over all elements, rank 0.

    The operand must be replicated or local."""

    name = "coco.norm"

    operand = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure())
    assembly_format = "$operand attr-dict `:` functional-type(operands, results)"

    def __init__(self, operand: SSAValue | Operation, *, name: str | None = None):
        value = SSAValue.get(operand)
        result_type = self.infer(as_tensor_type(value, "operand"))
        super().__init__(
            operands=[value], result_types=[result_type], attributes=_name_attr(name)
        )

    @staticmethod
    def infer(operand: TensorType) -> TensorType:
        if operand.layout.is_sliced:
            raise LayoutError(
                "coco.norm operand must be replicated or local; the norm of a "
                "sliced value is sqrt(all_reduce(reduce(a*a)))"
            )
        if not is_float(operand.element_type):
            raise LayoutError("coco.norm needs a floating-point operand")
        return TensorType([], operand.element_type, operand.layout)

    def verify_types(self) -> None:
        inferred = self.infer(as_tensor_type(self.operand, "operand"))
        check_result_type(self.name, self.result.type, inferred)


@irdl_op_definition
class MatmulOp(CocoOp):
    """`coco.matmul %a, %b`: `a: [..., K]` times `b: [K, M]` gives `[..., M]`."""

    name = "coco.matmul"

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
        result_type = self.infer(
            as_tensor_type(lhs_v, "lhs"), as_tensor_type(rhs_v, "rhs")
        )
        super().__init__(
            operands=[lhs_v, rhs_v],
            result_types=[result_type],
            attributes=_name_attr(name),
        )

    @staticmethod
    def infer(lhs: TensorType, rhs: TensorType) -> TensorType:
        check_same_element_type("coco.matmul", [lhs, rhs])
        if lhs.element_type == i1:
            raise LayoutError("coco.matmul does not take i1 operands")
        return infer_matmul(lhs, rhs)

    def verify_types(self) -> None:
        inferred = self.infer(
            as_tensor_type(self.lhs, "lhs"), as_tensor_type(self.rhs, "rhs")
        )
        check_result_type(self.name, self.result.type, inferred)


@irdl_op_definition
class AllSliceOp(CocoOp):
    """`coco.all_slice %a dim = D`: replicated → sliced<D>, each rank keeps its
    block. No communication."""

    name = "coco.all_slice"

    operand = operand_def(TensorType)
    result = result_def(TensorType)
    dim = prop_def(IntegerAttr[I64])

    traits = traits_def(Pure())
    assembly_format = (
        "$operand `dim` `=` $dim attr-dict `:` functional-type(operands, results)"
    )

    def __init__(
        self, operand: SSAValue | Operation, dim: int, *, name: str | None = None
    ):
        value = SSAValue.get(operand)
        result_type = as_tensor_type(value, "operand").with_layout(
            LayoutAttr.sliced(dim)
        )
        super().__init__(
            operands=[value],
            result_types=[result_type],
            properties={"dim": IntegerAttr(dim, i64)},
            attributes=_name_attr(name),
        )

    def verify_types(self) -> None:
        operand = as_tensor_type(self.operand, "operand")
        if not operand.layout.is_replicated:
            raise LayoutError(
                f"coco.all_slice operand must be replicated, got {operand.layout}"
            )
        dim = self.dim.value.data
        if not 0 <= dim < operand.rank:
            raise LayoutError(
                f"coco.all_slice dim {dim} is out of range for rank {operand.rank}"
            )
        check_result_type(
            self.name, self.result.type, operand.with_layout(LayoutAttr.sliced(dim))
        )


@irdl_op_definition
class UpdateOp(CocoOp):
    """`coco.update %param, %value`: at function exit the parameter's buffer
    holds `value`. `param` is an argument of the enclosing function."""

    name = "coco.update"

    T: ClassVar = VarConstraint("T", base(TensorType))
    param = operand_def(T)
    value = operand_def(T)

    assembly_format = "$param `,` $value attr-dict `:` type($param)"

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
                f"coco.update value type {self.value.type} must equal the "
                f"parameter type {self.param.type}"
            )
        func = self.parent_op()
        block = self.parent_block()
        owner = getattr(self.param, "owner", None)
        if not isinstance(func, FuncOp) or block is None or owner is not func.body.block:
            raise LayoutError(
                "coco.update parameter must be an argument of the enclosing function"
            )
        updates = [u.operation for u in self.param.uses if isinstance(u.operation, UpdateOp) and u.index == 0]
        if len(updates) > 1:
            raise LayoutError("a parameter may be updated by at most one coco.update")


# ============================================================================
# Communication ops
# ============================================================================


class CollectiveOp(CocoOp, ABC):
    """A collective: every rank of the group takes part; `: T_in -> T_out`."""

    operand = operand_def(TensorType)
    result = result_def(TensorType)

    @abstractmethod
    def expected_result(self, operand: TensorType) -> TensorType:
        """The result type the collective's rule gives for `operand`."""

    def verify_types(self) -> None:
        operand = as_tensor_type(self.operand, "operand")
        check_result_type(self.name, self.result.type, self.expected_result(operand))

    def _require_layout(self, operand: TensorType, *allowed: str) -> None:
        if operand.layout.kind.data not in allowed:
            raise LayoutError(
                f"'{self.name}' operand must be {' or '.join(allowed)}, got "
                f"{operand.layout}"
            )


@irdl_op_definition
class AllReduceOp(CollectiveOp):
    """`coco.all_reduce %a reduction = R`: local or replicated → replicated,
    the reduction over ranks."""

    name = "coco.all_reduce"

    reduction = prop_def(ReductionKindAttr)
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
        super().__init__(
            operands=[value],
            result_types=[as_tensor_type(value, "operand").with_layout(REPLICATED)],
            properties={"reduction": ReductionKindAttr(ReductionKind(reduction))},
            attributes=_name_attr(name),
        )

    def expected_result(self, operand: TensorType) -> TensorType:
        self._require_layout(operand, LayoutKind.LOCAL, LayoutKind.REPLICATED)
        return operand.with_layout(REPLICATED)


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
        super().__init__(
            operands=[value],
            result_types=[
                as_tensor_type(value, "operand").with_layout(LayoutAttr.sliced(dim))
            ],
            properties={
                "reduction": ReductionKindAttr(ReductionKind(reduction)),
                "dim": IntegerAttr(dim, i64),
            },
            attributes=_name_attr(name),
        )

    def expected_result(self, operand: TensorType) -> TensorType:
        self._require_layout(operand, LayoutKind.LOCAL)
        dim = self.dim.value.data
        if not 0 <= dim < operand.rank:
            raise LayoutError(
                f"coco.reduce_scatter dim {dim} is out of range for rank {operand.rank}"
            )
        return operand.with_layout(LayoutAttr.sliced(dim))


@irdl_op_definition
class AllGatherOp(CollectiveOp):
    """`coco.all_gather %a`: sliced<D> → replicated, the concatenation of the
    ranks' blocks."""

    name = "coco.all_gather"

    assembly_format = "$operand attr-dict `:` type($operand) `->` type($result)"

    def __init__(self, operand: SSAValue | Operation, *, name: str | None = None):
        value = SSAValue.get(operand)
        super().__init__(
            operands=[value],
            result_types=[as_tensor_type(value, "operand").with_layout(REPLICATED)],
            attributes=_name_attr(name),
        )

    def expected_result(self, operand: TensorType) -> TensorType:
        self._require_layout(operand, LayoutKind.SLICED)
        return operand.with_layout(REPLICATED)


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
        super().__init__(
            operands=[value],
            result_types=[as_tensor_type(value, "operand").with_layout(REPLICATED)],
            properties={"root": IntegerAttr(root, i64)},
            attributes=_name_attr(name),
        )

    def expected_result(self, operand: TensorType) -> TensorType:
        self._require_layout(operand, LayoutKind.LOCAL)
        root = self.root.value.data
        world = world_size_of(self)
        if root < 0 or (world is not None and root >= world):
            raise LayoutError(
                f"coco.broadcast root {root} is not a rank of the group"
                + (f" of {world}" if world is not None else "")
            )
        return operand.with_layout(REPLICATED)


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
        super().__init__(
            operands=[value],
            result_types=[
                as_tensor_type(value, "operand").with_layout(LayoutAttr.sliced(dim))
            ],
            properties={"dim": IntegerAttr(dim, i64)},
            attributes=_name_attr(name),
        )

    def expected_result(self, operand: TensorType) -> TensorType:
        self._require_layout(operand, LayoutKind.SLICED)
        dim = self.dim.value.data
        if not 0 <= dim < operand.rank:
            raise LayoutError(
                f"coco.all_to_all dim {dim} is out of range for rank {operand.rank}"
            )
        return operand.with_layout(LayoutAttr.sliced(dim))


def enclosing_function(op: Operation) -> FuncOp | None:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, FuncOp):
        parent = parent.parent_op()
    return parent


def find_stage(op: Operation, stage: SymbolRefAttr) -> FuncOp:
    """The `func.func` named by a send/recv's stage symbol, in the same module."""
    func = enclosing_function(op)
    module = func.parent_op() if func is not None else None
    if not isinstance(module, ModuleOp) or func is None:
        raise LayoutError(f"'{op.name}' must be inside a func.func inside a module")
    target = stage.root_reference.data
    for other in module.ops:
        if isinstance(other, FuncOp) and other.sym_name.data == target:
            if other is func:
                raise LayoutError(f"'{op.name}' cannot name its own stage @{target}")
            return other
    raise LayoutError(f"'{op.name}' names @{target}, which is not a function of the module")


@dataclass(frozen=True)
class ChannelEnd:
    """One end of a pipeline channel: (from stage, to stage, channel)."""

    source: str
    dest: str
    channel: int


@irdl_op_definition
class SendOp(CocoOp):
    """`coco.send %a to @STAGE channel = C`: rank `r` of this stage sends its
    value to rank `r` of stage @STAGE."""

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
        source = enclosing_function(self)
        assert source is not None
        recvs = [
            op
            for op in dest.walk()
            if isinstance(op, RecvOp)
            and op.stage.root_reference == source.sym_name
            and op.channel == self.channel
        ]
        channel = self.channel.value.data
        if len(recvs) != 1:
            raise LayoutError(
                f"coco.send to @{dest.sym_name.data} on channel {channel} needs "
                f"exactly one matching coco.recv from @{source.sym_name.data}, "
                f"found {len(recvs)}"
            )
        if recvs[0].result.type != self.operand.type:
            raise LayoutError(
                f"coco.send sends {self.operand.type} but the matching coco.recv "
                f"in @{dest.sym_name.data} expects {recvs[0].result.type}"
            )


@irdl_op_definition
class RecvOp(CocoOp):
    """`%b = coco.recv from @STAGE channel = C : T`: receives what rank `r` of
    @STAGE sent on channel C."""

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
        dest = enclosing_function(self)
        assert dest is not None
        sends = [
            op
            for op in source.walk()
            if isinstance(op, SendOp)
            and op.stage.root_reference == dest.sym_name
            and op.channel == self.channel
        ]
        if len(sends) != 1:
            raise LayoutError(
                f"coco.recv from @{source.sym_name.data} on channel "
                f"{self.channel.value.data} needs exactly one matching coco.send "
                f"to @{dest.sym_name.data}, found {len(sends)}"
            )


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
    ],
    [
        TensorType,
        LayoutAttr,
        ReductionKindAttr,
        ReduceKindAttr,
        ComparePredicateAttr,
    ],
)
