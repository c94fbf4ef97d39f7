"""The two-stream lowering of `coco.overlap chunks = K` (docs/gpu/overlap.md).

CoCoNet's chunked overlap: the region's body runs once per chunk, the chunks
unrolled on the host (K is small and static, so launches and bytes can be
counted statically), and each chunk's ops are split between two streams so
that chunk `c+1`'s compute overlaps chunk `c`'s communication:

- **stream 0, compute**: `coco.matmul` (`coco_gpu.gemm`), and whatever is
  computed from the region's inputs or from stream-0 values only;
- **stream 1, communication**: every op that communicates (a collective, a
  `coco.fusion` holding one — the fused kernel or its fallback —, send,
  recv), and the ops computed from its results (elementwise kernels of the
  consumer chain), matmuls excepted.

So `matmul → reduce_scatter (→ compute → all_gather)` runs the gemm of chunk
c on stream 0 and its consumer chain on stream 1, and `all_gather → matmul`
gathers chunk c on stream 1 and multiplies it on stream 0: gather c+1 overlaps
matmul c.

The event protocol (`coco_gpu.record_event` / `coco_gpu.wait_event`, each a
fresh event):

1. *start*: stream 0 records after the region's output buffers are
   allocated; stream 1 waits once. Everything the program did before the
   region (its inputs) is then visible to stream 1.
2. *hand-over*: a chunk value produced on one stream and read on the other
   is recorded right after its producer, and the reader's stream waits
   right before its first reader (once per value and stream).
3. *join*: after the last chunk, stream 1 records and stream 0 waits, so
   every later op of the function (on stream 0) and the entry's return see
   the results.

Buffers: every chunk has buffers of its own (each intermediate, allocated on
the stream that writes it first), none is reused across chunks, and all are
freed at the function's end on stream 0, after the join: nothing a stream may
still read is ever overwritten or freed. A chunk that is contiguous in its
full buffer is a `coco_gpu.view` of it: the gemm reads its input chunk in
place and the chunk's last producer writes the output's chunk in place.
Otherwise a chunked input is copied out (`<label>_chunk` kernel at offset
`c * chunk`) on the stream of its readers (stream 0 when both read it), and
each output chunk is copied into the full-size output (`<label>_unchunk`) on
the stream that produced it. A dropout keeps its global index
(`coco_gpu.chunk`; docs/dialect.md, `coco.overlap`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from xdsl.dialects import gpu, memref
from xdsl.dialects.builtin import IndexType
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from coconet_ir.analysis.chunks import chunk_dims
from coconet_ir.dialects import coco
from coconet_ir.dialects.coco import TensorType
from coconet_ir.dialects.coco_gpu import (
    GemmOp,
    NcclCollectiveOp,
    NcclRecvOp,
    NcclSendOp,
    PeerCopyOp,
    RecordEventOp,
    ViewOp,
    WaitEventOp,
    set_stream,
    stream_of,
)
from coconet_ir.lowering.bufferize import alloc, as_tensor, buffer_type, local_shape
from coconet_ir.lowering.host import HostValues
from coconet_ir.lowering.kernels import KernelSite, copy_block, memref_shape
from coconet_ir.lowering.state import (
    CHUNK_ATTR,
    ChunkAt,
    Lowering,
    replace_with_buffers,
    tensor_of,
)

index = IndexType()

COMPUTE_STREAM = 0
"""Where matmuls run, and everything outside an overlap."""

COMMUNICATION_STREAM = 1
"""Where an overlap's collectives and their consumer chains run."""

__all__ = [
    "COMMUNICATION_STREAM",
    "COMPUTE_STREAM",
    "OnItsStream",
    "chunk_start",
    "chunk_streams",
    "chunk_view",
    "communicates",
    "copy_chunk_out",
    "lower_overlap",
    "on_stream",
    "runs_on_a_stream",
]


def communicates(op: Operation) -> bool:
    """Whether `op` (or an op in its regions) moves data between ranks."""
    return any(
        isinstance(inner, coco.CollectiveOp | coco.SendOp | coco.RecvOp)
        for inner in op.walk()
    )


def chunk_streams(body: Sequence[Operation]) -> dict[Operation, int]:
    """The stream each top-level op of an overlap's body runs on (see the
    module docstring): communication and its consumers on stream 1, matmuls
    and what only they or the inputs feed on stream 0."""
    streams: dict[Operation, int] = {}
    for op in body:
        if communicates(op):
            streams[op] = COMMUNICATION_STREAM
        elif isinstance(op, coco.MatmulOp):
            streams[op] = COMPUTE_STREAM
        else:
            fed = [
                streams.get(v.owner, COMPUTE_STREAM)
                for v in op.operands
                if isinstance(v.owner, Operation)
            ]
            streams[op] = max(fed, default=COMPUTE_STREAM)
    return streams


def runs_on_a_stream(op: Operation) -> bool:
    """Whether `op` is host code that enqueues work on a stream (and so takes
    `coco_gpu.stream`)."""
    return isinstance(
        op,
        gpu.LaunchFuncOp
        | memref.AllocOp
        | memref.CopyOp
        | memref.DeallocOp
        | NcclCollectiveOp
        | NcclSendOp
        | NcclRecvOp
        | GemmOp
        | PeerCopyOp
        | RecordEventOp
        | WaitEventOp,
    )


@dataclass
class OnItsStream(RewritePattern):
    """Wraps the conversion's patterns: the host ops that replace a coco op
    carrying `coco_gpu.stream = S` (one of an overlap chunk's ops) run on
    stream S, and coco ops they leave to lower later (a fusion fallback's
    body) carry the attribute on."""

    inner: RewritePattern

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        stream = stream_of(op)
        block = op.parent_block()
        if not stream or op.dialect_name() != "coco" or block is None:
            self.inner.match_and_rewrite(op, rewriter)
            return
        before, after = op.prev_op, op.next_op
        self.inner.match_and_rewrite(op, rewriter)
        if op.parent is not None:
            return
        current = before.next_op if before is not None else block.first_op
        while current is not None and current is not after:
            for inner in current.walk():
                if runs_on_a_stream(inner) or inner.dialect_name() == "coco":
                    set_stream(inner, stream)
            current = current.next_op


@dataclass
class Chunk:
    """The host code of one chunk as it is emitted: which stream holds each
    chunk value, the events recorded for values the other stream reads."""

    host: list[Operation]
    streams: dict[SSAValue, int] = field(default_factory=dict[SSAValue, int])
    """Chunk value → the stream that produced it (absent: visible to both)."""
    readers: dict[SSAValue, set[int]] = field(default_factory=dict[SSAValue, set[int]])
    """Chunk value (of the body) → the streams that read it."""
    events: dict[SSAValue, SSAValue] = field(default_factory=dict[SSAValue, SSAValue])
    waited: set[tuple[SSAValue, int]] = field(default_factory=set[tuple[SSAValue, int]])

    def produced(self, value: SSAValue, original: SSAValue, stream: int) -> None:
        """`value` (the chunk's copy of the body value `original`) was just
        produced on `stream`: record an event if the other stream reads it."""
        self.streams[value] = stream
        if any(s != stream for s in self.readers.get(original, ())):
            record = RecordEventOp(stream)
            record.event.name_hint = "chunk_ready"
            self.host.append(record)
            self.events[value] = record.event

    def visible(self, value: SSAValue, stream: int) -> None:
        """Make `value` readable on `stream` (wait for its event once)."""
        produced = self.streams.get(value)
        if produced is None or produced == stream:
            return
        if (value, stream) in self.waited:
            return
        self.waited.add((value, stream))
        self.host.append(WaitEventOp(self.events[value], stream))


def chunk_view(
    values: HostValues,
    buffer: SSAValue,
    chunk: TensorType,
    dim: int,
    c: int | SSAValue,
    world: int,
) -> ViewOp | None:
    """Chunk `c` of `buffer` as a `coco_gpu.view` when it is contiguous (every
    dim before the chunk dim is 1 in the chunk, or the chunk is all of the
    buffer: world 1), at a start computed on the
    host (`chunk_start`) when `c` is a host index (a per-peer step's chunk);
    else None."""
    shape = local_shape(chunk, world)
    size, t = math.prod(shape), buffer_type(chunk, world)
    if size == math.prod(memref_shape(buffer.type)):  # one chunk: all of it
        return ViewOp(buffer, 0, t)
    if math.prod(shape[:dim]) != 1:
        return None
    if isinstance(c, int):
        return ViewOp(buffer, c * size, t)
    return ViewOp(buffer, 0, t, chunk_start(values, c, size))


def chunk_start(values: HostValues, c: int | SSAValue, size: int) -> SSAValue:
    """The host index `c * size`: a constant for a chunk known when lowering,
    else computed once from the host index `c` (a per-peer step's chunk,
    `(rank + s) mod N`)."""
    if isinstance(c, int):
        return values.index(c * size)
    return values.times(c, size, "chunk_start")


def on_stream(ops: Sequence[Operation], stream: int) -> list[Operation]:
    """`ops`, those that enqueue work marked to run on `stream`."""
    for op in ops:
        if runs_on_a_stream(op):
            set_stream(op, stream)
    return list(ops)


def copy_chunk_out(
    lowering: Lowering,
    values: HostValues,
    name: str,
    source: SSAValue,
    whole: TensorType,
    chunk: TensorType,
    dim: int,
    c: int | SSAValue,
    hint: str,
) -> tuple[list[Operation], memref.AllocOp]:
    """A buffer of `chunk`'s type (named `hint`) and the host ops copying
    chunk `c` along `dim` of `source` (a buffer of `whole`) into it: the
    `<name>_chunk` kernel, for a chunk that is not contiguous (no view of it
    exists)."""
    world = lowering.world
    piece = alloc(chunk.element_type, local_shape(chunk, world))
    piece.memref.name_hint = hint
    block = local_shape(chunk, world)[dim]
    start = chunk_start(values, c, block)
    host = [
        piece,
        *copy_block(
            KernelSite(values, lowering.kernels, lowering.threads, f"{name}_chunk"),
            source,
            piece.memref,
            local_shape(whole, world),
            dim,
            block,
            start,
            extract=True,
        ),
    ]
    return host, piece


def copy_chunk_in(
    lowering: Lowering,
    values: HostValues,
    name: str,
    piece: SSAValue,
    out: SSAValue,
    chunk: TensorType,
    dim: int,
    c: int | SSAValue,
) -> list[Operation]:
    """The host ops copying `piece` (a buffer of `chunk`'s type) into chunk
    `c` along `dim` of `out`: the `<name>_unchunk` kernel, for an output
    chunk the body could not write in place (`copy_chunk_out`'s inverse)."""
    block = local_shape(chunk, lowering.world)[dim]
    return copy_block(
        KernelSite(values, lowering.kernels, lowering.threads, f"{name}_unchunk"),
        piece,
        out,
        memref_shape(out.type),
        dim,
        block,
        chunk_start(values, c, block),
        extract=False,
    )


def clone_chunk_op(
    inner: Operation,
    mapping: dict[SSAValue, SSAValue],
    dims: Mapping[SSAValue, int],
    chunk_at: Callable[[int], ChunkAt],
) -> Operation:
    """A clone of the region op `inner` for one chunk (operands through
    `mapping`): each dropout in it of an operand chunked along `dim`
    (`dims`) marked with `chunk_at(dim)` (`CHUNK_ATTR`), so that it draws
    the numbers of its chunk of the whole tensor."""
    clone = inner.clone(mapping)
    for original, copied in zip(inner.walk(), clone.walk()):
        if isinstance(original, coco.DropoutOp):
            dim = dims.get(original.operand, -1)
            if dim >= 0:
                copied.attributes[CHUNK_ATTR] = chunk_at(dim).attribute()
    return clone


def chunk_input(
    lowering: Lowering,
    values: HostValues,
    host: list[Operation],
    name: str,
    value: SSAValue,
    arg: SSAValue,
    dim: int,
    c: int | SSAValue,
    stream: int | None = None,
) -> tuple[SSAValue, bool]:
    """Chunk `c` along `dim` of the region input `value`, as the value of
    the block argument `arg` (the chunk's type), the host ops making it
    appended to `host`: a view when contiguous, else a copy out of its
    buffer (`copy_chunk_out`, on `stream` when given); and whether it is a
    copy."""
    more, source = lowering.buffer(value)
    host += more
    chunk = tensor_of(arg)
    view = chunk_view(values, source, chunk, dim, c, lowering.world)
    if view is not None:
        view.result.name_hint = f"{arg.name_hint or 'in'}_chunk"
        cast = as_tensor(view.result, arg.type)
        host += [view, cast]
        return cast.results[0], False
    hint = f"{arg.name_hint or 'in'}_chunk"
    copy, piece = copy_chunk_out(
        lowering, values, name, source, tensor_of(value), chunk, dim, c, hint
    )
    host += copy if stream is None else on_stream(copy, stream)
    cast = as_tensor(piece.memref, arg.type)
    host.append(cast)
    return cast.results[0], True


def lower_overlap(
    lowering: Lowering, op: coco.OverlapOp, rewriter: PatternRewriter
) -> None:
    """`coco.overlap chunks = K` → K unrolled chunks on two streams with
    events (the module docstring)."""
    world = lowering.world
    chunks = op.chunk_count
    input_dims = list(op.input_dims.get_values())
    output_dims = list(op.output_dims.get_values())
    dims = chunk_dims(op.block, input_dims).dims
    body = [o for o in op.block.ops if not isinstance(o, coco.YieldOp)]
    streams = chunk_streams(body)
    readers: dict[SSAValue, set[int]] = {}
    for inner in body:
        for value in inner.operands:
            readers.setdefault(value, set()).add(streams[inner])
    two_streams = COMMUNICATION_STREAM in streams.values()

    host, outputs = lowering.result_buffers(op)
    if two_streams:
        start = RecordEventOp(COMPUTE_STREAM)
        start.event.name_hint = "overlap_start"
        host += [start, WaitEventOp(start.event, COMMUNICATION_STREAM)]
    name = lowering.kernel_name(op, "overlap")
    values = lowering.host(op)

    for c in range(chunks):
        chunk = Chunk(host, readers=readers)
        mapping: dict[SSAValue, SSAValue] = {}
        for value, arg, dim in zip(op.inputs, op.block.args, input_dims):
            if dim < 0:
                mapping[arg] = value
                continue
            stream = min(readers.get(arg, {COMPUTE_STREAM}))
            mapping[arg], copied = chunk_input(
                lowering, values, host, name, value, arg, dim, c, stream
            )
            if copied:
                chunk.produced(mapping[arg], arg, stream)
        views: dict[SSAValue, SSAValue] = {}
        for value, out, dim in zip(op.yield_op.arguments, outputs, output_dims):
            view = chunk_view(values, out, tensor_of(value), dim, c, world)
            if view is not None and value.owner in streams:
                view.result.name_hint = f"{out.name_hint or 'out'}_chunk"
                host.append(view)
                views[value] = view.result
        for inner in body:
            stream = streams[inner]
            for value in inner.operands:
                chunk.visible(mapping.get(value, value), stream)
            clone = clone_chunk_op(
                inner, mapping, dims, lambda d, c=c: ChunkAt(d, c, chunks)
            )
            set_stream(clone, stream)
            host.append(clone)
            for old, new in zip(inner.results, clone.results):
                mapping[old] = new
                chunk.produced(new, old, stream)
                if old in views:
                    lowering.destinations[new] = views[old]
        for value, out, dim in zip(op.yield_op.arguments, outputs, output_dims):
            piece_value = mapping.get(value, value)
            stream = chunk.streams.get(piece_value, COMPUTE_STREAM)
            more, piece = lowering.buffer(piece_value)
            if value in views:
                # The producer writes the output's chunk in place; if it
                # cannot, this copy remains (a copy onto itself is dropped).
                copy = memref.CopyOp(piece, views[value])
                set_stream(copy, stream)
                host += [*more, copy]
                continue
            copy = copy_chunk_in(
                lowering, values, name, piece, out, tensor_of(value), dim, c
            )
            for o in copy:
                if runs_on_a_stream(o):
                    set_stream(o, stream)
            host += [*more, *copy]
    if two_streams:
        done = RecordEventOp(COMMUNICATION_STREAM)
        done.event.name_hint = "overlap_done"
        host += [done, WaitEventOp(done.event, COMPUTE_STREAM)]
    replace_with_buffers(rewriter, op, host, outputs)
