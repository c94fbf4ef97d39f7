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

from xdsl.dialects import shard
from xdsl.dialects.builtin import (
    FlatSymbolRefAttr,
    IndexType,
    IndexTypeConstr,
    IntegerAttr,
    TensorType,
)
from xdsl.ir import Dialect
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

CollectiveCommunicationOp = shard.CollectiveCommunicationOp
ReductionKind = shard.ReductionKind
ReductionKindAttr = shard.ReductionKindAttr
ShardAxesAttr = shard.ShardAxesAttr


@irdl_op_definition
class AllGatherOp(CollectiveCommunicationOp):
    """Concatenate the group's shards along `gather_axis`, on every device."""

    name = "shard.all_gather"

    input = operand_def(TensorType)
    gather_axis = prop_def(IntegerAttr.constr(IndexTypeConstr))
    result = result_def(TensorType)

    traits = traits_def(Pure())
    assembly_format = (
        "$input `on` $grid (`grid_axes` `=` $grid_axes^)? "
        "`gather_axis` `=` $gather_axis attr-dict `:` type($input) `->` type($result)"
    )


@irdl_op_definition
class AllSliceOp(CollectiveCommunicationOp):
    """Each device keeps its in-group slice along `slice_axis`; no
    communication."""

    name = "shard.all_slice"

    input = operand_def(TensorType)
    slice_axis = prop_def(IntegerAttr.constr(IndexTypeConstr))
    result = result_def(TensorType)

    traits = traits_def(Pure())
    assembly_format = (
        "$input `on` $grid (`grid_axes` `=` $grid_axes^)? "
        "`slice_axis` `=` $slice_axis attr-dict `:` type($input) `->` type($result)"
    )


@irdl_op_definition
class AllToAllOp(CollectiveCommunicationOp):
    """Split along `split_axis`, exchange, concatenate along `concat_axis`."""

    name = "shard.all_to_all"

    input = operand_def(TensorType)
    split_axis = prop_def(IntegerAttr.constr(IndexTypeConstr))
    concat_axis = prop_def(IntegerAttr.constr(IndexTypeConstr))
    result = result_def(TensorType)

    traits = traits_def(Pure())
    assembly_format = (
        "$input `on` $grid (`grid_axes` `=` $grid_axes^)? "
        "`split_axis` `=` $split_axis `concat_axis` `=` $concat_axis "
        "attr-dict `:` type($input) `->` type($result)"
    )


@irdl_op_definition
class ReduceScatterOp(CollectiveCommunicationOp):
    """Reduce over the group, then scatter the result along `scatter_axis`."""

    name = "shard.reduce_scatter"

    input = operand_def(TensorType)
    reduction = prop_def(
        ReductionKindAttr, default_value=ReductionKindAttr(ReductionKind.SUM)
    )
    scatter_axis = prop_def(IntegerAttr.constr(IndexTypeConstr))
    result = result_def(TensorType)

    traits = traits_def(Pure())
    assembly_format = (
        "$input `on` $grid (`grid_axes` `=` $grid_axes^)? "
        "(`reduction` `=` $reduction^)? `scatter_axis` `=` $scatter_axis "
        "attr-dict `:` type($input) `->` type($result)"
    )


@irdl_op_definition
class GetShardingOp(IRDLOperation):
    """The sharding of a tensor, as a `!shard.sharding` value."""

    name = "shard.get_sharding"

    source = operand_def(TensorType)
    result = result_def(shard.ShardingType)

    traits = traits_def(Pure())
    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"


@irdl_op_definition
class GridShapeOp(IRDLOperation):
    """The sizes of the grid's `axes` (all axes when none are given)."""

    name = "shard.grid_shape"

    grid = prop_def(FlatSymbolRefAttr)
    axes = opt_prop_def(ShardAxesAttr)
    result = var_result_def(IndexType)

    traits = traits_def(Pure())
    assembly_format = "$grid (`axes` `=` $axes^)? attr-dict `:` type($result)"


@irdl_op_definition
class ProcessMultiIndexOp(IRDLOperation):
    """The current device's index along the grid's `axes`."""

    name = "shard.process_multi_index"

    grid = prop_def(FlatSymbolRefAttr)
    axes = opt_prop_def(ShardAxesAttr)
    result = var_result_def(IndexType)

    traits = traits_def(Pure())
    assembly_format = "`on` $grid (`axes` `=` $axes^)? attr-dict `:` type($result)"


@irdl_op_definition
class ProcessLinearIndexOp(IRDLOperation):
    """The current device's linear index in the grid."""

    name = "shard.process_linear_index"

    grid = prop_def(FlatSymbolRefAttr)
    result = result_def(IndexType)

    traits = traits_def(Pure())
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

Shard = Dialect(
    "shard",
    [*shard.Shard.operations, *ADDED],
    list(shard.Shard.attributes),
)
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
