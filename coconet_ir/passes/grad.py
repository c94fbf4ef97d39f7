"""coco-grad: the backward of a coco function, collectives transposed
(docs/passes/coco-grad.md).

For `@f(args) -> results` the pass adds `@f_grad(args, d_results) -> d_args`:
reverse-mode differentiation of the SPMD program, where `d_results` are the
cotangents of `f`'s floating-point results (each of its result's type) and
`d_args` the gradients of its floating-point arguments (each of its
argument's type): the gradient of the argument's global value for a
replicated or sliced argument, each rank's own for a local one. The forward
values the backward reads are recomputed from `args` at its start (what it
does not read is removed), so the backward needs nothing saved.

The layouts make the transposition. A replicated value `v` is a copy on every
rank; its gradient is the sum over ranks of each copy's. A cotangent of `v`
is therefore either *full* (every rank holds that sum: replicated) or
*partial* (each rank holds its own share: local, the shares add up to it).
Everything else follows from the layout rules of the ops the backward uses:

| forward | backward (of the result's cotangent `g`) |
| --- | --- |
| `all_reduce sum` | the full `g` (a partial one all-reduced) |
| `reduce_scatter sum dim = D` | `all_gather g` |
| `all_gather` (of sliced<D>) | `all_slice g dim = D`, or if partial `reduce_scatter` |
| `all_to_all dim = E` (of sliced<D>) | `all_to_all g dim = D` |
| `all_slice dim = D` | `all_gather g` |
| `shift by = K` | `shift g by = -K` |
| `matmul` | `g @ b^T`, `a^T @ g` (partial where the table says local) |

so Megatron's f and g appear by themselves: the gradient of a replicated
input of a column-parallel matmul is partial and is all-reduced once, where
it is finally needed. Refused, with the op and the rule: `coco.update`
(an optimizer step has no gradient), pipelines (`send`/`recv`), `broadcast`,
`all_reduce prod`, `reduce_scatter` other than sum, `embedding`,
`batch_matmul`, the regions passes create (differentiate before
`coco-optimize`), and the few layout combinations whose transposed op
the matmul and elementwise tables lack (e.g. a rank-dependent cotangent of
a local matmul result).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import FunctionType, ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.transforms.common_subexpression_elimination import cse
from xdsl.transforms.dead_code_elimination import region_dce

from coconet_ir.diagnostics import CocoError
from coconet_ir.dialects import coco
from coconet_ir.dialects.coco import TensorType, tensor_type
from coconet_ir.dialects.coco.element_types import is_float
from coconet_ir.passes.base import PassRefused

GELU_C = 0.7978845608
"""coco.gelu's tanh approximation, `0.5x(1 + tanh(C (x + K x^3)))`
(docs/dialect.md)."""
GELU_K = 0.044715


class NotDifferentiable(CocoError):
    """The function has an op coco-grad cannot transpose (named, located)."""


def differentiable(t: Attribute) -> bool:
    """Whether values of type `t` have a gradient (floating-point tensors)."""
    return isinstance(t, TensorType) and is_float(t.element_type)


@dataclass
class Cotangent:
    """A cotangent in the backward: `value`, and for a replicated primal
    whether it is `partial` (each rank's share; the shares sum to the
    gradient) rather than full (every rank holds the gradient)."""

    value: SSAValue
    partial: bool = False


class Backward:
    """Builds the backward of one function into a new `func.func`."""

    def __init__(self, forward: FuncOp, name: str):
        self.forward = forward
        body = forward.body.block
        results = list(body.last_op.operands) if body.last_op else []
        self.seeded = [(i, r) for i, r in enumerate(results) if differentiable(r.type)]
        """The results with a cotangent, and their positions."""
        self.block = Block(
            arg_types=[
                *(a.type for a in body.args),
                *(r.type for _, r in self.seeded),
            ]
        )
        self.name = name
        self.primal: dict[SSAValue, SSAValue] = dict(
            zip(body.args, self.block.args[: len(body.args)])
        )
        self.parts: dict[SSAValue, list[Cotangent]] = {}
        self.at: Operation = forward

    # -- building ------------------------------------------------------------

    def emit(self, op: Operation) -> SSAValue:
        """Append `op` (located at the forward op being transposed)."""
        op.location = self.at.location
        self.block.add_op(op)
        return op.results[0]

    def refuse(self, op: Operation, reason: str) -> NotDifferentiable:
        return NotDifferentiable(f"coco-grad cannot differentiate it: {reason}", op)

    def constant(
        self, value: float, like: SSAValue, shape: Sequence[int] = ()
    ) -> SSAValue:
        return self.emit(
            coco.ConstantOp(value, tensor_type(like).element_type, shape=shape)
        )

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(coco.AddOp(a, b))

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(coco.MulOp(a, b))

    def scale(self, a: SSAValue, factor: float) -> SSAValue:
        return self.mul(a, self.constant(factor, a))

    def transpose2(self, a: SSAValue) -> SSAValue:
        return self.emit(coco.TransposeOp(a, [1, 0]))

    def keep(self, condition: SSAValue, value: SSAValue) -> SSAValue:
        """`select(condition, value, 0)`."""
        zero = self.constant(0.0, value)
        return self.emit(coco.SelectOp(condition, value, zero))

    def drop(self, condition: SSAValue, value: SSAValue) -> SSAValue:
        """`select(condition, 0, value)`."""
        zero = self.constant(0.0, value)
        return self.emit(coco.SelectOp(condition, zero, value))

    def compare(self, a: SSAValue, b: SSAValue, predicate: str) -> SSAValue:
        return self.emit(coco.CmpOp(a, b, predicate))

    def full(self, g: Cotangent) -> SSAValue:
        """The cotangent as a full value: a partial one all-reduced."""
        if g.partial:
            return self.emit(coco.AllReduceOp(g.value, "sum"))
        return g.value

    # -- cotangents ------------------------------------------------------------

    def contribute(self, v: SSAValue, value: SSAValue, partial: bool = False) -> None:
        """Add `value` to the cotangent of the forward value `v`, brought to
        a form `v`'s layout allows (docs above)."""
        if not differentiable(v.type):
            return
        want, got = tensor_type(v).layout, tensor_type(value).layout
        partial = partial or got.is_local
        if want.is_replicated and got.is_sliced:
            value, partial = self.emit(coco.AllGatherOp(value)), False
        elif want.is_local:
            if got.is_sliced:
                raise self.refuse(self.at, f"a gradient of {got} for a local value")
            partial = False
        elif want.is_sliced:
            dim = want.sliced_dim
            if got.is_sliced and got.sliced_dim != dim:
                value = self.emit(coco.AllToAllOp(value, dim))
            elif got.is_local:
                value = self.emit(coco.ReduceScatterOp(value, "sum", dim))
            elif got.is_replicated:
                value = self.full(Cotangent(value, partial))
                value = self.emit(coco.AllSliceOp(value, dim))
            partial = False
        self.parts.setdefault(v, []).append(Cotangent(value, partial))

    def cotangent(self, v: SSAValue) -> Cotangent | None:
        """The sum of the contributions to `v`'s cotangent; None without any.
        Full and partial contributions to a replicated value are made full
        (the partial ones all-reduced together once)."""
        parts = self.parts.pop(v, [])
        if not parts:
            return None
        found = self.summed(parts)
        if v.name_hint and not found.value.name_hint:
            suffix = "_partial" if found.partial else ""
            found.value.name_hint = f"d_{v.name_hint}{suffix}"
        return found

    def summed(self, parts: list[Cotangent]) -> Cotangent:
        full = [p.value for p in parts if not p.partial]
        shares = [p.value for p in parts if p.partial]
        total = self.total(full)
        share = self.total(shares)
        if share is None:
            assert total is not None
            return Cotangent(total)
        if total is None:
            return Cotangent(share, partial=True)
        return Cotangent(self.add(self.full(Cotangent(share, True)), total))

    def total(self, values: list[SSAValue]) -> SSAValue | None:
        if not values:
            return None
        result = values[0]
        for value in values[1:]:
            result = self.add(result, value)
        return result

    # -- the function ------------------------------------------------------------

    def build(self) -> FuncOp:
        body = self.forward.body.block
        for op in body.ops:
            if isinstance(op, ReturnOp):
                continue
            problem = self.problem(op)
            if problem is not None:
                raise self.refuse(op, problem)
            clone = op.clone(value_mapper=self.primal)
            self.block.add_op(clone)
            self.primal.update(zip(op.results, clone.results))
        for (position, result), seed in zip(
            self.seeded, self.block.args[len(body.args) :]
        ):
            seed.name_hint = f"d_{result.name_hint or f'result{position}'}"
            self.contribute(result, seed)
        for op in reversed(list(body.ops)):
            if isinstance(op, ReturnOp):
                continue
            self.at = op
            cotangents = [self.cotangent(r) for r in op.results]
            if any(c is not None for c in cotangents):
                self.transpose(op, cotangents)
        self.at = self.forward
        gradients = []
        for arg in body.args:
            if not differentiable(arg.type):
                continue
            g = self.cotangent(arg)
            gradient = self.zeros(arg) if g is None else self.as_type_of(arg, g)
            if arg.name_hint and not gradient.name_hint:
                gradient.name_hint = f"d_{arg.name_hint}"
            gradients.append(gradient)
        self.block.add_op(ReturnOp(*gradients))
        func = FuncOp(
            self.name,
            FunctionType.from_lists(
                [a.type for a in self.block.args], [g.type for g in gradients]
            ),
            Region(self.block),
        )
        func.location = self.forward.location
        for arg, original in zip(self.block.args, body.args):
            arg.name_hint = original.name_hint
        region_dce(func.body)
        cse(func.body)
        return func

    def as_type_of(self, arg: SSAValue, g: Cotangent) -> SSAValue:
        """The gradient of the forward value `arg` in `arg`'s type: full, and
        for a local value whose gradient is the same on every rank (a
        replicated value) made local by `select(arg == arg, g, g)`, the one
        op that gives a local value from a replicated one without changing
        it (NaN or not)."""
        value = self.full(g)
        if tensor_type(arg).layout.is_local and tensor_type(value).layout.is_replicated:
            same = self.compare(self.primal[arg], self.primal[arg], "eq")
            value = self.emit(coco.SelectOp(same, value, value))
        return value

    def zeros(self, v: SSAValue) -> SSAValue:
        """A zero gradient of the forward value `v`, in its type (nothing `v`
        feeds reaches a result)."""
        t = tensor_type(v)
        zero = self.constant(0.0, v, t.dims)
        if t.layout.is_sliced:
            return self.emit(coco.AllSliceOp(zero, t.layout.sliced_dim))
        if t.layout.is_local:  # select(v == v, 0, 0): zeros of v's layout, NaN or not
            same = self.compare(self.primal[v], self.primal[v], "eq")
            return self.emit(coco.SelectOp(same, zero, zero))
        return zero

    @staticmethod
    def problem(op: Operation) -> str | None:
        """Why coco-grad cannot transpose `op`, or None."""
        if isinstance(op, coco.UpdateOp):
            return "it updates a parameter (an optimizer step has no gradient)"
        if isinstance(op, coco.SendOp | coco.RecvOp):
            return "pipelines are not differentiated (send/recv have no gradient rule)"
        if isinstance(op, coco.RegionOp):
            return "it is a region a pass made: differentiate before coco-optimize"
        if isinstance(op, coco.BroadcastOp):
            return (
                "its gradient is rank K's alone, and coco has no rank-dependent value"
            )
        if isinstance(op, coco.ReduceScatterOp) and (
            op.reduction.data != coco.ReductionKind.SUM
        ):
            return f"reduction = {op.reduction.data} has no gradient here (only sum)"
        if (
            isinstance(op, coco.AllReduceOp)
            and op.reduction.data == coco.ReductionKind.PROD
        ):
            return "reduction = prod has no gradient here (sum, max, min have)"
        if isinstance(op, coco.EmbeddingOp | coco.BatchMatmulOp):
            return "its gradient is not built yet (docs/passes/coco-grad.md)"
        if op.regions:
            return "it has a region"
        return None

    # -- the ops' transposes -------------------------------------------------------

    def transpose(self, op: Operation, cotangents: list[Cotangent | None]) -> None:
        g = cotangents[0]
        if isinstance(op, coco.SplitOp):
            self.transpose_split(op, cotangents)
            return
        assert g is not None and len(op.results) == 1
        rule = TRANSPOSES.get(type(op))
        if rule is None:
            if any(differentiable(o.type) for o in op.operands):
                raise self.refuse(op, "it has no gradient rule")
            return
        rule(self, op, g)

    def primal_of(self, v: SSAValue) -> SSAValue:
        return self.primal[v]

    def unbroadcast(self, value: SSAValue, operand: SSAValue) -> SSAValue:
        """`value` (of an elementwise result's shape) summed over the dims
        `operand` was broadcast along, to `operand`'s shape."""
        shape = tensor_type(operand).dims
        dims = tensor_type(value).dims
        leading = len(dims) - len(shape)
        if leading:
            value = self.emit(coco.ReduceOp(value, "sum", list(range(leading))))
        ones = [
            d for d, size in enumerate(shape) if size == 1 and dims[d + leading] != 1
        ]
        if ones:
            value = self.emit(coco.ReduceOp(value, "sum", ones, keep_dims=True))
        return value

    def elementwise(
        self,
        op: Operation,
        g: Cotangent,
        *partials: SSAValue | Callable[[SSAValue], SSAValue] | None,
    ) -> None:
        """Contribute `g * partial_i` (a partial given as a function of `g`,
        or None for no gradient) to operand `i`, unbroadcast."""
        for operand, partial in zip(op.operands, partials):
            if partial is None or not differentiable(operand.type):
                continue
            if callable(partial):
                value = partial(g.value)
            else:
                value = self.mul(g.value, partial)
            self.contribute(operand, self.unbroadcast(value, operand), g.partial)

    def expand(self, g: SSAValue, op: coco.ReduceOp) -> SSAValue:
        """A reduce's cotangent broadcast back to its operand's shape."""
        operand = tensor_type(op.operand)
        if not op.keeps_dims:
            kept = [
                1 if d in op.reduced_dims else s for d, s in enumerate(operand.dims)
            ]
            g = self.emit(coco.ReshapeOp(g, kept))
        return self.add(g, self.constant(0.0, g, operand.dims))

    def product(self, a: SSAValue, b: SSAValue) -> SSAValue:
        """`a @ b` by the matmul table, or `(b^T @ a^T)^T` where only that
        has a row; refused when neither has."""
        tried = []
        for make in (
            lambda: coco.MatmulOp(a, b),
            lambda: coco.TransposeOp(
                self.emit(coco.MatmulOp(self.transpose2(b), self.transpose2(a))), [1, 0]
            ),
        ):
            try:
                return self.emit(make())
            except coco.LayoutError as err:
                tried.append(err.rule)
        raise self.refuse(
            self.at,
            f"its gradient needs a product of {tensor_type(a).layout} and "
            f"{tensor_type(b).layout} values, which the matmul table lacks "
            f"({tried[0]})",
        )

    def transpose_split(
        self, op: coco.SplitOp, cotangents: list[Cotangent | None]
    ) -> None:
        """The concat of the pieces' cotangents, each in its piece's type
        (the bucket's layout), zeros for a piece without one."""
        pieces = [
            self.zeros(result) if g is None else self.as_type_of(result, g)
            for result, g in zip(op.results, cotangents)
        ]
        self.contribute(op.operands[0], self.emit(coco.ConcatOp(pieces)))


# -- one rule per op: contribute the operands' cotangents ------------------------


def _add(b: Backward, op: Operation, g: Cotangent) -> None:
    b.elementwise(op, g, lambda x: x, lambda x: x)


def _sub(b: Backward, op: Operation, g: Cotangent) -> None:
    b.elementwise(op, g, lambda x: x, lambda x: b.emit(coco.NegOp(x)))


def _mul(b: Backward, op: Operation, g: Cotangent) -> None:
    lhs, rhs = (b.primal_of(o) for o in op.operands)
    b.elementwise(op, g, rhs, lhs)


def _div(b: Backward, op: Operation, g: Cotangent) -> None:
    rhs, result = b.primal_of(op.operands[1]), b.primal_of(op.results[0])
    b.elementwise(
        op,
        g,
        lambda x: b.emit(coco.DivOp(x, rhs)),
        lambda x: b.emit(coco.NegOp(b.emit(coco.DivOp(b.mul(x, result), rhs)))),
    )


def _choose(predicate: str) -> Callable[[Backward, Operation, Cotangent], None]:
    """max (`ge`) and min (`le`): the gradient goes to the chosen operand
    (the left one on a tie)."""

    def rule(b: Backward, op: Operation, g: Cotangent) -> None:
        lhs, rhs = (b.primal_of(o) for o in op.operands)
        chosen = b.compare(lhs, rhs, predicate)
        b.elementwise(
            op,
            g,
            lambda x: b.keep(chosen, x),
            lambda x: b.drop(chosen, x),
        )

    return rule


def _pow(b: Backward, op: Operation, g: Cotangent) -> None:
    lhs, rhs = (b.primal_of(o) for o in op.operands)
    result = b.primal_of(op.results[0])
    less = b.emit(coco.SubOp(rhs, b.constant(1.0, rhs)))
    b.elementwise(
        op,
        g,
        b.mul(rhs, b.emit(coco.PowOp(lhs, less))),
        b.mul(result, b.emit(coco.LogOp(lhs))),
    )


def _select(b: Backward, op: Operation, g: Cotangent) -> None:
    condition = b.primal_of(op.operands[0])
    b.elementwise(
        op,
        g,
        None,
        lambda x: b.keep(condition, x),
        lambda x: b.drop(condition, x),
    )


def _unary(
    derivative: Callable[
        [Backward, SSAValue, SSAValue], SSAValue | Callable[[SSAValue], SSAValue]
    ],
) -> Callable[[Backward, Operation, Cotangent], None]:
    """An elementwise unary op whose derivative is `derivative(b, x, y)` (a
    value to multiply by, or a function of the cotangent)."""

    def rule(b: Backward, op: Operation, g: Cotangent) -> None:
        x, y = b.primal_of(op.operands[0]), b.primal_of(op.results[0])
        b.elementwise(op, g, derivative(b, x, y))

    return rule


def _gelu_derivative(b: Backward, x: SSAValue, _: SSAValue) -> SSAValue:
    """d/dx of `0.5 x (1 + t)`, `t = tanh(C (x + K x^3))`:
    `0.5 (1 + t) + 0.5 x (1 - t^2) C (1 + 3 K x^2)`."""
    square = b.mul(x, x)
    inner = b.scale(b.add(x, b.scale(b.mul(square, x), GELU_K)), GELU_C)
    t = b.emit(coco.TanhOp(inner))
    one = b.constant(1.0, x)
    half_one_plus_t = b.scale(b.add(one, t), 0.5)
    slope = b.mul(
        b.emit(coco.SubOp(one, b.mul(t, t))),
        b.scale(b.add(one, b.scale(square, 3 * GELU_K)), GELU_C),
    )
    return b.add(half_one_plus_t, b.mul(b.scale(x, 0.5), slope))


def _convert(b: Backward, op: Operation, g: Cotangent) -> None:
    operand = op.operands[0]
    if differentiable(operand.type):
        element = tensor_type(operand).element_type
        b.contribute(operand, b.emit(coco.ConvertOp(g.value, element)), g.partial)


def _dropout(b: Backward, op: Operation, g: Cotangent) -> None:
    assert isinstance(op, coco.DropoutOp)
    masked = b.emit(coco.DropoutOp(g.value, op.probability, op.seed.value.data))
    b.contribute(op.operand, masked, g.partial)


def _reduce(b: Backward, op: Operation, g: Cotangent) -> None:
    assert isinstance(op, coco.ReduceOp)
    operand = tensor_type(op.operand)
    across = operand.layout.is_sliced and operand.layout.sliced_dim in op.reduced_dims
    if across and not tensor_type(g.value).layout.is_replicated:
        raise b.refuse(
            op,
            "the cotangent of its partial (local) result differs between ranks, and "
            "no op turns a rank's own value into its block of a sliced one",
        )
    spread = b.expand(g.value, op)
    if op.kind.data != coco.ReduceKind.SUM:
        if across:
            raise b.refuse(
                op, f"kind = {op.kind.data} over the sliced dim has no gradient here"
            )
        result = b.expand(b.primal_of(op.results[0]), op)
        chosen = b.compare(b.primal_of(op.operand), result, "eq")
        ones = b.keep(chosen, b.constant(1.0, spread))
        ties = b.expand(
            b.emit(
                coco.ReduceOp(ones, "sum", op.reduced_dims, keep_dims=op.keeps_dims)
            ),
            op,
        )
        spread = b.keep(chosen, b.emit(coco.DivOp(spread, ties)))
    b.contribute(op.operand, spread, g.partial)


def _norm(b: Backward, op: Operation, g: Cotangent) -> None:
    x, y = b.primal_of(op.operands[0]), b.primal_of(op.results[0])
    b.contribute(op.operands[0], b.mul(g.value, b.emit(coco.DivOp(x, y))), g.partial)


def _transpose(b: Backward, op: Operation, g: Cotangent) -> None:
    assert isinstance(op, coco.TransposeOp)
    inverse = [op.permutation.index(d) for d in range(len(op.permutation))]
    b.contribute(op.operand, b.emit(coco.TransposeOp(g.value, inverse)), g.partial)


def _reshape(b: Backward, op: Operation, g: Cotangent) -> None:
    operand = op.operands[0]
    shape = tensor_type(operand).dims
    b.contribute(operand, b.emit(coco.ReshapeOp(g.value, shape)), g.partial)


def _matmul(b: Backward, op: Operation, g: Cotangent) -> None:
    lhs, rhs = op.operands
    a, w = b.primal_of(lhs), b.primal_of(rhs)
    if differentiable(lhs.type):
        b.contribute(lhs, b.product(g.value, b.transpose2(w)), g.partial)
    if differentiable(rhs.type):
        a_type, g_type = tensor_type(a), tensor_type(g.value)
        if a_type.rank > 2:  # the batch dims flattened into the rows
            rows = a_type.dims[:-1]
            count = 1
            for size in rows:
                count *= size
            a = b.emit(coco.ReshapeOp(a, [count, a_type.dims[-1]]))
            flat = b.emit(coco.ReshapeOp(g.value, [count, g_type.dims[-1]]))
        else:
            flat = g.value
        b.contribute(rhs, b.product(b.transpose2(a), flat), g.partial)


def _through(b: Backward, op: Operation, g: Cotangent) -> None:
    """all_slice, all_gather, all_to_all: the cotangent itself, which
    `contribute` brings to the operand's layout (all_gather, all_slice or
    reduce_scatter, all_to_all back)."""
    b.contribute(op.operands[0], g.value, g.partial)


def _all_reduce(b: Backward, op: Operation, g: Cotangent) -> None:
    """sum: every rank's operand gets the full cotangent (a replicated
    operand a share on each rank: its gradient is N times the cotangent).
    max, min: the ranks holding the extremum share it evenly (a replicated
    operand is the extremum itself)."""
    assert isinstance(op, coco.AllReduceOp)
    operand = op.operands[0]
    replicated = tensor_type(operand).layout.is_replicated
    full = b.full(g)
    if op.reduction.data == coco.ReductionKind.SUM or replicated:
        b.contribute(operand, full, replicated and op.reduction.data == "sum")
        return
    chosen = b.compare(b.primal_of(operand), b.primal_of(op.results[0]), "eq")
    mine = b.keep(chosen, b.constant(1.0, full))
    ties = b.emit(coco.AllReduceOp(mine, "sum"))
    b.contribute(operand, b.keep(chosen, b.emit(coco.DivOp(full, ties))))


def _reduce_scatter(b: Backward, op: Operation, g: Cotangent) -> None:
    b.contribute(op.operands[0], b.emit(coco.AllGatherOp(g.value)))


def _shift(b: Backward, op: Operation, g: Cotangent) -> None:
    assert isinstance(op, coco.ShiftOp)
    b.contribute(op.operand, b.emit(coco.ShiftOp(g.value, -op.offset)), g.partial)


def _concat(b: Backward, op: Operation, g: Cotangent) -> None:
    assert isinstance(op, coco.ConcatOp)
    value = b.full(g)
    split = coco.SplitOp(value, [tensor_type(p).dims for p in op.pieces])
    b.emit(split)
    for piece, part in zip(op.pieces, split.results):
        b.contribute(piece, part)


def _none(b: Backward, op: Operation, g: Cotangent) -> None:
    """No operand with a gradient (a constant, a comparison)."""


TRANSPOSES: dict[type[Operation], Callable[[Backward, Operation, Cotangent], None]] = {
    coco.AddOp: _add,
    coco.SubOp: _sub,
    coco.MulOp: _mul,
    coco.DivOp: _div,
    coco.MaxOp: _choose("ge"),
    coco.MinOp: _choose("le"),
    coco.PowOp: _pow,
    coco.SelectOp: _select,
    coco.CmpOp: _none,
    coco.ConstantOp: _none,
    coco.NegOp: _unary(lambda b, x, y: lambda g: b.emit(coco.NegOp(g))),
    coco.AbsOp: _unary(
        lambda b, x, y: (
            lambda g: b.emit(
                coco.SelectOp(
                    b.compare(x, b.constant(0.0, x), "ge"), g, b.emit(coco.NegOp(g))
                )
            )
        )
    ),
    coco.SqrtOp: _unary(lambda b, x, y: b.emit(coco.DivOp(b.constant(0.5, y), y))),
    coco.RsqrtOp: _unary(lambda b, x, y: b.scale(b.emit(coco.DivOp(y, x)), -0.5)),
    coco.ExpOp: _unary(lambda b, x, y: y),
    coco.LogOp: _unary(lambda b, x, y: b.emit(coco.DivOp(b.constant(1.0, x), x))),
    coco.TanhOp: _unary(
        lambda b, x, y: b.emit(coco.SubOp(b.constant(1.0, y), b.mul(y, y)))
    ),
    coco.ReluOp: _unary(
        lambda b, x, y: lambda g: b.keep(b.compare(x, b.constant(0.0, x), "gt"), g)
    ),
    coco.GeluOp: _unary(_gelu_derivative),
    coco.ConvertOp: _convert,
    coco.DropoutOp: _dropout,
    coco.ReduceOp: _reduce,
    coco.NormOp: _norm,
    coco.TransposeOp: _transpose,
    coco.ReshapeOp: _reshape,
    coco.MatmulOp: _matmul,
    coco.AllSliceOp: _through,
    coco.AllGatherOp: _through,
    coco.AllToAllOp: _through,
    coco.AllReduceOp: _all_reduce,
    coco.ReduceScatterOp: _reduce_scatter,
    coco.ShiftOp: _shift,
    coco.ConcatOp: _concat,
}
"""The transpose rule of each op coco-grad differentiates (docs/passes/coco-grad.md)."""


def backward_function(forward: FuncOp, name: str | None = None) -> FuncOp:
    """The backward of `forward` (see the module docstring), named `name`
    (default `FORWARD_grad`); raises NotDifferentiable naming the op."""
    return Backward(forward, name or f"{forward.sym_name.data}_grad").build()


def grad(program: ModuleOp | object, entry: str | None = None) -> ModuleOp:
    """`cc.grad`: a new module holding the backward of `program`'s function
    `entry` (default: its only one), `program` a module or a
    `@cc.function`; the module's `coco.world_size`, if any, is kept."""
    module = getattr(program, "module", program)
    if not isinstance(module, ModuleOp):
        raise CocoError(
            f"cc.grad takes a module or a @cc.function, got {type(program).__name__}"
        )
    functions = [f for f in module.ops if isinstance(f, FuncOp)]
    if entry is not None:
        functions = [f for f in functions if f.sym_name.data == entry]
    if len(functions) != 1:
        names = ", ".join("@" + f.sym_name.data for f in functions) or "none"
        raise CocoError(
            f"cc.grad: give entry= one function of the module (found {names})"
        )
    result = ModuleOp([backward_function(functions[0])])
    if coco.WORLD_SIZE_ATTR in module.attributes:
        result.attributes[coco.WORLD_SIZE_ATTR] = module.attributes[
            coco.WORLD_SIZE_ATTR
        ]
    return result


@dataclass(frozen=True)
class CocoGrad(ModulePass):
    """`coco-grad{func=NAME suffix=_grad}`: add the backward of `@NAME`
    (default: of every function) as `@NAME` + suffix; refuses, changing
    nothing, when one cannot be differentiated."""

    name = "coco-grad"

    func: str | None = None
    """The function to differentiate (default: every function)."""
    suffix: str = "_grad"
    """The backward of `@F` is named `@F` + suffix."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        functions = [f for f in op.ops if isinstance(f, FuncOp)]
        names = {f.sym_name.data for f in functions}
        if self.func is not None:
            functions = [f for f in functions if f.sym_name.data == self.func]
            if not functions:
                raise PassRefused(f"coco-grad: no function @{self.func}")
        built = []
        for func in functions:
            name = func.sym_name.data + self.suffix
            if name in names:
                raise PassRefused(f"coco-grad: the module already has a @{name}", func)
            try:
                built.append(backward_function(func, name))
            except NotDifferentiable as err:
                raise PassRefused(err.diagnostic) from None
        for func in built:
            op.body.block.add_op(func)
