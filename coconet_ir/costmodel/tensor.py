"""The predicted time of a tensor-level coco function (docs/performance.md,
"The cost model").

Ops run as the unfused program would on a GPU: every compute op a kernel on
the compute stream, every collective an NCCL call on the communication
stream, each starting when its operands are ready, its stream is free and the
host has issued it (one launch every `Machine.launch_s`). Region ops are the
schedules the transformations build:

- `coco.fusion`: one kernel, one pass over its inputs and outputs; with
  collectives inside, the longer of that pass and the communication;
- `coco.overlap chunks = K`: the body's ops as a pipeline of K steps over the
  two streams, the matmuls on the SMs NCCL leaves them;
- `coco.per_peer`: N steps, each receiving a block (a peer copy on the copy
  engine), computing on it at the step's shapes, sending its partial on.

Stages of a pipeline run in order on their stream; a stage starts after the
previous stage of its step (`staged_pipeline`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import prod

from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation, SSAValue

from coconet_ir.analysis.chunks import step_of
from coconet_ir.analysis.costs import (
    bytes_sent,
    function_costs,
    global_bytes,
    own_bytes,
)
from coconet_ir.costmodel import formulas as f
from coconet_ir.costmodel.machines import Machine
from coconet_ir.costmodel.timeline import COMMUNICATION, COMPUTE, Interval, Prediction
from coconet_ir.dialects import coco
from coconet_ir.dialects.coco import ELEMENTWISE_OPS, element_info, label_of

TRANSFER_LAUNCHES = 4
"""Launches of one per-peer block transfer besides the copy: the receiver's
credit, the sender's wait and arrival signal, the receiver's arrival wait
(one-thread flag kernels; docs/gpu.md, "Per-peer overlap")."""

STREAMS = {COMPUTE: "compute", COMMUNICATION: "communication"}
"""The stream each kind of work runs on."""


@dataclass(frozen=True)
class Stage:
    """One kernel or collective: what it is, how long it takes, its launches."""

    label: str
    kind: str
    seconds: float
    launches: int = 1


def per_rank_dims(t: coco.TensorType, world: int) -> list[int]:
    dims = list(t.dims)
    if t.layout.is_sliced:
        dims[t.layout.sliced_dim] //= world
    return dims


def matmul_shape(op: coco.MatmulOp | coco.BatchMatmulOp, world: int) -> f.MatmulShape:
    """The per-rank product a matmul computes."""
    lhs, result = coco.tensor_type(op.lhs), coco.tensor_type(op.result)
    k = lhs.dims[-1]
    if lhs.layout == coco.LayoutAttr.sliced(lhs.rank - 1):
        k //= world
    dims = per_rank_dims(result, world)
    batch = dims[0] if isinstance(op, coco.BatchMatmulOp) else 1
    rows = dims[1:-1] if isinstance(op, coco.BatchMatmulOp) else dims[:-1]
    info = element_info(lhs.element_type)
    return f.MatmulShape(
        m=prod(rows),
        n=dims[-1],
        k=k,
        batch=batch,
        element_bytes=info.bytes,
        element_type=str(lhs.element_type),
    )


def value_bytes(values: Iterable[SSAValue], world: int) -> int:
    """The bytes one rank holds of tensor values (its block when sliced)."""
    return sum(
        own_bytes(v.type, world) for v in values if isinstance(v.type, coco.TensorType)
    )


def describe(op: Operation) -> str:
    return label_of(op) or op.name.removeprefix("coco.")


def collective_seconds(op: Operation, world: int, machine: Machine) -> float:
    match op:
        case coco.AllReduceOp():
            return f.all_reduce_s(global_bytes(op.operand.type), world, machine)
        case coco.ReduceScatterOp() | coco.AllGatherOp():
            return f.gather_scatter_s(global_bytes(op.operand.type), world, machine)
        case coco.BroadcastOp():
            return f.broadcast_s(global_bytes(op.operand.type), world, machine)
        case coco.AllToAllOp():
            return f.all_to_all_s(
                own_bytes(coco.tensor_type(op.operand), world), world, machine
            )
        case coco.ShiftOp():
            t = coco.tensor_type(op.operand)
            if op.offset % world == 0 or t.layout.is_replicated:
                return 0.0
            return f.peer_s(own_bytes(t, world), world, machine)
        case coco.SendOp():
            return f.peer_s(
                own_bytes(coco.tensor_type(op.operand), world), world, machine
            )
        case _:
            return 0.0


def op_stage(
    op: Operation, world: int, machine: Machine, sms: int | None = None
) -> Stage | None:
    """The kernel or collective an op runs as (a `coco.fusion`: one kernel),
    or None for ops that run nothing of their own: constants, updates in
    place, views, scalar arithmetic (the lowering folds it into the kernels
    that use it), a recv (the send's side carries the transfer)."""
    label = describe(op)
    match op:
        case coco.FusionOp():
            return fusion_stage(op, world, machine)
        case coco.MatmulOp() | coco.BatchMatmulOp():
            seconds = f.matmul_s(matmul_shape(op, world), machine, sms)
            return Stage(label, COMPUTE, seconds)
        case coco.EmbeddingOp():
            # every pooled row is read once: L rows per result row
            pooled = coco.tensor_type(op.indices).dims[-1]
            rows = own_bytes(op.result.type, world) * pooled
            moved = rows + value_bytes([op.indices, op.result], world)
            return Stage(label, COMPUTE, f.memory_s(moved, machine))
        case coco.ReduceOp() | coco.NormOp() | coco.ConvertOp():
            moved = value_bytes([*op.operands, *op.results], world)
            return Stage(label, COMPUTE, f.memory_s(moved, machine))
        case _ if isinstance(op, ELEMENTWISE_OPS):
            if coco.tensor_type(op.results[0]).rank == 0:
                return None  # scalar bookkeeping, folded into its users' kernels
            moved = value_bytes([*op.operands, *op.results], world)
            return Stage(label, COMPUTE, f.memory_s(moved, machine))
        case coco.CollectiveOp() | coco.SendOp():
            return Stage(label, COMMUNICATION, collective_seconds(op, world, machine))
        case _:
            return None


def body_stages(
    ops: Iterable[Operation], world: int, machine: Machine, sms: int | None = None
) -> list[Stage]:
    return [s for op in ops if (s := op_stage(op, world, machine, sms)) is not None]


def fusion_stage(op: coco.FusionOp, world: int, machine: Machine) -> Stage:
    """One kernel: one pass over the region's inputs and outputs (and any
    matmul in it), or its communication if longer. Its collectives move what
    NCCL's rings would, but by stores into peers' buffers and one signal per
    collective: a hop of latency each, not a ring's (docs/gpu.md §5)."""
    matmuls = sum(
        f.matmul_s(matmul_shape(inner, world), machine)
        for inner in op.block.ops
        if isinstance(inner, coco.MatmulOp | coco.BatchMatmulOp)
    )
    memory = f.memory_s(value_bytes([*op.inputs, *op.outputs], world), machine)
    moved = sum(bytes_sent(inner, world) for inner in op.block.ops)
    signals = sum(isinstance(inner, coco.CollectiveOp) for inner in op.block.ops)
    communication = (
        moved / f.link_bytes_per_s(world, machine) + signals * machine.link(world).hop_s
        if moved
        else 0.0
    )
    kind = COMMUNICATION if communication else COMPUTE
    return Stage(describe(op), kind, max(matmuls + memory, communication))


def staged_pipeline(
    steps: Sequence[Sequence[Stage]], label: str
) -> tuple[float, list[Interval]]:
    """Steps of stages, each stage on its kind's stream, in step order on
    that stream and after the previous stage of its step."""
    free = dict.fromkeys(STREAMS.values(), 0.0)
    intervals: list[Interval] = []
    for i, step in enumerate(steps):
        done = 0.0
        for stage in step:
            if stage.seconds <= 0:
                continue
            stream = STREAMS[stage.kind]
            start = max(done, free[stream])
            done = free[stream] = start + stage.seconds
            intervals.append(
                Interval(stream, f"{label}[{i}] {stage.label}", stage.kind, start, done)
            )
    return max(free.values()), intervals


def overlap_steps(
    op: coco.OverlapOp, world: int, machine: Machine
) -> list[list[Stage]]:
    """K copies of the body (its types are one chunk's), the matmuls on the
    SMs that the chunks' collectives leave free."""
    sms = machine.sm_count - machine.comm_sms
    step = body_stages(op.block.ops, world, machine, sms)
    return [step] * op.chunk_count


def per_peer_steps(
    op: coco.PerPeerOp, world: int, machine: Machine
) -> list[list[Stage]]:
    """N steps: receive a peer's block (none at step 0: the rank's own), run
    the body at one step's shapes on all SMs (the copies use the copy
    engine), send the partial of a reduce-scattered output to its owner;
    then sum the received partials."""
    step_op, _ = step_of(op, world)
    compute = body_stages(step_op.block.ops, world, machine)
    gathered = sum(
        global_bytes(v.type) // world for i, v in enumerate(op.inputs) if op.gathered(i)
    )
    scattered = sum(
        global_bytes(v.type) // world
        for j, v in enumerate(op.outputs)
        if op.scattered(j)
    )
    steps: list[list[Stage]] = []
    for s in range(world):
        receive = f.peer_s(gathered, world, machine) if s and gathered else 0.0
        send = f.peer_s(scattered, world, machine) if s and scattered else 0.0
        transfers = TRANSFER_LAUNCHES * ((1 if receive else 0) + (1 if send else 0))
        steps.append(
            [
                Stage("receive", COMMUNICATION, receive, transfers),
                *compute,
                Stage("send partial", COMMUNICATION, send, 0),
            ]
        )
    summed = [
        own_bytes(v.type, world)
        for j, v in enumerate(op.outputs)
        if op.scattered(j) or op.output_dims.get_values()[j] == -1
    ]
    if summed:
        steps.append(
            [Stage("sum partials", COMPUTE, f.memory_s(world * sum(summed), machine))]
        )
    return steps


@dataclass
class Schedule:
    """List scheduling of one function's ops in program order."""

    world: int
    machine: Machine
    prediction: Prediction

    def __post_init__(self) -> None:
        self.ready: dict[SSAValue, float] = {}
        self.free = dict.fromkeys(STREAMS.values(), 0.0)
        self.host = 0.0

    def operands_ready(self, op: Operation) -> float:
        return max((self.ready.get(v, 0.0) for v in op.operands), default=0.0)

    def issue(self, launches: int) -> float:
        """The host issues `launches` calls; when the last one is issued."""
        self.host += launches * self.machine.launch_s
        self.prediction.launches += launches
        return self.host

    def place(self, op: Operation) -> None:
        if isinstance(op, coco.OverlapOp | coco.PerPeerOp):
            steps = (
                overlap_steps(op, self.world, self.machine)
                if isinstance(op, coco.OverlapOp)
                else per_peer_steps(op, self.world, self.machine)
            )
            self.place_pipeline(op, steps)
            return
        stage = op_stage(op, self.world, self.machine)
        if stage is None:
            end = self.operands_ready(op)
        else:
            stream = STREAMS[stage.kind]
            issued = self.issue(stage.launches)
            start = max(self.operands_ready(op), self.free[stream], issued)
            end = self.free[stream] = start + stage.seconds
            self.prediction.timeline.append(
                Interval(stream, stage.label, stage.kind, start, end)
            )
        for result in op.results:
            self.ready[result] = end

    def place_pipeline(self, op: Operation, steps: Sequence[Sequence[Stage]]) -> None:
        """A region whose steps use both streams: it starts when its inputs
        and both streams are ready; the host issues its launches meanwhile."""
        start = max(self.operands_ready(op), *self.free.values(), self.host)
        length, intervals = staged_pipeline(steps, describe(op))
        launches = sum(s.launches for step in steps for s in step)
        issued = self.issue(launches)
        end = max(start + length, issued)
        self.prediction.timeline += [
            Interval(i.stream, i.label, i.kind, start + i.start, start + i.end)
            for i in intervals
        ]
        for stream in self.free:
            self.free[stream] = end
        for result in op.results:
            self.ready[result] = end


def predict_function(func: FuncOp, world: int, machine: Machine) -> Prediction:
    """The predicted time of one call of a tensor-level function on `world`
    ranks of `machine`."""
    prediction = Prediction(machine.name, world)
    schedule = Schedule(world, machine, prediction)
    for op in func.body.block.ops:
        schedule.place(op)
    prediction.time_s = max(
        [schedule.host, *(i.end for i in prediction.timeline)], default=0.0
    )
    prediction.bytes_sent = function_costs(func, world).bytes_sent
    return prediction
