"""Which coco regions `convert-coco-to-gpu` lowers as one kernel: the
tile-granular kernels of docs/gpu/tile-kernels.md (`tile_kernel_problem`, which
coco-fuse-collective's `where_it_pays` rule and the lowering's plans check),
the fused collective kernel of docs/gpu/fused.md (`FusedPlan`), an elementwise
chain. The cost model prices a `coco.fusion` by it (`one_kernel`), and an op
the GEMM + all_to_all tile kernel applies as it loads (`is_tile_prologue`)."""

from __future__ import annotations

from math import prod

from xdsl.ir import Operation, SSAValue

from coconet_ir.analysis.fused_plan import FusedPlan
from coconet_ir.dialects.coco import (
    AllReduceOp,
    AllToAllOp,
    BatchMatmulOp,
    CollectiveOp,
    DropoutOp,
    ElementwiseUnaryOp,
    EmbeddingOp,
    FusionOp,
    LayoutAttr,
    MatmulOp,
    ReduceScatterOp,
    YieldOp,
    is_float,
    tensor_type,
)

PRODUCERS = (EmbeddingOp, MatmulOp, BatchMatmulOp)
"""The ops coco-fuse-collective fuses with the collective consuming them."""
COLLECTIVES = (AllToAllOp, AllReduceOp, ReduceScatterOp)
"""The collectives coco-fuse-collective fuses with their producer (the
pairs `tile_kernel_problem` accepts are some of these)."""

GEMM_PRODUCERS = (MatmulOp, BatchMatmulOp)
"""The producers of the GEMM + all_to_all tile kernel, the one that takes a
prologue."""

GEMV_ROWS = 16
"""A matmul with at most this many rows (the product of its result's dims
but the last) is a GEMV: decode-time batch sizes."""


def rows(matmul: MatmulOp | BatchMatmulOp) -> int:
    """The rows of the matmul's result (every dim but the last)."""
    return prod(tensor_type(matmul.result).dims[:-1])


def tile_kernel_problem(op: Operation, collective: Operation) -> str | None:
    """Why `convert-coco-to-gpu` has no tile-granular kernel for `op` and
    the collective consuming it, or None when it has one: the paper's three
    operators in the layouts their kernels take (docs/gpu/tile-kernels.md). The
    lowering's plans check this, then what depends on the world size."""
    result = tensor_type(op.results[0])
    moved = tensor_type(collective.results[0])
    if isinstance(op, EmbeddingOp):
        if (
            isinstance(collective, AllToAllOp)
            and tensor_type(op.tables).layout == LayoutAttr.sliced(0)
            and result.layout == LayoutAttr.sliced(0)
            and moved.layout == LayoutAttr.sliced(1)
        ):
            return None
        return (
            "an embedding has a tile kernel for sliced<0> tables and its "
            "all_to_all to dim 1 only"
        )
    if not is_float(result.element_type):
        return f"an integer {op.name} has no tile kernel"
    if isinstance(collective, AllToAllOp):
        if result.layout == LayoutAttr.sliced(0) and 0 < moved.layout.sliced_dim < (
            result.rank - 1
        ):
            return None
        return (
            "a GEMM + all_to_all has a tile kernel for a sliced<0> result moved "
            "to a dim other than 0 and the last"
        )
    if isinstance(op, MatmulOp) and rows(op) > GEMV_ROWS:
        return (
            f"a matmul of {rows(op)} rows is no GEMV (at most {GEMV_ROWS}): "
            "coco-overlap overlaps it with its collective"
        )
    if (
        isinstance(op, MatmulOp)
        and isinstance(collective, AllReduceOp)
        and collective.reduction.data == "sum"
    ):
        lhs, rhs = tensor_type(op.lhs), tensor_type(op.rhs)
        if lhs.layout == LayoutAttr.sliced(
            lhs.rank - 1
        ) and rhs.layout == LayoutAttr.sliced(0):
            return None
        return "a GEMV + all_reduce has a tile kernel for a row-parallel matmul"
    return f"a {op.name} and its {collective.name} have no tile kernel"


def one_kernel(fusion: FusionOp, world: int) -> bool:
    """Whether the lowering runs `fusion` as one kernel on `world` ranks: an
    elementwise region always; with reduce_scatters, when the fused
    collective kernel plans it; with another collective, when a tile kernel
    takes its producer and it. Otherwise the body is lowered op by op."""
    body = list(fusion.block.ops)
    collectives = [op for op in body if isinstance(op, CollectiveOp)]
    if not collectives:
        return True
    if any(isinstance(op, ReduceScatterOp) for op in collectives):
        return isinstance(FusedPlan.of(fusion, world), FusedPlan)
    for collective in collectives:
        producer = collective.operands[0].owner
        if not isinstance(producer, Operation) or producer not in body:
            return False
        if tile_kernel_problem(producer, collective) is not None:
            return False
    return True


def is_prologue_op(op: Operation) -> bool:
    """An op a tile kernel can apply to each element it loads of its
    producer's first operand: elementwise on one operand, of the same type
    as its result (no dropout: it needs the element's global index)."""
    return (
        isinstance(op, ElementwiseUnaryOp)
        and not isinstance(op, DropoutOp)
        and op.operands[0].type == op.results[0].type
    )


def tiled_pair(
    fusion: FusionOp,
    producers: type[Operation] | tuple[type[Operation], ...],
    collective: type[Operation],
    prologue: bool = False,
) -> tuple[tuple[Operation, ...], Operation, Operation] | None:
    """The fusion's ops if its body is one of `producers` of block arguments,
    then `collective` of its result, yielded, and the pair has a tile kernel
    (`tile_kernel_problem`); else None. With `prologue`, the producer's first
    operand may instead come from a chain of `is_prologue_op`s starting at a
    block argument, each used only by the next (the prologue, returned
    first)."""
    ops = list(fusion.block.ops)
    if len(ops) < 3:
        return None
    *before, first, second, end = ops
    chain = tuple(before)
    if chain and not prologue:
        return None
    if not isinstance(first, producers):
        return None
    source = first.operands[0]
    for op in reversed(chain):
        if not (
            is_prologue_op(op) and source is op.results[0] and source.has_one_use()
        ):
            return None
        source = op.operands[0]
    if not (
        isinstance(first, producers)
        and isinstance(second, collective)
        and isinstance(end, YieldOp)
        and second.operands[0] is first.results[0]
        and list(end.arguments) == [second.results[0]]
        and source.owner is fusion.block
        and all(v.owner is fusion.block for v in first.operands[1:])
        and tile_kernel_problem(first, second) is None
    ):
        return None
    return chain, first, second


def prologue_source(fusion: FusionOp) -> SSAValue | None:
    """The block argument of a GEMM + all_to_all fusion a tile kernel takes
    (`tiled_pair`) that its prologue, else its GEMM, reads first, if that is
    its only use: where a prologue op taken in would go."""
    found = tiled_pair(fusion, GEMM_PRODUCERS, AllToAllOp, prologue=True)
    if found is None:
        return None
    chain, producer, _ = found
    source = (chain[0] if chain else producer).operands[0]
    return source if source.has_one_use() else None


def is_tile_prologue(op: Operation) -> bool:
    """Whether the lowering applies `op` inside the tile kernel of the one
    fusion using it (docs/fused-operators.md): an `is_prologue_op` whose
    result is only that fusion's `prologue_source`. (The lowering takes a
    chain of such ops, one at a time; before it, only the last is the
    fusion's input.)"""
    if not is_prologue_op(op) or not op.results[0].has_one_use():
        return False
    use = next(iter(op.results[0].uses))
    fusion = use.operation
    if not isinstance(fusion, FusionOp):
        return False
    return prologue_source(fusion) is fusion.block.args[use.index]
