"""convert-coco-to-gpu: coco programs to the device level (docs/gpu.md §1).

Every function becomes a host `func.func` on per-rank buffers
(`coconet_ir.lowering.bufferize`): its coco arguments become memrefs, its
results trailing out-parameters, `coco.update` a write into the parameter's
buffer. Every coco op becomes host ops: `gpu.launch_func` of a kernel built in
the module's `gpu.module @kernels` (elementwise ops, fused elementwise chains,
reductions, norms, slicing and the pack/unpack of collectives along a dim
other than 0), a `coco_gpu` library call (NCCL collectives, send/recv, cuBLAS
gemm), or `memref.copy`.

The conversion runs one rewrite pattern per coco op (elementwise ops share
one), as xDSL's `lower_mpi.py` does, over a shared base holding the
conversion's state (`Lowering`). A coco value and its buffer meet through
`builtin.unrealized_conversion_cast` until every coco op is gone.

Two lowerings are fallbacks meant to be replaced, each in one place:
`lower_fusion_with_collectives` (a `coco.fusion` holding collectives is
inlined and lowered op by op) and `lower_overlap` (a `coco.overlap` runs its
chunks one after the other on stream 0).

Preconditions: the world size is known (option `world`, or the module's
`coco.world_size`; both given, they must agree) and divides every sliced dim.
A refusal leaves the module unchanged.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, func, gpu, memref, scf
from xdsl.dialects.builtin import (
    DenseArrayBase,
    FunctionType,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    UnitAttr,
    UnrealizedConversionCastOp,
    i64,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.utils.exceptions import PassFailedException

from coconet_ir.analysis.chunks import chunk_dims
from coconet_ir.diagnostics import CocoError
from coconet_ir.dialects import coco
from coconet_ir.dialects.coco import (
    ELEMENTWISE_OPS,
    WORLD_SIZE_ATTR,
    TensorType,
    divisibility_problem,
    element_info,
    label_of,
    world_size,
)
from coconet_ir.dialects.coco_gpu import (
    ENTRY_ATTR,
    GemmOp,
    NcclAllGatherOp,
    NcclAllReduceOp,
    NcclAllToAllOp,
    NcclBroadcastOp,
    NcclRecvOp,
    NcclReduceScatterOp,
    NcclSendOp,
    RankOp,
)
from coconet_ir.lowering.bufferize import (
    as_tensor,
    buffer_of,
    buffer_type,
    collapse,
    element_count,
    fold_casts,
    local_shape,
)
from coconet_ir.lowering.kernels import (
    Indexer,
    KernelModule,
    as_i64,
    compute_type,
    constant,
    emit_elementwise,
    from_compute,
    grid_stride_loop,
    index_constant,
    launch,
    linear,
    to_compute,
)

__all__ = [
    "CHUNK_ATTR",
    "ConversionRefused",
    "ConvertCocoToGpu",
    "Lowering",
]

index = IndexType()

CHUNK_ATTR = "coco_gpu.chunk"
"""On a dropout cloned into one chunk of a `coco.overlap` (the fallback
lowering): `array<i64: DIM, INDEX, CHUNKS>` — its operand is chunk INDEX of
CHUNKS along DIM of the un-chunked value, so its global index is kept."""

KERNELS_MODULE = "kernels"
"""The name of the `gpu.module` holding every kernel."""


class ConversionRefused(CocoError, PassFailedException):
    """convert-coco-to-gpu cannot convert this module; nothing was changed."""


# ============================================================================
# The state of one conversion
# ============================================================================


@dataclass(frozen=True)
class Axis:
    """How one axis of a value's buffer is indexed from a kernel's domain: the
    domain digit `digit` (None: always 0) plus `rank * rank_stride`."""

    digit: int | None
    rank_stride: int = 0


@dataclass
class Lowering:
    """What the patterns of one conversion share: the world size, the launch
    width, the kernel module, and where each value's buffer must be."""

    world: int
    threads: int
    kernels: KernelModule
    destinations: dict[SSAValue, SSAValue] = field(
        default_factory=dict[SSAValue, SSAValue]
    )
    """coco value → the buffer its final value must be in (an updated
    parameter's or an out-parameter)."""
    written: set[SSAValue] = field(default_factory=set[SSAValue])
    """coco values whose producer wrote them straight into their destination."""
    out_params: dict[func.FuncOp, list[BlockArgument]] = field(
        default_factory=dict[func.FuncOp, list[BlockArgument]]
    )

    # -- buffers -------------------------------------------------------------

    def buffer(self, value: SSAValue) -> tuple[list[Operation], SSAValue]:
        """The buffer of the coco value `value` (see `buffer_of`)."""
        return buffer_of(value, self.world)

    def buffers(
        self, values: Sequence[SSAValue]
    ) -> tuple[list[Operation], list[SSAValue]]:
        ops: list[Operation] = []
        found: list[SSAValue] = []
        for value in values:
            more, buffer = self.buffer(value)
            ops += more
            found.append(buffer)
        return ops, found

    def result_buffer(
        self, producer: Operation, value: SSAValue, reads_in_place: bool = False
    ) -> tuple[list[Operation], SSAValue]:
        """The buffer `producer` writes `value` into: its destination when the
        producer may write there (the parameter's old value is dead by then;
        `reads_in_place`: the producer may itself read it, element by element
        at the index it writes), else a new `memref.alloc`."""
        destination = self.destinations.get(value)
        if destination is not None and self.may_overwrite(
            producer, destination, reads_in_place
        ):
            self.written.add(value)
            return [], destination
        assert isinstance(value.type, TensorType)
        alloc = memref.AllocOp.get(
            value.type.element_type, shape=local_shape(value.type, self.world)
        )
        if value.name_hint:
            alloc.memref.name_hint = value.name_hint
        return [alloc], alloc.memref

    def may_overwrite(
        self, producer: Operation, buffer: SSAValue, reads_in_place: bool
    ) -> bool:
        """Whether nothing after `producer` (nor `producer` itself, unless it
        reads in place) reads the old contents of `buffer`."""
        function = enclosing(producer)
        if function is None:
            return False
        if any(buffer is arg for arg in self.out_params.get(function, [])):
            return True
        top = function.body.block
        at = top.get_operation_index(top_level(producer, top))
        readers = [use.operation for use in buffer.uses]
        for use in list(buffer.uses):
            if isinstance(use.operation, UnrealizedConversionCastOp):
                readers += [u.operation for r in use.operation.results for u in r.uses]
        for reader in readers:
            if isinstance(reader, coco.UpdateOp | UnrealizedConversionCastOp):
                continue
            where = top.get_operation_index(top_level(reader, top))
            if where > at or (where == at and not reads_in_place):
                return False
        return True

    # -- kernels -------------------------------------------------------------

    def kernel_name(self, op: Operation, kind: str | None = None) -> str:
        """`<function>_<label or kind>` (KernelModule adds `_<n>`)."""
        function = enclosing(op)
        prefix = function.sym_name.data if function is not None else "kernel"
        label = label_of(op) or kind or op.name.removeprefix("coco.")
        return f"{prefix}_{label}"

    def plan(self, value: TensorType, domain: TensorType) -> list[Axis]:
        """How each axis of a buffer of type `value` is indexed from a kernel
        over the elements of `domain` (broadcasting from the right; a
        replicated operand of a sliced domain is read at the rank's block)."""
        values, domains = (
            local_shape(value, self.world),
            local_shape(domain, self.world),
        )
        pad = len(domains) - len(values)
        axes: list[Axis] = []
        for a, size in enumerate(values):
            j = a + pad
            if size == 1:
                axes.append(Axis(None))
            elif size == domains[j]:
                axes.append(Axis(j))
            elif size == domains[j] * self.world:
                axes.append(Axis(j, domains[j]))
            else:
                raise CocoError(f"cannot index {value} from a kernel over {domain}")
        return axes

    def needs_rank(self, value: TensorType, domain: TensorType) -> bool:
        return any(axis.rank_stride for axis in self.plan(value, domain))

    def is_identity(self, value: TensorType, domain: TensorType) -> bool:
        """Whether a buffer of `value` is indexed by the domain's flat index."""
        return local_shape(value, self.world) == local_shape(domain, self.world)

    def element_index(
        self,
        b: Builder,
        indexer: Indexer,
        value: TensorType,
        domain: TensorType,
        rank: SSAValue | None,
    ) -> SSAValue | None:
        """The flat index into a buffer of `value` of the domain's element
        `indexer.flat` (None for a rank-0 buffer)."""
        if value.rank == 0:
            return None
        if self.is_identity(value, domain):
            return indexer.flat
        digits: list[SSAValue | int] = []
        for axis in self.plan(value, domain):
            if axis.digit is None:
                digits.append(0)
                continue
            digit = indexer.digit(axis.digit)
            if axis.rank_stride:
                assert rank is not None
                offset = b.insert(
                    arith.MuliOp(rank, index_constant(b, axis.rank_stride))
                ).result
                digit = b.insert(arith.AddiOp(digit, offset)).result
            digits.append(digit)
        return linear(b, digits, local_shape(value, self.world))

    def global_index(
        self,
        b: Builder,
        indexer: Indexer,
        value: TensorType,
        domain: TensorType,
        rank: SSAValue | None,
        chunk: tuple[int, int, int] | None,
    ) -> SSAValue:
        """The global linear index (an i64) of the element of `value` the
        domain's element `indexer.flat` reads: its block offset when sliced,
        its chunk offset inside an overlap chunk (`chunk` = dim, index,
        chunks)."""
        shape = local_shape(value, self.world)
        global_shape = list(value.dims)
        digits: list[SSAValue | int] = []
        plan = self.plan(value, domain)
        for a, axis in enumerate(plan):
            digit: SSAValue | int = (
                0 if axis.digit is None else indexer.digit(axis.digit)
            )
            if axis.rank_stride or (
                value.layout.is_sliced and value.layout.sliced_dim == a
            ):
                assert rank is not None
                offset = b.insert(
                    arith.MuliOp(rank, index_constant(b, shape[a]))
                ).result
                digit = (
                    offset
                    if digit == 0
                    else b.insert(
                        arith.AddiOp(
                            index_constant(b, 0) if isinstance(digit, int) else digit,
                            offset,
                        )
                    ).result
                )
            if chunk is not None and chunk[0] == a:
                global_shape[a] *= chunk[2]
                start = chunk[1] * value.dims[a]
                if isinstance(digit, int):
                    digit += start
                elif start:
                    digit = b.insert(
                        arith.AddiOp(digit, index_constant(b, start))
                    ).result
            digits.append(digit)
        return as_i64(b, linear(b, digits, global_shape))

    def map_kernel(
        self,
        name: str,
        domain: TensorType,
        inputs: Sequence[tuple[SSAValue, TensorType]],
        outputs: Sequence[tuple[SSAValue, TensorType]],
        body: Callable[
            [Builder, Callable[[int], SSAValue], ElementContext], list[SSAValue]
        ],
        needs_rank: bool = False,
    ) -> list[Operation]:
        """Host ops launching a grid-stride kernel over the elements of
        `domain`: input `k` (a buffer and its coco type) is loaded when `body`
        asks for it (`load(k)`, at the element its broadcast reads), `body`
        computes the outputs' scalars, stored at each output's element."""
        needs_rank = needs_rank or any(
            self.needs_rank(t, domain) for _, t in (*inputs, *outputs)
        )
        host: list[Operation] = []
        args: list[SSAValue] = []
        arg_specs: list[tuple[str, Attribute]] = [("n", index)]
        if needs_rank:
            rank_op = RankOp()
            rank_op.result.name_hint = "rank"
            host.append(rank_op)
            args.append(rank_op.result)
            arg_specs.append(("rank", index))
        for k, (buffer, _) in enumerate((*inputs, *outputs)):
            ops, flat = collapse(buffer)
            host += ops
            args.append(flat)
            hint = buffer.name_hint or ("in" if k < len(inputs) else "out")
            arg_specs.append((hint, flat.type))
        kernel, b = self.kernels.kernel(name, arg_specs)
        kernel_args = list(kernel.body.block.args)
        rank = kernel_args[1] if needs_rank else None
        buffers = kernel_args[2 if needs_rank else 1 :]
        loop, i = grid_stride_loop(b, kernel_args[0])
        indexer = Indexer(loop, i, local_shape(domain, self.world))
        loaded: dict[int, SSAValue] = {}

        def load(k: int) -> SSAValue:
            if k not in loaded:
                at = self.element_index(loop, indexer, inputs[k][1], domain, rank)
                loaded[k] = loop.insert(
                    memref.LoadOp.get(buffers[k], [] if at is None else [at])
                ).res
            return loaded[k]

        context = ElementContext(self, loop, indexer, domain, rank)
        results = body(loop, load, context)
        for (_, t), result, buffer in zip(outputs, results, buffers[len(inputs) :]):
            at = self.element_index(loop, indexer, t, domain, rank)
            loop.insert(memref.StoreOp.get(result, buffer, [] if at is None else [at]))
        host += launch(
            self.kernels, kernel, element_count(domain, self.world), args, self.threads
        )
        return host


@dataclass
class ElementContext:
    """Where a map kernel's body is: what `global_index` needs."""

    lowering: Lowering
    b: Builder
    indexer: Indexer
    domain: TensorType
    rank: SSAValue | None

    def global_index(
        self, value: TensorType, chunk: tuple[int, int, int] | None = None
    ) -> SSAValue:
        return self.lowering.global_index(
            self.b, self.indexer, value, self.domain, self.rank, chunk
        )


def chunk_of(op: Operation) -> tuple[int, int, int] | None:
    """The `coco_gpu.chunk` frame of a dropout cloned into an overlap chunk."""
    attr = op.attributes.get(CHUNK_ATTR)
    if not isinstance(attr, DenseArrayBase):
        return None
    dim, chunk, chunks = attr.get_values()
    return int(dim), int(chunk), int(chunks)


def needs_rank_for_dropout(op: Operation) -> bool:
    t = op.results[0].type
    return (
        isinstance(op, coco.DropoutOp)
        and isinstance(t, TensorType)
        and (t.layout.is_sliced)
    )


def enclosing(op: Operation) -> func.FuncOp | None:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, func.FuncOp):
        parent = parent.parent_op()
    return parent


def top_level(op: Operation, block: Block) -> Operation:
    """The ancestor of `op` (or `op`) directly in `block`."""
    while op.parent_block() is not block:
        parent = op.parent_op()
        assert parent is not None
        op = parent
    return op


# ============================================================================
# Patterns
# ============================================================================


@dataclass
class CocoLoweringPattern(RewritePattern, ABC):
    """A pattern of the conversion: it shares the conversion's `Lowering`."""

    lowering: Lowering

    @property
    def world(self) -> int:
        return self.lowering.world


def result_type(op: Operation, index: int = 0) -> TensorType:
    t = op.results[index].type
    assert isinstance(t, TensorType)
    return t


def replace_with_buffers(
    rewriter: PatternRewriter,
    op: Operation,
    host: list[Operation],
    results: Sequence[SSAValue],
) -> None:
    """Replace `op` by the host ops; its results by (casts of) `results`."""
    casts = [as_tensor(buffer, r.type) for buffer, r in zip(results, op.results)]
    rewriter.replace(op, [*host, *casts], [c.results[0] for c in casts])


@dataclass
class LowerElementwise(CocoLoweringPattern):
    """Every elementwise op (and `coco.constant`): one grid-stride kernel over
    the result's local elements, loading each operand at the element its
    broadcast reads."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, (*ELEMENTWISE_OPS, coco.ConstantOp)):
            return
        lowering = self.lowering
        result = result_type(op)
        host, buffers = lowering.buffers(op.operands)
        more, out = lowering.result_buffer(op, op.results[0], reads_in_place=True)
        host += more
        inputs = [(b, v.type) for b, v in zip(buffers, op.operands)]
        chunk = chunk_of(op)

        def body(
            b: Builder, load: Callable[[int], SSAValue], where: ElementContext
        ) -> list[SSAValue]:
            scalars = [load(k) for k in range(len(inputs))]
            return [
                emit_elementwise(
                    b, op, scalars, lambda: where.global_index(result, chunk)
                )
            ]

        host += lowering.map_kernel(
            lowering.kernel_name(op),
            result,
            inputs,  # type: ignore[arg-type]
            [(out, result)],
            body,
            needs_rank=needs_rank_for_dropout(op),
        )
        replace_with_buffers(rewriter, op, host, [out])


@dataclass
class LowerAllReduce(CocoLoweringPattern):
    """`coco.all_reduce` → `coco_gpu.nccl_all_reduce`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: coco.AllReduceOp, rewriter: PatternRewriter
    ) -> None:
        host, source = self.lowering.buffer(op.operand)
        more, out = self.lowering.result_buffer(op, op.result)
        call = NcclAllReduceOp(source, out, op.reduction)
        replace_with_buffers(rewriter, op, [*host, *more, call], [out])


@dataclass
class LowerUpdate(CocoLoweringPattern):
    """`coco.update %p, %v` → nothing when `%v`'s producer wrote `%p`'s
    buffer, else `memref.copy` of `%v` into it."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: coco.UpdateOp, rewriter: PatternRewriter) -> None:
        host, target = self.lowering.buffer(op.param)
        more, source = self.lowering.buffer(op.value)
        if source is target:
            rewriter.erase(op)
            return
        rewriter.replace(op, [*host, *more, memref.CopyOp(source, target)], [])


@dataclass
class LowerReturn(CocoLoweringPattern):
    """`func.return %v...` of a converted function → copies of the results
    not written in place into the out-parameters, then `func.return`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: func.ReturnOp, rewriter: PatternRewriter) -> None:
        function = op.parent_op()
        if not isinstance(function, func.FuncOp):
            return
        params = self.lowering.out_params.get(function)
        if params is None or not op.arguments:
            return
        host: list[Operation] = []
        for value, param in zip(op.arguments, params):
            more, source = self.lowering.buffer(value)
            if source is param:
                continue
            host += [*more, memref.CopyOp(source, param)]
        rewriter.replace(op, [*host, func.ReturnOp()], [])


# ============================================================================
# The pass
# ============================================================================


def patterns(lowering: Lowering) -> list[RewritePattern]:
    from coconet_ir.lowering.fused_collectives import LowerFusedCollective

    return [
        LowerFusedCollective(lowering),
        LowerElementwise(lowering),
        LowerAllReduce(lowering),
        LowerUpdate(lowering),
        LowerReturn(lowering),
    ]


def bufferize_function(lowering: Lowering, function: func.FuncOp) -> None:
    """Arguments become buffers (cast back to coco values for the ops still to
    be lowered), results trailing out-parameters; the coco signature stays as
    the `coco_gpu.entry` attribute."""
    block = function.body.block
    original = function.function_type
    entry: list[Operation] = []
    for old in list(block.args):
        if not isinstance(old.type, TensorType):
            continue
        new = block.insert_arg(buffer_type(old.type, lowering.world), len(block.args))
        new.name_hint = old.name_hint
        cast = as_tensor(new, old.type)
        old.replace_all_uses_with(cast.results[0])
        entry.append(cast)
    for old in [a for a in block.args if isinstance(a.type, TensorType)]:
        block.erase_arg(old)
    outs: list[BlockArgument] = []
    for k, t in enumerate(original.outputs.data):
        assert isinstance(t, TensorType)
        arg = block.insert_arg(buffer_type(t, lowering.world), len(block.args))
        arg.name_hint = f"result{k}"
        outs.append(arg)
    lowering.out_params[function] = outs
    if entry:
        block.insert_ops_before(entry, block.first_op)  # type: ignore[arg-type]
    function.function_type = FunctionType.from_lists([a.type for a in block.args], [])
    function.attributes[ENTRY_ATTR] = original
    find_destinations(lowering, function)


def find_destinations(lowering: Lowering, function: func.FuncOp) -> None:
    """The buffer each updated or returned value should end in."""
    for op in function.body.block.ops:
        if isinstance(op, coco.UpdateOp):
            param = op.param.owner
            if isinstance(param, UnrealizedConversionCastOp) and isinstance(
                op.value, OpResult
            ):
                lowering.destinations.setdefault(op.value, param.inputs[0])
        elif isinstance(op, func.ReturnOp):
            for value, out in zip(op.arguments, lowering.out_params[function]):
                if isinstance(value, OpResult) and not isinstance(
                    value.owner, UnrealizedConversionCastOp
                ):
                    lowering.destinations.setdefault(value, out)


def insert_deallocs(function: func.FuncOp) -> None:
    """Free every buffer the function allocated, before it returns."""
    block = function.body.block
    allocs = [op for op in block.ops if isinstance(op, memref.AllocOp)]
    ret = block.last_op
    assert ret is not None
    for alloc in allocs:
        block.insert_op_before(memref.DeallocOp.get(alloc.memref), ret)


def remaining_coco(module: ModuleOp) -> Iterator[Operation]:
    for op in module.walk():
        if op.dialect_name() == "coco":
            yield op


@dataclass(frozen=True)
class ConvertCocoToGpu(ModulePass):
    """Lower a coco module to per-rank buffers, kernels in a `gpu.module`,
    NCCL and cuBLAS calls (docs/gpu.md §1)."""

    name = "convert-coco-to-gpu"

    world: int | None = None
    """The world size (default: the module's `coco.world_size`)."""

    threads: int = 256
    """Threads per block of every kernel launch."""

    def resolve_world(self, module: ModuleOp) -> int:
        declared = world_size(module)
        if self.world is not None and self.world < 1:
            raise ConversionRefused(
                f"{self.name}: world must be >= 1, got {self.world}"
            )
        if self.world is None and declared is None:
            raise ConversionRefused(
                f"{self.name} needs the world size: give the option world=N or "
                f"the module attribute {WORLD_SIZE_ATTR}",
                module,
            )
        if self.world is not None and declared is not None and self.world != declared:
            raise ConversionRefused(
                f"{self.name}: the option world={self.world} disagrees with the "
                f"module's {WORLD_SIZE_ATTR} = {declared}; they must be equal",
                module,
            )
        world = self.world if self.world is not None else declared
        assert world is not None
        return world

    def check(self, module: ModuleOp, world: int) -> None:
        """Refuse before changing anything."""
        if self.threads < 1:
            raise ConversionRefused(f"{self.name}: threads must be >= 1")
        for op in module.walk():
            for value in (*op.operands, *op.results):
                problem = divisibility_problem(value.type, world)
                if problem is not None:
                    raise ConversionRefused(
                        f"{self.name} cannot convert: {problem}", op
                    )
            for region in op.regions:
                for block in region.blocks:
                    for arg in block.args:
                        problem = divisibility_problem(arg.type, world)
                        if problem is not None:
                            raise ConversionRefused(
                                f"{self.name} cannot convert: {problem}", op
                            )

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        world = self.resolve_world(op)
        self.check(op, world)
        kernels = KernelModule.create(KERNELS_MODULE)
        lowering = Lowering(world, self.threads, kernels)
        functions = [
            f for f in op.ops if isinstance(f, func.FuncOp) and not f.is_declaration
        ]
        for function in functions:
            bufferize_function(lowering, function)
        PatternRewriteWalker(
            GreedyRewritePatternApplier(patterns(lowering)),  # type: ignore[arg-type]
            apply_recursively=True,
        ).rewrite_module(op)
        left = next(remaining_coco(op), None)
        if left is not None:
            raise CocoError(f"{self.name} has no lowering for this op", left)
        for function in functions:
            fold_casts(list(function.walk()))
            insert_deallocs(function)
        op.body.block.insert_op_before(kernels.module, op.body.block.first_op)  # type: ignore[arg-type]
        op.attributes["gpu.container_module"] = UnitAttr()
        op.attributes[WORLD_SIZE_ATTR] = IntegerAttr(world, i64)


# Unused imports kept for the later patterns of this module.
_ = (
    scf,
    gpu,
    GemmOp,
    NcclAllGatherOp,
    NcclAllToAllOp,
    NcclBroadcastOp,
    NcclRecvOp,
    NcclReduceScatterOp,
    NcclSendOp,
    chunk_dims,
    element_info,
    compute_type,
    constant,
    from_compute,
    to_compute,
    MemRefType,
)
