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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from math import prod

from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation, SSAValue

from coconet_ir.analysis.chunks import step_of
from coconet_ir.analysis.costs import (
    bytes_sent,
    function_costs,
    fusion_work,
    own_bytes,
    per_peer_exchange,
    transfer,
)
from coconet_ir.analysis.kernels import is_tile_prologue, one_kernel
from coconet_ir.costmodel import formulas as f
from coconet_ir.costmodel.machines import Machine
from coconet_ir.costmodel.timeline import COMMUNICATION, COMPUTE, Interval, Prediction
from coconet_ir.dialects import coco
from coconet_ir.dialects.coco import ELEMENTWISE_OPS, element_info, label_of
from coconet_ir.dialects.coco.layout import chunk_type

TRANSFER_LAUNCHES = 4
"""Launches of one per-peer block transfer besides the copy: the receiver's
credit, the sender's wait and arrival signal, the receiver's arrival wait
(one-thread flag kernels; docs/gpu/overlap.md, "Per-peer overlap")."""

STREAMS = {COMPUTE: "compute", COMMUNICATION: "communication"}
"""The stream each kind of work runs on."""
PARTIALS_STREAM = "partials"
"""A per-peer region pushes partial sums on a stream of their own, so that
the next block's copy need not wait behind them (docs/gpu/overlap.md)."""


@dataclass(frozen=True)
class Stage:
    """One kernel or collective: what it is, how long it takes, its launches."""

    label: str
    kind: str
    """`compute` or `communication`: which stream it runs on by default."""
    seconds: float
    """Its predicted duration (a model prediction, not a measurement)."""
    launches: int = 1
    """The calls the host issues for it (kernels, NCCL calls)."""
    stream: str | None = None
    """Where it runs, if not on its kind's stream."""
    overlapped: bool = False
    """A fused kernel that computes and communicates at once."""


def per_rank_dims(t: coco.TensorType, world: int) -> list[int]:
    dims = list(t.dims)
    if t.layout.is_sliced:
        dims[t.layout.sliced_dim] //= world
    return dims


def describe(op: Operation) -> str:
    return label_of(op) or op.name.removeprefix("coco.")


def signal_phases(op: Operation) -> int:
    """The waits for peers a collective costs inside a fused kernel: one
    (its data has arrived), three for an all_reduce (its buffer is free,
    the reduce-scatter, the all-gather: the GEMV + all_reduce tile kernel)."""
    if isinstance(op, coco.AllReduceOp):
        return 3
    return 1 if isinstance(op, coco.CollectiveOp) else 0


@dataclass(frozen=True)
class Coster:
    """The stages of ops on `world` ranks of `machine`; with `chunk_dims`,
    of one of `parts` chunks (a value with chunk dim `d` seen cut along `d`:
    how coco-optimize prices a region before building it)."""

    world: int
    machine: Machine
    chunk_dims: Mapping[SSAValue, int] = field(default_factory=dict[SSAValue, int])
    parts: int = 1
    sms: int | None = None
    """The SMs a matmul may use (default: all)."""

    def type_of(self, value: SSAValue) -> coco.TensorType:
        t = coco.tensor_type(value)
        return chunk_type(t, self.chunk_dims.get(value, -1), self.parts)

    def own_bytes(self, value: SSAValue) -> int:
        return own_bytes(self.type_of(value), self.world)

    def value_bytes(self, values: Iterable[SSAValue]) -> int:
        """The bytes one rank holds of tensor values (its block when sliced)."""
        return sum(
            self.own_bytes(v) for v in values if isinstance(v.type, coco.TensorType)
        )

    def matmul_shape(self, op: coco.MatmulOp | coco.BatchMatmulOp) -> f.MatmulShape:
        """The per-rank product a matmul computes."""
        lhs, result = self.type_of(op.lhs), self.type_of(op.result)
        k = lhs.dims[-1]
        if lhs.layout == coco.LayoutAttr.sliced(lhs.rank - 1):
            k //= self.world
        dims = per_rank_dims(result, self.world)
        batch = dims[0] if isinstance(op, coco.BatchMatmulOp) else 1
        rows = dims[1:-1] if isinstance(op, coco.BatchMatmulOp) else dims[:-1]
        return f.MatmulShape(
            m=prod(rows),
            n=dims[-1],
            k=k,
            batch=batch,
            element_bytes=element_info(lhs.element_type).bytes,
            element_type=str(lhs.element_type),
        )

    def collective_seconds(self, op: Operation) -> float:
        """The time of a collective, send or shift (`analysis.costs.transfer`)
        at this coster's chunk size."""
        moved = transfer(op, self.world, self.type_of)
        if moved is None:
            return 0.0
        kind, nbytes = moved
        return f.transfer_s(kind, nbytes, self.world, self.machine)

    def stage(self, op: Operation) -> Stage | None:
        """The kernel or collective an op runs as (a `coco.fusion`: one
        kernel), or None for ops that run nothing of their own: constants,
        updates in place, views, scalar arithmetic (the lowering folds it
        into the kernels that use it), a recv (the send's side carries the
        transfer)."""
        label, machine = describe(op), self.machine
        match op:
            case coco.FusionOp():
                return self.fusion_stage(op)
            case coco.MatmulOp() | coco.BatchMatmulOp():
                seconds = f.matmul_s(self.matmul_shape(op), machine, self.sms)
                return Stage(label, COMPUTE, seconds)
            case coco.EmbeddingOp():
                # every pooled row is read once: L rows per result row
                pooled = self.type_of(op.indices).dims[-1]
                moved = self.own_bytes(op.result) * pooled + self.value_bytes(
                    [op.indices, op.result]
                )
                return Stage(label, COMPUTE, f.memory_s(moved, machine))
            case (
                coco.ReduceOp()
                | coco.NormOp()
                | coco.ConvertOp()
                | coco.TransposeOp()
                | coco.ReshapeOp()
            ):
                moved = self.value_bytes([*op.operands, *op.results])
                return Stage(label, COMPUTE, f.memory_s(moved, machine))
            case coco.ConcatOp() | coco.SplitOp():  # a bucket's copy kernel
                moved = self.value_bytes([*op.operands, *op.results])
                return Stage(label, COMPUTE, f.memory_s(moved, machine))
            case _ if isinstance(op, ELEMENTWISE_OPS):
                if coco.tensor_type(op.results[0]).rank == 0:
                    return None  # scalar bookkeeping, folded into its users
                if is_tile_prologue(op):
                    return None  # applied by the tile kernel as it loads
                moved = self.value_bytes([*op.operands, *op.results])
                return Stage(label, COMPUTE, f.memory_s(moved, machine))
            case coco.CollectiveOp() | coco.SendOp():
                return Stage(label, COMMUNICATION, self.collective_seconds(op))
            case _:
                return None

    def stages(self, ops: Iterable[Operation]) -> list[Stage]:
        return [s for op in ops if (s := self.stage(op)) is not None]

    def fusion_stage(self, op: coco.FusionOp) -> Stage:
        """One kernel (`formulas.fused_kernel_s`), where the lowering has one
        (`analysis.kernels.one_kernel`; else its ops one after another): its
        matmuls' FLOPs and one pass over its inputs and outputs
        (`analysis.costs.fusion_work`), overlapped with its collectives.
        These move what NCCL's rings would, but by stores into peers' buffers
        and signals: a hop of latency per wait (`signal_phases`), not a
        ring's (docs/gpu/fused.md)."""
        body = list(op.block.ops)
        if not one_kernel(op, self.world):
            # lowered op by op (NCCL calls and kernels, one after another)
            inner = self.stages(body)
            return Stage(
                describe(op),
                COMMUNICATION,
                sum(stage.seconds for stage in inner),
                sum(stage.launches for stage in inner),
            )
        flops, moved = fusion_work(op, self.world, self.type_of)
        element = str(coco.tensor_type(op.inputs[0]).element_type)
        sent = sum(self.sent(inner) for inner in body)
        signals = sum(signal_phases(inner) for inner in body)
        seconds = f.fused_kernel_s(
            flops, element, moved, sent, signals, self.world, self.machine
        )
        kind = COMMUNICATION if sent else COMPUTE
        return Stage(describe(op), kind, seconds, overlapped=bool(sent))

    def sent(self, op: Operation) -> int:
        """What one rank sends for `op`, at this coster's chunk size."""
        if not self.chunk_dims:
            return bytes_sent(op, self.world)
        whole = bytes_sent(op, self.world)
        chunked = any(self.chunk_dims.get(v, -1) >= 0 for v in op.operands)
        return whole // self.parts if chunked else whole


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
            stream = stage.stream or STREAMS[stage.kind]
            start = max(done, free.get(stream, 0.0))
            done = free[stream] = start + stage.seconds
            name = f"{label}[{i}] {stage.label}"
            intervals.append(
                Interval(stream, name, stage.kind, start, done, stage.overlapped)
            )
    return max(free.values()), intervals


def chunk_steps(stages: list[Stage], chunks: int) -> list[list[Stage]]:
    """`chunks` steps of the same stages (one chunk's)."""
    return [stages] * chunks


def overlap_steps(
    op: coco.OverlapOp, world: int, machine: Machine
) -> list[list[Stage]]:
    """K copies of the body (its types are one chunk's), the matmuls on the
    SMs that the chunks' collectives leave free."""
    sms = machine.sm_count - machine.comm_sms
    stages = Coster(world, machine, sms=sms).stages(op.block.ops)
    return chunk_steps(stages, op.chunk_count)


def per_peer_pipeline(
    compute: list[Stage],
    gathered: int,
    scattered: int,
    summed: int,
    world: int,
    machine: Machine,
) -> list[list[Stage]]:
    """N steps: receive a peer's block of the `gathered` bytes (none at step
    0: the rank's own), run one step's `compute` on all SMs (the copies use
    the copy engine), send the partial of the `scattered` bytes to its
    owner; then sum the `summed` bytes of partials, N of them."""
    steps: list[list[Stage]] = []
    for s in range(world):
        receive = f.peer_s(gathered, world, machine) if s and gathered else 0.0
        send = f.peer_s(scattered, world, machine) if s and scattered else 0.0
        transfers = TRANSFER_LAUNCHES * ((1 if receive else 0) + (1 if send else 0))
        steps.append(
            [
                Stage("receive", COMMUNICATION, receive, transfers),
                *compute,
                Stage("send partial", COMMUNICATION, send, 0, PARTIALS_STREAM),
            ]
        )
    if summed:
        steps.append(
            [Stage("sum partials", COMPUTE, f.memory_s(world * summed, machine))]
        )
    return steps


def per_peer_steps(
    op: coco.PerPeerOp, world: int, machine: Machine
) -> list[list[Stage]]:
    """A per-peer region's pipeline, its body at one step's shapes."""
    step_op, _ = step_of(op, world)
    outputs = op.output_dims.get_values()
    gathered, scattered = per_peer_exchange(op)
    return per_peer_pipeline(
        Coster(world, machine).stages(step_op.block.ops),
        gathered=gathered // world,
        scattered=scattered // world,
        summed=sum(
            own_bytes(coco.tensor_type(v), world)
            for j, v in enumerate(op.outputs)
            if op.scattered(j) or outputs[j] == -1
        ),
        world=world,
        machine=machine,
    )


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
        stage = Coster(self.world, self.machine).stage(op)
        if stage is None:
            end = self.operands_ready(op)
        else:
            stream = STREAMS[stage.kind]
            issued = self.issue(stage.launches)
            start = max(self.operands_ready(op), self.free[stream], issued)
            end = self.free[stream] = start + stage.seconds
            self.prediction.timeline.append(
                Interval(stream, stage.label, stage.kind, start, end, stage.overlapped)
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
            Interval(
                i.stream, i.label, i.kind, start + i.start, start + i.end, i.overlapped
            )
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
