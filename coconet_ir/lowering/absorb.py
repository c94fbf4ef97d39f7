"""Before a `coco.fusion` becomes one kernel, it takes in the elementwise ops
that only feed it (docs/gpu/device.md, "Kernels").

After `coco-optimize`, the scalar bookkeeping of an optimizer (`1 - beta1`,
`beta1 * m`, the constants) is computed outside the fusion that uses it; each
such op would be a kernel launch of its own, for a handful of elements. A
producer whose only user is the fusion is moved into the fusion's body (its
own operands become inputs of the fusion), repeatedly, so that the fused
Adam step is one launch. Every op moved is elementwise, so the body computes
the same values; a dropout keeps its type, hence its global indices.

A fusion a tile kernel takes (`tile_collectives`) keeps its form: it takes in
only what its kernel applies to each element it loads of its first read (a
GEMM's prologue: `takes_prologue`), with a remark for what it takes and for
what stays a kernel of its own (docs/fused-operators.md).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from xdsl.ir import Operation, SSAValue

from coconet_ir.diagnostics import RemarkKind, remark
from coconet_ir.dialects import coco
from coconet_ir.dialects.coco import ELEMENTWISE_OPS
from coconet_ir.lowering.state import CONVERSION

ABSORBABLE = (*ELEMENTWISE_OPS, coco.ConstantOp)


def absorbable(fusion: coco.FusionOp, value: SSAValue) -> Operation | None:
    """The producer of the fusion input `value` if it can move into the body:
    elementwise (or a constant), in the fusion's block, with one result used
    exactly once, by the fusion."""
    producer = value.owner
    if not isinstance(producer, ABSORBABLE) or producer.parent is not fusion.parent:
        return None
    if len(producer.results) != 1 or value.uses.get_length() != 1:
        return None
    return producer


def absorb_once(
    fusion: coco.FusionOp,
    takes: Callable[[Operation], bool] = lambda _: True,
) -> bool:
    """Move one absorbable producer that `takes` accepts into the body;
    whether one was found."""
    block = fusion.body.block
    inputs = list(fusion.inputs)
    for index, value in enumerate(inputs):
        producer = absorbable(fusion, value)
        if producer is None or not takes(producer):
            continue
        operands: list[SSAValue] = []
        for operand in producer.operands:
            if operand in inputs:
                operands.append(block.args[inputs.index(operand)])
                continue
            inputs.append(operand)
            argument = block.insert_arg(operand.type, len(block.args))
            argument.name_hint = operand.name_hint
            operands.append(argument)
        moved = producer.clone()
        for position, operand in enumerate(operands):
            moved.operands[position] = operand
        block.insert_op_before(moved, block.ops.first)  # type: ignore[arg-type]
        argument = block.args[index]
        argument.replace_all_uses_with(moved.results[0])
        del inputs[index]
        fusion.operands = inputs
        block.erase_arg(argument)
        producer.detach()
        producer.erase()
        return True
    return False


def absorb_producers(
    root: Operation,
    keep: Callable[[coco.FusionOp], bool] = lambda _: False,
    prologue: Callable[[coco.FusionOp, Operation], bool] = lambda _, __: False,
) -> None:
    """Absorb into every `coco.fusion` under `root` the producers only it
    uses. Into those `keep` says must keep their form (a fusion a tile
    kernel takes: its plan reads its inputs as they are), only the producers
    `prologue` accepts (ops the tile kernel applies to what it loads), with
    a passed remark; a missed one for the others."""
    for fusion in [op for op in root.walk() if isinstance(op, coco.FusionOp)]:
        if not keep(fusion):
            while absorb_once(fusion):
                pass
            continue
        while True:
            taken = [p for p in map(partial(absorbable, fusion), fusion.inputs) if p]
            taken = [p for p in taken if prologue(fusion, p)]
            if not taken:
                break
            remark(
                RemarkKind.PASSED,
                CONVERSION,
                "Prologue",
                f"'{taken[0].name}' is applied by the tile kernel to each element "
                "it loads",
                taken[0],
            )
            absorb_once(fusion, lambda p: p is taken[0])
        for value in fusion.inputs:
            producer = absorbable(fusion, value) or elementwise_region(fusion, value)
            if producer is not None:
                remark(
                    RemarkKind.MISSED,
                    CONVERSION,
                    "Prologue",
                    f"'{producer.name}' runs as a kernel of its own before the "
                    "tile kernel that reads its result: a tile kernel applies "
                    "single elementwise ops of one operand, of their result's "
                    "type, to its first operand (docs/fused-operators.md)",
                    producer,
                )


def elementwise_region(fusion: coco.FusionOp, value: SSAValue) -> Operation | None:
    """The `coco.fusion` (coco-fuse's elementwise region) producing the
    fusion input `value` for it alone, if it is one."""
    producer = value.owner
    if isinstance(producer, coco.FusionOp) and value.uses.get_length() == 1:
        return producer if producer.parent is fusion.parent else None
    return None
