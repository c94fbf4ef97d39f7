"""The predicted time of a device-level (lowered) function, launch by launch
and stream by stream (docs/performance.md, "The cost model").

The host walks the function in order and issues every kernel, library call
and copy (one every `Machine.launch_s`; host loops with constant bounds
unrolled). Each stream then runs its work in order: an item starts when the
host has issued it, its stream is free and what it waits for has happened —
an event recorded on another stream (`coco_gpu.wait_event`), or a flag a
peer sets (a one-thread kernel around `coco_gpu.wait_signal`). All ranks run
the same program at the same pace, so the `k`-th wait on a signal slot ends
when this rank's own `k`-th signal to that slot does (its peer's, by
symmetry). Durations:

- a kernel: its buffers' bytes at HBM speed; a fused collective kernel
  (`coco_gpu.peer_bytes`) the longer of that and its peer stores over the
  link, plus a hop per phase (each `coco_gpu.wait_signal` in it: a
  reduce-scatter, then an all-gather);
- `coco_gpu.gemm`: the roofline matmul with wave quantization;
- NCCL calls and peer copies: the ring and point-to-point formulas.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from math import prod

from xdsl.dialects import gpu, scf
from xdsl.dialects.builtin import IntegerAttr, MemRefType
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.traits import SymbolTable

from coconet_ir.analysis.device_traffic import (
    Traffic,
    buffer_bytes,
    constant_index,
    trip_count,
)
from coconet_ir.costmodel import formulas as f
from coconet_ir.costmodel.machines import Machine
from coconet_ir.costmodel.timeline import COMMUNICATION, COMPUTE, Interval, Prediction
from coconet_ir.diagnostics import CocoError
from coconet_ir.dialects import coco_gpu
from coconet_ir.dialects.coco import element_info
from coconet_ir.dialects.coco_gpu import PEER_BYTES_ATTR

ISSUED = (
    gpu.LaunchFuncOp,
    coco_gpu.GemmOp,
    coco_gpu.NcclCollectiveOp,
    coco_gpu.NcclSendOp,
    coco_gpu.NcclRecvOp,
    coco_gpu.PeerCopyOp,
)
"""The host calls that cost a launch."""


@dataclass
class Item:
    """One host op bound for a stream, with when the host issued it."""

    op: Operation
    issued: float


def host_ops(block: Block) -> Iterator[Operation]:
    """The host ops of a block in the order they run, constant-bound loops
    unrolled."""
    for op in block.ops:
        if isinstance(op, scf.ForOp):
            for _ in range(trip_count(op)):
                yield from host_ops(op.body.block)
        else:
            yield op


def kernel_of(launch: gpu.LaunchFuncOp) -> gpu.FuncOp | None:
    target = SymbolTable.lookup_symbol(launch, launch.kernel)
    return target if isinstance(target, gpu.FuncOp) else None


def flag_kind(launch: gpu.LaunchFuncOp) -> str | None:
    """`signal` or `wait` for the one-thread flag kernels of per-peer
    transfers (no peer bytes, one signal or wait op), else None."""
    if PEER_BYTES_ATTR in launch.attributes:
        return None
    kernel = kernel_of(launch)
    if kernel is None:
        return None
    kinds = {
        "signal" if isinstance(op, coco_gpu.SignalOp) else "wait"
        for op in kernel.walk()
        if isinstance(op, coco_gpu.SignalOp | coco_gpu.WaitSignalOp)
    }
    return kinds.pop() if len(kinds) == 1 else None


def slot_of(launch: gpu.LaunchFuncOp) -> object:
    """The signal slot a flag kernel sets or waits on (its `slot` argument:
    the constant, or the value itself when not constant)."""
    kernel = kernel_of(launch)
    assert kernel is not None
    names = [arg.name_hint for arg in kernel.body.block.args]
    value = launch.kernelOperands[names.index("slot")]
    constant = constant_index(value)
    return constant if constant is not None else value


def gemm_shape(op: coco_gpu.GemmOp) -> f.MatmulShape:
    a, b, c = (v.type for v in (op.a, op.b, op.c))
    assert isinstance(a, MemRefType) and isinstance(b, MemRefType)
    assert isinstance(c, MemRefType)
    a_shape, b_shape, c_shape = a.get_shape(), b.get_shape(), c.get_shape()
    batch = b_shape[0] if len(b_shape) == 3 else 1
    rows = c_shape[1:-1] if batch > 1 or len(b_shape) == 3 else c_shape[:-1]
    return f.MatmulShape(
        m=prod(rows),
        n=c_shape[-1],
        k=a_shape[-1],
        batch=batch,
        element_bytes=element_info(a.element_type).bytes,
        element_type=str(a.element_type),
    )


def memref_bytes(values: list[SSAValue]) -> int:
    return sum(buffer_bytes(v) for v in values if isinstance(v.type, MemRefType))


@dataclass
class StreamSimulation:
    """Runs the streams of one host function (module docstring)."""

    world: int
    machine: Machine
    prediction: Prediction
    queues: dict[int, deque[Item]] = field(default_factory=dict[int, deque[Item]])
    free: dict[int, float] = field(default_factory=dict[int, float])
    events: dict[SSAValue, float] = field(default_factory=dict[SSAValue, float])
    signals: dict[object, list[float]] = field(
        default_factory=dict[object, list[float]]
    )
    waits: Counter[object] = field(default_factory=Counter[object])

    def duration(self, op: Operation) -> tuple[str, float]:
        """What kind of work `op` is and how long it takes."""
        world, machine = self.world, self.machine
        match op:
            case coco_gpu.GemmOp():
                return COMPUTE, f.matmul_s(gemm_shape(op), machine)
            case coco_gpu.NcclAllReduceOp():
                return COMMUNICATION, f.all_reduce_s(
                    buffer_bytes(op.input), world, machine
                )
            case coco_gpu.NcclReduceScatterOp():
                size = buffer_bytes(op.input)
                return COMMUNICATION, f.gather_scatter_s(size, world, machine)
            case coco_gpu.NcclAllGatherOp():
                size = buffer_bytes(op.output)
                return COMMUNICATION, f.gather_scatter_s(size, world, machine)
            case coco_gpu.NcclBroadcastOp():
                size = buffer_bytes(op.input)
                return COMMUNICATION, f.broadcast_s(size, world, machine)
            case coco_gpu.NcclAllToAllOp():
                size = buffer_bytes(op.input)
                return COMMUNICATION, f.all_to_all_s(size, world, machine)
            case coco_gpu.NcclSendOp():
                return COMMUNICATION, f.peer_s(buffer_bytes(op.input), world, machine)
            case coco_gpu.PeerCopyOp():
                return COMMUNICATION, f.peer_s(buffer_bytes(op.source), world, machine)
            case gpu.LaunchFuncOp():
                memory = f.memory_s(memref_bytes(list(op.kernelOperands)), machine)
                peer = op.attributes.get(PEER_BYTES_ATTR)
                if not isinstance(peer, IntegerAttr):
                    return COMPUTE, memory
                stores = peer.value.data * (world - 1)
                link = stores / f.link_bytes_per_s(world, machine)
                kernel = kernel_of(op)
                phases = sum(
                    isinstance(inner, coco_gpu.WaitSignalOp)
                    for inner in (kernel.walk() if kernel else ())
                )
                hops = max(phases, 1) * machine.link(world).hop_s
                return COMMUNICATION, max(memory, link) + hops
            case _:
                return COMPUTE, 0.0

    def ready_at(self, op: Operation) -> float | None:
        """When what `op` waits for has happened; None if not yet known."""
        match op:
            case coco_gpu.WaitEventOp():
                return self.events.get(op.event)
            case gpu.LaunchFuncOp() if flag_kind(op) == "wait":
                sent = self.signals.get(slot_of(op), [])
                index = self.waits[slot_of(op)]
                return sent[index] if index < len(sent) else None
            case _:
                return 0.0

    def step(self, stream: int) -> bool:
        """Run the head of `stream`'s queue if it can; whether it did."""
        item = self.queues[stream][0]
        op = item.op
        ready = self.ready_at(op)
        if ready is None:
            return False
        self.queues[stream].popleft()
        start = max(self.free.get(stream, 0.0), item.issued, ready)
        if isinstance(op, coco_gpu.RecordEventOp):
            self.events[op.event] = start
            return True
        kind, seconds = self.duration(op)
        end = self.free[stream] = start + seconds
        if isinstance(op, gpu.LaunchFuncOp):
            flag = flag_kind(op)
            if flag == "signal":
                self.signals.setdefault(slot_of(op), []).append(end)
            elif flag == "wait":
                self.waits[slot_of(op)] += 1
        if seconds > 0:
            label = (
                op.kernel.string_value().rsplit(".", 1)[-1]
                if isinstance(op, gpu.LaunchFuncOp)
                else op.name.removeprefix("coco_gpu.")
            )
            self.prediction.timeline.append(
                Interval(f"stream {stream}", label, kind, start, end)
            )
        return True

    def run(self) -> None:
        while any(self.queues.values()):
            progressed = False
            for stream in sorted(self.queues):
                while self.queues[stream] and self.step(stream):
                    progressed = True
            if not progressed:
                blocked = [q[0].op.name for q in self.queues.values() if q]
                raise CocoError(
                    f"cannot predict the streams: every stream waits ({blocked}) "
                    "for an event or signal that is never recorded or sent"
                )


def predict_device_function(func: FuncOp, world: int, machine: Machine) -> Prediction:
    """The predicted time of one call of a lowered host function."""
    prediction = Prediction(machine.name, world)
    simulation = StreamSimulation(world, machine, prediction)
    host = 0.0
    for op in host_ops(func.body.block):
        if not isinstance(op, (*ISSUED, coco_gpu.RecordEventOp, coco_gpu.WaitEventOp)):
            continue
        if isinstance(op, ISSUED):
            host += machine.launch_s
            prediction.launches += 1
        stream = coco_gpu.stream_of(op)
        simulation.queues.setdefault(stream, deque()).append(Item(op, host))
    simulation.run()
    prediction.time_s = max([host, *simulation.free.values()], default=0.0)
    traffic = Traffic(world)
    traffic.add_block(func.body.block, 1)
    to_stages = sum(traffic.sent_to_stage.values(), start=traffic.bytes_per_rank())
    prediction.bytes_sent = int(to_stages.max(initial=0))
    return prediction
