"""The lowering of `coco.shift` and `coco.per_peer` (docs/gpu/overlap.md, "Per-peer
overlap").

Both move whole blocks between ranks by **transfers**: transfer `t` brings
rank `r` a block of rank `r + K` (mod N) in three host-ordered parts, each a
one-thread flag kernel or a copy on a stream:

1. *credit*: the receiver signals its sender's slot `FREE_t`: "my receive
   buffer for `t` is free" — issued on the stream of the buffer's last
   reader, after that read;
2. *send*: the sender waits for `FREE_t`, stores its block into the
   receiver's copy of the symmetric receive buffer (`coco_gpu.peer_copy`: a
   copy-engine copy, the bytes the emulator counts), and signals the
   receiver's slot `ARRIVED_t`;
3. *arrival*: the receiver waits for `ARRIVED_t` on the stream that reads the
   block, right before it reads it.

Every slot is written by one rank per call, with the call's epoch (epochs only
grow: no slot is ever reset), so the credit of the next call is what keeps a
sender from overwriting a block still being read: no closing sync.

`coco.shift by = K` is one transfer on the op's stream, then a copy out of
the receive buffer. `coco.per_peer` runs its step body N times, unrolled on
the host (rank `r` on chunk `c = (r + s) mod N` at step `s`, `c` computed at
run time from the rank), on three streams:

- **stream 0 (compute)**: every step's body (gemms, kernels), the arrival
  waits and credits of the gathered inputs;
- **stream 1 (gathered inputs)**: the sends of every gathered input — step
  `s`'s block of rank `r + s` lands in the receiver's double buffer
  `s mod 2`, credited at the start for steps 1 and 2 and after the body of
  step `s - 2` for the later ones, so the copy for step `s + 1` runs while
  step `s` computes;
- **stream 2 (reduce-scattered outputs)**: step `s`'s partial (computed on
  stream 0 into the local double buffer `s mod 2`, for rank `r + s`) is
  pushed into that rank's receive buffer `s mod 2` and the partial of rank
  `r - s` added to this rank's accumulator (in f32 for halves, the own
  partial of step 0 first); the buffers come back by credits and events.

Step 0 reads the rank's own block and computes its own partial: no
communication. Events: stream 0 records at the start (streams 1 and 2 wait),
the partials are handed from stream 0 to stream 2 and their double buffers
back, and streams 1 and 2 record at the end (stream 0 waits).

A **summed** output (`output_dims[j] = -1`: the gathered dim is the matmul's
contracted one, each step's result a partial product of the whole output)
takes no communication of results: each step's partial is added on stream 0
where it is computed. A float `coco.matmul` is its gemm, writing in the compute
type (f32 from f16/bf16 operands): into the output (an f32 accumulator for
halves, rounded into it once at the end) with beta = 1 after step 0
(`coco_gpu.gemm ... accumulate`); a **replicated** output instead into its
chunk's slot of an `N x` buffer, the slots summed in chunk order at the end
(one kernel, rounding once): its ranks must agree bit for bit, and each starts
at its own chunk. Any other body value (an integer matmul) is computed into a
partial buffer and added (or stored into its slot) by a kernel.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, i64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from coconet_ir.analysis.chunks import step_of
from coconet_ir.dialects import (
    coco,
    gpu,  # xDSL's gpu, in MLIR's syntax
)
from coconet_ir.dialects.coco import element_info, enclosing_function
from coconet_ir.dialects.coco_gpu import (
    GemmOp,
    PeerCopyOp,
    PeersType,
    RecordEventOp,
    SignalOp,
    SymmetricBufferOp,
    ViewOp,
    WaitEventOp,
    WaitSignalOp,
    stream_of,
)
from coconet_ir.lowering.bufferize import alloc, as_tensor, buffer_type
from coconet_ir.lowering.fused_collectives import (
    SymmetricAllocator,
    if_then,
    module_of,
    next_epoch,
)
from coconet_ir.lowering.host import HostValues
from coconet_ir.lowering.kernels import (
    X,
    combine,
    compute_type,
    flat_args,
    from_compute,
    grid_stride_loop,
    launch,
    load,
    memref_shape,
    store,
    to_compute,
)
from coconet_ir.lowering.overlap import (
    COMMUNICATION_STREAM,
    COMPUTE_STREAM,
    chunk_input,
    chunk_view,
    clone_chunk_op,
    copy_chunk_in,
    on_stream,
)
from coconet_ir.lowering.state import (
    ChunkAt,
    Lowering,
    replace_with_buffers,
    tensor_of,
)

index = IndexType()

REDUCTION_STREAM = 2
"""Where a per-peer region's reduce-scattered outputs are pushed and summed."""

FLAG_THREADS = 32
"""Threads of a flag kernel's one block (thread 0 signals or waits)."""

__all__ = ["REDUCTION_STREAM", "Transfers", "lower_per_peer", "lower_shift"]


def chunk_at_step(values: HostValues, s: int) -> SSAValue:
    """The chunk rank `r` computes at step `s`: `(r + s) mod N`."""
    return values.rank_plus(s)


# ============================================================================
# Transfers: credit, send, arrival
# ============================================================================


@dataclass
class Transfers:
    """The transfers of one op (the module docstring): transfer `t` uses the
    signal slots `slot_base + 2t` (FREE, on the sender's pad) and `slot_base
    + 2t + 1` (ARRIVED, on the receiver's), valued with the op's epoch."""

    lowering: Lowering
    values: HostValues
    function: str
    epoch: SSAValue
    slot_base: int

    @staticmethod
    def slots(count: int) -> int:
        """Signal slots `count` transfers use."""
        return 2 * count

    def credit(self, t: int, shift: int, stream: int) -> list[Operation]:
        """This rank (the receiver) tells rank `r + shift`, its sender, that
        transfer `t`'s receive buffer is free."""
        return self.signal(shift, self.slot_base + 2 * t, stream)

    def send(
        self, t: int, shift: int, source: SSAValue, target: SSAValue, stream: int
    ) -> list[Operation]:
        """This rank (the sender of rank `r - shift`) waits for its credit,
        stores `source` into the receiver's `target` and signals arrival."""
        copy = PeerCopyOp(source, target, (-shift) % self.lowering.world)
        return [
            *self.wait(self.slot_base + 2 * t, stream),
            *on_stream([copy], stream),
            *self.signal(-shift, self.slot_base + 2 * t + 1, stream),
        ]

    def arrival(self, t: int, stream: int) -> list[Operation]:
        """This rank waits until transfer `t`'s block has landed."""
        return self.wait(self.slot_base + 2 * t + 1, stream)

    def signal(self, shift: int, slot: int, stream: int) -> list[Operation]:
        """Slot `slot` of rank `r + shift`'s pad := the epoch."""
        peer = self.values.rank_plus(shift)
        kernel = self.kernel("signal", [("peer", index), ("slot", index)])
        return self.launch(kernel, [peer, self.values.index(slot)], stream)

    def wait(self, slot: int, stream: int) -> list[Operation]:
        """Until slot `slot` of this rank's pad holds the epoch."""
        kernel = self.kernel("wait", [("slot", index)])
        return self.launch(kernel, [self.values.index(slot)], stream)

    def kernel(self, kind: str, specs: list[tuple[str, Attribute]]) -> gpu.FuncOp:
        """`<function>_signal` / `<function>_wait`: thread 0 of the one block
        signals the slot of a peer's pad, or waits for its own."""
        kernels = self.lowering.kernels

        def build() -> gpu.FuncOp:
            args = [("peers", PeersType()), *specs, ("epoch", i64)]
            func, b = kernels.kernel(f"{self.function}_{kind}", args)
            peers, *operands, epoch = func.body.block.args
            tid = b.insert(gpu.ThreadIdOp(X)).result
            zero = b.insert(arith.ConstantOp(IntegerAttr(0, index))).result
            leader = if_then(b, b.insert(arith.CmpiOp(tid, zero, "eq")).result)
            if kind == "signal":
                leader.insert(SignalOp(peers, operands[0], operands[1], epoch))
            else:
                leader.insert(WaitSignalOp(peers, operands[0], epoch))
            return func

        return kernels.cached(("flag", self.function, kind), build)

    def launch(
        self, kernel: gpu.FuncOp, operands: list[SSAValue], stream: int
    ) -> list[Operation]:
        one, threads = self.values.index(1), self.values.index(FLAG_THREADS)
        call = gpu.LaunchFuncOp.of(
            self.lowering.kernels.symbol_of(kernel),
            [one, one, one],
            [threads, one, one],
            [self.values.peers(), *operands, self.epoch],
        )
        return on_stream([call], stream)


def transfers_of(
    lowering: Lowering, op: Operation, count: int
) -> tuple[list[Operation], Transfers, SymmetricAllocator]:
    """The host op making the epoch and the `Transfers` of `count` transfers
    of `op`, with the module's symmetric allocator."""
    module = module_of(op)
    function = enclosing_function(op)
    assert module is not None and function is not None
    allocator = SymmetricAllocator.of(module)
    epoch = next_epoch()
    transfers = Transfers(
        lowering,
        lowering.host(op),
        function.sym_name.data,
        epoch.result,
        allocator.slots(Transfers.slots(count)),
    )
    return [epoch], transfers, allocator


def symmetric(
    allocator: SymmetricAllocator, t: MemRefType, hint: str
) -> SymmetricBufferOp:
    """A new symmetric buffer of type `t` (the same offset on every rank)."""
    size = math.prod(t.get_shape()) * _element_bytes(t.element_type)
    op = SymmetricBufferOp(allocator.buffer(size), t)
    op.result.name_hint = hint
    return op


def _element_bytes(t: Attribute) -> int:
    return element_info(t).bytes


# ============================================================================
# coco.shift
# ============================================================================


def lower_shift(
    lowering: Lowering, op: coco.ShiftOp, rewriter: PatternRewriter
) -> None:
    """`coco.shift by = K` → one transfer of this rank's buffer to rank
    `r - K` (this rank receiving from `r + K`), then a copy of the received
    block into the result; a replicated value, or a shift by a multiple of N,
    is a copy."""
    world, stream = lowering.world, stream_of(op)
    host, source = lowering.buffer(op.operand)
    more, out = lowering.result_buffer(op, op.result)
    host += more
    shift = op.offset % world
    if tensor_of(op.operand).layout.is_replicated or not shift:
        if source is not out:
            host += on_stream([memref.CopyOp(source, out)], stream)
        replace_with_buffers(rewriter, op, host, [out])
        return
    context, transfers, allocator = transfers_of(lowering, op, 1)
    received = symmetric(
        allocator, buffer_type(tensor_of(op.result), world), "received"
    )
    host += [*context, received]
    host += transfers.credit(0, shift, stream)
    host += transfers.send(0, shift, source, received.result, stream)
    host += transfers.arrival(0, stream)
    host += on_stream([memref.CopyOp(received.result, out)], stream)
    replace_with_buffers(rewriter, op, host, [out])


# ============================================================================
# Kernels of the reduce-scattered outputs
# ============================================================================


def map_buffers(
    lowering: Lowering,
    values: HostValues,
    name: str,
    inputs: Sequence[SSAValue],
    output: SSAValue,
    compute: Callable[[Builder, list[SSAValue]], SSAValue],
) -> list[Operation]:
    """Host ops launching a grid-stride kernel `output[i] = compute(inputs[..][i])`
    over buffers of one element count (`output` may be an input: in place)."""
    views, flat = flat_args(values, [*inputs, output])
    count = math.prod(memref_shape(output.type))
    kernels = lowering.kernels

    def build() -> gpu.FuncOp:
        specs = [("n", index), *((v.name_hint or "in", v.type) for v in flat)]
        kernel, b = kernels.kernel(name, specs)
        n, *buffers = kernel.body.block.args
        loop, i = grid_stride_loop(b, n)
        values = [load(loop, buffer, [i]) for buffer in buffers[:-1]]
        store(loop, compute(loop, values), buffers[-1], [i])
        return kernel

    kernel = kernels.cached((name, *(v.type for v in flat)), build)
    return [*views, *launch(values, kernels, kernel, count, flat, lowering.threads)]


# ============================================================================
# coco.per_peer
# ============================================================================


@dataclass
class Scattered:
    """A reduce-scattered output: the local double buffer the partials are
    computed into, the symmetric one peers push theirs into, the
    accumulator (the output itself unless the element type is a half)."""

    index: int
    output: SSAValue
    element: Attribute
    partials: list[SSAValue]
    received: list[SSAValue]
    accumulator: SSAValue


@dataclass
class Summed:
    """A summed output. Its steps' partials (in the compute type) add up
    either as they come, in `accumulator` (the output itself unless the
    element type is a half), or — a replicated float output, whose ranks must
    agree bit for bit while each starts at its own chunk — each in its chunk's
    slot of `slots`, summed in chunk order at the end. `gemm`: the float
    matmul of the body computing the partial, lowered here as a gemm into its
    sink (beta = 1 after step 0 when accumulating); else the body's value is
    computed into `partial` and a kernel adds (or stores) it."""

    index: int
    output: SSAValue
    element: Attribute
    accumulator: SSAValue
    """The output, or its f32 accumulator (unused with slots)."""
    slots: SSAValue | None
    gemm: coco.MatmulOp | None
    partial: SSAValue | None

    def sink(self, host: list[Operation], values: HostValues, c: SSAValue) -> SSAValue:
        """Where the partial of chunk `c` (a shared host index) goes: its
        slot, or the accumulator."""
        if self.slots is None:
            return self.accumulator
        t = self.slot_type
        at = values.times(c, math.prod(t.get_shape()), "slot_start")
        view = ViewOp(self.slots, 0, t, at)
        view.result.name_hint = "chunk_slot"
        host.append(view)
        return view.result

    @property
    def slot_type(self) -> MemRefType:
        t = self.slots.type if self.slots is not None else None
        assert isinstance(t, MemRefType)
        return MemRefType(t.element_type, t.get_shape()[1:])

    def writes_output(self, s: int) -> bool:
        """Whether step `s`'s partial is the output's first value, computed in
        place (no kernel)."""
        return not s and self.slots is None and self.accumulator is self.output


@dataclass
class PerPeerLowering:
    """The host code of one `coco.per_peer` as it is emitted."""

    lowering: Lowering
    op: coco.PerPeerOp
    host: list[Operation]
    transfers: Transfers
    name: str

    @property
    def world(self) -> int:
        return self.lowering.world

    @property
    def values(self) -> HostValues:
        return self.transfers.values

    def emit(self, ops: Sequence[Operation], stream: int) -> None:
        self.host += on_stream(ops, stream)

    def event(self, producer: int, consumer: int, hint: str) -> RecordEventOp:
        """An event recorded now on `producer`, waited for now on `consumer`."""
        record = RecordEventOp(producer)
        record.event.name_hint = hint
        self.host += [record, WaitEventOp(record.event, consumer)]
        return record

    def record(self, stream: int, hint: str) -> RecordEventOp:
        record = RecordEventOp(stream)
        record.event.name_hint = hint
        self.host.append(record)
        return record


def lower_per_peer(
    lowering: Lowering, op: coco.PerPeerOp, rewriter: PatternRewriter
) -> None:
    """`coco.per_peer` → N unrolled steps on three streams (the module
    docstring)."""
    world = lowering.world
    step, found = step_of(op, world)
    body = [o for o in step.block.ops if not isinstance(o, coco.YieldOp)]
    yielded = list(step.yield_op.arguments)
    input_dims = list(op.input_dims.get_values())
    output_dims = list(op.output_dims.get_values())
    gathered = [i for i in range(len(op.inputs)) if op.gathered(i)]
    scattered_outputs = [j for j in range(len(op.outputs)) if op.scattered(j)]
    summed_outputs = [j for j, dim in enumerate(output_dims) if dim == -1]
    families = len(gathered) + len(scattered_outputs)
    # One rank: nothing to overlap, the one step is the body on the rank's
    # own blocks, each output written in place ("At world 1", the docs).
    alone = world == 1

    host, outputs = lowering.result_buffers(op)
    context, transfers, allocator = transfers_of(
        lowering, op, 0 if alone else families * world
    )
    values = transfers.values
    if not alone:
        host += context
    emitter = PerPeerLowering(
        lowering, op, host, transfers, lowering.kernel_name(op, "per_peer")
    )

    def transfer(family: int, s: int) -> int:
        return family * world + s

    # Buffers: two symmetric receive buffers per gathered input; per
    # scattered output two local partials, two symmetric receive buffers
    # and the accumulator (none of them alone: step 0 reads the inputs and
    # writes the outputs).
    blocks: dict[int, list[SSAValue]] = {}
    for i in gathered if not alone else []:
        t = buffer_type(tensor_of(step.block.args[i]), world)
        pair = [symmetric(allocator, t, f"block{k}") for k in range(2)]
        host += pair
        blocks[i] = [p.result for p in pair]
    scattered: list[Scattered] = []
    for j in scattered_outputs:
        t = buffer_type(tensor_of(yielded[j]), world)
        element = t.element_type
        if alone:
            scattered.append(Scattered(j, outputs[j], element, [], [], outputs[j]))
            continue
        partials = [alloc(element, t.get_shape()) for _ in range(2)]
        for k, p in enumerate(partials):
            p.memref.name_hint = f"partial{k}"
        received = [symmetric(allocator, t, f"received{k}") for k in range(2)]
        host += [*partials, *received]
        accumulator = outputs[j]
        if compute_type(element) != element:
            wide = alloc(compute_type(element), t.get_shape())
            wide.memref.name_hint = "accumulator"
            host.append(wide)
            accumulator = wide.memref
        scattered.append(
            Scattered(
                j,
                outputs[j],
                element,
                [p.memref for p in partials],
                [r.result for r in received],
                accumulator,
            )
        )
    summed = [
        summed_output(lowering, host, yielded[j], j, outputs[j], body)
        for j in summed_outputs
    ]
    # The buffers go in now, so that each has one flat view for the launches
    # of every step (`HostValues.flat`).
    rewriter.insert(host, InsertPoint.before(op))
    host.clear()
    streams = [COMMUNICATION_STREAM] * bool(gathered) + [REDUCTION_STREAM] * bool(
        scattered
    )
    if alone:
        streams = []
    else:
        start = emitter.record(COMPUTE_STREAM, "per_peer_start")
        host += [WaitEventOp(start.event, stream) for stream in streams]

    # The receive buffers of steps 1 and 2 are free from the start.
    for family in range(len(gathered)):
        for s in range(1, min(3, world)):
            host += transfers.credit(transfer(family, s), s, COMPUTE_STREAM)
    for family in range(len(gathered), families):
        for s in range(1, min(3, world)):
            host += transfers.credit(transfer(family, s), -s, REDUCTION_STREAM)

    pushed: dict[int, RecordEventOp] = {}
    for s in range(world):
        c = chunk_at_step(values, s)
        # Stream 1: the gathered inputs' blocks of step s (rank r + s's),
        # pushed by this rank to rank r - s.
        if s:
            for family, i in enumerate(gathered):
                source_ops, source = lowering.buffer(op.inputs[i])
                host += source_ops
                block = blocks[i][s % 2]
                host += transfers.send(
                    transfer(family, s), s, source, block, COMMUNICATION_STREAM
                )
        # Stream 0: wait for this step's blocks and partial buffers.
        mapping: dict[SSAValue, SSAValue] = {}
        for i, (value, arg, dim) in enumerate(
            zip(op.inputs, step.block.args, input_dims)
        ):
            if dim < 0:
                mapping[arg] = value
                continue
            if i in gathered:
                if s:
                    family = gathered.index(i)
                    host += transfers.arrival(transfer(family, s), COMPUTE_STREAM)
                    buffer = blocks[i][s % 2]
                else:
                    more, buffer = lowering.buffer(value)
                    host += more
                cast = as_tensor(buffer, arg.type)
                host.append(cast)
                mapping[arg] = cast.results[0]
                continue
            mapping[arg], _ = chunk_input(
                lowering, values, host, emitter.name, value, arg, dim, c
            )
        if s >= 3 and scattered:
            host.append(WaitEventOp(pushed[s - 2].event, COMPUTE_STREAM))
        # Stream 0: the body, each yielded value written in place where it can.
        views: dict[SSAValue, SSAValue] = {}
        for j, (value, out, dim) in enumerate(zip(yielded, outputs, output_dims)):
            if value.owner not in body:
                continue
            target: SSAValue | None = None
            piece = next((p for p in scattered if p.index == j), None)
            total = next((p for p in summed if p.index == j), None)
            if total is not None:
                if total.gemm is None:
                    sink = total.output if total.writes_output(s) else total.partial
                    assert sink is not None
                    target = fresh_view(host, sink)
            elif piece is None:
                view = chunk_view(values, out, tensor_of(value), dim, c, world)
                if view is not None:
                    host.append(view)
                    target = view.result
            elif s or piece.accumulator is not piece.output:
                target = fresh_view(host, piece.partials[s % 2])
            else:
                target = fresh_view(host, piece.output)
            if target is not None:
                views[value] = target
        for inner in body:
            total = next((p for p in summed if p.gemm is inner), None)
            if total is not None:
                assert isinstance(inner, coco.MatmulOp)
                more, (a, b) = lowering.buffers(
                    [mapping[inner.lhs], mapping[inner.rhs]]
                )
                sink = total.sink(host, values, c)
                running = s > 0 and total.slots is None
                host += [*more, GemmOp(a, b, sink, accumulate=running)]
                continue
            clone = clone_chunk_op(
                inner,
                mapping,
                found.dims,
                lambda d, s=s: ChunkAt(d, s, world, rotating=True),
            )
            host.append(clone)
            for old, new in zip(inner.results, clone.results):
                mapping[old] = new
                if old in views:
                    lowering.destinations[new] = views[old]
        for j, (value, out, dim) in enumerate(zip(yielded, outputs, output_dims)):
            total = next((p for p in summed if p.index == j), None)
            if total is not None:
                if total.gemm is None:
                    add_partial(emitter, total, mapping[value], views[value], s, c)
                continue
            more, piece_buffer = lowering.buffer(mapping.get(value, value))
            host += more
            if value in views:
                host.append(memref.CopyOp(piece_buffer, views[value]))
                continue
            if any(p.index == j for p in scattered):
                raise AssertionError(
                    "a scattered output is always computed in the body"
                )
            host += copy_chunk_in(
                lowering,
                values,
                emitter.name,
                piece_buffer,
                out,
                tensor_of(value),
                dim,
                c,
            )
        # Stream 0: the gathered blocks of step s are read: credit step s + 2.
        if 1 <= s < world - 2:
            for family in range(len(gathered)):
                host += transfers.credit(transfer(family, s + 2), s + 2, COMPUTE_STREAM)
        if scattered and not alone:
            reduce_step(emitter, scattered, len(gathered), s, pushed)
    for total in summed:
        if total.slots is not None:
            emitter.emit(sum_slots(emitter, total), COMPUTE_STREAM)
        elif total.accumulator is not total.output:
            emitter.emit(
                map_buffers(
                    lowering,
                    values,
                    f"{emitter.name}_round",
                    [total.accumulator],
                    total.output,
                    lambda b, v, e=total.element: from_compute(b, v[0], e),
                ),
                COMPUTE_STREAM,
            )
    for k, piece in enumerate(scattered):
        if piece.accumulator is not piece.output:
            emitter.emit(
                map_buffers(
                    lowering,
                    values,
                    f"{emitter.name}_round",
                    [piece.accumulator],
                    piece.output,
                    lambda b, v, e=piece.element: from_compute(b, v[0], e),
                ),
                REDUCTION_STREAM,
            )
    done = [emitter.record(stream, "per_peer_done") for stream in streams]
    host += [WaitEventOp(d.event, COMPUTE_STREAM) for d in done]
    step.erase(safe_erase=False)  # a copy: its operands must not count as uses
    replace_with_buffers(rewriter, op, host, outputs)


def sums_in_chunk_order(t: coco.TensorType) -> bool:
    """Whether a summed output of type `t` is summed from per-chunk slots in
    chunk order: a replicated float, whose ranks must agree bit for bit
    (integers add exactly, in any order)."""
    return element_info(t.element_type).is_float and t.layout.is_replicated


def summed_output(
    lowering: Lowering,
    host: list[Operation],
    value: SSAValue,
    index: int,
    output: SSAValue,
    body: list[Operation],
) -> Summed:
    """The buffers of the summed output `index` (`value`: the body's partial
    product), their allocations appended to `host`."""
    world = lowering.world
    t = buffer_type(tensor_of(value), world)
    element, shape = t.element_type, t.get_shape()
    wide = compute_type(element)
    info = element_info(element)
    accumulator, slots = output, None
    producer = value.owner
    gemm = producer if isinstance(producer, coco.MatmulOp) else None
    if gemm not in body or not info.is_float:
        gemm = None
    if world == 1:  # one partial, computed into the output itself
        return Summed(index, output, element, output, None, gemm, None)
    if sums_in_chunk_order(tensor_of(value)):
        made = alloc(wide, [world, *shape])
        made.memref.name_hint = "slots"
        host.append(made)
        slots = made.memref
    elif wide != element:
        made = alloc(wide, shape)
        made.memref.name_hint = "accumulator"
        host.append(made)
        accumulator = made.memref
    if gemm is not None:
        return Summed(index, output, element, accumulator, slots, gemm, None)
    partial = alloc(element, shape)
    partial.memref.name_hint = "partial"
    host.append(partial)
    return Summed(index, output, element, accumulator, slots, None, partial.memref)


def add_partial(
    emitter: PerPeerLowering,
    total: Summed,
    value: SSAValue,
    target: SSAValue,
    s: int,
    c: SSAValue,
) -> None:
    """Stream 0: step `s`'s partial `value` (of chunk `c`, computed into
    `target`) added into the accumulator, or stored into its slot (unless
    it is the output's first value, computed there)."""
    lowering = emitter.lowering
    more, computed = lowering.buffer(value)
    emitter.host += more
    if computed is not target:
        emitter.host.append(memref.CopyOp(computed, target))
    if total.writes_output(s):
        return
    assert total.partial is not None
    sink = total.sink(emitter.host, emitter.values, c)
    adds = s > 0 and total.slots is None
    inputs = [total.accumulator, total.partial] if adds else [total.partial]
    emitter.emit(
        map_buffers(
            lowering,
            emitter.values,
            f"{emitter.name}_{'accumulate' if adds else 'widen'}",
            inputs,
            sink,
            lambda b, v: (
                combine(b, "sum", v[0], to_compute(b, v[1]))
                if len(v) == 2
                else to_compute(b, v[0])
            ),
        ),
        COMPUTE_STREAM,
    )


def sum_slots(emitter: PerPeerLowering, total: Summed) -> list[Operation]:
    """The kernel summing a summed output's slots in chunk order, in the
    compute type, into the output (rounded once)."""
    assert total.slots is not None
    t = total.slot_type
    size = math.prod(t.get_shape())
    host: list[Operation] = []
    slots: list[SSAValue] = []
    for c in range(emitter.world):
        view = ViewOp(total.slots, c * size, t)
        view.result.name_hint = f"chunk_slot{c}"
        host.append(view)
        slots.append(view.result)

    def add(b: Builder, values: list[SSAValue]) -> SSAValue:
        acc = values[0]
        for value in values[1:]:
            acc = combine(b, "sum", acc, value)
        return from_compute(b, acc, total.element)

    return host + map_buffers(
        emitter.lowering,
        emitter.values,
        f"{emitter.name}_sum",
        slots,
        total.output,
        add,
    )


def fresh_view(host: list[Operation], buffer: SSAValue) -> SSAValue:
    """A view of all of `buffer` of its own (a destination's uses are then
    only its producer's and the copy into it)."""
    t = buffer.type
    assert isinstance(t, MemRefType)
    view = ViewOp(buffer, 0, t)
    view.result.name_hint = f"{buffer.name_hint or 'out'}_step"
    host.append(view)
    return view.result


def reduce_step(
    emitter: PerPeerLowering,
    scattered: list[Scattered],
    first_family: int,
    s: int,
    pushed: dict[int, RecordEventOp],
) -> None:
    """Stream 2's part of step `s` for the reduce-scattered outputs: the own
    partial (step 0) into the accumulator; then (s >= 1) the partial of step
    `s` pushed to rank `r + s`, the one of rank `r - s` waited for and added,
    its receive buffer credited for step `s + 2`."""
    lowering, transfers, world = emitter.lowering, emitter.transfers, emitter.world
    if s == 0:
        for piece in scattered:
            if piece.accumulator is not piece.output:
                emitter.emit(
                    map_buffers(
                        lowering,
                        emitter.values,
                        f"{emitter.name}_widen",
                        [piece.partials[0]],
                        piece.accumulator,
                        lambda b, v: to_compute(b, v[0]),
                    ),
                    COMPUTE_STREAM,
                )
        emitter.event(COMPUTE_STREAM, REDUCTION_STREAM, "own_partial")
        return
    emitter.event(COMPUTE_STREAM, REDUCTION_STREAM, "partial_ready")
    for k, piece in enumerate(scattered):
        t = (first_family + k) * world + s
        emitter.host += transfers.send(
            t, -s, piece.partials[s % 2], piece.received[s % 2], REDUCTION_STREAM
        )
    if s + 2 < world:
        pushed[s] = emitter.record(REDUCTION_STREAM, "partial_sent")
    for k, piece in enumerate(scattered):
        t = (first_family + k) * world + s
        emitter.host += transfers.arrival(t, REDUCTION_STREAM)
        emitter.emit(
            map_buffers(
                lowering,
                emitter.values,
                f"{emitter.name}_accumulate",
                [piece.accumulator, piece.received[s % 2]],
                piece.accumulator,
                lambda b, v: combine(b, "sum", v[0], to_compute(b, v[1])),
            ),
            REDUCTION_STREAM,
        )
        if s + 2 < world:
            emitter.host += transfers.credit(t + 2, -(s + 2), REDUCTION_STREAM)
