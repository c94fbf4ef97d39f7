"""Run a coco program the way a GPU would, on the CPU (docs/gpu/emulation.md).

`emulate(module, world)` optimizes the program (`passes`, default
`coco-optimize`), lowers it (`convert-coco-to-gpu{world=N}`), prints it as CUDA C
(the `cuda` target), compiles that file unchanged with g++ against the
emulation header, and runs every rank of every stage as threads of one
process. Inputs are the interpreter's (same keys, same seed, distributed by
the layouts of the optimized program's arguments), outputs come back as global
values under the interpreter's keys, so `RunResult`s of both can be compared
(`compare_runs`). The emulator also counts what the code did (`stats`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute, BlockArgument

from coconet_ir import ir
from coconet_ir.analysis.channels import PipelineChannels
from coconet_ir.analysis.device_traffic import Traffic
from coconet_ir.dialects import coco
from coconet_ir.interpreter.compare import (
    Comparison,
    Difference,
    compare_outputs,
    per_rank_views,
)
from coconet_ir.interpreter.inputs import (
    argument_key,
    check_seed,
    check_world,
    prepare_inputs,
    result_key,
)
from coconet_ir.interpreter.runner import Output, RunResult
from coconet_ir.interpreter.stages import select_functions
from coconet_ir.interpreter.values import DistValue, local_shape, storage_dtype

DEFAULT_PASSES = "coco-optimize"


@dataclass
class Lowered:
    """A program at each level: coco (optimized), device (gpu + coco_gpu), CUDA C."""

    coco: ModuleOp
    device: ModuleOp
    cuda: str

    @property
    def symmetric_bytes(self) -> int:
        return symmetric_bytes(self.device)

    @property
    def signal_slots(self) -> int:
        return signal_slots(self.device)


def symmetric_bytes(device: ModuleOp) -> int:
    """The symmetric workspace every rank of a device-level module needs
    (the lowering's `coco_gpu.symmetric_bytes`)."""
    return _module_int(device, "coco_gpu.symmetric_bytes")


def signal_slots(device: ModuleOp) -> int:
    """The signal-pad slots every rank needs (`coco_gpu.signal_slots`)."""
    return _module_int(device, "coco_gpu.signal_slots")


def _module_int(module: ModuleOp, name: str) -> int:
    attr = module.attributes.get(name)
    return attr.value.data if isinstance(attr, IntegerAttr) else 0


def lower(
    module: ModuleOp,
    world: int,
    passes: str = DEFAULT_PASSES,
    threads: int = 256,
    ranks_per_node: int = 0,
) -> Lowered:
    """Optimize a copy of `module` with `passes`, lower it for `world` ranks
    with `threads` threads per block (`ranks_per_node` to a node, 0: all on
    one; docs/gpu/device.md, "Several nodes") and print it as CUDA C."""
    from coconet_ir.backend.cuda import emit_cuda

    optimized, device = lower_to_device(module, world, passes, threads, ranks_per_node)
    return Lowered(optimized, device, emit_cuda(device))


def lower_to_device(
    module: ModuleOp,
    world: int,
    passes: str = DEFAULT_PASSES,
    threads: int = 256,
    ranks_per_node: int = 0,
) -> tuple[ModuleOp, ModuleOp]:
    """`lower`'s two IR levels, without the CUDA C: the optimized copy of
    `module` and the device level (the `triton` target prints that)."""
    from coconet_ir.pipeline import Pipeline

    optimized = Pipeline(passes)(module) if passes else module.clone()
    nodes = f" ranks_per_node={ranks_per_node}" if ranks_per_node else ""
    conversion = f"convert-coco-to-gpu{{world={world} threads={threads}{nodes}}}"
    return optimized, Pipeline([conversion])(optimized)


@dataclass
class EmulationResult(RunResult):
    """A `RunResult` of the emulator (the outputs after its last call: with
    several calls, updated parameters have been updated that many times), with
    what it counted (`stats`, per call) and what it ran (`lowered`)."""

    stats: EmulatorStats | None = None
    lowered: Lowered | None = None


def emulate(
    module: ModuleOp,
    world: int,
    *,
    passes: str = DEFAULT_PASSES,
    inputs: Mapping[str, np.ndarray] | None = None,
    seed: int = 0,
    entry: str | None = None,
    calls: int = 1,
    threads: int = 256,
    sanitize: str | None = None,
    timeout: float = 300.0,
    backend: str = "emu",
    devices: Sequence[int] | None = None,
    processes: bool = False,
    ranks_per_node: int = 0,
) -> EmulationResult:
    """Run `module` on `world` emulated GPUs per stage (see the module
    docstring), `calls` times back to back on the same world (updated
    parameters carry over, as training steps do), with `threads` threads per
    block (every one an OS thread in the emulation: sanitized runs use fewer).
    `sanitize` is `"thread"` or `"address"` to build under that sanitizer.
    Raises `CocoError` on a bad request, a program the lowering refuses, a
    compile error, or a failed or stuck run.

    `backend="cuda"` runs the same CUDA C on the machine's GPUs instead
    (nvcc, NCCL, cuBLAS, cupy; docs/gpu/running.md): same inputs and outputs, no
    `stats`; without a GPU it raises a CocoError starting `no GPU:`. `devices`
    (cuda only) names each rank's GPU, stage-major (default 0, 1, ...); a GPU
    named twice runs several ranks (docs/gpu/running.md, "Ranks sharing a
    GPU").

    `processes` (emu only) runs every rank as a process of its own, as
    torchrun runs them (docs/gpu/emulation.md, "Multi-process mode"); the
    same outputs and statistics as the default, every rank a thread.
    `ranks_per_node` puts the ranks of a stage on nodes of that many
    (docs/gpu/device.md, "Several nodes"; the emulation gives ranks on
    other nodes no pointer into each other's memory)."""
    from functools import partial

    from coconet_ir.backend.emu import EntryCall, compile_emulated, run_emulated

    check_world(world)
    check_seed(seed)
    if devices is not None and backend != "cuda":
        raise ir.CocoError("devices name GPUs: they apply to the cuda backend only")
    if processes and backend != "emu":
        raise ir.CocoError("processes: a process per rank is the emu backend's mode")
    if calls < 1:
        raise ir.CocoError(f"the number of calls must be at least 1, got {calls}")
    ir.verify(module)
    functions = select_functions(module, entry)
    fed = prepare_inputs(functions, world, seed, inputs)
    lowered = lower(module, world, passes, threads, ranks_per_node)
    stages = PipelineChannels.of(lowered.coco).stage_indices()
    optimized = {f.sym_name.data: f for f in lowered.coco.ops if isinstance(f, FuncOp)}
    if backend not in ("emu", "cuda"):
        raise ir.CocoError(f"unknown backend {backend!r} (emu or cuda)")
    if backend == "cuda":
        from coconet_ir.backend.cuda.gpu_run import compile_gpu, run_gpu

        library = compile_gpu(lowered.cuda)
        run_calls = partial(run_gpu, devices=devices)
    else:
        library = compile_emulated(lowered.cuda, sanitize=sanitize)
        run_calls = partial(run_emulated, processes=processes)
    buffers = {
        f.sym_name.data: [
            arguments_of(optimized[f.sym_name.data], fed, world, rank)
            for rank in range(world)
        ]
        for f in functions
    }
    entry_calls = [
        EntryCall(
            f"coco_{name}",
            buffers[name],
            stage=stages[name],
            outputs={
                key: index
                for key, _, index in output_buffers(optimized[name])
                if step == calls - 1
            },
        )
        for step in range(calls)
        for name in buffers
    ]
    arrays, stats = run_calls(
        library,
        world,
        entry_calls,
        num_stages=len(buffers),
        symmetric_bytes=lowered.symmetric_bytes,
        signal_slots=max(lowered.signal_slots, 1),
        timeout=timeout,
    )
    outputs = {
        key: Output(key, t, global_of(t, np.stack(arrays[key]), world))
        for name in buffers
        for key, t, _ in output_buffers(optimized[name])
    }
    return EmulationResult(
        outputs,
        fed,
        world,
        stats=EmulatorStats(stats, world, calls) if backend == "emu" else None,
        lowered=lowered,
    )


def arguments_of(
    func: FuncOp, fed: Mapping[str, np.ndarray], world: int, rank: int
) -> list[np.ndarray]:
    """Rank `rank`'s buffers for `func`'s entry: its share of every argument
    (by the argument's layout in the optimized program), then a zeroed buffer
    per result."""
    buffers: list[np.ndarray] = []
    for position, arg in enumerate(func.body.block.args):
        assert isinstance(arg.type, coco.TensorType)
        value = DistValue.from_global(
            arg.type, fed[argument_key(func, position)], world
        )
        buffers.append(np.array(value.rank(rank), order="C", copy=True))
    for result_type in func.function_type.outputs.data:
        assert isinstance(result_type, coco.TensorType)
        dtype = storage_dtype(result_type.element_type)
        buffers.append(np.zeros(local_shape(result_type, world), dtype=dtype))
    return buffers


def updated_positions(func: FuncOp) -> list[int]:
    """The argument positions `func` updates with `coco.update`."""
    return sorted(
        op.param.index
        for op in func.body.block.ops
        if isinstance(op, coco.UpdateOp) and isinstance(op.param, BlockArgument)
    )


def output_buffers(func: FuncOp) -> list[tuple[str, coco.TensorType, int]]:
    """The outputs of `func` as the interpreter keys them (results, then
    updated parameters), with their types and the index of their buffer in
    the entry's arguments."""
    arg_types = list(func.function_type.inputs.data)
    found: list[tuple[str, Attribute, int]] = [
        (result_key(func, i), t, len(arg_types) + i)
        for i, t in enumerate(func.function_type.outputs.data)
    ]
    found += [(argument_key(func, i), arg_types[i], i) for i in updated_positions(func)]
    return [(k, t, i) for k, t, i in found if isinstance(t, coco.TensorType)]


def global_of(
    tensor_type: coco.TensorType, stacked: np.ndarray, world: int
) -> np.ndarray:
    """The global value of per-rank arrays stacked `(N, *local)`; a replicated
    value whose ranks disagree is an error of the generated code."""
    layout = tensor_type.layout
    value = DistValue(tensor_type, stacked, world)
    if layout.is_replicated and not all(
        np.array_equal(stacked[0], stacked[r], equal_nan=True) for r in range(world)
    ):
        raise ir.CocoError(
            f"the emulated ranks disagree on a replicated value of type {tensor_type}"
        )
    if layout.is_replicated:
        return stacked[0]
    return value.global_value()


def run_triton(
    module: ModuleOp,
    world: int,
    *,
    passes: str = DEFAULT_PASSES,
    inputs: Mapping[str, np.ndarray] | None = None,
    seed: int = 0,
    entry: str | None = None,
    calls: int = 1,
    timeout: float = 300.0,
) -> RunResult:
    """Run `module` on `world` ranks through the `triton` target
    (docs/triton.md, "The triton target"): optimize (`passes`) and lower it,
    print it as a Triton module, run every rank as a process over shared
    memory (`coconet_ir.triton.spawn`; Triton's interpreter without a GPU),
    `calls` times back to back, on the interpreter's inputs; the outputs of
    the last call as the interpreter keys them, to compare with
    `compare_runs`. A CocoError for a bad request, a program the target
    refuses, or a rank that fails or times out."""
    from coconet_ir.backend.triton import printer
    from coconet_ir.backend.triton.run import run_rank, write_module
    from coconet_ir.triton import spawn

    check_world(world)
    check_seed(seed)
    if calls < 1:
        raise ir.CocoError(f"the number of calls must be at least 1, got {calls}")
    ir.verify(module)
    functions = select_functions(module, entry)
    fed = prepare_inputs(functions, world, seed, inputs)
    coco_level, device = lower_to_device(module, world, passes)
    stages = PipelineChannels.of(coco_level).stage_indices()
    if any(stages.values()):
        raise ir.CocoError("--backend triton runs one stage (no pipelines yet)")
    path = write_module(printer.emit_triton(device))
    optimized = {f.sym_name.data: f for f in coco_level.ops if isinstance(f, FuncOp)}
    names = [f.sym_name.data for f in functions]
    wanted = {
        name: [i for _, _, i in output_buffers(optimized[name])] for name in names
    }
    entries = [
        [(name, arguments_of(optimized[name], fed, world, rank)) for name in names]
        for rank in range(world)
    ]
    results = spawn(
        lambda ranks: run_rank(ranks, path, entries[ranks.rank], wanted, calls),
        world,
        nbytes=max(symmetric_bytes(device), 1),
        slots=max(signal_slots(device), 1),
        timeout_s=timeout,
    )
    outputs = {}
    for name in names:
        for position, (key, t, _) in enumerate(output_buffers(optimized[name])):
            stacked = np.stack([results[r][name][position] for r in range(world)])
            outputs[key] = Output(key, t, global_of(t, stacked, world))
    return RunResult(outputs, fed, world)


# ============================================================================
# Comparing with the interpreter
# ============================================================================


def reduction_length(module: ModuleOp, world: int) -> int:
    """The longest chain of sums behind any output of `module` on `world`
    ranks: a matmul's K, the elements a reduce or norm adds, and the ranks a
    cross-rank sum adds (an upper bound; docs/interpreter.md)."""
    longest = 1
    for op in module.walk():
        match op:
            case coco.MatmulOp() | coco.BatchMatmulOp():
                longest = max(longest, coco.tensor_type(op.lhs).dims[-1])
            case coco.ReduceOp():
                dims = coco.tensor_type(op.operand).dims
                longest = max(longest, prod(dims[d] for d in op.reduced_dims))
            case coco.NormOp():
                longest = max(longest, prod(coco.tensor_type(op.operand).dims))
            case _:
                pass
    return longest + world


def compare_runs(
    reference: RunResult, actual: RunResult, module: ModuleOp | None = None
) -> Comparison:
    """Whether `actual` (a run of generated code: real arithmetic in another
    order) gives `reference`'s outputs (the interpreter's, on the same
    inputs), within each element type's tolerance plus the reduction bound
    of `compare_outputs` for the longest sum in `module` (if given)."""
    world = reference.world
    length = reduction_length(module, world) if module is not None else world
    differences: list[Difference] = []
    for key, expected in reference.outputs.items():
        got = actual.outputs.get(key)
        if got is None:
            differences.append(Difference(key, math.inf, math.inf, "missing"))
            continue
        ref, act = per_rank_views(expected, got, world)
        found = compare_outputs(
            ref,
            act,
            expected.type.element_type,
            reduction_length=length,
            key=key,
        )
        if found is not None:
            differences.append(found)
    return Comparison(
        not differences,
        differences[0] if differences else None,
        list(reference.outputs),
        differences,
    )


# ============================================================================
# What the emulator counted
# ============================================================================


@dataclass(frozen=True)
class LaunchTimeline:
    """One launch of a tile kernel on one rank (docs/gpu/emulation.md, "Timeline"):
    the event numbers, on one process-wide counter, of its blocks' "tile
    computed" marks and of their stores into peers (-1: none). Two events
    of one thread are numbered in program order."""

    kernel: str
    rank: int
    """Global: `stage * world + rank`."""
    tiles: int
    first_tile: int
    last_tile: int
    remote_stores: int
    first_remote_store: int
    last_remote_store: int

    @property
    def overlapped(self) -> bool:
        """Communication started before computation ended: a remote store
        was numbered before the last tile was computed."""
        return 0 <= self.first_remote_store < self.last_tile


@dataclass(frozen=True)
class StreamEvent:
    """One GEMM or copy a stream ran (docs/gpu/emulation.md, "Timeline"): the event
    numbers of its start and end on the counter the tile marks use, so that
    "this copy started before that GEMM ended" is an order the run had."""

    rank: int
    """Global: `stage * world + rank`."""
    stream: int
    kind: str
    """`gemm`, `copy` (within the rank) or `peer_copy` (into `peer`)."""
    peer: int
    """The global rank a peer copy stored into; -1 otherwise."""
    start: int
    end: int

    def overlaps(self, other: StreamEvent) -> bool:
        """Both were in flight at once: each started before the other ended."""
        return self.start < other.end and other.start < self.end


class EmulatorStats:
    """What an emulated run did, per call (docs/gpu/emulation.md): kernel launches
    per rank and stream, library calls, bytes each rank sent to each other
    rank (by stream), and the timeline of each tile kernel's launches. `raw`
    is the emulator's JSON."""

    def __init__(self, raw: dict[str, Any], world: int, calls: int = 1):
        self.raw = raw
        self.world = world
        self.calls = calls
        self.num_stages = int(raw.get("num_stages", 1))
        self.bytes = np.asarray(raw["bytes"], dtype=np.int64)
        """`[src, dst, stream]` over global ranks (`stage * N + rank`)."""
        self.launches = np.asarray(raw["launches"], dtype=np.int64)
        """`[global rank, stream]`."""
        self.timeline = [LaunchTimeline(**entry) for entry in raw.get("timeline", [])]
        """The launches that marked tiles (tile kernels), every call's, in
        the order they ended."""
        self.stream_events = [
            StreamEvent(**entry) for entry in raw.get("stream_events", [])
        ]
        """Every call's GEMMs and copies, in the order they ended."""

    def events_of(self, rank: int, stream: int, kind: str) -> list[StreamEvent]:
        """The `kind` events of global rank `rank` on `stream`, in the
        stream's order."""
        found = [
            e
            for e in self.stream_events
            if (e.rank, e.stream, e.kind) == (rank, stream, kind)
        ]
        return sorted(found, key=lambda e: e.start)

    def __repr__(self) -> str:
        return (
            f"EmulatorStats(launches={self.launches.tolist()}, "
            f"bytes_per_rank={self.bytes_per_rank().tolist()}, calls={self.calls})"
        )

    def stage_ranks(self, stage: int) -> range:
        return range(stage * self.world, (stage + 1) * self.world)

    def within(self, stage: int) -> np.ndarray:
        """`[src, dst, stream]` between the ranks of `stage`, per call."""
        ranks = self.stage_ranks(stage)
        block = self.bytes[ranks.start : ranks.stop, ranks.start : ranks.stop]
        return block // self.calls

    def bytes_per_rank(self, stage: int = 0) -> np.ndarray:
        """Bytes each rank of `stage` sends to the other ranks of its stage,
        per call."""
        return self.within(stage).sum(axis=(1, 2))

    def bytes_to_other_stages(self, stage: int = 0) -> np.ndarray:
        """Bytes each rank of `stage` sends to ranks of other stages, per call."""
        ranks = self.stage_ranks(stage)
        rows = self.bytes[ranks.start : ranks.stop]
        total = rows.sum(axis=(1, 2)) - rows[:, ranks.start : ranks.stop].sum(
            axis=(1, 2)
        )
        return total // self.calls

    def launches_per_call(self, stage: int = 0) -> np.ndarray:
        """Kernel launches of each rank of `stage` per call, by stream."""
        ranks = self.stage_ranks(stage)
        return self.launches[ranks.start : ranks.stop] // self.calls

    @property
    def total_launches(self) -> int:
        """Kernel launches of rank 0 of stage 0 per call."""
        return int(self.launches_per_call(0)[0].sum())

    def disagreements(self, predicted: Traffic, stage: int) -> list[str]:
        """How this stage's counts differ from the static prediction (empty
        when they agree exactly)."""
        problems: list[str] = []
        launches = self.launches_per_call(stage)
        for rank in range(self.world):
            for stream in range(launches.shape[1]):
                want = predicted.launches.get(stream, 0)
                if launches[rank, stream] != want:
                    problems.append(
                        f"rank {rank} stream {stream}: {launches[rank, stream]} "
                        f"launches, predicted {want}"
                    )
        within = self.within(stage)
        for stream in range(within.shape[2]):
            want = predicted.sent.get(stream)
            got = within[:, :, stream]
            if want is None:
                want = np.zeros_like(got)
            if not np.array_equal(got, want):
                problems.append(
                    f"stream {stream}: bytes sent {got.tolist()}, predicted "
                    f"{want.tolist()}"
                )
        to_stages = sum(
            predicted.sent_to_stage.values(), np.zeros(self.world, dtype=np.int64)
        )
        got_to_stages = self.bytes_to_other_stages(stage)
        if not np.array_equal(got_to_stages, to_stages):
            problems.append(
                f"bytes to other stages {got_to_stages.tolist()}, predicted "
                f"{to_stages.tolist()}"
            )
        return problems
