"""How coco-optimize prices overlapping a matmul with its collectives — not
at all, in row chunks (`coco.overlap chunks = K`) or one chunk per peer
(`coco.per_peer`) — before building either region (docs/passes/coco-overlap.md,
"Choosing the overlap").

Each schedule is priced by the cost model's own rules (`costmodel.tensor`)
over the ops the regions would cover: unoverlapped, the ops list-scheduled
on the compute and communication streams; chunked, the chunk's stages
(values seen at one chunk's types, the matmuls on the SMs NCCL leaves)
pipelined K times; per peer, one step's stages between a block received and
a partial sent, N times. A region costs at least its launches (the host
issues one every `Machine.launch_s`).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

from xdsl.ir import Operation

from coconet_ir.analysis.chunks import ChunkPlan
from coconet_ir.analysis.costs import global_bytes, own_bytes
from coconet_ir.costmodel.machines import Machine
from coconet_ir.costmodel.tensor import (
    Coster,
    Schedule,
    Stage,
    chunk_steps,
    per_peer_pipeline,
    staged_pipeline,
)
from coconet_ir.costmodel.timeline import Prediction
from coconet_ir.dialects import coco


class OverlapMode(Enum):
    NONE = "none"
    CHUNKS = "chunks"
    PER_PEER = "per peer"


def unoverlapped_s(ops: Sequence[Operation], world: int, machine: Machine) -> float:
    """The ops run as they are, from an idle GPU."""
    prediction = Prediction(machine.name, world)
    schedule = Schedule(world, machine, prediction)
    for op in ops:
        schedule.place(op)
    return max([schedule.host, *(i.end for i in prediction.timeline)])


def region_s(steps: Sequence[Sequence[Stage]], machine: Machine) -> float:
    """A region's pipeline, or the time to issue its launches if longer."""
    length, _ = staged_pipeline(steps, "")
    launches = sum(stage.launches for step in steps for stage in step)
    return max(length, launches * machine.launch_s)


def chunked_s(
    ops: Sequence[Operation], plan: ChunkPlan, chunks: int, world: int, machine: Machine
) -> float:
    """The ops of a planned `coco.overlap` region, chunk by chunk."""
    sms = machine.sm_count - machine.comm_sms
    coster = Coster(world, machine, plan.dims, chunks, sms)
    return region_s(chunk_steps(coster.stages(ops), chunks), machine)


def per_peer_s(
    ops: Sequence[Operation], plan: ChunkPlan, world: int, machine: Machine
) -> float:
    """The ops of a planned `coco.per_peer` region, step by step: its
    all_gathers become received blocks, its reduce_scatters sent partials."""
    coster = Coster(world, machine, plan.dims, world)
    compute = coster.stages(op for op in ops if not isinstance(op, coco.CollectiveOp))
    gathers = [op for op in ops if isinstance(op, coco.AllGatherOp)]
    scatters = [op for op in ops if isinstance(op, coco.ReduceScatterOp)]
    steps = per_peer_pipeline(
        compute,
        gathered=sum(global_bytes(op.operand.type) // world for op in gathers),
        scattered=sum(global_bytes(op.operand.type) // world for op in scatters),
        summed=sum(own_bytes(coco.tensor_type(op.result), world) for op in scatters),
        world=world,
        machine=machine,
    )
    return region_s(steps, machine)
