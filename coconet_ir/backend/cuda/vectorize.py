"""Vectorized grid-stride loops (docs/gpu/cuda.md, "Vectorization").

A kernel whose body is the lowering's grid-stride elementwise loop

    for (i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
      ... loads of x[i], stores of y[i], arith and math ...

over contiguous 1-D buffers of one 16-bit or 32-bit float type (f16/bf16: 8 per
16 bytes, f32: 4; a buffer the loop only reads at another index, a broadcast
operand such as `bias[i % H]`, is read element by element in each lane) is
printed with a main loop that moves 16 bytes per buffer
and iteration (`float4`, or `uint4` holding 8 halves) and computes the W lanes
one after another, then the scalar loop for the tail. The main loop runs only
when every vector buffer is 16-byte aligned (a runtime test: views of a
buffer may start anywhere), else the scalar loop does all the work. Rank-0
buffers (scalars such as the learning rate) stay scalar loads; the induction
variable, where the body uses it (dropout's counter), is each lane's index.
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import singledispatchmethod
from typing import Protocol

from xdsl.dialects import arith, gpu, memref, scf
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    IntegerAttr,
    MemRefType,
    NoneAttr,
)
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from coconet_ir.backend.cuda.c_expr import Expr, Scope
from coconet_ir.backend.cuda.ctypes import scalar_type

VECTOR_BYTES = 16
ID_OPS = ("gpu.thread_id", "gpu.block_id", "gpu.block_dim", "gpu.grid_dim")


class KernelPrinter(Protocol):
    """What the vectorizer uses of the printer that calls it (the
    `CudaPrinter`): its value → expression table, the kernel's names, and
    its printing of lines and of the ops it does not vectorize."""

    exprs: dict[SSAValue, Expr]
    scope: Scope

    print: singledispatchmethod[None]
    """One op, by the printer's case for it."""

    def print_string(self, text: str) -> None: ...

    def line(self, text: str) -> None: ...

    def indented(self) -> AbstractContextManager[None]: ...

    def text(self, value: SSAValue) -> str: ...

    def operand(self, value: SSAValue) -> str: ...


@dataclass(frozen=True)
class VectorPlan:
    """How to vectorize one grid-stride kernel."""

    loop: scf.ForOp
    width: int
    """Elements per 16-byte vector."""
    vector_type: str
    """`float4` or `uint4`."""
    buffers: tuple[SSAValue, ...]
    """The kernel's buffers accessed at `[i]`, in first-use order."""


def is_op(value: SSAValue, kind: type[Operation]) -> Operation | None:
    owner = value.owner
    return owner if isinstance(owner, kind) else None


def is_global_thread_index(value: SSAValue) -> bool:
    """`blockIdx * blockDim + threadIdx` (either order)."""
    add = is_op(value, arith.AddiOp)
    if add is None:
        return False
    for a, b in (add.operands, reversed(add.operands)):
        if is_op(a, gpu.ThreadIdOp) is not None and is_block_offset(b):
            return True
    return False


def is_product_of(value: SSAValue, factors: set[str]) -> bool:
    """`value` is an `arith.muli` of the ids named `factors` (either order)."""
    mul = is_op(value, arith.MuliOp)
    if mul is None:
        return False
    names = {o.owner.name for o in mul.operands if isinstance(o.owner, Operation)}
    return names == factors


def is_block_offset(value: SSAValue) -> bool:
    """`blockIdx * blockDim`."""
    return is_product_of(value, {"gpu.block_id", "gpu.block_dim"})


def is_grid_stride(value: SSAValue) -> bool:
    """`gridDim * blockDim`."""
    return is_product_of(value, {"gpu.grid_dim", "gpu.block_dim"})


def vector_width(t: MemRefType) -> tuple[int, str] | None:
    element = t.element_type
    if isinstance(element, Float32Type):
        return 4, "float4"
    if isinstance(element, Float16Type | BFloat16Type):
        return 8, "uint4"
    return None


def is_contiguous_1d(t: MemRefType) -> bool:
    return (
        len(t.get_shape()) == 1
        and t.get_shape()[0] > 0
        and (isinstance(t.layout, NoneAttr) or t.get_strides() == (1,))
    )


def is_lane_load(op: Operation, induction: SSAValue, stored: set[SSAValue]) -> bool:
    """A load of a buffer the loop does not write at an index other than the
    induction variable: loaded element by element in each lane, the other
    buffers still moved 16 bytes at a time, when the buffer is a broadcast
    operand (`bias[i % H]`, fewer elements than the vector buffers; a larger
    one is a gather, whose per-lane index arithmetic costs more than the
    vectors save)."""
    return (
        isinstance(op, memref.LoadOp)
        and list(op.indices) != [induction]
        and op.memref not in stored
    )


def memref_size(buffer: SSAValue) -> int:
    t = buffer.type
    assert isinstance(t, MemRefType)
    return math.prod(t.get_shape())


def vector_plan(kernel: gpu.FuncOp) -> VectorPlan | None:
    """The plan for `kernel`, or None if it is not a vectorizable grid-stride
    elementwise kernel."""
    block = kernel.body.block
    loops = [op for op in block.ops if isinstance(op, scf.ForOp)]
    if len(loops) != 1:
        return None
    (loop,) = loops
    for op in block.ops:
        if op is loop or isinstance(op, gpu.ReturnOp):
            continue
        if op.regions or not (op.name.split(".")[0] == "arith" or op.name in ID_OPS):
            return None
    if loop.iter_args or not (
        is_global_thread_index(loop.lb) and is_grid_stride(loop.step)
    ):
        return None
    body = loop.body.block
    induction = body.args[0]
    buffers: list[SSAValue] = []
    shape: tuple[int, str] | None = None
    stored = {op.memref for op in body.ops if isinstance(op, memref.StoreOp)}
    broadcast: list[SSAValue] = []
    for op in body.ops:
        if isinstance(op, scf.YieldOp):
            continue
        if op.regions:
            return None
        if isinstance(op, memref.LoadOp | memref.StoreOp):
            t = op.memref.type
            assert isinstance(t, MemRefType)
            if not op.indices and not isinstance(op, memref.StoreOp):
                continue  # a scalar, loaded in every lane
            if is_lane_load(op, induction, stored):
                broadcast.append(op.memref)
                continue  # a broadcast operand, loaded in each lane
            if list(op.indices) != [induction] or not is_contiguous_1d(t):
                return None
            if not isinstance(op.memref, BlockArgument):
                return None
            width = vector_width(t)
            if width is None or (shape is not None and width != shape):
                return None
            if t.get_shape()[0] % width[0]:
                return None
            shape = width
            if op.memref not in buffers:
                buffers.append(op.memref)
            continue
        if op.name.split(".")[0] not in ("arith", "math"):
            return None
    if shape is None:
        return None
    domain = min(memref_size(b) for b in buffers)
    if any(memref_size(b) >= domain for b in broadcast):
        return None  # a gather (a slice's copy), not a broadcast
    return VectorPlan(loop, shape[0], shape[1], tuple(buffers))


def print_vectorized(
    printer: KernelPrinter, kernel: gpu.FuncOp, plan: VectorPlan
) -> None:
    """The kernel body: the prologue, the vector loop (when aligned), the
    scalar tail."""
    loop, width = plan.loop, plan.width
    printer.print_string("{")
    with printer.indented():
        for op in kernel.body.block.ops:
            if op is loop:
                break
            printer.print(op)
        start = printer.scope.fresh("start", "start")
        stride = printer.scope.fresh("stride", "stride")
        vectors = printer.scope.fresh("vectors", "vectors")
        tail = printer.scope.fresh("tail", "tail")
        bound = printer.text(loop.ub)
        printer.line(f"const int64_t {start} = {printer.text(loop.lb)};")
        printer.line(f"const int64_t {stride} = {printer.text(loop.step)};")
        printer.line(f"const int64_t {vectors} = {printer.operand(loop.ub)} / {width};")
        printer.line(f"int64_t {tail} = {start};")
        pointers = " | ".join(f"(uintptr_t){printer.text(b)}" for b in plan.buffers)
        printer.line(f"if ((({pointers}) % {VECTOR_BYTES}) == 0) {{")
        with printer.indented():
            v = printer.scope.fresh("v", "v")
            printer.line(
                f"for (int64_t {v} = {start}; {v} < {vectors}; {v} += {stride}) {{"
            )
            with printer.indented():
                print_vector_iteration(printer, plan, v)
            printer.line("}")
            printer.line(f"{tail} = {vectors} * {width} + {start};")
        printer.line("}")
        printer.exprs[loop.lb] = Expr(tail, True)
        printer.exprs[loop.step] = Expr(stride, True)
        printer.exprs[loop.ub] = Expr(bound, True)
        printer.print(loop)
        for op in kernel.body.block.ops:
            if op is not loop and loop.is_before_in_block(op):
                printer.print(op)
    printer.line("}")


def vector_digits(
    printer: KernelPrinter, plan: VectorPlan, v: str
) -> dict[Operation, tuple[str, bool]]:
    """`i / D` and `i % D` of the induction variable by a constant `D` that
    the width divides (a broadcast operand's index, `bias[i % H]`): the
    same quotient in every lane of a vector, and the remainder the first
    lane's plus the lane, so each is printed once per vector, from
    `v * width`. Each op → the name of its first lane's value, and whether
    it is a remainder."""
    induction = plan.loop.body.block.args[0]
    found: dict[Operation, tuple[str, bool]] = {}
    for op in plan.loop.body.block.ops:
        if not isinstance(op, arith.DivUIOp | arith.RemUIOp) or op.lhs is not induction:
            continue
        divisor = op.rhs.owner
        if not isinstance(divisor, arith.ConstantOp):
            continue
        value = divisor.value
        if not isinstance(value, IntegerAttr) or value.value.data % plan.width:
            continue
        is_rem = isinstance(op, arith.RemUIOp)
        name = printer.scope.fresh("lane0_rem" if is_rem else "lane0_div", "lane0")
        sign = "%" if is_rem else "/"
        printer.line(
            f"const int64_t {name} = (int64_t)((uint64_t)({v} * {plan.width}) "
            f"{sign} (uint64_t){value.value.data});"
        )
        found[op] = (name, is_rem)
    return found


def print_vector_iteration(printer: KernelPrinter, plan: VectorPlan, v: str) -> None:
    """One iteration of the vector loop: load every buffer's 16 bytes into a
    lane array, compute the lanes, store the arrays that were written."""
    body: Block = plan.loop.body.block
    induction = body.args[0]
    written = {
        op.memref for op in body.ops if isinstance(op, memref.StoreOp) and op.indices
    }
    vectors = {
        op
        for op in body.ops
        if isinstance(op, memref.LoadOp | memref.StoreOp)
        and list(op.indices) == [induction]
    }
    loaded = {op.memref for op in vectors if isinstance(op, memref.LoadOp)}
    per_vector = vector_digits(printer, plan, v)
    lanes: dict[SSAValue, str] = {}
    for buffer in plan.buffers:
        t = buffer.type
        assert isinstance(t, MemRefType)
        element = scalar_type(t.element_type)
        name = printer.scope.fresh(f"{printer.text(buffer)}_v", "lanes")
        lanes[buffer] = name
        printer.line(f"alignas({VECTOR_BYTES}) {element} {name}[{plan.width}];")
        if buffer in loaded:
            printer.line(
                f"*reinterpret_cast<{plan.vector_type} *>({name}) = "
                f"reinterpret_cast<const {plan.vector_type} *>"
                f"({printer.text(buffer)})[{v}];"
            )
    for lane in range(plan.width):
        printer.exprs[induction] = Expr(f"{v} * {plan.width} + {lane}")
        for op in body.ops:
            if isinstance(op, scf.YieldOp):
                continue
            if op in per_vector:
                base, is_rem = per_vector[op]
                text = f"{base} + {lane}" if is_rem and lane else base
                printer.exprs[op.results[0]] = Expr(text, text == base)
            elif isinstance(op, memref.LoadOp) and op in vectors:
                printer.exprs[op.res] = Expr(f"{lanes[op.memref]}[{lane}]", True)
            elif isinstance(op, memref.StoreOp) and op in vectors:
                printer.line(f"{lanes[op.memref]}[{lane}] = {printer.text(op.value)};")
            else:
                printer.print(op)
    for buffer in plan.buffers:
        if buffer in written:
            vector = plan.vector_type
            printer.line(
                f"reinterpret_cast<{vector} *>({printer.text(buffer)})[{v}] = "
                f"*reinterpret_cast<const {vector} *>({lanes[buffer]});"
            )
