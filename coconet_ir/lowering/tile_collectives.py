"""Tile-granular fused computation-collective kernels (docs/gpu.md, "Fused
computation-collective operators"): a `coco.fusion` of a producer and the
collective consuming it (what `coco-fuse-collective` builds) becomes ONE
kernel whose blocks store each tile they finish straight into the rank that
needs it and signal that rank's counter for the tile, while other blocks
still compute; the tail of the same kernel waits only for the tile it copies
next. No NCCL call, no host synchronization between compute and
communication (Punniyamurthy et al., 2023).

Built so far: embedding + all_to_all (DLRM). Rank `r` owns tables `r·T' ..`
(`T' = T/N`) and pools them for the whole batch; rank `p` needs the bags
`p·B' ..` (`B' = B/N`) of every table. A *tile* is one table's bags for one
destination: `B'·D` elements. The kernel, for epoch `e`:

1. block 0's thread 0 signals every peer's `READY + r` slot: "my previous
   launch of this kernel has ended, you may write into my receive buffer";
2. items `(k, t)`, `k = 0 .. N-1`, `p = (r + k) mod N` (each rank starts on
   another destination, so the links are loaded evenly; `k = 0` is its own
   part, stored straight into its output): thread 0 waits for `READY + p`
   (once per item, a flag already raised after the first), the block pools
   the tile (`embedding.emit_pooled`) and stores it into row `r` of `p`'s
   receive buffer, then thread 0 counts the bytes and signals `p`'s slot
   `TILE + r·T' + t` (release, system scope);
3. items `(k, t)`, `k = 1 .. N-1`, `q = (r + k) mod N`: thread 0 waits for
   `TILE + q·T' + t`, the block copies that tile from the receive buffer to
   the output, at table `q·T' + t`.

Slots hold epochs and are never reset. Step 1's flag is the closing sync: a
peer writes into this rank's receive buffer in launch `e` only after this
rank has started launch `e`, i.e. after its launch `e' < e` (stream order)
copied everything out.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, MemRefType, i64
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from coconet_ir.dialects import gpu  # xDSL's gpu, in MLIR's syntax
from coconet_ir.dialects.coco import (
    AllToAllOp,
    EmbeddingOp,
    FusionOp,
    LayoutAttr,
    YieldOp,
    element_info,
    tensor_type,
)
from coconet_ir.dialects.coco_gpu import (
    PEER_BYTES_ATTR,
    CountPeerBytesOp,
    GridBlocksOp,
    PeersType,
    PeerViewOp,
    SignalOp,
    SymmetricBufferOp,
    WaitSignalOp,
)
from coconet_ir.lowering.bufferize import collapse
from coconet_ir.lowering.coco_to_gpu import Lowering, replace_with_buffers
from coconet_ir.lowering.embedding import EmbeddingLookup, emit_pooled
from coconet_ir.lowering.fused_collectives import (
    Ints,
    SymmetricAllocator,
    if_then,
    module_of,
    peer_context,
)
from coconet_ir.lowering.kernels import X, for_loop, index, load, store


@dataclass(frozen=True)
class EmbeddingAllToAll:
    """The plan of an embedding + all_to_all fusion: table-parallel lookup
    (`tables` and the result cut along the tables), then `all_to_all` to the
    batch split."""

    fusion: FusionOp
    embedding: EmbeddingOp
    lookup: EmbeddingLookup

    @staticmethod
    def of(fusion: FusionOp, world: int) -> EmbeddingAllToAll | None:
        ops = list(fusion.block.ops)
        if len(ops) != 3:
            return None
        embedding, exchange, end = ops
        if not (
            isinstance(embedding, EmbeddingOp)
            and isinstance(exchange, AllToAllOp)
            and isinstance(end, YieldOp)
            and exchange.operand is embedding.result
            and list(end.arguments) == [exchange.result]
            and all(v.owner is fusion.block for v in embedding.operands)
        ):
            return None
        sliced0, sliced1 = LayoutAttr.sliced(0), LayoutAttr.sliced(1)
        if (
            tensor_type(embedding.tables).layout != sliced0
            or tensor_type(embedding.result).layout != sliced0
            or tensor_type(exchange.result).layout != sliced1
        ):
            return None
        return EmbeddingAllToAll(
            fusion, embedding, EmbeddingLookup.of(embedding, world)
        )

    @property
    def world(self) -> int:
        return self.lookup.world

    @property
    def tables(self) -> int:
        """Tables per rank (`T'`)."""
        return self.lookup.shape(self.lookup.result)[0]

    @property
    def bags(self) -> int:
        """Bags per destination (`B'`)."""
        return tensor_type(self.embedding.result).dims[1] // self.world

    @property
    def width(self) -> int:
        return tensor_type(self.embedding.result).dims[2]

    @property
    def tile(self) -> int:
        """Elements of one tile: one table's bags for one destination."""
        return self.bags * self.width

    @property
    def element_bytes(self) -> int:
        return element_info(tensor_type(self.embedding.result).element_type).bytes

    def peer_bytes(self) -> int:
        """Bytes this rank stores into each peer per launch."""
        return self.tables * self.tile * self.element_bytes

    @property
    def slots(self) -> int:
        """READY (one per source rank), then TILE (one per source and table)."""
        return self.world + self.world * self.tables


@dataclass
class EmbeddingAllToAllKernel:
    plan: EmbeddingAllToAll
    slot_base: int

    def build(self, lowering: Lowering, name: str) -> gpu.FuncOp:
        plan = self.plan
        element = tensor_type(plan.embedding.result).element_type
        tables_t, indices_t = (
            MemRefType(tensor_type(v).element_type, [_count(plan, v)])
            for v in (plan.embedding.tables, plan.embedding.indices)
        )
        block_elements = plan.world * plan.tables * plan.tile
        func, b = lowering.kernels.kernel(
            name,
            [
                ("rank", index),
                ("epoch", i64),
                ("peers", PeersType()),
                ("tables", tables_t),
                ("indices", indices_t),
                ("recv", MemRefType(element, [block_elements])),
                ("out", MemRefType(element, [block_elements])),
            ],
        )
        rank, epoch, peers, tables, indices, recv, out = func.body.block.args
        tid = b.insert(gpu.ThreadIdOp(X)).result
        bid = b.insert(gpu.BlockIdOp(X)).result
        bdim = b.insert(gpu.BlockDimOp(X)).result
        gdim = b.insert(gpu.GridDimOp(X)).result
        tid.name_hint, bid.name_hint = "tid", "bid"
        n = Ints(b)
        leader = n.eq(tid, 0)
        world, tables_per_rank, tile = plan.world, plan.tables, plan.tile
        ready, tiles = self.slot_base, self.slot_base + world

        # 1. Block 0 opens this rank's receive buffer to every peer.
        first = if_then(b, b.insert(arith.AndIOp(leader, n.eq(bid, 0))).result)
        f = Ints(first)
        peers_loop, k = for_loop(first, f.c(1), f.c(world), f.c(1), "k")
        m = Ints(peers_loop)
        peer = m.rem(m.add(rank, k), world)
        peers_loop.insert(SignalOp(peers, peer, m.add(ready, rank), epoch))

        # 2. Compute each tile and store it where it is needed.
        items, item = for_loop(b, bid, n.c(world * tables_per_rank), gdim, "item")
        m = Ints(items)
        k = m.div(item, tables_per_rank)
        t = m.rem(item, tables_per_rank)
        peer = m.rem(m.add(rank, k), world)
        peer.name_hint = "peer"
        remote = items.insert(arith.CmpiOp(k, m.c(0), "ne")).result
        wait = if_then(items, items.insert(arith.AndIOp(leader, remote)).result)
        wait.insert(WaitSignalOp(peers, Ints(wait).add(ready, peer), epoch))
        items.insert(gpu.BarrierOp())
        target = items.insert(PeerViewOp(peers, recv, peer)).result
        # Own part: straight into the output at table r·T' + t; a peer's:
        # row r of its receive buffer, at the same place.
        row = m.add(m.mul(rank, tables_per_rank), t)
        start = m.mul(row, tile)
        elements, e = for_loop(items, tid, m.c(tile), bdim, "e")
        q = Ints(elements)
        bag = q.add(q.mul(peer, plan.bags), q.div(e, plan.width))
        d = q.rem(e, plan.width)
        value = emit_pooled(elements, plan.lookup, tables, indices, rank, t, bag, d)
        at = q.add(start, e)
        own = if_then(elements, elements.insert(arith.CmpiOp(k, q.c(0), "eq")).result)
        store(own, value, out, [at])
        pushed = if_then(elements, remote)
        store(pushed, value, target, [at])
        items.insert(gpu.BarrierOp())
        signal = if_then(items, items.insert(arith.AndIOp(leader, remote)).result)
        s = Ints(signal)
        bytes_ = s.c(tile * plan.element_bytes)
        signal.insert(CountPeerBytesOp(peers, peer, bytes_))
        slot = s.add(tiles, s.add(s.mul(rank, tables_per_rank), t))
        signal.insert(SignalOp(peers, peer, slot, epoch))

        # 3. Copy each peer's tiles to the output as they land.
        count = (world - 1) * tables_per_rank
        copies, item = for_loop(b, bid, n.c(count), gdim, "copy")
        m = Ints(copies)
        k = m.add(m.div(item, tables_per_rank), 1)
        t = m.rem(item, tables_per_rank)
        source = m.rem(m.add(rank, k), world)
        source.name_hint = "source"
        row = m.add(m.mul(source, tables_per_rank), t)
        lead = if_then(copies, leader)
        lead.insert(WaitSignalOp(peers, Ints(lead).add(tiles, row), epoch))
        copies.insert(gpu.BarrierOp())
        start = m.mul(row, tile)
        moving, e = for_loop(copies, tid, m.c(tile), bdim, "e")
        at = Ints(moving).add(start, e)
        store(moving, load(moving, recv, [at]), out, [at])
        return func


def _count(plan: EmbeddingAllToAll, value: SSAValue) -> int:
    shape = plan.lookup.shape(tensor_type(value))
    return shape[0] * shape[1] * shape[2]


def lower_tile_collective(
    lowering: Lowering, fusion: FusionOp, rewriter: PatternRewriter
) -> bool:
    """A fusion `coco-fuse-collective` built → one tile-granular kernel
    launch. False, changing nothing, for a fusion of another shape."""
    plan = EmbeddingAllToAll.of(fusion, lowering.world)
    module = module_of(fusion)
    if plan is None or module is None:
        return False
    allocator = SymmetricAllocator.of(module)
    kernel = EmbeddingAllToAllKernel(plan, allocator.slots(plan.slots))
    func = kernel.build(lowering, lowering.kernel_name(fusion, "fused"))

    rank, peers, epoch = peer_context()
    host: list[Operation] = [rank, peers, epoch]
    inputs = dict(zip(fusion.block.args, fusion.inputs))

    def flat(value: SSAValue) -> SSAValue:
        ops, buffer = lowering.buffer(inputs[value])  # type: ignore[index]
        more, collapsed = collapse(buffer)
        host.extend([*ops, *more])
        return collapsed

    tables = flat(plan.embedding.tables)
    indices = flat(plan.embedding.indices)
    element = tensor_type(plan.embedding.result).element_type
    elements = plan.world * plan.tables * plan.tile
    recv = SymmetricBufferOp(
        allocator.buffer(elements * plan.element_bytes),
        MemRefType(element, [elements]),
    )
    recv.result.name_hint = "recv"
    host.append(recv)
    ops, out = lowering.result_buffer(fusion, fusion.results[0])
    host.extend(ops)
    more, out_flat = collapse(out)
    host.extend(more)

    threads = lowering.threads
    items = arith.ConstantOp(IntegerAttr(plan.world * plan.tables * threads, index))
    per_block = arith.ConstantOp(IntegerAttr(threads, index))
    blocks = GridBlocksOp(items, per_block)
    one = arith.ConstantOp(IntegerAttr(1, index))
    items.result.name_hint, per_block.result.name_hint = "items", "threads"
    blocks.result.name_hint, one.result.name_hint = "blocks", "c1"
    launch = gpu.LaunchFuncOp(
        lowering.kernels.symbol_of(func),
        [blocks, one, one],
        [per_block, one, one],
        kernelOperands=[
            rank.result,
            epoch.result,
            peers.result,
            tables,
            indices,
            recv.result,
            out_flat,
        ],
    )
    launch.attributes[PEER_BYTES_ATTR] = IntegerAttr(plan.peer_bytes(), i64)
    host += [items, per_block, blocks, one, launch]
    replace_with_buffers(rewriter, fusion, host, [out])
    return True
