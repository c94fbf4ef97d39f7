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

- a kernel: its buffers' bytes at HBM speed (a tile kernel's
  `coco_gpu.work`: its FLOPs and bytes); a fused collective kernel
  (`coco_gpu.peer_bytes`) that overlapped with its peer stores over the
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
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, MemRefType
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.traits import SymbolTable

from coconet_ir.analysis.device_traffic import (
    Traffic,
    buffer_bytes,
    constant_index,
    device_transfer,
    trip_count,
)
from coconet_ir.costmodel import formulas as f
from coconet_ir.costmodel.machines import Machine
from coconet_ir.costmodel.timeline import COMMUNICATION, COMPUTE, Interval, Prediction
from coconet_ir.diagnostics import CocoError
from coconet_ir.dialects import coco_gpu
from coconet_ir.dialects.coco import element_info
from coconet_ir.dialects.coco_gpu import PEER_BYTES_ATTR, WORK_ATTR

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


@dataclass(frozen=True)
class KernelFacts:
    """What the stream simulation reads off a kernel's body, once per
    kernel (a kernel is launched many times)."""

    flag: str | None
    """`signal` or `wait` for the one-thread flag kernels of per-peer
    transfers (one kind of signal op in them), else None."""
    phases: int
    """Its `coco_gpu.wait_signal` ops: a fused kernel's signal phases."""
    slot: int | None
    """The position of its `slot` argument, if it has one."""

    @staticmethod
    def of(kernel: gpu.FuncOp) -> KernelFacts:
        waits = signals = 0
        for op in kernel.walk():
            waits += isinstance(op, coco_gpu.WaitSignalOp)
            signals += isinstance(op, coco_gpu.SignalOp)
        flag = None
        if bool(waits) != bool(signals):
            flag = "wait" if waits else "signal"
        names = [arg.name_hint for arg in kernel.body.block.args]
        slot = names.index("slot") if "slot" in names else None
        return KernelFacts(flag, waits, slot)


NO_FACTS = KernelFacts(None, 0, None)
"""A launch whose kernel is not in the module."""


def launch_facts(launch: gpu.LaunchFuncOp) -> KernelFacts:
    kernel = kernel_of(launch)
    return NO_FACTS if kernel is None else KernelFacts.of(kernel)


def flag_of(launch: gpu.LaunchFuncOp, facts: KernelFacts) -> str | None:
    """A launch's flag kind: its kernel's, unless it is a fused collective
    kernel (which has peer bytes, and signals inside)."""
    return None if PEER_BYTES_ATTR in launch.attributes else facts.flag


def flag_kind(launch: gpu.LaunchFuncOp) -> str | None:
    """`signal` or `wait` for the launch of a per-peer flag kernel."""
    return flag_of(launch, launch_facts(launch))


def slot_of(launch: gpu.LaunchFuncOp, facts: KernelFacts) -> object:
    """The signal slot a flag kernel sets or waits on (its `slot` argument:
    the constant, or the value itself when not constant)."""
    assert facts.slot is not None
    value = launch.kernelOperands[facts.slot]
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
    kernels: dict[str, KernelFacts] = field(default_factory=dict[str, KernelFacts])
    """What each kernel's body says, by symbol, read once."""

    def facts(self, launch: gpu.LaunchFuncOp) -> KernelFacts:
        name = launch.kernel.string_value()
        if name not in self.kernels:
            self.kernels[name] = launch_facts(launch)
        return self.kernels[name]

    def flag(self, op: Operation) -> str | None:
        if not isinstance(op, gpu.LaunchFuncOp):
            return None
        return flag_of(op, self.facts(op))

    def duration(self, op: Operation) -> tuple[str, float]:
        """What kind of work `op` is and how long it takes."""
        world, machine = self.world, self.machine
        moved = device_transfer(op)
        if moved is not None:
            kind, nbytes = moved
            return COMMUNICATION, f.transfer_s(kind, nbytes, world, machine)
        match op:
            case coco_gpu.GemmOp():
                return COMPUTE, f.matmul_s(gemm_shape(op), machine)
            case gpu.LaunchFuncOp():
                return self.kernel_duration(op)
            case _:
                return COMPUTE, 0.0

    def kernel_duration(self, op: gpu.LaunchFuncOp) -> tuple[str, float]:
        """A kernel: its buffers' bytes (or its `coco_gpu.work`) and, for a
        fused collective kernel, the peer stores it overlaps with them."""
        world, machine = self.world, self.machine
        work = op.attributes.get(WORK_ATTR)
        if isinstance(work, DenseArrayBase):
            flops, moved = work.get_values()
        else:
            flops, moved = 0, memref_bytes(list(op.kernelOperands))
        peer = op.attributes.get(PEER_BYTES_ATTR)
        sent = peer.value.data * (world - 1) if isinstance(peer, IntegerAttr) else 0
        phases = self.facts(op).phases
        element = next(
            (
                str(v.type.element_type)
                for v in op.kernelOperands
                if isinstance(v.type, MemRefType)
            ),
            "f32",
        )
        seconds = f.fused_kernel_s(
            int(flops), element, int(moved), sent, phases, world, machine
        )
        return (COMMUNICATION if sent else COMPUTE), seconds

    def ready_at(self, op: Operation) -> float | None:
        """When what `op` waits for has happened; None if not yet known."""
        match op:
            case coco_gpu.WaitEventOp():
                return self.events.get(op.event)
            case gpu.LaunchFuncOp() if self.flag(op) == "wait":
                slot = slot_of(op, self.facts(op))
                sent = self.signals.get(slot, [])
                index = self.waits[slot]
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
        flag = self.flag(op)
        if flag is not None:
            assert isinstance(op, gpu.LaunchFuncOp)
            slot = slot_of(op, self.facts(op))
            if flag == "signal":
                self.signals.setdefault(slot, []).append(end)
            else:
                self.waits[slot] += 1
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
