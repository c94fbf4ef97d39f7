"""Static prediction of the bytes a fused collective kernel moves between ranks
(docs/gpu/fused.md, "The fused all-reduce kernel"), to compare with what the
emulator measures.

Per launch, rank `r` stores into each other rank `p`:

- phase 1: its contribution to `p`'s slice of every reduce_scatter'd input
  (`prod(G) / N` elements of the input's type);
- phase 2: its slice of every all_gather'd value (`prod(G) / N` elements of
  the gathered type).

So a fused all-reduce (one reduce_scatter and one all_gather of the same
element type, `S` bytes globally) moves `2 (N-1)/N · S` bytes per rank, NCCL's
ring all-reduce's count. A fused reduce_scatter + compute + send moves
`(N-1)/N · S` inside the kernel and then sends the slice, `S / N` bytes, across
the stage boundary (`ncclSend`, after the kernel).
"""

from __future__ import annotations

from coconet_ir.analysis.costs import bytes_sent
from coconet_ir.analysis.fused_plan import FusedPlan
from coconet_ir.dialects.coco import FusionOp


def _plan(fusion: FusionOp, world: int) -> FusedPlan:
    plan = FusedPlan.of(fusion, world)
    if isinstance(plan, str):
        raise ValueError(f"not a fused collective: {plan}")
    return plan


def fused_peer_bytes(fusion: FusionOp, world: int) -> dict[tuple[int, int], int]:
    """Bytes rank `r` stores into rank `p` per launch of the fused kernel, for
    every ordered pair `(r, p)` of distinct ranks."""
    per_peer = _plan(fusion, world).peer_bytes()
    return {(r, p): per_peer for r in range(world) for p in range(world) if r != p}


def fused_all_reduce_bytes(fusion: FusionOp, world: int) -> int:
    """Bytes one rank stores into its peers per launch of the fused kernel
    (all peers together): `(N-1) ·` its per-peer bytes."""
    return (world - 1) * _plan(fusion, world).peer_bytes()


def fused_send_bytes(fusion: FusionOp, world: int) -> int:
    """Bytes one rank sends across the stage boundary after the kernel (its
    block of every sent slice, every sent gathered value whole)."""
    return sum(bytes_sent(op, world) for op in _plan(fusion, world).sends)
