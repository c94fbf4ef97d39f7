"""The ops of the coco dialect (docs/dialect.md): compute ops, collectives,
pipeline send/recv, and the fusion and overlap regions transformations create.

Every op with a result whose type the layout rules give defines the rule once,
as `infer_result_type` (its builder computes the result type with it, its
verifier checks the declared one against it). Verifier messages state the
broken rule; the diagnostic that reports them names the op and its location.

Effects are declared, so xDSL's generic `dce`, `cse` and `canonicalize` work on
coco: compute ops are `Pure`; a collective has no memory effect (SPMD: every
rank runs the same ops, so a dead or duplicated collective goes on all ranks
together) but is not speculatable (every rank must reach it); `coco.send` and
`coco.recv` write their pipeline channel and `coco.update` its parameter; the
region ops have the effects of their bodies.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any, ClassVar, Self, TypeVar, cast

from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    SymbolRefAttr,
    UnitAttr,
    f64,
    i1,
    i32,
    i64,
)
from xdsl.dialects.func import FuncOp
from xdsl.dialects.utils.format import AbstractYieldOperation
from xdsl.ir import Attribute, Block, BlockArgument, Operation, OpTrait, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_attr_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.pattern_rewriter import RewritePattern
from xdsl.printer import Printer
from xdsl.traits import (
    Commutative,
    EffectInstance,
    HasCanonicalizationPatternsTrait,
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    MemoryEffect,
    MemoryEffectKind,
    NoMemoryEffect,
    Pure,
    RecursiveMemoryEffect,
    Resource,
    SingleBlockImplicitTerminator,
    SymbolTable,
    SymbolUserOpInterface,
)
from xdsl.utils.lexer import Position

from coconet_ir.diagnostics import value_name
from coconet_ir.dialects.coco.attributes import (
    LOCAL,
    REPLICATED,
    ComparePredicate,
    ComparePredicateAttr,
    LayoutAttr,
    LayoutError,
    LayoutKind,
    Pooling,
    PoolingAttr,
    ReduceKind,
    ReduceKindAttr,
    ReductionKind,
    ReductionKindAttr,
    TensorType,
    world_size,
)
from coconet_ir.dialects.coco.element_types import (
    as_element_type,
    element_info,
    is_float,
)
from coconet_ir.dialects.coco.layout import (
    check_dim_in_range,
    check_same_element_type,
    chunk_type,
    infer_batch_matmul,
    infer_elementwise,
    infer_embedding,
    infer_matmul,
    infer_reduce,
    infer_reshape,
    infer_transpose,
    require_layout,
)

# ============================================================================
# Helpers shared by the ops
# ============================================================================


def divisibility_problem(t: Attribute, world: int) -> str | None:
    """Why a value of type `t` cannot live on `world` ranks (its sliced dim is
    not divisible by `world`), or None."""
    if not isinstance(t, TensorType) or not t.layout.is_sliced:
        return None
    size = t.dims[t.layout.sliced_dim]
    if size % world == 0:
        return None
    return (
        f"dimension {t.layout.sliced_dim} of {t} (size {size}) is not divisible "
        f"by the world size {world}"
    )


def check_divisible(op: Operation, types: Sequence[Attribute]) -> None:
    """With a known world size N, every sliced dim must be divisible by N."""
    world = world_size(op)
    if world is None:
        return
    for t in types:
        problem = divisibility_problem(t, world)
        if problem is not None:
            raise LayoutError(f"{problem} (coco.world_size)")


def as_tensor_type(value: SSAValue, what: str = "operand") -> TensorType:
    """The `!coco.tensor` type of a value not yet verified (a builder's
    operand); a LayoutError otherwise."""
    if not isinstance(value.type, TensorType):
        raise LayoutError(f"{what} must be a !coco.tensor, got {value.type}")
    return value.type


def tensor_type(value: SSAValue) -> TensorType:
    """The type of a value of verified IR, where it must be a `!coco.tensor`
    (passes, analyses); `as_tensor_type` is for values not yet verified."""
    assert isinstance(value.type, TensorType)
    return value.type


def label_attribute(label: str | None) -> dict[str, Attribute]:
    """The attributes of an op built with the label `label` (or none)."""
    return {} if label is None else {"name": StringAttr(label)}


def label_of(op: Operation) -> str | None:
    """The label of any op: its `name` attribute if it is a coco op that has
    one (CoCoNet's name for an op, which schedules and `op=` target)."""
    if isinstance(op, CocoOp) and op.label is not None:
        return op.label.data
    return None


class CocoOp(IRDLOperation, ABC):
    """Fields and checks every coco op shares: an optional label (the `name`
    attribute, CoCoNet's name for the op, which passes target with `op=`) and
    the divisibility of sliced dims by a known world size."""

    label = opt_attr_def(StringAttr, attr_name="name")

    def verify_(self) -> None:
        check_divisible(
            self, [*(o.type for o in self.operands), *(r.type for r in self.results)]
        )
        self.verify_types()

    def verify_types(self) -> None:
        """The op's own type rules; raise LayoutError stating the rule."""

    @classmethod
    def define(cls, name: str, doc: str, *traits: OpTrait, **flags: bool) -> type[Self]:
        """The op `name` of this abstract family, documented by `doc`, with its
        own `traits` (on top of the family's) and family `flags` (such as
        `FLOAT_ONLY`): one line per op, as TableGen defines MLIR's elementwise
        ops over a shared class. `coco.add` is the class `AddOp`."""
        class_name = name.removeprefix("coco.").capitalize() + "Op"
        namespace: dict[str, Any] = {
            "__module__": __name__,
            "__qualname__": class_name,
            "__doc__": doc,
            "__annotations__": dict.fromkeys(flags, "ClassVar[bool]"),
            "name": name,
            **flags,
        }
        if traits:
            namespace["traits"] = traits_def(*traits)
        return irdl_op_definition(cast(type[Self], type(class_name, (cls,), namespace)))


_INFERRED: dict[tuple, TensorType] = {}
"""`InferredResultOp.inferred`'s memory: (op class, operand types, options)
→ result type."""
_INFERRED_LIMIT = 1 << 16
"""Signatures remembered before the memory starts over (a bound on memory)."""


class InferredResultOp(CocoOp, ABC):
    """An op with one result whose type the layout rules give from its operand
    types and its options (properties): `infer_result_type` states the rule,
    builders compute the result type with it and the verifier checks the
    declared type against it."""

    @classmethod
    @abstractmethod
    def infer_result_type(cls, *operands: TensorType, **options: Any) -> TensorType:
        """The result type for operands of these types; raises LayoutError."""

    def __init__(
        self,
        operands: Sequence[SSAValue | Operation],
        *,
        properties: Mapping[str, Attribute] | None = None,
        label: str | None = None,
        **options: Any,
    ):
        """The op on `operands` with the result type `infer_result_type` gives
        them and the `options` (the builder's values of the properties it
        reads)."""
        values = [SSAValue.get(v) for v in operands]
        super().__init__(
            operands=values,
            result_types=[self.build_result_type(values, **options)],
            properties=dict(properties or {}),
            attributes=label_attribute(label),
        )

    def inference_options(self) -> dict[str, Any]:
        """The options `infer_result_type` reads, from this op's properties."""
        return {}

    @classmethod
    def build_result_type(
        cls, operands: Sequence[SSAValue], **options: Any
    ) -> TensorType:
        """`infer_result_type` for a builder's operands; the error names the op."""
        try:
            types = tuple(as_tensor_type(v) for v in operands)
            return cls.inferred(types, options)
        except LayoutError as err:
            raise LayoutError(err.rule, cls.name) from None

    @classmethod
    def inferred(
        cls, types: tuple[TensorType, ...], options: Mapping[str, Any]
    ) -> TensorType:
        """`infer_result_type(*types, **options)`, remembered: the rule is a
        function of the types and options, and a program repeats a few
        signatures thousands of times (every op is inferred when built and
        again whenever it is verified; an optimizer repeats one update per
        parameter). Options that cannot be hashed are not remembered, nor
        are broken rules."""
        key = (cls, types, tuple(sorted(options.items())))
        try:
            found = _INFERRED.get(key)
        except TypeError:  # an unhashable option
            return cls.infer_result_type(*types, **options)
        if found is None:
            found = cls.infer_result_type(*types, **options)
            if len(_INFERRED) >= _INFERRED_LIMIT:
                _INFERRED.clear()
            _INFERRED[key] = found
        return found

    def verify_types(self) -> None:
        inferred = self.inferred(
            tuple(as_tensor_type(v) for v in self.operands), self.inference_options()
        )
        declared = self.results[0].type
        if declared != inferred:
            raise LayoutError(
                f"result type must be {inferred} by the layout rules, got {declared}"
            )


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
# Effects and canonicalization patterns (coconet_ir/dialects/coco/
# canonicalization.py, imported lazily as xDSL's arith dialect does)
# ============================================================================


@dataclass(frozen=True)
class PipelineChannelResource(Resource):
    """The pipeline channels between stages, which send and recv act on."""

    def name(self) -> str:
        return "coco.channel"


CHANNELS = PipelineChannelResource()


class SendsOnChannel(MemoryEffect):
    """`coco.send` writes to its channel."""

    @classmethod
    def get_effects(cls, op: Operation) -> Set[EffectInstance]:
        return {EffectInstance(MemoryEffectKind.WRITE, resource=CHANNELS)}


class ReceivesFromChannel(MemoryEffect):
    """`coco.recv` reads a message from its channel and takes it off (a write):
    an unused recv cannot go, two recvs are two messages."""

    @classmethod
    def get_effects(cls, op: Operation) -> Set[EffectInstance]:
        return {
            EffectInstance(MemoryEffectKind.READ, resource=CHANNELS),
            EffectInstance(MemoryEffectKind.WRITE, resource=CHANNELS),
        }


class WritesParameter(MemoryEffect):
    """`coco.update` writes its parameter's buffer."""

    @classmethod
    def get_effects(cls, op: Operation) -> Set[EffectInstance]:
        return {EffectInstance(MemoryEffectKind.WRITE, op.operands[0])}


class CocoCanonicalizationPatterns(HasCanonicalizationPatternsTrait):
    """The entry of `canonicalization.PATTERNS` for the op `OP_NAME`, imported
    lazily as xDSL's arith dialect imports its patterns; `canonicalized(name)`
    makes one for an op."""

    OP_NAME: ClassVar[str]

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        from coconet_ir.dialects.coco.canonicalization import PATTERNS

        return PATTERNS[cls.OP_NAME]


def canonicalized(op_name: str) -> CocoCanonicalizationPatterns:
    """The canonicalization trait of the op `op_name` (a class of its own, as
    xDSL asks the trait's class for its patterns)."""
    name = op_name.removeprefix("coco.").title().replace("_", "")
    trait = type(
        f"{name}OpHasCanonicalizationPatterns",
        (CocoCanonicalizationPatterns,),
        {"OP_NAME": op_name, "__module__": __name__},
    )
    return trait()


# ============================================================================
# Compute ops
# ============================================================================


class BinaryOp(InferredResultOp, ABC):
    """`coco.OP %a, %b`: an op on two tensors."""

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
        properties: Mapping[str, Attribute] | None = None,
        label: str | None = None,
        **options: Any,
    ):
        super().__init__([lhs, rhs], properties=properties, label=label, **options)


class UnaryOp(InferredResultOp, ABC):
    """`coco.OP %a`: an op on one tensor."""

    operand = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure())
    assembly_format = "$operand attr-dict `:` functional-type(operands, results)"

    def __init__(
        self,
        operand: SSAValue | Operation,
        *,
        properties: Mapping[str, Attribute] | None = None,
        label: str | None = None,
        **options: Any,
    ):
        super().__init__([operand], properties=properties, label=label, **options)


class ElementwiseBinaryOp(BinaryOp, ABC):
    """`coco.OP %a, %b`: elementwise with numpy broadcasting of trailing dims."""

    FLOAT_ONLY: ClassVar[bool] = False
    """Whether the op only makes sense on floats (e.g. pow)."""

    @classmethod
    def infer_result_type(cls, lhs: TensorType, rhs: TensorType) -> TensorType:
        check_same_element_type([lhs, rhs])
        if lhs.element_type == i1:
            raise LayoutError(
                "does not take i1 operands (i1 is not arithmetic; use coco.select)"
            )
        if cls.FLOAT_ONLY and not is_float(lhs.element_type):
            raise LayoutError(f"needs floating-point operands, got {lhs.element_type}")
        return infer_elementwise([lhs, rhs])


AddOp = ElementwiseBinaryOp.define("coco.add", "Elementwise `a + b`.", Commutative())
SubOp = ElementwiseBinaryOp.define("coco.sub", "Elementwise `a - b`.")
MulOp = ElementwiseBinaryOp.define("coco.mul", "Elementwise `a * b`.", Commutative())
DivOp = ElementwiseBinaryOp.define(
    "coco.div", "Elementwise `a / b` (truncating division on i32)."
)
MaxOp = ElementwiseBinaryOp.define("coco.max", "Elementwise maximum.", Commutative())
MinOp = ElementwiseBinaryOp.define("coco.min", "Elementwise minimum.", Commutative())
PowOp = ElementwiseBinaryOp.define(
    "coco.pow", "Elementwise `a ** b` on floats.", FLOAT_ONLY=True
)


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
        label: str | None = None,
    ):
        super().__init__(
            lhs,
            rhs,
            properties={"predicate": ComparePredicateAttr(ComparePredicate(predicate))},
            label=label,
        )

    @classmethod
    def infer_result_type(cls, lhs: TensorType, rhs: TensorType) -> TensorType:
        check_same_element_type([lhs, rhs])
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
        label: str | None = None,
    ):
        super().__init__([condition, true_value, false_value], label=label)

    @classmethod
    def infer_result_type(
        cls, condition: TensorType, true_value: TensorType, false_value: TensorType
    ) -> TensorType:
        if condition.element_type != i1:
            raise LayoutError(
                f"condition must have element type i1, got {condition.element_type}"
            )
        check_same_element_type([true_value, false_value])
        return infer_elementwise(
            [condition, true_value, false_value],
            result_element_type=true_value.element_type,
        )


class ElementwiseUnaryOp(UnaryOp, ABC):
    """`coco.OP %a`: elementwise, same type in and out."""

    FLOAT_ONLY: ClassVar[bool] = True
    """Whether the op only makes sense on floats (all but neg, abs, relu)."""

    @classmethod
    def infer_result_type(cls, operand: TensorType) -> TensorType:
        if operand.element_type == i1:
            raise LayoutError("does not take an i1 operand (i1 is not arithmetic)")
        if cls.FLOAT_ONLY and not is_float(operand.element_type):
            raise LayoutError(
                f"needs a floating-point operand, got {operand.element_type}"
            )
        return operand


NegOp = ElementwiseUnaryOp.define("coco.neg", "Elementwise `-a`.", FLOAT_ONLY=False)
AbsOp = ElementwiseUnaryOp.define("coco.abs", "Elementwise `|a|`.", FLOAT_ONLY=False)
SqrtOp = ElementwiseUnaryOp.define("coco.sqrt", "Elementwise square root.")
RsqrtOp = ElementwiseUnaryOp.define("coco.rsqrt", "Elementwise `1 / sqrt(a)`.")
ExpOp = ElementwiseUnaryOp.define("coco.exp", "Elementwise `e ** a`.")
LogOp = ElementwiseUnaryOp.define("coco.log", "Elementwise natural logarithm.")
TanhOp = ElementwiseUnaryOp.define("coco.tanh", "Elementwise hyperbolic tangent.")
ReluOp = ElementwiseUnaryOp.define(
    "coco.relu", "Elementwise `max(a, 0)`.", FLOAT_ONLY=False
)
GeluOp = ElementwiseUnaryOp.define(
    "coco.gelu",
    """Elementwise GELU, tanh approximation:
    `0.5 x (1 + tanh(0.7978845608 (x + 0.044715 x^3)))`.""",
)


@irdl_op_definition
class ConvertOp(UnaryOp):
    """`coco.convert %a`: element type change; shape and layout are kept."""

    name = "coco.convert"

    traits = traits_def(canonicalized("coco.convert"))

    def __init__(
        self,
        operand: SSAValue | Operation,
        element_type: Attribute | str,
        *,
        label: str | None = None,
    ):
        super().__init__(
            operand, label=label, element_type=as_element_type(element_type)
        )

    @classmethod
    def infer_result_type(
        cls, operand: TensorType, *, element_type: Attribute
    ) -> TensorType:
        return operand.with_element_type(element_type)

    def inference_options(self) -> dict[str, Any]:
        return {"element_type": as_tensor_type(self.result).element_type}


I32_RANGE = range(-(2**31), 2**31)


@irdl_op_definition
class ConstantOp(CocoOp):
    """`coco.constant VALUE : !coco.tensor<SHAPE x ELT, replicated>`: a
    replicated constant, every element VALUE (a splat; rank 0 is a scalar).

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
        element_type: Attribute | str = "f32",
        *,
        shape: Sequence[int] = (),
        label: str | None = None,
    ):
        element_type = as_element_type(element_type)
        super().__init__(
            result_types=[TensorType(shape, element_type, REPLICATED)],
            properties={"value": self.make_value(value, element_type)},
            attributes=label_attribute(label),
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
        if not result.layout.is_replicated:
            raise LayoutError(f"result must be a replicated tensor, got {result}")
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
        width = 2 * element_info(element_type).bytes
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
        if problem is not None:
            parser.raise_error(f"coco.constant {problem}", at)
        if literal.startswith("0x") and is_float(element_type):
            number = element_info(element_type).from_bits(int(literal, 16))
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
            printer.print_string(element_info(element_type).bits(value))
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
class DropoutOp(InferredResultOp):
    """`coco.dropout %a p = P seed = S`: `a * keep / (1 - p)` with
    `keep = u(seed, i) >= p` at the element's global linear index `i`.

    `p` is an f64 property in [0, 1) (an integer literal such as `p = 0` is
    accepted); `seed` a non-negative i64. The syntax is hand-written because
    the declarative format would print the same text but reject `p = 0`, which
    the dialect's reference accepts (docs/dialect.md, "coco.dropout
    spellings")."""

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
        label: str | None = None,
    ):
        super().__init__(
            [operand],
            properties={"p": FloatAttr(float(p), f64), "seed": IntegerAttr(seed, i64)},
            label=label,
        )

    @property
    def probability(self) -> float:
        return self.p.value.data

    @classmethod
    def infer_result_type(cls, operand: TensorType) -> TensorType:
        if not is_float(operand.element_type):
            raise LayoutError(
                f"needs a floating-point operand, got {operand.element_type}"
            )
        return operand

    def verify_types(self) -> None:
        if not 0.0 <= self.probability < 1.0:
            raise LayoutError(
                f"probability must satisfy 0 <= p < 1, got p = {self.probability}"
            )
        if self.seed.value.data < 0:
            raise LayoutError(f"seed must be >= 0, got {self.seed.value.data}")
        super().verify_types()

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
class ReduceOp(UnaryOp):
    """`coco.reduce %a kind = K dims = [...]`: reduce over the given dims
    (removed from the shape, or kept with size 1 with `keep_dims`, so the
    result broadcasts back against the operand: a norm layer's statistics)."""

    name = "coco.reduce"

    kind = prop_def(ReduceKindAttr)
    dims = prop_def(DenseArrayBase[I64])
    keep_dims = opt_prop_def(UnitAttr)

    assembly_format = (
        "$operand `kind` `=` $kind `dims` `=` $dims (`keep_dims` $keep_dims^)? "
        "attr-dict `:` functional-type(operands, results)"
    )

    def __init__(
        self,
        operand: SSAValue | Operation,
        kind: ReduceKind | str,
        dims: Sequence[int],
        *,
        keep_dims: bool = False,
        label: str | None = None,
    ):
        properties: dict[str, Attribute] = {
            "kind": ReduceKindAttr(ReduceKind(kind)),
            "dims": DenseArrayBase.from_list(i64, dims),
        }
        if keep_dims:
            properties["keep_dims"] = UnitAttr()
        super().__init__(
            operand,
            properties=properties,
            label=label,
            dims=tuple(dims),
            keep_dims=keep_dims,
        )

    @property
    def reduced_dims(self) -> tuple[int, ...]:
        return self.dims.get_values()

    @property
    def keeps_dims(self) -> bool:
        return self.keep_dims is not None

    @classmethod
    def infer_result_type(
        cls, operand: TensorType, *, dims: Sequence[int], keep_dims: bool = False
    ) -> TensorType:
        if operand.element_type == i1:
            raise LayoutError("does not take an i1 operand (i1 is not arithmetic)")
        return infer_reduce(operand, dims, keep_dims)

    def inference_options(self) -> dict[str, Any]:
        return {"dims": self.reduced_dims, "keep_dims": self.keeps_dims}


@irdl_op_definition
class TransposeOp(UnaryOp):
    """`coco.transpose %a perm = [...]`: result dim `j` is operand dim
    `perm[j]` (numpy's `transpose(a, perm)`); a sliced operand stays cut
    along the same (moved) dim."""

    name = "coco.transpose"

    perm = prop_def(DenseArrayBase[I64])

    traits = traits_def(canonicalized("coco.transpose"))

    assembly_format = (
        "$operand `perm` `=` $perm attr-dict `:` functional-type(operands, results)"
    )

    def __init__(
        self,
        operand: SSAValue | Operation,
        perm: Sequence[int],
        *,
        label: str | None = None,
    ):
        super().__init__(
            operand,
            properties={"perm": DenseArrayBase.from_list(i64, perm)},
            label=label,
            perm=tuple(perm),
        )

    @property
    def permutation(self) -> tuple[int, ...]:
        return self.perm.get_values()

    @classmethod
    def infer_result_type(
        cls, operand: TensorType, *, perm: Sequence[int]
    ) -> TensorType:
        return infer_transpose(operand, perm)

    def inference_options(self) -> dict[str, Any]:
        return {"perm": self.permutation}


@irdl_op_definition
class ReshapeOp(UnaryOp):
    """`coco.reshape %a : (T) -> T'`: the same elements, row-major, in the
    result type's shape; a sliced operand reshapes where no element changes
    rank (the dims before the sliced one keep their product)."""

    name = "coco.reshape"

    traits = traits_def(canonicalized("coco.reshape"))

    def __init__(
        self,
        operand: SSAValue | Operation,
        shape: Sequence[int],
        *,
        label: str | None = None,
    ):
        super().__init__(operand, label=label, shape=tuple(shape))

    @classmethod
    def infer_result_type(
        cls, operand: TensorType, *, shape: Sequence[int]
    ) -> TensorType:
        return infer_reshape(operand, shape)

    def inference_options(self) -> dict[str, Any]:
        return {"shape": as_tensor_type(self.result).dims}


@irdl_op_definition
class NormOp(UnaryOp):
    """`coco.norm %a`: L2 norm `sqrt(sum(a*a))` over all elements, rank 0.

    The operand must be replicated or local; the result has its layout."""

    name = "coco.norm"

    @classmethod
    def infer_result_type(cls, operand: TensorType) -> TensorType:
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
    def infer_result_type(cls, lhs: TensorType, rhs: TensorType) -> TensorType:
        return infer_matmul(lhs, rhs)


@irdl_op_definition
class BatchMatmulOp(BinaryOp):
    """`coco.batch_matmul %a, %b`: `a: [G, ..., K]` times `b: [G, K, M]`
    gives `[G, ..., M]`, group by group (a mixture of experts' GEMMs: group
    `g` of the tokens times expert `g`'s weights). Layouts:
    `batch_matmul_layout` (docs/dialect.md)."""

    name = "coco.batch_matmul"

    @classmethod
    def infer_result_type(cls, lhs: TensorType, rhs: TensorType) -> TensorType:
        return infer_batch_matmul(lhs, rhs)


@irdl_op_definition
class EmbeddingOp(InferredResultOp):
    """`coco.embedding %tables, %indices pooling = P`: pooled lookup, as
    DLRM's EmbeddingBag. `tables: [T, R, D]`, `indices: [T, B, L]` (i32,
    in `[0, R)`) give `[T, B, D]`: bag `b` of table `t` pools the rows
    `tables[t, indices[t, b, l]]`, `l < L`, by `sum`, `mean` (the sum over
    `L`) or `max`. Layouts: `embedding_layout` (docs/dialect.md)."""

    name = "coco.embedding"

    tables = operand_def(TensorType)
    indices = operand_def(TensorType)
    result = result_def(TensorType)
    pooling = prop_def(PoolingAttr)

    traits = traits_def(Pure())
    assembly_format = (
        "$tables `,` $indices `pooling` `=` $pooling attr-dict `:` "
        "functional-type(operands, results)"
    )

    def __init__(
        self,
        tables: SSAValue | Operation,
        indices: SSAValue | Operation,
        pooling: Pooling | str = Pooling.SUM,
        *,
        label: str | None = None,
    ):
        super().__init__(
            [tables, indices],
            properties={"pooling": PoolingAttr(Pooling(pooling))},
            label=label,
        )

    @classmethod
    def infer_result_type(cls, tables: TensorType, indices: TensorType) -> TensorType:
        return infer_embedding(tables, indices)


class SlicedResultOp(InferredResultOp, ABC):
    """An op whose result is its operand sliced along the `dim` property:
    all_slice, reduce_scatter, all_to_all."""

    dim = prop_def(IntegerAttr[I64])

    OPERAND_LAYOUTS: ClassVar[tuple[LayoutKind, ...]]
    """The layout kinds the operand may have."""

    @classmethod
    def infer_result_type(cls, operand: TensorType, *, dim: int) -> TensorType:
        require_layout(operand, *cls.OPERAND_LAYOUTS)
        check_dim_in_range("dim", dim, operand)
        return operand.with_layout(LayoutAttr.sliced(dim))

    def inference_options(self) -> dict[str, Any]:
        return {"dim": self.dim.value.data}


@irdl_op_definition
class AllSliceOp(UnaryOp, SlicedResultOp):
    """`coco.all_slice %a dim = D`: replicated → sliced<D>, each rank keeps its
    block. No communication."""

    name = "coco.all_slice"

    OPERAND_LAYOUTS: ClassVar[tuple[LayoutKind, ...]] = (LayoutKind.REPLICATED,)

    traits = traits_def(canonicalized("coco.all_slice"))
    assembly_format = (
        "$operand `dim` `=` $dim attr-dict `:` functional-type(operands, results)"
    )

    def __init__(
        self, operand: SSAValue | Operation, dim: int, *, label: str | None = None
    ):
        super().__init__(
            operand, properties={"dim": IntegerAttr(dim, i64)}, label=label, dim=dim
        )


def bucket_layout_problem(t: TensorType) -> str | None:
    """Why a value of type `t` cannot be a piece of a bucket (`coco.concat`,
    `coco.split`), or None: replicated, local and sliced<0> values can."""
    if t.layout.is_sliced and t.layout.sliced_dim != 0:
        return (
            f"must be replicated, local or sliced<0>, got {t.layout} (a rank's "
            "block must be a contiguous run of the flattened tensor)"
        )
    return None


def check_bucket_pieces(
    op: Operation, flat: TensorType, pieces: Sequence[TensorType], what: str
) -> None:
    """The rules `coco.concat` and `coco.split` share, for the flat bucket
    `flat` and its `pieces` (the concat's operands, the split's results)."""
    if not pieces:
        raise LayoutError(f"needs at least one {what}")
    problem = bucket_layout_problem(flat)
    if problem is not None:
        raise LayoutError(f"the flat tensor {problem}")
    for i, piece in enumerate(pieces):
        problem = bucket_layout_problem(piece)
        if problem is not None:
            raise LayoutError(f"{what} {i} {problem}")
        if piece.element_type != flat.element_type or piece.layout != flat.layout:
            raise LayoutError(
                f"{what} {i} ({piece}) must have the element type and layout of "
                f"the flat tensor ({flat.element_type}, {flat.layout})"
            )
        if piece.rank == 0:
            raise LayoutError(
                f"{what} {i} ({piece}) is rank 0: a bucket's pieces are cut into "
                "one block per rank"
            )
    if flat.rank != 1:
        raise LayoutError(f"the flat tensor must be 1-D, got {flat}")
    total = sum(math.prod(p.dims) for p in pieces)
    if flat.dims[0] != total:
        raise LayoutError(
            f"the flat tensor has {flat.dims[0]} elements, but the {what}s have {total}"
        )
    world = world_size(op)
    if world is None or flat.layout.is_sliced:
        return
    for i, piece in enumerate(pieces):
        count = math.prod(piece.dims)
        if count % world:
            raise LayoutError(
                f"{what} {i} ({piece}) has {count} elements, not divisible by the "
                f"world size {world} (coco.world_size): a bucket holds one block "
                "of every piece per rank"
            )


def bucket_type(pieces: Sequence[TensorType]) -> TensorType:
    """The flat bucket of `pieces`: 1-D, their total element count, their
    element type and layout (sliced<0> stays sliced<0>)."""
    if not pieces:
        raise LayoutError("needs at least one operand")
    first = pieces[0]
    total = sum(math.prod(p.dims) for p in pieces)
    return TensorType([total], first.element_type, first.layout)


@irdl_op_definition
class ConcatOp(CocoOp):
    """`coco.concat %a, %b, ... : (T1, T2, ...) -> !coco.tensor<SxE, L>`: the
    flat bucket of its operands (gradient bucketing, as DDP and ZeRO flatten
    parameters). The concatenation is rank-major: the bucket is `N` blocks,
    block `r` holding every operand's block `r` (of its flattening cut into
    `N`) in operand order. All operands share one element type and one layout
    (replicated, local or sliced<0>), which the result keeps; on sliced<0>
    operands each rank concatenates its own blocks. No communication."""

    name = "coco.concat"

    pieces = var_operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure())
    assembly_format = "$pieces attr-dict `:` functional-type($pieces, results)"

    def __init__(
        self, pieces: Sequence[SSAValue | Operation], *, label: str | None = None
    ):
        operands = [SSAValue.get(p) for p in pieces]
        try:
            result = bucket_type([as_tensor_type(v) for v in operands])
        except LayoutError as err:
            raise LayoutError(err.rule, self.name) from None
        super().__init__(
            operands=[operands],
            result_types=[result],
            attributes=label_attribute(label),
        )

    def verify_types(self) -> None:
        pieces = [as_tensor_type(v) for v in self.pieces]
        flat = as_tensor_type(self.result, "result")
        check_bucket_pieces(self, flat, pieces, "operand")


@irdl_op_definition
class SplitOp(CocoOp):
    """`%a, %b, ... = coco.split %flat : (!coco.tensor<SxE, L>) -> (T1, T2, ...)`:
    the inverse of `coco.concat` — the pieces of a flat bucket, each with the
    shape its result type says and the bucket's element type and layout.
    Piece `i`'s block `r` is the run of the bucket's block `r` that follows the
    blocks `r` of pieces `0..i-1`. No communication."""

    name = "coco.split"

    flat = operand_def(TensorType)
    pieces = var_result_def(TensorType)

    traits = traits_def(Pure())
    assembly_format = "$flat attr-dict `:` functional-type($flat, $pieces)"

    def __init__(
        self,
        flat: SSAValue | Operation,
        shapes: Sequence[Sequence[int]],
        *,
        label: str | None = None,
    ):
        flat = SSAValue.get(flat)
        t = as_tensor_type(flat)
        super().__init__(
            operands=[flat],
            result_types=[[t.with_shape(list(shape)) for shape in shapes]],
            attributes=label_attribute(label),
        )

    def verify_types(self) -> None:
        pieces = [as_tensor_type(r, "result") for r in self.pieces]
        check_bucket_pieces(self, as_tensor_type(self.flat), pieces, "result")


@irdl_op_definition
class UpdateOp(CocoOp):
    """`coco.update %param, %value : T`: at function exit the parameter's buffer
    holds `value`. `param` is an argument of the enclosing function, updated at
    most once; `value` has its type."""

    name = "coco.update"

    T: ClassVar = VarConstraint("T", base(TensorType))

    param = operand_def(T)
    value = operand_def(T)

    traits = traits_def(WritesParameter())
    assembly_format = "$param `,` $value attr-dict `:` type($param)"

    def __init__(
        self,
        param: SSAValue | Operation,
        value: SSAValue | Operation,
        *,
        label: str | None = None,
    ):
        param, value = SSAValue.get(param), SSAValue.get(value)
        if param.type != value.type:
            raise LayoutError(
                f"value type {value.type} must equal the parameter type {param.type}",
                self.name,
            )
        super().__init__(operands=[param, value], attributes=label_attribute(label))

    def verify_types(self) -> None:
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
            raise LayoutError(
                f"parameter {value_name(param)} is updated {len(updates)} times; a "
                "parameter may be updated by at most one coco.update"
            )


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
    """A collective: every rank of the group takes part; `: T_in -> T_out`.

    No memory effect (SPMD: a dead or duplicated collective may go, on every
    rank together), but not speculatable: every rank must reach it."""

    operand = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(NoMemoryEffect())


@irdl_op_definition
class AllReduceOp(CollectiveOp):
    """`coco.all_reduce %a reduction = R`: local or replicated → replicated,
    the reduction over ranks."""

    name = "coco.all_reduce"

    reduction = prop_def(ReductionKindAttr)
    traits = traits_def(canonicalized("coco.all_reduce"))
    assembly_format = (
        "$operand `reduction` `=` $reduction attr-dict `:` type($operand) `->` "
        "type($result)"
    )

    def __init__(
        self,
        operand: SSAValue | Operation,
        reduction: ReductionKind | str = ReductionKind.SUM,
        *,
        label: str | None = None,
    ):
        super().__init__(
            [operand],
            properties={"reduction": ReductionKindAttr(ReductionKind(reduction))},
            label=label,
        )

    @classmethod
    def infer_result_type(cls, operand: TensorType) -> TensorType:
        require_layout(operand, LayoutKind.LOCAL, LayoutKind.REPLICATED)
        return operand.with_layout(REPLICATED)


@irdl_op_definition
class ReduceScatterOp(CollectiveOp, SlicedResultOp):
    """`coco.reduce_scatter %a reduction = R dim = D`: local → sliced<D>; rank
    `r` gets block `r` of the reduction over ranks."""

    name = "coco.reduce_scatter"

    reduction = prop_def(ReductionKindAttr)
    OPERAND_LAYOUTS: ClassVar[tuple[LayoutKind, ...]] = (LayoutKind.LOCAL,)
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
        label: str | None = None,
    ):
        super().__init__(
            [operand],
            properties={
                "reduction": ReductionKindAttr(ReductionKind(reduction)),
                "dim": IntegerAttr(dim, i64),
            },
            label=label,
            dim=dim,
        )


@irdl_op_definition
class AllGatherOp(CollectiveOp):
    """`coco.all_gather %a`: sliced<D> → replicated, the concatenation of the
    ranks' blocks."""

    name = "coco.all_gather"

    traits = traits_def(canonicalized("coco.all_gather"))
    assembly_format = "$operand attr-dict `:` type($operand) `->` type($result)"

    def __init__(self, operand: SSAValue | Operation, *, label: str | None = None):
        super().__init__([operand], label=label)

    @classmethod
    def infer_result_type(cls, operand: TensorType) -> TensorType:
        require_layout(operand, LayoutKind.SLICED)
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
        self, operand: SSAValue | Operation, root: int = 0, *, label: str | None = None
    ):
        super().__init__(
            [operand],
            properties={"root": IntegerAttr(root, i64)},
            label=label,
            root=root,
        )

    @classmethod
    def infer_result_type(
        cls, operand: TensorType, *, root: int, world: int | None = None
    ) -> TensorType:
        require_layout(operand, LayoutKind.LOCAL)
        if root < 0 or (world is not None and root >= world):
            group = f" of {world}" if world is not None else ""
            raise LayoutError(f"root {root} is not a rank of the group{group}")
        return operand.with_layout(REPLICATED)

    def inference_options(self) -> dict[str, Any]:
        return {"root": self.root.value.data, "world": world_size(self)}


@irdl_op_definition
class AllToAllOp(CollectiveOp, SlicedResultOp):
    """`coco.all_to_all %a dim = E`: sliced<D> → sliced<E>, the same global value
    cut along E."""

    name = "coco.all_to_all"

    OPERAND_LAYOUTS: ClassVar[tuple[LayoutKind, ...]] = (LayoutKind.SLICED,)
    assembly_format = (
        "$operand `dim` `=` $dim attr-dict `:` type($operand) `->` type($result)"
    )

    def __init__(
        self, operand: SSAValue | Operation, dim: int, *, label: str | None = None
    ):
        super().__init__(
            [operand], properties={"dim": IntegerAttr(dim, i64)}, label=label, dim=dim
        )


@irdl_op_definition
class ShiftOp(CollectiveOp):
    """`coco.shift %a by = K`: a collective permute; rank `r` receives what rank
    `(r + K) mod N` holds (and sends its own to `(r - K) mod N`). The type is
    kept: a `sliced<D>` value's blocks rotate by `K` (its global value is the
    blocks in the order `K, K+1, ..., K-1`), a `local` value's per-rank
    values rotate, a `replicated` value is unchanged (docs/dialect.md,
    "coco.shift")."""

    name = "coco.shift"

    by = prop_def(IntegerAttr[I64])
    traits = traits_def(canonicalized("coco.shift"))
    assembly_format = (
        "$operand `by` `=` $by attr-dict `:` type($operand) `->` type($result)"
    )

    def __init__(
        self, operand: SSAValue | Operation, by: int, *, label: str | None = None
    ):
        super().__init__(
            [operand], properties={"by": IntegerAttr(by, i64)}, label=label
        )

    @property
    def offset(self) -> int:
        return self.by.value.data

    @classmethod
    def infer_result_type(cls, operand: TensorType) -> TensorType:
        return operand


# ============================================================================
# Pipelines: send and recv between stages
# ============================================================================


AncestorT = TypeVar("AncestorT", bound=Operation)


def ancestor(op: Operation, kind: type[AncestorT]) -> AncestorT | None:
    """The nearest op of type `kind` that `op` is nested in, None outside
    any (`enclosing_function`, the module of a lowered op)."""
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, kind):
        parent = parent.parent_op()
    return parent


def enclosing_function(op: Operation) -> FuncOp | None:
    return ancestor(op, FuncOp)


class NamesOtherStage(SymbolUserOpInterface):
    """A send or recv names another function of its module: its peer stage.

    That the two ends of every channel match (one recv per send, of the sent
    type) is a rule about the whole module, checked once per module by
    `coconet_ir.analysis.channels` (docs/dialect.md, "Pipelines: send and recv")."""

    def verify(self, op: Operation) -> None:
        assert isinstance(op, SendOp | RecvOp)
        func = enclosing_function(op)
        if func is None or not isinstance(func.parent_op(), ModuleOp):
            raise LayoutError("must be inside a func.func directly inside a module")
        if op.stage.nested_references.data:
            raise LayoutError(f"stage must be a flat symbol (@name), got {op.stage}")
        target = op.stage.root_reference.data
        found = SymbolTable.lookup_symbol(func, op.stage)
        if not isinstance(found, FuncOp):
            raise LayoutError(
                f"names stage @{target}, which is not a function of the module"
            )
        if found is func:
            raise LayoutError(f"cannot name its own stage @{target}")


@irdl_op_definition
class SendOp(CocoOp):
    """`coco.send %a to @STAGE channel = C : T`: rank `r` of this stage sends its
    value to rank `r` of stage @STAGE. Exactly one `coco.recv` of type T in
    @STAGE receives from this stage on channel C."""

    name = "coco.send"

    operand = operand_def(TensorType)
    stage = prop_def(SymbolRefAttr, prop_name="to")
    channel = prop_def(IntegerAttr[I64])

    traits = traits_def(SendsOnChannel(), NamesOtherStage())
    assembly_format = (
        "$operand `to` $to `channel` `=` $channel attr-dict `:` type($operand)"
    )

    def __init__(
        self,
        operand: SSAValue | Operation,
        to: str,
        channel: int = 0,
        *,
        label: str | None = None,
    ):
        super().__init__(
            operands=[SSAValue.get(operand)],
            properties={"to": SymbolRefAttr(to), "channel": IntegerAttr(channel, i64)},
            attributes=label_attribute(label),
        )


@irdl_op_definition
class RecvOp(CocoOp):
    """`%b = coco.recv from @STAGE channel = C : T`: receives what rank `r` of
    @STAGE sent on channel C. Exactly one `coco.send` of @STAGE matches."""

    name = "coco.recv"

    result = result_def(TensorType)
    stage = prop_def(SymbolRefAttr, prop_name="from")
    channel = prop_def(IntegerAttr[I64])

    traits = traits_def(ReceivesFromChannel(), NamesOtherStage())
    assembly_format = "`from` $from `channel` `=` $channel attr-dict `:` type($result)"

    def __init__(
        self,
        result_type: TensorType,
        source: str,
        channel: int = 0,
        *,
        label: str | None = None,
    ):
        super().__init__(
            result_types=[result_type],
            properties={
                "from": SymbolRefAttr(source),
                "channel": IntegerAttr(channel, i64),
            },
            attributes=label_attribute(label),
        )


# ============================================================================
# Regions created by transformations (docs/dialect.md, same title)
# ============================================================================


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
    bound to block arguments) and ends in `coco.yield`; it has the effects of
    its body."""

    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    body = region_def("single_block")

    traits = lazy_traits_def(
        lambda: (
            IsolatedFromAbove(),
            RecursiveMemoryEffect(),
            SingleBlockImplicitTerminator(YieldOp),
        )
    )

    @property
    def block(self) -> Block:
        return self.body.block

    @property
    def yield_op(self) -> YieldOp:
        """The region's terminator (the verifier ensures it is a coco.yield)."""
        terminator = self.block.last_op
        assert isinstance(terminator, YieldOp)
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
            [v.type for v in self.yield_op.arguments],
            self.expected_yield_types(),
        )


class ChunkedRegionOp(RegionOp, ABC):
    """A region op whose body runs on chunks: input `i` is cut along
    `input_dims[i]`, output `j` put together along `output_dims[j]` (-1: not
    chunked, where the op allows it)."""

    input_dims = prop_def(DenseArrayBase[I64])
    output_dims = prop_def(DenseArrayBase[I64])

    def check_chunk_dims(self) -> None:
        """One chunk dim per input and per output, each allowed by
        `check_chunk_dim`."""
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
                self.check_chunk_dim(what, as_tensor_type(value, what), dim)

    @abstractmethod
    def check_chunk_dim(self, what: str, t: TensorType, dim: int) -> None:
        """Whether an `what` ("input" or "output") of type `t` may be chunked
        along `dim`; raises LayoutError stating the rule."""


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
class OverlapOp(ChunkedRegionOp):
    """`coco.overlap chunks = K (%in...) dims = [...] -> [...] : ... { ... }`:
    the body runs `K` times, chunk by chunk, so that chunk `c+1`'s compute can
    overlap chunk `c`'s communication. Input `i` is cut into `K` equal chunks
    along `input_dims[i]` (-1: passed whole); the body sees one chunk; output
    `j` is the concatenation of the chunks the body yields, along
    `output_dims[j]` (every output is chunked). A chunk dimension is never a
    sliced dimension."""

    name = "coco.overlap"

    chunks = prop_def(IntegerAttr[I64])

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
        self.check_chunk_dims()
        super().verify_types()

    def check_chunk_dim(self, what: str, t: TensorType, dim: int) -> None:
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


def communication_in(block: Block) -> Operation | None:
    """The first op in `block` (nested fusions included) that communicates or
    cannot run once per chunk on its own (a nested overlap or per-peer
    region), or None."""
    for op in block.walk():
        if isinstance(op, CollectiveOp | SendOp | RecvOp | UpdateOp):
            return op
        if isinstance(op, OverlapOp | PerPeerOp):
            return op
    return None


@irdl_op_definition
class PerPeerOp(ChunkedRegionOp):
    """`coco.per_peer (%in...) dims = [...] -> [...] : ... { ... }`: the body
    runs once per peer, on N chunks (N: the world size), rank `r` running chunk
    `(r + s) mod N` at step `s` (docs/dialect.md, "coco.per_peer").

    Input `i` with `input_dims[i] = d`:
    - `d` is its sliced dim: a *gathered* input; the body sees it gathered
      (`replicated`), chunk `c` being rank `c`'s block, which reaches each
      rank by `coco.shift` one step at a time;
    - another dim: cut into N chunks along `d`, as in `coco.overlap`;
    - -1: passed whole.
    Output `j` with `output_dims[j] = e`: when the output is `sliced<e>` and
    the body yields it `local`, it is *reduce-scattered*: chunk `c`'s partials,
    summed over the ranks, are rank `c`'s block; `e = -1`: the body yields a
    partial product (a gathered contracted dim) and the output is the sum of
    the chunks'; otherwise the chunks are concatenated along `e` (not its
    sliced dim). The body has global shapes
    and no communication; its values are those of the un-chunked body."""

    name = "coco.per_peer"

    assembly_format = (
        "` ` `(` $inputs `)` `dims` `=` $input_dims `->` $output_dims attr-dict "
        "`:` functional-type($inputs, $outputs) $body"
    )

    def gathered(self, index: int) -> bool:
        """Whether input `index` is gathered (chunked along its sliced dim)."""
        t = as_tensor_type(self.inputs[index], "input")
        dim = self.input_dims.get_values()[index]
        return t.layout.is_sliced and t.layout.sliced_dim == dim

    def scattered(self, index: int) -> bool:
        """Whether output `index` is reduce-scattered along its chunk dim."""
        t = as_tensor_type(self.outputs[index], "output")
        dim = self.output_dims.get_values()[index]
        return t.layout.is_sliced and t.layout.sliced_dim == dim

    def expected_argument_types(self) -> list[TensorType]:
        return [
            t.with_layout(REPLICATED) if self.gathered(i) else t
            for i, t in enumerate(super().expected_argument_types())
        ]

    def expected_yield_types(self) -> list[TensorType]:
        return [
            t.with_layout(LOCAL) if self.scattered(j) else t
            for j, t in enumerate(super().expected_yield_types())
        ]

    def check_chunk_dim(self, what: str, t: TensorType, dim: int) -> None:
        if dim != -1:
            check_dim_in_range(f"{what} chunk dim", dim, t)

    def verify_types(self) -> None:
        self.check_chunk_dims()
        if all(d < 0 for d in self.input_dims.get_values()):
            raise LayoutError("at least one input must be chunked")
        problem = communication_in(self.block)
        if problem is not None:
            raise LayoutError(
                f"the body cannot hold '{problem.name}': each rank runs its "
                "own chunk at a step, so the body cannot communicate"
            )
        super().verify_types()


@irdl_op_definition
class YieldOp(AbstractYieldOperation[TensorType]):
    """`coco.yield %v... : T...`: the values a fusion or overlap region gives."""

    name = "coco.yield"

    traits = lazy_traits_def(
        lambda: (IsTerminator(), HasParent(FusionOp, OverlapOp, PerPeerOp), Pure())
    )
