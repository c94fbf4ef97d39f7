"""`predict`: the cost model's entry point for a whole module, at whichever
level it is (docs/performance.md)."""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp

from coconet_ir.costmodel.machines import Machine
from coconet_ir.costmodel.tensor import predict_function
from coconet_ir.costmodel.timeline import Prediction
from coconet_ir.diagnostics import CocoError
from coconet_ir.dialects.coco import world_size


def is_device_level(module: ModuleOp) -> bool:
    """Whether `module` has been lowered (`convert-coco-to-gpu`)."""
    return "gpu.container_module" in module.attributes


def predict(
    module: ModuleOp, machine: Machine, world: int | None = None
) -> dict[str, Prediction]:
    """The predicted time of one call of every function of `module` on
    `world` ranks of `machine` (default: the module's `coco.world_size`, else
    all of the machine's GPUs), by function name."""
    world = world or world_size(module) or machine.gpus
    if world > machine.gpus:
        raise CocoError(
            f"the program runs on {world} ranks; machine '{machine.name}' has "
            f"{machine.gpus} GPUs"
        )
    if is_device_level(module):
        from coconet_ir.costmodel.device import predict_device_function

        return {
            op.sym_name.data: predict_device_function(op, world, machine)
            for op in module.ops
            if isinstance(op, FuncOp) and op.body.blocks
        }
    return {
        op.sym_name.data: predict_function(op, world, machine)
        for op in module.ops
        if isinstance(op, FuncOp)
    }


def total_time(predictions: dict[str, Prediction]) -> float:
    """One step of a module: its functions (pipeline stages run on their own
    ranks, at once) take as long as the slowest."""
    return max((p.time_s for p in predictions.values()), default=0.0)
