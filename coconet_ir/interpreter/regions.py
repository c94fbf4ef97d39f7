"""The meaning of the regions transformations create (docs/dialect.md,
"Regions created by transformations").

`coco.fusion` runs its body once: fusing changes how the lowering schedules the
work, never the values. `coco.overlap` runs its body literally chunk by chunk —
chunk `c` of every chunked input, the whole of the others — and concatenates
the chunks each output yields, so the chunk arithmetic of an overlapped schedule
is checked by the same oracle as everything else.

While chunk `c` runs, the stage context holds a `ChunkFrame` (which dim of each
body value is cut, by `coconet_ir.analysis.chunks`), so that a dropout in the
body draws its mask at the element's index in the un-chunked tensor
(docs/dialect.md, "Regions created by transformations").
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    ReturnedValues,
    TerminatorValue,
    impl,
    impl_terminator,
    register_impls,
)
from xdsl.ir import SSAValue

from coconet_ir.analysis.chunks import ChunkConflict, chunk_dims, step_of
from coconet_ir.diagnostics import CocoError
from coconet_ir.dialects import coco
from coconet_ir.dialects.coco import TensorType, chunk_type
from coconet_ir.interpreter.context import ChunkFrame, stage_context
from coconet_ir.interpreter.ops import RANK_REDUCTIONS, combine_ranks
from coconet_ir.interpreter.values import DistValue, compute_dtype, storage_dtype


def chunk_of(value: DistValue, dim: int, chunks: int, c: int) -> DistValue:
    """Chunk `c` of `chunks` along global dim `dim` (-1: the whole value).

    The chunk dim is never the sliced dim, so every rank's array is cut the same
    way (axis `dim + 1`: axis 0 of the data is the rank)."""
    if dim < 0:
        return value
    pieces = np.split(value.data, chunks, axis=dim + 1)
    return value.with_data(chunk_type(value.type, dim, chunks), pieces[c])


def concatenate(
    result_type: TensorType, chunks: list[DistValue], dim: int
) -> DistValue:
    """The output whose chunks along `dim` are `chunks`, in order (they share a
    layout, so their data stack the same way)."""
    data = np.concatenate([c.data for c in chunks], axis=dim + 1)
    return chunks[0].with_data(result_type, data)


def peer_chunk(
    op: coco.PerPeerOp, index: int, value: DistValue, step_type: TensorType, c: int
) -> DistValue:
    """Chunk `c` of input `index` of a per-peer region: rank `c`'s block of a
    gathered input (what `coco.shift` brings each rank at its step), chunk `c`
    along the chunk dim of the others, or the whole input."""
    if op.gathered(index):
        return value.with_data(step_type, value.data[c][np.newaxis])
    return chunk_of(value, op.input_dims.get_values()[index], value.world, c)


def sum_chunks(result_type: TensorType, chunks: list[DistValue]) -> DistValue:
    """The sum of whole-shaped partial results, added in the compute type and
    rounded once (as a matmul over the whole contracted dim rounds)."""
    compute = compute_dtype(result_type.element_type)
    total = np.sum([c.data.astype(compute) for c in chunks], axis=0)
    stored = total.astype(storage_dtype(result_type.element_type))
    return chunks[0].with_data(result_type, stored)


def run_chunks(
    interpreter: Interpreter,
    region: coco.OverlapOp | coco.PerPeerOp,
    chunks: int,
    dims: dict[SSAValue, int],
    args_of: Callable[[int], PythonValues],
) -> list[PythonValues]:
    """What `region`'s body yields for each chunk `c` of `chunks`, run on
    `args_of(c)` while the stage context holds the chunk's frame (a dropout
    keeps its global index)."""
    frames = stage_context(interpreter).chunk_frames
    per_chunk: list[PythonValues] = []
    for c in range(chunks):
        frames.append(ChunkFrame(chunks, c, dims))
        try:
            per_chunk.append(
                interpreter.run_ssacfg_region(region.body, args_of(c), region.name)
            )
        finally:
            frames.pop()
    return per_chunk


@register_impls
class RegionFunctions(InterpreterFunctions):
    """Rules for `coco.fusion`, `coco.overlap` and `coco.yield`."""

    @impl(coco.FusionOp)
    def run_fusion(
        self, interpreter: Interpreter, op: coco.FusionOp, args: PythonValues
    ) -> PythonValues:
        return interpreter.run_ssacfg_region(op.body, args, "coco.fusion")

    @impl(coco.OverlapOp)
    def run_overlap(
        self, interpreter: Interpreter, op: coco.OverlapOp, args: PythonValues
    ) -> PythonValues:
        chunks = op.chunk_count
        input_dims = op.input_dims.get_values()
        dims = chunk_dims(op.block, input_dims).dims

        def args_of(c: int) -> PythonValues:
            return tuple(
                chunk_of(value, dim, chunks, c)
                for value, dim in zip(args, input_dims, strict=True)
            )

        per_chunk = run_chunks(interpreter, op, chunks, dims, args_of)
        return tuple(
            concatenate(
                result.type,  # pyright: ignore[reportArgumentType]
                [chunk[i] for chunk in per_chunk],
                dim,
            )
            for i, (result, dim) in enumerate(
                zip(op.outputs, op.output_dims.get_values(), strict=True)
            )
        )

    @impl(coco.PerPeerOp)
    def run_per_peer(
        self, interpreter: Interpreter, op: coco.PerPeerOp, args: PythonValues
    ) -> PythonValues:
        world = stage_context(interpreter).world
        try:
            step, found = step_of(op, world)
        except ChunkConflict as err:
            raise CocoError(f"cannot run per peer: {err}", op) from None

        def args_of(c: int) -> PythonValues:
            return tuple(
                peer_chunk(op, i, value, arg.type, c)  # pyright: ignore[reportArgumentType]
                for i, (value, arg) in enumerate(
                    zip(args, step.block.args, strict=True)
                )
            )

        per_chunk = run_chunks(interpreter, step, world, found.dims, args_of)
        outputs: list[DistValue] = []
        for j, (result, dim) in enumerate(
            zip(op.outputs, op.output_dims.get_values(), strict=True)
        ):
            chunks = [chunk[j] for chunk in per_chunk]
            if dim == -1:
                # partial products over the gathered contracted dim: their sum
                outputs.append(sum_chunks(result.type, chunks))  # pyright: ignore[reportArgumentType]
            elif op.scattered(j):
                # chunk c's partials, summed over the ranks, are rank c's block
                total = np.stack(
                    [combine_ranks(part, RANK_REDUCTIONS["sum"])[0] for part in chunks]
                )
                outputs.append(chunks[0].with_data(result.type, total))  # pyright: ignore[reportArgumentType]
            else:
                outputs.append(concatenate(result.type, chunks, dim))  # pyright: ignore[reportArgumentType]
        return tuple(outputs)

    @impl_terminator(coco.YieldOp)
    def run_yield(
        self, interpreter: Interpreter, op: coco.YieldOp, args: PythonValues
    ) -> tuple[TerminatorValue, PythonValues]:
        return ReturnedValues(args), ()
