"""The fused collective kernel: a `coco.fusion` holding reduce_scatter(s),
elementwise compute on the slices and all_gather(s) (CoCoNet's fused
all-reduce), or sends of the slices, becomes ONE `gpu.func` (docs/gpu/fused.md, "The
fused all-reduce kernel"). Below, one slice shape; a fusion of several has a
*part* per shape, and every phase is built part by part, a part's chunk
computed chain by chain (docs/gpu/fused.md, "Several slice shapes"). Slice
and row reductions cut phase 2 into stages ("Reductions inside a fused
kernel", "Row reductions: a norm in the kernel").

The kernel is a two-shot push over peer pointers into symmetric buffers, with
signal-pad synchronization, pipelined in chunks of the rank's slice:

1. **Reduce-scatter push.** Work items `(k, c)`, `k = 1..N-1`, chunk `c`, go
   to blocks grid-strided. For peer `p = (rank + k) mod N`, the block stores
   its contribution to chunk `c` of `p`'s slice into `p`'s scratch, row
   `rank` (`coco_gpu.peer_view` + `memref.store`), then (barrier, thread 0)
   signals `p`'s slot (phase 1, from `rank`, chunk `c`) with the epoch.
2. **Reduce, compute, gather push.** Chunks `c` of the rank's own slice go
   to blocks grid-strided. Thread 0 waits for the phase-1 slots of `c` from
   every peer (acquire), barrier; every element is reduced over ranks in rank
   order `0..N-1` (own contribution read from the input, halves in f32), the
   region's elementwise computation runs on it at the element's global
   coordinates, sliced results are stored locally, gathered results into the
   local output and into every peer's gather buffer, row `rank`; barrier,
   thread 0 signals every peer's slot (phase 2, from `rank`, chunk `c`).
3. **Gather and closing sync.** Work items `(k, c)` as in phase 1, for the
   source `q = (rank + k) mod N`: thread 0 waits for `q`'s phase-2 slot of
   chunk `c`, barrier, and (when something is gathered) the block copies
   `q`'s chunk from the gather buffer into the output. Waiting for every
   peer's phase 2 is also the closing sync: a peer signals phase 2 only after
   it has read this rank's contribution, so when the kernel exits no peer
   still reads a buffer the next launch overwrites (the scratch), and a peer
   cannot write this rank's gather buffer in the next launch before this rank
   signals that launch's phase 1, after this launch has exited.

Epochs: the host draws `coco_gpu.next_epoch` per launch and passes it; slots
are compared with `>=` and never reset.

The host side: symmetric buffers (`coco_gpu.symmetric_buffer`) for each
reduction's scratch and each gather's receive buffer, `world x slice`
elements each, at offsets laid out per module (`coco_gpu.symmetric_bytes` on
the module), signal slots per fusion (`coco_gpu.signal_slots`), then one
`gpu.launch_func` and the `coco_gpu.nccl_send`s of sent values after it.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from math import prod

from xdsl.builder import Builder
from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import (
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    UnitAttr,
    VectorType,
    i64,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from coconet_ir.analysis.fused_plan import (
    SYMMETRIC_ALIGNMENT,
    FusedPlan,
    Part,
    SliceGeometry,
)
from coconet_ir.dialects import coco, gpu  # xDSL's gpu, in MLIR's syntax
from coconet_ir.dialects.coco import (
    AllGatherOp,
    AllSliceOp,
    FusionOp,
    ReduceOp,
    ReduceScatterOp,
    ancestor,
    element_info,
)
from coconet_ir.dialects.coco_gpu import (
    COOPERATIVE_ATTR,
    PEER_BYTES_ATTR,
    CountPeerBytesOp,
    NcclSendOp,
    NextEpochOp,
    PeersType,
    PeerViewOp,
    SignalOp,
    SymmetricBufferOp,
    WaitSignalOp,
)
from coconet_ir.lowering.bufferize import alloc, local_shape, lowered_buffer
from coconet_ir.lowering.kernels import (
    VECTOR_BYTES,
    Indexer,
    KernelModule,
    X,
    binary,
    block_reduce,
    combine,
    compute_type,
    constant,
    emit_elementwise,
    for_loop,
    from_compute,
    from_lanes,
    if_else,
    if_else_value,
    if_then,
    index_constant,
    lanes,
    load,
    load_lanes,
    reduce_identity,
    store,
    store_lanes,
    strides,
    to_compute,
)
from coconet_ir.lowering.state import (
    ElementContext,
    Lowering,
    chunk_of,
    replace_with_buffers,
)

index = IndexType()

PHASE_PUSH = 0
"""Slot kind: "my contribution to your chunk `c` is in your scratch"."""
PHASE_GATHER = 1
"""Slot kind: "I have reduced chunk `c` of my slice (and read your
contribution to it); my results for it are in your gather buffer"."""

SCALAR_BUFFERS = ("partials", "exchange", "result")
"""The symmetric buffers of slice reductions (`FusedPlan.symmetric_buffers`):
a scalar at a time, never by vectors."""


# ============================================================================
# Small IR builders
# ============================================================================


Index = SSAValue | int
"""An `index` value, or a constant not yet materialized."""


@dataclass
class Ints:
    """`index` arithmetic that folds what is known at compile time (constant
    operands, `x + 0`, `x * 1`, `x * 0`) and makes one `arith.constant` per
    value."""

    b: Builder
    constants: dict[int, SSAValue] = field(default_factory=dict[int, SSAValue])

    def c(self, value: int) -> SSAValue:
        if value not in self.constants:
            self.constants[value] = index_constant(self.b, value)
        return self.constants[value]

    def v(self, x: Index) -> SSAValue:
        return self.c(x) if isinstance(x, int) else x

    def add(self, x: Index, y: Index) -> SSAValue:
        return self.fold(arith.AddiOp, operator.add, 0, x, y)

    def mul(self, x: Index, y: Index) -> SSAValue:
        return self.fold(arith.MuliOp, operator.mul, 1, x, y, zero=0)

    def fold(
        self,
        kind: type[Operation],
        compute: Callable[[int, int], int],
        identity: int,
        x: Index,
        y: Index,
        zero: int | None = None,
    ) -> SSAValue:
        """`x kind y`, computed now when both are known, `zero` when one is
        (`x * 0`), the other operand when one is the `identity`."""
        if isinstance(x, int) and isinstance(y, int):
            return self.c(compute(x, y))
        if zero is not None and (x == zero or y == zero):
            return self.c(zero)
        if y == identity:
            return self.v(x)
        if x == identity:
            return self.v(y)
        return binary(self.b, kind, self.v(x), self.v(y))

    def div(self, x: SSAValue, y: int) -> SSAValue:
        return x if y == 1 else binary(self.b, arith.DivUIOp, x, self.c(y))

    def rem(self, x: SSAValue, y: Index) -> SSAValue:
        return binary(self.b, arith.RemUIOp, x, self.v(y))

    def min(self, x: SSAValue, y: Index) -> SSAValue:
        return binary(self.b, arith.MinUIOp, x, self.v(y))

    def eq(self, x: SSAValue, y: Index) -> SSAValue:
        return self.b.insert(arith.CmpiOp(x, self.v(y), "eq")).result


# ============================================================================
# The kernel
# ============================================================================


REDUCTIONS: dict[str, tuple[type[Operation], type[Operation]]] = {
    "sum": (arith.AddfOp, arith.AddiOp),
    "prod": (arith.MulfOp, arith.MuliOp),
    "max": (arith.MaximumfOp, arith.MaxSIOp),
    "min": (arith.MinimumfOp, arith.MinSIOp),
}
"""The scalar op combining two ranks' contributions (float, integer)."""


def rank_combiner(reduction: str, element_type: Attribute) -> type[Operation]:
    """The op combining two ranks' values of `element_type` (`REDUCTIONS`)."""
    float_kind, int_kind = REDUCTIONS[reduction]
    return float_kind if element_info(element_type).is_float else int_kind


DropoutIndex = Callable[[Builder, SSAValue, SSAValue], SSAValue]
"""Given element `l` of rank `r`'s slice (both `index`), the i64 global index
a dropout draws its mask at (inside an overlap chunk, the index in the
un-chunked tensor)."""


@dataclass
class KernelArgs:
    """Which kernel argument holds what (all buffers flat, 1-D, or rank 0)."""

    args: list[tuple[str, Attribute]] = field(
        default_factory=list[tuple[str, Attribute]]
    )
    positions: dict[object, int] = field(default_factory=dict[object, int])

    def add(self, key: object, hint: str, t: Attribute) -> None:
        self.positions[key] = len(self.args)
        self.args.append((hint, t))


@dataclass
class FusedKernel:
    """Builds the device side of one fused collective (the module docstring's
    phases) from its plan: `slice_outputs` are the sliced values the kernel
    stores (yielded, sent or carried to a later stage), `dropout_index` the
    global index of each dropout's elements; it completes every all_gather
    of the plan.

    The first of its signal slots (`slots`) and its dropouts' seeds are
    kernel arguments, not constants: the kernel is the same for every fusion
    computing the same thing on the same types (every parameter of a shape),
    and the lowering builds it once (docs/gpu/fused.md, "Symmetric buffers and
    signal slots")."""

    plan: FusedPlan
    slice_outputs: list[SSAValue]
    dropout_index: Callable[[Operation], DropoutIndex]
    threads: int
    """The most threads a block of the launch has."""
    layout: KernelArgs = field(default_factory=KernelArgs)
    shared_buffers: dict[Attribute, SSAValue] = field(
        default_factory=dict[Attribute, SSAValue]
    )
    accumulators: dict[int, dict[ReduceOp, SSAValue]] = field(
        default_factory=dict[int, dict[ReduceOp, SSAValue]]
    )
    """Per stage, its slice reductions' per-thread accumulators."""
    scalars: dict[SSAValue, SSAValue] = field(default_factory=dict[SSAValue, SSAValue])
    """The result of every completed all_reduce, read by every thread."""
    func: gpu.FuncOp = field(init=False)
    tid: SSAValue = field(init=False)
    bid: SSAValue = field(init=False)
    bdim: SSAValue = field(init=False)
    gdim: SSAValue = field(init=False)
    rank: SSAValue = field(init=False)
    epoch: SSAValue = field(init=False)
    peers: SSAValue = field(init=False)
    slot_base: SSAValue = field(init=False)
    phase_base: dict[int, SSAValue] = field(init=False)
    """The first slot of each phase's range of the part being built: `slots +
    phase offset`."""
    phase_bases: list[dict[int, SSAValue]] = field(init=False)
    """`phase_base` of every part."""
    part: Part = field(init=False)
    """The part whose loops are being built (`on`)."""
    component: frozenset[SSAValue] | None = field(init=False, default=None)
    """The chain whose element loop is being built (`FusedPlan.components`;
    None: every chain of the part, as a row stage computes them)."""
    is_leader: SSAValue = field(init=False)
    width: int = field(init=False)
    """Elements per vector access (1: every access is scalar)."""
    aligned: SSAValue | None = field(init=False, default=None)
    """Whether every buffer of the kernel is aligned for vector accesses."""

    # ---------------------------------------------------------------- args

    def __post_init__(self) -> None:
        plan, world = self.plan, self.plan.world
        add = self.layout.add
        add("rank", "rank", index)
        add("epoch", "epoch", i64)
        add("peers", "peers", PeersType())
        add("slots", "slots", index)
        for op in self.dropouts():
            add(("seed", op), "seed", i64)
        for i, op in enumerate(plan.reductions):
            t = coco.tensor_type(op.operand)
            full = plan.elements(op) * world
            add(("input", op), f"input{i}", MemRefType(t.element_type, [full]))
            add(("scratch", op), f"scratch{i}", MemRefType(t.element_type, [full]))
        for arg in self.read_arguments():
            t = coco.tensor_type(arg)
            add(("read", arg), f"in{arg.index}", _flat_buffer(t, world))
        for i, op in enumerate(plan.gathers):
            t = coco.tensor_type(op.operand)
            full = plan.elements(op) * world
            add(("gather", op), f"gather{i}", MemRefType(t.element_type, [full]))
            add(("gathered", op), f"gathered{i}", MemRefType(t.element_type, [full]))
        for i, value in enumerate(self.slice_outputs):
            t = coco.tensor_type(value)
            add(
                ("slice", value),
                f"slice{i}",
                MemRefType(t.element_type, [plan.part_of(value).geometry.elements]),
            )
        for i, op in enumerate(plan.row_reductions):
            add(("rows", op), f"rows{i}", MemRefType(plan.row_type(op), [plan.rows]))
        for i, value in enumerate(self.row_outputs()):
            t = coco.tensor_type(value).element_type
            add(("row_out", value), f"row_out{i}", MemRefType(t, [plan.rows]))
        for i, buffer in enumerate(plan.symmetric_buffers()):
            if buffer.kind in SCALAR_BUFFERS:
                add(
                    (buffer.kind, buffer.op),
                    f"{buffer.kind}{i}",
                    MemRefType(buffer.element_type, [buffer.count]),
                )
        self.width = self.vector_width()

    def vector_width(self) -> int:
        """Elements per vector access: 16 bytes of the widest element the
        kernel moves, if every chunk and every row of a slice is a whole
        number of vectors (so vectors never straddle a chunk or a row); else
        1 (docs/gpu/fused.md, "Vector accesses")."""
        widest = max(
            element_info(t.element_type).storage.itemsize
            for key, (_, t) in zip(self.layout.positions, self.layout.args)
            if isinstance(t, MemRefType) and self.is_vector_accessed(key)
        )
        width = VECTOR_BYTES // widest
        rows = tuple(
            size
            for part in self.plan.parts
            for size in (
                part.geometry.elements,
                part.chunk_size,
                part.geometry.block * part.geometry.inner,
            )
        )
        if self.plan.row_length > 1:
            rows += (self.plan.row_length,)  # a vector's lanes share their row
        if width < 2 or any(size % width for size in rows):
            return 1
        return width

    def row_outputs(self) -> list[SSAValue]:
        """Yielded rows computed from a row reduction's (`1 / sqrt(var +
        eps)`, which a LayerNorm's backward reads): the kernel stores each
        row's value once, at the row's first element (a yielded row
        reduction's rows are its rows buffer)."""
        plan = self.plan
        return [
            v
            for v in plan.fusion.yield_op.arguments
            if plan.is_rows(v) and v.owner not in plan.row_reductions
        ]

    def dropouts(self) -> list[coco.DropoutOp]:
        """The body's dropouts, whose seeds are kernel arguments."""
        return [op for op in self.plan.compute if isinstance(op, coco.DropoutOp)]

    def read_arguments(self) -> list[BlockArgument]:
        """Block arguments the kernel reads per element: the compute's
        operands, and inputs reduced or gathered as they are (not the
        reduce_scatters' inputs, unless something else reads them too)."""
        plan = self.plan
        found: dict[BlockArgument, None] = {}
        readers = (
            *plan.compute,
            *plan.slice_reductions,
            *plan.row_reductions,
            *plan.gathers,
        )
        for op in readers:
            for operand in op.operands:
                if isinstance(operand, BlockArgument):
                    found.setdefault(operand)
        return list(found)

    @property
    def kernel_arguments(self) -> list[tuple[str, Attribute]]:
        return self.layout.args

    def parameter_problem(self) -> str | None:
        """Why CUDA cannot launch this kernel, if it cannot: its parameters
        (8 bytes each, `coco_peers` by value) exceed KERNEL_PARAMETER_BYTES
        (a fusion over hundreds of parameters' buffers; buckets take
        fewer)."""
        arguments = self.kernel_arguments
        size = sum(PEERS_BYTES if isinstance(t, PeersType) else 8 for _, t in arguments)
        if size <= KERNEL_PARAMETER_BYTES:
            return None
        return (
            f"needs {len(arguments)} kernel parameters ({size} bytes), more than "
            f"CUDA's {KERNEL_PARAMETER_BYTES} bytes"
        )

    def arg(self, func: gpu.FuncOp, key: object) -> SSAValue:
        return func.body.block.args[self.layout.positions[key]]

    # ---------------------------------------------------------------- build

    def build(self, kernels: KernelModule, name: str) -> gpu.FuncOp:
        func, b = kernels.kernel(name, self.kernel_arguments)
        self.func = func
        n = Ints(b)
        self.tid = b.insert(gpu.ThreadIdOp(X)).result
        self.bid = b.insert(gpu.BlockIdOp(X)).result
        self.bdim = b.insert(gpu.BlockDimOp(X)).result
        self.gdim = b.insert(gpu.GridDimOp(X)).result
        self.tid.name_hint, self.bid.name_hint = "tid", "bid"
        self.rank = self.arg(func, "rank")
        self.epoch = self.arg(func, "epoch")
        self.peers = self.arg(func, "peers")
        self.slot_base = self.arg(func, "slots")
        self.phase_bases = []
        for part in self.plan.parts:
            bases: dict[int, SSAValue] = {}
            for phase, hint in ((PHASE_PUSH, "pushed"), (PHASE_GATHER, "gathered")):
                base = n.add(self.slot_base, self.plan.slots.phase(phase, part.index))
                if base is not self.slot_base:
                    base.name_hint = f"{hint}_slots"
                bases[phase] = base
            self.phase_bases.append(bases)
        self.on(self.plan.parts[0])
        self.is_leader = n.eq(self.tid, 0)
        self.is_leader.name_hint = "leader"
        if self.width > 1:
            self.aligned = self.all_aligned(b)
        for part in self.plan.parts:
            self.on(part)
            self.phase_push(b)
        for run in self.plan.segments:
            accumulators = {stage: self.start_accumulators(b, stage) for stage in run}
            for part in self.plan.parts:
                self.on(part)
                self.phase_compute(b, run, accumulators)
            if run[-1] + 1 < self.plan.stage_count:
                self.complete_reductions(b, run[-1])
        for part in self.plan.parts:
            self.on(part)
            self.phase_gather(b)
        return func

    def on(self, part: Part) -> None:
        """Build the loops of `part` (its chunks, signal slots, geometry)."""
        self.part = part
        self.phase_base = self.phase_bases[part.index]

    def mine(self, value: SSAValue) -> bool:
        """Whether the element loop being built computes `value`: a slice of
        its part, of its chain (`component`) if it computes one chain."""
        return self.part.holds(value) and (
            self.component is None or value in self.component
        )

    # ------------------------------------------------------------ helpers

    @property
    def chunks(self) -> int:
        return self.part.chunks

    def slot(self, n: Ints, phase: int, source: SSAValue, chunk: Index) -> SSAValue:
        """Slot `base + (phase * N + source) * C + chunk` of a signal pad."""
        row = n.add(self.phase_base[phase], n.mul(source, self.chunks))
        return n.add(row, chunk)

    def peer_items(self, b: Builder) -> tuple[Builder, SSAValue, Index]:
        """`for it = bid; it < (N-1) * C; it += gdim`: the peer `(rank + 1 +
        it / C) mod N` and the chunk `it mod C` of each work item."""
        n = Ints(b)
        items = n.c((self.plan.world - 1) * self.chunks)
        body, item = for_loop(b, self.bid, items, self.gdim, "item")
        m = Ints(body)
        step = m.add(m.div(item, self.chunks), 1)
        peer = m.rem(m.add(self.rank, step), self.plan.world)
        peer.name_hint = "peer"
        if self.chunks == 1:
            return body, peer, 0
        chunk = m.rem(item, self.chunks)
        chunk.name_hint = "chunk"
        return body, peer, chunk

    def chunk_elements(
        self, b: Builder, chunk: Index, width: int = 1
    ) -> tuple[Builder, SSAValue]:
        """`for l = chunk * K + tid; l < min(L, (chunk + 1) * K); l += bdim`
        over vectors of `width` elements (K and L counted in vectors); the
        body's builder and its first element `l * width`."""
        n = Ints(b)
        size = self.part.chunk_size // width
        total = self.part.geometry.elements // width
        first = n.mul(chunk, size)
        start = n.add(first, self.tid)
        end = n.add(first, size)
        if total % size:
            end = n.min(end, total)
        body, index = for_loop(b, start, end, self.bdim, "l" if width == 1 else "v")
        return body, Ints(body).mul(index, width)

    def for_elements(
        self, b: Builder, chunk: Index, emit: Callable[[Builder, SSAValue, int], None]
    ) -> None:
        """`emit(body, l, width)` for the elements `l .. l + width - 1` of
        chunk `chunk`, the block's threads striding over them: by vectors
        when the kernel has a vector width and its buffers are aligned,
        else one element at a time."""
        if self.aligned is None:
            emit(*self.chunk_elements(b, chunk), 1)
            return
        vectors, scalars = if_else(b, self.aligned)
        emit(*self.chunk_elements(vectors, chunk, self.width), self.width)
        emit(*self.chunk_elements(scalars, chunk), 1)

    def is_vector_accessed(self, key: object) -> bool:
        """Whether the kernel argument `key` is read or written by vectors:
        every buffer but the inputs read as scalars or by broadcast."""
        if not (isinstance(key, tuple) and key):
            return False  # rank, epoch, peers, slots
        if key[0] in (*SCALAR_BUFFERS, "seed", "rows", "row_out"):
            return False
        if key[0] != "read":
            return True
        if self.plan.is_rows(key[1]):
            return False
        t = coco.tensor_type(key[1])
        return t.rank > 0 and (
            t.layout.is_sliced
            or any(tuple(t.dims) == p.geometry.dims for p in self.plan.parts)
        )

    def all_aligned(self, b: Builder) -> SSAValue:
        """Whether every buffer argument starts at a multiple of 16 bytes (a
        view of a buffer may start anywhere; peers' copies of a symmetric
        buffer are at the same offset of workspaces as aligned as ours)."""
        n = Ints(b)
        aligned: SSAValue | None = None
        for key in self.layout.positions:
            if not self.is_vector_accessed(key):
                continue
            argument = self.arg(self.func, key)
            pointer = b.insert(memref.ExtractAlignedPointerAsIndexOp.get(argument))
            ok = n.eq(n.rem(pointer.aligned_pointer, VECTOR_BYTES), 0)
            aligned = ok if aligned is None else binary(b, arith.AndIOp, aligned, ok)
        assert aligned is not None
        aligned.name_hint = "aligned"
        return aligned

    def chunk_bytes(self, b: Builder, chunk: Index, element_bytes: int) -> SSAValue:
        """Bytes of `element_bytes` per element in chunk `chunk` (the last
        chunk may be short)."""
        n = Ints(b)
        size, total = self.part.chunk_size, self.part.geometry.elements
        if total % size == 0:
            return n.c(size * element_bytes)
        first = n.mul(chunk, size)
        end = n.min(n.add(first, size), total)
        count = binary(b, arith.SubiOp, end, first)
        return n.mul(count, element_bytes)

    def count_bytes(
        self, b: Builder, peer: SSAValue, chunk: Index, element_bytes: int
    ) -> None:
        """`coco_gpu.count_peer_bytes` of one chunk's stores into `peer`."""
        if element_bytes:
            bytes_ = self.chunk_bytes(b, chunk, element_bytes)
            b.insert(CountPeerBytesOp(self.peers, peer, bytes_))

    def leader(self, b: Builder) -> Builder:
        """Code run by thread 0 of the block only."""
        return if_then(b, self.is_leader)

    def barrier(self, b: Builder) -> None:
        b.insert(gpu.BarrierOp())

    def global_index(self, n: Ints, owner: SSAValue, element: SSAValue) -> SSAValue:
        """The global linear index of element `element` of `owner`'s slice
        (SliceGeometry.global_index, in `arith`)."""
        g = self.part.geometry
        row = g.block * g.inner
        offset = n.mul(owner, row)
        if g.contiguous:
            return n.add(offset, element)
        outer = n.div(element, row)
        rest = n.rem(element, row)
        return n.add(n.add(n.mul(outer, g.dims[g.dim] * g.inner), offset), rest)

    # ------------------------------------------------------------ phase 1

    def phase_push(self, b: Builder) -> None:
        body, peer, chunk = self.peer_items(b)
        n = Ints(body)
        targets = [
            body.insert(
                PeerViewOp(self.peers, self.arg(self.func, ("scratch", op)), peer)
            ).result
            for op in self.part.reductions
        ]
        row = n.mul(self.rank, self.part.geometry.elements)

        def push(loop: Builder, element: SSAValue, width: int) -> None:
            m = Ints(loop)
            source = self.global_index(m, peer, element)
            at = m.add(row, element)
            for op, target in zip(self.part.reductions, targets):
                input_ = self.arg(self.func, ("input", op))
                store_lanes(loop, load_lanes(loop, input_, source, width), target, at)

        self.for_elements(body, chunk, push)
        self.barrier(body)
        lead = self.leader(body)
        k = Ints(lead)
        pushed = sum(
            self.plan.reduction_element_bytes(op) for op in self.part.reductions
        )
        self.count_bytes(lead, peer, chunk, pushed)
        lead.insert(
            SignalOp(
                self.peers, peer, self.slot(k, PHASE_PUSH, self.rank, chunk), self.epoch
            )
        )

    # ------------------------------------------------------------ phase 2

    def phase_compute(
        self,
        b: Builder,
        run: list[int],
        accumulators: dict[int, dict[ReduceOp, SSAValue]],
    ) -> None:
        """Stages `run` of phase 2 (stages between two scalar boundaries)
        over the chunks of this rank's slice, chunk by chunk (the same chunks
        go to the same block in every stage): stage 0 waits for the peers'
        contributions and reduces them; every stage computes its ops, stores
        its outputs, pushes its gathered values and accumulates its slice
        reductions; a stage with row reductions goes row by row and stores
        each row's statistic, which the block reads in the next stage after
        a barrier; the last stage signals phase 2."""
        n = Ints(b)
        body, chunk = for_loop(b, self.bid, n.c(self.chunks), self.gdim, "chunk")
        for stage in run:
            if stage == 0:
                self.wait_for_peers(body, chunk)
            if stage == 0 or stage != run[0]:
                self.barrier(body)  # the peers' data, or the rows just stored
            if self.row_reductions(stage):
                self.for_rows(body, chunk, stage, accumulators[stage])
                continue
            for component in self.plan.components[self.part.index]:
                self.component = component  # one loop per chain
                if not self.stage_needs(stage):
                    continue  # the chain has nothing in this stage
                self.for_elements(
                    body,
                    chunk,
                    lambda loop, element, width, stage=stage: self.compute_elements(
                        loop, element, width, stage, accumulators[stage]
                    ),
                )
            self.component = None
        if run[-1] + 1 < self.plan.stage_count:
            return
        self.barrier(body)
        lead = self.leader(body)
        gathered = sum(self.plan.gather_element_bytes(op) for op in self.part.gathers)

        def signal(inner: Builder, peer: SSAValue) -> None:
            self.count_bytes(inner, peer, chunk, gathered)
            slot = self.slot(Ints(inner), PHASE_GATHER, self.rank, chunk)
            inner.insert(SignalOp(self.peers, peer, slot, self.epoch))

        self.for_peers(lead, signal)

    def row_reductions(self, stage: int) -> list[ReduceOp]:
        """The row reductions whose operand stage `stage` computes."""
        plan = self.plan
        return [op for op in plan.row_reductions if plan.read_stage(op) == stage]

    def for_rows(
        self,
        b: Builder,
        chunk: SSAValue,
        stage: int,
        accumulators: dict[ReduceOp, SSAValue],
    ) -> None:
        """Stage `stage` of chunk `chunk` row by row: for each row, the row
        accumulators start at their identity, the block's threads stride
        over the row's elements (`compute_elements`), the block combines
        the accumulators (`block_reduce`) and thread 0 stores each row
        reduction's value in its rows buffer."""
        plan = self.plan
        n = Ints(b)
        per_chunk = plan.chunk_size // plan.row_length
        first = n.mul(chunk, per_chunk)
        end = n.add(first, per_chunk)
        if plan.rows % per_chunk:
            end = n.min(end, plan.rows)
        body, row = for_loop(b, first, end, n.c(1), "row")
        m = Ints(body)
        reductions = self.row_reductions(stage)
        for op in reductions:
            t = compute_type(plan.partial_type(op))
            identity = constant(body, reduce_identity(str(op.kind.data), t), t)
            store(body, identity, accumulators[op], [m.c(0)])

        def emit(loop: Builder, element: SSAValue, width: int) -> None:
            self.compute_elements(loop, element, width, stage, accumulators)

        if self.aligned is None:
            emit(*self.row_elements(body, row), 1)
        else:
            vectors, scalars = if_else(body, self.aligned)
            emit(*self.row_elements(vectors, row, self.width), self.width)
            emit(*self.row_elements(scalars, row), 1)
        totals = self.block_totals(body, reductions, accumulators, m.c(0))
        lead = self.leader(body)
        for op, total in zip(reductions, totals):
            rows = self.arg(self.func, ("rows", op))
            store(lead, from_compute(lead, total, plan.row_type(op)), rows, [row])

    def row_elements(
        self, b: Builder, row: SSAValue, width: int = 1
    ) -> tuple[Builder, SSAValue]:
        """`for v = row * R + tid; v < (row + 1) * R; v += bdim` over vectors
        of `width` elements (R counted in vectors); the body's builder and
        its first element `v * width`."""
        n = Ints(b)
        size = self.plan.row_length // width
        first = n.mul(row, size)
        body, index = for_loop(
            b, n.add(first, self.tid), n.add(first, size), self.bdim, "v"
        )
        return body, Ints(body).mul(index, width)

    def for_peers(
        self, b: Builder, emit: Callable[[Builder, SSAValue], object]
    ) -> None:
        """`for k = 1 .. N-1: emit(peer = (rank + k) mod N)`."""
        n = Ints(b)
        body, k = for_loop(b, n.c(1), n.c(self.plan.world), n.c(1), "k")
        m = Ints(body)
        peer = m.rem(m.add(self.rank, k), self.plan.world)
        peer.name_hint = "peer"
        emit(body, peer)

    def wait_for_peers(self, b: Builder, chunk: Index) -> None:
        """Thread 0 waits for every peer's phase-1 slot of `chunk`."""
        lead = self.leader(b)
        self.for_peers(
            lead,
            lambda inner, peer: inner.insert(
                WaitSignalOp(
                    self.peers,
                    self.slot(Ints(inner), PHASE_PUSH, peer, chunk),
                    self.epoch,
                )
            ),
        )

    def compute_elements(
        self,
        b: Builder,
        element: SSAValue,
        width: int,
        stage: int,
        accumulators: dict[ReduceOp, SSAValue],
    ) -> None:
        """Stage `stage` of elements `element .. element + width - 1` of this
        rank's slice: vector loads and stores, the arithmetic lane by lane.
        Stage 0 reduces the reduce_scatters' contributions; a value of an
        earlier stage is read back from the buffer it was stored in, the
        scalars of completed slice reductions are `self.scalars`, and what
        is cheap to recompute (all_slices, constants, scalar arithmetic) is
        recomputed."""
        n = Ints(b)
        plan, part = self.plan, self.part
        own = self.global_index(n, self.rank, element)
        own.name_hint = "g"
        elements = [n.add(element, j) for j in range(width)]
        per_lane: list[dict[SSAValue, SSAValue]] = [{} for _ in range(width)]

        def value_of(v: SSAValue, lane: int) -> SSAValue:
            if v in self.scalars:
                return self.scalars[v]
            if v not in per_lane[lane]:
                if plan.is_rows(v) and (
                    isinstance(v, BlockArgument) or v.owner in plan.row_reductions
                ):
                    values = [self.row_value(b, n, v, element)] * width
                elif isinstance(v, BlockArgument):
                    values = self.read_lanes(b, n, v, elements, own)
                else:  # carried over from an earlier stage
                    buffer = self.arg(self.func, ("slice", v))
                    values = lanes(b, load_lanes(b, buffer, element, width))
                for scalars, value in zip(per_lane, values):
                    scalars[v] = value
            return per_lane[lane][v]

        needed = self.stage_ops(stage)
        for op in plan.reductions:
            if op in needed:
                values = self.reduce(b, op, element, own, width)
                for scalars, value in zip(per_lane, values):
                    scalars[op.result] = value
        for op in plan.compute:
            if op not in needed:
                continue
            if plan.is_rows(op.results[0]):  # every lane of a vector: one row
                row = emit_elementwise(b, op, [value_of(v, 0) for v in op.operands])
                for scalars in per_lane:
                    scalars[op.results[0]] = row
                continue
            for lane, scalars in enumerate(per_lane):
                if isinstance(op, AllSliceOp):
                    scalars[op.result] = value_of(op.operand, lane)
                    continue
                operands = [value_of(v, lane) for v in op.operands]
                scalars[op.results[0]] = emit_elementwise(
                    b,
                    op,
                    operands,
                    lambda op=op, lane=lane: self.dropout_index(op)(
                        b, elements[lane], self.rank
                    ),
                    lambda op: self.arg(self.func, ("seed", op)),
                )

        def packed(value: SSAValue) -> SSAValue:
            return from_lanes(b, [value_of(value, lane) for lane in range(width)])

        for value in self.slice_outputs:
            if plan.stage(value) == stage and self.mine(value):
                slice_ = self.arg(self.func, ("slice", value))
                store_lanes(b, packed(value), slice_, element)
        for value in self.row_outputs():
            if plan.stage(value) == stage and self.mine(value):
                first = n.eq(n.rem(element, plan.row_length), 0)
                at_first = if_then(b, first)  # the row's first element
                row = Ints(at_first).div(element, plan.row_length)
                rows = self.arg(self.func, ("row_out", value))
                store(at_first, value_of(value, 0), rows, [row])
        for op, accumulator in accumulators.items():
            if not self.mine(op.operand):
                continue  # another part's or chain's reduction
            total = load(b, accumulator, [n.c(0)])
            for lane in range(width):
                total = combine(
                    b,
                    str(op.kind.data),
                    total,
                    to_compute(b, value_of(op.operand, lane)),
                )
            store(b, total, accumulator, [n.c(0)])
        at = n.add(n.mul(self.rank, part.geometry.elements), element)
        for op in part.gathers:
            if plan.stage(op.operand) != stage or not self.mine(op.operand):
                continue
            result = packed(op.operand)
            store_lanes(b, result, self.arg(self.func, ("gathered", op)), own)
            gather = self.arg(self.func, ("gather", op))
            self.for_peers(
                b,
                lambda inner, peer, result=result, gather=gather: store_lanes(
                    inner,
                    result,
                    inner.insert(PeerViewOp(self.peers, gather, peer)).result,
                    at,
                ),
            )

    def row_value(self, b: Builder, n: Ints, v: SSAValue, element: SSAValue):
        """The value of rows `v` (a row reduction's, or a fusion input's) at
        element `element`'s row, which every lane of its vector shares."""
        key = ("read", v) if isinstance(v, BlockArgument) else ("rows", v.owner)
        return load(b, self.arg(self.func, key), [n.div(element, self.plan.row_length)])

    def stage_needs(self, stage: int) -> set[SSAValue]:
        """What stage `stage` of the loop being built produces: its stored
        and yielded values, the operands of its gathers and reductions."""
        plan, part, mine = self.plan, self.part, self.mine
        needed: set[SSAValue] = {
            v
            for v in (*self.slice_outputs, *self.row_outputs())
            if plan.stage(v) == stage and mine(v)
        }
        needed |= {
            op.operand
            for op in (
                *part.gathers,
                *plan.slice_reductions,
                *plan.row_reductions,
            )
            if plan.stage(op.operand) == stage and mine(op.operand)
        }
        return needed

    def stage_ops(self, stage: int) -> set[Operation]:
        """The body ops stage `stage` computes per element: those its
        outputs, gathers and slice reductions need, back to the inputs, the
        scalars of completed reductions and the values of earlier stages
        stored in a buffer (docs/gpu/fused.md, "Reductions inside a fused
        kernel")."""
        plan = self.plan
        needed = self.stage_needs(stage)
        found: set[Operation] = set()
        for op in reversed(list(plan.fusion.block.ops)):
            if not any(r in needed for r in op.results):
                continue
            if plan.is_boundary(op) or (
                op.results[0] in plan.carried and plan.stage(op.results[0]) < stage
            ):
                continue  # a boundary's scalar or rows, or stored earlier
            found.add(op)
            needed.update(op.operands)
        return found

    def reduce(
        self,
        b: Builder,
        op: ReduceScatterOp,
        element: SSAValue,
        own: SSAValue,
        width: int,
    ) -> list[SSAValue]:
        """The reduction over ranks `0..N-1`, in rank order, of elements
        `element .. element + width - 1` of this rank's slice, a value per
        lane: the own contribution from the input, the others from the
        scratch rows peers pushed (computed in f32 for halves, rounded
        once)."""
        t = coco.tensor_type(op.operand).element_type
        result_type = coco.tensor_type(op.result).element_type
        source = self.arg(self.func, ("input", op))
        scratch = self.arg(self.func, ("scratch", op))
        size = self.part.geometry.elements
        loaded = t if width == 1 else VectorType(t, [width])

        def contribution(inner: Builder, rank: SSAValue) -> list[SSAValue]:
            m = Ints(inner)
            mine = m.eq(rank, self.rank)
            value = if_else_value(
                inner,
                mine,
                loaded,
                lambda x: load_lanes(x, source, own, width),
                lambda x: load_lanes(
                    x, scratch, Ints(x).add(Ints(x).mul(rank, size), element), width
                ),
            )
            return [to_compute(inner, lane) for lane in lanes(inner, value)]

        combined = self.over_ranks(b, rank_combiner(op.reduction.data, t), contribution)
        return [from_compute(b, lane, result_type) for lane in combined]

    def over_ranks(
        self,
        b: Builder,
        kind: type[Operation],
        contribution: Callable[[Builder, SSAValue], list[SSAValue]],
    ) -> list[SSAValue]:
        """`contribution(rank)` of ranks `0..N-1` combined by `kind`, in rank
        order (so every rank computes the same bits): `scf.for` over ranks
        `1..N-1` carrying the combination of each lane."""
        n = Ints(b)
        first = contribution(b, n.c(0))
        if self.plan.world == 1:
            return first
        body = Block(arg_types=[index, *(lane.type for lane in first)])
        body.args[0].name_hint = "q"
        for accumulator in body.args[1:]:
            accumulator.name_hint = "acc"
        inner = Builder(InsertPoint.at_end(body))
        combined = [
            binary(inner, kind, accumulator, lane)
            for accumulator, lane in zip(
                body.args[1:], contribution(inner, body.args[0])
            )
        ]
        inner.insert(scf.YieldOp(*combined))
        loop = b.insert(scf.ForOp(n.c(1), n.c(self.plan.world), n.c(1), first, body))
        return list(loop.results)

    # ------------------------------------------- slice reductions (stages)

    def start_accumulators(self, b: Builder, stage: int) -> dict[ReduceOp, SSAValue]:
        """A per-thread accumulator (`memref.alloca` of one element of the
        compute type, which the compiler keeps in a register) for every slice
        and row reduction of `stage`, holding its identity (a row's starts
        again at every row: `for_rows`)."""
        n = Ints(b)
        found: dict[ReduceOp, SSAValue] = {}
        for op in (*self.plan.slice_reductions, *self.plan.row_reductions):
            if self.plan.stage(op.operand) != stage:
                continue
            t = compute_type(self.plan.partial_type(op))
            alloca = b.insert(memref.AllocaOp.get(t, shape=[1]))
            alloca.memref.name_hint = "acc"
            identity = constant(b, reduce_identity(str(op.kind.data), t), t)
            store(b, identity, alloca.memref, [n.c(0)])
            found[op] = alloca.memref
        self.accumulators[stage] = found
        return found

    def block_totals(
        self,
        b: Builder,
        reductions: Sequence[ReduceOp],
        accumulators: dict[ReduceOp, SSAValue],
        zero: SSAValue,
    ) -> list[SSAValue]:
        """Each reduction's per-thread accumulator combined across the block
        (`block_reduce`); every thread gets the totals. `zero`: index 0."""
        totals = []
        for op in reductions:
            value = load(b, accumulators[op], [zero])
            shared = self.shared(value.type)
            kind = str(op.kind.data)
            totals.append(
                block_reduce(b, kind, value, shared, self.threads, self.tid, self.bdim)
            )
        return totals

    def shared(self, t: Attribute) -> SSAValue:
        """The kernel's workgroup buffer of `threads` elements of `t`, for
        block reductions (one per type)."""
        if t not in self.shared_buffers:
            buffer = self.func.add_workgroup_buffer(t, self.threads)
            buffer.name_hint = "partials"
            self.shared_buffers[t] = buffer
        return self.shared_buffers[t]

    def complete_reductions(self, b: Builder, stage: int) -> None:
        """The boundary after stage `stage` (docs/gpu/fused.md, "Reductions inside a
        fused kernel"), as top-level steps every block takes in order:

        1. each block combines its threads' accumulators (`block_reduce`);
           thread 0 stores the block's partial and signals the block's
           arrival slot on this rank's own pad;
        2. block 0 waits for every block's arrival, combines the block
           partials in block order, and stores this rank's partial into its
           own row of each exchange buffer and into every peer's, then
           signals the peers;
        3. block 0 waits for the peers' partials, combines the ranks' in rank
           order into each all_reduce's result and raises the boundary's
           flag; the other blocks wait for the flag;
        4. every thread reads the results (`self.scalars`).

        Block 0 waits for every block and every block for block 0: all
        blocks must be resident at once, which the cooperative launch
        guarantees."""
        plan, slots = self.plan, self.plan.slots
        reductions = [
            op for op in plan.slice_reductions if plan.stage(op.operand) == stage
        ]
        all_reduces = [
            op for op in plan.scalar_all_reduces if plan.stage(op.result) == stage + 1
        ]
        accumulators = self.accumulators[stage]
        n = Ints(b)
        zero = n.c(0)
        boundary = plan.boundary(stage)
        arrivals = n.add(self.slot_base, slots.arrivals(boundary))
        scalars = n.add(self.slot_base, slots.scalars(boundary))
        flag = n.add(self.slot_base, slots.flag(boundary))
        arrivals.name_hint, scalars.name_hint = "arrival_slots", "scalar_slots"
        flag.name_hint = "flag_slot"

        # 1. Every block: its partials.
        totals = self.block_totals(b, reductions, accumulators, zero)
        lead = self.leader(b)
        for op, total in zip(reductions, totals):
            store(lead, total, self.arg(self.func, ("partials", op)), [self.bid])
        arrived = Ints(lead).add(arrivals, self.bid)
        lead.insert(SignalOp(self.peers, self.rank, arrived, self.epoch))

        # 2. Block 0: the rank's partials, to every rank.
        is_first = n.eq(self.bid, 0)
        first = if_then(b, is_first)
        waits, block = for_loop(first, self.tid, self.gdim, self.bdim, "block")
        slot = Ints(waits).add(arrivals, block)
        waits.insert(WaitSignalOp(self.peers, slot, self.epoch))
        self.barrier(first)
        partials: list[SSAValue] = []
        for op in reductions:
            kind = str(op.kind.data)
            t = compute_type(plan.partial_type(op))
            blocks = Block(arg_types=[index, t])
            blocks.args[0].name_hint, blocks.args[1].name_hint = "block", "acc"
            inner = Builder(InsertPoint.at_end(blocks))
            x = load(inner, self.arg(self.func, ("partials", op)), [blocks.args[0]])
            inner.insert(scf.YieldOp(combine(inner, kind, blocks.args[1], x)))
            start = constant(first, reduce_identity(kind, t), t)
            mine = first.insert(
                scf.ForOp(self.tid, self.gdim, self.bdim, [start], blocks)
            ).results[0]
            total = block_reduce(
                first, kind, mine, self.shared(t), self.threads, self.tid, self.bdim
            )
            partials.append(from_compute(first, total, plan.partial_type(op)))
        lead = self.leader(first)
        for op, partial in zip(reductions, partials):
            store(lead, partial, self.arg(self.func, ("exchange", op)), [self.rank])
        pushed = sum(element_info(plan.partial_type(op)).bytes for op in reductions)

        def push(inner: Builder, peer: SSAValue) -> None:
            for op, partial in zip(reductions, partials):
                exchange = self.arg(self.func, ("exchange", op))
                view = inner.insert(PeerViewOp(self.peers, exchange, peer)).result
                store(inner, partial, view, [self.rank])
            inner.insert(CountPeerBytesOp(self.peers, peer, Ints(inner).c(pushed)))
            slot = Ints(inner).add(scalars, self.rank)
            inner.insert(SignalOp(self.peers, peer, slot, self.epoch))

        self.for_peers(lead, push)

        # 3. Block 0: the all_reduces' results; the other blocks wait for them.
        first, others = if_else(b, is_first)
        lead = self.leader(first)
        self.for_peers(
            lead,
            lambda inner, peer: inner.insert(
                WaitSignalOp(self.peers, Ints(inner).add(scalars, peer), self.epoch)
            ),
        )
        for op in all_reduces:
            partial = op.operand.owner
            assert isinstance(partial, ReduceOp)
            exchange = self.arg(self.func, ("exchange", partial))
            t = plan.partial_type(partial)
            (result,) = self.over_ranks(
                lead,
                rank_combiner(op.reduction.data, t),
                lambda inner, q, exchange=exchange: [
                    to_compute(inner, load(inner, exchange, [q]))
                ],
            )
            result_type = coco.tensor_type(op.result).element_type
            result = from_compute(lead, result, result_type)
            store(lead, result, self.arg(self.func, ("result", op)), [zero])
        lead.insert(SignalOp(self.peers, self.rank, flag, self.epoch))
        self.leader(others).insert(WaitSignalOp(self.peers, flag, self.epoch))

        # 4. Every thread: the results.
        self.barrier(b)
        for op in all_reduces:
            value = load(b, self.arg(self.func, ("result", op)), [zero])
            value.name_hint = op.result.name_hint
            self.scalars[op.result] = value

    def read_lanes(
        self,
        b: Builder,
        n: Ints,
        value: SSAValue,
        elements: Sequence[SSAValue],
        own: SSAValue,
    ) -> list[SSAValue]:
        """A fusion input's scalar for each of the consecutive `elements` of
        the slice (`own`: the first one's global index): its elements of the
        slice, or of a replicated tensor of the slice's shape (one vector
        load), its one element (a scalar), or a broadcast tensor's element at
        each element's global coordinates."""
        assert isinstance(value, BlockArgument)
        t = coco.tensor_type(value)
        buffer = self.arg(self.func, ("read", value))
        width = len(elements)
        if t.rank == 0:
            return [load(b, buffer, [])] * width
        g = self.part.geometry
        if t.layout.is_sliced:
            return lanes(b, load_lanes(b, buffer, elements[0], width))
        if tuple(t.dims) == g.dims:
            return lanes(b, load_lanes(b, buffer, own, width))
        offset = len(g.dims) - t.rank
        found: list[SSAValue] = []
        for element in elements:
            coordinates = _Coordinates(n, g, element, self.rank)
            terms: list[SSAValue] = []
            for axis, (size, stride) in enumerate(zip(t.dims, strides(t.dims))):
                if size == 1:
                    continue
                terms.append(n.mul(coordinates.digit(axis + offset), stride))
            flat = terms[0] if terms else n.c(0)
            for term in terms[1:]:
                flat = n.add(flat, term)
            found.append(load(b, buffer, [flat]))
        return found

    # ------------------------------------------------------------ phase 3

    def phase_gather(self, b: Builder) -> None:
        body, source, chunk = self.peer_items(b)
        lead = self.leader(body)
        lead.insert(
            WaitSignalOp(
                self.peers,
                self.slot(Ints(lead), PHASE_GATHER, source, chunk),
                self.epoch,
            )
        )
        if not self.part.gathers:
            return  # only the closing sync: nothing for the block to copy
        self.barrier(body)

        def copy(loop: Builder, element: SSAValue, width: int) -> None:
            m = Ints(loop)
            target = self.global_index(m, source, element)
            at = m.add(m.mul(source, self.part.geometry.elements), element)
            for op in self.part.gathers:
                gather = self.arg(self.func, ("gather", op))
                gathered = self.arg(self.func, ("gathered", op))
                store_lanes(loop, load_lanes(loop, gather, at, width), gathered, target)

        self.for_elements(body, chunk, copy)


@dataclass
class _Coordinates:
    """The global coordinates of element `element` of `rank`'s slice, each
    digit computed once when first asked for."""

    n: Ints
    geometry: SliceGeometry
    element: SSAValue
    rank: SSAValue
    digits: dict[int, SSAValue] = field(default_factory=dict[int, SSAValue])

    def digit(self, axis: int) -> SSAValue:
        if axis not in self.digits:
            g = self.geometry
            local = list(g.dims)
            local[g.dim] = g.block
            stride = strides(local)[axis]
            value = self.n.div(self.element, stride)
            if axis:
                value = self.n.rem(value, local[axis])
            if axis == g.dim:
                value = self.n.add(value, self.n.mul(self.rank, g.block))
            self.digits[axis] = value
        return self.digits[axis]


def _flat_buffer(t: coco.TensorType, world: int) -> MemRefType:
    """The kernel argument type of a buffer of `t`: 1-D, or rank 0."""
    shape = local_shape(t, world)
    return MemRefType(t.element_type, [prod(shape)] if shape else [])


# ============================================================================
# The host side: buffers, symmetric layout, launch, sends
# ============================================================================

SYMMETRIC_BYTES_ATTR = "coco_gpu.symmetric_bytes"
"""On the converted module: bytes of symmetric workspace every rank needs (the
end of the last symmetric buffer, aligned; `coco_symmetric_bytes()`)."""

SIGNAL_SLOTS_ATTR = "coco_gpu.signal_slots"
"""On the converted module: signal-pad slots (u64) every rank needs; fused
kernels use disjoint ranges of them."""


@dataclass
class SymmetricAllocator:
    """The module-level layout of symmetric buffers and signal slots: each
    fused kernel gets its own range of both, so fused kernels on different
    streams never share one. The running totals live in the module's
    attributes (`coco_gpu.symmetric_bytes`, `coco_gpu.signal_slots`)."""

    module: Operation
    symmetric_bytes: int = 0
    signal_slots: int = 0

    @staticmethod
    def of(module: Operation) -> SymmetricAllocator:
        def get(name: str) -> int:
            attr = module.attributes.get(name)
            return attr.value.data if isinstance(attr, IntegerAttr) else 0

        return SymmetricAllocator(
            module, get(SYMMETRIC_BYTES_ATTR), get(SIGNAL_SLOTS_ATTR)
        )

    def buffer(self, size: int) -> int:
        offset = self.symmetric_bytes
        self.symmetric_bytes += -(-size // SYMMETRIC_ALIGNMENT) * SYMMETRIC_ALIGNMENT
        self._store()
        return offset

    def slots(self, count: int) -> int:
        base = self.signal_slots
        self.signal_slots += count
        self._store()
        return base

    def _store(self) -> None:
        attributes = self.module.attributes
        attributes[SYMMETRIC_BYTES_ATTR] = IntegerAttr(self.symmetric_bytes, i64)
        attributes[SIGNAL_SLOTS_ATTR] = IntegerAttr(self.signal_slots, i64)


def next_epoch() -> NextEpochOp:
    """`coco_gpu.next_epoch` (`%epoch`): the launch's epoch, which every
    kernel that talks to its peers takes with the rank and the peers' table
    (`HostValues.rank`, `HostValues.peers`)."""
    epoch = NextEpochOp()
    epoch.result.name_hint = "epoch"
    return epoch


def module_of(op: Operation) -> ModuleOp | None:
    return ancestor(op, ModuleOp)


def lower_fused_collective(
    lowering: Lowering, op: FusionOp, rewriter: PatternRewriter
) -> bool:
    """A `coco.fusion` holding reduce_scatters → one fused kernel launch (and
    the sends after it). False, changing nothing, when the fusion holds no
    reduce_scatter or is not of the shape the kernel handles (`FusedPlan.of`
    says why); the caller then lowers it op by op."""
    if not any(isinstance(o, ReduceScatterOp) for o in op.block.ops):
        return False
    module = module_of(op)
    if module is None:
        return False
    plan = FusedPlan.of(op, lowering.world, lowering.fused_chunk)
    if isinstance(plan, str):
        return False
    helper = FusedCollectiveLowering(lowering, SymmetricAllocator.of(module))
    kernel = helper.kernel(plan)
    if kernel.parameter_problem() is not None:
        return False
    helper.lower(plan, kernel, rewriter)
    return True


def fused_parameter_problem(lowering: Lowering, plan: FusedPlan) -> str | None:
    """Why CUDA cannot launch the fused kernel of `plan`, if it cannot
    (`FusedKernel.parameter_problem`)."""
    unused = SymmetricAllocator(plan.fusion)  # laying out arguments allocates nothing
    return FusedCollectiveLowering(lowering, unused).kernel(plan).parameter_problem()


KERNEL_PARAMETER_BYTES = 32764
"""The most bytes of parameters a CUDA kernel takes (CUDA 12.1 and later on
Volta and later; nvcc refuses a kernel with more: "Formal parameter space
overflowed")."""

PEERS_BYTES = 8 + 2 * 8 * 16
"""`coco_peers` by value: rank and world, then COCO_MAX_RANKS = 16 base and
signal pointers (coco_runtime.h)."""


@dataclass
class FusedCollectiveLowering:
    """The host side of one fused collective: buffers, symmetric layout,
    launch, sends."""

    lowering: Lowering
    layout: SymmetricAllocator

    @property
    def world(self) -> int:
        return self.lowering.world

    def kernel(self, plan: FusedPlan) -> FusedKernel:
        """The device side of `plan`, its arguments laid out (not built)."""
        yielded = list(plan.fusion.yield_op.arguments)
        slice_outputs = [
            v
            for v in yielded
            if coco.tensor_type(v).layout.is_sliced and not plan.is_rows(v)
        ]
        for send in plan.sends:
            if send.operand not in slice_outputs and not isinstance(
                send.operand.owner, AllGatherOp
            ):
                slice_outputs.append(send.operand)
        slice_outputs += plan.carried
        return FusedKernel(
            plan,
            list(dict.fromkeys(slice_outputs)),
            self.dropout_index(plan),
            self.lowering.threads,
        )

    def lower(
        self, plan: FusedPlan, kernel: FusedKernel, rewriter: PatternRewriter
    ) -> None:
        """`plan`'s fusion → the launch of `kernel` (`kernel(plan)`)."""
        fusion = plan.fusion
        lowering = self.lowering
        world = self.world
        yielded = list(fusion.yield_op.arguments)
        # every fusion of the same form launches one kernel (every parameter
        # of a shape): seeds and signal slots are arguments (FusedKernel)
        func = lowering.shared_kernel(
            fusion,
            "fused",
            lambda name: kernel.build(lowering.kernels, name),
            lowering.fused_chunk,
        )

        values = lowering.host(fusion)
        epoch = next_epoch()
        host: list[Operation] = [epoch]
        args: dict[object, SSAValue] = {
            "rank": values.rank(),
            "epoch": epoch.result,
            "peers": values.peers(),
            "slots": values.index(self.layout.slots(plan.signal_slots)),
        }
        for op in kernel.dropouts():
            args[("seed", op)] = values.integer(op.seed.value.data, i64)
        inputs = dict(zip(fusion.block.args, fusion.inputs))

        results = dict(zip(yielded, fusion.results))
        buffers: dict[SSAValue, SSAValue] = {}

        def output(value: SSAValue) -> SSAValue:
            """The buffer a group value is stored in: its result's
            destination, or a new one."""
            if value not in buffers:
                result = results.get(value)
                if result is None:
                    t = coco.tensor_type(value)
                    made = alloc(t.element_type, local_shape(t, world))
                    host.append(made)
                    buffers[value] = made.memref
                else:
                    ops, buffer = lowering.result_buffer(
                        fusion, result, reads_in_place=self.reads_in_place(plan, value)
                    )
                    host.extend(ops)
                    buffers[value] = buffer
            return buffers[value]

        # Destinations first: deciding whether an output may overwrite its
        # destination looks at the buffer's readers, which must not yet
        # include this fusion's own (detached) host ops.
        for value in [*yielded, *(op.result for op in plan.gathers)]:
            output(value)
        for value in kernel.slice_outputs:
            output(value)

        def flat(value: SSAValue) -> SSAValue:
            ops, buffer = lowering.buffer(value)
            more, collapsed = values.flat(buffer)
            host.extend([*ops, *more])
            return collapsed

        for buffer in plan.symmetric_buffers():
            sym = SymmetricBufferOp(
                self.layout.buffer(buffer.bytes),
                MemRefType(buffer.element_type, [buffer.count]),
            )
            sym.result.name_hint = buffer.kind
            host.append(sym)
            args[(buffer.kind, buffer.op)] = sym.result
        for op in plan.reductions:
            assert isinstance(op.operand, BlockArgument)
            args[("input", op)] = flat(inputs[op.operand])
        for arg in kernel.read_arguments():
            args[("read", arg)] = flat(inputs[arg])

        def collapsed(value: SSAValue) -> SSAValue:
            ops, buffer = values.flat(output(value))
            host.extend(ops)
            return buffer

        for op in plan.gathers:
            args[("gathered", op)] = collapsed(op.result)
        for value in kernel.slice_outputs:
            args[("slice", value)] = collapsed(value)
        for op in plan.row_reductions:
            args[("rows", op)] = collapsed(op.result)  # the block's, per launch
        for value in kernel.row_outputs():
            args[("row_out", value)] = collapsed(value)

        threads = lowering.threads
        items = plan.max_blocks * threads
        cooperative = plan.cooperative
        symbol = lowering.kernels.symbol_of(func)
        per_block, one = values.index(threads), values.index(1)
        grid, blocks = values.launch_blocks(
            items, threads, symbol if cooperative else None
        )
        host.extend(grid)
        launch = gpu.LaunchFuncOp.of(
            symbol,
            [blocks, one, one],
            [per_block, one, one],
            [args[key] for key in kernel.layout.positions],
        )
        launch.attributes[PEER_BYTES_ATTR] = IntegerAttr(plan.peer_bytes(), i64)
        if cooperative:
            launch.attributes[COOPERATIVE_ATTR] = UnitAttr()
        host.append(launch)
        for send in plan.sends:
            host.append(
                NcclSendOp(
                    output(send.operand),
                    send.stage.root_reference.data,
                    send.channel.value.data,
                )
            )
        replace_with_buffers(rewriter, fusion, host, [output(v) for v in yielded])

    def reads_in_place(self, plan: FusedPlan, value: SSAValue) -> bool:
        """Whether the kernel may write `value` into the buffer of a fusion
        input it reads: it reads and writes each element at the same index,
        so only a stage after the one storing `value` (or, for a gathered
        value, its slice) could read an overwritten element. True unless an
        input with `value`'s destination buffer is read in such a stage."""
        destination = self.lowering.destinations.get(
            dict(zip(plan.fusion.yield_op.arguments, plan.fusion.results))[value]
        )
        if destination is None:
            return True
        stored = plan.stage(
            value.owner.operand if isinstance(value.owner, AllGatherOp) else value
        )
        for arg, outer in zip(plan.fusion.block.args, plan.fusion.inputs):
            buffer = lowered_buffer(outer)
            if buffer is destination and plan.read_stages.get(arg, -1) > stored:
                return False
        return True

    def dropout_index(self, plan: FusedPlan) -> Callable[[Operation], DropoutIndex]:
        """Dropout's global index: `ElementContext.global_index`, with the overlap
        chunk frame a cloned dropout carries."""
        lowering = self.lowering

        def for_op(op: Operation) -> DropoutIndex:
            chunk = chunk_of(op)
            t = coco.tensor_type(op.results[0])  # a slice of its part
            shape = local_shape(t, self.world)

            def index_of(b: Builder, element: SSAValue, rank: SSAValue) -> SSAValue:
                indexer = Indexer(b, element, shape)
                return ElementContext(lowering, b, indexer, t, rank).global_index(
                    t, chunk
                )

            return index_of

        return for_op
