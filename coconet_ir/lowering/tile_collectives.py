"""Tile-granular fused computation-collective kernels (docs/gpu/tile-kernels.md, "Fused
computation-collective operators"): a `coco.fusion` of a producer and the
collective consuming it (what `coco-fuse-collective` builds) becomes ONE
kernel whose blocks store each tile they finish straight into the rank that
needs it and signal that rank's counter for the tile, while other blocks
still compute; the tail of the same kernel waits only for the tile it copies
next. No NCCL call, no host synchronization between compute and
communication (Punniyamurthy et al., 2023).

Built: embedding + all_to_all (below), GEMV + all_reduce (`GemvAllReduce`:
a two-shot all-reduce whose first shot is computed tile by tile, each tile
in slices of K that fill the device) and GEMM +
all_to_all (`GemmAllToAll`: a mixture of experts' combine); docs/gpu/tile-kernels.md.
Each plan (`TilePlan`) says whether a fusion is its kernel's
(`fuse_collective.tile_kernel_problem`, then what depends on the world
size), and `lower_tiles` builds the host side of any of them.

Embedding + all_to_all (DLRM): rank `r` owns tables `r·T' ..`
(`T' = T/N`) and pools them for the whole batch; rank `p` needs the bags
`p·B' ..` (`B' = B/N`) of every table. A *tile* is `Bt` bags of one table
for one destination (`Bt·D` elements, at most `EMBEDDING_TILE_ELEMENTS`):
`T'·Cb` tiles per destination, `Cb = B'/Bt`. The kernel, for epoch `e`:

1. block 0's thread 0 signals every peer's `READY + r` slot: "my previous
   launch of this kernel has ended, you may write into my receive buffer";
2. items `(k, t)`, `k = 1 .. N`, `p = (r + k) mod N` (each rank starts on
   another destination, so the links are loaded evenly; `k = N` is its own
   part, last, stored straight into its output): thread 0 waits for `READY +
   p` (once per item, a flag already raised after the first), the block
   pools the tile (`embedding.emit_pooled_lanes`: 16 bytes of a row a
   thread where it can, else element by element) and stores it into row `r` of
   `p`'s receive buffer, then thread 0 marks the tile computed (the
   emulator's timeline), counts the bytes and signals `p`'s slot `TILE +
   r·T'·Cb + t` (release, system scope);
3. items `(k, t)`, `k = 1 .. N-1`, `q = (r + k) mod N`: thread 0 waits for
   `TILE + q·T'·Cb + t`, the block copies that tile from the receive buffer
   to the output, at its place in part `q`.

Slots hold epochs and are never reset. Step 1's flag is the closing sync: a
peer writes into this rank's receive buffer in launch `e` only after this
rank has started launch `e`, i.e. after its launch `e' < e` (stream order)
copied everything out.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from math import prod
from typing import Any, ClassVar, Generic, Self, TypeVar, cast

from xdsl.builder import Builder
from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import (
    DenseArrayBase,
    DictionaryAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from coconet_ir.analysis.costs import fusion_work
from coconet_ir.analysis.kernels import GEMM_PRODUCERS, is_tile_prologue, tiled_pair
from coconet_ir.dialects import gpu  # xDSL's gpu, in MLIR's syntax
from coconet_ir.dialects.coco import (
    AllReduceOp,
    AllToAllOp,
    BatchMatmulOp,
    EmbeddingOp,
    FusionOp,
    MatmulOp,
    element_info,
    tensor_type,
)
from coconet_ir.dialects.coco_gpu import (
    COOPERATIVE_ATTR,
    PEER_BYTES_ATTR,
    TILE_PLAN_ATTR,
    WORK_ATTR,
    CountPeerBytesOp,
    PeersType,
    PeerViewOp,
    SignalOp,
    SymmetricBufferOp,
    TileComputedOp,
    WaitSignalOp,
)
from coconet_ir.lowering import kernels
from coconet_ir.lowering.embedding import (
    EmbeddingLookup,
    emit_pooled,
    emit_pooled_lanes,
    out_of_range,
    unroll_of,
    vector_of,
)
from coconet_ir.lowering.fused_collectives import (
    Ints,
    SymmetricAllocator,
    if_then,
    module_of,
    next_epoch,
)
from coconet_ir.lowering.host import HostValues
from coconet_ir.lowering.kernels import (
    VECTOR_BYTES,
    Indexer,
    X,
    binary,
    combine,
    compute_type,
    constant,
    for_loop,
    from_compute,
    from_lanes,
    if_else,
    index,
    linear,
    load,
    load_lanes,
    memref_element,
    store,
    store_lanes,
    sum_of_products,
    to_compute,
)
from coconet_ir.lowering.kernels import lanes as kernel_lanes
from coconet_ir.lowering.state import Lowering, replace_with_buffers


def widest_divisor(
    n: int, limit: int, also: Callable[[int], bool] = lambda _: True
) -> int:
    """The widest divisor of `n` up to `limit` (at least 1) for which `also`
    holds; 0 when none does. How the tile plans size their tiles."""
    fits = [c for c in range(1, min(max(1, limit), n) + 1) if n % c == 0 and also(c)]
    return max(fits, default=0)


def frame(b: Builder) -> tuple[SSAValue, SSAValue, SSAValue, SSAValue, SSAValue]:
    """The thread and block ids and counts of a tile kernel, and whether
    this thread is its block's leader (thread 0)."""
    tid = b.insert(gpu.ThreadIdOp(X)).result
    bid = b.insert(gpu.BlockIdOp(X)).result
    bdim = b.insert(gpu.BlockDimOp(X)).result
    gdim = b.insert(gpu.GridDimOp(X)).result
    tid.name_hint, bid.name_hint = "tid", "bid"
    return tid, bid, bdim, gdim, Ints(b).eq(tid, 0)


def dot(
    b: Builder,
    row: tuple[SSAValue, SSAValue],
    column: tuple[SSAValue, SSAValue, int],
    depth: int,
    x_map: Callable[[Builder, SSAValue], SSAValue] | None = None,
) -> SSAValue:
    """`sum_k f(x[start + k]) * w[offset + k * stride]` over `k < depth`, in
    the compute type (f32 for halves): `row` is `(x, start)`, `column` is
    `(w, offset, stride)`, `f` is `x_map` (a prologue) or the identity."""
    (x, start), (w, offset, stride) = row, column

    def x_at(inner: Builder, k: SSAValue) -> SSAValue:
        return Ints(inner).add(start, k)

    def w_at(inner: Builder, k: SSAValue) -> SSAValue:
        i = Ints(inner)
        return i.add(offset, i.mul(k, stride))

    zero = constant(b, 0, compute_type(memref_element(x.type)))
    n = Ints(b)
    bounds = (n.c(0), n.c(depth), n.c(1))
    return sum_of_products(b, bounds, zero, (x, x_at), (w, w_at), x_map)


def multiply(b: Builder, x: SSAValue, y: SSAValue) -> SSAValue:
    """`x * y` in their type (integers wrap)."""
    kind = arith.MuliOp if isinstance(x.type, IntegerType) else arith.MulfOp
    return binary(b, kind, x, y)


def tile_kernel(
    lowering: Lowering, name: str, args: Sequence[tuple[str, Attribute]]
) -> tuple[gpu.FuncOp, Builder]:
    """The tile kernel `name`, its arguments those `lower_tiles` passes
    every tile kernel (rank, epoch, peers, its first signal slot), then
    `args` (its reads, its symmetric buffers, the output)."""
    common = [("rank", index), ("epoch", i64), ("peers", PeersType()), ("slots", index)]
    return lowering.kernels.kernel(name, [*common, *args])


def tile_element(
    m: Ints,
    t: SSAValue,
    e: SSAValue,
    width: int,
    stacked: tuple[int, int] | None = None,
) -> tuple[SSAValue, SSAValue]:
    """Row and column of element `e` (row-major) of tile `t` of a matrix cut
    into tiles `width` columns wide: side by side, each as tall as the
    matrix (tile `t` is columns `t·width ...`), or with `stacked = (height,
    across)` in rows of `across` tiles `height` rows tall."""
    if stacked is None:
        row = m.div(e, width)
        tile_column: SSAValue = t
    else:
        height, across = stacked
        row = m.add(m.mul(m.div(t, across), height), m.div(e, width))
        tile_column = m.rem(t, across)
    return row, m.add(m.mul(tile_column, width), m.rem(e, width))


def open_to_peers(
    b: Builder,
    who: tuple[SSAValue, SSAValue],
    context: tuple[SSAValue, SSAValue, SSAValue],
    world: int,
    ready: SSAValue,
) -> None:
    """Step 1 of every tile kernel: thread 0 of block 0 (`who`: leader, bid)
    signals every peer's slot `ready + rank` (the closing sync)."""
    (leader, bid), (rank, peers, epoch) = who, context
    n = Ints(b)
    first = if_then(b, b.insert(arith.AndIOp(leader, n.eq(bid, 0))).result)
    f = Ints(first)
    loop, k = for_loop(first, f.c(1), f.c(world), f.c(1), "k")
    m = Ints(loop)
    peer = m.rem(m.add(rank, k), world)
    loop.insert(SignalOp(peers, peer, m.add(ready, rank), epoch))


P = TypeVar("P", bound=Operation)
"""The producer of a tile plan."""


@dataclass(frozen=True)
class TilePlan(ABC, Generic[P]):
    """What every tile kernel's plan says (`lower_tiles` reads it): the
    fusion it lowers, its reads, its symmetric buffers, its signal slots,
    the tiles a rank computes and the bytes it stores into each peer."""

    fusion: FusionOp
    world: int
    producer: P
    """The op whose result its collective moves."""
    prologue: tuple[Operation, ...] = ()
    """Elementwise ops applied to each element the kernel loads of the
    producer's first operand (`takes_prologue` plans only; `tiled_pair`)."""

    producers: ClassVar[tuple[type[Operation], ...]]
    """The producers the kernel computes."""
    collective: ClassVar[type[Operation]]
    """The collective consuming the producer that the kernel performs."""
    takes_prologue: ClassVar[bool] = False
    """Whether the kernel applies a `prologue` to its first read."""

    @classmethod
    def of(cls, fusion: FusionOp, world: int) -> Self | None:
        """The plan of `fusion` on `world` ranks, or None: the fusion is not
        one of `producers` into `collective` with a tile kernel
        (`tiled_pair`), or the plan finds no tiling (`tiled`)."""
        found = tiled_pair(fusion, cls.producers, cls.collective, cls.takes_prologue)
        if found is None:
            return None
        prologue, producer, _ = found
        plan = cls(fusion, world, cast(Any, producer), prologue)
        return plan if plan.tiled else None

    @property
    def tiled(self) -> bool:
        """Whether the plan finds a tiling (else the fusion is lowered
        another way)."""
        return True

    @property
    def consumer(self) -> Operation:
        """The collective consuming the producer's result."""
        op = self.producer.next_op
        assert op is not None
        return op

    @property
    def element(self) -> Attribute:
        """The element type of the fusion's result (and of its buffers)."""
        return tensor_type(self.fusion.results[0]).element_type

    @property
    def element_bytes(self) -> int:
        return element_info(self.element).bytes

    @property
    def reads(self) -> list[SSAValue]:
        """The fusion's block arguments the kernel reads, in its order: the
        operands of its producer (the first one's before the prologue)."""
        first, *rest = self.producer.operands
        return [self.prologue[0].operands[0] if self.prologue else first, *rest]

    def apply_prologue(self, b: Builder, value: SSAValue) -> SSAValue:
        """The prologue's ops on one loaded element (`emit_elementwise`)."""
        for op in self.prologue:
            value = kernels.emit_elementwise(b, op, [value])
        return value

    @property
    @abstractmethod
    def tile(self) -> int:
        """Elements of one tile."""

    @property
    @abstractmethod
    def symmetric(self) -> list[tuple[str, int, Attribute]]:
        """The symmetric buffers: (name hint, elements, element type)."""

    @property
    @abstractmethod
    def slots(self) -> int:
        """The signal slots the kernel uses from its base."""

    @property
    @abstractmethod
    def computed(self) -> int:
        """Tiles this rank computes per launch (the kernel's work items)."""

    @property
    def items(self) -> int:
        """Work items per launch (a block each at a time): the tiles."""
        return self.computed

    resident: ClassVar[bool] = False
    """Whether the launch's grid is capped to the kernel's occupancy
    (`coco_gpu.grid_blocks ... resident`), not only to `COCO_BLOCKS_PER_SM`."""

    @abstractmethod
    def peer_bytes(self) -> int:
        """Bytes this rank stores into each peer per launch."""

    @abstractmethod
    def build(self, lowering: Lowering, name: str) -> gpu.FuncOp:
        """The kernel, named `name` (its first signal slot is its argument
        `slots`)."""

    kind: ClassVar[str]
    """The operator's name in its record (`TILE_PLAN_ATTR`)."""

    def record(self) -> dict[str, int | Sequence[int] | str]:
        """The decisions another emitter of this kernel needs
        (`TILE_PLAN_ATTR`); here only the operator and the world, where the
        CUDA C kernel is the only one yet."""
        return {"kind": self.kind, "world": self.world}


@dataclass(frozen=True)
class AllToAllPlan(TilePlan[P]):
    """The plan of a tile kernel exchanging tiles as an all_to_all does
    (`AllToAllTiles`): `per_peer` tiles of `tile` elements for each
    destination."""

    @property
    @abstractmethod
    def per_peer(self) -> int:
        """Tiles per destination."""

    @property
    def chunk(self) -> int:
        """Elements of one destination's part (one source's, received)."""
        return self.per_peer * self.tile

    def peer_bytes(self) -> int:
        """Bytes this rank stores into each peer per launch: its part."""
        return self.chunk * self.element_bytes

    @property
    def computed(self) -> int:
        """Tiles this rank computes per launch: each destination's."""
        return self.world * self.per_peer

    @property
    def symmetric(self) -> list[tuple[str, int, Attribute]]:
        return [("recv", self.world * self.chunk, self.element)]

    @property
    def slots(self) -> int:
        """READY (one per source rank), then TILE (per source and tile)."""
        return self.world + self.world * self.per_peer

    def exchange(self) -> AllToAllTiles:
        return AllToAllTiles(
            self.world, self.per_peer, self.tile, self.tile * self.element_bytes
        )


EMBEDDING_TILE_ELEMENTS = 2048
"""Elements of one embedding tile at most (whole bags of one table for one
destination): a block of 256 threads pools it in one pass of 8 elements a
thread, and the model's 64 tables of 2048 bags are 8192 work items, not 64
(docs/gpu/tile-kernels.md, "Embedding + all_to_all")."""


@dataclass(frozen=True)
class EmbeddingAllToAll(AllToAllPlan[EmbeddingOp]):
    """The plan of an embedding + all_to_all fusion: table-parallel lookup
    (`tables` and the result cut along the tables), then `all_to_all` to the
    batch split. A tile is `bag_tile` bags of one table for one destination;
    each table's `B'` bags for a destination are `B' / bag_tile` tiles."""

    kind = "embedding_all_to_all"

    producers = (EmbeddingOp,)
    collective = AllToAllOp
    resident = True

    @cached_property
    def lookup(self) -> EmbeddingLookup:
        return EmbeddingLookup.of(self.producer, self.world)

    @property
    def tables(self) -> int:
        """Tables per rank (`T'`)."""
        return self.lookup.shape(self.lookup.result)[0]

    @property
    def bags(self) -> int:
        """Bags per destination (`B'`)."""
        return tensor_type(self.producer.result).dims[1] // self.world

    @property
    def width(self) -> int:
        return tensor_type(self.producer.result).dims[2]

    @property
    def bag_tile(self) -> int:
        """Bags per tile: the most dividing `B'` in `EMBEDDING_TILE_ELEMENTS`
        (one, for rows wider than that)."""
        return widest_divisor(self.bags, EMBEDDING_TILE_ELEMENTS // self.width)

    @property
    def chunks(self) -> int:
        """Tiles per table and destination (`B' / bag_tile`)."""
        return self.bags // self.bag_tile

    @property
    def tile(self) -> int:
        """Elements of one tile: `bag_tile` bags of one table."""
        return self.bag_tile * self.width

    @property
    def per_peer(self) -> int:
        """Tiles per destination: `T' x chunks`, a table's in bag order (a
        destination's part is laid out as before: table, bag, element)."""
        return self.tables * self.chunks

    def record(self) -> dict[str, int | Sequence[int] | str]:
        """The tiles (`bag_tile` bags of one table, `chunks` per table and
        destination), the lookup's shape (this rank's `tables` of `rows` x
        `width`, `length` indices per bag of `all_bags`), its pooling and
        which layouts it reads (`rank_reads`: a replicated operand or
        row-cut tables, whose reads depend on the rank)."""
        lookup = self.lookup
        _, rows, width = lookup.shape(lookup.tables)
        _, all_bags, length = lookup.shape(lookup.indices)
        return {
            **super().record(),
            "tables": self.tables,
            "rows": rows,
            "width": width,
            "bags": self.bags,
            "all_bags": all_bags,
            "length": length,
            "bag_tile": self.bag_tile,
            "chunks": self.chunks,
            "per_peer": self.per_peer,
            "pooling": lookup.pooling,
            "rank_reads": int(lookup.needs_rank),
            "message": out_of_range(lookup),
        }

    def build(self, lowering: Lowering, name: str) -> gpu.FuncOp:
        plan = self
        element = tensor_type(plan.producer.result).element_type
        tables_t, indices_t = (
            MemRefType(tensor_type(v).element_type, [_count(plan, v)])
            for v in (plan.producer.tables, plan.producer.indices)
        )
        block_elements = plan.world * plan.chunk
        func, b = tile_kernel(
            lowering,
            name,
            [
                ("tables", tables_t),
                ("indices", indices_t),
                ("recv", MemRefType(element, [block_elements])),
                ("out", MemRefType(element, [block_elements])),
            ],
        )
        rank, epoch, peers, slots, tables, indices, recv, out = func.body.block.args
        tile, per_peer = plan.tile, plan.per_peer
        vector, unroll = vector_of(plan.lookup), unroll_of(plan.lookup)
        reads = (tables, indices, rank)

        def element_of(
            b: Builder, peer: SSAValue, t: SSAValue, e: SSAValue
        ) -> tuple[tuple[SSAValue, SSAValue, SSAValue], SSAValue]:
            # Tile `t` is bags `c·bag_tile ..` of table `t / chunks`; element
            # `e` is bag `peer·B' + c·bag_tile + e / D`, at table r·T' + t
            # (the output's place for the own part, the peer's receive
            # buffer's).
            q = Ints(b)
            table, first = t, q.mul(peer, plan.bags)
            if plan.chunks > 1:
                table = q.div(t, plan.chunks)
                first = q.add(first, q.mul(q.rem(t, plan.chunks), plan.bag_tile))
            bag = q.add(first, q.div(e, plan.width))
            d = q.rem(e, plan.width)
            at = q.add(q.mul(q.add(q.mul(rank, per_peer), t), tile), e)
            return (table, bag, d), at

        def value_of(
            b: Builder, peer: SSAValue, t: SSAValue, e: SSAValue
        ) -> tuple[SSAValue, SSAValue]:
            (table, bag, d), at = element_of(b, peer, t, e)
            value = emit_pooled(b, plan.lookup, tables, indices, rank, table, bag, d)
            return value, at

        def lanes_of(
            b: Builder, peer: SSAValue, t: SSAValue, e: SSAValue
        ) -> tuple[list[SSAValue], SSAValue]:
            place, at = element_of(b, peer, t, e)
            values = emit_pooled_lanes(b, plan.lookup, reads, place, vector, unroll)
            return values, at

        def place(b: Builder, source: SSAValue, t: SSAValue, e: SSAValue) -> SSAValue:
            q = Ints(b)
            return q.add(q.mul(q.add(q.mul(source, per_peer), t), tile), e)

        fast = None
        if vector > 1:
            fast = VectorTiles(aligned(b, [tables, recv, out]), vector, lanes_of)
        plan.exchange().build(
            b, (rank, epoch, peers, slots, recv, out), value_of, place, fast
        )
        return func


def aligned(b: Builder, buffers: Sequence[SSAValue]) -> SSAValue:
    """Whether every one of `buffers` starts on a `VECTOR_BYTES` boundary (a
    view of a buffer may start anywhere: then the scalar path)."""
    n = Ints(b)
    ok: SSAValue | None = None
    for buffer in buffers:
        pointer = b.insert(memref.ExtractAlignedPointerAsIndexOp.get(buffer))
        here = n.eq(n.rem(pointer.aligned_pointer, VECTOR_BYTES), 0)
        ok = here if ok is None else b.insert(arith.AndIOp(ok, here)).result
    assert ok is not None
    ok.name_hint = "aligned"
    return ok


TileValue = Callable[[Builder, SSAValue, SSAValue, SSAValue], tuple[SSAValue, SSAValue]]
"""`(elements, peer, t, e) -> (value, at)`: element `e` of tile `t` for
`peer`, and its index in the receive buffer (the output, for the own part)."""

TilePlace = Callable[[Builder, SSAValue, SSAValue, SSAValue], SSAValue]
"""`(elements, source, t, e) -> at`: where element `e` of `source`'s tile `t`
sits in the receive buffer and the output."""

TileLanes = Callable[
    [Builder, SSAValue, SSAValue, SSAValue], tuple[list[SSAValue], SSAValue]
]
"""`(elements, peer, t, e) -> (values, at)`: elements `e ..` of tile `t` for
`peer` (as many as the vector's lanes), and the index of the first."""


@dataclass(frozen=True)
class VectorTiles:
    """The vector path of an all_to_all tile kernel: where `aligned` holds
    (its buffers start on 16-byte boundaries), each thread computes and
    stores `vector` consecutive elements of a tile at once (`lanes_of`),
    and the tail copies 16 bytes at a time; else the scalar path."""

    aligned: SSAValue
    vector: int
    lanes_of: TileLanes


@dataclass
class AllToAllTiles:
    """The exchange both all_to_all tile kernels share (docs/gpu/tile-kernels.md):
    `per_peer` tiles of `tile` elements for each destination; signal slots
    READY (one per source), then TILE (per source and tile) from the
    kernel's first slot `slots`; destinations `r+1, r+2, ..., r` (own part
    last, straight into the output); the tail copies each peer's tiles as
    they land."""

    world: int
    per_peer: int
    tile: int
    tile_bytes: int

    def build(
        self,
        b: Builder,
        args: tuple[SSAValue, SSAValue, SSAValue, SSAValue, SSAValue, SSAValue],
        value_of: TileValue,
        place: TilePlace,
        fast: VectorTiles | None = None,
    ) -> None:
        """Steps 1 to 3 into kernel body `b`; `args` are the kernel's rank,
        epoch, peers, first slot, receive buffer and output; with `fast`,
        its vector path where its buffers are aligned."""
        rank, epoch, peers, ready, recv, out = args
        tid, bid, bdim, gdim, leader = frame(b)
        n = Ints(b)
        world, per_peer = self.world, self.per_peer
        tiles = n.add(ready, world)
        tiles.name_hint = "tile_slots"

        # 1. Block 0 opens this rank's receive buffer to every peer.
        open_to_peers(b, (leader, bid), (rank, peers, epoch), world, ready)

        # 2. Compute each tile and store it where it is needed at once.
        items, item = for_loop(b, bid, n.c(world * per_peer), gdim, "item")
        m = Ints(items)
        peer = m.rem(m.add(rank, m.add(m.div(item, per_peer), 1)), world)
        peer.name_hint = "peer"
        t = m.rem(item, per_peer)
        remote = items.insert(arith.CmpiOp(peer, rank, "ne")).result
        wait = if_then(items, items.insert(arith.AndIOp(leader, remote)).result)
        wait.insert(WaitSignalOp(peers, Ints(wait).add(ready, peer), epoch))
        items.insert(gpu.BarrierOp())
        target = items.insert(PeerViewOp(peers, recv, peer)).result

        def scalar(
            b: Builder, peer: SSAValue, t: SSAValue, e: SSAValue
        ) -> tuple[list[SSAValue], SSAValue]:
            value, at = value_of(b, peer, t, e)
            return [value], at

        def fill(where: Builder, width: int, of: TileLanes) -> None:
            elements, e = self.units(where, (tid, bdim), width)
            values, at = of(elements, peer, t, e)
            value = from_lanes(elements, values)
            own = if_then(
                elements, elements.insert(arith.CmpiOp(peer, rank, "eq")).result
            )
            store_lanes(own, value, out, at)
            store_lanes(if_then(elements, remote), value, target, at)

        if fast is None:
            fill(items, 1, scalar)
        else:
            wide, narrow = if_else(items, fast.aligned)
            fill(wide, fast.vector, fast.lanes_of)
            fill(narrow, 1, scalar)
        items.insert(gpu.BarrierOp())
        if_then(items, leader).insert(TileComputedOp())
        signal = if_then(items, items.insert(arith.AndIOp(leader, remote)).result)
        g = Ints(signal)
        signal.insert(CountPeerBytesOp(peers, peer, g.c(self.tile_bytes)))
        slot = g.add(tiles, g.add(g.mul(rank, per_peer), t))
        signal.insert(SignalOp(peers, peer, slot, epoch))

        # 3. Copy each peer's tiles to the output as they land.
        copies, item = for_loop(b, bid, n.c((world - 1) * per_peer), gdim, "copy")
        m = Ints(copies)
        source = m.rem(m.add(rank, m.add(m.div(item, per_peer), 1)), world)
        source.name_hint = "source"
        t = m.rem(item, per_peer)
        lead = if_then(copies, leader)
        h = Ints(lead)
        slot = h.add(tiles, h.add(h.mul(source, per_peer), t))
        lead.insert(WaitSignalOp(peers, slot, epoch))
        copies.insert(gpu.BarrierOp())

        def move(where: Builder, width: int) -> None:
            moving, e = self.units(where, (tid, bdim), width)
            at = place(moving, source, t, e)
            store_lanes(moving, load_lanes(moving, recv, at, width), out, at)

        if fast is None:
            move(copies, 1)
        else:
            wide, narrow = if_else(copies, fast.aligned)
            move(wide, fast.vector)
            move(narrow, 1)

    def units(
        self, b: Builder, threads: tuple[SSAValue, SSAValue], width: int
    ) -> tuple[Builder, SSAValue]:
        """The block's loop over a tile `width` elements a thread at a time
        (`threads`: tid, block size): its body and the first element."""
        tid, bdim = threads
        if width == 1:
            return for_loop(b, tid, Ints(b).c(self.tile), bdim, "e")
        loop, u = for_loop(b, tid, Ints(b).c(self.tile // width), bdim, "u")
        return loop, Ints(loop).mul(u, width)


GEMV_TILE_ELEMENTS = 256
"""Elements of one GEMV output tile (rows x columns), at most."""

GEMV_ITEMS = 1536
"""Work items (slices of tiles) a GEMV launch aims for, at least: the grid is
`coco::resident_blocks` (an H100's 132 SMs x 4 blocks of 256 threads = 528),
and 1536 items are ~2.9 rounds of it at H = 12288 (48 tiles x 32 slices), so
every block streams its share of the weights and the last round is 91% full
(docs/gpu/tile-kernels.md, "GEMV + all_reduce")."""

GEMV_MIN_SLICE_BYTES = 16 * 1024
"""Weight bytes one work item streams, at least (a slice of a tile's
columns): less would leave a block more bookkeeping than loads."""

GEMV_ACCUMULATORS = 16
"""Accumulators per thread at most (rows x vector lanes), so the kernel
keeps its loads in flight in registers under `__launch_bounds__(256, 4)`."""

GEMV_STEP_ROWS = 4
"""Weight rows a thread loads per step, before it multiplies any: 4 loads
of 16 bytes in flight per thread."""


@dataclass(frozen=True)
class GemvAllReduce(TilePlan[MatmulOp]):
    """The plan of a GEMV + all_reduce fusion: a row-parallel matmul (`x`
    cut along K, `w` along its rows: local partial sums) of at most
    `GEMV_ROWS` rows, then `all_reduce sum`. The output's columns are cut
    into `tiles` tiles of `rows x columns`; tile `c` is reduced by rank
    `c mod N`. Each tile's partial is computed in `slices` slices of the
    rank's K (split-K: a work item is one slice of one tile), combined in
    f32 by the block computing its last slice."""

    kind = "gemv_all_reduce"

    producers = (MatmulOp,)
    collective = AllReduceOp
    resident = True

    @property
    def tiled(self) -> bool:
        return bool(self.tile_columns)

    @property
    def rows(self) -> int:
        return prod(tensor_type(self.producer.result).dims[:-1])

    @property
    def columns(self) -> int:
        """Output columns (`M`)."""
        return tensor_type(self.producer.result).dims[-1]

    @property
    def depth(self) -> int:
        """The contraction each rank holds (`K / N`)."""
        return tensor_type(self.producer.rhs).dims[0] // self.world

    @property
    def tile_columns(self) -> int:
        """Columns per tile: the widest that divides M into a multiple of N
        tiles of at most `GEMV_TILE_ELEMENTS` elements (0: none does)."""
        return widest_divisor(
            self.columns,
            GEMV_TILE_ELEMENTS // self.rows,
            lambda c: (self.columns // c) % self.world == 0,
        )

    @property
    def tiles(self) -> int:
        return self.columns // self.tile_columns

    @property
    def tile(self) -> int:
        return self.rows * self.tile_columns

    @property
    def per_rank(self) -> int:
        """Tiles each rank reduces (`C/N`: `tile_columns` makes N divide C)."""
        return self.tiles // self.world

    @property
    def vector(self) -> int:
        """Weight columns a thread loads at once (one access of up to 16
        bytes): a power of two dividing the tile's width, `rows x vector`
        accumulators at most `GEMV_ACCUMULATORS`."""
        widest = VECTOR_BYTES // self.element_bytes
        return max(
            v
            for v in (1, 2, 4, 8, 16)
            if v <= widest
            and self.tile_columns % v == 0
            and self.rows * v <= GEMV_ACCUMULATORS
        )

    @property
    def step_rows(self) -> int:
        """Weight rows a thread loads per step (`GEMV_STEP_ROWS`, or the
        widest power of two dividing K/N): its `x` values are one vector per
        row, `rows x step_rows` of them at most `GEMV_ACCUMULATORS`."""
        return max(
            u
            for u in (1, 2, GEMV_STEP_ROWS)
            if self.depth % u == 0 and (u == 1 or self.rows * u <= GEMV_ACCUMULATORS)
        )

    @property
    def slices(self) -> int:
        """Slices of K/N per tile (`S`): the fewest giving `GEMV_ITEMS` work
        items, each slice whole steps and at least `GEMV_MIN_SLICE_BYTES` of
        weights; as many as that allows on a smaller GEMV."""
        depth, step = self.depth, self.step_rows
        row_bytes = self.tile_columns * self.element_bytes
        fits = [
            s
            for s in range(1, depth // step + 1)
            if depth % s == 0
            and (depth // s) % step == 0
            and (s == 1 or depth // s * row_bytes >= GEMV_MIN_SLICE_BYTES)
        ]
        enough = [s for s in fits if self.computed * s >= GEMV_ITEMS]
        return min(enough) if enough else max(fits)

    @property
    def slice_rows(self) -> int:
        """Rows of K/N in one slice."""
        return self.depth // self.slices

    def lanes(self, threads: int) -> tuple[int, int]:
        """How a block of `threads` threads shares a slice: `(across, down)`
        lanes, `across` vectors side by side over the tile's width (a warp's
        loads of one weight row are contiguous), `down` rows of lanes
        taking the slice's steps in turn (no more rows than steps)."""
        across = self.tile_columns // self.vector
        steps = self.slice_rows // self.step_rows
        return across, max(1, min(threads // across, steps))

    def peer_bytes(self) -> int:
        """Bytes this rank stores into each peer per launch: the partials of
        the peer's C/N tiles and the results of its own C/N (two-shot:
        `2 (N-1)/N S` in all)."""
        return 2 * self.per_rank * self.tile * self.element_bytes

    @property
    def computed(self) -> int:
        """Tiles this rank computes per launch: a partial of each tile."""
        return self.world * self.per_rank

    @property
    def items(self) -> int:
        """Work items per launch: each tile's slices."""
        return self.computed * self.slices

    @property
    def symmetric(self) -> list[tuple[str, int, Attribute]]:
        size = self.rows * self.columns
        buffers = [
            ("partials", self.world * size, self.element),
            ("gather", size, self.element),
        ]
        if self.slices > 1:
            sliced = self.tiles * (self.slices - 1) * self.tile
            buffers.append(("slices", sliced, compute_type(self.element)))
        return buffers

    @property
    def slots(self) -> int:
        """READY (per source), PARTIAL (per source and tile), DONE (per
        tile), SLICE (per tile and slice but its last)."""
        return self.world + self.world * self.tiles + self.tiles * self.slices

    def record(self) -> dict[str, int | Sequence[int] | str]:
        """The GEMV (`rows` x `depth` (K/N) times `depth` x `columns`), its
        tiles (`tiles` of `tile_columns`, `per_rank` reduced by each rank,
        tile `c` by rank `c mod N`) and the split-K slices of the CUDA C
        kernel (`slices`: its symmetric buffers and slots READY, PARTIAL,
        DONE, SLICE)."""
        return {
            **super().record(),
            "rows": self.rows,
            "columns": self.columns,
            "depth": self.depth,
            "tile_columns": self.tile_columns,
            "tiles": self.tiles,
            "per_rank": self.per_rank,
            "slices": self.slices,
        }

    def build(self, lowering: Lowering, name: str) -> gpu.FuncOp:
        plan = self
        world, rows, cols = plan.world, plan.rows, plan.columns
        width, tile, slices = plan.tile_columns, plan.tile, plan.slices
        element = tensor_type(plan.producer.result).element_type
        acc_type = compute_type(element)
        symmetric = [
            (hint, MemRefType(t, [count])) for hint, count, t in plan.symmetric
        ]
        func, b = tile_kernel(
            lowering,
            name,
            [
                ("x", MemRefType(element, [rows * plan.depth])),
                ("w", MemRefType(element, [plan.depth * cols])),
                *symmetric,
                ("out", MemRefType(element, [rows * cols])),
            ],
        )
        rank, epoch, peers, ready, x, w, partials, gather, *rest = func.body.block.args
        *sliced, out = rest
        down = plan.lanes(lowering.threads)[1]
        red = func.add_workgroup_buffer(acc_type, down * tile)
        red.name_hint = "lane_sums"
        tid, bid, bdim, gdim, leader = frame(b)
        n = Ints(b)
        partial_slots = n.add(ready, world)
        done = n.add(ready, world + world * plan.tiles)
        slice_slots = n.add(ready, world + world * plan.tiles + plan.tiles)
        partial_slots.name_hint, done.name_hint = "partial_slots", "done_slots"
        slice_slots.name_hint = "slice_slots"
        aligned = plan.aligned(b, x, w)

        # 0. Block 0 opens this rank's buffers to every peer.
        open_to_peers(b, (leader, bid), (rank, peers, epoch), world, ready)

        # 1. Slices of partial tiles, destinations r+1, r+2, ..., r (own
        #    last), a tile's slices one after another: each block sums its
        #    slice per lane into `lane_sums`; the block of a tile's last
        #    slice adds the others' (in slice order), rounds once and stores
        #    the partial at row r of its owner's partials.
        items, item = for_loop(b, bid, n.c(plan.items), gdim, "item")
        m = Ints(items)
        t = m.div(item, slices)
        s = m.rem(item, slices) if slices > 1 else m.c(0)
        t.name_hint, s.name_hint = "t", "s"
        step = m.add(m.div(t, plan.per_rank), 1)
        owner = m.rem(m.add(rank, step), world)
        owner.name_hint = "owner"
        c = m.add(owner, m.mul(m.rem(t, plan.per_rank), world))
        fast, safe = if_else(items, aligned)
        plan.sum_slice(fast, (x, w, red), (c, s), True, lowering.threads)
        plan.sum_slice(safe, (x, w, red), (c, s), False, lowering.threads)
        items.insert(gpu.BarrierOp())
        keep = slice_slots, m.add(m.mul(c, slices - 1), s)
        if slices == 1:
            last = items
        else:
            last, other = if_else(items, m.eq(s, slices - 1))
            plan.keep_slice(other, (sliced[0], red, down), keep, (peers, rank, epoch))
        direct = world == 1  # the partial is the result: into the output
        remote = None if direct else last.insert(arith.CmpiOp(owner, rank, "ne")).result
        if remote is not None:
            wait = if_then(last, last.insert(arith.AndIOp(leader, remote)).result)
            wait.insert(WaitSignalOp(peers, Ints(wait).add(ready, owner), epoch))
        if slices > 1:
            lead = if_then(last, leader)
            waits, j = for_loop(
                lead, Ints(lead).c(0), Ints(lead).c(slices - 1), Ints(lead).c(1), "j"
            )
            v = Ints(waits)
            first = v.mul(c, slices - 1)
            waits.insert(
                WaitSignalOp(peers, v.add(slice_slots, v.add(first, j)), epoch)
            )
        last.insert(gpu.BarrierOp())
        target = out if direct else last.insert(PeerViewOp(peers, partials, owner))
        elements, e = for_loop(last, tid, Ints(last).c(tile), bdim, "e")
        q = Ints(elements)
        total = constant(elements, 0, acc_type)
        if slices > 1:
            kept = q.mul(q.mul(c, slices - 1), tile)
            total = plan.sum_over(
                elements, sliced[0], (q.add(kept, e), tile), slices - 1, total
            )
        total = plan.sum_over(elements, red, (e, tile), down, total)
        value = from_compute(elements, total, element)
        row, column = tile_element(q, c, e, width)
        at = q.add(q.mul(row, cols), column)
        if not direct:  # row r of the owner's partials
            at = q.add(q.mul(rank, rows * cols), at)
        store(elements, value, SSAValue.get(target), [at])
        last.insert(gpu.BarrierOp())
        lead = if_then(last, leader)
        lead.insert(TileComputedOp())
        if remote is None:  # no all-reduce on one rank: steps 2 and 3 have no work
            return func
        h = Ints(lead)
        counted = if_then(lead, remote)
        counted.insert(
            CountPeerBytesOp(peers, owner, Ints(counted).c(tile * plan.element_bytes))
        )
        slot = h.add(partial_slots, h.add(h.mul(rank, plan.tiles), c))
        lead.insert(SignalOp(peers, owner, slot, epoch))

        # 2. This rank's tiles: wait for every rank's partial, reduce in rank
        #    order (f32 for halves), store the result into every rank's gather
        #    buffer and signal each.
        reduce, j = for_loop(b, bid, n.c(plan.per_rank), gdim, "own")
        m = Ints(reduce)
        c = m.add(rank, m.mul(j, world))
        work = reduce
        lead = if_then(work, leader)
        sources, source = for_loop(
            lead, Ints(lead).c(0), Ints(lead).c(world), Ints(lead).c(1), "source"
        )
        v = Ints(sources)
        sources.insert(
            WaitSignalOp(
                peers, v.add(partial_slots, v.add(v.mul(source, plan.tiles), c)), epoch
            )
        )
        work.insert(gpu.BarrierOp())
        elements, e = for_loop(work, tid, m.c(tile), bdim, "e")
        q = Ints(elements)
        row, column = tile_element(q, c, e, width)
        place = q.add(q.mul(row, cols), column)
        ranks = Block(arg_types=[index, acc_type])
        source, acc = ranks.args
        source.name_hint, acc.name_hint = "q", "acc"
        inner = Builder(InsertPoint.at_end(ranks))
        i = Ints(inner)
        part = to_compute(
            inner, load(inner, partials, [i.add(i.mul(source, rows * cols), place)])
        )
        inner.insert(scf.YieldOp(inner.insert(arith.AddfOp(acc, part)).result))
        zero = constant(elements, 0, acc_type)
        total = elements.insert(
            scf.ForOp(q.c(0), q.c(world), q.c(1), [zero], ranks)
        ).results[0]
        value = from_compute(elements, total, element)
        store(elements, value, gather, [place])
        pushes, k = for_loop(elements, q.c(1), q.c(world), q.c(1), "k")
        p = Ints(pushes)
        peer = p.rem(p.add(rank, k), world)
        view = pushes.insert(PeerViewOp(peers, gather, peer)).result
        store(pushes, value, view, [place])
        work.insert(gpu.BarrierOp())
        lead = if_then(work, leader)
        h = Ints(lead)
        lead.insert(SignalOp(peers, rank, h.add(done, c), epoch))
        signals, k = for_loop(lead, h.c(1), h.c(world), h.c(1), "k")
        p = Ints(signals)
        peer = p.rem(p.add(rank, k), world)
        signals.insert(CountPeerBytesOp(peers, peer, p.c(tile * plan.element_bytes)))
        signals.insert(SignalOp(peers, peer, p.add(done, c), epoch))

        # 3. Every tile: wait for its result, copy it to the output.
        copies, c = for_loop(b, bid, n.c(plan.tiles), gdim, "tile")
        m = Ints(copies)
        lead = if_then(copies, leader)
        lead.insert(WaitSignalOp(peers, Ints(lead).add(done, c), epoch))
        copies.insert(gpu.BarrierOp())
        moving, e = for_loop(copies, tid, m.c(tile), bdim, "e")
        q = Ints(moving)
        row, column = tile_element(q, c, e, width)
        place = q.add(q.mul(row, cols), column)
        store(moving, load(moving, gather, [place]), out, [place])
        return func

    def aligned(self, b: Builder, x: SSAValue, w: SSAValue) -> SSAValue:
        """Whether `x` and `w` start where their vector loads may (a view
        of a buffer may start anywhere; else the scalar loads)."""
        n = Ints(b)
        ok: list[SSAValue] = []
        for buffer, count in ((x, self.step_rows), (w, self.vector)):
            pointer = b.insert(memref.ExtractAlignedPointerAsIndexOp.get(buffer))
            ok.append(
                n.eq(n.rem(pointer.aligned_pointer, count * self.element_bytes), 0)
            )
        both = b.insert(arith.AndIOp(ok[0], ok[1])).result
        both.name_hint = "aligned"
        return both

    def sum_slice(
        self,
        b: Builder,
        buffers: tuple[SSAValue, SSAValue, SSAValue],
        at: tuple[SSAValue, SSAValue],
        vectors: bool,
        threads: int,
    ) -> None:
        """Slice `s` of tile `c` (`at`) into the workgroup buffer `lane_sums`
        (`buffers`: x, w, lane_sums), one row of the tile per row of lanes:
        each lane `(g, l)` owns `vector` columns from `g·vector` and takes
        the slice's steps `l, l + down, ...`; a step loads `step_rows` rows of
        `w` (`vector` columns each: one 16-byte load with `vectors`, else
        one load per element) and their `x`, then accumulates them in the
        compute type."""
        x, w, red = buffers
        c, s = at
        rows, cols, depth = self.rows, self.columns, self.depth
        width, step = self.vector, self.step_rows
        across, down = self.lanes(threads)
        acc_type = compute_type(self.element)
        tid = b.insert(gpu.ThreadIdOp(X)).result
        bdim = b.insert(gpu.BlockDimOp(X)).result
        n = Ints(b)
        threads_loop, lane = for_loop(b, tid, n.c(across * down), bdim, "lane")
        m = Ints(threads_loop)
        g, row_lane = m.rem(lane, across), m.div(lane, across)
        column = m.add(m.mul(c, self.tile_columns), m.mul(g, width))
        first = m.mul(s, self.slice_rows)
        count = rows * width
        body = Block(arg_types=[index, *[acc_type] * count])
        k_step, *accs = body.args
        k_step.name_hint = "step"
        for a in accs:
            a.name_hint = "acc"
        inner = Builder(InsertPoint.at_end(body))
        i = Ints(inner)
        k = i.add(first, i.mul(k_step, step))

        def row_of(buffer: SSAValue, start: SSAValue, count: int) -> list[SSAValue]:
            if vectors:
                return kernel_lanes(inner, load_lanes(inner, buffer, start, count))
            return [load(inner, buffer, [i.add(start, j)]) for j in range(count)]

        weights = [
            row_of(w, i.add(i.mul(i.add(k, u), cols), column), width)
            for u in range(step)
        ]
        xs = [row_of(x, i.add(i.c(r * depth), k), step) for r in range(rows)]
        sums: list[SSAValue] = list(accs)
        for u in range(step):
            ws = [to_compute(inner, v) for v in weights[u]]
            for r in range(rows):
                xv = to_compute(inner, xs[r][u])
                for v in range(width):
                    product = multiply(inner, xv, ws[v])
                    at_ = r * width + v
                    sums[at_] = combine(inner, "sum", sums[at_], product)
        inner.insert(scf.YieldOp(*sums))
        zero = constant(threads_loop, 0, acc_type)
        loop = threads_loop.insert(
            scf.ForOp(
                row_lane,
                m.c(self.slice_rows // step),
                m.c(down),
                [zero] * count,
                body,
            )
        )
        for r in range(rows):
            for v in range(width):
                place = m.add(
                    m.mul(row_lane, self.tile),
                    m.add(m.c(r * self.tile_columns), m.add(m.mul(g, width), v)),
                )
                store(threads_loop, loop.results[r * width + v], red, [place])

    def sum_over(
        self,
        b: Builder,
        buffer: SSAValue,
        at: tuple[SSAValue, int],
        count: int,
        initial: SSAValue,
    ) -> SSAValue:
        """`initial + buffer[start] + buffer[start + stride] + ...`, `count`
        terms in order (`at`: start, stride), in `initial`'s type."""
        start, stride = at
        terms = Block(arg_types=[index, initial.type])
        j, acc = terms.args
        j.name_hint, acc.name_hint = "j", "acc"
        inner = Builder(InsertPoint.at_end(terms))
        i = Ints(inner)
        term = load(inner, buffer, [i.add(start, i.mul(j, stride))])
        inner.insert(scf.YieldOp(combine(inner, "sum", acc, to_compute(inner, term))))
        n = Ints(b)
        return b.insert(
            scf.ForOp(n.c(0), n.c(count), n.c(1), [initial], terms)
        ).results[0]

    def keep_slice(
        self,
        b: Builder,
        buffers: tuple[SSAValue, SSAValue, int],
        slot: tuple[SSAValue, SSAValue],
        context: tuple[SSAValue, SSAValue, SSAValue],
    ) -> None:
        """A slice but a tile's last: its `down` lanes' sums (`buffers`:
        slices, lane_sums, down) added up in lane order into its place
        `index` of `slices`, then its own SLICE slot signalled (`slot`:
        SLICE's first, index)."""
        sliced, red, down = buffers
        (base, index_), (peers, rank, epoch) = slot, context
        tid = b.insert(gpu.ThreadIdOp(X)).result
        bdim = b.insert(gpu.BlockDimOp(X)).result
        n = Ints(b)
        elements, e = for_loop(b, tid, n.c(self.tile), bdim, "e")
        q = Ints(elements)
        zero = constant(elements, 0, compute_type(self.element))
        mine = self.sum_over(elements, red, (e, self.tile), down, zero)
        store(elements, mine, sliced, [q.add(q.mul(index_, self.tile), e)])
        b.insert(gpu.BarrierOp())
        lead = if_then(b, b.insert(arith.CmpiOp(tid, n.c(0), "eq")).result)
        lead.insert(SignalOp(peers, rank, Ints(lead).add(base, index_), epoch))


GEMM_TILE_ELEMENTS = 1024
"""Elements of one GEMM output tile (rows x columns), at most."""

GEMM_MIN_TILE_COLUMNS = 16
"""Fewer columns per tile (an output width with no divisor from 16 to 128,
a prime 131, say) would leave a warp's weight loads uncoalesced: such a
GEMM + all_to_all lowers op by op."""

GEMM_TILE_COLUMNS = 128
"""Columns of one GEMM output tile, at most (a warp's coalesced loads of the
weights, four times over)."""


@dataclass(frozen=True)
class GemmAllToAll(AllToAllPlan[MatmulOp | BatchMatmulOp]):
    """The plan of a GEMM + all_to_all fusion (mixture of experts): a
    `coco.batch_matmul` (`sliced<0> x sliced<0>`: each rank its experts) or
    a `coco.matmul` (`sliced<0> x replicated`) whose result is `sliced<0>`,
    then `all_to_all` along a dim `t` other than 0 and the last.

    Rank `r` computes its block `L` of the result (`d0/N` groups); rank `p`
    needs `L`'s part `p` along `t`, a `[rows, M]` matrix (`rows`: its dims
    but the last), and puts it at chunk `r` of its output (dim 0 is
    outermost, so each source's part is contiguous). A *tile* is `tile_rows
    x tile_columns` of that matrix; each destination has `per_peer` of them."""

    kind = "gemm_all_to_all"

    producers = GEMM_PRODUCERS
    collective = AllToAllOp
    takes_prologue = True

    @cached_property
    def dim(self) -> int:
        """The dim `t` the all_to_all moves to."""
        return tensor_type(self.consumer.results[0]).layout.sliced_dim

    @property
    def tiled(self) -> bool:
        return self.tile_columns >= min(GEMM_MIN_TILE_COLUMNS, self.columns)

    @property
    def block(self) -> tuple[int, ...]:
        """The rank's block of the GEMM's result (`L`)."""
        dims = tensor_type(self.producer.result).dims
        return (dims[0] // self.world, *dims[1:])

    @property
    def part(self) -> tuple[int, ...]:
        """One destination's part of the block: `L` with dim `t` cut by N."""
        block = list(self.block)
        block[self.dim] //= self.world
        return tuple(block)

    @property
    def rows(self) -> int:
        """Rows of a destination's part."""
        return prod(self.part[:-1])

    @property
    def columns(self) -> int:
        """Columns of a destination's part (`M`)."""
        return self.part[-1]

    @property
    def depth(self) -> int:
        """The contraction (`K`)."""
        return tensor_type(self.producer.lhs).dims[-1]

    @property
    def grouped(self) -> bool:
        """Each group has its own weights (`coco.batch_matmul`)."""
        return isinstance(self.producer, BatchMatmulOp)

    @property
    def tile_columns(self) -> int:
        """The widest divisor of `M` up to `GEMM_TILE_COLUMNS`."""
        return widest_divisor(self.columns, GEMM_TILE_COLUMNS)

    @property
    def tile_rows(self) -> int:
        """The widest divisor of `rows` keeping a tile within
        `GEMM_TILE_ELEMENTS`."""
        return widest_divisor(self.rows, GEMM_TILE_ELEMENTS // self.tile_columns)

    @property
    def per_peer(self) -> int:
        return (self.rows // self.tile_rows) * (self.columns // self.tile_columns)

    @property
    def tile(self) -> int:
        return self.tile_rows * self.tile_columns

    def tile_element(
        self, m: Ints, t: SSAValue, e: SSAValue
    ) -> tuple[SSAValue, SSAValue]:
        """Row and column, in a destination's part, of element `e` of tile
        `t`."""
        across = self.columns // self.tile_columns
        return tile_element(m, t, e, self.tile_columns, (self.tile_rows, across))

    def record(self) -> dict[str, int | Sequence[int] | str]:
        """The tiles of a destination's `[rows, columns]` part, how a part's
        row maps to the block's (`part`, `block`, `dim`) and the weights
        (`grouped`), the exchange (`per_peer`, slots READY then TILE)."""
        return {
            **super().record(),
            "rows": self.rows,
            "columns": self.columns,
            "depth": self.depth,
            "tile_rows": self.tile_rows,
            "tile_columns": self.tile_columns,
            "per_peer": self.per_peer,
            "part": self.part,
            "block": self.block,
            "dim": self.dim,
            "grouped": int(self.grouped),
            "prologue": len(self.prologue),
        }

    def build(self, lowering: Lowering, name: str) -> gpu.FuncOp:
        """The GEMM + all_to_all kernel, its signal slots from its argument
        `slots` (READY, then TILE; docs/gpu/tile-kernels.md)."""
        plan = self
        world = plan.world
        depth, cols, chunk = plan.depth, plan.columns, plan.chunk
        element = tensor_type(plan.producer.result).element_type
        lhs_count = prod(plan.block[:-1]) * depth
        groups = plan.block[0] if plan.grouped else 1
        func, b = tile_kernel(
            lowering,
            name,
            [
                ("x", MemRefType(element, [lhs_count])),
                ("w", MemRefType(element, [groups * depth * cols])),
                ("recv", MemRefType(element, [world * chunk])),
                ("out", MemRefType(element, [world * chunk])),
            ],
        )
        rank, epoch, peers, slots, x, w, recv, out = func.body.block.args

        def value_of(
            b: Builder, peer: SSAValue, t: SSAValue, e: SSAValue
        ) -> tuple[SSAValue, SSAValue]:
            q = Ints(b)
            row, column = self.tile_element(q, t, e)
            # The row of the rank's block: the part's row with dim t moved to
            # block `peer`; its group (dim 0) picks the expert's weights.
            digits = Indexer(b, row, plan.part[:-1])
            moved = [digits.digit(d) for d in range(len(plan.part) - 1)]
            moved[plan.dim] = q.add(moved[plan.dim], q.mul(peer, plan.part[plan.dim]))
            local = linear(b, moved, plan.block[:-1])
            weights = q.mul(moved[0], depth * cols) if plan.grouped else q.c(0)
            total = dot(
                b,
                (x, q.mul(local, depth)),
                (w, q.add(weights, column), cols),
                depth,
                plan.apply_prologue if plan.prologue else None,
            )
            at = q.add(q.mul(rank, chunk), q.add(q.mul(row, cols), column))
            return from_compute(b, total, element), at

        def place(b: Builder, source: SSAValue, t: SSAValue, e: SSAValue) -> SSAValue:
            q = Ints(b)
            row, column = self.tile_element(q, t, e)
            return q.add(q.mul(source, chunk), q.add(q.mul(row, cols), column))

        plan.exchange().build(
            b, (rank, epoch, peers, slots, recv, out), value_of, place
        )
        return func


def _count(plan: EmbeddingAllToAll, value: SSAValue) -> int:
    shape = plan.lookup.shape(tensor_type(value))
    return shape[0] * shape[1] * shape[2]


PLANS: tuple[type[EmbeddingAllToAll | GemvAllReduce | GemmAllToAll], ...] = (
    EmbeddingAllToAll,
    GemvAllReduce,
    GemmAllToAll,
)
"""The tile kernels, by the plan that says whether a fusion is theirs."""


def is_tile_fusion(fusion: FusionOp, world: int) -> bool:
    """Whether a tile kernel takes `fusion` on `world` ranks (`PLANS`)."""
    return any(kind.of(fusion, world) is not None for kind in PLANS)


def takes_prologue(fusion: FusionOp, op: Operation, world: int) -> bool:
    """Whether the tile kernel of `fusion` on `world` ranks applies `op`
    to each element it loads (`is_tile_prologue`, and a plan that
    `takes_prologue` finds a tiling)."""
    return is_tile_prologue(op) and any(
        kind.takes_prologue and kind.of(fusion, world) is not None for kind in PLANS
    )


def lower_tile_collective(
    lowering: Lowering, fusion: FusionOp, rewriter: PatternRewriter
) -> bool:
    """A fusion `coco-fuse-collective` built → one tile-granular kernel
    launch. False, changing nothing, for a fusion of another shape."""
    module = module_of(fusion)
    if module is None:
        return False
    for kind in PLANS:
        plan = kind.of(fusion, lowering.world)
        if plan is not None:
            lower_tiles(lowering, plan, module, rewriter)
            return True
    return False


def lower_tiles(
    lowering: Lowering,
    plan: TilePlan,
    module: Operation,
    rewriter: PatternRewriter,
) -> None:
    """The host side of a tile kernel: its signal slots and symmetric
    buffers, the flat buffers of the block arguments it reads, the output,
    the launch. The kernel's arguments: rank, epoch, peers, its first signal
    slot, the reads, the symmetric buffers, the output: it is built once for
    every fusion of the same form (`FusedKernel`'s docstring)."""
    fusion = plan.fusion
    allocator = SymmetricAllocator.of(module)
    func = lowering.shared_kernel(
        fusion, "fused", lambda name: plan.build(lowering, name)
    )
    func.attributes[TILE_PLAN_ATTR] = DictionaryAttr(
        {key: plan_attribute(value) for key, value in plan.record().items()}
    )
    values = lowering.host(fusion)
    epoch = next_epoch()
    host: list[Operation] = [epoch]
    operands = [
        values.rank(),
        epoch.result,
        values.peers(),
        values.index(allocator.slots(plan.slots)),
    ]
    inputs = dict(zip(fusion.block.args, fusion.inputs))
    for value in plan.reads:
        ops, buffer = lowering.buffer(inputs[value])  # type: ignore[index]
        more, collapsed = values.flat(buffer)
        host.extend([*ops, *more])
        operands.append(collapsed)
    for hint, count, element in plan.symmetric:
        size = count * element_info(element).bytes
        op = SymmetricBufferOp(allocator.buffer(size), MemRefType(element, [count]))
        op.result.name_hint = hint
        host.append(op)
        operands.append(op.result)
    ops, out = lowering.result_buffer(fusion, fusion.results[0])
    more, out_flat = values.flat(out)
    host.extend([*ops, *more])
    operands.append(out_flat)
    launch = tile_launch(lowering, values, func, plan, operands)
    work = fusion_work(fusion, lowering.world)
    launch[-1].attributes[WORK_ATTR] = DenseArrayBase.from_list(i64, work)
    host += launch
    replace_with_buffers(rewriter, fusion, host, [out])


def plan_attribute(value: int | Sequence[int] | str) -> Attribute:
    """One decision of a `TilePlan.record` as an attribute."""
    if isinstance(value, str):
        return StringAttr(value)
    if isinstance(value, int):
        return IntegerAttr(value, i64)
    return DenseArrayBase.from_list(i64, list(value))


def tile_launch(
    lowering: Lowering,
    values: HostValues,
    func: gpu.FuncOp,
    plan: TilePlan,
    operands: list[SSAValue],
) -> list[Operation]:
    """The host ops launching a tile kernel of `plan.items` work items (a
    block each, capped by `coco::grid_blocks`, and with `plan.resident` by
    the kernel's occupancy: `coco::resident_blocks`)."""
    threads = lowering.threads
    one = values.index(1)
    symbol = lowering.kernels.symbol_of(func)
    host, blocks = values.launch_blocks(
        plan.items * threads, threads, symbol if plan.resident else None
    )
    launch = gpu.LaunchFuncOp.of(
        symbol,
        [blocks, one, one],
        [values.index(threads), one, one],
        operands,
    )
    launch.attributes[PEER_BYTES_ATTR] = IntegerAttr(plan.peer_bytes(), i64)
    if plan.resident:
        # Its blocks wait for each other (a GEMV tile's last K slice for the
        # others) or for the peers' kernels: a cooperative launch guarantees
        # the grid resident at once, also beside other kernels (another
        # stream's, or another rank's on a shared GPU), where an occupancy-
        # capped grid alone only fits an idle device (on an H200 with 4 ranks
        # sharing it, the test-size GEMV launched plainly hung, 2026-11-28).
        launch.attributes[COOPERATIVE_ATTR] = UnitAttr()
    return [*host, launch]
