"""xDSL's upstream `shard` dialect with the ops of MLIR 22's that it lacks.

xDSL 0.74 defines `shard.grid`, `shard.sharding` and `shard.shard` (all that
MLIR's `sharding-propagation` prints) and a few collectives, but not the
collectives and process queries that MLIR's `shard-partition` prints
(`all_gather`, `all_slice`, `all_to_all`, `reduce_scatter`, `grid_shape`,
`process_multi_index`, `process_linear_index`) nor `get_sharding`. This module
defines them with MLIR 22's syntax (mlir/Dialect/Shard/IR/ShardOps.td), on
xDSL's own attributes, and `Shard` is xDSL's dialect with them added.
`coconet-opt` and `ir.make_context` load it in place of xDSL's, so both can
read any shard program mlir-opt prints; `coco-import-shard` reads the
annotated (unpartitioned) form (docs/mlir-interop.md).

    %g = shard.all_gather %x on @grid grid_axes = [0] gather_axis = 1
        : tensor<8x4xf32> -> tensor<8x16xf32>
    %i = shard.process_multi_index on @grid axes = [0] : index
"""

from __future__ import annotations

from abc import ABC

from xdsl.dialects import shard
from xdsl.dialects.builtin import (
    FlatSymbolRefAttr,
    IndexType,
    IndexTypeConstr,
    IntegerAttr,
    TensorType,
)
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_result_def,
)
from xdsl.traits import Pure

from coconet_ir.dialects import with_added

CollectiveCommunicationOp = shard.CollectiveCommunicationOp
ReductionKind = shard.ReductionKind
ReductionKindAttr = shard.ReductionKindAttr
ShardAxesAttr = shard.ShardAxesAttr


class TensorCollectiveOp(CollectiveCommunicationOp, ABC):
    """A collective of MLIR 22's on one tensor: `%r = shard.OP %input on @grid
    (grid_axes = [...])? OPTIONS : T -> R`."""

    input = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure())


AXIS = IntegerAttr.constr(IndexTypeConstr)
"""An axis of a tensor, as the shard ops spell it (an `index` integer)."""


def option(name: str, *, optional: bool = False) -> str:
    """The declarative syntax of the property `name`: `name = VALUE`, left
    out when `optional` and absent (or its default)."""
    syntax = f"`{name}` `=` ${name}"
    return f"({syntax}^)?" if optional else syntax


def collective_format(*options: str) -> str:
    """The syntax of a `TensorCollectiveOp` whose properties print as
    `options`, after the grid and its axes."""
    return " ".join(
        [
            "$input `on` $grid",
            option("grid_axes", optional=True),
            *options,
            "attr-dict `:` type($input) `->` type($result)",
        ]
    )


@irdl_op_definition
class AllGatherOp(TensorCollectiveOp):
    """Concatenate the group's shards along `gather_axis`, on every device."""

    name = "shard.all_gather"

    gather_axis = prop_def(AXIS)

    assembly_format = collective_format(option("gather_axis"))


@irdl_op_definition
class AllSliceOp(TensorCollectiveOp):
    """Each device keeps its in-group slice along `slice_axis`; no
    communication."""

    name = "shard.all_slice"

    slice_axis = prop_def(AXIS)

    assembly_format = collective_format(option("slice_axis"))


@irdl_op_definition
class AllToAllOp(TensorCollectiveOp):
    """Split along `split_axis`, exchange, concatenate along `concat_axis`."""

    name = "shard.all_to_all"

    split_axis = prop_def(AXIS)
    concat_axis = prop_def(AXIS)

    assembly_format = collective_format(option("split_axis"), option("concat_axis"))


@irdl_op_definition
class ReduceScatterOp(TensorCollectiveOp):
    """Reduce over the group, then scatter the result along `scatter_axis`."""

    name = "shard.reduce_scatter"

    reduction = prop_def(
        ReductionKindAttr, default_value=ReductionKindAttr(ReductionKind.SUM)
    )
    scatter_axis = prop_def(AXIS)

    assembly_format = collective_format(
        option("reduction", optional=True), option("scatter_axis")
    )


@irdl_op_definition
class GetShardingOp(IRDLOperation):
    """The sharding of a tensor, as a `!shard.sharding` value."""

    name = "shard.get_sharding"

    source = operand_def(TensorType)
    result = result_def(shard.ShardingType)

    traits = traits_def(Pure())
    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"


class GridQueryOp(IRDLOperation, ABC):
    """A pure query of the grid `@grid`: its shape, or where this device is."""

    grid = prop_def(FlatSymbolRefAttr)

    traits = traits_def(Pure())


class GridAxesQueryOp(GridQueryOp, ABC):
    """A grid query with one index per axis of `axes` (all axes when none are
    given)."""

    axes = opt_prop_def(ShardAxesAttr)
    result = var_result_def(IndexType)


@irdl_op_definition
class GridShapeOp(GridAxesQueryOp):
    """The sizes of the grid's `axes` (all axes when none are given)."""

    name = "shard.grid_shape"

    assembly_format = (
        f"$grid {option('axes', optional=True)} attr-dict `:` type($result)"
    )


@irdl_op_definition
class ProcessMultiIndexOp(GridAxesQueryOp):
    """The current device's index along the grid's `axes`."""

    name = "shard.process_multi_index"

    assembly_format = (
        f"`on` $grid {option('axes', optional=True)} attr-dict `:` type($result)"
    )


@irdl_op_definition
class ProcessLinearIndexOp(GridQueryOp):
    """The current device's linear index in the grid."""

    name = "shard.process_linear_index"

    result = result_def(IndexType)

    assembly_format = "`on` $grid attr-dict `:` type($result)"


ADDED = (
    AllGatherOp,
    AllSliceOp,
    AllToAllOp,
    ReduceScatterOp,
    GetShardingOp,
    GridShapeOp,
    ProcessMultiIndexOp,
    ProcessLinearIndexOp,
)
"""The ops of MLIR 22's shard dialect that xDSL 0.74's lacks."""

Shard = with_added(shard.Shard, ADDED)
"""xDSL's `shard` dialect, with MLIR 22's collectives and process queries."""

__all__ = [
    "ADDED",
    "AllGatherOp",
    "AllSliceOp",
    "AllToAllOp",
    "GetShardingOp",
    "GridShapeOp",
    "ProcessLinearIndexOp",
    "ProcessMultiIndexOp",
    "ReduceScatterOp",
    "Shard",
]
