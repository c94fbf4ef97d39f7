"""The `coco_gpu` dialect: what MLIR's upstream `gpu` dialect lacks for coco.

The device level of docs/gpu/device.md. Kernels and launches are upstream
(`gpu.module`, `gpu.func`, `gpu.launch_func`, `memref`, `arith`, `scf`,
`math`); this dialect adds only the collective-communication library calls
(NCCL), the matmul library call (cuBLAS), cross-stream events, launch sizing,
and the peer-to-peer machinery of fused collective kernels: symmetric buffers
that peers can address, signal pads with monotonic epochs. It plays the part
xDSL's `mpi` dialect plays for MPI.

Which stream a device op runs on is the discardable integer attribute
`coco_gpu.stream` (default 0), on these ops and on `gpu.launch_func` alike, so
real MLIR accepts it on upstream ops.

The dialect imports no pass, analysis or lowering (docs/architecture.md).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    IndexType,
    IntegerAttr,
    MemRefType,
    NoneAttr,
    StringAttr,
    SymbolRefAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import (
    Attribute,
    Dialect,
    Operation,
    ParametrizedAttribute,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from coconet_ir.dialects.coco.attributes import ReductionKindAttr

STREAM_ATTR = "coco_gpu.stream"
"""The discardable attribute that says which of the context's streams a device
op (or a `gpu.launch_func`) runs on; absent means stream 0."""

PEER_BYTES_ATTR = "coco_gpu.peer_bytes"
"""On the `gpu.launch_func` of a fused collective kernel: the bytes every rank
stores into each other rank per launch (what `analysis.device_traffic` counts;
the emulator measures the same)."""

WORK_ATTR = "coco_gpu.work"
"""On the `gpu.launch_func` of a tile kernel: `array<i64: FLOPS, BYTES>`, the
FLOPs and memory bytes one rank's launch does (`analysis.costs.fusion_work`),
which the cost model cannot read off the kernel's buffers (an embedding reads
only the rows it pools)."""

TILE_PLAN_ATTR = "coco_gpu.tile_plan"
"""On the `gpu.func` of a tile kernel: its plan's decisions (`TilePlan.record`:
the operator, the tile shape, the tiles per destination, the slots), so
another emitter of the same kernel (the `triton` target, docs/triton.md) makes
the same tiles, in the same order, with the same signals."""

COOPERATIVE_ATTR = "coco_gpu.cooperative"
"""On a `gpu.launch_func`: launch the kernel cooperatively (all its blocks
resident at once, `cudaLaunchAttributeCooperative`), as a kernel whose blocks
wait for each other needs; its grid comes from a `coco_gpu.grid_blocks` that
names the kernel."""

ENTRY_ATTR = "coco_gpu.entry"
"""On a host `func.func`: the coco function type it was converted from (so the
host driver knows each buffer's layout and which arguments are updated)."""

BYTES_ATTR = "coco_gpu.bytes"
"""On a host `func.func` whose coco function communicates: `array<i64:
MESSAGE, BUS>`, the nccl-tests size of its collectives and the bytes a rank
sends (`coconet_ir.analysis.costs`), what the benchmark main reports."""


INDEX_BOUNDS_ATTR = "coco_gpu.index_bounds"
"""On a host `func.func` with an integer buffer that is an embedding's indices:
`array<i64: ...>`, one per argument, the exclusive upper bound of a valid
index (the tables' global row count), 0 for every other argument. The
benchmark main fills such an argument with indices inside `[0, bound)`."""


def stream_of(op: Operation) -> int:
    """The stream `op` runs on (docs/gpu/device.md)."""
    attr = op.attributes.get(STREAM_ATTR)
    return attr.value.data if isinstance(attr, IntegerAttr) else 0


def set_stream(op: Operation, stream: int) -> None:
    if stream:
        op.attributes[STREAM_ATTR] = i64_attr(stream)
    else:
        op.attributes.pop(STREAM_ATTR, None)


@lru_cache(maxsize=1 << 16)
def i64_attr(value: int) -> IntegerAttr:
    """`value : i64`, made once (streams, offsets and peers repeat across a
    model's thousands of ops)."""
    return IntegerAttr(value, i64)


# ============================================================================
# Types
# ============================================================================


@irdl_attr_definition
class EventType(ParametrizedAttribute, TypeAttribute):
    """`!coco_gpu.event`: a point in a stream's work that other streams wait for."""

    name = "coco_gpu.event"


@irdl_attr_definition
class PeersType(ParametrizedAttribute, TypeAttribute):
    """`!coco_gpu.peers`: the table a fused kernel needs to reach its peers —
    every rank's symmetric-workspace base and signal pad, and this rank's
    index (the runtime's `coco_peers`, passed to kernels by value)."""

    name = "coco_gpu.peers"


# ============================================================================
# Library calls (host side, enqueued on a stream)
# ============================================================================


RANKS_PER_NODE_ATTR = "coco_gpu.ranks_per_node"
"""The device-level module's ranks per node when a stage spans several nodes
(`coco_ranks_per_node()` in the CUDA C; absent on one node)."""

NCCL_GROUPS = ("node", "across")
"""The sub-communicators of a world of several nodes (docs/gpu/device.md,
"Several nodes"): `node`, the ranks of this rank's node; `across`, the ranks
of every node with this rank's index in its node. Without `group`, a
collective is over the stage's communicator."""


class NcclCollectiveOp(IRDLOperation):
    """A NCCL collective from `input` into `output` on the stage's
    communicator, or on one of its sub-communicators (`group`, NCCL_GROUPS)
    (docs/gpu/cuda.md). The base of the collectives: their buffers, their
    assembly format and their builder."""

    input = operand_def(MemRefType)
    output = operand_def(MemRefType)
    group = opt_prop_def(StringAttr)
    assembly_format = (
        "$input `,` $output (`group` `=` $group^)? attr-dict `:` type($input) `,` "
        "type($output)"
    )

    def __init__(
        self,
        input: SSAValue | Operation,
        output: SSAValue | Operation,
        properties: dict[str, Attribute] | None = None,
        group: str | None = None,
    ):
        properties = dict(properties or {})
        if group is not None:
            properties["group"] = StringAttr(group)
        super().__init__(operands=[input, output], properties=properties)

    GROUPED: ClassVar[bool] = True
    """Whether the collective may run on a sub-communicator (the printer
    gives a broadcast and an all-to-all the stage's only)."""

    def verify_(self) -> None:
        if self.group is None:
            return
        if not self.GROUPED:
            raise VerifyException(
                "runs on the stage's communicator only: it takes no group"
            )
        if self.group.data not in NCCL_GROUPS:
            raise VerifyException(
                f"group must be one of {', '.join(NCCL_GROUPS)}, "
                f"got '{self.group.data}'"
            )

    @property
    def group_name(self) -> str | None:
        return None if self.group is None else self.group.data


class NcclReductionOp(NcclCollectiveOp):
    """A NCCL collective that reduces every rank's `input` with `reduction`."""

    reduction = prop_def(ReductionKindAttr)
    assembly_format = (
        "$input `,` $output `reduction` `=` $reduction (`group` `=` $group^)? "
        "attr-dict `:` type($input) `,` type($output)"
    )

    def __init__(
        self, input, output, reduction: ReductionKindAttr, group: str | None = None
    ):
        super().__init__(input, output, {"reduction": reduction}, group)


@irdl_op_definition
class NcclAllReduceOp(NcclReductionOp):
    """`ncclAllReduce`: `output` = the reduction of every rank's `input`."""

    name = "coco_gpu.nccl_all_reduce"


@irdl_op_definition
class NcclReduceScatterOp(NcclReductionOp):
    """`ncclReduceScatter`: `output` = block `rank` (contiguous, of
    `size(input) / N` elements) of the reduction of every rank's `input`."""

    name = "coco_gpu.nccl_reduce_scatter"


@irdl_op_definition
class NcclAllGatherOp(NcclCollectiveOp):
    """`ncclAllGather`: `output` = every rank's `input`, concatenated in rank
    order (contiguous blocks)."""

    name = "coco_gpu.nccl_all_gather"


@irdl_op_definition
class NcclBroadcastOp(NcclCollectiveOp):
    """`ncclBroadcast`: `output` = rank `root`'s `input`."""

    name = "coco_gpu.nccl_broadcast"
    GROUPED: ClassVar[bool] = False
    root = prop_def(IntegerAttr[I64])
    assembly_format = (
        "$input `,` $output `root` `=` $root (`group` `=` $group^)? attr-dict `:` "
        "type($input) `,` type($output)"
    )

    def __init__(self, input, output, root: int):
        super().__init__(input, output, {"root": i64_attr(root)})


@irdl_op_definition
class NcclAllToAllOp(NcclCollectiveOp):
    """All-to-all of contiguous blocks (grouped `ncclSend`/`ncclRecv`): block
    `p` of `input` goes to rank `p`, which stores it as block `rank` of its
    `output`."""

    name = "coco_gpu.nccl_all_to_all"
    GROUPED: ClassVar[bool] = False


class NcclPeerOp(IRDLOperation):
    """A NCCL point-to-point call between this rank and rank `rank` of stage
    `stage`, on the pipeline's communicator (it spans every stage), paired
    with the peer's call of the same `channel`. The base of `nccl_send` and
    `nccl_recv`, which name their one buffer."""

    stage = prop_def(SymbolRefAttr)
    channel = prop_def(IntegerAttr[I64])

    def __init__(self, buffer: SSAValue | Operation, stage: str, channel: int):
        super().__init__(
            operands=[buffer],
            properties={
                "stage": SymbolRefAttr(stage),
                "channel": i64_attr(channel),
            },
        )


@irdl_op_definition
class NcclSendOp(NcclPeerOp):
    """`ncclSend` of `input` to rank `rank` of stage `stage` (a pipeline's
    communicator spans every stage)."""

    name = "coco_gpu.nccl_send"
    input = operand_def(MemRefType)
    assembly_format = (
        "$input `to` $stage `channel` `=` $channel attr-dict `:` type($input)"
    )


@irdl_op_definition
class NcclRecvOp(NcclPeerOp):
    """`ncclRecv` into `output` from rank `rank` of stage `stage`."""

    name = "coco_gpu.nccl_recv"
    output = operand_def(MemRefType)
    assembly_format = (
        "$output `from` $stage `channel` `=` $channel attr-dict `:` type($output)"
    )


@irdl_op_definition
class GemmOp(IRDLOperation):
    """A cuBLAS matmul, row-major: `c[..., M] = a[..., K] @ b[K, M]`, f32
    accumulation (`cublasGemmEx`; the leading dims of `a` and `c` are rows).
    With `accumulate`, `c += a @ b`."""

    name = "coco_gpu.gemm"
    a = operand_def(MemRefType)
    b = operand_def(MemRefType)
    c = operand_def(MemRefType)
    accumulate = opt_prop_def(UnitAttr)
    assembly_format = (
        "$a `,` $b `,` $c (`accumulate` $accumulate^)? attr-dict `:` type($a) `,` "
        "type($b) `,` type($c)"
    )

    def __init__(self, a, b, c, *, accumulate: bool = False):
        super().__init__(
            operands=[a, b, c],
            properties={"accumulate": UnitAttr()} if accumulate else {},
        )


@irdl_op_definition
class PeerCopyOp(IRDLOperation):
    """Store this rank's buffer `source` into rank `(rank + to) mod N`'s copy
    of the symmetric buffer `target` (a copy-engine copy over the peer's
    mapped memory, `cudaMemcpyAsync` on the op's stream; the emulation counts
    its bytes as traffic from this rank to that peer). The peer must have
    said the target is free, and is told it has arrived, by signals
    (docs/gpu/overlap.md, "Per-peer overlap")."""

    name = "coco_gpu.peer_copy"
    source = operand_def(MemRefType)
    target = operand_def(MemRefType)
    to = prop_def(IntegerAttr[I64])
    assembly_format = (
        "$source `to` `rank` `+` $to `,` $target attr-dict `:` type($source) `,` "
        "type($target)"
    )

    def __init__(
        self, source: SSAValue | Operation, target: SSAValue | Operation, to: int
    ):
        super().__init__(operands=[source, target], properties={"to": i64_attr(to)})

    @property
    def shift(self) -> int:
        """The destination's distance from this rank: `(rank + shift) mod N`."""
        return self.to.value.data

    def verify_(self) -> None:
        source, target = self.source.type, self.target.type
        assert isinstance(source, MemRefType) and isinstance(target, MemRefType)
        if source.element_type != target.element_type or math.prod(
            source.get_shape()
        ) != math.prod(target.get_shape()):
            raise VerifyException(
                f"copies between buffers of one size and element type, got "
                f"{source} and {target}"
            )


# ============================================================================
# Streams, events, launch sizes
# ============================================================================


@irdl_op_definition
class RecordEventOp(IRDLOperation):
    """`cudaEventRecord` on the op's stream: a point later work can wait for."""

    name = "coco_gpu.record_event"
    event = result_def(EventType)
    assembly_format = "attr-dict"

    def __init__(self, stream: int = 0):
        super().__init__(result_types=[EventType()])
        set_stream(self, stream)


@irdl_op_definition
class WaitEventOp(IRDLOperation):
    """`cudaStreamWaitEvent`: the op's stream waits for `event`."""

    name = "coco_gpu.wait_event"
    event = operand_def(EventType)
    assembly_format = "$event attr-dict"

    def __init__(self, event: SSAValue | Operation, stream: int = 0):
        super().__init__(operands=[event])
        set_stream(self, stream)


@irdl_op_definition
class ViewOp(IRDLOperation):
    """A contiguous piece of `source`: the `result`-shaped buffer starting at
    element `offset` (plus the host index `start`, when given: a chunk whose
    place depends on the rank) of its flat (row-major) elements, as an
    identity-layout buffer (an overlap chunk cut along the outermost non-unit
    dim). MLIR's `memref.subview` would give a strided type and `memref.view`
    wants an i8 buffer; on the device both are `source + start + offset`."""

    name = "coco_gpu.view"
    traits = traits_def(Pure())
    source = operand_def(MemRefType)
    start = opt_operand_def(IndexType)
    offset = prop_def(IntegerAttr[I64])
    result = result_def(MemRefType)
    assembly_format = (
        "$source `[` ($start^ `+`)? $offset `]` attr-dict `:` type($source) `to` "
        "type($result)"
    )

    def __init__(
        self,
        source: SSAValue | Operation,
        offset: int,
        type: MemRefType,
        start: SSAValue | Operation | None = None,
    ):
        super().__init__(
            operands=[source, [] if start is None else [start]],
            properties={"offset": i64_attr(offset)},
            result_types=[type],
        )

    def verify_(self) -> None:
        source, result = self.source.type, self.result.type
        assert isinstance(source, MemRefType) and isinstance(result, MemRefType)
        if source.element_type != result.element_type:
            raise VerifyException("a view keeps the element type")
        if not isinstance(source.layout, NoneAttr) or not isinstance(
            result.layout, NoneAttr
        ):
            raise VerifyException("a view is of and into identity-layout buffers")
        total = math.prod(source.get_shape())
        start, count = self.offset.value.data, math.prod(result.get_shape())
        if start < 0 or start + count > total:
            raise VerifyException(
                f"elements [{start}, {start + count}) are not within the "
                f"{total} of the source"
            )


@irdl_op_definition
class GridBlocksOp(IRDLOperation):
    """The number of blocks of a grid-stride launch over `count` items with
    `threads` threads per block: enough to cover them, capped to fill the
    device (`coco::grid_blocks`). Kernels are correct for any grid size.

    `coco_gpu.grid_blocks %n, %t resident @kernels::@k`: also capped to the
    blocks of kernel `@k` that fit on the device at once (its occupancy), for
    a cooperative launch (`coco::resident_blocks`)."""

    name = "coco_gpu.grid_blocks"
    traits = traits_def(Pure())
    count = operand_def(IndexType)
    threads = operand_def(IndexType)
    kernel = opt_prop_def(SymbolRefAttr)
    result = result_def(IndexType)
    assembly_format = "$count `,` $threads (`resident` $kernel^)? attr-dict"

    def __init__(
        self,
        count: SSAValue | Operation,
        threads: SSAValue | Operation,
        kernel: SymbolRefAttr | None = None,
    ):
        super().__init__(
            operands=[count, threads],
            result_types=[IndexType()],
            properties={"kernel": kernel} if kernel is not None else {},
        )


class NullaryOp(IRDLOperation):
    """An op of no operands and one result, of the type `RESULT_TYPE`: a
    value the context holds. The base of `rank`, `peers` and `next_epoch`,
    printed as their name alone and built with no argument."""

    RESULT_TYPE: ClassVar[Attribute]
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__(result_types=[self.RESULT_TYPE])


@irdl_op_definition
class RankOp(NullaryOp):
    """This rank's index within its stage (`ctx->rank`), on the host; kernels
    that need it take it as an argument."""

    name = "coco_gpu.rank"
    traits = traits_def(Pure())
    result = result_def(IndexType)
    RESULT_TYPE: ClassVar[Attribute] = IndexType()


# ============================================================================
# Symmetric memory and signals (fused collective kernels)
# ============================================================================


@irdl_op_definition
class SymmetricBufferOp(IRDLOperation):
    """This rank's view of the symmetric workspace at byte `offset`: the same
    offset on every rank, so a kernel reaches a peer's copy with
    `coco_gpu.peer_view`. The conversion lays the buffers out; the module's
    total is `coco_symmetric_bytes()`."""

    name = "coco_gpu.symmetric_buffer"
    traits = traits_def(Pure())
    offset = prop_def(IntegerAttr[I64])
    result = result_def(MemRefType)
    assembly_format = "`offset` `=` $offset attr-dict `:` type($result)"

    def __init__(self, offset: int, type: MemRefType):
        super().__init__(properties={"offset": i64_attr(offset)}, result_types=[type])


@irdl_op_definition
class PeersOp(NullaryOp):
    """The context's peer table (host side), to pass to a fused kernel."""

    name = "coco_gpu.peers"
    traits = traits_def(Pure())
    result = result_def(PeersType)
    RESULT_TYPE: ClassVar[Attribute] = PeersType()


@irdl_op_definition
class NextEpochOp(NullaryOp):
    """The next value of this rank's epoch counter (host side). Epochs only
    grow, so a signal slot never needs resetting: a launch waits for
    `slot >= its epoch`."""

    name = "coco_gpu.next_epoch"
    result = result_def(i64)
    RESULT_TYPE: ClassVar[Attribute] = i64


@irdl_op_definition
class PeerViewOp(IRDLOperation):
    """In a kernel: rank `peer`'s copy of the symmetric buffer `buffer`."""

    name = "coco_gpu.peer_view"
    traits = traits_def(Pure())
    T: ClassVar = VarConstraint("T", base(MemRefType))
    peers = operand_def(PeersType)
    buffer = operand_def(T)
    peer = operand_def(IndexType)
    result = result_def(T)
    assembly_format = "$peers `,` $buffer `,` $peer attr-dict `:` type($buffer)"

    def __init__(self, peers, buffer: SSAValue | Operation, peer):
        buffer_value = SSAValue.get(buffer)
        super().__init__(
            operands=[peers, buffer_value, peer], result_types=[buffer_value.type]
        )


@irdl_op_definition
class SignalOp(IRDLOperation):
    """In a kernel: make this block's earlier writes visible system-wide, then
    store `value` into slot `slot` of rank `peer`'s signal pad (release, system
    scope). Issued by one thread after a barrier."""

    name = "coco_gpu.signal"
    peers = operand_def(PeersType)
    peer = operand_def(IndexType)
    slot = operand_def(IndexType)
    value = operand_def(i64)
    assembly_format = "$peers `,` $peer `,` $slot `,` $value attr-dict"

    def __init__(self, peers, peer, slot, value):
        super().__init__(operands=[peers, peer, slot, value])


@irdl_op_definition
class WaitSignalOp(IRDLOperation):
    """In a kernel: poll slot `slot` of this rank's signal pad until it holds
    at least `value` (acquire, system scope). Issued by one thread, followed by
    a barrier."""

    name = "coco_gpu.wait_signal"
    peers = operand_def(PeersType)
    slot = operand_def(IndexType)
    value = operand_def(i64)
    assembly_format = "$peers `,` $slot `,` $value attr-dict"

    def __init__(self, peers, slot, value):
        super().__init__(operands=[peers, slot, value])


@irdl_op_definition
class CountPeerBytesOp(IRDLOperation):
    """In a kernel, statistics only: this rank has stored `bytes` bytes into
    rank `peer`'s memory (`coco::count_peer_bytes`: the emulation counts them
    as traffic from this rank to `peer`; nothing on a GPU). Issued by one
    thread per chunk of peer stores."""

    name = "coco_gpu.count_peer_bytes"
    peers = operand_def(PeersType)
    peer = operand_def(IndexType)
    bytes = operand_def(IndexType)
    assembly_format = "$peers `,` $peer `,` $bytes attr-dict"

    def __init__(self, peers, peer, bytes):
        super().__init__(operands=[peers, peer, bytes])


@irdl_op_definition
class TileComputedOp(IRDLOperation):
    """In a kernel, statistics only: this block has computed one tile of a
    fused computation-collective operator (`coco::tile_computed`: the
    emulation stamps it on the launch's timeline, beside the peer stores
    `count_peer_bytes` stamps; nothing on a GPU). Issued by one thread per
    tile."""

    name = "coco_gpu.tile_computed"
    assembly_format = "attr-dict"


COCO_GPU_OPS = [
    NcclAllReduceOp,
    NcclReduceScatterOp,
    NcclAllGatherOp,
    NcclBroadcastOp,
    NcclAllToAllOp,
    NcclSendOp,
    NcclRecvOp,
    GemmOp,
    PeerCopyOp,
    RecordEventOp,
    WaitEventOp,
    ViewOp,
    GridBlocksOp,
    RankOp,
    SymmetricBufferOp,
    PeersOp,
    NextEpochOp,
    PeerViewOp,
    SignalOp,
    WaitSignalOp,
    CountPeerBytesOp,
    TileComputedOp,
]

CocoGpu = Dialect("coco_gpu", COCO_GPU_OPS, [EventType, PeersType])

__all__ = [
    "BYTES_ATTR",
    "COCO_GPU_OPS",
    "ENTRY_ATTR",
    "INDEX_BOUNDS_ATTR",
    "NCCL_GROUPS",
    "PEER_BYTES_ATTR",
    "RANKS_PER_NODE_ATTR",
    "STREAM_ATTR",
    "WORK_ATTR",
    "CocoGpu",
    "CountPeerBytesOp",
    "EventType",
    "GemmOp",
    "GridBlocksOp",
    "NcclAllGatherOp",
    "NcclAllReduceOp",
    "NcclAllToAllOp",
    "NcclBroadcastOp",
    "NcclCollectiveOp",
    "NcclRecvOp",
    "NcclReduceScatterOp",
    "NcclSendOp",
    "NextEpochOp",
    "PeerCopyOp",
    "PeerViewOp",
    "PeersOp",
    "PeersType",
    "RankOp",
    "RecordEventOp",
    "SignalOp",
    "SymmetricBufferOp",
    "TileComputedOp",
    "ViewOp",
    "WaitEventOp",
    "WaitSignalOp",
    "set_stream",
    "stream_of",
]
