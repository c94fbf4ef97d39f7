"""coco-split-all-reduce: `all_reduce` → `reduce_scatter` + `all_gather`.

CoCoNet's split: an all-reduce is a reduce-scatter (each rank gets its block of
the reduction) followed by an all-gather of the blocks. The two halves can then
be moved apart, so that compute between them runs on slices (`coco-reorder`).

Preconditions: the operand is `local` (a `replicated` operand has no
reduce-scatter) and of rank >= 1, and the all_reduce is not inside a
`coco.fusion` (a fused region's collective belongs to its kernel: a GEMV's
all_reduce that `coco-fuse-collective` fused is computed tile by tile). The
scatter dimension is the option `dim`; without it, the first dimension the world
size divides. The world size is the option `world`, else the module's
`coco.world_size`, else unknown: then the chosen dimension must be divisible by
every world size up to `ASSUMED_WORLD` (8), so that the split program runs
wherever the original ran on up to 8 ranks; an all_reduce with no such dimension
is left alone. A named all_reduce `NAME` gives `NAME_rs` and `NAME_ag`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from coconet_ir.dialects.coco import (
    AllGatherOp,
    AllReduceOp,
    FusionOp,
    ReduceScatterOp,
    TensorType,
    label_of,
    tensor_type,
    world_size,
)
from coconet_ir.passes.base import AllReducePass, rewrite_once

ASSUMED_WORLD = 8
"""Without a known world size, a split must work on up to this many ranks."""


def scatter_dim(
    tensor: TensorType, requested: int | None, world: int | None
) -> int | str:
    """The dimension to scatter along, or the reason there is none."""
    if tensor.rank == 0:
        return "a rank-0 tensor cannot be scattered"
    if requested is not None:
        if not 0 <= requested < tensor.rank:
            return f"dim {requested} is out of range for rank {tensor.rank}"
        if world is not None and tensor.dims[requested] % world:
            return (
                f"dimension {requested} (size {tensor.dims[requested]}) is not "
                f"divisible by the world size {world}"
            )
        return requested
    if world is None:
        for d, size in enumerate(tensor.dims):
            if size % ASSUMED_WORLD == 0:
                return d
        return (
            f"no dimension of {tensor} is divisible by every world size up to "
            f"{ASSUMED_WORLD}; give the world size (option world=N or the "
            "module's coco.world_size) or the option dim"
        )
    for d, size in enumerate(tensor.dims):
        if size % world == 0:
            return d
    return f"no dimension of {tensor} is divisible by the world size {world}"


def split_dim(op: AllReduceOp, requested: int | None, world: int | None) -> int | str:
    """The dim to split `op` along, or why it cannot be split. The world size
    is `world`, else the module's."""
    region = op.parent_op()
    if isinstance(region, FusionOp):
        return (
            f"it is inside the coco.fusion '{label_of(region) or 'unnamed'}': a "
            "fused region's collective is computed with its producer, not split"
        )
    tensor = tensor_type(op.operand)
    if not tensor.layout.is_local:
        return f"the operand must be local to reduce-scatter, got {tensor.layout}"
    return scatter_dim(
        tensor, requested, world if world is not None else world_size(op)
    )


@dataclass(frozen=True)
class SplitAllReducePattern(RewritePattern):
    """all_reduce → reduce_scatter + all_gather, for every all_reduce that can
    be split (labelled `label`, if given)."""

    dim: int | None = None
    world: int | None = None
    label: str | None = None

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: AllReduceOp, rewriter: PatternRewriter) -> None:
        if self.label is not None and label_of(op) != self.label:
            return
        dim = split_dim(op, self.dim, self.world)
        if isinstance(dim, str):
            return
        label = label_of(op)
        scatter = ReduceScatterOp(
            op.operand,
            op.reduction.data,
            dim,
            label=None if label is None else f"{label}_rs",
        )
        gather = AllGatherOp(scatter, label=None if label is None else f"{label}_ag")
        rewriter.replace(op, [scatter, gather])


@dataclass(frozen=True)
class SplitAllReduce(AllReducePass):
    """Split every (or the named) all_reduce into reduce_scatter + all_gather."""

    name = "coco-split-all-reduce"

    dim: int | None = None
    """The scatter dimension; by default the first one the world size divides."""

    world: int | None = None
    """The world size the program will run on (default: `coco.world_size`)."""

    def check_options(self) -> None:
        self.require_at_least("dim", 0)
        self.require_at_least("world", 1)

    def problem(self, op: Operation) -> str | None:
        assert isinstance(op, AllReduceOp)
        dim = split_dim(op, self.dim, self.world)
        return dim if isinstance(dim, str) else None

    def rewrite(self, module: ModuleOp) -> None:
        rewrite_once(module, SplitAllReducePattern(self.dim, self.world, self.op))
