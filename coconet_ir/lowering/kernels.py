"""Kernels for convert-coco-to-gpu: the `gpu.module`, kernel functions,
grid-stride loops, launches, element indices and the scalar code of every
elementwise coco op (docs/gpu/device.md, "Kernels").

The pieces other lowerings reuse:

- `KernelModule.kernel(name, args)` creates a `gpu.func ... kernel` in the
  module's `gpu.module` and returns it with a builder at its body;
- `grid_stride_loop(b, n)` opens the loop `for i = bid*bdim+tid; i < n; i +=
  gdim*bdim` and returns the body's builder and `i`;
- `launch(host, kernels, kernel, n, args, threads)` is the host side:
  `gpu.launch_func` with `n` as the kernel's first argument, on the grid
  `coco_gpu.grid_blocks` gives (the function's shared `HostValues`);
- `Indexer` turns a flat element index of a shape into the multi-index (the
  digits are computed once, on demand), and `linear` puts one back together;
- `emit_elementwise(b, op, operands, global_index)` is the scalar code of one
  elementwise coco op (f16/bf16 computed in f32 and rounded after the op).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import NamedTuple

from xdsl.builder import Builder
from xdsl.dialects import arith, memref, scf, vector
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import (
    AnyFloat,
    DenseArrayBase,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
    SymbolRefAttr,
    UnitAttr,
    VectorType,
    f32,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint

from coconet_ir.diagnostics import CocoError
from coconet_ir.dialects import coco, gpu  # xDSL's gpu, in MLIR's syntax
from coconet_ir.dialects.coco import element_info
from coconet_ir.dialects.coco_gpu import WORK_ATTR, GridBlocksOp
from coconet_ir.lowering.host import HostValues
from coconet_ir.lowering.philox import dropout_keep

__all__ = [
    "GELU_CUBIC",
    "GELU_SQRT_2_OVER_PI",
    "Indexer",
    "KernelModule",
    "KernelUser",
    "compute_type",
    "constant",
    "emit_elementwise",
    "from_compute",
    "grid_stride_loop",
    "index_constant",
    "launch",
    "linear",
    "to_compute",
]

GELU_SQRT_2_OVER_PI = 0.7978845608
GELU_CUBIC = 0.044715

index = IndexType()
X = gpu.DimensionAttr(gpu.DimensionEnum.X)

GPU_KERNEL_ATTR = "gpu.kernel"
"""The unit attribute by which real MLIR knows a kernel (`gpu.func ... kernel`
is this attribute there; xDSL 0.74 models it as the property `kernel`), so the
conversion sets both."""

# ============================================================================
# The gpu.module and its kernels
# ============================================================================


KernelUser = gpu.LaunchFuncOp | GridBlocksOp
"""An op naming a kernel: its launch, or the occupancy query of a cooperative
launch (`coco_gpu.grid_blocks ... resident @kernels::@k`)."""


def kernel_users(module: Operation) -> list[KernelUser]:
    """Every op in `module` naming a kernel, in program order."""
    return [
        op
        for op in module.walk()
        if isinstance(op, gpu.LaunchFuncOp)
        or (isinstance(op, GridBlocksOp) and op.kernel is not None)
    ]


def named_kernel(user: KernelUser) -> str:
    """The name of the kernel `user` names."""
    assert user.kernel is not None
    return user.kernel.nested_references.data[-1].data


@dataclass
class KernelModule:
    """The `gpu.module` of a converted module: creates kernels with unique
    names and reuses a kernel already built for the same `key`."""

    module: gpu.ModuleOp
    names: set[str] = field(default_factory=set[str])
    bases: dict[str, str] = field(default_factory=dict[str, str])
    """Each kernel's name → the name it was asked for (without `_<n>`)."""
    counts: dict[str, int] = field(default_factory=dict[str, int])
    """The next number to try for each name."""
    cache: dict[object, gpu.FuncOp] = field(default_factory=dict[object, gpu.FuncOp])
    symbols: dict[str, SymbolRefAttr] = field(default_factory=dict[str, SymbolRefAttr])
    """`@<module>::@<kernel>` by kernel name (made once: launches share it)."""

    @staticmethod
    def create(name: str) -> KernelModule:
        module = gpu.ModuleOp(StringAttr(name), Region(Block()))  # type: ignore[arg-type]
        return KernelModule(module)

    @property
    def symbol(self) -> str:
        name = self.module.sym_name
        return name.data if isinstance(name, StringAttr) else str(name)

    def unique(self, name: str) -> str:
        """`name_0`, `name_1`, ...: the first that is free."""
        n = self.counts.get(name, 0)
        while f"{name}_{n}" in self.names:
            n += 1
        self.counts[name] = n + 1
        found = f"{name}_{n}"
        self.names.add(found)
        self.bases[found] = name
        return found

    def deduplicate(self, launches: Sequence[KernelUser]) -> None:
        """Launch one kernel for every set of kernels asked for under the same
        name and built identically (e.g. an op cloned into every chunk of an
        overlap), and drop the copies. `launches`: every op naming a kernel
        (`kernel_users`)."""
        replaced: dict[str, str] = {}
        kernels = [k for k in self.module.body.block.ops if isinstance(k, gpu.FuncOp)]
        # Kernels of one name and type, in order; only those have their
        # bodies compared (a body's printed form walks all of it).
        alike: dict[tuple[str, Attribute], list[gpu.FuncOp]] = {}
        for kernel in kernels:
            name = kernel.sym_name.data
            key = (self.bases.get(name, name), kernel.function_type)
            alike.setdefault(key, []).append(kernel)
        for group in alike.values():
            if len(group) == 1:
                continue  # no other kernel of its name and type: no copy
            first: dict[Hashable, str] = {}
            for kernel in group:
                name = kernel.sym_name.data
                body = printed_form(kernel.body)
                if body in first:
                    replaced[name] = first[body]
                    kernel.detach()
                    kernel.erase()
                else:
                    first[body] = name
        for call in launches:
            name = named_kernel(call)
            if name in replaced:
                call.kernel = SymbolRefAttr(self.symbol, [StringAttr(replaced[name])])
        for name in replaced:
            self.names.discard(name)
            self.bases.pop(name, None)
        self.cache = {k: v for k, v in self.cache.items() if v.parent is not None}

    def renumber(self, launches: Sequence[KernelUser]) -> None:
        """Number the kernels `<name>_0, _1, ...` and order them by their
        first launch in `launches` (program order; every op naming a kernel,
        `kernel_users`), whatever order the patterns built them in."""
        kernels = {
            k.sym_name.data: k
            for k in self.module.body.block.ops
            if isinstance(k, gpu.FuncOp)
        }
        order: dict[str, None] = {}  # a dict: first launches, in order
        for call in launches:
            name = named_kernel(call)
            if name in kernels:
                order.setdefault(name)
        for name in kernels:
            order.setdefault(name)
        counts: dict[str, int] = {}
        renamed: dict[str, str] = {}
        for name in order:
            base = self.bases.get(name, name)
            renamed[name] = f"{base}_{counts.get(base, 0)}"
            counts[base] = counts.get(base, 0) + 1
        for call in launches:
            name = named_kernel(call)
            if name in renamed:
                call.kernel = SymbolRefAttr(self.symbol, [StringAttr(renamed[name])])
        block = self.module.body.block
        for name in order:
            kernel = kernels[name]
            kernel.sym_name = StringAttr(renamed[name])
            kernel.detach()
            block.add_op(kernel)
        self.names = set(renamed.values())
        self.bases = {renamed[n]: self.bases.get(n, n) for n in order}

    def kernel(
        self, name: str, args: Sequence[tuple[str, Attribute]]
    ) -> tuple[gpu.FuncOp, Builder]:
        """A new `gpu.func @NAME_n(args) kernel` (args are (name hint, type)),
        and a builder at its body, before its `gpu.return`."""
        types = [t for _, t in args]
        body = Block(arg_types=types)
        for arg, (hint, _) in zip(body.args, args):
            arg.name_hint = hint
        body.add_op(gpu.ReturnOp([]))
        func = gpu.FuncOp(self.unique(name), (types, []), Region(body), kernel=True)
        func.attributes[GPU_KERNEL_ATTR] = UnitAttr()
        self.module.body.block.add_op(func)
        return func, Builder(InsertPoint.before(body.last_op))  # type: ignore[arg-type]

    def cached(
        self,
        key: object,
        build: Callable[[], gpu.FuncOp],
        name: str | None = None,
        generic: str | None = None,
    ) -> gpu.FuncOp:
        """The kernel built for `key`, building it the first time. `name` is
        the name the caller asks for it under (an op's label), `generic` the
        name of its kind: a kernel asked for under two names (ops of
        different labels computing the same thing) is named `generic`."""
        found = self.cache.get(key)
        if found is None:
            found = self.cache[key] = build()
        elif name is not None and generic is not None:
            built = found.sym_name.data
            if self.bases.get(built, built) != name:
                self.bases[built] = generic
        return found

    def symbol_of(self, kernel: gpu.FuncOp) -> SymbolRefAttr:
        name = kernel.sym_name.data
        if name not in self.symbols:
            self.symbols[name] = SymbolRefAttr(self.symbol, [StringAttr(name)])
        return self.symbols[name]


def printed_form(
    region: Region | Operation,
    names: bool = True,
    seeds: bool = True,
    labels: bool = True,
) -> Hashable:
    """What printing `region` (or an op) shows, as a value to compare and hash (much
    cheaper than printing it): every op's name, operands (numbered in order of
    definition), attributes, properties, result types and value names, and
    the blocks and regions it holds: regions whose printed forms are equal
    print the same text. Without `names`, value names are left out; without
    `seeds`, dropouts' seeds (what a map kernel takes as arguments); without
    `labels`, coco ops' labels (their `name` attributes): what a kernel
    computes."""
    numbers: dict[SSAValue | Block, int] = {}

    def number(item: SSAValue | Block) -> int:
        return numbers.setdefault(item, len(numbers))

    def values(items: Sequence[SSAValue]) -> tuple[Hashable, ...]:
        if not names:
            return tuple((number(v), v.type) for v in items)
        return tuple((number(v), v.type, v.name_hint) for v in items)

    def properties(op: Operation) -> tuple[Hashable, ...]:
        if seeds or not isinstance(op, coco.DropoutOp):
            return tuple(op.properties.items())
        return tuple(item for item in op.properties.items() if item[0] != "seed")

    def of_region(region: Region) -> tuple[Hashable, ...]:
        for block in region.blocks:
            number(block)
        return tuple(
            (values(block.args), tuple(of_op(op) for op in block.ops))
            for block in region.blocks
        )

    def attributes(op: Operation) -> tuple[Hashable, ...]:
        if labels or coco.label_of(op) is None:
            return tuple(op.attributes.items())
        return tuple(item for item in op.attributes.items() if item[0] != "name")

    def of_op(op: Operation) -> Hashable:
        return (
            op.name,
            tuple(number(v) for v in op.operands),
            attributes(op),
            properties(op),
            tuple(number(b) for b in op.successors),
            tuple(of_region(r) for r in op.regions),
            values(op.results),
        )

    if isinstance(region, Operation):
        return of_op(region)
    return of_region(region)


def grid_stride_loop(b: Builder, n: SSAValue) -> tuple[Builder, SSAValue]:
    """`scf.for %i = bid*bdim+tid to %n step gdim*bdim`: every element index
    below `n` once, for any grid size. Returns the loop body's builder and
    `%i`."""
    bid = b.insert(gpu.BlockIdOp(X)).result
    bdim = b.insert(gpu.BlockDimOp(X)).result
    tid = b.insert(gpu.ThreadIdOp(X)).result
    gdim = b.insert(gpu.GridDimOp(X)).result
    base = b.insert(arith.MuliOp(bid, bdim)).result
    start = b.insert(arith.AddiOp(base, tid)).result
    step = b.insert(arith.MuliOp(gdim, bdim)).result
    start.name_hint, step.name_hint = "start", "step"
    body = Block(arg_types=[index])
    body.args[0].name_hint = "i"
    body.add_op(scf.YieldOp())
    b.insert(scf.ForOp(start, n, step, [], body))
    return Builder(InsertPoint.before(body.last_op)), body.args[0]  # type: ignore[arg-type]


def index_constant(b: Builder, value: int) -> SSAValue:
    return b.insert(arith.ConstantOp(IntegerAttr(value, index))).result


def for_loop(
    b: Builder, lower: SSAValue, upper: SSAValue, step: SSAValue, hint: str = "i"
) -> tuple[Builder, SSAValue]:
    """`scf.for %i = lower to upper step step`; its body's builder and `%i`."""
    body = Block(arg_types=[index])
    body.args[0].name_hint = hint
    body.add_op(scf.YieldOp())
    b.insert(scf.ForOp(lower, upper, step, [], body))
    return Builder(InsertPoint.before(body.last_op)), body.args[0]  # type: ignore[arg-type]


def if_then(b: Builder, condition: SSAValue) -> Builder:
    """`scf.if %condition { ... }`; the then-block's builder."""
    then = Block()
    then.add_op(scf.YieldOp())
    b.insert(scf.IfOp(condition, [], [then]))
    return Builder(InsertPoint.before(then.last_op))  # type: ignore[arg-type]


def if_else_value(
    b: Builder,
    condition: SSAValue,
    result: Attribute,
    then: Callable[[Builder], SSAValue],
    otherwise: Callable[[Builder], SSAValue],
) -> SSAValue:
    """`scf.if %condition -> T { then } else { otherwise }`."""
    blocks = []
    for make in (then, otherwise):
        block = Block()
        inner = Builder(InsertPoint.at_end(block))
        inner.insert(scf.YieldOp(make(inner)))
        blocks.append(block)
    return b.insert(scf.IfOp(condition, [result], [blocks[0]], [blocks[1]])).results[0]


def if_else(b: Builder, condition: SSAValue) -> tuple[Builder, Builder]:
    """`scf.if %condition { ... } else { ... }`; both blocks' builders."""
    blocks = [Block(), Block()]
    for block in blocks:
        block.add_op(scf.YieldOp())
    b.insert(scf.IfOp(condition, [], [blocks[0]], [blocks[1]]))
    then, otherwise = (Builder(InsertPoint.before(k.last_op)) for k in blocks)  # type: ignore[arg-type]
    return then, otherwise


def binary(b: Builder, kind: type[Operation], x: SSAValue, y: SSAValue) -> SSAValue:
    return b.insert(kind(x, y)).results[0]  # type: ignore[call-arg]


def load(b: Builder, buffer: SSAValue, indices: Sequence[SSAValue]) -> SSAValue:
    return b.insert(memref.LoadOp.get(buffer, indices)).res


def store(
    b: Builder, value: SSAValue, buffer: SSAValue, indices: Sequence[SSAValue]
) -> None:
    b.insert(memref.StoreOp.get(value, buffer, indices))


VECTOR_BYTES = 16
"""The widest access a GPU thread makes in one instruction (ld/st.global.v4
of 32-bit words): kernels move 16 bytes per access where they can."""


def load_lanes(b: Builder, buffer: SSAValue, at: SSAValue, width: int) -> SSAValue:
    """`width` consecutive elements of a 1-D `buffer` from `at`: one
    `vector.load` (`at` must be a multiple of `width`, the buffer aligned to
    the vector's size), or a scalar `memref.load` for a width of 1."""
    if width == 1:
        return load(b, buffer, [at])
    assert isinstance(buffer.type, MemRefType)
    t = VectorType(buffer.type.element_type, [width])
    return b.insert(vector.LoadOp(buffer, [at], t)).result


def store_lanes(b: Builder, value: SSAValue, buffer: SSAValue, at: SSAValue) -> None:
    """Store what `load_lanes` loads: a vector with `vector.store`, a scalar
    with `memref.store`."""
    if isinstance(value.type, VectorType):
        b.insert(vector.StoreOp(value, buffer, [at]))
    else:
        store(b, value, buffer, [at])


def lanes(b: Builder, value: SSAValue) -> list[SSAValue]:
    """A vector's lanes (`vector.extract`), or `[value]` for a scalar."""
    if not isinstance(value.type, VectorType):
        return [value]
    element = value.type.element_type
    count = value.type.get_shape()[0]
    return [
        b.insert(vector.ExtractOp(value, [j], element)).result for j in range(count)
    ]


def from_lanes(b: Builder, values: Sequence[SSAValue]) -> SSAValue:
    """The vector of `values` (`vector.broadcast` of the first, then
    `vector.insert` of the others), or the one scalar."""
    if len(values) == 1:
        return values[0]
    t = VectorType(values[0].type, [len(values)])
    packed = b.insert(vector.BroadcastOp(values[0], t)).vector
    for j, value in enumerate(values[1:], start=1):
        packed = b.insert(vector.InsertOp(value, packed, [j], t)).result
    return packed


class KernelSite(NamedTuple):
    """Where a kernel is built and launched from: the launching function's
    host values, the kernel module, the launch width (threads a block), and
    the kernel's name."""

    host: HostValues
    kernels: KernelModule
    threads: int
    name: str


def launch(
    host: HostValues,
    kernels: KernelModule,
    kernel: gpu.FuncOp,
    count: int,
    args: Sequence[SSAValue],
    threads: int,
    *,
    block_per_item: bool = False,
) -> list[Operation]:
    """The host op launching the grid-stride `kernel` over `count` items:
    `gpu.launch_func` with `%n` and `args` as arguments, on the grid
    `coco_gpu.grid_blocks` gives (both from the function's `host` values).
    With `block_per_item`, the kernel strides over the items by blocks (a
    block-stride loop), and the grid has a block for each, capped likewise."""
    blocks = host.grid_blocks(count * threads if block_per_item else count, threads)
    one, t = host.index(1), host.index(threads)
    call = gpu.LaunchFuncOp.of(
        kernels.symbol_of(kernel),
        [blocks, one, one],
        [t, one, one],
        [host.index(count), *args],
    )
    return [call]


# ============================================================================
# Element indices
# ============================================================================


def strides(shape: Sequence[int]) -> list[int]:
    """Row-major strides of `shape`."""
    found = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        found[d] = found[d + 1] * shape[d + 1]
    return found


@dataclass
class Indexer:
    """The multi-index of the flat index `flat` in `shape` (row-major), each
    digit emitted once when first asked for."""

    b: Builder
    flat: SSAValue
    shape: tuple[int, ...]
    digits: dict[int, SSAValue] = field(default_factory=dict[int, SSAValue])

    def digit(self, d: int) -> SSAValue:
        """`(flat / stride[d]) % shape[d]`, without the needless ops."""
        if d not in self.digits and self.shape[d] == 1:
            self.digits[d] = index_constant(self.b, 0)
        if d not in self.digits:
            stride = strides(self.shape)[d]
            value = self.flat
            if stride != 1:
                c = index_constant(self.b, stride)
                value = self.b.insert(arith.DivUIOp(value, c)).result
            if d != 0:
                c = index_constant(self.b, self.shape[d])
                value = self.b.insert(arith.RemUIOp(value, c)).result
            self.digits[d] = value
        return self.digits[d]


def linear(
    b: Builder, digits: Sequence[SSAValue | int], shape: Sequence[int]
) -> SSAValue:
    """The row-major flat index of the multi-index `digits` in `shape`
    (an int digit is a constant; zero terms are skipped)."""
    total: SSAValue | None = None
    for digit, stride in zip(digits, strides(shape)):
        if isinstance(digit, int):
            if digit == 0:
                continue
            term = index_constant(b, digit * stride)
        elif stride == 1:
            term = digit
        else:
            term = b.insert(arith.MuliOp(digit, index_constant(b, stride))).result
        total = term if total is None else b.insert(arith.AddiOp(total, term)).result
    return index_constant(b, 0) if total is None else total


# ============================================================================
# Scalar code of elementwise ops
# ============================================================================


def compute_type(element_type: Attribute) -> Attribute:
    """The type arithmetic on `element_type` runs in (f32 for halves)."""
    return element_info(element_type).compute_type


def to_compute(b: Builder, value: SSAValue) -> SSAValue:
    """`value` in its compute type (`arith.extf` of a half)."""
    target = compute_type(value.type)
    if target == value.type:
        return value
    return b.insert(arith.ExtFOp(value, target)).result


def from_compute(b: Builder, value: SSAValue, element_type: Attribute) -> SSAValue:
    """A computed `value` rounded to `element_type` (`arith.truncf` to a half)."""
    if value.type == element_type:
        return value
    return b.insert(arith.TruncFOp(value, element_type)).result


def constant(b: Builder, value: float | int, t: Attribute) -> SSAValue:
    """An `arith.constant` of type `t` (a float, an integer or i1)."""
    if isinstance(t, IntegerType):
        return b.insert(arith.ConstantOp(IntegerAttr(int(value), t))).result
    assert isinstance(t, AnyFloat)
    return b.insert(arith.ConstantOp(FloatAttr(float(value), t))).result


_FLOAT_BINARY: dict[type[Operation], type[Operation]] = {
    coco.AddOp: arith.AddfOp,
    coco.SubOp: arith.SubfOp,
    coco.MulOp: arith.MulfOp,
    coco.DivOp: arith.DivfOp,
    coco.MaxOp: arith.MaximumfOp,
    coco.MinOp: arith.MinimumfOp,
    coco.PowOp: mathd.PowFOp,
}
_INT_BINARY: dict[type[Operation], type[Operation]] = {
    coco.AddOp: arith.AddiOp,
    coco.SubOp: arith.SubiOp,
    coco.MulOp: arith.MuliOp,
    coco.DivOp: arith.DivSIOp,
    coco.MaxOp: arith.MaxSIOp,
    coco.MinOp: arith.MinSIOp,
}
_FLOAT_UNARY: dict[type[Operation], type[Operation]] = {
    coco.AbsOp: mathd.AbsFOp,
    coco.SqrtOp: mathd.SqrtOp,
    coco.ExpOp: mathd.ExpOp,
    coco.LogOp: mathd.LogOp,
    coco.TanhOp: mathd.TanhOp,
}
_FLOAT_OPS = {**_FLOAT_BINARY, **_FLOAT_UNARY}
"""The float ops one `arith` or `math` op computes."""
_FLOAT_PREDICATES = {
    "eq": "oeq",
    "ne": "une",
    "lt": "olt",
    "le": "ole",
    "gt": "ogt",
    "ge": "oge",
}
"""numpy's comparisons: false on NaN, but `ne`."""
_INT_PREDICATES = {
    "eq": "eq",
    "ne": "ne",
    "lt": "slt",
    "le": "sle",
    "gt": "sgt",
    "ge": "sge",
}
_BOOL_PREDICATES = {
    "eq": "eq",
    "ne": "ne",
    "lt": "ult",
    "le": "ule",
    "gt": "ugt",
    "ge": "uge",
}

I32_MIN = -(2**31)
I32_MAX = 2**31 - 1


def emit_elementwise(
    b: Builder,
    op: Operation,
    operands: Sequence[SSAValue],
    global_index: Callable[[], SSAValue] | None = None,
    seed: Callable[[coco.DropoutOp], SSAValue] | None = None,
) -> SSAValue:
    """The scalar code of the elementwise coco op `op` on scalars of its
    operands' element types; returns a scalar of its result's element type.

    Halves are computed in f32 and rounded once, after the op (as the
    interpreter); i32 wraps and divides truncating. `global_index` gives the
    element's global linear index (an i64), which dropout needs; `seed` a
    dropout's seed as a value (a kernel argument), else it is folded."""
    result = op.results[0].type
    assert isinstance(result, coco.TensorType)
    element_type = result.element_type
    if isinstance(op, coco.ConstantOp):
        return constant(b, op.python_value, element_type)
    if isinstance(op, coco.SelectOp):
        c, x, y = operands
        return b.insert(arith.SelectOp(c, x, y)).result
    if isinstance(op, coco.ConvertOp):
        return emit_convert(b, operands[0], element_type)
    if isinstance(op, coco.CmpOp):
        return emit_compare(b, op.predicate.data, *operands)
    values = [to_compute(b, v) for v in operands]
    if isinstance(op, coco.DropoutOp):
        assert global_index is not None, "dropout needs the element's global index"
        at = global_index()
        value = emit_dropout(b, op, values[0], element_type, at, seed and seed(op))
    elif element_info(element_type).is_float:
        value = _scalar_op(b, op, values, _FLOAT_OPS, _float_op, "")
    else:
        value = _scalar_op(b, op, values, _INT_BINARY, _int_op, " on integers")
    return from_compute(b, value, element_type)


def _scalar_op(
    b: Builder,
    op: Operation,
    values: Sequence[SSAValue],
    table: Mapping[type[Operation], type[Operation]],
    unary: Callable[[Builder, Operation, SSAValue], SSAValue | None],
    on: str,
) -> SSAValue:
    """`op` on the scalars `values` in their compute type: the op `table`
    maps it to, else `unary`'s code for it on its one operand; an op
    neither has is refused (no scalar code `on` these types)."""
    kind = type(op)
    if kind in table:
        return b.insert(table[kind](*values)).results[0]  # type: ignore[call-arg]
    (x,) = values
    value = unary(b, op, x)
    if value is None:
        raise CocoError(f"has no scalar code{on} in a kernel", op)
    return value


def _float_op(b: Builder, op: Operation, x: SSAValue) -> SSAValue | None:
    t = x.type
    if isinstance(op, coco.NegOp):
        return b.insert(arith.NegfOp(x)).result
    if isinstance(op, coco.RsqrtOp):
        root = b.insert(mathd.SqrtOp(x)).result
        return b.insert(arith.DivfOp(constant(b, 1.0, t), root)).result
    if isinstance(op, coco.ReluOp):
        return b.insert(arith.MaximumfOp(x, constant(b, 0.0, t))).result
    if isinstance(op, coco.GeluOp):
        return _gelu(b, x)
    return None


def _gelu(b: Builder, x: SSAValue) -> SSAValue:
    """`0.5 x (1 + tanh(0.7978845608 (x + 0.044715 x^3)))`, in the
    interpreter's order of operations."""
    t = x.type
    cube = b.insert(arith.MulfOp(constant(b, GELU_CUBIC, t), x)).result
    cube = b.insert(arith.MulfOp(cube, x)).result
    cube = b.insert(arith.MulfOp(cube, x)).result
    inner = b.insert(arith.AddfOp(x, cube)).result
    inner = b.insert(arith.MulfOp(constant(b, GELU_SQRT_2_OVER_PI, t), inner)).result
    tanh = b.insert(mathd.TanhOp(inner)).result
    one_plus = b.insert(arith.AddfOp(constant(b, 1.0, t), tanh)).result
    half_x = b.insert(arith.MulfOp(constant(b, 0.5, t), x)).result
    return b.insert(arith.MulfOp(half_x, one_plus)).result


def _int_op(b: Builder, op: Operation, x: SSAValue) -> SSAValue | None:
    t = x.type
    if isinstance(op, coco.NegOp):
        return b.insert(arith.SubiOp(constant(b, 0, t), x)).result
    if isinstance(op, coco.AbsOp):
        return b.insert(mathd.AbsIOp(x)).result
    if isinstance(op, coco.ReluOp):
        return b.insert(arith.MaxSIOp(x, constant(b, 0, t))).result
    return None


def emit_compare(b: Builder, predicate: str, x: SSAValue, y: SSAValue) -> SSAValue:
    """`coco.cmp` on two scalars of one element type (halves compared in f32)."""
    if element_info(x.type).is_float:
        x, y = to_compute(b, x), to_compute(b, y)
        return b.insert(arith.CmpfOp(x, y, _FLOAT_PREDICATES[predicate])).result
    table = _BOOL_PREDICATES if x.type == i1 else _INT_PREDICATES
    return b.insert(arith.CmpiOp(x, y, table[predicate])).result


def emit_convert(b: Builder, x: SSAValue, target: Attribute) -> SSAValue:
    """`coco.convert` of a scalar to `target`, as the interpreter converts:
    to i1 is `!= 0`, float to i32 truncates, saturates and maps NaN to 0."""
    source = x.type
    if source == target:
        return x
    source_info, target_info = element_info(source), element_info(target)
    if target == i1:
        if source_info.is_float:
            c = to_compute(b, x)
            zero = constant(b, 0.0, c.type)
            return b.insert(arith.CmpfOp(c, zero, "une")).result
        return b.insert(arith.CmpiOp(x, constant(b, 0, source), "ne")).result
    if source == i1:
        if target_info.is_float:
            return b.insert(arith.UIToFPOp(x, target)).result  # type: ignore[arg-type]
        return b.insert(arith.ExtUIOp(x, target)).result  # type: ignore[arg-type]
    if target == i32:
        return _float_to_i32(b, to_compute(b, x))
    if source == i32:
        return b.insert(arith.SIToFPOp(x, target)).result  # type: ignore[arg-type]
    if source_info.bytes < target_info.bytes:
        return b.insert(arith.ExtFOp(x, target)).result
    if source_info.is_half and target_info.is_half:
        return b.insert(arith.TruncFOp(to_compute(b, x), target)).result
    return b.insert(arith.TruncFOp(x, target)).result


def _float_to_i32(b: Builder, x: SSAValue) -> SSAValue:
    """Truncate toward zero, saturate to i32, NaN → 0 (`__float2int_rz`)."""
    t = x.type
    is_nan = b.insert(arith.CmpfOp(x, x, "uno")).result
    zero = constant(b, 0.0, t)
    x = b.insert(arith.SelectOp(is_nan, zero, x)).result
    low = constant(b, float(I32_MIN), t)
    x = b.insert(arith.MaximumfOp(x, low)).result
    limit = constant(b, 2.0**31, t)
    too_big = b.insert(arith.CmpfOp(x, limit, "oge")).result
    below = math.nextafter(2.0**31, 0.0) if t != f32 else 2.0**31 - 128
    x = b.insert(arith.MinimumfOp(x, constant(b, below, t))).result
    converted = b.insert(arith.FPToSIOp(x, i32)).result
    saturated = constant(b, I32_MAX, i32)
    return b.insert(arith.SelectOp(too_big, saturated, converted)).result


def dropout_scale(p: float, element_type: Attribute) -> float:
    """`1 - p` rounded to the element type (the interpreter divides by it)."""
    import numpy as np

    return float(np.asarray(1.0 - p).astype(element_info(element_type).storage))


def emit_dropout(
    b: Builder,
    op: coco.DropoutOp,
    x: SSAValue,
    element_type: Attribute,
    global_index: SSAValue,
    seed: SSAValue | None = None,
) -> SSAValue:
    """`keep ? x / (1 - p) : 0` (computed `x` in, computed value out); `seed`
    the op's seed as an i64 value, else its constant is folded in."""
    p = op.probability
    keep = dropout_keep(
        b, op.seed.value.data if seed is None else seed, p, global_index
    )
    t = x.type
    kept = b.insert(arith.SelectOp(keep, x, constant(b, 0.0, t))).result
    scale = constant(b, dropout_scale(p, element_type), t)
    return b.insert(arith.DivfOp(kept, scale)).result


def as_i64(b: Builder, value: SSAValue) -> SSAValue:
    """An index as an i64 (for Philox's counter)."""
    return b.insert(arith.IndexCastOp(value, i64)).result


def memref_element(t: Attribute) -> Attribute:
    assert isinstance(t, MemRefType)
    return t.element_type


def element_count_of(t: MemRefType) -> int:
    return math.prod(t.get_shape())


def memref_type(value: SSAValue) -> MemRefType:
    assert isinstance(value.type, MemRefType)
    return value.type


# ============================================================================
# Data-movement kernels: blocks, rank-major packing
# ============================================================================

Remap = Callable[[Builder, SSAValue, Sequence[SSAValue]], tuple[SSAValue, SSAValue]]
"""The body of a copy kernel: for the element `i` and the extra index
arguments, the flat indices it copies from and to."""


def flat_args(
    host: HostValues, buffers: Sequence[SSAValue]
) -> tuple[list[Operation], list[SSAValue]]:
    """The buffers as kernels take them (collapsed to 1-D, `HostValues.flat`)
    and the views to insert before the launch."""
    ops: list[Operation] = []
    found: list[SSAValue] = []
    made: dict[SSAValue, SSAValue] = {}
    for buffer in buffers:
        if buffer not in made:
            more, made[buffer] = host.flat(buffer)
            ops += more
        found.append(made[buffer])
    return ops, found


def copy_kernel(
    site: KernelSite,
    key: object,
    count: int,
    source: SSAValue,
    dest: SSAValue,
    extra: Sequence[tuple[str, SSAValue]],
    remap: Remap,
) -> list[Operation]:
    """Host ops launching a grid-stride copy of `count` elements from `source`
    to `dest` (`dest[to] = source[from]` with `(from, to) = remap(i, extra)`);
    the kernel is built once per `key`."""
    host, kernels, threads, name = site
    views, (src, dst) = flat_args(host, [source, dest])

    def build() -> gpu.FuncOp:
        specs = [("n", index), *((h, v.type) for h, v in extra)]
        specs += [("src", src.type), ("dst", dst.type)]
        kernel, b = kernels.kernel(name, specs)
        args = kernel.body.block.args
        loop, i = grid_stride_loop(b, args[0])
        extras = list(args[1 : 1 + len(extra)])
        frm, to = remap(loop, i, extras)
        value = loop.insert(memref.LoadOp.get(args[-2], [frm])).res
        loop.insert(memref.StoreOp.get(value, args[-1], [to]))
        return kernel

    kernel = kernels.cached((key, src.type, dst.type), build)
    return [
        *views,
        *launch(
            host, kernels, kernel, count, [v for _, v in extra] + [src, dst], threads
        ),
    ]


def block_split(shape: Sequence[int], dim: int) -> tuple[int, int, int]:
    """`(pre, size, post)`: `shape` seen as 3-D around `dim`."""
    return math.prod(shape[:dim]), shape[dim], math.prod(shape[dim + 1 :])


def copy_block(
    site: KernelSite,
    source: SSAValue,
    dest: SSAValue,
    outer: Sequence[int],
    dim: int,
    block: int,
    offset: SSAValue,
    *,
    extract: bool,
) -> list[Operation]:
    """Copy between the block `[offset, offset + block)` along `dim` of a
    buffer of shape `outer` and a contiguous buffer holding just that block:
    from the outer buffer (`extract`) or into it. `offset` is a host index."""
    pre, size, post = block_split(outer, dim)

    def remap(
        b: Builder, i: SSAValue, extra: Sequence[SSAValue]
    ) -> tuple[SSAValue, SSAValue]:
        inner = Indexer(b, i, (pre, block, post))
        start = b.insert(arith.AddiOp(inner.digit(1), extra[0])).result
        wide = linear(b, [inner.digit(0), start, inner.digit(2)], (pre, size, post))
        return (wide, i) if extract else (i, wide)

    key = ("block", extract, pre, size, post, block)
    return copy_kernel(
        site,
        key,
        pre * block * post,
        source,
        dest,
        [("offset", offset)],
        remap,
    )


def rank_major(
    site: KernelSite,
    source: SSAValue,
    dest: SSAValue,
    shape: Sequence[int],
    dim: int,
    world: int,
    *,
    pack: bool,
) -> list[Operation]:
    """Reorder a buffer of `shape` (dim `dim` holding `world` blocks) into
    the rank-major layout NCCL scatters and gathers — block `r` of every row
    contiguous, `[world, pre, block, post]` (`pack`) — or back (unpack)."""
    pre, size, post = block_split(shape, dim)
    block = size // world

    def remap(
        b: Builder, i: SSAValue, extra: Sequence[SSAValue]
    ) -> tuple[SSAValue, SSAValue]:
        major = Indexer(b, i, (world, pre, block, post))
        r, p, j, q = (major.digit(d) for d in range(4))
        start = b.insert(arith.MuliOp(r, index_constant(b, block))).result
        start = b.insert(arith.AddiOp(start, j)).result
        natural = linear(b, [p, start, q], (pre, size, post))
        return (natural, i) if pack else (i, natural)

    key = ("rank_major", pack, pre, size, post, world)
    return copy_kernel(site, key, pre * size * post, source, dest, [], remap)


def transpose_copy(
    site: KernelSite,
    source: SSAValue,
    dest: SSAValue,
    shape: Sequence[int],
    perm: Sequence[int],
) -> list[Operation]:
    """Copy a buffer of `shape` into `dest` transposed (`coco.transpose`):
    element `i` of `dest` (shape `shape[perm[j]]` along dim `j`) is read at
    the source index whose dim `perm[j]` is `i`'s digit `j`."""
    moved = tuple(shape[d] for d in perm)

    def remap(
        b: Builder, i: SSAValue, extra: Sequence[SSAValue]
    ) -> tuple[SSAValue, SSAValue]:
        digits = Indexer(b, i, moved)
        source_digits: list[SSAValue | int] = [0] * len(shape)
        for j, d in enumerate(perm):
            source_digits[d] = digits.digit(j)
        return linear(b, source_digits, shape), i

    key = ("transpose", tuple(shape), tuple(perm))
    return copy_kernel(site, key, math.prod(shape), source, dest, [], remap)


def flat_copy(
    site: KernelSite, source: SSAValue, dest: SSAValue, count: int
) -> list[Operation]:
    """Copy `count` elements in order (`coco.reshape`: the same row-major
    elements, another shape)."""

    def remap(
        b: Builder, i: SSAValue, extra: Sequence[SSAValue]
    ) -> tuple[SSAValue, SSAValue]:
        return i, i

    return copy_kernel(site, ("copy",), count, source, dest, [], remap)


@dataclass(frozen=True)
class BucketCopy:
    """One bucket's copy (or a run of its pieces): its flat buffer, the
    pieces, the rows of the flat buffer on one rank and the column of each
    row where the first piece given starts (`bucket_copy`)."""

    flat: SSAValue
    pieces: Sequence[SSAValue]
    rows: int
    column: int = 0

    def parts(self, most: int) -> list[BucketCopy]:
        """This copy as copies of at most `most` buffers each (the flat
        buffer and `most - 1` pieces), each starting at its own column."""
        step = max(1, most - 1)
        found: list[BucketCopy] = []
        column = self.column
        for first in range(0, len(self.pieces), step):
            pieces = self.pieces[first : first + step]
            found.append(BucketCopy(self.flat, pieces, self.rows, column))
            column += sum(element_count_of(memref_type(p)) for p in pieces) // self.rows
        return found


def bucket_copy(
    site: KernelSite,
    buckets: Sequence[BucketCopy],
    *,
    pack: bool,
) -> list[Operation]:
    """One launch copying every piece of each bucket into its flat buffer
    (`pack`, `coco.concat`) or out of it (`coco.split`); one launch for all
    the buckets given (the gradients', weights' and moments' buckets of one
    optimizer bucket). A flat buffer is `rows` rows (the world size for a
    replicated or local bucket, 1 for a rank's block of a sliced one), row
    `r` holding every piece's row `r` in order: element `i` of a piece of `c`
    elements per row starting at column `o` is element `(i / c) * row + o +
    i % c` of the flat buffer. The kernel runs one grid-stride loop per
    piece."""
    host, kernels, threads, name = site
    views: list[Operation] = []
    layouts: list[tuple[int, int, tuple[int, ...], Attribute]] = []
    args: list[SSAValue] = []
    totals: list[int] = []
    for bucket in buckets:
        more, buffers = flat_args(host, [bucket.flat, *bucket.pieces])
        views += more
        args += buffers
        counts = tuple(element_count_of(memref_type(p)) for p in buffers[1:])
        layouts.append((bucket.rows, bucket.column, counts, buffers[0].type))
        totals.append(element_count_of(memref_type(buffers[0])))

    def build() -> gpu.FuncOp:
        hints: list[str] = []
        for g, (_, _, counts, _) in enumerate(layouts):
            suffix = f"_{g}" if len(layouts) > 1 else ""
            hints += [
                f"flat{suffix}",
                *(f"piece{k}{suffix}" for k in range(len(counts))),
            ]
        specs = [("n", index), *((h, a.type) for h, a in zip(hints, args))]
        kernel, b = kernels.kernel(name, specs)
        params = list(kernel.body.block.args[1:])
        for (rows, column, counts, _), total in zip(layouts, totals):
            flat, pieces = params[0], params[1 : 1 + len(counts)]
            params = params[1 + len(counts) :]
            row = total // rows
            starts = [column + c // rows for c in accumulate(counts, initial=0)]
            for piece, count, start in zip(pieces, counts, starts):
                loop, i = grid_stride_loop(b, index_constant(b, count))
                position = i
                if rows > 1:
                    digits = Indexer(loop, i, (rows, count // rows))
                    position = linear(
                        loop, [digits.digit(0), digits.digit(1)], (rows, row)
                    )
                offset = index_constant(loop, start)
                at = loop.insert(arith.AddiOp(position, offset)).result
                source, dest, frm, to = (
                    (piece, flat, i, at) if pack else (flat, piece, at, i)
                )
                value = loop.insert(memref.LoadOp.get(source, [frm])).res
                loop.insert(memref.StoreOp.get(value, dest, [to]))
        return kernel

    key = ("bucket", pack, tuple(layouts))
    kernel = kernels.cached(key, build)
    call = launch(host, kernels, kernel, max(totals), args, threads)
    # What it moves: its pieces, read and written (not the whole flat
    # buffers it is passed, of which it may copy a part).
    moved = 2 * sum(
        sum(counts) * element_info(memref_element(flat_type)).bytes
        for _, _, counts, flat_type in layouts
    )
    call[-1].attributes[WORK_ATTR] = DenseArrayBase.from_list(i64, [0, moved])
    return [*views, *call]


# ============================================================================
# Reductions
# ============================================================================


def reduce_kernel(
    site: KernelSite,
    source: SSAValue,
    dest: SSAValue,
    shape: Sequence[int],
    dims: Sequence[int],
    kind: str,
    *,
    square: bool = False,
    root: bool = False,
) -> list[Operation]:
    """Host ops launching a reduction of a buffer of `shape` over `dims`
    (`kind`: sum, max, min) into `dest`, accumulating in the compute type (f32
    for halves) and rounding once; `square` sums squares and `root` takes the
    square root at the end (a norm). When each output reduces at least a
    block's worth of elements, a block computes each output (its threads
    stride over the elements, then `block_reduce`); otherwise a thread does
    (docs/gpu/device.md, "Reductions")."""
    host, kernels, threads, name = site
    kept = [d for d in range(len(shape)) if d not in dims]
    kept_shape = tuple(shape[d] for d in kept)
    reduced_shape = tuple(shape[d] for d in dims)
    count = math.prod(reduced_shape)
    by_block = count >= threads
    trailing = list(dims) == list(range(len(kept), len(shape)))
    views, (src, dst) = flat_args(host, [source, dest])
    element_type = memref_element(src.type)
    ctype = compute_type(element_type)
    kernel, b = kernels.kernel(
        name, [("n", index), ("src", src.type), ("dst", dst.type)]
    )
    n, src_arg, dst_arg = kernel.body.block.args

    def accumulate(loop: Builder, o: SSAValue, start: SSAValue, step: SSAValue):
        """Output `o`'s reduced elements `start, start+step, ...` combined."""
        if trailing:  # output o reduces the contiguous run [o*count, o*count+count)
            base = loop.insert(arith.MuliOp(o, index_constant(loop, count))).result
        else:
            outer = Indexer(loop, o, kept_shape)
            base_digits: list[SSAValue | int] = [0] * len(shape)
            for position, d in enumerate(kept):
                base_digits[d] = outer.digit(position)
            base = linear(loop, base_digits, shape)
        init = constant(loop, reduce_identity(kind, ctype), ctype)
        inner_block = Block(arg_types=[index, ctype])
        j, acc = inner_block.args
        j.name_hint, acc.name_hint = "j", "acc"
        ib = Builder(InsertPoint.at_end(inner_block))
        offset: SSAValue = j
        if not trailing:
            inner = Indexer(ib, j, reduced_shape)
            offset_digits: list[SSAValue | int] = [0] * len(shape)
            for position, d in enumerate(dims):
                offset_digits[d] = inner.digit(position)
            offset = linear(ib, offset_digits, shape)
        at = ib.insert(arith.AddiOp(base, offset)).result
        x = to_compute(ib, load(ib, src_arg, [at] if shape else []))
        if square:
            x = ib.insert(arith.MulfOp(x, x)).result
        ib.insert(scf.YieldOp(combine(ib, kind, acc, x)))
        end = index_constant(loop, count)
        reduction = loop.insert(scf.ForOp(start, end, step, [init], inner_block))
        return reduction.results[0]

    def finish(b: Builder, o: SSAValue, total: SSAValue) -> None:
        if root:
            total = b.insert(mathd.SqrtOp(total)).result
        total = from_compute(b, total, element_type)
        store(b, total, dst_arg, [o] if memref_shape(dst.type) else [])

    if by_block:
        shared = kernel.add_workgroup_buffer(ctype, threads)
        shared.name_hint = "partials"
        loop, o = block_stride_loop(b, n)
        tid = loop.insert(gpu.ThreadIdOp(X)).result
        bdim = loop.insert(gpu.BlockDimOp(X)).result
        partial = accumulate(loop, o, tid, bdim)
        total = block_reduce(loop, kind, partial, shared, threads, tid, bdim)
        first = loop.insert(arith.CmpiOp(tid, index_constant(loop, 0), "eq")).result
        finish(if_then(loop, first), o, total)
    else:
        loop, o = grid_stride_loop(b, n)
        zero, one = index_constant(loop, 0), index_constant(loop, 1)
        finish(loop, o, accumulate(loop, o, zero, one))
    outputs = max(1, math.prod(kept_shape))
    return [
        *views,
        *launch(
            host, kernels, kernel, outputs, [src, dst], threads, block_per_item=by_block
        ),
    ]


def matmul_kernel(
    site: KernelSite,
    a: SSAValue,
    b: SSAValue,
    c: SSAValue,
) -> list[Operation]:
    """Host ops launching `c[..., M] = a[..., K] @ b[K, M]` (or, batched,
    `c[G, ..., M] = a[G, ..., K] @ b[G, K, M]` group by group) for integer
    element types, which cuBLAS has no GEMM for: a thread per output element
    sums its K products, wrapping on overflow as the interpreter's integers
    do. (Floats go to cuBLAS: `coco_gpu.gemm`.)"""
    host, kernels, threads, name = site
    *groups, k, cols = memref_shape(b.type)
    rows = element_count_of(memref_type(a)) // max(1, k)  # over all groups
    views, (a_flat, b_flat, c_flat) = flat_args(host, [a, b, c])
    kernel, body = kernels.kernel(
        name,
        [("n", index), ("a", a_flat.type), ("b", b_flat.type), ("c", c_flat.type)],
    )
    n, a_arg, b_arg, c_arg = kernel.body.block.args
    loop, i = grid_stride_loop(body, n)
    row, col = (Indexer(loop, i, (rows, cols)).digit(d) for d in range(2))
    row_start = loop.insert(arith.MuliOp(row, index_constant(loop, k))).result
    if groups:  # row's group picks its matrix of b
        per_group = index_constant(loop, rows // groups[0])
        group = loop.insert(arith.DivUIOp(row, per_group)).result
        b_start = loop.insert(
            arith.MuliOp(group, index_constant(loop, k * cols))
        ).result
    else:
        b_start = index_constant(loop, 0)
    element_type = memref_element(c_flat.type)

    def a_at(pb: Builder, kk: SSAValue) -> SSAValue:
        return binary(pb, arith.AddiOp, row_start, kk)

    def b_at(pb: Builder, kk: SSAValue) -> SSAValue:
        return binary(pb, arith.AddiOp, b_start, linear(pb, [kk, col], (k, cols)))

    zero, one = index_constant(loop, 0), index_constant(loop, 1)
    bounds = (zero, index_constant(loop, k), one)
    initial = constant(loop, 0, element_type)
    total = sum_of_products(loop, bounds, initial, (a_arg, a_at), (b_arg, b_at))
    store(loop, total, c_arg, [i])
    return [
        *views,
        *launch(host, kernels, kernel, rows * cols, [a_flat, b_flat, c_flat], threads),
    ]


Operand = tuple[SSAValue, Callable[[Builder, SSAValue], SSAValue]]
"""A buffer a loop reads, and where step `k` reads it: `at(b, k)`."""


def sum_of_products(
    b: Builder,
    bounds: tuple[SSAValue, SSAValue, SSAValue],
    initial: SSAValue,
    x: Operand,
    w: Operand,
    x_map: Callable[[Builder, SSAValue], SSAValue] | None = None,
) -> SSAValue:
    """`initial + sum_k f(x[at_x(k)]) * w[at_w(k)]` for `k` over `bounds` (an
    `scf.for`'s start, end and step), in `initial`'s type: the compute type
    of the elements (f32 for halves; integers wrap); `f` is `x_map` (on an
    element as loaded, e.g. a tile kernel's prologue), else the identity.
    The dot product of a row and a column in `matmul_kernel` and in the tile
    kernels."""
    acc_type = initial.type
    products = Block(arg_types=[index, acc_type])
    k, acc = products.args
    k.name_hint, acc.name_hint = "k", "acc"
    inner = Builder(InsertPoint.at_end(products))
    (xs, x_at), (ws, w_at) = x, w
    loaded = load(inner, xs, [x_at(inner, k)])
    a = to_compute(inner, x_map(inner, loaded) if x_map else loaded)
    bv = to_compute(inner, load(inner, ws, [w_at(inner, k)]))
    multiply = arith.MuliOp if isinstance(acc_type, IntegerType) else arith.MulfOp
    product = binary(inner, multiply, a, bv)
    inner.insert(scf.YieldOp(combine(inner, "sum", acc, product)))
    return b.insert(scf.ForOp(*bounds, [initial], products)).results[0]


def block_stride_loop(b: Builder, n: SSAValue) -> tuple[Builder, SSAValue]:
    """`scf.for %o = bid to %n step gdim`: every item below `n` once, a
    block per item, for any grid size. The loop is uniform in a block, so its
    body may hold barriers."""
    bid = b.insert(gpu.BlockIdOp(X)).result
    gdim = b.insert(gpu.GridDimOp(X)).result
    return for_loop(b, bid, n, gdim, "o")


def block_reduce(
    b: Builder,
    kind: str,
    value: SSAValue,
    shared: SSAValue,
    threads: int,
    tid: SSAValue,
    bdim: SSAValue,
) -> SSAValue:
    """Every thread's `value` combined (`kind`) across its block, through
    `shared` (a workgroup buffer of `threads` elements of its type, the most
    threads a block may have): a tree of halving steps, each followed by a
    barrier, in which thread `t` takes the partial of thread `t + step` if
    the block has one; every thread gets the total. All threads of the block
    must reach it; it leaves `shared` free for reuse when it returns. `tid`
    and `bdim` are the thread's index and the block's size."""
    store(b, value, shared, [tid])
    b.insert(gpu.BarrierOp())
    step = 1 << ((threads - 1).bit_length() - 1) if threads > 1 else 0
    while step >= 1:
        partner = b.insert(arith.AddiOp(tid, index_constant(b, step))).result
        below = b.insert(arith.CmpiOp(tid, index_constant(b, step), "ult")).result
        exists = b.insert(arith.CmpiOp(partner, bdim, "ult")).result
        takes = b.insert(arith.AndIOp(below, exists)).result
        then = if_then(b, takes)
        mine, theirs = load(then, shared, [tid]), load(then, shared, [partner])
        store(then, combine(then, kind, mine, theirs), shared, [tid])
        b.insert(gpu.BarrierOp())
        step //= 2
    total = load(b, shared, [index_constant(b, 0)])
    # Every thread reads the total before any may write `shared` again.
    b.insert(gpu.BarrierOp())
    return total


def memref_shape(t: Attribute) -> tuple[int, ...]:
    assert isinstance(t, MemRefType)
    return tuple(t.get_shape())


def reduce_identity(kind: str, t: Attribute) -> float | int:
    """The value `kind` (sum, max, min) of no elements of type `t`."""
    if kind == "sum":
        return 0
    if isinstance(t, IntegerType):
        return I32_MIN if kind == "max" else I32_MAX
    return -math.inf if kind == "max" else math.inf


def combine(b: Builder, kind: str, acc: SSAValue, x: SSAValue) -> SSAValue:
    """`acc` and `x` combined by the reduction `kind` (sum, max, min);
    max and min of floats propagate NaN, as the interpreter's do."""
    integer = isinstance(acc.type, IntegerType)
    ops: dict[str, type[Operation]] = (
        {"sum": arith.AddiOp, "max": arith.MaxSIOp, "min": arith.MinSIOp}
        if integer
        else {"sum": arith.AddfOp, "max": arith.MaximumfOp, "min": arith.MinimumfOp}
    )
    return b.insert(ops[kind](acc, x)).results[0]  # type: ignore[call-arg]
