"""Map kernels in Triton (docs/triton.md, "The triton target"): a device
kernel that is one grid-stride loop (`lowering.kernels.grid_stride_loop`:
`for i = bid*bdim+tid; i < n; i += gdim*bdim`) whose body is straight-line
scalar code (loads, arithmetic, stores) becomes a Triton kernel over blocks
of `i`: program `p` takes `i = p·BLOCK ..`, masked below `n`, and every
scalar op of the body becomes the same op on the block.

That covers the elementwise kernels of `convert-coco-to-gpu` (a fused chain
such as bias + GELU, dropout's Philox, conversions), and the index
arithmetic of the copies around the tile operators (slices, concats,
unpacks). A kernel of another shape, or with an op the table below has not,
is refused by name. The printed code computes as the CUDA C kernel does:
IEEE division and square root (`tl.div_rn`, `tl.sqrt_rn`), NaN-propagating
max/min (arith.maximumf), rounding to nearest even, C's integer division.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.dialects import arith, gpu, memref, scf
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import (
    AnyFloat,
    BFloat16Type,
    Float16Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
)
from xdsl.dialects.builtin import f32 as f32_type
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue

from coconet_ir.backend.cuda.printer import CMPI
from coconet_ir.backend.triton.names import identifier
from coconet_ir.diagnostics import CocoError

BLOCK = 1024
"""Elements per program of a map kernel."""

TYPES = {
    "f32": "tl.float32",
    "f16": "tl.float16",
    "bf16": "tl.bfloat16",
    "f64": "tl.float64",
    "i1": "tl.int1",
    "i8": "tl.int8",
    "i16": "tl.int16",
    "i32": "tl.int32",
    "i64": "tl.int64",
    "index": "tl.int64",
}
"""Triton's element type of each scalar type (indices are 64-bit: offsets
into buffers of more than 2^31 elements stay right)."""

HELPERS = '''
@triton.jit
def tanh(x):
    """tanh from tl.exp in f64 (the interpreter has no libdevice), rounded
    once: an odd polynomial near 0, where 1 - 2/(e^2x + 1) would cancel."""
    xd = x.to(tl.float64)
    x2 = xd * xd  # the series to x^9: 1e-14 relative below 1/16
    series = -17 / 315 + x2 * 62 / 2835
    small = xd * (1.0 + x2 * (-1 / 3 + x2 * (2 / 15 + x2 * series)))
    large = 1.0 - 2.0 / (tl.exp(2.0 * xd) + 1.0)
    return tl.where(tl.abs(xd) < 0.0625, small, large).to(x.dtype)


@triton.jit
def to_bf16(x):
    """f32 to bf16, to nearest even: Triton's cast on a GPU; by the bits
    under the interpreter, whose cast truncates."""
    if INTERPRETED:
        bits = x.to(tl.uint32, bitcast=True)
        bits = bits + 0x7FFF + ((bits >> 16) & 1)
        nearest = (bits >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
        return tl.where(x != x, x.to(tl.bfloat16), nearest)
    return x.to(tl.bfloat16)


@triton.jit
def pow_(x, y):
    """C's pow, as exp(y log |x|) in f64 (the interpreter has no libdevice),
    with pow's signs and special cases: a negative base to an integral power
    (odd: negative), to another power NaN; x^0 = 1^y = 1."""
    ax = tl.abs(x).to(tl.float64)
    yd = y.to(tl.float64) + tl.zeros_like(ax)  # a block, if y is one element
    r = tl.exp(yd * tl.log(ax))
    integral = yd == tl.floor(yd)
    odd = integral & (tl.abs(yd) % 2.0 == 1.0)
    r = tl.where(x < 0, tl.where(integral, tl.where(odd, -r, r), float("nan")), r)
    r = tl.where((yd == 0) | (x == 1), 1.0, r)
    return r.to(x.dtype)
'''
"""Helpers a map kernel may call, printed once into the module."""

INFIX = {
    arith.AddfOp: "+",
    arith.SubfOp: "-",
    arith.MulfOp: "*",
    arith.AddiOp: "+",
    arith.SubiOp: "-",
    arith.MuliOp: "*",
    arith.DivSIOp: "//",
    arith.RemSIOp: "%",
    arith.AndIOp: "&",
    arith.OrIOp: "|",
    arith.XOrIOp: "^",
    arith.ShLIOp: "<<",
    arith.ShRSIOp: ">>",
}
"""Binary ops that are Python's operators on Triton blocks (integer `//` and
`%` truncate as C's do)."""

CALLS = {
    arith.MaximumfOp: "tl.maximum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)",
    arith.MinimumfOp: "tl.minimum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)",
    arith.MaxSIOp: "tl.maximum({0}, {1})",
    arith.MinSIOp: "tl.minimum({0}, {1})",
    arith.NegfOp: "-{0}",
    arith.SelectOp: "tl.where({0}, {1}, {2})",
    mathd.ExpOp: "tl.exp({0})",
    mathd.LogOp: "tl.log({0})",
    mathd.AbsFOp: "tl.abs({0})",
    mathd.AbsIOp: "tl.abs({0})",
    mathd.TanhOp: "tanh({0})",
    mathd.PowFOp: "pow_({0}, {1})",
}
"""Ops with a Triton function (or expression) of their operands."""

CASTS = (
    arith.ExtFOp,
    arith.TruncFOp,
    arith.SIToFPOp,
    arith.FPToSIOp,
    arith.ExtSIOp,
    arith.TruncIOp,
    arith.IndexCastOp,
)
"""Conversions: `.to(T)` (floats round to nearest even, floats to integers
truncate toward zero, integers wrap)."""

FLOAT_PREDICATES = {
    "oeq": "{0} == {1}",
    "une": "{0} != {1}",
    "olt": "{0} < {1}",
    "ole": "{0} <= {1}",
    "ogt": "{0} > {1}",
    "oge": "{0} >= {1}",
    "uno": "({0} != {0}) | ({1} != {1})",
    "ord": "({0} == {0}) & ({1} == {1})",
}
UNSIGNED_PREDICATES = frozenset({"ult", "ule", "ugt", "uge"})
"""Compared as unsigned (the operators are the CUDA C printer's `CMPI`)."""


def type_name(t: Attribute) -> str | None:
    if isinstance(t, IndexType):
        return TYPES["index"]
    if isinstance(t, IntegerType):
        return TYPES.get(f"i{t.width.data}")
    if isinstance(t, AnyFloat):
        return TYPES.get(str(t))
    return None


@dataclass
class MapKernel:
    """A map kernel's Python text and its loops' bounds, each `{k}` (the
    launch's k-th operand) or a number: a launch has a program per `BLOCK`
    elements of the largest."""

    text: str
    bounds: list[str]


@dataclass
class Translation:
    """The block code of one grid-stride loop body, value by value."""

    kernel: str
    names: dict[SSAValue, str] = field(default_factory=dict[SSAValue, str])
    loop_index: SSAValue | None = None
    """The index of the loop being translated."""
    lines: list[str] = field(default_factory=list[str])

    def refuse(self, what: str, op: Operation) -> CocoError:
        return CocoError(
            f"-t triton: kernel @{self.kernel}: {what} "
            '(docs/triton.md, "The triton target")',
            op,
        )

    def of(self, value: SSAValue) -> str:
        if value not in self.names:
            raise self.refuse("a value of the loop's header in its body", value.owner)  # type: ignore[arg-type]
        return self.names[value]

    def define(self, value: SSAValue, expression: str) -> None:
        taken, k = set(self.names.values()), len(self.names)
        while f"v{k}" in taken:
            k += 1
        name = f"v{k}"
        self.names[value] = name
        self.lines.append(f"{name} = {expression}")

    def unsigned(self, value: SSAValue) -> str:
        """An i32/i64 block read as unsigned (indices are never negative)."""
        t = value.type
        if isinstance(t, IntegerType) and t.width.data in (32, 64):
            return f"{self.of(value)}.to(tl.uint{t.width.data}, bitcast=True)"
        return self.of(value)

    def signed(self, expression: str, t: Attribute) -> str:
        """An unsigned block's value back in the signless type `t`."""
        if isinstance(t, IntegerType) and t.width.data in (32, 64):
            return f"({expression}).to(tl.int{t.width.data}, bitcast=True)"
        return expression

    def emit(self, op: Operation, mask: str) -> None:
        operands = [self.of(v) for v in op.operands]
        kind = type(op)
        if isinstance(op, arith.ConstantOp):
            self.define(op.result, self.constant(op))
        elif kind in INFIX:
            self.define(op.results[0], f"{operands[0]} {INFIX[kind]} {operands[1]}")
        elif isinstance(op, arith.DivfOp | mathd.SqrtOp):
            # f32: IEEE (Triton's own `/` and tl.sqrt are approximate there)
            f32 = op.results[0].type == f32_type
            if isinstance(op, arith.DivfOp):
                call = "tl.div_rn({0}, {1})" if f32 else "{0} / {1}"
            else:
                call = "tl.sqrt_rn({0})" if f32 else "tl.sqrt({0})"
            self.define(op.results[0], call.format(*operands))
        elif kind in CALLS:
            self.define(op.results[0], CALLS[kind].format(*operands))
        elif isinstance(op, arith.DivUIOp | arith.RemUIOp | arith.ShRUIOp):
            symbol = {arith.DivUIOp: "//", arith.RemUIOp: "%", arith.ShRUIOp: ">>"}
            lhs, rhs = (self.unsigned(v) for v in op.operands)
            result = self.signed(f"{lhs} {symbol[kind]} {rhs}", op.results[0].type)
            self.define(op.results[0], result)
        elif isinstance(op, arith.MinUIOp | arith.MaxUIOp):
            name = "minimum" if isinstance(op, arith.MinUIOp) else "maximum"
            lhs, rhs = (self.unsigned(v) for v in op.operands)
            result = self.signed(f"tl.{name}({lhs}, {rhs})", op.results[0].type)
            self.define(op.results[0], result)
        elif isinstance(op, arith.MulUIExtendedOp):
            lhs, rhs = (self.unsigned(v) for v in op.operands)
            self.define(op.results[0], f"{operands[0]} * {operands[1]}")
            high = self.signed(f"tl.umulhi({lhs}, {rhs})", op.results[1].type)
            self.define(op.results[1], high)
        elif isinstance(op, arith.CmpfOp):
            predicate = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
            if predicate not in FLOAT_PREDICATES:
                raise self.refuse(f"arith.cmpf {predicate} has no Triton form yet", op)
            self.define(op.result, FLOAT_PREDICATES[predicate].format(*operands))
        elif isinstance(op, arith.CmpiOp):
            predicate = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
            symbol = CMPI[predicate]
            if predicate in UNSIGNED_PREDICATES:
                lhs, rhs = (self.unsigned(v) for v in op.operands)
                self.define(op.result, f"{lhs} {symbol} {rhs}")
            else:
                self.define(op.result, f"{operands[0]} {symbol} {operands[1]}")
        elif isinstance(op, arith.UIToFPOp | arith.ExtUIOp):
            target = self.result_type(op)
            self.define(op.results[0], f"{self.unsigned(op.operands[0])}.to({target})")
        elif isinstance(op, CASTS):
            source, target = op.operands[0].type, op.results[0].type
            if isinstance(target, Float16Type | BFloat16Type) and source != f32_type:
                # through f32, as the CUDA C kernel converts to a half
                operands[0] = f"{operands[0]}.to(tl.float32)"
            if isinstance(target, BFloat16Type):
                self.define(op.results[0], f"to_bf16({operands[0]})")
            else:
                self.define(op.results[0], f"{operands[0]}.to({self.result_type(op)})")
        elif isinstance(op, memref.LoadOp):
            at = self.address(op, op.memref, op.indices)
            if self.varies(op.indices):
                self.define(op.res, f"tl.load({at}, mask={mask})")
            else:  # one element every lane reads (a rank-0 or broadcast operand)
                self.define(op.res, f"tl.load({at})")
        elif isinstance(op, memref.StoreOp):
            at = self.address(op, op.memref, op.indices)
            if not self.varies(op.indices):  # one element (a rank-0 result)
                assert self.loop_index is not None
                at = f"{at} + 0 * {self.names[self.loop_index]}"
            self.lines.append(f"tl.store({at}, {self.of(op.value)}, mask={mask})")
        else:
            raise self.refuse(f"'{op.name}' has no Triton form yet", op)

    def constant(self, op: arith.ConstantOp) -> str:
        value, t = op.value, op.result.type
        if isinstance(value, IntegerAttr) and isinstance(t, IndexType):
            return str(value.value.data)
        if isinstance(value, IntegerAttr) and isinstance(t, IntegerType):
            if t.width.data == 1:
                return str(bool(value.value.data & 1))
            return f"tl.full((), {value.value.data}, {type_name(t)})"
        if isinstance(value, FloatAttr) and type_name(t) is not None:
            number = value.value.data
            literal = (
                repr(number)
                if number == number and abs(number) != float("inf")
                else f'float("{number}")'
            )
            return f"tl.full((), {literal}, {type_name(t)})"
        raise self.refuse(f"the constant {value} has no Triton form yet", op)

    def result_type(self, op: Operation) -> str:
        name = type_name(op.results[0].type)
        if name is None:
            raise self.refuse(f"no Triton type for {op.results[0].type}", op)
        return name

    def varies(self, values: Sequence[SSAValue]) -> bool:
        """Whether any of `values` depends on the loop's index (is a block,
        not a scalar every lane shares)."""
        seen: set[SSAValue] = set()
        todo = list(values)
        while todo:
            value = todo.pop()
            if value is self.loop_index:
                return True
            owner = value.owner
            if value in seen or not isinstance(owner, Operation):
                continue
            seen.add(value)
            todo += owner.operands
        return False

    def address(
        self, op: Operation, buffer: SSAValue, indices: Sequence[SSAValue]
    ) -> str:
        """The pointers `op` loads or stores: a flat or rank-0 kernel
        argument at its index."""
        if not isinstance(buffer, BlockArgument) or len(indices) > 1:
            raise self.refuse(
                f"'{op.name}' of a buffer that is not a flat kernel argument", op
            )
        if not indices:
            return self.of(buffer)
        return f"{self.of(buffer)} + {self.of(indices[0])}"


LOCAL = re.compile(r"(i|inside|v)\d*|BLOCK")
"""Names a map kernel's own code takes (an argument so named gets `_`)."""


GRID_OPS = (gpu.BlockIdOp, gpu.BlockDimOp, gpu.ThreadIdOp, gpu.GridDimOp)


def defined_as(
    value: SSAValue, kind: type[Operation], operands: tuple[type, type]
) -> bool:
    """Whether `value` is `kind(a, b)` with `a` and `b` defined by ops of
    the two kinds `operands`, in either order."""
    op = value.owner
    if not isinstance(op, kind) or len(op.operands) != 2:
        return False
    a, b = (v.owner for v in op.operands)
    first, second = operands
    return (isinstance(a, first) and isinstance(b, second)) or (
        isinstance(a, second) and isinstance(b, first)
    )


def grid_stride(loop: scf.ForOp) -> bool:
    """Whether `loop` is `lowering.kernels.grid_stride_loop`'s: from
    `bid*bdim + tid`, by `gdim*bdim`."""
    start = loop.lb
    return (
        defined_as(start, arith.AddiOp, (arith.MuliOp, gpu.ThreadIdOp))
        and any(
            defined_as(v, arith.MuliOp, (gpu.BlockIdOp, gpu.BlockDimOp))
            for v in start.owner.operands  # type: ignore[union-attr]
        )
        and defined_as(loop.step, arith.MuliOp, (gpu.GridDimOp, gpu.BlockDimOp))
    )


def map_kernel(name: str, kernel: gpu.FuncOp) -> MapKernel | None:
    """The Triton kernel of a map kernel, or None when `kernel` is not one
    (grid-stride loops of straight-line code, one after another, as a
    concat's pieces); a CocoError for a map kernel with an op that has no
    Triton form. Program `p` takes elements `p·BLOCK ..` of every loop: the
    loops of one CUDA C kernel never read each other's stores (no grid
    barrier between them), so running them side by side is the same."""
    ops = list(kernel.body.block.ops)
    loops = [op for op in ops if isinstance(op, scf.ForOp)]
    if not loops or any(not grid_stride(loop) or loop.iter_args for loop in loops):
        return None
    header: set[Operation] = set(loops)
    for loop in loops:
        header |= {loop.lb.owner, loop.step.owner}  # type: ignore[arg-type]
    header |= {v.owner for op in list(header) for v in op.operands}  # type: ignore[misc]
    outside = [
        op
        for op in ops
        if op not in header and not isinstance(op, (gpu.ReturnOp, *GRID_OPS))
    ]
    bodies = [
        [op for op in loop.body.block.ops if not isinstance(op, scf.YieldOp)]
        for loop in loops
    ]
    if any(not isinstance(op, arith.ConstantOp) for op in outside) or any(
        op.regions for body in bodies for op in body
    ):
        return None
    translation = Translation(name)
    params = []
    for i, arg in enumerate(kernel.body.block.args):
        if not isinstance(arg.type, MemRefType | IndexType | IntegerType | AnyFloat):
            return None
        param = identifier(arg.name_hint, f"arg{i}")
        if LOCAL.fullmatch(param):
            param += "_"
        base, k = param, 0
        while param in params:
            k += 1
            param = f"{base}_{k}"
        translation.names[arg] = param
        params.append(param)
        scalar = type_name(arg.type)
        if scalar is not None:  # a Python number arrives as the narrowest that holds it
            translation.lines.append(f"{param} = {param} + tl.zeros((), {scalar})")
    bounds: list[str] = []
    for loop in loops:
        if isinstance(loop.ub, BlockArgument):
            bounds.append(f"{{{loop.ub.index}}}")
        elif isinstance(loop.ub.owner, arith.ConstantOp) and isinstance(
            loop.ub.owner.value, IntegerAttr
        ):
            bounds.append(str(loop.ub.owner.value.value.data))
        else:
            return None
    for op in outside:
        translation.emit(op, "")
    for k, (loop, body) in enumerate(zip(loops, bodies)):
        i, inside = ("i", "inside") if len(loops) == 1 else (f"i{k}", f"inside{k}")
        n = translation.names.get(loop.ub, bounds[k])
        translation.lines += [
            f"{i} = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
            f"{inside} = {i} < {n}",
        ]
        translation.names[loop.body.block.args[0]] = i
        translation.loop_index = loop.body.block.args[0]
        for op in body:
            translation.emit(op, inside)
    lines = "\n".join(f"    {line}" for line in translation.lines)
    text = f'''
@triton.jit
def {name}({", ".join(params)}, BLOCK: tl.constexpr):
    """The grid-stride kernel @{kernel.sym_name.data}, BLOCK elements a program."""
{lines}
'''
    return MapKernel(text, bounds)
