"""The device level printed as CUDA C (docs/gpu/cuda.md), in the shape of xDSL's
WGSL and CSL printers: a `BasePrinter` with one `singledispatchmethod` case per
op (or family of ops spelled alike) and a value → C expression table.

Expressions are folded: the value of a pure op (arith, math, thread ids,
pointer views) used once, in the block that defines it, is not named — its
expression is written where it is used; so is a `memref.load` used once in its
block when nothing between the load and its use may write memory. Constants are
always written in place. Every other value is a `const T name = ...;` named
after its SSA name hint (sanitized, unique in its function). `scf.for`
iter_args and `scf.if` results are mutable locals assigned by `scf.yield`.

An op the printer does not know is a CocoError naming the op and its location.
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import singledispatchmethod
from io import StringIO

import numpy
from xdsl.dialects import arith, cf, func, gpu, memref, scf, vector
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    DenseArrayBase,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    SymbolRefAttr,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.utils.base_printer import BasePrinter

from coconet_ir.analysis.channels import stage_indices
from coconet_ir.analysis.device_traffic import ranks_per_node
from coconet_ir.backend.cuda.c_expr import Expr, Scope, sanitize
from coconet_ir.backend.cuda.ctypes import (
    NCCL_OPS,
    UnsupportedType,
    c_type,
    cublas_type,
    element_bytes,
    from_float,
    is_float,
    is_half,
    is_shared,
    nccl_type,
    scalar_type,
    to_float,
    unsigned_type,
)
from coconet_ir.backend.cuda.vectorize import print_vectorized, vector_plan
from coconet_ir.diagnostics import CocoError
from coconet_ir.dialects import coco_gpu
from coconet_ir.dialects.coco.attributes import world_size
from coconet_ir.dialects.gpu import is_kernel, launch_parts

VIEW_OPS = (
    memref.SubviewOp,
    memref.CollapseShapeOp,
    memref.ExpandShapeOp,
    memref.CastOp,
    memref.ReinterpretCastOp,
    coco_gpu.ViewOp,
)


def kernel_name(symbol: SymbolRefAttr) -> str:
    """The C name of the kernel `@kernels::@k` names (a launch, a resident
    grid size)."""
    return sanitize(symbol.nested_references.data[-1].data, "kernel")


def memref_type(value: SSAValue) -> MemRefType:
    assert isinstance(value.type, MemRefType)
    return value.type


def element_count(t: MemRefType) -> int:
    return math.prod(t.get_shape())


def root_memref(value: SSAValue) -> SSAValue:
    """The buffer a view (subview, collapse, ...) of a memref points into."""
    while isinstance(value.owner, VIEW_OPS):
        value = value.owner.operands[0]
    return value


def alias_key(value: SSAValue) -> object:
    """What a buffer may overlap with: its root buffer, or the symmetric
    workspace as a whole."""
    root = root_memref(value)
    if isinstance(root.owner, coco_gpu.SymmetricBufferOp):
        return coco_gpu.SymmetricBufferOp
    return root


def is_written(value: SSAValue) -> bool:
    """Whether a kernel stores into `value` or any view of it."""
    for use in value.uses:
        user = use.operation
        if isinstance(user, memref.StoreOp) and use.index == 1:
            return True
        if isinstance(user, memref.CopyOp) and use.index == 1:
            return True
        if isinstance(user, VIEW_OPS) and is_written(user.results[0]):
            return True
        if isinstance(user, coco_gpu.PeerViewOp) and is_written(user.result):
            return True
        if isinstance(user, memref.AtomicRMWOp):
            return True
    return False


def float_literal(value: float, t: Attribute) -> Expr:
    """A float constant of type `t`."""
    is_double = c_type(t) == "double"
    suffix = "" if is_double else "f"
    if math.isnan(value):
        text = "NAN"
    elif math.isinf(value):
        text = "INFINITY" if value > 0 else "-INFINITY"
    else:
        text = repr(value) if is_double else str(numpy.float32(value))
        if "e" not in text and "." not in text:
            text += ".0"
        text += suffix
    if is_double and text in ("NAN", "INFINITY", "-INFINITY"):
        text = f"(double){text}"
    if is_half(t):
        return Expr(f"{from_float(t)}({text})", True)
    return Expr(text, not text.startswith("-"))


def int_literal(value: int, t: Attribute) -> Expr:
    if isinstance(t, IntegerType) and t.width.data == 1:
        return Expr("true" if value & 1 else "false", True)
    ctype = scalar_type(t)
    if ctype == "int64_t":
        if value == -(2**63):
            return Expr("INT64_MIN", True)
        return (
            Expr(f"INT64_C({value})", True)
            if abs(value) >= 2**31
            else (Expr(str(value), value >= 0))
        )
    if isinstance(t, IntegerType):
        width = t.width.data
        value = (value + 2 ** (width - 1)) % 2**width - 2 ** (width - 1)
        if value == -(2 ** (width - 1)):
            return Expr(f"INT{width}_MIN", True)
    return Expr(str(value), value >= 0)


BINARY_FLOAT = {
    arith.AddfOp: "+",
    arith.SubfOp: "-",
    arith.MulfOp: "*",
    arith.DivfOp: "/",
}
"""A float op → its C operator (halves computed in float)."""
BINARY_INT = {
    arith.AddiOp: "+",
    arith.SubiOp: "-",
    arith.MuliOp: "*",
    arith.AndIOp: "&",
    arith.OrIOp: "|",
    arith.XOrIOp: "^",
    arith.DivSIOp: "/",
    arith.RemSIOp: "%",
    arith.ShRSIOp: ">>",
    arith.DivUIOp: "/",
    arith.RemUIOp: "%",
    arith.ShLIOp: "<<",
    arith.ShRUIOp: ">>",
}
"""An integer op → its C operator."""
WRAPPING = (arith.AddiOp, arith.SubiOp, arith.MuliOp)
"""Integer ops computed in the unsigned type (two's-complement wrap, as MLIR
means them; signed overflow is undefined in C) unless on index."""
UNSIGNED = (arith.DivUIOp, arith.RemUIOp, arith.ShLIOp, arith.ShRUIOp)
"""Integer ops on their operands read as unsigned (the others take them as
they are)."""
MIN_MAX = {
    arith.MaxSIOp: (">", False),
    arith.MinSIOp: ("<", False),
    arith.MaxUIOp: (">", True),
    arith.MinUIOp: ("<", True),
}
FLOAT_MIN_MAX = {
    arith.MaxnumfOp: "fmax",
    arith.MinnumfOp: "fmin",
}
"""`maxnumf`/`minnumf` ignore a NaN operand, as C's `fmax`/`fmin` do."""
NAN_MIN_MAX = {arith.MaximumfOp: "coco::maximum", arith.MinimumfOp: "coco::minimum"}
"""`maximumf`/`minimumf` propagate NaN (MLIR's semantics, and the
interpreter's numpy `maximum`/`minimum`): a runtime helper."""
MATH_FUNCTIONS = {
    mathd.SqrtOp: "sqrt",
    mathd.RsqrtOp: "rsqrt",
    mathd.ExpOp: "exp",
    mathd.Exp2Op: "exp2",
    mathd.ExpM1Op: "expm1",
    mathd.LogOp: "log",
    mathd.Log2Op: "log2",
    mathd.Log10Op: "log10",
    mathd.Log1pOp: "log1p",
    mathd.TanhOp: "tanh",
    mathd.SinOp: "sin",
    mathd.CosOp: "cos",
    mathd.TanOp: "tan",
    mathd.ErfOp: "erf",
    mathd.AbsFOp: "fabs",
    mathd.FloorOp: "floor",
    mathd.CeilOp: "ceil",
    mathd.RoundOp: "round",
    mathd.TruncOp: "trunc",
    mathd.PowFOp: "pow",
    mathd.FmaOp: "fma",
    mathd.Atan2Op: "atan2",
    mathd.CopySignOp: "copysign",
}
CMPI = {
    "eq": "==",
    "ne": "!=",
    "slt": "<",
    "sle": "<=",
    "sgt": ">",
    "sge": ">=",
    "ult": "<",
    "ule": "<=",
    "ugt": ">",
    "uge": ">=",
}
CMPF_ORDERED = {"oeq": "==", "ogt": ">", "oge": ">=", "olt": "<", "ole": "<="}
CMPF_UNORDERED = {"ugt": "<=", "uge": "<", "ult": ">=", "ule": ">"}
"""`u<p>` is the negation of the ordered opposite comparison."""

PURE_OPS: tuple[type[Operation], ...] = (
    arith.ConstantOp,
    gpu.ThreadIdOp,
    gpu.BlockIdOp,
    gpu.BlockDimOp,
    gpu.GridDimOp,
    coco_gpu.GridBlocksOp,
    coco_gpu.RankOp,
    coco_gpu.PeerViewOp,
    coco_gpu.SymmetricBufferOp,
    coco_gpu.PeersOp,
    vector.ExtractOp,
    vector.InsertOp,
    vector.BroadcastOp,
    memref.ExtractAlignedPointerAsIndexOp,
    *VIEW_OPS,
)
"""Ops (besides arith and math) whose value may be written where it is used."""


def is_pure(op: Operation) -> bool:
    return isinstance(op, PURE_OPS) or op.name.split(".")[0] in ("arith", "math")


MAX_EVENTS = 64
"""`COCO_MAX_EVENTS` of coco_runtime.h: the events a context holds."""


@dataclass
class EventSlots:
    """The context events one host function records into, reused: host code
    is straight-line, and a stream's wait takes the record made before it
    (CUDA's `cudaStreamWaitEvent`, as the emulation does), so once the last
    wait on a recorded event has been issued its slot may be recorded again.
    Slots are numbered from `base`; functions get disjoint ranges (stages of
    a pipeline may run at once on one context)."""

    base: int
    free: list[int] = field(default_factory=list[int])
    used: int = 0
    """Slots handed out so far (the function's range is `base .. base+used`)."""
    waits_left: dict[SSAValue, int] = field(default_factory=dict[SSAValue, int])
    slot_of: dict[SSAValue, int] = field(default_factory=dict[SSAValue, int])

    def record(self, event: SSAValue) -> int:
        """The context index `event` is recorded into."""
        if self.free:
            slot = heapq.heappop(self.free)
        else:
            slot = self.used
            self.used += 1
        waits = sum(isinstance(u.operation, coco_gpu.WaitEventOp) for u in event.uses)
        self.slot_of[event] = slot
        self.waits_left[event] = waits
        if waits == 0:
            heapq.heappush(self.free, slot)
        return self.base + slot

    def waited(self, event: SSAValue) -> None:
        """One wait on `event` issued; after its last, the slot is free."""
        self.waits_left[event] -= 1
        if self.waits_left[event] == 0:
            heapq.heappush(self.free, self.slot_of[event])


@dataclass(eq=False, repr=False)
class CudaPrinter(BasePrinter):
    """Prints one device-level module as a `.cu` file."""

    main: bool = False
    exprs: dict[SSAValue, Expr] = field(default_factory=dict[SSAValue, Expr])
    scope: Scope = field(default_factory=Scope)
    in_kernel: bool = False
    event_count: int = 0
    """Context events the module uses (`coco_event_count()`)."""
    events: EventSlots = field(default_factory=lambda: EventSlots(0))
    """The current function's event slots."""
    stages: dict[str, int] = field(default_factory=dict[str, int])
    block_threads: dict[str, int] = field(default_factory=dict[str, int])
    """Kernel name → the block size every launch of it uses (when known)."""
    aliased: dict[str, set[int]] = field(default_factory=dict[str, set[int]])
    """Kernel name → parameters some launch passes a buffer another parameter
    also reaches (they lose `__restrict__`)."""

    # ------------------------------------------------------------------ text

    def line(self, text: str) -> None:
        """A statement on a line of its own, at the current indentation."""
        self._print_new_line()
        self.print_string(text)

    def blank(self) -> None:
        self._print_new_line(indent=0)

    # ---------------------------------------------------------------- values

    def expr(self, value: SSAValue) -> Expr:
        found = self.exprs.get(value)
        if found is None:
            owner = value.owner
            raise CocoError(
                "the CUDA target found a value used before it was printed",
                owner if isinstance(owner, Operation) else None,
            )
        return found

    def operand(self, value: SSAValue) -> str:
        return self.expr(value).operand()

    def text(self, value: SSAValue) -> str:
        return self.expr(value).text

    def name_value(self, value: SSAValue, fallback: str = "v") -> str:
        name = self.scope.fresh(value.name_hint, fallback)
        self.exprs[value] = Expr(name, True)
        return name

    def foldable(self, value: SSAValue) -> bool:
        """A pure value used once in its own block is written at its use."""
        owner = value.owner
        if isinstance(owner, arith.ConstantOp):
            return True
        use = value.get_unique_use()
        if not isinstance(owner, Operation) or use is None:
            return False
        if use.operation.parent_block() is not owner.parent_block():
            return False
        if is_pure(owner):
            return True
        if isinstance(owner, memref.LoadOp | vector.LoadOp):
            return self.nothing_writes_between(owner, use.operation)
        return False

    @staticmethod
    def nothing_writes_between(first: Operation, last: Operation) -> bool:
        op = first.next_op
        while op is not None and op is not last:
            if not (is_pure(op) or isinstance(op, memref.LoadOp | vector.LoadOp)):
                return False
            op = op.next_op
        return True

    def bind(self, value: SSAValue, expr: Expr | str, *, pure: bool = True) -> None:
        """Give `value` its expression: folded, or a named `const` local."""
        if isinstance(expr, str):
            expr = Expr(expr)
        if self.foldable(value):
            self.exprs[value] = expr
            return
        if pure and not value.uses:
            return
        if not value.uses:
            self.line(f"(void){expr.operand()};")
            return
        owner = value.owner
        fallback = owner.name.split(".")[-1] if isinstance(owner, Operation) else "v"
        name = self.name_value(value, fallback)
        if isinstance(value.type, MemRefType):
            self.line(f"auto *const {name} = {expr.text};")
        else:
            self.line(f"const {self.ctype(value.type, value)} {name} = {expr.text};")

    def ctype(self, t: Attribute, at: SSAValue | Operation | None = None) -> str:
        try:
            return c_type(t)
        except UnsupportedType as err:
            op = at.owner if isinstance(at, SSAValue) else at
            hint = (
                " (the CUDA target prints the device level: run "
                "convert-coco-to-gpu first)"
                if t.name.startswith("coco.")
                else ""
            )
            raise CocoError(
                f"the CUDA target cannot print this: {err}{hint}",
                op if isinstance(op, Operation) else None,
            ) from None

    # ---------------------------------------------------------------- blocks

    def print_block(self, block: Block) -> None:
        for op in block.ops:
            self.print(op)

    def print_body(self, block: Block, shared: Sequence[BlockArgument] = ()) -> None:
        """`{ block }`, declaring first the block's `shared` buffers (a
        kernel's workgroup attributions) with COCO_SHARED."""
        self.print_string("{")
        with self.indented():
            for buffer in shared:
                assert isinstance(buffer.type, MemRefType)
                element = self.ctype(buffer.type.element_type, buffer)
                name = self.name_value(buffer, f"shared{buffer.index}")
                count = math.prod(buffer.type.get_shape())
                self.line(f"COCO_SHARED({element}, {name}, {count});")
            self.print_block(block)
        self.line("}")

    # ------------------------------------------------------------------- ops

    @singledispatchmethod
    def print(self, op: Operation) -> None:
        if op.name.startswith("coco."):
            raise CocoError(
                "is tensor-level: the CUDA target prints the device level "
                "(run convert-coco-to-gpu first)",
                op,
            )
        raise CocoError(
            f"the CUDA target does not know '{op.name}' "
            f"({'in a kernel' if self.in_kernel else 'on the host'})",
            op,
        )

    @print.register
    def _(self, op: ModuleOp) -> None:
        self.prepare(op)
        size = world_size(op)
        self.print_string("// Generated by coconet-ir's cuda target (docs/gpu/cuda.md)")
        if self.main:
            self.line("#define COCO_STANDALONE_MAIN 1")
        self.line('#include "coco_runtime.h"')
        for inner in op.ops:
            if isinstance(inner, gpu.ModuleOp):
                self.print(inner)
        host = [f for f in op.ops if isinstance(f, func.FuncOp)]
        for inner in op.ops:
            if not isinstance(inner, gpu.ModuleOp | func.FuncOp):
                self.print(inner)
        self.blank()
        self.line(
            f'extern "C" size_t coco_symmetric_bytes(void) {{ return '
            f"{symmetric_bytes(op)}; }}"
        )
        self.line(f'extern "C" int coco_world_size(void) {{ return {size or 1}; }}')
        self.line(
            f'extern "C" int coco_ranks_per_node(void) {{ return '
            f"{ranks_per_node(op) or size or 1}; }}"
        )
        self.line(
            f'extern "C" size_t coco_signal_slots(void) {{ return '
            f"{signal_slots(op)}; }}"
        )
        for f in host:
            if f.is_declaration:
                continue
            self.blank()
            self.print(f)
        if self.event_count > MAX_EVENTS:
            raise CocoError(
                f"the module records {self.event_count} events; the context has "
                f"{MAX_EVENTS} (COCO_MAX_EVENTS)",
                op,
            )
        self.blank()
        self.line(
            f'extern "C" int coco_event_count(void) {{ return {self.event_count}; }}'
        )
        if self.main:
            self.print_benchmark_main([f for f in host if not f.is_declaration])
        self._print_new_line(indent=0)

    def print_benchmark_main(self, functions: Sequence[func.FuncOp]) -> None:
        """The standalone benchmark (docs/gpu/running.md): a table of the entries
        (stage, arguments, the bytes of their collectives) and a `main` that
        runs them through `coco_gpu_bench.h` (which includes the GPU
        harness); under nvcc only (the emulation has its own driver)."""
        self.blank()
        self.line("#ifdef __CUDACC__")
        self.line('#include "coco_gpu_bench.h"')
        rows: list[str] = []
        for f in functions:
            name = f.sym_name.data
            args: list[str] = []
            casts: list[str] = []
            bounds = index_bounds(f)
            for k, arg in enumerate(f.body.block.args):
                if not isinstance(arg.type, MemRefType):
                    raise CocoError(
                        f"the benchmark main passes buffers only; argument {k} of "
                        f"'{name}' is a {arg.type}",
                        f,
                    )
                element = arg.type.element_type
                kind = bench_kind(element)
                if kind is None:
                    raise CocoError(
                        f"the benchmark main cannot fill argument {k} of '{name}' "
                        f"(element type {element})",
                        f,
                    )
                elements = math.prod(arg.type.get_shape())
                args.append(f"{{{kind}, {elements}ull, {bounds.get(k, 0)}ull}}")
                casts.append(f"({self.ctype(arg.type, f)})a[{k}]")
            table = f"coco_bench_args_{name}"
            if args:
                self.line(
                    f"static const coco_bench_arg {table}[] = {{{', '.join(args)}}};"
                )
            call = f"coco_bench_call_{name}"
            self.line(f"static int {call}(coco_context *ctx, void *const *a) {{")
            if not args:
                self.line("  (void)a;")
            self.line(f"  return coco_{name}({', '.join(['ctx', *casts])});")
            self.line("}")
            message, bus = collective_bytes(f)
            rows.append(
                f'{{"{name}", {self.stages.get(name, 0)}, {len(args)}, '
                f"{table if args else 'nullptr'}, {call}, {message}ull, {bus}ull}}"
            )
        self.line("static const coco_bench_entry coco_bench_entries[] = {")
        for row in rows:
            self.line(f"  {row},")
        self.line("};")
        self.line("int main(int argc, char **argv) {")
        self.line(
            f"  return coco_bench::run(argc, argv, coco_bench_entries, {len(rows)});"
        )
        self.line("}")
        self.line("#endif  // __CUDACC__")

    def prepare(self, module: ModuleOp) -> None:
        """What the printing of one function needs to know about others:
        each kernel's block size and aliased parameters, each host
        function's pipeline stage."""
        functions = [f.sym_name.data for f in module.ops if isinstance(f, func.FuncOp)]
        edges: list[tuple[str, str]] = []
        sizes: dict[str, set[int | None]] = {}
        for f in module.ops:
            if not isinstance(f, func.FuncOp):
                continue
            for op in f.walk():
                if isinstance(op, coco_gpu.NcclSendOp | coco_gpu.NcclRecvOp):
                    edges.append((f.sym_name.data, op.stage.root_reference.data))
                if isinstance(op, gpu.LaunchFuncOp):
                    kernel = op.kernel.nested_references.data[-1].data
                    sizes.setdefault(kernel, set()).add(launch_threads(op))
                    self.note_aliases(kernel, launch_parts(op).args)
        self.stages = stage_indices(functions, edges)
        for kernel, found in sizes.items():
            if len(found) == 1 and None not in found:
                (threads,) = found
                assert threads is not None
                self.block_threads[kernel] = threads

    def note_aliases(self, kernel: str, args: Sequence[SSAValue]) -> None:
        """Which parameters of `kernel` this launch passes buffers that may
        overlap another parameter's: views of one buffer, or any two views of
        the symmetric workspace."""
        roots = [alias_key(a) if isinstance(a.type, MemRefType) else None for a in args]
        for i, r in enumerate(roots):
            if r is not None and any(
                j != i and other == r for j, other in enumerate(roots)
            ):
                self.aliased.setdefault(kernel, set()).add(i)

    @print.register
    def _(self, op: gpu.ModuleOp) -> None:
        for inner in op.body.ops:
            self.blank()
            self.print(inner)

    @print.register
    def _(self, op: gpu.FuncOp) -> None:
        name = sanitize(op.sym_name.data, "kernel")
        self.scope = Scope()
        self.in_kernel = True
        block = op.body.block
        aliased = self.aliased.get(op.sym_name.data, set())
        inputs = len(op.function_type.inputs.data)
        params: list[str] = []
        for arg in block.args[:inputs]:
            pname = self.name_value(arg, f"arg{arg.index}")
            if isinstance(arg.type, MemRefType):
                element = self.ctype(arg.type.element_type, op)
                const = "" if is_written(arg) else "const "
                restrict = "" if arg.index in aliased else "__restrict__ "
                if is_symmetric(arg):
                    # Peers write it while the kernel runs: no read-only,
                    # non-coherent loads (ld.global.nc) of it.
                    const = restrict = ""
                params.append(f"{const}{element} *{restrict}{pname}")
            else:
                params.append(f"{self.ctype(arg.type, op)} {pname}")
        if is_kernel(op):
            threads = self.known_block_size(op)
            bounds = (
                f"__launch_bounds__({threads}, {min_blocks(threads)}) "
                if threads
                else ""
            )
            head = f'extern "C" __global__ void {bounds}{name}'
        else:
            outputs = op.function_type.outputs.data
            result = self.ctype(outputs[0], op) if outputs else "void"
            head = f"static __device__ __forceinline__ {result} {name}"
        self.line(f"{head}({', '.join(params)}) ")
        plan = vector_plan(op) if is_kernel(op) else None
        if plan is not None:
            print_vectorized(self, op, plan)
        else:
            self.print_body(block, block.args[inputs:])
        self.in_kernel = False

    def known_block_size(self, op: gpu.FuncOp) -> int | None:
        if op.known_block_size is not None:
            return math.prod(op.known_block_size.get_values())
        return self.block_threads.get(op.sym_name.data)

    @print.register
    def _(self, op: gpu.ReturnOp) -> None:
        if op.args:
            self.line(f"return {self.text(op.args[0])};")
        elif op.next_op is not None or op.parent_op() is not op.parent_op():
            self.line("return;")

    @print.register(gpu.ThreadIdOp)
    @print.register(gpu.BlockIdOp)
    @print.register(gpu.BlockDimOp)
    @print.register(gpu.GridDimOp)
    def _(self, op: gpu.ThreadIdOp) -> None:
        builtin = {
            "gpu.thread_id": "threadIdx",
            "gpu.block_id": "blockIdx",
            "gpu.block_dim": "blockDim",
            "gpu.grid_dim": "gridDim",
        }[op.name]
        dim = str(op.dimension.data)
        self.bind(op.results[0], Expr(f"(int64_t){builtin}.{dim}", True))

    @print.register
    def _(self, op: gpu.BarrierOp) -> None:
        self.line("__syncthreads();")

    # ---------------------------------------------------------------- arith

    @print.register
    def _(self, op: arith.ConstantOp) -> None:
        value, t = op.value, op.result.type
        if isinstance(value, FloatAttr):
            self.bind(op.result, float_literal(value.value.data, t))
        elif isinstance(value, IntegerAttr):
            self.bind(op.result, int_literal(value.value.data, t))
        else:
            raise CocoError("the CUDA target prints only scalar constants", op)

    def float_operands(self, op: Operation, *, call: bool = False) -> list[str]:
        """The operands of a float op, widened to float if they are halves;
        parenthesized as operands of an operator unless `call` (arguments)."""
        t = op.operands[0].type
        if is_half(t):
            return [f"{to_float(t)}({self.text(v)})" for v in op.operands]
        if call:
            return [self.text(v) for v in op.operands]
        return [self.operand(v) for v in op.operands]

    def float_result(self, op: Operation, expr: str, atomic: bool = False) -> None:
        t = op.results[0].type
        if is_half(t):
            self.bind(op.results[0], Expr(f"{from_float(t)}({expr})", True))
        else:
            self.bind(op.results[0], Expr(expr, atomic))

    def print_binary_float(self, op: Operation) -> None:
        lhs, rhs = self.float_operands(op)
        self.float_result(op, f"{lhs} {BINARY_FLOAT[type(op)]} {rhs}")

    @print.register
    def _(self, op: arith.NegfOp) -> None:
        (x,) = self.float_operands(op)
        self.float_result(op, f"-{x}")

    def print_float_min_max(self, op: Operation) -> None:
        lhs, rhs = self.float_operands(op, call=True)
        function = NAN_MIN_MAX.get(type(op)) or self.math_name(
            FLOAT_MIN_MAX[type(op)], op
        )
        self.float_result(op, f"{function}({lhs}, {rhs})", True)

    def math_name(self, base: str, op: Operation) -> str:
        """`sqrtf` for float and the halves (computed in float), `sqrt` for
        double."""
        return base if c_type(op.operands[0].type) == "double" else f"{base}f"

    def print_binary_int(self, op: Operation) -> None:
        t = op.results[0].type
        lhs, rhs = (self.operand(v) for v in op.operands)
        symbol = BINARY_INT[type(op)]
        unsigned = isinstance(op, UNSIGNED)
        if unsigned or (isinstance(op, WRAPPING) and not isinstance(t, IndexType)):
            u = unsigned_type(t)
            expr = f"({scalar_type(t)})(({u}){lhs} {symbol} ({u}){rhs})"
            self.bind(op.results[0], Expr(expr, True))
        elif c_type(t) == "bool" and symbol in "&|^":
            self.bind(op.results[0], f"(bool)({lhs} {symbol} {rhs})")
        else:
            self.bind(op.results[0], f"{lhs} {symbol} {rhs}")

    def print_int_min_max(self, op: Operation) -> None:
        t = op.results[0].type
        symbol, unsigned = MIN_MAX[type(op)]
        lhs, rhs = (self.operand(v) for v in op.operands)
        if unsigned:
            u = unsigned_type(t)
            test = f"({u}){lhs} {symbol} ({u}){rhs}"
        else:
            test = f"{lhs} {symbol} {rhs}"
        self.bind(op.results[0], f"{test} ? {lhs} : {rhs}")

    @print.register(arith.MulUIExtendedOp)
    @print.register(arith.MulSIExtendedOp)
    def _(self, op: arith.MulUIExtendedOp) -> None:
        t = op.results[0].type
        if not isinstance(t, IntegerType) or t.width.data not in (32, 64):
            raise CocoError("the CUDA target multiplies i32 and i64 only", op)
        signed = isinstance(op, arith.MulSIExtendedOp)
        wide = t.width.data == 64
        st, u = scalar_type(t), unsigned_type(t)
        lhs, rhs = (self.operand(v) for v in op.operands)
        low = f"({st})(({u}){lhs} * ({u}){rhs})"
        if signed:
            high = f"{'__mul64hi' if wide else '__mulhi'}({lhs}, {rhs})"
        else:
            high = (
                f"({st}){'__umul64hi' if wide else '__umulhi'}(({u}){lhs}, ({u}){rhs})"
            )
        self.bind(op.results[0], Expr(low, True))
        self.bind(op.results[1], Expr(high, True))

    @print.register
    def _(self, op: arith.CmpiOp) -> None:
        predicate = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
        lhs, rhs = self.operand(op.lhs), self.operand(op.rhs)
        if predicate.startswith("u"):
            u = unsigned_type(op.lhs.type)
            lhs, rhs = f"({u}){lhs}", f"({u}){rhs}"
        self.bind(op.result, f"{lhs} {CMPI[predicate]} {rhs}")

    @print.register
    def _(self, op: arith.CmpfOp) -> None:
        predicate = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
        a, b = self.float_operands(op)
        if predicate in CMPF_ORDERED:
            expr = f"{a} {CMPF_ORDERED[predicate]} {b}"
        elif predicate in CMPF_UNORDERED:
            expr = f"!({a} {CMPF_UNORDERED[predicate]} {b})"
        else:
            expr = {
                "one": f"{a} < {b} || {a} > {b}",
                "ueq": f"!({a} < {b} || {a} > {b})",
                "une": f"{a} != {b}",
                "ord": f"{a} == {a} && {b} == {b}",
                "uno": f"{a} != {a} || {b} != {b}",
                "true": "true",
                "false": "false",
            }[predicate]
        self.bind(op.result, expr)

    @print.register
    def _(self, op: arith.SelectOp) -> None:
        cond, a, b = (self.operand(v) for v in op.operands)
        self.bind(op.result, f"{cond} ? {a} : {b}")

    @print.register(arith.IndexCastOp)
    @print.register(arith.ExtSIOp)
    @print.register(arith.TruncIOp)
    @print.register(arith.SIToFPOp)
    def _(self, op: arith.IndexCastOp) -> None:
        x = self.operand(op.operands[0])
        if c_type(op.results[0].type) == "bool":
            self.bind(op.results[0], f"(bool)({x} & 1)")
        else:
            self.bind_converted(op, x)

    @print.register(arith.ExtUIOp)
    @print.register(arith.UIToFPOp)
    def _(self, op: arith.ExtUIOp) -> None:
        source = op.operands[0].type
        x = self.operand(op.operands[0])
        if c_type(source) != "bool":
            x = f"({unsigned_type(source)}){x}"
        self.bind_converted(op, x)

    @print.register(arith.FPToSIOp)
    @print.register(arith.FPToUIOp)
    @print.register(arith.ExtFOp)
    @print.register(arith.TruncFOp)
    def _(self, op: arith.FPToSIOp) -> None:
        (x,) = self.float_operands(op)
        if isinstance(op, arith.FPToUIOp):
            x = f"({unsigned_type(op.results[0].type)}){x}"
        self.bind_converted(op, x)

    def bind_converted(self, op: Operation, x: str) -> None:
        """Bind `op`'s result to the operand `x` converted to its type: a C
        cast, or through float for the halves."""
        t = op.results[0].type
        if is_half(t):
            self.bind(op.results[0], Expr(f"{from_float(t)}((float){x})", True))
        else:
            self.bind(op.results[0], Expr(f"({scalar_type(t)}){x}", True))

    @print.register
    def _(self, op: arith.BitcastOp) -> None:
        source, t = op.operands[0].type, op.results[0].type
        x = self.text(op.operands[0])
        spelled = {
            ("float", "int32_t"): "__float_as_int",
            ("int32_t", "float"): "__int_as_float",
            ("double", "int64_t"): "__double_as_longlong",
            ("int64_t", "double"): "__longlong_as_double",
        }.get((c_type(source), c_type(t)))
        if spelled is None:
            raise CocoError(f"the CUDA target cannot bitcast {source} to {t}", op)
        self.bind(op.results[0], Expr(f"{spelled}({x})", True))

    # ----------------------------------------------------------------- math

    def print_math(self, op: Operation) -> None:
        t = op.results[0].type
        if not is_float(t):
            raise CocoError("the CUDA target prints math on floats only", op)
        args = self.float_operands(op, call=True)
        function = self.math_name(MATH_FUNCTIONS[type(op)], op)
        self.float_result(op, f"{function}({', '.join(args)})", True)

    @print.register
    def _(self, op: mathd.AbsIOp) -> None:
        x = self.operand(op.operands[0])
        self.bind(op.results[0], f"{x} < 0 ? -{x} : {x}")

    # --------------------------------------------------------------- memref

    def linear_index(
        self, op: Operation, ref: SSAValue, indices: Sequence[SSAValue]
    ) -> str:
        t = memref_type(ref)
        strides = t.get_strides()
        if strides is None or any(s is None for s in strides):
            raise CocoError("the CUDA target needs static strides", op)
        terms: list[str] = []
        for index, stride in zip(indices, strides):
            if stride == 0:
                continue
            term = (
                self.operand(index)
                if stride == 1
                else f"{self.operand(index)} * {stride}"
            )
            terms.append(term)
        return " + ".join(terms) or "0"

    @print.register
    def _(self, op: memref.LoadOp) -> None:
        self.require_kernel(op)
        index = self.linear_index(op, op.memref, op.indices)
        self.bind(op.res, Expr(f"{self.operand(op.memref)}[{index}]", True), pure=False)

    def require_kernel(self, op: Operation) -> None:
        if not self.in_kernel:
            raise CocoError(
                "the CUDA target reads and writes device memory only in kernels", op
            )

    @print.register
    def _(self, op: memref.StoreOp) -> None:
        self.require_kernel(op)
        index = self.linear_index(op, op.memref, op.indices)
        self.line(f"{self.operand(op.memref)}[{index}] = {self.text(op.value)};")

    @print.register
    def _(self, op: cf.AssertOp) -> None:
        self.require_kernel(op)
        message = json.dumps(op.msg.data)  # a C string literal of the message
        self.line(f"if (!({self.text(op.arg)})) COCO_DEVICE_FAIL({message});")

    # --------------------------------------------------------------- vector

    @print.register
    def _(self, op: vector.LoadOp) -> None:
        self.require_kernel(op)
        index = self.linear_index(op, op.base, op.indices)
        t = self.ctype(op.result.type, op)
        load = f"coco::load_vec<{t.split('<', 1)[1]}({self.operand(op.base)} + {index})"
        self.bind(op.result, Expr(load, True), pure=False)

    @print.register
    def _(self, op: vector.StoreOp) -> None:
        self.require_kernel(op)
        index = self.linear_index(op, op.base, op.indices)
        base = self.operand(op.base)
        self.line(f"coco::store_vec({base} + {index}, {self.text(op.vector)});")

    @print.register
    def _(self, op: vector.ExtractOp) -> None:
        position = static_lane(op, op.static_position)
        self.bind(op.result, Expr(f"{self.operand(op.vector)}.lane[{position}]", True))

    @print.register
    def _(self, op: vector.InsertOp) -> None:
        position = static_lane(op, op.static_position)
        dest, value = self.text(op.dest), self.text(op.source)
        self.bind(
            op.result, Expr(f"coco::with_lane({dest}, {value}, {position})", True)
        )

    @print.register
    def _(self, op: vector.BroadcastOp) -> None:
        t = self.ctype(op.vector.type, op)
        splat = f"coco::splat<{t.split('<', 1)[1]}({self.text(op.source)})"
        self.bind(op.vector, Expr(splat, True))

    @print.register
    def _(self, op: memref.ExtractAlignedPointerAsIndexOp) -> None:
        pointer = f"(int64_t)(uintptr_t){self.operand(op.source)}"
        self.bind(op.aligned_pointer, Expr(pointer, True))

    @print.register(memref.AllocOp)
    @print.register(memref.AllocaOp)
    def _(self, op: memref.AllocOp) -> None:
        t = memref_type(op.memref)
        if op.dynamic_sizes:
            raise CocoError("the CUDA target allocates static shapes only", op)
        element = self.ctype(t.element_type, op)
        name = self.name_value(op.memref, "buffer")
        count = max(1, element_count(t))
        if self.in_kernel:
            if is_shared(t):
                self.line(f"COCO_SHARED({element}, {name}, {count});")
            else:
                self.line(f"{element} {name}[{count}];")
            return
        bytes_ = count * element_bytes(t.element_type)
        stream = self.on_stream(op)
        self.line(f"{element} *{name} = nullptr;")
        self.line(
            f"COCO_CHECK_CUDA(cudaMallocAsync(reinterpret_cast<void **>(&{name}), "
            f"{bytes_}, {stream}));"
        )

    @print.register
    def _(self, op: memref.DeallocOp) -> None:
        if self.in_kernel:
            return
        self.line(
            f"COCO_CHECK_CUDA(cudaFreeAsync({self.text(op.memref)}, "
            f"{self.on_stream(op)}));"
        )

    @print.register
    def _(self, op: memref.CopyOp) -> None:
        t = memref_type(op.source)
        bytes_ = element_count(t) * element_bytes(t.element_type)
        if self.in_kernel:
            raise CocoError("the CUDA target copies buffers on the host only", op)
        self.line(
            f"COCO_CHECK_CUDA(cudaMemcpyAsync({self.text(op.destination)}, "
            f"{self.text(op.source)}, {bytes_}, cudaMemcpyDeviceToDevice, "
            f"{self.on_stream(op)}));"
        )

    @print.register(memref.CollapseShapeOp)
    @print.register(memref.ExpandShapeOp)
    @print.register(memref.CastOp)
    def _(self, op: memref.CastOp) -> None:
        self.bind(op.results[0], self.expr(op.operands[0]))

    @print.register(memref.SubviewOp)
    @print.register(memref.ReinterpretCastOp)
    def _(self, op: memref.SubviewOp) -> None:
        source = op.source
        offsets = self.static_or_dynamic(op.static_offsets.get_values(), op.offsets)
        if isinstance(op, memref.ReinterpretCastOp):
            terms = offsets
        else:
            strides = memref_type(source).get_strides()
            if strides is None or any(s is None for s in strides):
                raise CocoError("the CUDA target needs static strides", op)
            terms = [
                (o if s == 1 else f"{o} * {s}")
                for o, s in zip(offsets, strides)
                if o != "0" and s != 0
            ]
        terms = [t for t in terms if t != "0"]
        if not terms:
            self.bind(op.results[0], self.expr(source))
        else:
            self.bind(op.results[0], f"{self.operand(source)} + {' + '.join(terms)}")

    def static_or_dynamic(
        self, static: Sequence[int], dynamic: Sequence[SSAValue]
    ) -> list[str]:
        values = iter(dynamic)
        return [
            self.operand(next(values)) if s == DYNAMIC_INDEX else str(s) for s in static
        ]

    # ------------------------------------------------------------------ scf

    @print.register
    def _(self, op: scf.ForOp) -> None:
        body = op.body.block
        induction, carried = body.args[0], body.args[1:]
        for init, arg, result in zip(op.iter_args, carried, op.res):
            hint = result.name_hint or arg.name_hint
            name = self.scope.fresh(hint, "acc")
            self.line(f"{self.ctype(arg.type, op)} {name} = {self.text(init)};")
            self.exprs[arg] = self.exprs[result] = Expr(name, True)
        lb, step = self.text(op.lb), self.text(op.step)
        ub = self.operand(op.ub)  # `i < (a < b ? a : b)`: the bound binds first
        i = self.name_value(induction, "i")
        itype = self.ctype(induction.type, op)
        self.line(f"for ({itype} {i} = {lb}; {i} < {ub}; {i} += {step}) ")
        self.print_body(body)

    @print.register
    def _(self, op: scf.IfOp) -> None:
        for result in op.output:
            name = self.name_value(result, "r")
            self.line(f"{self.ctype(result.type, op)} {name};")
        self.line(f"if ({self.text(op.cond)}) ")
        self.print_body(op.true_region.block)
        if op.false_region.blocks and (op.output or len(op.false_region.block.ops) > 1):
            self.print_string(" else ")
            self.print_body(op.false_region.block)

    @print.register
    def _(self, op: scf.YieldOp) -> None:
        parent = op.parent_op()
        if isinstance(parent, scf.ForOp):
            targets = [self.text(a) for a in parent.body.block.args[1:]]
        elif isinstance(parent, scf.IfOp):
            targets = [self.text(r) for r in parent.output]
        else:
            raise CocoError("the CUDA target knows scf.yield in for and if only", op)
        values = [self.text(v) for v in op.operands]
        pairs = [(t, v) for t, v in zip(targets, values) if t != v]
        if len(pairs) > 1 and isinstance(parent, scf.ForOp):
            # Every new value is computed from the old ones before any changes.
            temps = []
            for (target, value), operand in zip(pairs, op.operands):
                temp = self.scope.fresh(f"{target}_next", "next")
                self.line(f"const {self.ctype(operand.type, op)} {temp} = {value};")
                temps.append((target, temp))
            pairs = temps
        for target, value in pairs:
            self.line(f"{target} = {value};")

    # ------------------------------------------------------------- host side

    @print.register
    def _(self, op: func.FuncOp) -> None:
        name = op.sym_name.data
        self.scope = Scope()
        self.in_kernel = False
        self.events = EventSlots(self.event_count)
        stage = self.stages.get(name, 0)
        self.line(f'extern "C" int coco_stage_of_{name}(void) {{ return {stage}; }}')
        params = ["coco_context *ctx"]
        for arg in op.body.block.args:
            pname = self.name_value(arg, f"arg{arg.index}")
            space = "" if isinstance(arg.type, MemRefType) else " "
            params.append(f"{self.ctype(arg.type, op)}{space}{pname}")
        self.line(f'extern "C" int coco_{name}({", ".join(params)}) ')
        self.print_body(op.body.block)
        self.event_count = self.events.base + self.events.used

    @print.register
    def _(self, op: func.ReturnOp) -> None:
        self.line("return 0;")

    def on_stream(self, op: Operation) -> str:
        return f"ctx->streams[{coco_gpu.stream_of(op)}]"

    @print.register
    def _(self, op: gpu.LaunchFuncOp) -> None:
        kernel = kernel_name(op.kernel)
        parts = launch_parts(op)
        grid = ", ".join(self.launch_size(v) for v in parts.grid)
        block = ", ".join(self.launch_size(v) for v in parts.block)
        shared = self.text(parts.shared) if parts.shared is not None else "0"
        args = "".join(f", {self.text(a)}" for a in parts.args)
        macro = (
            "COCO_LAUNCH_COOPERATIVE"
            if coco_gpu.COOPERATIVE_ATTR in op.attributes
            else "COCO_LAUNCH"
        )
        self.line(
            f"{macro}({kernel}, dim3({grid}), dim3({block}), {shared}, "
            f"{self.on_stream(op)}{args});"
        )

    def launch_size(self, value: SSAValue) -> str:
        """A dim3 component: `256u` for a constant, else a cast."""
        owner = value.owner
        if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
            return f"{owner.value.value.data}u"
        return f"(unsigned){self.operand(value)}"

    @print.register
    def _(self, op: coco_gpu.GridBlocksOp) -> None:
        sizes = f"{self.text(op.count)}, {self.text(op.threads)}"
        if op.kernel is None:
            call = f"coco::grid_blocks(ctx, {sizes})"
        else:
            kernel = kernel_name(op.kernel)
            call = f"coco::resident_blocks(ctx, {kernel}, {sizes})"
        self.bind(op.result, Expr(call, True))

    @print.register
    def _(self, op: coco_gpu.RankOp) -> None:
        self.bind(op.result, "(int64_t)ctx->rank")

    def nccl(
        self,
        op: Operation,
        function: str,
        buffers: Sequence[SSAValue],
        counted: SSAValue,
        *between: str,
        comm: str = "ctx->comm",
    ) -> None:
        """`function(buffers..., count, type, between..., comm, stream)`, checked:
        a NCCL call on `op`'s stream over `counted`'s elements, of the element
        type of `buffers[0]`."""
        t = memref_type(buffers[0])
        args = [
            *(self.text(b) for b in buffers),
            str(element_count(memref_type(counted))),
            self.nccl_type(t, op),
            *between,
            comm,
            self.on_stream(op),
        ]
        self.line(f"COCO_CHECK_NCCL({function}({', '.join(args)}));")

    def nccl_type(self, t: MemRefType, op: Operation) -> str:
        try:
            return nccl_type(t.element_type)
        except UnsupportedType as err:
            raise CocoError(f"the CUDA target cannot print this: {err}", op) from None

    @print.register(coco_gpu.NcclAllReduceOp)
    @print.register(coco_gpu.NcclReduceScatterOp)
    def _(self, op: coco_gpu.NcclReductionOp) -> None:
        # A reduce-scatter's count is what each rank receives.
        scatter = isinstance(op, coco_gpu.NcclReduceScatterOp)
        function = "ncclReduceScatter" if scatter else "ncclAllReduce"
        counted = op.output if scatter else op.input
        reduction = NCCL_OPS[op.reduction.data]
        self.nccl(
            op, function, [op.input, op.output], counted, reduction, comm=comm_of(op)
        )

    @print.register
    def _(self, op: coco_gpu.NcclAllGatherOp) -> None:
        self.nccl(
            op, "ncclAllGather", [op.input, op.output], op.input, comm=comm_of(op)
        )

    @print.register
    def _(self, op: coco_gpu.NcclBroadcastOp) -> None:
        root = str(op.root.value.data)
        self.nccl(op, "ncclBroadcast", [op.input, op.output], op.input, root)

    @print.register
    def _(self, op: coco_gpu.NcclAllToAllOp) -> None:
        source = memref_type(op.input)
        kind = self.nccl_type(source, op)
        stream = self.on_stream(op)
        block = self.scope.fresh("block", "block")
        p = self.scope.fresh("peer", "peer")
        self.line(
            f"const size_t {block} = {element_count(source)} / (size_t)ctx->world;"
        )
        self.line("COCO_CHECK_NCCL(ncclGroupStart());")
        self.line(f"for (int {p} = 0; {p} < ctx->world; ++{p}) {{")
        with self.indented():
            self.line(
                f"COCO_CHECK_NCCL(ncclSend({self.operand(op.input)} + {p} * {block}, "
                f"{block}, {kind}, {p}, ctx->comm, {stream}));"
            )
            self.line(
                f"COCO_CHECK_NCCL(ncclRecv({self.operand(op.output)} + {p} * {block}, "
                f"{block}, {kind}, {p}, ctx->comm, {stream}));"
            )
        self.line("}")
        self.line("COCO_CHECK_NCCL(ncclGroupEnd());")

    @print.register(coco_gpu.NcclSendOp)
    @print.register(coco_gpu.NcclRecvOp)
    def _(self, op: coco_gpu.NcclPeerOp) -> None:
        buffer = op.operands[0]
        stage = self.stages.get(op.stage.root_reference.data, 0)
        function = "ncclSend" if isinstance(op, coco_gpu.NcclSendOp) else "ncclRecv"
        peer = f"{stage} * ctx->world + ctx->rank"
        self.nccl(op, function, [buffer], buffer, peer, comm="ctx->pipeline_comm")

    @print.register
    def _(self, op: coco_gpu.GemmOp) -> None:
        a, b, c = (memref_type(v) for v in (op.a, op.b, op.c))
        ashape, bshape = a.get_shape(), b.get_shape()
        if len(bshape) < 2 or len(ashape) < 2:
            raise CocoError("the CUDA target multiplies matrices of rank 2 and up", op)
        k, n = bshape[-2], bshape[-1]
        try:
            types = [cublas_type(t.element_type) for t in (a, b, c)]
        except UnsupportedType as err:
            raise CocoError(f"the CUDA target cannot print this: {err}", op) from None
        stream = self.on_stream(op)
        # f64 computes in f64 (alpha and beta doubles); the rest in f32.
        f64 = types[2] == "CUDA_R_64F"
        scalar, suffix = ("double", "") if f64 else ("float", "f")
        compute = "CUBLAS_COMPUTE_64F" if f64 else "CUBLAS_COMPUTE_32F"
        beta = f"{int(op.accumulate is not None)}.0{suffix}"
        alpha_name = self.scope.fresh("alpha", "alpha")
        beta_name = self.scope.fresh("beta", "beta")
        self.line(f"COCO_CHECK_CUBLAS(cublasSetStream(ctx->cublas, {stream}));")
        self.line(f"const {scalar} {alpha_name} = 1.0{suffix}, {beta_name} = {beta};")
        # Row-major C = A B is column-major C^T = B^T A^T: cuBLAS gets B first.
        ta, tb, tc = types
        head = (
            f"ctx->cublas, CUBLAS_OP_N, CUBLAS_OP_N, {n}, {{m}}, {k}, &{alpha_name}, "
            f"{self.text(op.b)}, {tb}, {n}{{sb}}, {self.text(op.a)}, {ta}, {k}{{sa}}, "
            f"&{beta_name}, {self.text(op.c)}, {tc}, {n}{{sc}}"
        )
        if len(bshape) == 2:
            m = math.prod(ashape[:-1])
            args = head.format(m=m, sa="", sb="", sc="")
            self.line(
                f"COCO_CHECK_CUBLAS(cublasGemmEx({args}, {compute}, "
                "CUBLAS_GEMM_DEFAULT));"
            )
            return
        # Batched: b is [G.., K, M]; a is [G.., rows.., K] with any number of
        # row dims (none: one row per group).
        batch = math.prod(bshape[:-2])
        m = math.prod(ashape[len(bshape) - 2 : -1])
        args = head.format(m=m, sa=f", {m * k}LL", sb=f", {k * n}LL", sc=f", {m * n}LL")
        self.line(
            f"COCO_CHECK_CUBLAS(cublasGemmStridedBatchedEx({args}, {batch}, "
            f"{compute}, CUBLAS_GEMM_DEFAULT));"
        )

    @print.register
    def _(self, op: coco_gpu.RecordEventOp) -> None:
        name = self.name_value(op.event, "event")
        index = self.events.record(op.event)
        self.line(f"cudaEvent_t {name} = ctx->events[{index}];")
        self.line(f"COCO_CHECK_CUDA(cudaEventRecord({name}, {self.on_stream(op)}));")

    @print.register
    def _(self, op: coco_gpu.WaitEventOp) -> None:
        self.line(
            f"COCO_CHECK_CUDA(cudaStreamWaitEvent({self.on_stream(op)}, "
            f"{self.text(op.event)}, 0));"
        )
        self.events.waited(op.event)

    @print.register
    def _(self, op: coco_gpu.SymmetricBufferOp) -> None:
        element = self.ctype(memref_type(op.result).element_type, op)
        self.bind(
            op.result,
            Expr(
                f"coco::symmetric_buffer<{element}>(ctx, {op.offset.value.data})", True
            ),
        )

    @print.register
    def _(self, op: coco_gpu.ViewOp) -> None:
        offset = op.offset.value.data
        terms = [self.operand(op.source)]
        if op.start is not None:
            terms.append(self.operand(op.start))
        if offset:
            terms.append(str(offset))
        if len(terms) == 1:
            self.bind(op.result, self.expr(op.source))
        else:
            self.bind(op.result, " + ".join(terms))

    @print.register
    def _(self, op: coco_gpu.PeerCopyOp) -> None:
        t = memref_type(op.source)
        bytes_ = element_count(t) * element_bytes(t.element_type)
        self.line(
            f"COCO_CHECK_CUDA(coco::peer_copy(ctx, {self.text(op.target)}, "
            f"{self.text(op.source)}, {op.shift}, {bytes_}, {self.on_stream(op)}));"
        )

    @print.register
    def _(self, op: coco_gpu.PeersOp) -> None:
        self.bind(op.result, Expr("coco::peers_of(ctx)", True))

    @print.register
    def _(self, op: coco_gpu.NextEpochOp) -> None:
        self.bind(op.result, "(int64_t)coco::next_epoch(ctx)", pure=False)

    @print.register
    def _(self, op: coco_gpu.PeerViewOp) -> None:
        self.bind(
            op.result,
            Expr(
                f"coco::peer({self.text(op.peers)}, {self.text(op.buffer)}, "
                f"{self.text(op.peer)})",
                True,
            ),
        )

    @print.register
    def _(self, op: coco_gpu.SignalOp) -> None:
        self.line(
            f"coco::signal(coco::signal_slot({self.text(op.peers)}, "
            f"{self.text(op.peer)}, {self.text(op.slot)}), "
            f"(uint64_t){self.operand(op.value)});"
        )

    @print.register
    def _(self, op: coco_gpu.CountPeerBytesOp) -> None:
        self.line(
            f"coco::count_peer_bytes({self.text(op.peers)}, {self.text(op.peer)}, "
            f"(unsigned long long){self.operand(op.bytes)});"
        )

    @print.register
    def _(self, op: coco_gpu.TileComputedOp) -> None:
        self.line("coco::tile_computed();")

    @print.register
    def _(self, op: coco_gpu.WaitSignalOp) -> None:
        self.line(
            f"coco::wait_signal(coco::own_slot({self.text(op.peers)}, "
            f"{self.text(op.slot)}), (uint64_t){self.operand(op.value)});"
        )


# The ops printed from a table: one case per table, registered for each of
# its ops.
for _table, _case in (
    (MATH_FUNCTIONS, CudaPrinter.print_math),
    (BINARY_FLOAT, CudaPrinter.print_binary_float),
    (FLOAT_MIN_MAX | NAN_MIN_MAX, CudaPrinter.print_float_min_max),
    (BINARY_INT, CudaPrinter.print_binary_int),
    (MIN_MAX, CudaPrinter.print_int_min_max),
):
    for _op in _table:
        CudaPrinter.print.register(_op)(_case)


def min_blocks(threads: int) -> int:
    """The blocks per SM a kernel's registers must allow (`__launch_bounds__`'s
    second argument): 1024 threads' worth, so ptxas may use up to 64 registers
    a thread rather than squeezing to full occupancy (and spilling around
    libdevice's slow paths)."""
    return max(1, 1024 // threads)


def static_lane(op: Operation, positions: DenseArrayBase[IntegerType]) -> int:
    """A vector.extract/insert's lane, which must be static."""
    found = [int(p) for p in positions.iter_values()]
    if len(found) != 1 or found[0] < 0:
        raise CocoError(
            "the CUDA target reads and sets static lanes of 1-D vectors only", op
        )
    return found[0]


def launch_threads(op: gpu.LaunchFuncOp) -> int | None:
    """The threads per block of a launch whose sizes are constants."""
    sizes: list[int] = []
    for v in launch_parts(op).block:
        owner = v.owner
        if not (
            isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr)
        ):
            return None
        sizes.append(owner.value.value.data)
    return math.prod(sizes)


def is_symmetric(arg: SSAValue) -> bool:
    """Whether a kernel parameter is a symmetric buffer (it reaches a
    `coco_gpu.peer_view`), which peers write during the kernel."""
    return any(isinstance(use.operation, coco_gpu.PeerViewOp) for use in arg.uses)


NCCL_COMMS = {None: "ctx->comm", "node": "ctx->node_comm", "across": "ctx->cross_comm"}
"""The context's communicator of each `group` of a NCCL collective."""


def comm_of(op: coco_gpu.NcclCollectiveOp) -> str:
    return NCCL_COMMS[op.group_name]


def symmetric_bytes(module: ModuleOp) -> int:
    """The per-rank size of the symmetric workspace: the end of its last
    buffer, rounded up to 256 bytes."""
    end = 0
    for op in module.walk():
        if isinstance(op, coco_gpu.SymmetricBufferOp):
            t = memref_type(op.result)
            size = max(1, element_count(t)) * element_bytes(t.element_type)
            end = max(end, op.offset.value.data + size)
    return (end + 255) // 256 * 256


def signal_slots(module: ModuleOp) -> int:
    """Signal-pad slots every rank needs: the module's `coco_gpu.signal_slots`
    (set by the fused collective lowering), else 0."""
    attr = module.attributes.get("coco_gpu.signal_slots")
    return attr.value.data if isinstance(attr, IntegerAttr) else 0


BENCH_KINDS = {
    "f32": "COCO_BENCH_F32",
    "f64": "COCO_BENCH_F64",
    "f16": "COCO_BENCH_F16",
    "bf16": "COCO_BENCH_BF16",
    "i1": "COCO_BENCH_BOOL",
    "i8": "COCO_BENCH_I8",
    "i16": "COCO_BENCH_I16",
    "i32": "COCO_BENCH_I32",
    "i64": "COCO_BENCH_I64",
}
"""Element type → the benchmark's fill kind (coco_gpu_bench.h)."""


def bench_kind(element: Attribute) -> str | None:
    return BENCH_KINDS.get(str(element))


def index_bounds(function: func.FuncOp) -> dict[int, int]:
    """Argument number → the bound its values must stay under (the
    `coco_gpu.index_bounds` the conversion recorded for embedding indices)."""
    attr = function.attributes.get(coco_gpu.INDEX_BOUNDS_ATTR)
    if not isinstance(attr, DenseArrayBase):
        return {}
    return {k: int(v) for k, v in enumerate(attr.get_values()) if v}


def collective_bytes(function: func.FuncOp) -> tuple[int, int]:
    """The nccl-tests size of a host function's collectives and the bytes a
    rank sends: the `coco_gpu.bytes` the conversion computed from the coco
    function (coconet_ir.analysis.costs); (0, 0) without it."""
    attr = function.attributes.get(coco_gpu.BYTES_ATTR)
    if not isinstance(attr, DenseArrayBase):
        return 0, 0
    message, bus = attr.get_values()
    return int(message), int(bus)


def print_cuda(module: ModuleOp, stream, *, main: bool = False) -> None:
    """Print `module` (device level) as one `.cu` file on `stream`."""
    CudaPrinter(stream=stream, main=main).print(module)


def emit_cuda(module: ModuleOp, *, main: bool = False) -> str:
    """The device-level `module` as CUDA C text (what `-t cuda` prints)."""
    out = StringIO()
    print_cuda(module, out, main=main)
    return out.getvalue()
