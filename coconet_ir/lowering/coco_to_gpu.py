"""convert-coco-to-gpu: coco programs to the device level (docs/gpu/device.md).

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
conversion's state (`Lowering`, in `coconet_ir.lowering.state`, which the
region lowerings build on too). A coco value and its buffer meet through
`builtin.unrealized_conversion_cast` until every coco op is gone.

A `coco.overlap` runs its chunks on two streams with events
(`coconet_ir.lowering.overlap`); every pattern is wrapped so that the ops
replacing a coco op marked `coco_gpu.stream = S` run on stream S. One lowering
is a fallback: `lower_fusion_with_collectives` (a `coco.fusion` holding
collectives that the fused kernel does not handle is inlined and lowered op
by op).

Preconditions: the world size is known (option `world`, or the module's
`coco.world_size`; both given, they must agree) and divides every sliced dim.
A refusal leaves the module unchanged.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar, cast

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import (
    DenseArrayBase,
    FunctionType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    UnitAttr,
    UnrealizedConversionCastOp,
    i64,
)
from xdsl.ir import Block, BlockArgument, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import PassFailedException

from coconet_ir.analysis.channels import PipelineChannels, channel_of
from coconet_ir.analysis.chunks import ChunkConflict, chunk_dims, step_of
from coconet_ir.analysis.costs import function_costs
from coconet_ir.analysis.fused_plan import DEFAULT_CHUNK_ELEMENTS, FusedPlan
from coconet_ir.costmodel.machines import machine as machine_preset
from coconet_ir.diagnostics import (
    CocoError,
    RemarkKind,
    function_name,
    location_text,
    remark,
    remarks_on,
    warn,
)
from coconet_ir.dialects import coco
from coconet_ir.dialects.coco import (
    ELEMENTWISE_OPS,
    WORLD_SIZE_ATTR,
    TensorType,
    divisibility_problem,
    element_info,
    enclosing_function,
)
from coconet_ir.dialects.coco_gpu import (
    BYTES_ATTR,
    ENTRY_ATTR,
    INDEX_BOUNDS_ATTR,
    RANKS_PER_NODE_ATTR,
    STREAM_ATTR,
    GemmOp,
    NcclAllGatherOp,
    NcclAllReduceOp,
    NcclAllToAllOp,
    NcclBroadcastOp,
    NcclRecvOp,
    NcclReduceScatterOp,
    NcclSendOp,
    stream_of,
)
from coconet_ir.ir import argument_location, declared_world_size, describe_argument
from coconet_ir.lowering.absorb import absorb_producers
from coconet_ir.lowering.bufferize import (
    alloc,
    as_tensor,
    buffer_type,
    element_count,
    fold_casts,
    local_shape,
)
from coconet_ir.lowering.embedding import (
    EmbeddingLookup,
    embedding_kernel,
    index_bounds,
)
from coconet_ir.lowering.fused_collectives import (
    fused_parameter_problem,
    lower_fused_collective,
)
from coconet_ir.lowering.kernels import (
    BucketCopy,
    KernelModule,
    bucket_copy,
    copy_block,
    emit_elementwise,
    flat_copy,
    kernel_users,
    matmul_kernel,
    printed_form,
    rank_major,
    reduce_kernel,
    transpose_copy,
)
from coconet_ir.lowering.overlap import OnItsStream, lower_overlap
from coconet_ir.lowering.per_peer import lower_per_peer, lower_shift
from coconet_ir.lowering.state import (
    CONVERSION,
    ElementContext,
    Lowering,
    Nodes,
    chunk_of,
    needs_rank_for_dropout,
    replace_with_buffers,
    result_type,
    tensor_of,
)
from coconet_ir.lowering.tile_collectives import (
    is_tile_fusion,
    lower_tile_collective,
    takes_prologue,
)
from coconet_ir.passes.base import move_contents

__all__ = [
    "KERNELS_MODULE",
    "CocoLoweringPattern",
    "ConversionRefused",
    "ConvertCocoToGpu",
    "lower_fused_elementwise",
    "lower_fusion_with_collectives",
    "patterns",
]

KERNELS_MODULE = "kernels"
"""The name of the `gpu.module` holding every kernel."""


class ConversionRefused(CocoError, PassFailedException):
    """convert-coco-to-gpu cannot convert this module; nothing was changed."""


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

    def rank_major(
        self,
        op: Operation,
        source: SSAValue,
        dest: SSAValue,
        shape: Sequence[int],
        dim: int,
        *,
        pack: bool,
    ) -> list[Operation]:
        """The `<op>_pack` (or `_unpack`) kernel's launch: `rank_major`."""
        lowering = self.lowering
        return rank_major(
            lowering.kernel_site(op, "pack" if pack else "unpack"),
            source,
            dest,
            shape,
            dim,
            self.world,
            pack=pack,
        )

    def packed(
        self,
        op: Operation,
        host: list[Operation],
        source: SSAValue,
        t: TensorType,
        shape: Sequence[int],
        dim: int,
    ) -> SSAValue:
        """`source` (a buffer of `t`, of `shape`) as the rank-major blocks
        along `dim` that NCCL sends: itself when `dim` is outermost, else a
        scratch buffer `host` packs it into."""
        if math.prod(shape[:dim]) == 1:
            return source
        packed = scratch(t, self.world)
        packed.memref.name_hint = "packed"
        host.append(packed)
        host += self.rank_major(op, source, packed.memref, shape, dim, pack=True)
        return packed.memref

    def unpacked(
        self,
        op: Operation,
        host: list[Operation],
        call: Callable[[SSAValue], Operation],
        out: SSAValue,
        t: TensorType,
        shape: Sequence[int],
        dim: int,
        hint: str,
    ) -> None:
        """The NCCL `call(buffer)` receiving rank-major blocks along `dim`
        into `out` (a buffer of `t`, of `shape`): directly when `dim` is
        outermost, else into a scratch buffer (named `hint`) unpacked into
        `out`."""
        if math.prod(shape[:dim]) == 1:
            host.append(call(out))
            return
        received = scratch(t, self.world)
        received.memref.name_hint = hint
        host += [received, call(received.memref)]
        host += self.rank_major(op, received.memref, out, shape, dim, pack=False)


def ready(op: Operation) -> bool:
    """Whether every operand's producer is lowered already: patterns wait for
    them, so that producers are lowered first (and write in place first)."""
    return not any(
        isinstance(v.owner, Operation) and v.owner.dialect_name() == "coco"
        for v in op.operands
    )


LoweredOp = TypeVar("LoweredOp", bound=Operation)


@dataclass
class BufferLowering(CocoLoweringPattern, Generic[LoweredOp]):
    """The lowering of an op of one result and of a type in `OPS`, once its
    operands' producers are lowered (`ready`): `emit` appends to `host` (the
    ops making the buffers) what computes the result's buffer `out` from the
    operands' buffers `sources`; the op's result becomes `out`."""

    OPS: ClassVar[tuple[type[Operation], ...]]

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, self.OPS) or not ready(op):
            return
        host, sources, out = self.lowering.operands_and_result(op, op.operands)
        self.emit(cast(LoweredOp, op), host, sources, out)
        replace_with_buffers(rewriter, op, host, [out])

    @abstractmethod
    def emit(
        self,
        op: LoweredOp,
        host: list[Operation],
        sources: list[SSAValue],
        out: SSAValue,
    ) -> None: ...


@dataclass
class LowerElementwise(CocoLoweringPattern):
    """Every elementwise op (and `coco.constant`): one grid-stride kernel over
    the result's local elements, loading each operand at the element its
    broadcast reads."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, (*ELEMENTWISE_OPS, coco.ConstantOp)) or not ready(op):
            return
        lowering = self.lowering
        result = result_type(op)
        host, buffers, out = lowering.operands_and_result(
            op, op.operands, reads_in_place=True
        )
        inputs = [(b, v.type) for b, v in zip(buffers, op.operands)]
        chunk = chunk_of(op)

        def body(
            b: Builder, load: Callable[[int], SSAValue], where: ElementContext
        ) -> list[SSAValue]:
            scalars = [load(k) for k in range(len(inputs))]
            return [
                emit_elementwise(
                    b,
                    op,
                    scalars,
                    lambda: where.global_index(result, chunk),
                    where.seed,
                )
            ]

        host += lowering.map_kernel(
            lowering.host(op),
            lowering.kernel_name(op),
            result,
            inputs,  # type: ignore[arg-type]
            [(out, result)],
            body,
            needs_rank=needs_rank_for_dropout(op),
            dropouts=[op] if isinstance(op, coco.DropoutOp) else [],
            form=printed_form(op, names=False, seeds=False, labels=False),
            generic=lowering.kind_name(op),
        )
        replace_with_buffers(rewriter, op, host, [out])


@dataclass
class LowerUpdate(CocoLoweringPattern):
    """`coco.update %p, %v` → nothing when `%v`'s producer wrote `%p`'s
    buffer, else a copy of `%v` into `%p` at the end of the function (ops after
    the update still read the parameter's old value); `finish_updates` emits
    the copies."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: coco.UpdateOp, rewriter: PatternRewriter) -> None:
        function = enclosing_function(op)
        if function is None or not ready(op):
            return
        host, target = self.lowering.buffer(op.param)
        more, source = self.lowering.buffer(op.value)
        if source is not target:
            rewriter.insert([*host, *more])
            pending = self.lowering.updates.setdefault(function, [])
            pending.append((source, target))
        rewriter.erase(op)


def finish_updates(function: func.FuncOp, copies: list[tuple[SSAValue, SSAValue]]):
    """The updates' copies, before `func.return`: all at once, as a parallel
    assignment (`update %q, %p` with `%p` updated too copies the old `%p`),
    so a copy out of a buffer comes before the copy into it; a cycle goes
    through a temporary buffer."""
    terminator = function.body.block.last_op
    assert terminator is not None
    ops: list[Operation] = []
    pending = list(copies)
    while pending:
        sources = {id(s) for s, _ in pending}
        free = next((c for c in pending if id(c[1]) not in sources), None)
        if free is None:  # a cycle: save one target's old value first
            _, target = pending[0]
            assert isinstance(target.type, MemRefType)
            saved = alloc(target.type.element_type, target.type.get_shape())
            saved.memref.name_hint = f"{target.name_hint or 'param'}_old"
            ops += [saved, memref.CopyOp(target, saved.memref)]
            pending = [(saved.memref if s is target else s, t) for s, t in pending]
            continue
        pending.remove(free)
        ops.append(memref.CopyOp(*free))
    function.body.block.insert_ops_before(ops, terminator)


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
        if params is None or not op.arguments or not ready(op):
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


@dataclass
class LowerMatmul(BufferLowering[coco.MatmulOp | coco.BatchMatmulOp]):
    """`coco.matmul` → `coco_gpu.gemm` of the per-rank buffers (cuBLAS), or a
    kernel for integers: every layout case of the dialect is a local matmul
    of what each rank holds. `coco.batch_matmul` likewise, its rank-3 `b`
    making the gemm one strided-batched call over the rank's groups."""

    OPS = (coco.MatmulOp, coco.BatchMatmulOp)

    def emit(self, op, host, sources, out) -> None:
        a, b = sources
        if element_info(tensor_of(op.result).element_type).is_float:
            host.append(GemmOp(a, b, out))
        else:
            host += matmul_kernel(self.lowering.kernel_site(op), a, b, out)


@dataclass
class LowerEmbedding(BufferLowering[coco.EmbeddingOp]):
    """`coco.embedding` → a kernel pooling each element of the rank's result
    block (coconet_ir/lowering/embedding.py)."""

    OPS = (coco.EmbeddingOp,)

    def emit(self, op, host, sources, out) -> None:
        tables, indices = sources
        host += embedding_kernel(
            self.lowering.kernel_site(op),
            EmbeddingLookup.of(op, self.world),
            tables,
            indices,
            out,
        )


@dataclass
class LowerReduction(BufferLowering[coco.ReduceOp | coco.NormOp]):
    """`coco.reduce` → a reduction kernel over its dims of the operand's
    per-rank buffer; `coco.norm` → one over all dims summing squares, then
    the root (docs/gpu/device.md, "Reductions")."""

    OPS = (coco.ReduceOp, coco.NormOp)

    def emit(self, op, host, sources, out) -> None:
        shape = local_shape(tensor_of(op.operand), self.world)
        norm = isinstance(op, coco.NormOp)
        host += reduce_kernel(
            self.lowering.kernel_site(op),
            sources[0],
            out,
            shape,
            list(range(len(shape))) if norm else sorted(op.reduced_dims),
            "sum" if norm else str(op.kind.data),
            square=norm,
            root=norm,
        )


@dataclass
class LowerTranspose(BufferLowering[coco.TransposeOp]):
    """`coco.transpose` → a copy kernel reading each element of the
    result's per-rank buffer at its permuted index (docs/gpu/device.md,
    "Transpose and reshape")."""

    OPS = (coco.TransposeOp,)

    def emit(self, op, host, sources, out) -> None:
        shape = local_shape(tensor_of(op.operand), self.world)
        site = self.lowering.kernel_site(op)
        host += transpose_copy(site, sources[0], out, shape, op.permutation)


@dataclass
class LowerReshape(BufferLowering[coco.ReshapeOp]):
    """`coco.reshape` → a copy of the per-rank buffer in order: the layout
    rule makes a rank's elements the same before and after."""

    OPS = (coco.ReshapeOp,)

    def emit(self, op, host, sources, out) -> None:
        count = math.prod(local_shape(tensor_of(op.operand), self.world))
        host += flat_copy(self.lowering.kernel_site(op), sources[0], out, count)


WORLD_ONE_IDENTITIES = (
    coco.AllSliceOp,
    coco.AllReduceOp,
    coco.ReduceScatterOp,
    coco.AllGatherOp,
    coco.BroadcastOp,
    coco.AllToAllOp,
)
"""The ops whose result, on one rank, is their operand's buffer as it is:
every rank's block is the whole value, the one rank's contribution the
reduction (docs/gpu/device.md, "World 1")."""


def world_one_source(value: SSAValue, world: int) -> SSAValue | None:
    """The operand `value` is on one rank (`WORLD_ONE_IDENTITIES`), or None."""
    producer = value.owner
    if world != 1 or not isinstance(producer, WORLD_ONE_IDENTITIES):
        return None
    if isinstance(producer, coco.BroadcastOp) and producer.root.value.data != 0:
        return None  # no such rank: NCCL's error, as the interpreter's
    return producer.operands[0]


@dataclass
class LowerWorldOneIdentity(CocoLoweringPattern):
    """On one rank a slice or a collective (`WORLD_ONE_IDENTITIES`) copies
    nothing: its result is its operand's buffer."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not op.results or world_one_source(op.results[0], self.world) is None:
            return
        if not ready(op):
            return
        host, source = self.lowering.buffer(op.operands[0])
        replace_with_buffers(rewriter, op, host, [source])


@dataclass
class LowerAllSlice(BufferLowering[coco.AllSliceOp]):
    """`coco.all_slice %a dim = D` → a kernel copying block `rank` along D."""

    OPS = (coco.AllSliceOp,)

    def emit(self, op, host, sources, out) -> None:
        lowering = self.lowering
        dim = op.dim.value.data
        block = local_shape(result_type(op), self.world)[dim]
        values = lowering.host(op)
        offset = values.times(values.rank(), block, "offset")
        host += copy_block(
            lowering.kernel_site(op),
            sources[0],
            out,
            tensor_of(op.operand).dims,
            dim,
            block,
            offset,
            extract=True,
        )


def bucket_rows(flat: TensorType, world: int) -> int:
    """The rows of a bucket's buffer on one rank: one per rank of a
    replicated or local bucket (its rank-major blocks), one for a rank's
    block of a sliced one."""
    return 1 if flat.layout.is_sliced else world


MAX_COPY_ARGS = 256
"""The most buffers one bucket-copy launch takes (2 KB of pointers, half of
CUDA's 4 KB parameter limit before 12.1)."""


def bucket_run(op: coco.ConcatOp | coco.SplitOp) -> list[Operation]:
    """`op` and the `coco.concat`s (or `coco.split`s) right after it whose
    operands are lowered: the buckets `coco-bucket` made together (one
    optimizer bucket's gradients, weights and moments), copied together."""
    run: list[Operation] = [op]
    after = op.next_op
    while (
        isinstance(after, type(op))
        and ready(after)
        and stream_of(after) == stream_of(op)
    ):
        run.append(after)
        after = after.next_op
    return run


def copy_launches(
    lowering: Lowering, op: Operation, buckets: Sequence[BucketCopy], pack: bool
) -> list[Operation]:
    """The host ops copying `buckets`: launches of at most MAX_COPY_ARGS
    buffers each, a bucket of more pieces split across launches."""
    launches: list[list[BucketCopy]] = [[]]
    used = 0
    for part in (p for b in buckets for p in b.parts(MAX_COPY_ARGS)):
        size = 1 + len(part.pieces)
        if launches[-1] and used + size > MAX_COPY_ARGS:
            launches.append([])
            used = 0
        launches[-1].append(part)
        used += size
    host: list[Operation] = []
    for parts in launches:
        host += bucket_copy(
            lowering.kernel_site(op, "concat" if pack else "split"),
            parts,
            pack=pack,
        )
    return host


@dataclass
class LowerBucketCopies(CocoLoweringPattern):
    """`coco.concat` → one kernel copying every operand into its place in
    the flat bucket; `coco.split` → one kernel copying every piece out of
    the flat bucket (into an updated parameter's buffer when it may). The
    concats (splits) right after it go in the same launch (at most
    MAX_COPY_ARGS buffers a launch)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: coco.ConcatOp | coco.SplitOp, rewriter: PatternRewriter
    ) -> None:
        if not ready(op):
            return
        pack = isinstance(op, coco.ConcatOp)
        host: list[Operation] = []
        buckets: list[BucketCopy] = []
        run = bucket_run(op)
        for each in run:
            more, bucket = self.bucket(each)
            host += more
            buckets.append(bucket)
        host += copy_launches(self.lowering, op, buckets, pack=pack)
        results = [[b.flat] if pack else list(b.pieces) for b in buckets]
        replace_run(rewriter, run, host, results)

    def bucket(self, op: Operation) -> tuple[list[Operation], BucketCopy]:
        """The host ops making the buffers of a concat or split `op`, and
        the bucket copy between them."""
        lowering = self.lowering
        if isinstance(op, coco.ConcatOp):
            host, pieces, out = lowering.operands_and_result(op, op.pieces)
            rows = bucket_rows(result_type(op), self.world)
            return host, BucketCopy(out, pieces, rows)
        assert isinstance(op, coco.SplitOp)
        host, flat = lowering.buffer(op.flat)
        more, outs = lowering.result_buffers(op)
        rows = bucket_rows(tensor_of(op.flat), self.world)
        return [*host, *more], BucketCopy(flat, outs, rows)


def replace_run(
    rewriter: PatternRewriter,
    run: Sequence[Operation],
    host: list[Operation],
    results: Sequence[Sequence[SSAValue]],
) -> None:
    """Replace the ops of `run` (consecutive) by the host ops, placed where
    the first is, and each op's results by (casts of) its buffers."""
    for op, buffers in reversed(list(zip(run[1:], results[1:]))):
        replace_with_buffers(rewriter, op, [], list(buffers))
    replace_with_buffers(rewriter, run[0], host, list(results[0]))


def scratch(t: TensorType, world: int) -> memref.AllocOp:
    """A flat scratch buffer of the size of a rank's buffer of `t`."""
    return alloc(t.element_type, [element_count(t, world)])


NCCL_CALLS: dict[type[Operation], Callable[[Any, SSAValue, SSAValue], Operation]] = {
    coco.AllReduceOp: lambda op, source, out: NcclAllReduceOp(
        source, out, op.reduction
    ),
    coco.BroadcastOp: lambda op, source, out: NcclBroadcastOp(
        source, out, op.root.value.data
    ),
}
"""The collectives that are one NCCL call from the operand's buffer into
the result's: `(op, source, out)` → the call."""


@dataclass
class LowerNcclCall(BufferLowering[Operation]):
    """`coco.all_reduce` → `coco_gpu.nccl_all_reduce`; `coco.broadcast root
    = K` → `coco_gpu.nccl_broadcast` (`NCCL_CALLS`). On several nodes an
    all-reduce the cost model predicts faster so is hierarchical
    (`hierarchical_all_reduce`)."""

    OPS = tuple(NCCL_CALLS)

    def emit(self, op, host, sources, out) -> None:
        if isinstance(op, coco.AllReduceOp) and self.lowering.nodes.hierarchical(
            element_count(tensor_of(op.operand), self.world)
            * element_info(tensor_of(op.operand).element_type).bytes,
            element_count(tensor_of(op.operand), self.world),
            self.world,
        ):
            host += hierarchical_all_reduce(op, sources[0], out, self.lowering)
            return
        host.append(NCCL_CALLS[type(op)](op, sources[0], out))


def hierarchical_all_reduce(
    op: coco.AllReduceOp, source: SSAValue, out: SSAValue, lowering: Lowering
) -> list[Operation]:
    """An all-reduce over several nodes (docs/gpu/device.md, "Several
    nodes"): reduce-scatter inside the node into a scratch of 1/G of the
    buffer, all-reduce of it across the nodes (in place), all-gather inside
    the node into the result."""
    operand = tensor_of(op.operand)
    count = element_count(operand, lowering.world)
    part = alloc(operand.element_type, [count // lowering.nodes.ranks_per_node])
    reduction = op.reduction
    return [
        part,
        NcclReduceScatterOp(source, part, reduction, group="node"),
        NcclAllReduceOp(part, part, reduction, group="across"),
        NcclAllGatherOp(part, out, group="node"),
    ]


@dataclass
class LowerReduceScatter(BufferLowering[coco.ReduceScatterOp]):
    """`coco.reduce_scatter dim = D` → `coco_gpu.nccl_reduce_scatter`, after
    a pack kernel into rank-major blocks when D is not the outermost dim
    (NCCL scatters contiguous blocks of the flat buffer)."""

    OPS = (coco.ReduceScatterOp,)

    def emit(self, op, host, sources, out) -> None:
        operand = tensor_of(op.operand)
        dim = op.dim.value.data
        source = self.packed(op, host, sources[0], operand, operand.dims, dim)
        host.append(NcclReduceScatterOp(source, out, op.reduction))


@dataclass
class LowerAllGather(BufferLowering[coco.AllGatherOp]):
    """`coco.all_gather` of `sliced<D>` → `coco_gpu.nccl_all_gather`, then an
    unpack kernel from rank-major blocks when D is not the outermost dim."""

    OPS = (coco.AllGatherOp,)

    def emit(self, op, host, sources, out) -> None:
        result = result_type(op)
        dim = tensor_of(op.operand).layout.sliced_dim
        self.unpacked(
            op,
            host,
            lambda buffer: NcclAllGatherOp(sources[0], buffer),
            out,
            result,
            result.dims,
            dim,
            "gathered",
        )


@dataclass
class LowerAllToAll(BufferLowering[coco.AllToAllOp]):
    """`coco.all_to_all` `sliced<D>` → `sliced<E>`: pack the rank's block
    into rank-major blocks along E, `coco_gpu.nccl_all_to_all`, unpack the
    received blocks along D (each step skipped when its dim is outermost);
    D = E is a copy."""

    OPS = (coco.AllToAllOp,)

    def emit(self, op, host, sources, out) -> None:
        world = self.world
        operand, result = tensor_of(op.operand), result_type(op)
        source_dim, dim = operand.layout.sliced_dim, op.dim.value.data
        if source_dim == dim:
            host.append(memref.CopyOp(sources[0], out))
            return
        in_shape = local_shape(operand, world)
        source = self.packed(op, host, sources[0], operand, in_shape, dim)
        self.unpacked(
            op,
            host,
            lambda buffer: NcclAllToAllOp(source, buffer),
            out,
            result,
            local_shape(result, world),
            source_dim,
            "received",
        )


@dataclass
class LowerSendRecv(CocoLoweringPattern):
    """`coco.send %a to @S channel = C` → `coco_gpu.nccl_send` to rank `r` of
    stage @S on the channel (coconet_ir.analysis.channels); `coco.recv from
    @S channel = C` → a buffer and `coco_gpu.nccl_recv` from rank `r` of
    stage @S."""

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: coco.SendOp | coco.RecvOp, rewriter: PatternRewriter
    ) -> None:
        function = enclosing_function(op)
        if function is None or not ready(op):
            return
        channel = channel_of(op, function.sym_name.data)
        if isinstance(op, coco.SendOp):
            host, source = self.lowering.buffer(op.operand)
            call = NcclSendOp(source, channel.dest, channel.channel)
            rewriter.replace(op, [*host, call], [])
            return
        host, out = self.lowering.result_buffer(op, op.result)
        call = NcclRecvOp(out, channel.source, channel.channel)
        replace_with_buffers(rewriter, op, [*host, call], [out])


# ----------------------------------------------------------------------------
# Regions
# ----------------------------------------------------------------------------


FUSIBLE = (*ELEMENTWISE_OPS, coco.ConstantOp, coco.AllSliceOp)
"""What one fused elementwise kernel computes (an all_slice only of a region
input: it reads the input at the rank's block)."""


def fused_domain(lowering: Lowering, op: coco.FusionOp) -> TensorType | None:
    """The type whose elements one kernel computing the whole elementwise
    region runs over (its largest output), or None when the region is not an
    elementwise chain every value of which that kernel can index."""
    body = [o for o in op.block.ops if not isinstance(o, coco.YieldOp)]
    for inner in body:
        if not isinstance(inner, FUSIBLE):
            return None
        if isinstance(inner, coco.AllSliceOp) and not isinstance(
            inner.operand, BlockArgument
        ):
            return None
    outputs = [tensor_of(v) for v in op.yield_op.arguments]
    if not outputs:
        return None
    domain = max(outputs, key=lambda t: element_count(t, lowering.world))
    values = [*op.block.args, *(r for o in body for r in o.results)]
    try:
        for value in values:
            if value.uses:
                lowering.plan(tensor_of(value), domain)
    except CocoError:
        return None
    return domain


def lower_fused_elementwise(
    lowering: Lowering,
    op: coco.FusionOp,
    domain: TensorType,
    rewriter: PatternRewriter,
) -> None:
    """A `coco.fusion` of elementwise ops → ONE kernel computing the chain at
    each element of `domain` (every output, rounded after each op)."""
    used = [a for a in op.block.args if a.uses]
    host, buffers = lowering.buffers([op.inputs[a.index] for a in used])
    slot = {a: k for k, a in enumerate(used)}
    outputs: list[tuple[SSAValue, TensorType]] = []
    for result in op.results:
        t = tensor_of(result)
        more, out = lowering.result_buffer(
            op, result, reads_in_place=lowering.is_identity(t, domain)
        )
        host += more
        outputs.append((out, t))
    body_ops = [o for o in op.block.ops if not isinstance(o, coco.YieldOp)]
    needs_rank = any(needs_rank_for_dropout(o) for o in body_ops) or any(
        lowering.needs_rank(tensor_of(r), domain) for o in body_ops for r in o.results
    )

    def body(
        b: Builder, load: Callable[[int], SSAValue], where: ElementContext
    ) -> list[SSAValue]:
        scalars: dict[SSAValue, SSAValue] = {}

        def value_at(value: SSAValue) -> SSAValue:
            if value in scalars:
                return scalars[value]
            if isinstance(value, BlockArgument):
                found = load(slot[value])
            else:
                inner = value.owner
                assert isinstance(inner, Operation)
                if isinstance(inner, coco.AllSliceOp):
                    found = value_at(inner.operand)
                else:
                    operands = [value_at(v) for v in inner.operands]
                    t = tensor_of(value)
                    chunk = chunk_of(inner)
                    found = emit_elementwise(
                        b,
                        inner,
                        operands,
                        lambda: where.global_index(t, chunk),
                        where.seed,
                    )
            scalars[value] = found
            return found

        return [value_at(v) for v in op.yield_op.arguments]

    inputs = [(buf, tensor_of(a)) for buf, a in zip(buffers, used)]
    host += lowering.map_kernel(
        lowering.host(op),
        lowering.kernel_name(op, "fusion"),
        domain,
        inputs,
        outputs,
        body,
        needs_rank=needs_rank,
        dropouts=[o for o in body_ops if isinstance(o, coco.DropoutOp)],
        form=printed_form(op.body, names=False, seeds=False, labels=False),
        generic=lowering.kind_name(op, "fusion"),
    )
    replace_with_buffers(rewriter, op, host, [out for out, _ in outputs])


def lower_fusion_with_collectives(
    lowering: Lowering, op: coco.FusionOp, rewriter: PatternRewriter
) -> None:
    """FALLBACK for a `coco.fusion` holding collectives (reduce_scatter,
    all_gather, send): its body is inlined and lowered op by op (NCCL calls
    and kernels on stream 0). The fused collective kernel (peer pointers and
    signals) replaces this function."""
    stream = op.attributes.get(STREAM_ATTR)
    if stream is not None:
        for inner in op.block.ops:
            inner.attributes[STREAM_ATTR] = stream
    for result, value in zip(op.results, op.yield_op.arguments):
        destination = lowering.destinations.pop(result, None)
        if destination is not None and isinstance(value, OpResult):
            lowering.destinations.setdefault(value, destination)
    terminator = op.yield_op
    rewriter.inline_block(op.block, InsertPoint.before(op), list(op.inputs))
    yielded = list(terminator.arguments)  # the inputs, where an argument was
    rewriter.erase(terminator)
    rewriter.replace(op, [], yielded)


@dataclass
class LowerFusion(CocoLoweringPattern):
    """`coco.fusion`: an elementwise region → one kernel; a region with
    reduce_scatters → one fused collective kernel
    (`lowering/fused_collectives.py`) when its plan allows, else
    `lower_fusion_with_collectives`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: coco.FusionOp, rewriter: PatternRewriter) -> None:
        if not ready(op):
            return
        # The remark on one kernel follows its lowering, which detaches `op`:
        # where it was is taken first.
        where = (location_text(op), function_name(op)) if remarks_on() else None
        domain = fused_domain(self.lowering, op)
        if domain is not None:
            lower_fused_elementwise(self.lowering, op, domain, rewriter)
            one_kernel_remark(where, "an elementwise kernel")
            return
        if lower_tile_collective(self.lowering, op, rewriter):
            one_kernel_remark(where, "a tile kernel (docs/fused-operators.md)")
            return
        if lower_fused_collective(self.lowering, op, rewriter):
            one_kernel_remark(where, "a fused collective kernel")
            return
        why = why_not_one_kernel(self.lowering, op)
        remark(RemarkKind.MISSED, CONVERSION, "OneKernel", why, op)
        warn(
            f"lowered op by op (kernels and library calls), not as one kernel: {why}",
            op,
        )
        lower_fusion_with_collectives(self.lowering, op, rewriter)


def one_kernel_remark(where: tuple[str | None, str | None] | None, kernel: str) -> None:
    """A passed remark: the fusion at `where` (its location and function) is
    lowered as one `kernel`."""
    if where is not None:
        location, function = where
        message = f"lowered as one kernel: {kernel}"
        kind = RemarkKind.PASSED
        remark(kind, CONVERSION, "OneKernel", message, location, function=function)


def why_not_one_kernel(lowering: Lowering, op: coco.FusionOp) -> str:
    """Why none of the one-kernel lowerings takes the fusion `op`, naming the
    ops that forced it: what the fused collective kernel's plan refuses, else
    the region's ops that are not elementwise."""
    if any(isinstance(o, coco.ReduceScatterOp) for o in op.block.ops):
        plan = FusedPlan.of(op, lowering.world, lowering.fused_chunk)
        if isinstance(plan, str):
            return f"the fused collective kernel refuses it: it {plan}"
        problem = fused_parameter_problem(lowering, plan)
        if problem is not None:
            return f"the fused collective kernel {problem} (coco-bucket takes fewer)"
    kept = [o.name for o in op.block.ops if not isinstance(o, (*FUSIBLE, coco.YieldOp))]
    if kept:
        names = ", ".join(f"'{name}'" for name in dict.fromkeys(kept))
        return (
            f"it holds {names}, in a form no tile kernel or fused collective "
            f"kernel takes at world {lowering.world} (docs/fused-operators.md)"
        )
    return "no one kernel indexes every value of the region over its largest output"


DELEGATED: dict[type[Operation], Callable[[Lowering, Any, PatternRewriter], None]] = {
    # K chunks on two streams with events
    coco.OverlapOp: lower_overlap,
    # a peer copy of the rank's buffer to rank r - K with credit and arrival
    # flags
    coco.ShiftOp: lower_shift,
    # N unrolled steps on three streams, the gathered blocks and
    # reduce-scattered partials moved by peer copies
    coco.PerPeerOp: lower_per_peer,
}
"""The ops a module of their own lowers (`coconet_ir.lowering.overlap`,
`coconet_ir.lowering.per_peer`): op → its lowering."""


@dataclass
class LowerDelegated(CocoLoweringPattern):
    """`coco.overlap`, `coco.shift`, `coco.per_peer` → their lowerings
    (`DELEGATED`)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        lower = DELEGATED.get(type(op))
        if lower is not None and ready(op):
            lower(self.lowering, op, rewriter)


@dataclass
class ConvertedOps(RewritePattern):
    """Tries `inner` only on the ops the conversion's patterns convert (coco
    ops and `func.return`): the walker also visits every host op the lowering
    creates, tens for each coco op, and trying the patterns on each of them
    was a tenth of the conversion's time."""

    inner: RewritePattern

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if op.dialect_name() == "coco" or isinstance(op, func.ReturnOp):
            self.inner.match_and_rewrite(op, rewriter)


def patterns(lowering: Lowering) -> list[RewritePattern]:
    """The conversion's patterns, sharing `lowering`."""
    kinds: list[type[CocoLoweringPattern]] = [
        LowerWorldOneIdentity,
        LowerElementwise,
        LowerMatmul,
        LowerEmbedding,
        LowerReduction,
        LowerTranspose,
        LowerReshape,
        LowerAllSlice,
        LowerBucketCopies,
        LowerNcclCall,
        LowerReduceScatter,
        LowerAllGather,
        LowerAllToAll,
        LowerSendRecv,
        LowerFusion,
        LowerDelegated,
        LowerUpdate,
        LowerReturn,
    ]
    return [kind(lowering) for kind in kinds]


def bufferize_function(lowering: Lowering, function: func.FuncOp) -> None:
    """Arguments become buffers (cast back to coco values for the ops still to
    be lowered), results trailing out-parameters; the coco signature stays as
    the `coco_gpu.entry` attribute."""
    block = function.body.block
    original = function.function_type
    costs = function_costs(function, lowering.world)
    if costs.message_bytes or costs.bytes_sent:
        function.attributes[BYTES_ATTR] = DenseArrayBase.from_list(
            i64, [costs.message_bytes, costs.bytes_sent]
        )
    # One new block, its arguments made at once: the other arguments, then
    # a buffer for each tensor argument, then the out-parameters (adding and
    # erasing arguments one by one renumbers the others: quadratic in the
    # thousands of arguments of a model's optimizer step).
    kept = [a for a in block.args if not isinstance(a.type, TensorType)]
    tensors = [a for a in block.args if isinstance(a.type, TensorType)]
    bounds = index_bounds(function)
    if bounds:  # one per argument of the converted function (out-parameters: 0)
        per_argument = [bounds.get(a.index, 0) for a in [*kept, *tensors]]
        per_argument += [0] * len(original.outputs)
        function.attributes[INDEX_BOUNDS_ATTR] = DenseArrayBase.from_list(
            i64, per_argument
        )
    results = list(original.outputs.data)
    body = Block(
        arg_types=[
            *(a.type for a in kept),
            *(buffer_type(tensor_of(a), lowering.world) for a in tensors),
            *(buffer_type(t, lowering.world) for t in results),  # type: ignore[arg-type]
        ]
    )
    entry: list[Operation] = []
    for old, new in zip([*kept, *tensors], body.args):
        new.name_hint = old.name_hint
        if isinstance(old.type, TensorType):
            cast = as_tensor(new, old.type)
            old.replace_all_uses_with(cast.results[0])
            entry.append(cast)
        else:
            old.replace_all_uses_with(new)
    outs = list(body.args[len(kept) + len(tensors) :])
    for k, arg in enumerate(outs):
        arg.name_hint = f"result{k}"
    for op in list(block.ops):
        op.detach()
        body.add_op(op)
    function.body.insert_block_before(body, block)
    function.body.detach_block(block).erase()
    block = body
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
                # On one rank an identity's operand is the returned value.
                while (source := world_one_source(value, lowering.world)) is not None:
                    lowering.destinations.setdefault(value, out)
                    value = source
                if isinstance(value, OpResult) and not isinstance(
                    value.owner, UnrealizedConversionCastOp
                ):
                    lowering.destinations.setdefault(value, out)


def drop_self_copies(function: func.FuncOp) -> None:
    """Erase the copies of a buffer onto itself (an overlap's output chunk
    its producer wrote in place)."""
    for op in list(function.body.block.ops):
        if isinstance(op, memref.CopyOp) and op.source is op.destination:
            op.detach()
            op.erase()


def insert_deallocs(function: func.FuncOp) -> None:
    """Free every buffer the function allocated, before it returns."""
    block = function.body.block
    allocs = [op for op in block.ops if isinstance(op, memref.AllocOp)]
    ret = block.last_op
    assert ret is not None
    for made in allocs:
        block.insert_op_before(memref.DeallocOp.get(made.memref), ret)


def remaining_coco(module: ModuleOp) -> Iterator[Operation]:
    for op in module.walk():
        if op.dialect_name() == "coco":
            yield op


@dataclass(frozen=True)
class ConvertCocoToGpu(ModulePass):
    """Lower a coco module to per-rank buffers, kernels in a `gpu.module`,
    NCCL and cuBLAS calls (docs/gpu/device.md)."""

    name = CONVERSION

    world: int | None = None
    """The world size (default: the module's `coco.world_size`)."""

    threads: int = 256
    """Threads per block of every kernel launch."""

    fused_chunk: int = DEFAULT_CHUNK_ELEMENTS
    """Elements of a rank's slice per pipelined chunk of a fused collective
    kernel (docs/gpu/fused.md)."""

    ranks_per_node: int = 0
    """Ranks of a stage on one node (0: all of them; docs/gpu/device.md,
    "Several nodes"). Fewer than the world: no peer memory across nodes, and
    all-reduces hierarchical where `machine`'s cost model says so."""

    machine: str = "h100x16-ib"
    """The cost model's machine that chooses between a flat and a
    hierarchical all-reduce on several nodes."""

    def nodes_of(self, world: int) -> Nodes:
        return Nodes(self.ranks_per_node or world, machine_preset(self.machine))

    def resolve_world(self, module: ModuleOp) -> int:
        declared = declared_world_size(module)
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
        if self.ranks_per_node < 0 or (
            self.ranks_per_node and world % self.ranks_per_node
        ):
            raise ConversionRefused(
                f"{self.name}: ranks_per_node must divide the world ({world}), got "
                f"{self.ranks_per_node}"
            )
        nodes = self.nodes_of(world)
        if nodes.ranks_per_node < world:
            for op in module.walk():
                reason = nodes.problem(op, world)
                if reason is not None:
                    raise ConversionRefused(f"{self.name} cannot convert: {reason}", op)
        if self.threads < 1:
            raise ConversionRefused(
                f"{self.name}: threads must be >= 1, got {self.threads}"
            )
        if self.fused_chunk < 1:
            raise ConversionRefused(
                f"{self.name}: fused_chunk must be >= 1, got {self.fused_chunk}"
            )
        for op in module.walk():
            for arg in (a for r in op.regions for b in r.blocks for a in b.args):
                problem = divisibility_problem(arg.type, world)
                if problem is not None:
                    raise ConversionRefused(
                        f"{self.name} cannot convert: {describe_argument(arg)}: "
                        f"{problem}",
                        argument_location(arg),
                    )
            reason = self.problem(op, world)
            if reason is not None:
                raise ConversionRefused(f"{self.name} cannot convert: {reason}", op)
        for op, reason in PipelineChannels.of(module).problems():
            raise ConversionRefused(f"{self.name} cannot convert: {reason}", op)

    @staticmethod
    def problem(op: Operation, world: int) -> str | None:
        """Why `op` cannot be converted on `world` ranks, or None (its
        regions' arguments are checked by `check`, located at themselves)."""
        for value in (*op.operands, *op.results):
            problem = divisibility_problem(value.type, world)
            if problem is not None:
                return problem
        if isinstance(op, coco.UpdateOp) and not (
            isinstance(op.param, BlockArgument)
            and isinstance(op.param.owner.parent_op(), func.FuncOp)
        ):
            return "the updated parameter must be an argument of the function"
        if isinstance(op, coco.OverlapOp):
            parent = op.parent_op()
            while parent is not None:
                if isinstance(parent, coco.OverlapOp):
                    return "a coco.overlap nested in another is not supported"
                parent = parent.parent_op()
            found = chunk_dims(op.block, list(op.input_dims.get_values()))
            if found.problem is not None:
                return f"its body cannot run chunk by chunk: {found.problem}"
        if isinstance(op, coco.PerPeerOp):
            if not isinstance(op.parent_op(), func.FuncOp):
                return "a coco.per_peer must be directly in a function"
            try:
                step_of(op, world)
            except ChunkConflict as err:
                return f"its body cannot run per peer on {world} ranks: {err}"
        if (
            isinstance(op.parent_op(), func.FuncOp)
            and any(isinstance(t, TensorType) for t in op.operand_types)
            and op.dialect_name() not in ("coco", "func")
        ):
            return f"'{op.name}' on coco tensors has no lowering"
        return None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        world = self.resolve_world(op)
        self.check(op, world)
        converted = op.clone()
        self.convert(converted, world)
        move_contents(op, converted)

    def convert(self, op: ModuleOp, world: int) -> None:
        """Convert `op` (a copy of the module: whatever goes wrong, the
        module is left as it was)."""
        kernels = KernelModule.create(KERNELS_MODULE)
        lowering = Lowering(
            world, self.threads, kernels, self.fused_chunk, self.nodes_of(world)
        )
        functions = [
            f for f in op.ops if isinstance(f, func.FuncOp) and not f.is_declaration
        ]
        absorb_producers(
            op,
            keep=lambda fusion: is_tile_fusion(fusion, world),
            prologue=lambda fusion, producer: takes_prologue(fusion, producer, world),
        )
        for function in functions:
            bufferize_function(lowering, function)
        PatternRewriteWalker(
            # One OnItsStream around them all: an op's stream is looked up once
            # per visit, not once per pattern tried; and only for the ops the
            # patterns convert (2.47 -> 2.23 s for 167 Megatron layers).
            ConvertedOps(OnItsStream(GreedyRewritePatternApplier(patterns(lowering)))),  # type: ignore[arg-type]
            apply_recursively=True,
        ).rewrite_module(op)
        left = next(remaining_coco(op), None)
        if left is not None:
            raise CocoError(f"{self.name} has no lowering for this op", left)
        for host in lowering.hosts.values():
            host.drop_unused()
        for function in functions:
            fold_casts(list(function.walk()))
            finish_updates(function, lowering.updates.get(function, []))
            fold_casts(list(function.walk()))
            drop_self_copies(function)
            insert_deallocs(function)
        launches = kernel_users(op)
        kernels.deduplicate(launches)
        kernels.renumber(launches)
        op.body.block.insert_op_before(kernels.module, op.body.block.first_op)  # type: ignore[arg-type]
        others = {
            k: v
            for k, v in op.attributes.items()
            if k not in ("gpu.container_module", WORLD_SIZE_ATTR)
        }
        op.attributes = {
            "gpu.container_module": UnitAttr(),
            WORLD_SIZE_ATTR: IntegerAttr(world, i64),
            **others,
        }
        if lowering.nodes.ranks_per_node < world:
            op.attributes[RANKS_PER_NODE_ATTR] = IntegerAttr(
                lowering.nodes.ranks_per_node, i64
            )
