"""What a device-level program does per call, predicted from its IR: kernel
launches and the bytes each rank sends to each other rank, per stream
(docs/gpu/emulation.md, "Proof and exact counts").

The emulator measures the same numbers (`coconet-run --backend emu --stats`)
and the tests require the two to agree exactly. The conventions:

- a launch is a `gpu.launch_func` (our kernels); NCCL and cuBLAS calls are
  library calls, counted apart;
- NCCL collectives move data as NCCL's ring algorithm does, rank `r` sending
  only to its ring successor `(r + 1) % N`, for a tensor of `S` bytes (the
  full, unsliced size): all_reduce `2 (N-1)/N · S`, reduce_scatter and
  all_gather `(N-1)/N · S`, broadcast `S` from every rank but the root's
  predecessor; all_to_all sends each other rank its `S/N²` block; a pipeline
  send moves its buffer to rank `r` of the destination stage;
- a fused collective kernel moves what its launch's `coco_gpu.peer_bytes`
  attribute says: the bytes every rank stores into each other rank per launch,
  which the lowering writes from `analysis.fused_plan.FusedPlan.peer_bytes`;
- a `coco_gpu.peer_copy ... to rank + K` moves its buffer from every rank `r`
  to rank `(r + K) % N` (a per-peer region's blocks, a shift).

Host loops with constant bounds (the chunks of an overlap region) multiply
what their body does.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from math import prod

import numpy as np
from xdsl.dialects import gpu, scf
from xdsl.dialects.arith import ConstantOp
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, Operation, SSAValue

from coconet_ir.analysis.costs import TRANSFERS
from coconet_ir.diagnostics import CocoError
from coconet_ir.dialects import coco_gpu
from coconet_ir.dialects.coco import element_info
from coconet_ir.dialects.coco_gpu import PEER_BYTES_ATTR


def buffer_bytes(value: SSAValue) -> int:
    """The bytes of a memref value."""
    t = value.type
    assert isinstance(t, MemRefType)
    return prod(t.get_shape()) * element_info(t.element_type).bytes


def device_transfer(op: Operation) -> tuple[str, int] | None:
    """The kind of `analysis.costs.TRANSFERS` an NCCL call or peer copy makes
    and the bytes of the buffer it takes; None for other ops."""
    match op:
        case coco_gpu.NcclAllGatherOp():
            return "all_gather", buffer_bytes(op.output)  # S is what it gathers
        case coco_gpu.NcclCollectiveOp():
            return op.name.removeprefix("coco_gpu.nccl_"), buffer_bytes(op.input)
        case coco_gpu.NcclSendOp():
            return "send", buffer_bytes(op.input)
        case coco_gpu.PeerCopyOp():
            return "send", buffer_bytes(op.source)
        case _:
            return None


@dataclass
class Traffic:
    """What one call of a host entry does on every rank of its stage.

    `sent[s]` is an `(N, N)` matrix of bytes rank `src` sends to rank `dst` of
    the same stage on stream `s`; `sent_to_stage[s]` a length-`N` vector of the
    bytes rank `r` sends to rank `r` of another stage."""

    world: int
    ranks_per_node: int = 0
    """Ranks to a node (0: all on one): a collective on a `node` or `across`
    sub-communicator is a ring over each of those groups."""
    launches: Counter[int] = field(default_factory=Counter[int])
    library_calls: Counter[str] = field(default_factory=Counter[str])
    sent: dict[int, np.ndarray] = field(default_factory=dict[int, np.ndarray])
    sent_to_stage: dict[int, np.ndarray] = field(default_factory=dict[int, np.ndarray])

    @property
    def total_launches(self) -> int:
        return sum(self.launches.values())

    def bytes_per_rank(self) -> np.ndarray:
        """Bytes each rank sends to the other ranks of its stage, all streams."""
        total = np.zeros(self.world, dtype=np.int64)
        for matrix in self.sent.values():
            total += matrix.sum(axis=1)
        return total

    def matrix(self, stream: int) -> np.ndarray:
        if stream not in self.sent:
            self.sent[stream] = np.zeros((self.world, self.world), dtype=np.int64)
        return self.sent[stream]

    def ring(self, stream: int, nbytes_per_rank: list[int]) -> None:
        n = self.world
        for r in range(n):
            self.matrix(stream)[r, (r + 1) % n] += nbytes_per_rank[r]

    def groups(self, group: str | None) -> list[list[int]]:
        """The rings of a collective on the stage's communicator (`None`) or
        on a sub-communicator (`node`, `across`; docs/gpu/device.md)."""
        n, g = self.world, self.ranks_per_node or self.world
        if group == "node":
            return [[k * g + i for i in range(g)] for k in range(n // g)]
        if group == "across":
            return [[k * g + i for k in range(n // g)] for i in range(g)]
        return [list(range(n))]

    def add_op(self, op: Operation, times: int) -> None:
        n, stream = self.world, coco_gpu.stream_of(op)
        match op:
            case gpu.LaunchFuncOp():
                self.launches[stream] += times
                self.add_peer_bytes(op, stream, times)
                return
            case coco_gpu.GemmOp():
                self.library_calls["cublas"] += times
                return
            case coco_gpu.PeerCopyOp():
                matrix, size = self.matrix(stream), buffer_bytes(op.source)
                for r in range(n):
                    matrix[r, (r + op.shift) % n] += times * size
                self.library_calls["peer_copy"] += times
                return
            case (
                coco_gpu.NcclAllReduceOp()
                | coco_gpu.NcclReduceScatterOp()
                | coco_gpu.NcclAllGatherOp()
            ):
                moved = device_transfer(op)
                assert moved is not None
                kind, nbytes = moved
                matrix = self.matrix(stream)
                for ring in self.groups(op.group_name):
                    size = round(TRANSFERS[kind].sent(nbytes, len(ring)))
                    for j, r in enumerate(ring):
                        if len(ring) > 1:
                            matrix[r, ring[(j + 1) % len(ring)]] += times * size
            case coco_gpu.NcclBroadcastOp():
                size = buffer_bytes(op.input)
                before_root = (op.root.value.data - 1) % n
                self.ring(
                    stream, [0 if r == before_root else times * size for r in range(n)]
                )
            case coco_gpu.NcclAllToAllOp():
                block = buffer_bytes(op.input) // n
                matrix = self.matrix(stream)
                matrix += times * block * (1 - np.eye(n, dtype=np.int64))
            case coco_gpu.NcclSendOp():
                if stream not in self.sent_to_stage:
                    self.sent_to_stage[stream] = np.zeros(n, dtype=np.int64)
                self.sent_to_stage[stream] += times * buffer_bytes(op.input)
            case coco_gpu.NcclRecvOp():
                pass
            case _:
                return
        self.library_calls["nccl"] += times

    def add_peer_bytes(self, op: Operation, stream: int, times: int) -> None:
        attr = op.attributes.get(PEER_BYTES_ATTR)
        if not isinstance(attr, IntegerAttr):
            return
        off_diagonal = 1 - np.eye(self.world, dtype=np.int64)
        self.matrix(stream)[...] += times * attr.value.data * off_diagonal

    def add_block(self, block: Block, times: int) -> None:
        for op in block.ops:
            if isinstance(op, scf.ForOp):
                self.add_block(op.body.block, times * trip_count(op))
                continue
            self.add_op(op, times)
            for region in op.regions:
                for inner in region.blocks:
                    self.add_block(inner, times)


def constant_index(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def trip_count(loop: scf.ForOp) -> int:
    """The iterations of a host loop with constant bounds."""
    bounds = [constant_index(v) for v in (loop.lb, loop.ub, loop.step)]
    if None in bounds:
        raise CocoError(
            "'scf.for' op on the host has bounds that are not constants; its "
            "launches cannot be counted statically"
        )
    lower, upper, step = (b for b in bounds if b is not None)
    return max(0, -(-(upper - lower) // step))


def ranks_per_node(module: ModuleOp) -> int:
    """The device-level module's ranks per node (`coco_gpu.ranks_per_node`),
    0 on one node."""
    attr = module.attributes.get(coco_gpu.RANKS_PER_NODE_ATTR)
    return attr.value.data if isinstance(attr, IntegerAttr) else 0


def device_traffic(module: ModuleOp) -> dict[str, Traffic]:
    """What one call of each host entry of a device-level module does, by
    function name (the module must carry `coco.world_size`)."""
    from coconet_ir.dialects.coco import world_size

    world = world_size(module)
    if world is None:
        raise CocoError("the device-level module has no coco.world_size")
    found: dict[str, Traffic] = {}
    for op in module.ops:
        if isinstance(op, FuncOp) and op.body.blocks:
            traffic = Traffic(world, ranks_per_node(module))
            traffic.add_block(op.body.block, 1)
            found[op.sym_name.data] = traffic
    return found
