"""A CoCoNet-like builder DSL: coco programs written as Python functions.

```python
import coconet_ir as cc

@cc.function
def sgd(g: cc.tensor([1024], cc.f32, cc.local),
        w: cc.tensor([1024], cc.f32, cc.replicated),
        lr: cc.tensor([], cc.f32, cc.replicated)):
    s = cc.all_reduce(g, "sum", name="sum")
    cc.update(w, w - lr * s)

print(cc.to_text(sgd.module))
```

`@cc.function` runs the Python function once, with one `Value` per parameter
(its type is the parameter's annotation), and records every op the body builds
into a `func.func` through an xDSL `Builder`. Values support `+ - * / ** @`,
unary `-` and `< <= > >=`; Python numbers on either side become `coco.constant`s
of the other operand's element type. Returned values become the `func.return`.
`cc.module(f, g, ...)` puts built functions into a `builtin.module` (a pipeline
when they `send`/`recv` to each other) and verifies it.

Every broken rule raises `coconet_ir.ir.CocoError` at once, pointing at the
Python line that built the op:
`prog.py:7:9: error: 'coco.matmul' op has no layout rule for lhs local ...`.
"""

from __future__ import annotations

import functools
import inspect
import numbers
import re
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Any, Protocol, TypeAlias, TypeVar, cast, overload

from xdsl.builder import Builder
from xdsl.dialects.builtin import (
    FileLineColLoc,
    FunctionType,
    IntAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    i64,
)
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import VerifyException

from coconet_ir.dialects import coco
from coconet_ir.ir import CocoError
from coconet_ir.ir import verify as verify_module

__all__ = [
    "Function",
    "Value",
    "abs",
    "add",
    "all_gather",
    "all_reduce",
    "all_slice",
    "all_to_all",
    "batch_matmul",
    "bf16",
    "broadcast",
    "cmp",
    "constant",
    "convert",
    "div",
    "dropout",
    "embedding",
    "exp",
    "f16",
    "f32",
    "f64",
    "function",
    "gelu",
    "i1",
    "i32",
    "layer_norm",
    "local",
    "log",
    "matmul",
    "maximum",
    "minimum",
    "module",
    "mul",
    "neg",
    "norm",
    "pow",
    "recv",
    "reduce",
    "reduce_scatter",
    "relu",
    "replicated",
    "reshape",
    "rms_norm",
    "rsqrt",
    "select",
    "send",
    "shift",
    "sliced",
    "sqrt",
    "sub",
    "tanh",
    "tensor",
    "transpose",
    "update",
]

# ============================================================================
# Types and layouts
# ============================================================================

f16 = coco.ELEMENT_TYPES["f16"]
bf16 = coco.ELEMENT_TYPES["bf16"]
f32 = coco.ELEMENT_TYPES["f32"]
f64 = coco.ELEMENT_TYPES["f64"]
i32 = coco.ELEMENT_TYPES["i32"]
i1 = coco.ELEMENT_TYPES["i1"]

replicated = coco.REPLICATED
"""Every rank holds the same full tensor."""

local = coco.LOCAL
"""Every rank holds a full-shape tensor with its own values."""

ElementType = Attribute | str
LayoutLike = coco.LayoutAttr | str
Operand: TypeAlias = "Value | float | int | bool"

_SLICED_SPELLING = re.compile(r"sliced<(\d+)>")


def sliced(dim: int) -> coco.LayoutAttr:
    """`sliced<dim>`: rank `r` holds block `r` of dimension `dim`."""
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 0:
        raise CocoError(f"sliced(dim) needs a dimension >= 0, got {dim!r}")
    return coco.LayoutAttr.sliced(dim)


def _element_type(element_type: ElementType) -> Attribute:
    """An element type given as an attribute (`cc.f32`) or its name (`"f32"`)."""
    if isinstance(element_type, str):
        if element_type not in coco.ELEMENT_TYPES:
            raise CocoError(
                f"unknown element type '{element_type}' (expected one of "
                f"{', '.join(coco.ELEMENT_TYPES)})"
            )
        return coco.ELEMENT_TYPES[element_type]
    if element_type not in coco.ELEMENT_TYPES.values():
        raise CocoError(
            f"{element_type} is not a coco element type (expected one of "
            f"{', '.join(coco.ELEMENT_TYPES)})"
        )
    return element_type


def _layout(layout: LayoutLike) -> coco.LayoutAttr:
    """A layout given as an attribute or spelled as in the IR (`"sliced<1>"`)."""
    if isinstance(layout, coco.LayoutAttr):
        return layout
    if layout == "replicated":
        return replicated
    if layout == "local":
        return local
    match = _SLICED_SPELLING.fullmatch(layout) if isinstance(layout, str) else None
    if match is None:
        raise CocoError(
            f"unknown layout {layout!r} (expected cc.replicated, cc.local or "
            "cc.sliced(d))"
        )
    return coco.LayoutAttr.sliced(int(match.group(1)))


def tensor(
    shape: Sequence[int],
    element_type: ElementType = f32,
    layout: LayoutLike = replicated,
) -> coco.TensorType:
    """`!coco.tensor<SHAPE x ELT, LAYOUT>`; `shape` is the global shape."""
    elt = _element_type(element_type)
    try:
        return coco.TensorType(list(shape), elt, _layout(layout))
    except VerifyException as err:
        raise CocoError(str(err)) from None


# ============================================================================
# The function being built
# ============================================================================


@dataclass
class _Scope:
    """The `func.func` under construction and the builder that fills it."""

    func: FuncOp
    builder: Builder

    @property
    def name(self) -> str:
        return self.func.sym_name.data


class _ScopeStack(threading.local):
    """The functions being built on this thread, innermost last (thread-local,
    as xDSL's implicit builder is)."""

    def __init__(self) -> None:
        self.scopes: list[_Scope] = []


_STACK = _ScopeStack()


def _current_scope(op_name: str) -> _Scope:
    if not _STACK.scopes:
        raise CocoError(
            f"'{op_name}' can only be built inside a function decorated with "
            "@cc.function",
            _user_location(),
        )
    return _STACK.scopes[-1]


@contextmanager
def _building(scope: _Scope) -> Iterator[_Scope]:
    _STACK.scopes.append(scope)
    try:
        yield scope
    finally:
        _STACK.scopes.pop()


def _user_frame() -> FrameType | None:
    """The innermost Python frame outside this file: the user's line."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    return frame


@functools.lru_cache(maxsize=256)
def _positions(code: CodeType) -> tuple[tuple[int | None, ...], ...]:
    """The source positions of `code`'s instructions, read once per code
    object (a model's builder makes thousands of ops from one function)."""
    return tuple(code.co_positions())


def _user_location() -> FileLineColLoc:
    frame = _user_frame()
    if frame is None:
        return FileLineColLoc(StringAttr("<unknown>"), IntAttr(0), IntAttr(0))
    line, column = frame.f_lineno, 1
    positions = _positions(frame.f_code)
    index = frame.f_lasti // 2
    if 0 <= index < len(positions):
        start_line, _, start_col, _ = positions[index]
        if start_line == line and start_col is not None:
            column = start_col + 1
    return FileLineColLoc(
        StringAttr(frame.f_code.co_filename), IntAttr(line), IntAttr(column)
    )


def _op_error(op_name: str, err: Exception) -> CocoError:
    """`FILE:LINE:COL: error: 'coco.op' op RULE` at the user's line, for an
    error raised while building or verifying `op_name`."""
    rule = err.rule if isinstance(err, coco.LayoutError) else str(err)
    message = " ".join(line.strip() for line in rule.strip().splitlines())
    return CocoError(message, _user_location(), op_name=op_name)


# ============================================================================
# Values
# ============================================================================


class Value:
    """A distributed tensor value of the function being built.

    Wraps an xDSL `SSAValue`; arithmetic on it builds coco ops.
    """

    __slots__ = ("_scope", "ssa")
    __array_ufunc__ = None  # numpy scalars defer to our reflected operators

    def __init__(self, ssa: SSAValue, scope: _Scope):
        self.ssa = ssa
        self._scope = scope

    @property
    def type(self) -> coco.TensorType:
        assert isinstance(self.ssa.type, coco.TensorType)
        return self.ssa.type

    @property
    def shape(self) -> tuple[int, ...]:
        """The global shape."""
        return self.type.dims

    @property
    def layout(self) -> coco.LayoutAttr:
        return self.type.layout

    @property
    def element_type(self) -> Attribute:
        return self.type.element_type

    @property
    def rank(self) -> int:
        return self.type.rank

    def __repr__(self) -> str:
        hint = self.ssa.name_hint or "?"
        return f"<cc.Value %{hint} : {self.type}>"

    def __bool__(self) -> bool:
        raise CocoError(
            "a coco value has no Python truth value (it is a distributed "
            "tensor); use cc.select for elementwise choice",
            _user_location(),
        )

    def __add__(self, other: Operand) -> Value:
        return add(self, other)

    def __radd__(self, other: Operand) -> Value:
        return add(other, self)

    def __sub__(self, other: Operand) -> Value:
        return sub(self, other)

    def __rsub__(self, other: Operand) -> Value:
        return sub(other, self)

    def __mul__(self, other: Operand) -> Value:
        return mul(self, other)

    def __rmul__(self, other: Operand) -> Value:
        return mul(other, self)

    def __truediv__(self, other: Operand) -> Value:
        return div(self, other)

    def __rtruediv__(self, other: Operand) -> Value:
        return div(other, self)

    def __pow__(self, other: Operand) -> Value:
        return pow(self, other)

    def __rpow__(self, other: Operand) -> Value:
        return pow(other, self)

    def __matmul__(self, other: Value) -> Value:
        return matmul(self, other)

    def __rmatmul__(self, other: Value) -> Value:
        return matmul(other, self)

    def __neg__(self) -> Value:
        return neg(self)

    def __lt__(self, other: Operand) -> Value:
        return cmp(self, other, "lt")

    def __le__(self, other: Operand) -> Value:
        return cmp(self, other, "le")

    def __gt__(self, other: Operand) -> Value:
        return cmp(self, other, "gt")

    def __ge__(self, other: Operand) -> Value:
        return cmp(self, other, "ge")


# ============================================================================
# Emitting ops
# ============================================================================

_VERIFIED_AT_MODULE = (coco.SendOp, coco.RecvOp)
"""Ops whose rules need the whole module (the other stage): checked by cc.module."""


def _emit(op_name: str, make: Callable[[], Operation], name: str | None) -> Operation:
    """Build an op, insert it into the current function and check its rules."""
    scope = _current_scope(op_name)
    _check_name(op_name, name)
    try:
        op = make()
    except (VerifyException, ValueError, KeyError, TypeError) as err:
        raise _op_error(op_name, err) from None
    op.location = _user_location()
    scope.builder.insert(op)
    if not isinstance(op, _VERIFIED_AT_MODULE):
        try:
            op.verify()
        except VerifyException as err:
            Rewriter.erase_op(op, safe_erase=False)
            raise _op_error(op_name, err) from None
    _name_results(op, name)
    return op


def _check_name(op_name: str, name: object) -> None:
    """A builder's `name=` must be a string (or None)."""
    if name is not None and not isinstance(name, str):
        raise _op_error(op_name, TypeError(f"name must be a string, got {name!r}"))


def _name_results(op: Operation, name: str | None) -> None:
    """The results of an op labelled `name` carry it as their SSA name."""
    if name is not None:
        for result in op.results:
            result.name_hint = SSAValue.extract_valid_name(name)


def _result(op: Operation) -> Value:
    return Value(op.results[0], _STACK.scopes[-1])


def _emitted(op_name: str, make: Callable[[], Operation], name: str | None) -> Value:
    """`_emit`, then the op's result as a DSL value."""
    return _result(_emit(op_name, make, name))


def _apply(
    op_type: type[coco.CocoOp],
    operands: Sequence[tuple[object, str]],
    name: str | None,
    *options: object,
) -> Operation:
    """Emit `op_type` on `operands` (each a DSL value and what it is, for the
    error when it is not one) and `options`, labelled `name`."""
    build = cast(Callable[..., Operation], op_type)  # each op's own builder
    values = [_value(op_type.name, x, what) for x, what in operands]
    return _emit(op_type.name, lambda: build(*values, *options, label=name), name)


def _value(op_name: str, x: object, what: str = "operand") -> SSAValue:
    """The SSA value of a DSL value of the function being built."""
    if not isinstance(x, Value):
        raise CocoError(
            f"{what} must be a coco value (cc.Value), got {type(x).__name__} {x!r}",
            _user_location(),
            op_name=op_name,
        )
    scope = _current_scope(op_name)
    if x._scope is not scope:
        raise CocoError(
            f"{what} belongs to @{x._scope.name}, not to @{scope.name} (use "
            "cc.send / cc.recv to move values between stages)",
            _user_location(),
            op_name=op_name,
        )
    return x.ssa


def _is_scalar(x: object) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, Value)


def _constant(
    value: object,
    element_type: Attribute,
    name: str | None = None,
    shape: Sequence[int] = (),
) -> Value:
    """`value`, a Python number, as a `coco.constant` of `element_type` (and
    `shape`: a splat)."""
    if not isinstance(value, numbers.Real) or isinstance(value, Value):
        raise CocoError(
            f"value must be a Python number, got {value!r}",
            _user_location(),
            op_name="coco.constant",
        )
    real = float(value)
    problem = None
    if not coco.is_float(element_type) and real != int(real):
        problem = f"{value!r} is not an integer but the element type is {element_type}"
    elif element_type == i1 and value not in (0, 1):
        problem = f"an i1 constant must be 0 or 1, got {value!r}"
    if problem is not None:
        raise CocoError(problem, _user_location(), op_name="coco.constant")
    number = real if coco.is_float(element_type) else int(real)
    return _emitted(
        "coco.constant",
        lambda: coco.ConstantOp(number, element_type, shape=shape, label=name),
        name,
    )


def _promote(op_name: str, *operands: object) -> list[SSAValue]:
    """Operands as SSA values; Python numbers become constants of the element
    type of the (last) value operand."""
    values = [x for x in operands if isinstance(x, Value)]
    if not values:
        raise CocoError(
            "needs at least one coco value operand, got "
            f"{', '.join(repr(x) for x in operands)}",
            _user_location(),
            op_name=op_name,
        )
    element_type = values[-1].element_type
    return [
        _constant(x, element_type).ssa if _is_scalar(x) else _value(op_name, x)
        for x in operands
    ]


# ============================================================================
# Compute ops
# ============================================================================


class BinaryFunction(Protocol):
    """An elementwise op on two operands (a Python number becomes a constant
    of the other's element type)."""

    def __call__(
        self, lhs: Operand, rhs: Operand, *, name: str | None = None
    ) -> Value: ...


class UnaryFunction(Protocol):
    """An elementwise op on one value."""

    def __call__(self, x: Value, *, name: str | None = None) -> Value: ...


def _binary(
    function_name: str, op_type: type[coco.ElementwiseBinaryOp], doc: str
) -> BinaryFunction:
    """The DSL function `function_name` that emits `op_type` (as numpy makes
    its ufuncs from a table)."""

    def function(lhs: Operand, rhs: Operand, *, name: str | None = None) -> Value:
        op_name = op_type.name
        a, b = _promote(op_name, lhs, rhs)
        return _emitted(op_name, lambda: op_type(a, b, label=name), name)

    return _named(function, function_name, doc)


def _unary(
    function_name: str, op_type: type[coco.ElementwiseUnaryOp], doc: str
) -> UnaryFunction:
    """The DSL function `function_name` that emits `op_type`."""

    def function(x: Value, *, name: str | None = None) -> Value:
        a = _value(op_type.name, x)
        return _emitted(op_type.name, lambda: op_type(a, label=name), name)

    return _named(function, function_name, doc)


_F = TypeVar("_F", bound=Callable[..., Any])


def _named(function: _F, function_name: str, doc: str) -> _F:
    function.__name__ = function.__qualname__ = function_name
    function.__doc__ = doc
    return function


add = _binary(
    "add",
    coco.AddOp,
    "Elementwise `lhs + rhs` (`coco.add`); also `lhs + rhs` on values.",
)
sub = _binary("sub", coco.SubOp, "Elementwise `lhs - rhs` (`coco.sub`).")
mul = _binary("mul", coco.MulOp, "Elementwise `lhs * rhs` (`coco.mul`).")
div = _binary("div", coco.DivOp, "Elementwise `lhs / rhs` (`coco.div`).")
maximum = _binary("maximum", coco.MaxOp, "Elementwise maximum (`coco.max`).")
minimum = _binary("minimum", coco.MinOp, "Elementwise minimum (`coco.min`).")
pow = _binary("pow", coco.PowOp, "Elementwise `lhs ** rhs` on floats (`coco.pow`).")


def cmp(
    lhs: Operand, rhs: Operand, predicate: str, *, name: str | None = None
) -> Value:
    """Elementwise comparison (`coco.cmp`), `predicate` one of
    `eq ne lt le gt ge`; the result has element type i1."""
    a, b = _promote("coco.cmp", lhs, rhs)
    return _emitted("coco.cmp", lambda: coco.CmpOp(a, b, predicate, label=name), name)


def select(
    condition: Value, if_true: Operand, if_false: Operand, *, name: str | None = None
) -> Value:
    """Elementwise `condition ? if_true : if_false` (`coco.select`)."""
    c = _value("coco.select", condition, "condition")
    a, b = _promote("coco.select", if_true, if_false)
    return _emitted("coco.select", lambda: coco.SelectOp(c, a, b, label=name), name)


neg = _unary("neg", coco.NegOp, "Elementwise `-x`; also `-x` on values.")
abs = _unary("abs", coco.AbsOp, "Elementwise `|x|`.")
sqrt = _unary("sqrt", coco.SqrtOp, "Elementwise square root.")
rsqrt = _unary("rsqrt", coco.RsqrtOp, "Elementwise `1 / sqrt(x)`.")
exp = _unary("exp", coco.ExpOp, "Elementwise `e ** x`.")
log = _unary("log", coco.LogOp, "Elementwise natural logarithm.")
tanh = _unary("tanh", coco.TanhOp, "Elementwise hyperbolic tangent.")
relu = _unary("relu", coco.ReluOp, "Elementwise `max(x, 0)`.")
gelu = _unary("gelu", coco.GeluOp, "Elementwise GELU (tanh approximation).")


def convert(x: Value, element_type: ElementType, *, name: str | None = None) -> Value:
    """`coco.convert`: the same tensor with another element type."""
    a = _value("coco.convert", x)
    elt = _element_type(element_type)
    return _emitted("coco.convert", lambda: coco.ConvertOp(a, elt, label=name), name)


def constant(
    value: float | int | bool,
    element_type: ElementType = f32,
    *,
    shape: Sequence[int] = (),
    name: str | None = None,
) -> Value:
    """`coco.constant`: a replicated constant, every element `value` (rank 0
    unless `shape` is given)."""
    return _constant(value, _element_type(element_type), name, shape)


def dropout(x: Value, p: float, seed: int = 0, *, name: str | None = None) -> Value:
    """`coco.dropout`: `x * keep / (1 - p)` with `keep = u(seed, i) >= p` at each
    element's global linear index `i`."""
    a = _value("coco.dropout", x)
    return _emitted(
        "coco.dropout",
        lambda: coco.DropoutOp(a, float(p), int(seed), label=name),
        name,
    )


def reduce(
    x: Value,
    kind: str = "sum",
    dims: int | Sequence[int] | None = None,
    *,
    keep_dims: bool = False,
    name: str | None = None,
) -> Value:
    """`coco.reduce`: reduce over `dims` (`sum max min`); all dims when None;
    `keep_dims` keeps them with size 1 (the result broadcasts against `x`)."""
    a = _value("coco.reduce", x)
    if dims is None:
        dims = list(range(x.rank))
    elif isinstance(dims, int):
        dims = [dims]
    dims = list(dims)
    return _emitted(
        "coco.reduce",
        lambda: coco.ReduceOp(a, kind, dims, keep_dims=keep_dims, label=name),
        name,
    )


def transpose(
    x: Value, perm: Sequence[int] | None = None, *, name: str | None = None
) -> Value:
    """`coco.transpose`: result dim `j` is `x`'s dim `perm[j]` (all dims
    reversed when None, as numpy's `transpose`)."""
    a = _value("coco.transpose", x)
    order = list(reversed(range(x.rank))) if perm is None else list(perm)
    return _emitted(
        "coco.transpose", lambda: coco.TransposeOp(a, order, label=name), name
    )


def reshape(x: Value, shape: Sequence[int], *, name: str | None = None) -> Value:
    """`coco.reshape`: `x`'s elements, row-major, in `shape` (a sliced `x`
    where the dims before its cut keep their product; docs/dialect.md)."""
    a = _value("coco.reshape", x)
    dims = list(shape)
    return _emitted("coco.reshape", lambda: coco.ReshapeOp(a, dims, label=name), name)


def norm(x: Value, *, name: str | None = None) -> Value:
    """`coco.norm`: the L2 norm over all elements, rank 0; `x` must be
    replicated or local."""
    return _result(_apply(coco.NormOp, [(x, "operand")], name))


def matmul(lhs: Value, rhs: Value, *, name: str | None = None) -> Value:
    """`coco.matmul`: `[..., K] x [K, M] -> [..., M]`; also `lhs @ rhs`."""
    return _result(_apply(coco.MatmulOp, [(lhs, "lhs"), (rhs, "rhs")], name))


def batch_matmul(lhs: Value, rhs: Value, *, name: str | None = None) -> Value:
    """`coco.batch_matmul`: `[G, ..., K] x [G, K, M] -> [G, ..., M]`, group
    by group (a mixture of experts' GEMMs)."""
    return _result(_apply(coco.BatchMatmulOp, [(lhs, "lhs"), (rhs, "rhs")], name))


def embedding(
    tables: Value, indices: Value, pooling: str = "sum", *, name: str | None = None
) -> Value:
    """`coco.embedding`: pooled lookup (DLRM's EmbeddingBag), tables `[T, R,
    D]` and i32 indices `[T, B, L]` give `[T, B, D]`; `pooling` is `sum`,
    `mean` or `max`."""
    operands = [(tables, "tables"), (indices, "indices")]
    return _result(_apply(coco.EmbeddingOp, operands, name, pooling))


def all_slice(x: Value, dim: int, *, name: str | None = None) -> Value:
    """`coco.all_slice`: replicated → sliced<dim>, no communication."""
    return _result(_apply(coco.AllSliceOp, [(x, "operand")], name, dim))


def update(param: Value, value: Value, *, name: str | None = None) -> None:
    """`coco.update`: at function exit the parameter `param` holds `value`."""
    _apply(coco.UpdateOp, [(param, "parameter"), (value, "value")], name)


# ============================================================================
# Communication ops
# ============================================================================


def all_reduce(x: Value, reduction: str = "sum", *, name: str | None = None) -> Value:
    """`coco.all_reduce`: local or replicated → replicated, reduced over ranks
    (`sum prod max min`)."""
    return _result(_apply(coco.AllReduceOp, [(x, "operand")], name, reduction))


def reduce_scatter(
    x: Value, reduction: str = "sum", dim: int = 0, *, name: str | None = None
) -> Value:
    """`coco.reduce_scatter`: local → sliced<dim>, rank r gets block r of the
    reduction over ranks."""
    operands = [(x, "operand")]
    return _result(_apply(coco.ReduceScatterOp, operands, name, reduction, dim))


def all_gather(x: Value, *, name: str | None = None) -> Value:
    """`coco.all_gather`: sliced → replicated, the blocks concatenated."""
    return _result(_apply(coco.AllGatherOp, [(x, "operand")], name))


def broadcast(x: Value, root: int = 0, *, name: str | None = None) -> Value:
    """`coco.broadcast`: local → replicated, rank `root`'s value."""
    return _result(_apply(coco.BroadcastOp, [(x, "operand")], name, root))


def all_to_all(x: Value, dim: int, *, name: str | None = None) -> Value:
    """`coco.all_to_all`: sliced<D> → sliced<dim>, the same global value."""
    return _result(_apply(coco.AllToAllOp, [(x, "operand")], name, dim))


def shift(x: Value, by: int, *, name: str | None = None) -> Value:
    """`coco.shift`: rank r receives what rank (r + by) mod N holds (a
    sliced value's blocks rotate; the type is kept)."""
    return _result(_apply(coco.ShiftOp, [(x, "operand")], name, by))


def _stage_name(op_name: str, stage: object) -> str:
    """A stage given as a function name (`"stage2"`, `"@stage2"`) or a Function."""
    if isinstance(stage, Function):
        return stage.name
    if not isinstance(stage, str) or not stage.removeprefix("@"):
        raise CocoError(
            f"the stage must be a function name or a cc.Function, got {stage!r}",
            _user_location(),
            op_name=op_name,
        )
    return stage.removeprefix("@")


def send(
    x: Value, to: str | Function, channel: int = 0, *, name: str | None = None
) -> None:
    """`coco.send`: rank r of this stage sends `x` to rank r of stage `to`
    (checked against the matching `recv` by `cc.module`)."""
    a = _value("coco.send", x)
    stage = _stage_name("coco.send", to)
    _emit("coco.send", lambda: coco.SendOp(a, stage, channel, label=name), name)


def recv(
    type: coco.TensorType,
    from_: str | Function,
    channel: int = 0,
    *,
    name: str | None = None,
) -> Value:
    """`coco.recv`: what rank r of stage `from_` sent on `channel`, of `type`."""
    if not isinstance(type, coco.TensorType):
        raise CocoError(
            f"type must be a cc.tensor(...), got {type!r}",
            _user_location(),
            op_name="coco.recv",
        )
    stage = _stage_name("coco.recv", from_)
    return _emitted(
        "coco.recv", lambda: coco.RecvOp(type, stage, channel, label=name), name
    )


# ============================================================================
# Norm layers, built of ops
# ============================================================================


def layer_norm(
    x: Value,
    weight: Value | None = None,
    bias: Value | None = None,
    *,
    dim: int = -1,
    eps: float = 1e-5,
    name: str | None = None,
) -> Value:
    """LayerNorm over `dim`, as `torch.nn.functional.layer_norm` over the
    last dim: `(x - mean) / sqrt(var + eps) * weight + bias`, the mean and
    the (biased) variance over `dim`, in two passes. Halves are normalized in
    f32 and converted back at the end; a `x` sliced along `dim` sums across
    ranks (`coco.all_reduce`). Written as `coco.reduce ... keep_dims` and
    elementwise ops (docs/python-api.md, "Norm layers"); `name` labels the
    result."""
    axis = _norm_axis("layer_norm", x, dim)
    wide = _in_f32(x)
    mean = _mean_over(wide, axis)
    centred = wide - mean
    variance = _mean_over(centred * centred, axis)
    return _affine(centred * rsqrt(variance + eps), x, weight, bias, name)


def rms_norm(
    x: Value,
    weight: Value | None = None,
    *,
    dim: int = -1,
    eps: float = 1e-6,
    name: str | None = None,
) -> Value:
    """RMSNorm over `dim` (Zhang and Sennrich, 2019; LLaMA's norm):
    `x / sqrt(mean(x * x) + eps) * weight`, built as `layer_norm` is."""
    axis = _norm_axis("rms_norm", x, dim)
    wide = _in_f32(x)
    normed = wide * rsqrt(_mean_over(wide * wide, axis) + eps)
    return _affine(normed, x, weight, None, name)


def _norm_axis(function_name: str, x: object, dim: int) -> int:
    """`dim` of the value `x` (negative from the end), checked."""
    if not isinstance(x, Value):
        _value(f"cc.{function_name}", x)
    assert isinstance(x, Value)
    if not -x.rank <= dim < x.rank:
        raise CocoError(
            f"dim {dim} is out of range for a value of rank {x.rank}",
            _user_location(),
            op_name=f"cc.{function_name}",
        )
    return dim % x.rank


def _in_f32(x: Value) -> Value:
    """`x` in the type a norm computes in: f32 for halves."""
    if x.element_type in (f16, bf16):
        return convert(x, f32)
    return x


def _mean_over(x: Value, axis: int) -> Value:
    """The mean of `x` over `axis`, kept as a dim of size 1; the partial
    sums of a value sliced along `axis` are summed across ranks."""
    total = reduce(x, "sum", axis, keep_dims=True)
    if x.layout.is_sliced and x.layout.sliced_dim == axis:
        total = all_reduce(total, "sum")
    return total * (1.0 / x.shape[axis])


def _affine(
    normed: Value,
    x: Value,
    weight: Value | None,
    bias: Value | None,
    name: str | None,
) -> Value:
    """`normed * weight + bias` (each where given) in `x`'s element type,
    its last op labelled `name`."""
    y = normed
    if weight is not None:
        y = y * _in_f32(weight)
    if bias is not None:
        y = y + _in_f32(bias)
    if y.element_type != x.element_type:
        y = convert(y, x.element_type)
    return _labelled(y, name)


def _labelled(y: Value, name: str | None) -> Value:
    """`y` with its op labelled `name` (and its SSA name), as `name=` on the
    op's own builder would."""
    op = y.ssa.owner
    assert isinstance(op, Operation)  # a norm's result is an op's
    _check_name(op.name, name)
    if name is not None:
        op.attributes["name"] = StringAttr(name)
        _name_results(op, name)
    return y


# ============================================================================
# Functions and modules
# ============================================================================


def _parameter_types(fn: Callable[..., Any]) -> list[tuple[str, coco.TensorType]]:
    """The (name, type) of each parameter, from the annotations.

    String annotations (`from __future__ import annotations`) are evaluated in
    the function's globals and the locals of the frame that defines it."""
    where = f"{fn.__code__.co_filename}:{fn.__code__.co_firstlineno}"
    frame = _user_frame()
    scope = dict(frame.f_locals) if frame is not None else None
    try:
        signature = inspect.signature(fn, eval_str=True, locals=scope)
    except (NameError, AttributeError, SyntaxError, TypeError) as err:
        raise CocoError(
            f"cannot evaluate the annotations of {fn.__name__}: {err}", where
        ) from None
    params: list[tuple[str, coco.TensorType]] = []
    for param in signature.parameters.values():
        if not isinstance(param.annotation, coco.TensorType):
            got = (
                "it has none"
                if param.annotation is inspect.Parameter.empty
                else f"got {param.annotation!r}"
            )
            raise CocoError(
                f"parameter '{param.name}' of {fn.__name__} must be annotated "
                "with its type, e.g. `x: cc.tensor([8], cc.f32, cc.replicated)`; "
                f"{got}",
                where,
            )
        params.append((param.name, param.annotation))
    return params


def _returned_values(returned: object) -> list[SSAValue]:
    if returned is None:
        return []
    items = returned if isinstance(returned, tuple | list) else (returned,)
    return [_value("func.return", item, "returned value") for item in items]


def _build_function(fn: Callable[..., Any], name: str) -> FuncOp:
    """Run `fn` on block arguments and record the ops it builds.

    The `func.return` is there from the start (ops verify inside a well-formed
    block) and gets the returned values at the end."""
    params = _parameter_types(fn)
    types = [t for _, t in params]
    block = Block(arg_types=types)
    for arg, (param_name, _) in zip(block.args, params):
        arg.name_hint = SSAValue.extract_valid_name(param_name)
    func = FuncOp(name, (types, []), Region(block))
    func.location = FileLineColLoc(
        StringAttr(fn.__code__.co_filename),
        IntAttr(fn.__code__.co_firstlineno),
        IntAttr(1),
    )
    terminator = ReturnOp()
    block.add_op(terminator)
    scope = _Scope(func, Builder(InsertPoint.before(terminator)))
    with _building(scope):
        returned = fn(*(Value(arg, scope) for arg in block.args))
        results = _returned_values(returned)
    terminator.operands = results
    func.function_type = FunctionType.from_lists(types, [r.type for r in results])
    return func


class Function:
    """A coco function built from a Python function by `@cc.function`.

    `func_op` is the built `func.func`; `module` a fresh module holding it.
    """

    def __init__(self, fn: Callable[..., Any], name: str | None = None):
        self.python_function = fn
        self.name = name or fn.__name__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        self.func_op = _build_function(fn, self.name)

    @property
    def module(self) -> ModuleOp:
        """A new `builtin.module` holding this function alone."""
        return module(self)

    def arg(self, name: str) -> BlockArgument:
        """The parameter called `name` (e.g. to give it to a `cc.Schedule`)."""
        for argument in self.func_op.body.block.args:
            if argument.name_hint == name:
                return argument
        raise CocoError(f"@{self.name} has no parameter '{name}'")

    def __repr__(self) -> str:
        return f"<cc.Function @{self.name} : {self.func_op.function_type}>"


@overload
def function(fn: Callable[..., Any], /) -> Function: ...


@overload
def function(
    *, name: str | None = None
) -> Callable[[Callable[..., Any]], Function]: ...


def function(
    fn: Callable[..., Any] | None = None, /, *, name: str | None = None
) -> Function | Callable[[Callable[..., Any]], Function]:
    """Decorator: build a `func.func` from a Python function whose parameters are
    annotated with `cc.tensor(...)` types. `@cc.function(name="f")` renames it."""
    if fn is None:
        return lambda f: Function(f, name)
    return Function(fn, name)


def module(*functions: Function, world_size: int | None = None) -> ModuleOp:
    """A verified `builtin.module` holding (copies of) the given functions; a
    pipeline when they send to each other. `world_size` sets the module's
    `coco.world_size` so that sliced dims are checked against it."""
    seen: set[str] = set()
    for f in functions:
        if not isinstance(f, Function):
            raise CocoError(f"cc.module takes @cc.function functions, got {f!r}")
        if f.name in seen:
            raise CocoError(f"cc.module got two functions named @{f.name}")
        seen.add(f.name)
    result = ModuleOp([f.func_op.clone() for f in functions])
    if world_size is not None:
        if (
            isinstance(world_size, bool)
            or not isinstance(world_size, int)
            or world_size < 1
        ):
            raise CocoError(
                f"world_size must be a positive integer, got {world_size!r}"
            )
        result.attributes[coco.WORLD_SIZE_ATTR] = IntegerAttr(world_size, i64)
    verify_module(result)
    return result
