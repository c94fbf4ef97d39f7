"""Hypothesis strategies for random, well-typed coco programs.

`programs()` draws a module with one function, or a two-stage pipeline joined by
`coco.send`/`coco.recv`, built op by op with the dialect's builders. Every op is
valid by construction: an op first draws a *subject* among the live values that
fit its layout rule (or a fresh function argument of a fitting type), then
operands that combine with it (same type, its replicated twin, a rank-0 scalar,
a broadcast bias). Nothing is filtered, so hypothesis never discards a draw.

Programs mix random ops with the shapes the passes target (CoCoNet, ASPLOS'22):
an all_reduce of a local gradient feeding an optimizer (SGD, momentum, Adam,
LAMB with norms) that ends in `coco.update`, Megatron's row-parallel layer
(matmul sliced<last> x sliced<0> -> all_reduce -> bias, dropout, residual),
all_gather -> matmul, matmul -> reduce_scatter, norms and reductions, values
gathered along different dims then combined elementwise (which coco-reorder
must leave on whole values), and pipelines whose first stage ends by sending an
all_reduce or all_gather result.

Numerics stay tame so that a program and its transformed form agree within a
tolerance that still catches real bugs: every value carries an upper bound on
its magnitude, and an op that could exceed the element type's limit first
scales its operands by a power of two; `div`, `sqrt`, `rsqrt` and `log` only
see operands `>= 1` (`abs(x) + 1`); `cmp` only compares values computed without
any reduction (bit-identical in both programs, so a comparison cannot flip).
Shapes are small, every sliceable dim is divisible by 8 (so 2, 4 and 8 ranks
all fit), and broadcast operands use 1 or drop leading dims.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.strategies import DrawFn
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue

from coconet_ir.dialects import coco
from coconet_ir.dialects.coco import (
    LOCAL,
    REPLICATED,
    LayoutAttr,
    TensorType,
    element_type_name,
    is_float,
)
from coconet_ir.ir import to_text, verify

# ============================================================================
# Constants: shapes, element types, numeric limits
# ============================================================================

WORLDS = (2, 4, 8)
"""The world sizes every generated program runs on."""

SLICE_MULTIPLE = max(WORLDS)
"""Every dim a program slices is a multiple of this, so every world fits."""

SHAPES: dict[int, tuple[tuple[int, ...], ...]] = {
    0: ((),),
    1: ((8,), (16,), (24,)),
    2: ((8, 16), (16, 8), (8, 8), (24, 8), (8, 24)),
    3: ((16, 8, 8), (8, 8, 16), (8, 24, 8)),
}
"""Global shapes of fresh arguments, by rank (first = what shrinking prefers).
Every size is a multiple of 8; 24 is not a multiple of 2 x 8 or 4 x 8, so
chunking it into 2 or 4 chunks leaves chunks that 8 ranks cannot slice."""

SIZES = (8, 16, 24)
"""Sizes of the contraction and output dims of matmuls."""

ELEMENT_TYPES = ("f32", "f32", "f32", "f32", "f32", "f32", "f64", "f16", "bf16")
"""The program's main element type: mostly f32."""

FLOAT_TYPES = ("f16", "bf16", "f32", "f64")
"""The float element types, for mixed precision."""

LIMITS = {"f16": 16.0, "bf16": 16.0, "f32": 256.0, "f64": 256.0, "i32": 2.0**20}
"""Largest magnitude a value of each element type may reach (i32: far from
overflow, so that no rewrite of an integer computation can wrap)."""

I32_INPUT_BOUND = 10.0
"""Largest magnitude of a drawn i32 input (the interpreter's signed set)."""

INT_SCALARS = (2, 3, -1, 1, 5)
"""Values of the i32 `coco.constant`s used as rank-0 operands."""

INT_BINARY_OPS = ("add", "sub", "mul", "max", "min", "div")
INT_UNARY_OPS = ("neg", "abs", "relu")

STAGE_NAMES = ("s0", "s1")
"""Values of the `name` attributes given to some ops, for passes' `op=NAME`."""

TOLERANCES = {
    "f64": (1e-9, 1e-9),
    "f32": (1e-4, 2e-3),
    "f16": (3e-2, 1e-1),
    "bf16": (5e-2, 2e-1),
}
"""`(rtol, atol)` for comparing programs whose loosest element type is the key:
reassociated sums round differently; real bugs differ by O(1)."""

SCALARS = (0.5, 2.0, 0.25, 0.9, 1.5, 3.0)
"""Values of the `coco.constant`s used as rank-0 operands."""

DROPOUT_PROBABILITIES = (0.1, 0.0, 0.25, 0.5)

BINARY_OPS: dict[str, type[coco.ElementwiseBinaryOp]] = {
    "add": coco.AddOp,
    "sub": coco.SubOp,
    "mul": coco.MulOp,
    "div": coco.DivOp,
    "max": coco.MaxOp,
    "min": coco.MinOp,
    "pow": coco.PowOp,
}

UNARY_OPS: dict[str, type[coco.ElementwiseUnaryOp]] = {
    "neg": coco.NegOp,
    "abs": coco.AbsOp,
    "tanh": coco.TanhOp,
    "relu": coco.ReluOp,
    "gelu": coco.GeluOp,
    "exp": coco.ExpOp,
    "sqrt": coco.SqrtOp,
    "rsqrt": coco.RsqrtOp,
    "log": coco.LogOp,
}


def divisible_dims(tensor: TensorType) -> list[int]:
    """The dims of `tensor` that every world size divides."""
    return [d for d, size in enumerate(tensor.dims) if size % SLICE_MULTIPLE == 0]


def float_type_names() -> st.SearchStrategy[str]:
    return st.sampled_from(ELEMENT_TYPES)


# ============================================================================
# Values and one stage under construction
# ============================================================================


@dataclass(frozen=True)
class Value:
    """A live SSA value and what the generator knows about its numbers."""

    ssa: SSAValue
    bound: float
    """An upper bound on the magnitude of every element."""
    exact: bool
    """Computed without reductions: bit-identical under any correct rewrite."""
    floor: float | None = None
    """A lower bound on every element, when one is known."""

    @property
    def type(self) -> TensorType:
        assert isinstance(self.ssa.type, TensorType)
        return self.ssa.type

    @property
    def elt(self) -> str:
        return element_type_name(self.type.element_type)

    @property
    def is_float(self) -> bool:
        return is_float(self.type.element_type)


Accept = Callable[[TensorType], bool]


@dataclass
class StageBuilder:
    """Builds one `func.func` op by op; every helper keeps values tame."""

    draw: DrawFn
    name: str
    elt: str
    block: Block = field(default_factory=Block)
    values: list[Value] = field(default_factory=list[Value])
    results: list[Value] = field(default_factory=list[Value])
    updated: set[SSAValue] = field(default_factory=set[SSAValue])

    # -- values ---------------------------------------------------------------

    def argument(self, tensor: TensorType) -> Value:
        """A fresh function argument (the interpreter draws it in [0, 1))."""
        arg = self.block.insert_arg(tensor, len(self.block.args))
        if element_type_name(tensor.element_type) == "i32":
            value = Value(arg, I32_INPUT_BOUND, exact=True)
        else:
            value = Value(arg, 1.0, exact=True, floor=0.0)
        self.values.append(value)
        return value

    def emit(
        self, op: Operation, bound: float, exact: bool, floor: float | None = None
    ) -> Value:
        self.block.add_op(op)
        value = Value(op.results[0], bound, exact, floor)
        self.values.append(value)
        return value

    def constant(self, number: float, elt: str) -> Value:
        op = coco.ConstantOp(int(number) if elt == "i32" else number, elt)
        return self.emit(op, abs(number), exact=True, floor=number)

    def pick(
        self, accept: Accept, exact_only: bool = False, elt: str | None = None
    ) -> Value | None:
        """A live value whose type `accept`s, or None (or, by the draw, None
        even when there is one: a fresh argument is then made). Only floats,
        unless `elt` names the element type wanted."""
        candidates = [
            v
            for v in self.values
            if (v.elt == elt if elt is not None else v.is_float)
            and accept(v.type)
            and (v.exact or not exact_only)
        ]
        index = self.draw(st.integers(0, len(candidates)))
        return candidates[index] if index < len(candidates) else None

    def value_of_type(self, tensor: TensorType, exact_only: bool = False) -> Value:
        """A live value of exactly this type, or a fresh argument."""
        elt = element_type_name(tensor.element_type)
        found = self.pick(lambda t: t == tensor, exact_only, elt)
        return found if found is not None else self.argument(tensor)

    def subject(
        self,
        accept: Accept,
        fresh: st.SearchStrategy[TensorType],
        elt: str | None = None,
    ) -> Value:
        """The value an op applies to: a live one that fits (a float, unless
        `elt` names the element type), or a fresh one."""
        found = self.pick(accept, elt=elt)
        return found if found is not None else self.argument(self.draw(fresh))

    def parameter(self, tensor: TensorType) -> Value:
        """An argument of this type not updated yet (a fresh one if none),
        reserved for one `update`."""
        candidates = [
            v
            for v in self.values
            if v.type == tensor
            and isinstance(v.ssa, BlockArgument)
            and v.ssa not in self.updated
        ]
        index = self.draw(st.integers(0, len(candidates)))
        chosen = candidates[index] if index < len(candidates) else None
        chosen = chosen or self.argument(tensor)
        self.updated.add(chosen.ssa)
        return chosen

    # -- taming ---------------------------------------------------------------

    def limit(self, value: Value) -> float:
        return LIMITS[value.elt]

    def tame(self, value: Value, target: float) -> Value:
        """`value` scaled by a power of two so that its bound is <= target."""
        if value.bound <= target:
            return value
        shift = math.ceil(math.log2(value.bound / target))
        return self.binary("mul", value, self.constant(2.0**-shift, value.elt))

    def positive(self, value: Value) -> Value:
        """`value` if it is known to be >= 0.5, else `abs(value) + 1` (no abs
        when it is known to be >= 0)."""
        if value.floor is not None and value.floor >= 0.5:
            return value
        if value.floor is None or value.floor < 0:
            value = self.emit(
                coco.AbsOp(value.ssa), value.bound, value.exact, floor=0.0
            )
        return self.binary("add", value, self.constant(1.0, value.elt))

    # -- compute ops ----------------------------------------------------------

    def binary(self, kind: str, a: Value, b: Value) -> Value:
        """`coco.KIND a, b`, operands scaled first if the result could grow too
        large; `div` divides by a value >= 1 and `pow` raises `|a|` to 2 or 3."""
        limit = self.limit(a)
        floor: float | None = None
        if kind in ("add", "sub"):
            if a.bound + b.bound > limit:
                a, b = self.tame(a, limit / 2), self.tame(b, limit / 2)
            bound = a.bound + b.bound
            if kind == "add" and a.floor is not None and b.floor is not None:
                floor = a.floor + b.floor
        elif kind in ("max", "min"):
            bound = max(a.bound, b.bound)
        elif kind == "mul":
            if a.bound * b.bound > limit:
                a, b = self.tame(a, math.sqrt(limit)), self.tame(b, math.sqrt(limit))
            bound = a.bound * b.bound
            if a.floor is not None and b.floor is not None:
                floor = a.floor * b.floor if min(a.floor, b.floor) >= 0 else None
        elif kind == "div":
            b = self.positive(b)
            denominator = b.floor if b.floor is not None else 0.5
            a = self.tame(a, limit * denominator)
            bound = a.bound / denominator
        elif kind == "pow":
            exponent = self.draw(st.sampled_from((2.0, 3.0)))
            a = self.emit(coco.AbsOp(a.ssa), a.bound, a.exact, floor=0.0)
            a = self.tame(a, limit ** (1 / exponent))
            b = self.constant(exponent, a.elt)
            bound = a.bound**exponent
        else:
            raise ValueError(f"not a binary op: {kind}")
        op = BINARY_OPS[kind](a.ssa, b.ssa)
        return self.emit(op, bound, a.exact and b.exact, floor)

    def unary(self, kind: str, a: Value) -> Value:
        """`coco.KIND a`; `exp` sees a scaled operand, `sqrt`/`rsqrt`/`log` one
        that is >= 1."""
        bound, floor = a.bound, None
        if kind == "exp":
            a = self.tame(a, math.log(self.limit(a)) - 1)
            bound, floor = math.exp(a.bound), 0.0
        elif kind in ("sqrt", "rsqrt", "log"):
            a = self.positive(a)
            bound = {
                "sqrt": math.sqrt(a.bound),
                "rsqrt": 1 / math.sqrt(a.floor or 0.5),
                "log": math.log(a.bound) + 1,
            }[kind]
            floor = math.sqrt(a.floor or 0.5) if kind == "sqrt" else None
        elif kind == "tanh":
            bound = 1.0
        elif kind in ("abs", "relu"):
            floor = 0.0
        return self.emit(UNARY_OPS[kind](a.ssa), bound, a.exact, floor)

    def int_binary(self, kind: str, a: Value, b: Value) -> Value:
        """`coco.KIND a, b` on i32: an op whose result could leave the tame
        range becomes `max`/`min` (integers cannot be scaled down); `div`
        divides by `abs(b) + 1`, never 0."""
        limit = LIMITS["i32"]
        if kind == "mul" and a.bound * b.bound > limit:
            kind = "max"
        if kind in ("add", "sub") and a.bound + b.bound > limit:
            kind = "min"
        if kind == "div":
            b = self.unary("abs", b)
            b = self.int_binary("add", b, self.constant(1, "i32"))
        bound = {
            "add": a.bound + b.bound,
            "sub": a.bound + b.bound,
            "mul": a.bound * b.bound,
        }.get(kind, max(a.bound, b.bound))
        op = BINARY_OPS[kind](a.ssa, b.ssa)
        return self.emit(op, bound, exact=True)

    def compare_select(self, a: Value, b: Value, x: Value, y: Value) -> Value:
        """`select(cmp(a, b), x, y)`; `a` and `b` must be exact."""
        assert a.exact and b.exact
        predicate = self.draw(st.sampled_from(("gt", "lt", "ge", "le", "eq", "ne")))
        condition = coco.CmpOp(a.ssa, b.ssa, predicate)
        self.block.add_op(condition)
        select = coco.SelectOp(condition.result, x.ssa, y.ssa)
        return self.emit(select, max(x.bound, y.bound), x.exact and y.exact)

    def convert(self, a: Value, elt: str) -> Value:
        a = self.tame(a, LIMITS[elt])
        return self.emit(coco.ConvertOp(a.ssa, elt), a.bound, a.exact, a.floor)

    def dropout(self, a: Value) -> Value:
        p = self.draw(st.sampled_from(DROPOUT_PROBABILITIES))
        seed = self.draw(st.integers(0, 2**33))
        a = self.tame(a, self.limit(a) * (1 - p))
        return self.emit(coco.DropoutOp(a.ssa, p, seed), a.bound / (1 - p), a.exact)

    def reduce(self, a: Value, kind: str, dims: list[int]) -> Value:
        if kind != "sum":
            return self.emit(coco.ReduceOp(a.ssa, kind, dims), a.bound, a.exact)
        count = math.prod(a.type.dims[d] for d in dims)
        a = self.tame(a, self.limit(a) / count)
        return self.emit(coco.ReduceOp(a.ssa, kind, dims), a.bound * count, False)

    def norm(self, a: Value) -> Value:
        scale = math.sqrt(math.prod(a.type.dims))
        a = self.tame(a, self.limit(a) / scale)
        return self.emit(coco.NormOp(a.ssa), a.bound * scale, False, floor=0.0)

    def matmul(self, a: Value, b: Value) -> Value:
        k = a.type.dims[-1]
        if k * a.bound * b.bound > self.limit(a):
            target = math.sqrt(self.limit(a) / k)
            a, b = self.tame(a, target), self.tame(b, target)
        return self.emit(coco.MatmulOp(a.ssa, b.ssa), k * a.bound * b.bound, False)

    # -- communication --------------------------------------------------------

    def across_ranks(self, a: Value, reduction: str) -> tuple[Value, float, bool]:
        """The operand of a reduction over ranks, scaled so that the result
        stays tame, with the result's bound and exactness."""
        if reduction == "sum":
            a = self.tame(a, self.limit(a) / SLICE_MULTIPLE)
            return a, a.bound * SLICE_MULTIPLE, False
        if reduction == "prod":
            a = self.tame(a, 1.0)
            return a, a.bound, False
        return a, a.bound, a.exact

    def all_reduce(self, a: Value, reduction: str = "sum") -> Value:
        a, bound, exact = self.across_ranks(a, reduction)
        return self.emit(coco.AllReduceOp(a.ssa, reduction), bound, exact)

    def reduce_scatter(self, a: Value, reduction: str, dim: int) -> Value:
        a, bound, exact = self.across_ranks(a, reduction)
        return self.emit(coco.ReduceScatterOp(a.ssa, reduction, dim), bound, exact)

    def all_gather(self, a: Value) -> Value:
        return self.emit(coco.AllGatherOp(a.ssa), a.bound, a.exact, a.floor)

    def all_slice(self, a: Value, dim: int) -> Value:
        return self.emit(coco.AllSliceOp(a.ssa, dim), a.bound, a.exact, a.floor)

    def all_to_all(self, a: Value, dim: int) -> Value:
        return self.emit(coco.AllToAllOp(a.ssa, dim), a.bound, a.exact, a.floor)

    def broadcast(self, a: Value, root: int) -> Value:
        return self.emit(coco.BroadcastOp(a.ssa, root), a.bound, a.exact, a.floor)

    def update(self, param: Value, value: Value) -> None:
        assert param.type == value.type and param.ssa in self.updated
        self.block.add_op(coco.UpdateOp(param.ssa, value.ssa))

    def send(self, value: Value, to: str, channel: int) -> None:
        self.block.add_op(coco.SendOp(value.ssa, to, channel))

    def recv(self, sent: Value, source: str, channel: int) -> Value:
        op = coco.RecvOp(sent.type, source, channel)
        return self.emit(op, sent.bound, sent.exact, sent.floor)

    # -- operands that combine with a subject -----------------------------------

    def scalar(self, elt: str, exact_only: bool = False) -> Value:
        """A rank-0 replicated operand: a constant, or a live or fresh scalar."""
        if self.draw(st.booleans()):
            numbers = INT_SCALARS if elt == "i32" else SCALARS
            return self.constant(self.draw(st.sampled_from(numbers)), elt)
        tensor = TensorType([], coco.ELEMENT_TYPES[elt], REPLICATED)
        return self.value_of_type(tensor, exact_only)

    def partner(self, a: Value, exact_only: bool = False) -> Value:
        """An operand that combines with `a` elementwise into `a`'s type: one of
        its type, its replicated twin, a scalar, or a replicated bias."""
        kind = self.draw(st.sampled_from(("same", "replicated", "scalar", "bias")))
        if kind == "scalar" or a.type.rank == 0:
            return self.scalar(a.elt, exact_only)
        if kind == "same":
            return self.value_of_type(a.type, exact_only)
        if kind == "replicated":
            return self.value_of_type(a.type.with_layout(REPLICATED), exact_only)
        return self.value_of_type(self.draw(bias_types(a.type)), exact_only)

    # -- the function -----------------------------------------------------------

    def leaves(self) -> list[Value]:
        """Computed values nothing uses (not arguments)."""
        return [
            v
            for v in self.values
            if not isinstance(v.ssa, BlockArgument)
            and v not in self.results
            and v.ssa.first_use is None
        ]

    def build(self, return_leaves: bool = True) -> FuncOp:
        """The function: explicit results, then a random subset of the leaves
        (the other leaves stay dead code)."""
        results = list(self.results)
        if return_leaves:
            leaves = self.leaves()
            keep = self.draw(
                st.lists(st.booleans(), min_size=len(leaves), max_size=len(leaves))
            )
            results += [v for v, kept in zip(leaves, keep) if kept]
            if not results and not self.updated and leaves:
                results.append(leaves[-1])
        self.block.add_op(ReturnOp(*(v.ssa for v in results)))
        arg_types = [a.type for a in self.block.args]
        result_types = [v.type for v in results]
        return FuncOp(self.name, (arg_types, result_types), Region(self.block))


# The composite strategies are defined once, here, not in the functions that
# return them: `st.composite` inspects its function's source each time it is
# applied (about 1 ms), and those functions are called for every op drawn.


@st.composite
def draw_bias(draw: DrawFn, tensor: TensorType) -> TensorType:
    kept = draw(st.integers(1, tensor.rank))
    dims = [
        1 if draw(st.integers(0, 3)) == 3 else size
        for size in tensor.dims[tensor.rank - kept :]
    ]
    return TensorType(dims, tensor.element_type, REPLICATED)


def bias_types(tensor: TensorType) -> st.SearchStrategy[TensorType]:
    """Replicated types that broadcast to `tensor`: trailing dims, some 1."""
    return draw_bias(tensor)


# ============================================================================
# Fresh types
# ============================================================================


def layouts_for(
    shape: tuple[int, ...], kinds: tuple[str, ...]
) -> st.SearchStrategy[LayoutAttr]:
    """Layouts of the given kinds that fit `shape` (sliced: divisible dims)."""
    options: list[LayoutAttr] = []
    if "replicated" in kinds:
        options.append(REPLICATED)
    if "local" in kinds:
        options.append(LOCAL)
    if "sliced" in kinds:
        options += [
            LayoutAttr.sliced(d)
            for d, size in enumerate(shape)
            if size % SLICE_MULTIPLE == 0
        ]
    return st.sampled_from(options)


def tensor_types(
    elt: str,
    ranks: tuple[int, ...] = (1, 2, 3, 0),
    kinds: tuple[str, ...] = ("replicated", "local", "sliced"),
) -> st.SearchStrategy[TensorType]:
    """Fresh argument types; rank 0 only for replicated/local kinds."""
    return draw_type(elt, ranks, kinds)


@st.composite
def draw_type(
    draw: DrawFn, elt: str, ranks: tuple[int, ...], kinds: tuple[str, ...]
) -> TensorType:
    usable = [r for r in ranks if r > 0 or kinds != ("sliced",)]
    shape = draw(st.sampled_from([s for r in usable for s in SHAPES[r]]))
    allowed = kinds if shape else tuple(k for k in kinds if k != "sliced")
    layout = draw(layouts_for(shape, allowed))
    return TensorType(shape, coco.ELEMENT_TYPES[elt], layout)


def is_sliced(t: TensorType) -> bool:
    return t.layout.is_sliced


def is_local(t: TensorType) -> bool:
    return t.layout.is_local


def is_replicated(t: TensorType) -> bool:
    return t.layout.is_replicated


# ============================================================================
# Generic steps: one random op on a fitting subject
# ============================================================================


def step_binary(s: StageBuilder) -> Value:
    a = s.subject(lambda t: True, tensor_types(s.elt))
    b = s.partner(a)
    if s.draw(st.booleans()):
        a, b = b, a
    kind = s.draw(st.sampled_from(tuple(BINARY_OPS)))
    return s.binary(kind, a, b)


def step_unary(s: StageBuilder) -> Value:
    a = s.subject(lambda t: True, tensor_types(s.elt))
    return s.unary(s.draw(st.sampled_from(tuple(UNARY_OPS))), a)


def step_select(s: StageBuilder) -> Value:
    """`select(cmp(a, b), x, y)`, or (one time in two) `select(c, x, y)` with
    an i1 argument `c`."""
    found = s.pick(lambda t: True, exact_only=True)
    a = found if found is not None else s.argument(s.draw(tensor_types(s.elt)))
    if s.draw(st.booleans()):
        condition = s.value_of_type(a.type.with_element_type(coco.ELEMENT_TYPES["i1"]))
        select = coco.SelectOp(condition.ssa, a.ssa, s.partner(a).ssa)
        return s.emit(select, a.bound, a.exact)
    b = s.partner(a, exact_only=True)
    return s.compare_select(a, b, s.partner(a), s.partner(a))


def step_int(s: StageBuilder) -> Value:
    """A short i32 computation: arithmetic, `cmp`/`select` and all_reduce.
    Integers are exact in any order, so every value may be compared."""
    a = s.subject(lambda t: True, tensor_types("i32"), elt="i32")
    for _ in range(s.draw(st.integers(1, 3))):
        kind = s.draw(
            st.sampled_from(("binary", "binary", "unary", "select", "all_reduce"))
        )
        if kind == "binary":
            b = s.partner(a)
            if s.draw(st.booleans()):
                a, b = b, a
            a = s.int_binary(s.draw(st.sampled_from(INT_BINARY_OPS)), a, b)
        elif kind == "unary":
            a = s.unary(s.draw(st.sampled_from(INT_UNARY_OPS)), a)
        elif kind == "select":
            a = s.compare_select(a, s.partner(a), s.partner(a), s.partner(a))
        elif not a.type.layout.is_sliced:
            reduction = s.draw(st.sampled_from(("sum", "max", "min")))
            if reduction == "sum" and a.bound * SLICE_MULTIPLE > LIMITS["i32"]:
                reduction = "max"
            bound = a.bound * SLICE_MULTIPLE if reduction == "sum" else a.bound
            a = s.emit(coco.AllReduceOp(a.ssa, reduction), bound, exact=True)
    return a


def mixed_precision(s: StageBuilder, a: Value, round_trip: bool = True) -> Value:
    """`a` converted to another float type, an op there, and back (or, when
    not `round_trip`, sometimes just the conversion)."""
    target = s.draw(st.sampled_from([e for e in FLOAT_TYPES if e != a.elt]))
    converted = s.convert(a, target)
    if not round_trip and not s.draw(st.integers(0, 3)):
        return converted
    unary = s.unary(s.draw(st.sampled_from(tuple(UNARY_OPS))), converted)
    return s.convert(unary, a.elt)


def step_convert(s: StageBuilder) -> Value:
    a = s.subject(lambda t: True, tensor_types(s.elt))
    return mixed_precision(s, a, round_trip=False)


def step_dropout(s: StageBuilder) -> Value:
    return s.dropout(s.subject(lambda t: True, tensor_types(s.elt)))


def step_reduce(s: StageBuilder) -> Value:
    a = s.subject(lambda t: t.rank >= 1, tensor_types(s.elt, ranks=(1, 2, 3)))
    dims = s.draw(
        st.lists(
            st.integers(0, a.type.rank - 1),
            min_size=1,
            max_size=a.type.rank,
            unique=True,
        )
    )
    return s.reduce(a, s.draw(st.sampled_from(("sum", "max", "min"))), dims)


def step_norm(s: StageBuilder) -> Value:
    a = s.subject(
        lambda t: not t.layout.is_sliced,
        tensor_types(s.elt, kinds=("replicated", "local")),
    )
    return s.norm(a)


def matmul_rhs_layouts(lhs: TensorType) -> list[LayoutAttr]:
    """The layouts of `b` that the matmul table allows with this `a`."""
    last = lhs.rank - 1
    if lhs.layout.is_replicated:
        return [REPLICATED, LayoutAttr.sliced(1)]
    if lhs.layout.is_sliced and lhs.layout.sliced_dim == last:
        return [LayoutAttr.sliced(0)]
    return [REPLICATED]


def matmul_with(s: StageBuilder, a: Value) -> Value:
    """`a @ b` for a `b` drawn to fit the table (and `M` divisible when sliced)."""
    layout = s.draw(st.sampled_from(matmul_rhs_layouts(a.type)))
    m = s.draw(st.sampled_from(SIZES))
    b = s.value_of_type(TensorType([a.type.dims[-1], m], a.type.element_type, layout))
    return s.matmul(a, b)


def step_matmul(s: StageBuilder) -> Value:
    a = s.subject(lambda t: t.rank >= 2, tensor_types(s.elt, ranks=(2, 3)))
    return matmul_with(s, a)


def step_all_slice(s: StageBuilder) -> Value:
    a = s.subject(
        lambda t: is_replicated(t) and bool(divisible_dims(t)),
        tensor_types(s.elt, ranks=(1, 2, 3), kinds=("replicated",)),
    )
    return s.all_slice(a, s.draw(st.sampled_from(divisible_dims(a.type))))


def reductions() -> st.SearchStrategy[str]:
    return st.sampled_from(("sum", "sum", "max", "min", "prod"))


def step_all_reduce(s: StageBuilder) -> Value:
    a = s.subject(
        lambda t: not t.layout.is_sliced,
        tensor_types(s.elt, kinds=("local", "replicated")),
    )
    return s.all_reduce(a, s.draw(reductions()))


def step_reduce_scatter(s: StageBuilder) -> Value:
    a = s.subject(
        lambda t: is_local(t) and bool(divisible_dims(t)),
        tensor_types(s.elt, ranks=(1, 2, 3), kinds=("local",)),
    )
    dim = s.draw(st.sampled_from(divisible_dims(a.type)))
    return s.reduce_scatter(a, s.draw(reductions()), dim)


def step_all_gather(s: StageBuilder) -> Value:
    a = s.subject(is_sliced, tensor_types(s.elt, ranks=(1, 2, 3), kinds=("sliced",)))
    return s.all_gather(a)


def step_broadcast(s: StageBuilder) -> Value:
    a = s.subject(is_local, tensor_types(s.elt, kinds=("local",)))
    return s.broadcast(a, s.draw(st.integers(0, min(WORLDS) - 1)))


def step_all_to_all(s: StageBuilder) -> Value:
    a = s.subject(is_sliced, tensor_types(s.elt, ranks=(2, 3), kinds=("sliced",)))
    return s.all_to_all(a, s.draw(st.sampled_from(divisible_dims(a.type))))


def step_update(s: StageBuilder) -> Value | None:
    """Update a parameter with a computed value of its type."""
    computed = [
        v for v in s.values if v.is_float and not isinstance(v.ssa, BlockArgument)
    ]
    if not computed:
        computed = [step_binary(s)]
    value = s.draw(st.sampled_from(computed))
    s.update(s.parameter(value.type), value)
    return None


# ============================================================================
# Motifs: the program shapes the passes target
# ============================================================================


CHAIN_LINKS = st.sampled_from(
    ("binary", "binary", "unary", "unary", "dropout", "convert")
)


def chain(s: StageBuilder, value: Value, max_length: int = 3) -> Value:
    """A few elementwise ops on `value` with operands that keep its layout."""
    for _ in range(s.draw(st.integers(0, max_length))):
        kind = s.draw(CHAIN_LINKS)
        if kind == "binary":
            op = s.draw(st.sampled_from(tuple(BINARY_OPS)))
            value = s.binary(op, value, s.partner(value))
        elif kind == "unary":
            value = s.unary(s.draw(st.sampled_from(tuple(UNARY_OPS))), value)
        elif kind == "dropout":
            value = s.dropout(value)
        else:
            value = mixed_precision(s, value)
    return value


def finish(s: StageBuilder, value: Value) -> None:
    """End a motif: return the value, update a parameter with it, or leave it
    (returned or dead, as `build` decides)."""
    how = s.draw(st.sampled_from(("return", "update", "leave")))
    if how == "return":
        s.results.append(value)
    elif how == "update" and value.is_float:
        s.update(s.parameter(value.type), value)
    if not s.draw(st.integers(0, 3)):
        s.results.append(summary(s, value))


def summary(s: StageBuilder, value: Value) -> Value:
    """A norm or a reduction of `value` (its operand made replicated or local
    by an all_gather first when it is sliced, as norm requires)."""
    if value.type.rank == 0 or s.draw(st.booleans()):
        if value.type.layout.is_sliced:
            value = s.all_gather(value)
        return s.norm(value)
    dims = s.draw(
        st.sampled_from([[value.type.rank - 1], list(range(value.type.rank))])
    )
    return s.reduce(value, s.draw(st.sampled_from(("sum", "max", "min"))), dims)


def optimizer_shapes() -> st.SearchStrategy[tuple[int, ...]]:
    return st.sampled_from([*SHAPES[1], *SHAPES[2], ()])


def motif_optimizer(s: StageBuilder) -> None:
    """Data-parallel training: all_reduce a local gradient, then an optimizer
    step with replicated state, scalars and constants, ending in updates."""
    shape = s.draw(optimizer_shapes())
    elt = coco.ELEMENT_TYPES[s.elt]
    grad = s.all_reduce(s.value_of_type(TensorType(shape, elt, LOCAL)))
    state = TensorType(shape, elt, REPLICATED)
    flavor = s.draw(st.sampled_from(("chain", "sgd", "momentum", "adam", "lamb")))
    if flavor == "chain":
        finish(s, chain(s, grad, max_length=4))
        return
    w = s.parameter(state)
    lr = s.scalar(s.elt)
    if flavor == "sgd":
        s.update(w, s.binary("sub", w, s.binary("mul", lr, chain(s, grad, 1))))
        return
    if flavor == "momentum":
        m = s.parameter(state)
        m1 = s.binary("add", s.binary("mul", s.constant(0.9, s.elt), m), grad)
        s.update(w, s.binary("sub", w, s.binary("mul", lr, m1)))
        s.update(m, m1)
        return
    step, m, v, m1, v1 = adam_step(s, grad, state)
    if flavor == "lamb":
        ratio = s.binary("div", s.norm(w), s.norm(step))
        step = s.binary("mul", ratio, step)
    s.update(w, s.binary("sub", w, s.binary("mul", lr, step)))
    s.update(m, m1)
    s.update(v, v1)


def adam_step(
    s: StageBuilder, grad: Value, state: TensorType
) -> tuple[Value, Value, Value, Value, Value]:
    """Adam's moments and step `m1 / (sqrt(v1) + eps)`: (step, m, v, m1, v1)."""
    m, v = s.parameter(state), s.parameter(state)
    one = s.constant(1.0, s.elt)
    b1, b2 = s.constant(0.9, s.elt), s.constant(0.999, s.elt)
    m1 = s.binary(
        "add", s.binary("mul", b1, m), s.binary("mul", s.binary("sub", one, b1), grad)
    )
    gg = s.binary("mul", grad, grad)
    v1 = s.binary(
        "add", s.binary("mul", b2, v), s.binary("mul", s.binary("sub", one, b2), gg)
    )
    denominator = s.binary("add", s.unary("sqrt", v1), s.constant(1e-3, s.elt))
    return s.binary("div", m1, denominator), m, v, m1, v1


def activation_shapes(k: int) -> st.SearchStrategy[tuple[int, ...]]:
    """`[..., K]` shapes of a layer's input."""
    return st.sampled_from([(8, k), (16, k), (8, 8, k)])


def motif_row_parallel(s: StageBuilder) -> None:
    """Megatron's row-parallel layer: matmul sliced<last> x sliced<0> -> local,
    all_reduce (or reduce_scatter, sequence parallelism), bias, dropout and
    residual."""
    elt = coco.ELEMENT_TYPES[s.elt]
    k, m = s.draw(st.sampled_from(SIZES)), s.draw(st.sampled_from(SIZES))
    shape = s.draw(activation_shapes(k))
    x = s.value_of_type(TensorType(shape, elt, LayoutAttr.sliced(len(shape) - 1)))
    w = s.value_of_type(TensorType([k, m], elt, LayoutAttr.sliced(0)))
    partial = s.matmul(x, w)
    if s.draw(st.integers(0, 3)) == 0:
        out = s.reduce_scatter(partial, "sum", 0)
    else:
        out = s.all_reduce(partial)
    out = s.binary("add", out, s.value_of_type(TensorType([m], elt, REPLICATED)))
    if s.draw(st.booleans()):
        out = s.dropout(out)
    if s.draw(st.booleans()):
        out = s.binary("add", out, s.value_of_type(out.type))
    finish(s, chain(s, out, max_length=2))


def motif_gather_matmul(s: StageBuilder) -> None:
    """all_gather a sliced activation, then a matmul (column-parallel weight or
    replicated), then an activation function."""
    elt = coco.ELEMENT_TYPES[s.elt]
    k = s.draw(st.sampled_from(SIZES))
    shape = s.draw(activation_shapes(k))
    dim = s.draw(st.sampled_from(range(len(shape))))
    x = s.value_of_type(TensorType(shape, elt, LayoutAttr.sliced(dim)))
    out = matmul_with(s, s.all_gather(x))
    if s.draw(st.booleans()):
        out = s.unary(s.draw(st.sampled_from(("gelu", "relu", "tanh"))), out)
    finish(s, chain(s, out, max_length=2))


def motif_matmul_scatter(s: StageBuilder) -> None:
    """matmul -> reduce_scatter -> elementwise on slices (-> all_gather)."""
    elt = coco.ELEMENT_TYPES[s.elt]
    k = s.draw(st.sampled_from(SIZES))
    shape = s.draw(activation_shapes(k))
    x = s.value_of_type(TensorType(shape, elt, LayoutAttr.sliced(len(shape) - 1)))
    w = s.value_of_type(TensorType([k, 8], elt, LayoutAttr.sliced(0)))
    partial = s.matmul(x, w)
    dim = s.draw(st.sampled_from(divisible_dims(partial.type)))
    out = chain(s, s.reduce_scatter(partial, "sum", dim), max_length=2)
    if s.draw(st.booleans()):
        out = s.all_gather(out)
    finish(s, out)


def motif_norms(s: StageBuilder) -> None:
    """Norms and reductions of replicated values: `x / (norm(x) + 1)` and a
    reduction over some dims."""
    x = s.subject(
        lambda t: is_replicated(t) and t.rank >= 1,
        tensor_types(s.elt, ranks=(1, 2, 3), kinds=("replicated",)),
    )
    finish(s, s.binary("div", x, s.norm(x)))
    if s.draw(st.booleans()):
        dims = s.draw(st.sampled_from([[0], list(range(x.type.rank))]))
        finish(s, s.reduce(x, s.draw(st.sampled_from(("sum", "max"))), dims))


def motif_cross_gather(s: StageBuilder) -> None:
    """Two values gathered along different dims, each through a short chain,
    then combined elementwise: no dim of the result lines up with both gathers,
    so coco-reorder cannot move the combination onto either's slices. The
    second value may have fewer dims (a trailing part of the shape, broadcast)."""
    elt = coco.ELEMENT_TYPES[s.elt]
    shape = s.draw(st.sampled_from([*SHAPES[2], *SHAPES[3]]))
    rank = len(shape)
    first, second = s.draw(st.permutations(range(rank)))[:2]  # dims of the result
    kept = s.draw(st.integers(rank - second, rank))  # the second keeps `second`
    a = s.value_of_type(TensorType(shape, elt, LayoutAttr.sliced(first)))
    b = s.value_of_type(
        TensorType(shape[rank - kept :], elt, LayoutAttr.sliced(second - rank + kept))
    )
    a = chain(s, s.all_gather(a), max_length=1)
    b = chain(s, s.all_gather(b), max_length=1)
    if s.draw(st.booleans()):
        a, b = b, a
    out = s.binary(s.draw(st.sampled_from(tuple(BINARY_OPS))), a, b)
    finish(s, chain(s, out, max_length=1))


Step = Callable[[StageBuilder], object]

STEPS: dict[str, Step] = {
    "binary": step_binary,
    "optimizer": motif_optimizer,
    "row_parallel": motif_row_parallel,
    "gather_matmul": motif_gather_matmul,
    "matmul_scatter": motif_matmul_scatter,
    "norms": motif_norms,
    "cross_gather": motif_cross_gather,
    "unary": step_unary,
    "select": step_select,
    "convert": step_convert,
    "dropout": step_dropout,
    "reduce": step_reduce,
    "norm": step_norm,
    "matmul": step_matmul,
    "all_slice": step_all_slice,
    "all_reduce": step_all_reduce,
    "reduce_scatter": step_reduce_scatter,
    "all_gather": step_all_gather,
    "broadcast": step_broadcast,
    "all_to_all": step_all_to_all,
    "update": step_update,
    "int": step_int,
}
"""Every step by name (first = what shrinking prefers)."""

MOTIFS = (
    "optimizer",
    "row_parallel",
    "gather_matmul",
    "matmul_scatter",
    "norms",
    "cross_gather",
)

MOTIF_WEIGHTS = ("optimizer", "optimizer", *MOTIFS)
"""Motifs as drawn: the optimizer, the first target of the passes, is likelier."""


def step_names() -> st.SearchStrategy[str]:
    """A step: a motif about half the time, else one random op."""
    return st.one_of(
        st.sampled_from(tuple(name for name in STEPS if name not in MOTIFS)),
        st.sampled_from(MOTIF_WEIGHTS),
    )


ELEMENTWISE_STEPS = ("binary", "unary", "select", "convert", "dropout", "int")
"""The steps of one op each that lower to map kernels alone (no collective,
reduction or matmul): `elementwise_programs`."""


def run_steps(
    s: StageBuilder,
    max_steps: int,
    min_steps: int = 1,
    names: st.SearchStrategy[str] | None = None,
) -> None:
    """Up to `max_steps` steps, drawn from `names` (else `step_names`)."""
    names_ = names if names is not None else step_names()
    steps = s.draw(st.lists(names_, min_size=min_steps, max_size=max_steps))
    for name in steps:
        STEPS[name](s)


# ============================================================================
# Programs
# ============================================================================


@dataclass(frozen=True)
class Program:
    """A generated module and how to compare it with a transformed form."""

    module: ModuleOp
    worlds: tuple[int, ...]
    rtol: float
    atol: float

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """How hypothesis shows a falsifying example: the program text."""
        printer.text(repr(self))

    def __repr__(self) -> str:
        return (
            f"Program(worlds={self.worlds}, rtol={self.rtol}, atol={self.atol}):\n"
            + to_text(self.module)
        )


def send_collective_result(s: StageBuilder, to: str, channel: int) -> Value:
    """The end of a pipeline's first stage: send an all_reduce or all_gather
    result (after a short elementwise chain) to the next stage."""
    if s.draw(st.booleans()):
        a = s.subject(is_local, tensor_types(s.elt, kinds=("local",)))
        sent = s.all_reduce(a)
    else:
        a = s.subject(
            is_sliced, tensor_types(s.elt, ranks=(1, 2, 3), kinds=("sliced",))
        )
        sent = s.all_gather(a)
    sent = chain(s, sent, max_length=2)
    s.send(sent, to, channel)
    return sent


def pipeline_functions(draw: DrawFn, elt: str, max_steps: int) -> list[FuncOp]:
    """Two stages: @stage0 ends by sending to @stage1, which goes on with it."""
    first = StageBuilder(draw, "stage0", elt)
    second = StageBuilder(draw, "stage1", elt)
    run_steps(first, max_steps=max_steps // 2, min_steps=0)
    channels = draw(st.integers(1, 2))
    received = [
        second.recv(send_collective_result(first, "stage1", c), "stage0", c)
        for c in range(channels)
    ]
    for value in received:
        finish(second, chain(second, value, max_length=3))
    run_steps(second, max_steps=max_steps // 2, min_steps=0)
    return [first.build(return_leaves=draw(st.booleans())), second.build()]


def tolerances(module: ModuleOp) -> tuple[float, float]:
    """The loosest `(rtol, atol)` over the element types the module uses."""
    names = {
        element_type_name(t.element_type)
        for op in module.walk()
        for t in [*(r.type for r in op.results), *(o.type for o in op.operands)]
        if isinstance(t, TensorType) and is_float(t.element_type)
    }
    names |= {
        element_type_name(a.type.element_type)
        for op in module.walk()
        for region in op.regions
        for block in region.blocks
        for a in block.args
        if isinstance(a.type, TensorType) and is_float(a.type.element_type)
    }
    chosen = [TOLERANCES[n] for n in names] or [TOLERANCES["f32"]]
    return max(r for r, _ in chosen), max(a for _, a in chosen)


NAMEABLE = (
    coco.CollectiveOp,
    coco.MatmulOp,
    coco.UpdateOp,
    coco.SendOp,
    coco.ElementwiseBinaryOp,
)
"""Ops that may get a `name` attribute: what `op=NAME` targets."""


def name_some_ops(draw: DrawFn, module: ModuleOp) -> None:
    """Give one program in two a few named ops (`name = "s0"` or `"s1"`, a
    name possibly shared): the targets of the passes' `op=NAME` option."""
    if not draw(st.booleans()):
        return
    for op in module.walk():
        if isinstance(op, NAMEABLE) and draw(st.integers(0, 2)) == 2:
            op.attributes["name"] = StringAttr(draw(st.sampled_from(STAGE_NAMES)))


def stage_names_of(module: ModuleOp) -> list[str]:
    """The `name` attributes of the module's ops, sorted, without repeats."""
    return sorted(
        {
            attr.data
            for op in module.walk()
            if isinstance(attr := op.attributes.get("name"), StringAttr)
        }
    )


@st.composite
def programs(draw: DrawFn, *, max_steps: int = 6, pipelines: bool = True) -> Program:
    """A verified module: one function (or, one time in five, a two-stage
    pipeline) of up to `max_steps` steps (ops or motifs)."""
    elt = draw(float_type_names())
    if pipelines and draw(st.integers(0, 4)) == 4:
        functions = pipeline_functions(draw, elt, max_steps + 1)
    else:
        stage = StageBuilder(draw, "main", elt)
        run_steps(stage, max_steps)
        functions = [stage.build()]
    module = ModuleOp(functions)
    name_some_ops(draw, module)
    worlds = WORLDS
    if draw(st.integers(0, 9)) == 9:
        world = draw(st.sampled_from(WORLDS))
        module.attributes[coco.WORLD_SIZE_ATTR] = IntegerAttr(world, i64)
        worlds = (world,)
    verify(module)
    rtol, atol = tolerances(module)
    return Program(module, worlds, rtol, atol)


@st.composite
def elementwise_programs(draw: DrawFn, *, max_steps: int = 6) -> Program:
    """A verified module of one function of up to `max_steps` elementwise
    steps (`ELEMENTWISE_STEPS`: arithmetic, conversions, select, dropout,
    i32), whose lowering is map kernels only (what every backend runs)."""
    stage = StageBuilder(draw, "main", draw(float_type_names()))
    run_steps(stage, max_steps, names=st.sampled_from(ELEMENTWISE_STEPS))
    module = ModuleOp([stage.build()])
    verify(module)
    rtol, atol = tolerances(module)
    return Program(module, WORLDS, rtol, atol)


def scaled_examples(base: int) -> int:
    """`base` examples under the default budget (100), scaled by the loaded
    hypothesis profile's `max_examples` (see conftest.py)."""
    return max(1, round(base * settings().max_examples / 100))
