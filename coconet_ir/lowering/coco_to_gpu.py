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
from abc import ABC
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, func, memref
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
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import PassFailedException

from coconet_ir.analysis.channels import PipelineChannels, channel_of
from coconet_ir.analysis.chunks import ChunkConflict, chunk_dims, step_of
from coconet_ir.analysis.costs import function_costs
from coconet_ir.analysis.fused_plan import DEFAULT_CHUNK_ELEMENTS
from coconet_ir.diagnostics import CocoError, value_name
from coconet_ir.dialects import (
    coco,
    gpu,  # xDSL's gpu, in MLIR's syntax
)
from coconet_ir.dialects.coco import (
    ELEMENTWISE_OPS,
    WORLD_SIZE_ATTR,
    TensorType,
    divisibility_problem,
    element_info,
    label_of,
)
from coconet_ir.dialects.coco_gpu import (
    BYTES_ATTR,
    ENTRY_ATTR,
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
from coconet_ir.ir import declared_world_size
from coconet_ir.lowering.absorb import absorb_producers
from coconet_ir.lowering.bufferize import (
    alloc,
    as_tensor,
    buffer_of,
    buffer_type,
    element_count,
    fold_casts,
    local_shape,
)
from coconet_ir.lowering.embedding import EmbeddingLookup, embedding_kernel
from coconet_ir.lowering.host import HostValues
from coconet_ir.lowering.kernels import (
    BucketCopy,
    Indexer,
    KernelModule,
    as_i64,
    bucket_copy,
    copy_block,
    emit_elementwise,
    flat_args,
    grid_stride_loop,
    index_constant,
    kernel_users,
    launch,
    linear,
    matmul_kernel,
    printed_form,
    rank_major,
    reduce_kernel,
)
from coconet_ir.lowering.overlap import OnItsStream, lower_overlap
from coconet_ir.passes.base import move_contents

__all__ = [
    "CHUNK_ATTR",
    "KERNELS_MODULE",
    "CocoLoweringPattern",
    "ConversionRefused",
    "ConvertCocoToGpu",
    "ElementContext",
    "Lowering",
    "lower_fused_elementwise",
    "lower_fusion_with_collectives",
    "lower_overlap",
    "patterns",
    "replace_with_buffers",
]

index = IndexType()

CHUNK_ATTR = "coco_gpu.chunk"
"""On a dropout cloned into one chunk of a `coco.overlap` or one step of a
`coco.per_peer` (while lowering): `array<i64: DIM, INDEX, CHUNKS>` — its
operand is chunk INDEX of CHUNKS along DIM of the un-chunked value — or
`array<i64: DIM, STEP, CHUNKS, 1>` — chunk `(rank + STEP) mod CHUNKS`, known
only at run time —, so that its global index is kept."""


@dataclass(frozen=True)
class ChunkAt:
    """Where the chunk a cloned dropout runs on sits (`CHUNK_ATTR`): chunk
    `index` of `chunks` along `dim`, or with `rotating`, chunk `(rank + index)
    mod chunks` (step `index` of a per-peer region)."""

    dim: int
    index: int
    chunks: int
    rotating: bool = False

    def attribute(self) -> DenseArrayBase:
        values = [self.dim, self.index, self.chunks] + [1] * self.rotating
        return DenseArrayBase.from_list(i64, values)


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
    fused_chunk: int = DEFAULT_CHUNK_ELEMENTS
    """Elements per chunk of a fused collective kernel's slice."""
    destinations: dict[SSAValue, SSAValue] = field(
        default_factory=dict[SSAValue, SSAValue]
    )
    """coco value → the buffer its final value must be in (an updated
    parameter's or an out-parameter)."""
    out_params: dict[func.FuncOp, list[BlockArgument]] = field(
        default_factory=dict[func.FuncOp, list[BlockArgument]]
    )
    updates: dict[func.FuncOp, list[tuple[SSAValue, SSAValue]]] = field(
        default_factory=dict[func.FuncOp, list[tuple[SSAValue, SSAValue]]]
    )
    """The (value, parameter) buffer copies the updates of each function
    still need (emitted together by `finish_updates`)."""
    hosts: dict[func.FuncOp, HostValues] = field(
        default_factory=dict[func.FuncOp, HostValues]
    )

    def host(self, op: Operation) -> HostValues:
        """The shared host values (constants, the rank, grids, flat views) of
        the function `op` is in."""
        function = enclosing(op)
        assert function is not None
        found = self.hosts.get(function)
        if found is None:
            found = self.hosts[function] = HostValues(function.body.block, self.world)
        return found

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
            return [], destination
        assert isinstance(value.type, TensorType)
        made = alloc(value.type.element_type, local_shape(value.type, self.world))
        if value.name_hint:
            made.memref.name_hint = value.name_hint
        return [made], made.memref

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
        here = top_level(producer, top)
        uses = list(buffer.uses)
        for use in list(buffer.uses):
            if isinstance(use.operation, UnrealizedConversionCastOp):
                uses += [u for r in use.operation.results for u in r.uses]
        for use in uses:
            reader = use.operation
            if isinstance(reader, UnrealizedConversionCastOp) or (
                isinstance(reader, coco.UpdateOp) and use.index == 0
            ):
                continue  # a cast, or the update of this very parameter
            if isinstance(reader, memref.CopyOp) and use.index == 1:
                continue  # a copy into the buffer does not read it
            where = top_level(reader, top)
            if follows(where, here) or (where is here and not reads_in_place):
                return False
        return True

    # -- kernels -------------------------------------------------------------

    def kernel_name(self, op: Operation, kind: str | None = None) -> str:
        """`<function>_<label or kind>` (KernelModule adds `_<n>`)."""
        label = label_of(op)
        if label is None:
            return self.kind_name(op, kind)
        return f"{self.function_prefix(op)}_{label}"

    def kind_name(self, op: Operation, kind: str | None = None) -> str:
        """`<function>_<kind>`: the name of a kernel that ops of different
        labels launch (`KernelModule.cached`)."""
        return f"{self.function_prefix(op)}_{kind or op.name.removeprefix('coco.')}"

    def shared_kernel(
        self,
        op: Operation,
        kind: str,
        build: Callable[[str], gpu.FuncOp],
        *key: Hashable,
    ) -> gpu.FuncOp:
        """The kernel of what `op` computes on its types (its `printed_form`
        without value names, seeds and labels; `key` what else the kernel
        depends on), built by `build(name)` the first time and launched again
        by every op computing the same: its seeds and signal slots are
        arguments. Named after `op`'s label, or `<function>_<kind>` once
        ops of different labels share it (`KernelModule.cached`)."""
        name, generic = self.kernel_name(op, kind), self.kind_name(op, kind)
        form = printed_form(op, names=False, seeds=False, labels=False)
        return self.kernels.cached(
            (generic, form, self.threads, *key), lambda: build(name), name, generic
        )

    @staticmethod
    def function_prefix(op: Operation) -> str:
        function = enclosing(op)
        return function.sym_name.data if function is not None else "kernel"

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
        chunk: ChunkAt | None,
    ) -> SSAValue:
        """The global linear index (an i64) of the element of `value` the
        domain's element `indexer.flat` reads: its block offset when sliced,
        its chunk offset inside an overlap chunk or a per-peer step."""
        shape = local_shape(value, self.world)
        global_shape = list(value.dims)
        digits: list[SSAValue | int] = []
        plan = self.plan(value, domain)
        for a, axis in enumerate(plan):
            digit: SSAValue | int = (
                0 if axis.digit is None else indexer.digit(axis.digit)
            )
            sliced_here = value.layout.is_sliced and value.layout.sliced_dim == a
            if axis.rank_stride or sliced_here:
                # a replicated value read at the domain's block, or the rank's
                # own block of a sliced value
                assert rank is not None
                block = axis.rank_stride or shape[a]
                offset = b.insert(arith.MuliOp(rank, index_constant(b, block)))
                digit = (
                    offset.result
                    if isinstance(digit, int)
                    else b.insert(arith.AddiOp(digit, offset.result)).result
                )
            if chunk is not None and chunk.dim == a:
                global_shape[a] *= chunk.chunks
                digit = self.chunk_start(b, chunk, value.dims[a], digit, rank)
            digits.append(digit)
        return as_i64(b, linear(b, digits, global_shape))

    @staticmethod
    def chunk_start(
        b: Builder,
        chunk: ChunkAt,
        size: int,
        digit: SSAValue | int,
        rank: SSAValue | None,
    ) -> SSAValue | int:
        """`digit` moved to its chunk's place along the chunk dim (`size`
        elements a chunk): `+ index * size`, or `+ ((rank + index) mod
        chunks) * size` for a per-peer step."""
        if not chunk.rotating:
            start = chunk.index * size
            if isinstance(digit, int):
                return digit + start
            if not start:
                return digit
            return b.insert(arith.AddiOp(digit, index_constant(b, start))).result
        assert rank is not None
        c = b.insert(arith.AddiOp(rank, index_constant(b, chunk.index))).result
        c = b.insert(arith.RemUIOp(c, index_constant(b, chunk.chunks))).result
        start = b.insert(arith.MuliOp(c, index_constant(b, size))).result
        if isinstance(digit, int) and not digit:
            return start
        base = index_constant(b, digit) if isinstance(digit, int) else digit
        return b.insert(arith.AddiOp(base, start)).result

    def map_kernel(
        self,
        host: HostValues,
        name: str,
        domain: TensorType,
        inputs: Sequence[tuple[SSAValue, TensorType]],
        outputs: Sequence[tuple[SSAValue, TensorType]],
        body: Callable[
            [Builder, Callable[[int], SSAValue], ElementContext], list[SSAValue]
        ],
        needs_rank: bool = False,
        dropouts: Sequence[coco.DropoutOp] = (),
        form: Hashable | None = None,
        generic: str | None = None,
    ) -> list[Operation]:
        """Host ops launching a grid-stride kernel over the elements of
        `domain`: input `k` (a buffer and its coco type) is loaded when `body`
        asks for it (`load(k)`, at the element its broadcast reads), `body`
        computes the outputs' scalars, stored at each output's element.

        The seeds of `dropouts` (the body's) are i64 kernel arguments, so
        that `form` — what `body` computes, seeds left out (`printed_form`) —
        names the kernel: a kernel already built for the same form and types
        is launched again rather than built anew (every layer of a model).
        With `generic`, the name of the computation's kind, `form` leaves the
        ops' labels out: ops of different labels share the kernel, which
        is then named `generic` (`KernelModule.cached`)."""
        needs_rank = needs_rank or any(
            self.needs_rank(t, domain) for _, t in (*inputs, *outputs)
        )
        args: list[SSAValue] = []
        arg_specs: list[tuple[str, Attribute]] = [("n", index)]
        if needs_rank:
            args.append(host.rank())
            arg_specs.append(("rank", index))
        for dropout in dropouts:
            args.append(host.integer(dropout.seed.value.data, i64))
            arg_specs.append(("seed", i64))
        buffers = [buffer for buffer, _ in (*inputs, *outputs)]
        views, flats = flat_args(host, buffers)
        args += flats
        for k, (buffer, flat) in enumerate(zip(buffers, flats)):
            hint = buffer.name_hint or ("in" if k < len(inputs) else "out")
            arg_specs.append((hint, flat.type))

        def build() -> gpu.FuncOp:
            kernel, b = self.kernels.kernel(name, arg_specs)
            kernel_args = list(kernel.body.block.args)
            rank = kernel_args[1] if needs_rank else None
            seeds = kernel_args[1 + needs_rank :][: len(dropouts)]
            buffers = kernel_args[1 + needs_rank + len(dropouts) :]
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

            context = ElementContext(
                self, loop, indexer, domain, rank, dict(zip(dropouts, seeds))
            )
            results = body(loop, load, context)
            for (_, t), result, buffer in zip(outputs, results, buffers[len(inputs) :]):
                at = self.element_index(loop, indexer, t, domain, rank)
                loop.insert(
                    memref.StoreOp.get(result, buffer, [] if at is None else [at])
                )
            return kernel

        if form is None:
            kernel = build()
        else:
            key = (
                generic or name,
                form,
                domain,
                tuple(t for _, t in arg_specs),
                tuple(t for _, t in (*inputs, *outputs)),
            )
            kernel = self.kernels.cached(key, build, name, generic)
        count = element_count(domain, self.world)
        return [*views, *launch(host, self.kernels, kernel, count, args, self.threads)]


@dataclass
class ElementContext:
    """Where a map kernel's body is: what `global_index` needs."""

    lowering: Lowering
    b: Builder
    indexer: Indexer
    domain: TensorType
    rank: SSAValue | None
    seeds: dict[coco.DropoutOp, SSAValue] = field(
        default_factory=dict[coco.DropoutOp, SSAValue]
    )
    """The kernel's seed argument of each of the body's dropouts."""

    def global_index(self, value: TensorType, chunk: ChunkAt | None = None) -> SSAValue:
        return self.lowering.global_index(
            self.b, self.indexer, value, self.domain, self.rank, chunk
        )

    def seed(self, op: coco.DropoutOp) -> SSAValue:
        return self.seeds[op]


def chunk_of(op: Operation) -> ChunkAt | None:
    """The `coco_gpu.chunk` frame of a dropout cloned into an overlap chunk
    or a per-peer step."""
    attr = op.attributes.get(CHUNK_ATTR)
    if not isinstance(attr, DenseArrayBase):
        return None
    dim, chunk, chunks, *rotating = (int(v) for v in attr.get_values())
    return ChunkAt(dim, chunk, chunks, bool(rotating and rotating[0]))


def needs_rank_for_dropout(op: Operation) -> bool:
    """A dropout of a sliced value, or in a per-peer step, needs the rank for
    its global index."""
    if not isinstance(op, coco.DropoutOp):
        return False
    chunk = chunk_of(op)
    return tensor_of(op.result).layout.is_sliced or (
        chunk is not None and chunk.rotating
    )


def enclosing(op: Operation) -> func.FuncOp | None:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, func.FuncOp):
        parent = parent.parent_op()
    return parent


def follows(op: Operation, here: Operation) -> bool:
    """Whether `op` comes after `here` in their block. It steps from `here`
    both ways at once, so it costs the distance between them, not the length
    of the block (a function of many parameters asks it for each one)."""
    forward, backward = here.next_op, here.prev_op
    while forward is not None or backward is not None:
        if forward is op:
            return True
        if backward is op:
            return False
        forward = None if forward is None else forward.next_op
        backward = None if backward is None else backward.prev_op
    return False


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


def tensor_of(value: SSAValue) -> TensorType:
    assert isinstance(value.type, TensorType)
    return value.type


def ready(op: Operation) -> bool:
    """Whether every operand's producer is lowered already: patterns wait for
    them, so that producers are lowered first (and write in place first)."""
    return not any(
        isinstance(v.owner, Operation) and v.owner.dialect_name() == "coco"
        for v in op.operands
    )


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
        if not isinstance(op, (*ELEMENTWISE_OPS, coco.ConstantOp)) or not ready(op):
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
        function = enclosing(op)
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
class LowerMatmul(CocoLoweringPattern):
    """`coco.matmul` → `coco_gpu.gemm` of the per-rank buffers (cuBLAS), or a
    kernel for integers: every layout case of the dialect is a local matmul
    of what each rank holds. `coco.batch_matmul` likewise, its rank-3 `b`
    making the gemm one strided-batched call over the rank's groups."""

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: coco.MatmulOp | coco.BatchMatmulOp, rewriter: PatternRewriter
    ) -> None:
        if not ready(op):
            return
        lowering = self.lowering
        host, (a, b) = lowering.buffers([op.lhs, op.rhs])
        more, out = lowering.result_buffer(op, op.result)
        host += more
        if element_info(tensor_of(op.result).element_type).is_float:
            host.append(GemmOp(a, b, out))
        else:
            name = lowering.kernel_name(op)
            host += matmul_kernel(
                lowering.host(op), lowering.kernels, lowering.threads, name, a, b, out
            )
        replace_with_buffers(rewriter, op, host, [out])


@dataclass
class LowerEmbedding(CocoLoweringPattern):
    """`coco.embedding` → a kernel pooling each element of the rank's result
    block (coconet_ir/lowering/embedding.py)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: coco.EmbeddingOp, rewriter: PatternRewriter
    ) -> None:
        if not ready(op):
            return
        lowering = self.lowering
        host, (tables, indices) = lowering.buffers([op.tables, op.indices])
        more, out = lowering.result_buffer(op, op.result)
        host += more
        host += embedding_kernel(
            lowering.host(op),
            lowering.kernels,
            lowering.threads,
            lowering.kernel_name(op),
            EmbeddingLookup.of(op, lowering.world),
            tables,
            indices,
            out,
        )
        replace_with_buffers(rewriter, op, host, [out])


def lower_reduction(
    lowering: Lowering,
    rewriter: PatternRewriter,
    op: coco.ReduceOp | coco.NormOp,
    dims: Sequence[int] | None,
    kind: str,
) -> None:
    """`op` → a reduction kernel over `dims` (None: all, a norm) of its
    operand's per-rank buffer (docs/gpu.md, "Reductions")."""
    host, source = lowering.buffer(op.operand)
    more, out = lowering.result_buffer(op, op.result)
    shape = local_shape(tensor_of(op.operand), lowering.world)
    norm = dims is None
    host += more
    host += reduce_kernel(
        lowering.host(op),
        lowering.kernels,
        lowering.threads,
        lowering.kernel_name(op),
        source,
        out,
        shape,
        list(range(len(shape))) if dims is None else dims,
        kind,
        square=norm,
        root=norm,
    )
    replace_with_buffers(rewriter, op, host, [out])


@dataclass
class LowerReduce(CocoLoweringPattern):
    """`coco.reduce` → a reduction kernel."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: coco.ReduceOp, rewriter: PatternRewriter) -> None:
        if ready(op):
            dims = sorted(op.reduced_dims)
            lower_reduction(self.lowering, rewriter, op, dims, str(op.kind.data))


@dataclass
class LowerNorm(CocoLoweringPattern):
    """`coco.norm` → a reduction kernel summing squares, then the root."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: coco.NormOp, rewriter: PatternRewriter) -> None:
        if ready(op):
            lower_reduction(self.lowering, rewriter, op, None, "sum")


@dataclass
class LowerAllSlice(CocoLoweringPattern):
    """`coco.all_slice %a dim = D` → a kernel copying block `rank` along D."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: coco.AllSliceOp, rewriter: PatternRewriter) -> None:
        if not ready(op):
            return
        lowering = self.lowering
        dim = op.dim.value.data
        host, source = lowering.buffer(op.operand)
        more, out = lowering.result_buffer(op, op.result)
        block = local_shape(result_type(op), self.world)[dim]
        values = lowering.host(op)
        offset = values.times(values.rank(), block, "offset")
        host += more
        host += copy_block(
            values,
            lowering.kernels,
            lowering.threads,
            lowering.kernel_name(op),
            source,
            out,
            tensor_of(op.operand).dims,
            dim,
            block,
            offset,
            extract=True,
        )
        replace_with_buffers(rewriter, op, host, [out])


def bucket_rows(flat: TensorType, world: int) -> int:
    """The rows of a bucket's buffer on one rank: one per rank of a
    replicated or local bucket (its rank-major blocks), one for a rank's
    block of a sliced one."""
    return 1 if flat.layout.is_sliced else world


MAX_COPY_ARGS = 256
"""The most buffers one bucket-copy launch takes (2 KB of pointers, half of
CUDA's 4 KB parameter limit before 12.1; the emulator passes a launch's
arguments in a `std::tuple`, which g++ compiles in minutes at 500)."""


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
    values = lowering.host(op)
    for parts in launches:
        host += bucket_copy(
            values,
            lowering.kernels,
            lowering.threads,
            lowering.kernel_name(op, "concat" if pack else "split"),
            parts,
            pack=pack,
        )
    return host


@dataclass
class LowerConcat(CocoLoweringPattern):
    """`coco.concat` → one kernel copying every operand into its place in
    the flat bucket; the concats right after it go in the same launch (at
    most MAX_COPY_ARGS buffers a launch)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: coco.ConcatOp, rewriter: PatternRewriter) -> None:
        if not ready(op):
            return
        lowering = self.lowering
        host: list[Operation] = []
        buckets: list[BucketCopy] = []
        run = [o for o in bucket_run(op) if isinstance(o, coco.ConcatOp)]
        for concat in run:
            more, pieces = lowering.buffers(concat.pieces)
            host += more
            more, out = lowering.result_buffer(concat, concat.result)
            host += more
            buckets.append(
                BucketCopy(out, pieces, bucket_rows(result_type(concat), self.world))
            )
        host += copy_launches(lowering, op, buckets, pack=True)
        replace_run(rewriter, run, host, [[b.flat] for b in buckets])


@dataclass
class LowerSplit(CocoLoweringPattern):
    """`coco.split` → one kernel copying every piece out of the flat bucket
    (into an updated parameter's buffer when it may); the splits right after
    it go in the same launch (at most MAX_COPY_ARGS buffers a launch)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: coco.SplitOp, rewriter: PatternRewriter) -> None:
        if not ready(op):
            return
        lowering = self.lowering
        host: list[Operation] = []
        buckets: list[BucketCopy] = []
        run = [o for o in bucket_run(op) if isinstance(o, coco.SplitOp)]
        for split in run:
            more, flat = lowering.buffer(split.flat)
            host += more
            outs: list[SSAValue] = []
            for piece in split.pieces:
                more, out = lowering.result_buffer(split, piece)
                host += more
                outs.append(out)
            buckets.append(
                BucketCopy(flat, outs, bucket_rows(tensor_of(split.flat), self.world))
            )
        host += copy_launches(lowering, op, buckets, pack=False)
        replace_run(rewriter, run, host, [list(b.pieces) for b in buckets])


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


@dataclass
class LowerAllReduce(CocoLoweringPattern):
    """`coco.all_reduce` → `coco_gpu.nccl_all_reduce`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: coco.AllReduceOp, rewriter: PatternRewriter
    ) -> None:
        if not ready(op):
            return
        host, source = self.lowering.buffer(op.operand)
        more, out = self.lowering.result_buffer(op, op.result)
        call = NcclAllReduceOp(source, out, op.reduction)
        replace_with_buffers(rewriter, op, [*host, *more, call], [out])


@dataclass
class LowerReduceScatter(CocoLoweringPattern):
    """`coco.reduce_scatter dim = D` → `coco_gpu.nccl_reduce_scatter`, after
    a pack kernel into rank-major blocks when D is not the outermost dim
    (NCCL scatters contiguous blocks of the flat buffer)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: coco.ReduceScatterOp, rewriter: PatternRewriter
    ) -> None:
        if not ready(op):
            return
        lowering = self.lowering
        dim = op.dim.value.data
        operand = tensor_of(op.operand)
        host, source = lowering.buffer(op.operand)
        more, out = lowering.result_buffer(op, op.result)
        host += more
        if math.prod(operand.dims[:dim]) > 1:
            packed = scratch(operand, self.world)
            packed.memref.name_hint = "packed"
            host.append(packed)
            host += rank_major(
                lowering.host(op),
                lowering.kernels,
                lowering.threads,
                lowering.kernel_name(op, "pack"),
                source,
                packed.memref,
                operand.dims,
                dim,
                self.world,
                pack=True,
            )
            source = packed.memref
        host.append(NcclReduceScatterOp(source, out, op.reduction))
        replace_with_buffers(rewriter, op, host, [out])


@dataclass
class LowerAllGather(CocoLoweringPattern):
    """`coco.all_gather` of `sliced<D>` → `coco_gpu.nccl_all_gather`, then an
    unpack kernel from rank-major blocks when D is not the outermost dim."""

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: coco.AllGatherOp, rewriter: PatternRewriter
    ) -> None:
        if not ready(op):
            return
        lowering = self.lowering
        result = result_type(op)
        dim = tensor_of(op.operand).layout.sliced_dim
        host, source = lowering.buffer(op.operand)
        more, out = lowering.result_buffer(op, op.result)
        host += more
        if math.prod(result.dims[:dim]) == 1:
            host.append(NcclAllGatherOp(source, out))
            replace_with_buffers(rewriter, op, host, [out])
            return
        gathered = scratch(result, self.world)
        gathered.memref.name_hint = "gathered"
        host += [gathered, NcclAllGatherOp(source, gathered.memref)]
        host += rank_major(
            lowering.host(op),
            lowering.kernels,
            lowering.threads,
            lowering.kernel_name(op, "unpack"),
            gathered.memref,
            out,
            result.dims,
            dim,
            self.world,
            pack=False,
        )
        replace_with_buffers(rewriter, op, host, [out])


@dataclass
class LowerBroadcast(CocoLoweringPattern):
    """`coco.broadcast root = K` → `coco_gpu.nccl_broadcast`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: coco.BroadcastOp, rewriter: PatternRewriter
    ) -> None:
        if not ready(op):
            return
        host, source = self.lowering.buffer(op.operand)
        more, out = self.lowering.result_buffer(op, op.result)
        call = NcclBroadcastOp(source, out, op.root.value.data)
        replace_with_buffers(rewriter, op, [*host, *more, call], [out])


@dataclass
class LowerAllToAll(CocoLoweringPattern):
    """`coco.all_to_all` `sliced<D>` → `sliced<E>`: pack the rank's block
    into rank-major blocks along E, `coco_gpu.nccl_all_to_all`, unpack the
    received blocks along D (each step skipped when its dim is outermost);
    D = E is a copy."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: coco.AllToAllOp, rewriter: PatternRewriter) -> None:
        if not ready(op):
            return
        lowering = self.lowering
        world = self.world
        operand, result = tensor_of(op.operand), result_type(op)
        source_dim, dim = operand.layout.sliced_dim, op.dim.value.data
        host, source = lowering.buffer(op.operand)
        more, out = lowering.result_buffer(op, op.result)
        host += more
        if source_dim == dim:
            host.append(memref.CopyOp(source, out))
            replace_with_buffers(rewriter, op, host, [out])
            return
        in_shape = local_shape(operand, world)
        if math.prod(in_shape[:dim]) > 1:
            packed = scratch(operand, world)
            packed.memref.name_hint = "packed"
            host.append(packed)
            host += rank_major(
                lowering.host(op),
                lowering.kernels,
                lowering.threads,
                lowering.kernel_name(op, "pack"),
                source,
                packed.memref,
                in_shape,
                dim,
                world,
                pack=True,
            )
            source = packed.memref
        out_shape = local_shape(result, world)
        if math.prod(out_shape[:source_dim]) == 1:
            host.append(NcclAllToAllOp(source, out))
            replace_with_buffers(rewriter, op, host, [out])
            return
        received = scratch(result, world)
        received.memref.name_hint = "received"
        host += [received, NcclAllToAllOp(source, received.memref)]
        host += rank_major(
            lowering.host(op),
            lowering.kernels,
            lowering.threads,
            lowering.kernel_name(op, "unpack"),
            received.memref,
            out,
            out_shape,
            source_dim,
            world,
            pack=False,
        )
        replace_with_buffers(rewriter, op, host, [out])


@dataclass
class LowerSend(CocoLoweringPattern):
    """`coco.send %a to @S channel = C` → `coco_gpu.nccl_send` to rank `r` of
    stage @S on the channel (coconet_ir.analysis.channels)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: coco.SendOp, rewriter: PatternRewriter) -> None:
        function = enclosing(op)
        if function is None or not ready(op):
            return
        host, source = self.lowering.buffer(op.operand)
        channel = channel_of(op, function.sym_name.data)
        call = NcclSendOp(source, channel.dest, channel.channel)
        rewriter.replace(op, [*host, call], [])


@dataclass
class LowerRecv(CocoLoweringPattern):
    """`coco.recv from @S channel = C` → a buffer and `coco_gpu.nccl_recv`
    from rank `r` of stage @S."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: coco.RecvOp, rewriter: PatternRewriter) -> None:
        function = enclosing(op)
        if function is None:
            return
        host, out = self.lowering.result_buffer(op, op.result)
        channel = channel_of(op, function.sym_name.data)
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
        domain = fused_domain(self.lowering, op)
        if domain is not None:
            lower_fused_elementwise(self.lowering, op, domain, rewriter)
            return
        from coconet_ir.lowering.fused_collectives import lower_fused_collective
        from coconet_ir.lowering.tile_collectives import lower_tile_collective

        if lower_tile_collective(self.lowering, op, rewriter):
            return
        if not lower_fused_collective(self.lowering, op, rewriter):
            lower_fusion_with_collectives(self.lowering, op, rewriter)


@dataclass
class LowerOverlap(CocoLoweringPattern):
    """`coco.overlap chunks = K` → K chunks on two streams with events
    (`coconet_ir.lowering.overlap`)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: coco.OverlapOp, rewriter: PatternRewriter) -> None:
        if not ready(op):
            return
        lower_overlap(self.lowering, op, rewriter)


@dataclass
class LowerShift(CocoLoweringPattern):
    """`coco.shift by = K` → a peer copy of the rank's buffer to rank `r - K`
    with credit and arrival flags (`coconet_ir.lowering.per_peer`)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: coco.ShiftOp, rewriter: PatternRewriter) -> None:
        if not ready(op):
            return
        from coconet_ir.lowering.per_peer import lower_shift

        lower_shift(self.lowering, op, rewriter)


@dataclass
class LowerPerPeer(CocoLoweringPattern):
    """`coco.per_peer` → N unrolled steps on three streams, the gathered
    blocks and reduce-scattered partials moved by peer copies
    (`coconet_ir.lowering.per_peer`)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: coco.PerPeerOp, rewriter: PatternRewriter) -> None:
        if not ready(op):
            return
        from coconet_ir.lowering.per_peer import lower_per_peer

        lower_per_peer(self.lowering, op, rewriter)


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
        LowerElementwise,
        LowerMatmul,
        LowerEmbedding,
        LowerReduce,
        LowerNorm,
        LowerAllSlice,
        LowerConcat,
        LowerSplit,
        LowerAllReduce,
        LowerReduceScatter,
        LowerAllGather,
        LowerBroadcast,
        LowerAllToAll,
        LowerShift,
        LowerSend,
        LowerRecv,
        LowerFusion,
        LowerOverlap,
        LowerPerPeer,
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
    NCCL and cuBLAS calls (docs/gpu.md §1)."""

    name = "convert-coco-to-gpu"

    world: int | None = None
    """The world size (default: the module's `coco.world_size`)."""

    threads: int = 256
    """Threads per block of every kernel launch."""

    fused_chunk: int = DEFAULT_CHUNK_ELEMENTS
    """Elements of a rank's slice per pipelined chunk of a fused collective
    kernel (docs/gpu.md §5)."""

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
        if self.threads < 1:
            raise ConversionRefused(
                f"{self.name}: threads must be >= 1, got {self.threads}"
            )
        if self.fused_chunk < 1:
            raise ConversionRefused(
                f"{self.name}: fused_chunk must be >= 1, got {self.fused_chunk}"
            )
        for op in module.walk():
            reason = self.problem(op, world)
            if reason is not None:
                raise ConversionRefused(f"{self.name} cannot convert: {reason}", op)
        for op, reason in PipelineChannels.of(module).problems():
            raise ConversionRefused(f"{self.name} cannot convert: {reason}", op)

    @staticmethod
    def problem(op: Operation, world: int) -> str | None:
        """Why `op` cannot be converted on `world` ranks, or None."""
        for arg in (a for r in op.regions for b in r.blocks for a in b.args):
            problem = divisibility_problem(arg.type, world)
            if problem is not None:
                return f"argument {value_name(arg)}: {problem}"
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
        lowering = Lowering(world, self.threads, kernels, self.fused_chunk)
        functions = [
            f for f in op.ops if isinstance(f, func.FuncOp) and not f.is_declaration
        ]
        absorb_producers(op)
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
