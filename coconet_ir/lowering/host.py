"""The values a function's host code shares, each made once, at the top of the
function (docs/gpu/device.md, "Host values").

The lowering of a model's thousands of coco ops asks, thousands of times, for
the same few values: the constants of its launches (`1`, the block size, the
element counts), this rank, the peers' table, `(rank + k) mod N`, the grid of
a launch over `n` elements, the flat view of a parameter. `HostValues` makes
each once per function, where every later op can use it: constants, the
rank's values and grid sizes at the function's entry, in the order they are
first asked for (as MLIR's canonicalizer leaves constants, named as MLIR's
printer names them: `%c4`, `%c0_i64`); the flat view of a buffer right after
the buffer's definition. A buffer not yet in the function (made by the
pattern asking, still to be inserted) gets its flat view where it is asked
for, as before.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field
from functools import cache

from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    ArrayAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    SymbolRefAttr,
    i64,
)
from xdsl.dialects.memref import CollapseShapeOp
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from coconet_ir.dialects.coco_gpu import GridBlocksOp, PeersOp, RankOp
from coconet_ir.lowering.bufferize import memref_of

index = IndexType()

__all__ = ["HostValues", "collapse"]


@dataclass
class HostValues:
    """The shared host values of the function whose body is `block`."""

    block: Block
    world: int
    values: dict[Hashable, SSAValue] = field(default_factory=dict[Hashable, SSAValue])
    last: Operation | None = None
    """The last value made at the entry (the next goes after it)."""
    indices: dict[int, SSAValue] = field(default_factory=dict[int, SSAValue])
    """The index constants by value (the most asked for: a faster key)."""
    pending: dict[SSAValue, Operation] = field(
        default_factory=dict[SSAValue, Operation]
    )
    """The flat views of buffers that were still to be inserted when asked
    for, given to insert with them."""

    def index(self, value: int) -> SSAValue:
        """`arith.constant value : index` (`%c<value>`)."""
        found = self.indices.get(value)
        if found is None:
            found = self.indices[value] = self.integer(value, index)
        return found

    def integer(self, value: int, t: IndexType | IntegerType) -> SSAValue:
        """`arith.constant value : t` (`%c<value>`, `%c<value>_i64`)."""
        key = ("constant", value, t)
        if key in self.values:
            return self.values[key]
        hint = f"c{value}" if isinstance(t, IndexType) else f"c{value}_i{t.width.data}"
        return self.at_entry(key, arith.ConstantOp(IntegerAttr(value, t)), hint)

    def rank(self) -> SSAValue:
        """`coco_gpu.rank` (`%rank`)."""
        if "rank" in self.values:
            return self.values["rank"]
        return self.at_entry("rank", RankOp(), "rank")

    def peers(self) -> SSAValue:
        """`coco_gpu.peers` (`%peers`)."""
        if "peers" in self.values:
            return self.values["peers"]
        return self.at_entry("peers", PeersOp(), "peers")

    def rank_plus(self, k: int) -> SSAValue:
        """`(rank + k) mod N` (`%rank_plus<k>`; the rank itself for k = 0)."""
        k %= self.world
        if not k:
            return self.rank()
        key = ("rank_plus", k)
        if key in self.values:
            return self.values[key]
        total = arith.AddiOp(self.rank(), self.index(k))
        self.at_entry(("rank_plus_unwrapped", k), total, f"rank_plus{k}_unwrapped")
        return self.at_entry(
            key, arith.RemUIOp(total, self.index(self.world)), f"rank_plus{k}"
        )

    def times(self, value: SSAValue, size: int, hint: str) -> SSAValue:
        """`value * size` for `value` one of these values (the start of
        block `value` of `size` elements: `times(rank(), size, ...)`)."""
        key = ("times", value, size)
        if key in self.values:
            return self.values[key]
        assert value in self.values.values(), "not a shared host value"
        return self.at_entry(key, arith.MuliOp(value, self.index(size)), hint)

    def grid_blocks(self, count: int, threads: int) -> SSAValue:
        """`coco_gpu.grid_blocks %c<count>, %c<threads>` (`%blocks`)."""
        key = ("grid_blocks", count, threads)
        if key in self.values:
            return self.values[key]
        op = GridBlocksOp(self.index(count), self.index(threads))
        return self.at_entry(key, op, "blocks")

    def launch_blocks(
        self, count: int, threads: int, resident: SymbolRefAttr | None = None
    ) -> tuple[list[Operation], SSAValue]:
        """The grid of a launch over `count` items, `threads` a block:
        `grid_blocks` (shared, at the entry), or for a kernel whose blocks
        wait for each other (`resident`: the kernel) a `coco_gpu.grid_blocks
        ... resident` of its own, returned to insert before its launch."""
        if resident is None:
            return [], self.grid_blocks(count, threads)
        op = GridBlocksOp(self.index(count), self.index(threads), resident)
        op.result.name_hint = "blocks"
        return [op], op.result

    def flat(self, buffer: SSAValue) -> tuple[list[Operation], SSAValue]:
        """`buffer` as the flat 1-D buffer kernels take: the buffer itself
        (rank 0 or 1), its one view (a function argument: at the entry; a
        buffer the function made: right after it), or — a buffer still to be
        inserted — a view to insert with it (the ops returned)."""
        key = ("flat", buffer)
        if key in self.values:
            return [], self.values[key]
        pending = self.pending.get(buffer)
        if pending is not None and pending.parent_block() is self.block:
            # Inserted with the buffer, before the op that asked for it: the
            # ops lowered after that one are after it.
            self.values[key] = pending.results[0]
            return [], pending.results[0]
        op = collapse(buffer)
        if op is None:
            return [], buffer
        if isinstance(buffer, BlockArgument) and buffer.block is self.block:
            return [], self.at_entry(key, op, op.results[0].name_hint)
        owner = buffer.owner
        if isinstance(owner, Operation) and owner.parent_block() is self.block:
            self.block.insert_op_after(op, owner)
            self.values[key] = op.results[0]
            return [], op.results[0]
        self.pending[buffer] = op
        return [op], op.results[0]

    def at_entry(self, key: Hashable, op: Operation, hint: str | None) -> SSAValue:
        """Insert `op` (one result) after the entry's other values and keep
        its result as `key`'s."""
        if self.last is None:
            self.block.insert_op_before(op, self.block.first_op)  # type: ignore[arg-type]
        else:
            self.block.insert_op_after(op, self.last)
        self.last = op
        op.results[0].name_hint = hint
        self.values[key] = op.results[0]
        return op.results[0]

    def drop_unused(self) -> None:
        """Erase the values nothing came to use (latest first, so that a
        value only they used goes too)."""
        made = [v.owner for v in self.values.values() if isinstance(v.owner, Operation)]
        for op in reversed(made):
            if op.parent is not None and not any(r.uses for r in op.results):
                op.detach()
                op.erase()


def collapse(buffer: SSAValue) -> CollapseShapeOp | None:
    """`memref.collapse_shape` of a buffer of rank >= 2 into one dimension
    (`%<buffer>_flat`), or None for a buffer of rank 0 or 1 (kernels take it
    as it is)."""
    t = buffer.type
    assert isinstance(t, MemRefType)
    shape = t.get_shape()
    if len(shape) <= 1:
        return None
    op = CollapseShapeOp.create(
        operands=[buffer],
        result_types=[memref_of(t.element_type, (math.prod(shape),))],
        properties={"reassociation": all_dims(len(shape))},
    )
    op.results[0].name_hint = f"{buffer.name_hint}_flat" if buffer.name_hint else "flat"
    return op


@cache
def all_dims(rank: int) -> ArrayAttr:
    """The reassociation `[[0, 1, ..., rank - 1]]` (one group of every dim)."""
    return ArrayAttr([ArrayAttr([IntegerAttr(d, i64) for d in range(rank)])])
