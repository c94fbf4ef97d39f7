"""The two-stream overlap and the pipeline's sliced send, end to end: every
overlap example, coco-optimized, lowered, printed as CUDA C and run under the
CPU emulation on 2 and 4 ranks matches the interpreter; the launches and NCCL
calls per stream are what the device-level IR says statically (stream 0 the
gemms, stream 1 the collectives); the streams really run concurrently (a
stream-1 kernel waiting for a flag that a later stream-0 kernel sets finishes,
and deadlocks once everything is on one stream); three back-to-back calls
are ThreadSanitizer-clean; the pipeline moves S/N bytes per rank across the
stage boundary."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from fused_emulation import cuda_source, emulate
from helpers import EXAMPLES_DIR
from xdsl.dialects import func, gpu
from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc
from coconet_ir.backend.emu import (
    EmulationError,
    EntryCall,
    compile_emulated,
    run_emulated,
)
from coconet_ir.dialects import coco
from coconet_ir.dialects.coco_gpu import (
    GemmOp,
    NcclCollectiveOp,
    NcclRecvOp,
    NcclSendOp,
    RecordEventOp,
    WaitEventOp,
    stream_of,
)
from coconet_ir.interpreter.inputs import draw_inputs
from coconet_ir.interpreter.values import DistValue

OVERLAP_EXAMPLES = [
    "megatron",
    "pipeline",
    "sequence_parallel",
    "matmul_reduce_scatter",
    "sequence_parallel_mlp",
]
STREAMS = 4  # the emulation's COCO_MAX_STREAMS


@cache
def optimized(name: str) -> ModuleOp:
    return cc.Pipeline("coco-optimize{overlap_mode=chunks}")(
        cc.parse_file(str(EXAMPLES_DIR / f"{name}.mlir"))
    )


def lowered(name: str, world: int) -> ModuleOp:
    return cc.Pipeline(f"convert-coco-to-gpu{{world={world} threads=32}}")(
        optimized(name).clone()
    )


def static_counts(function: func.FuncOp) -> dict[str, list[int]]:
    """Launches, NCCL calls (send/recv included) and gemms per stream, read
    from the device-level IR: unrolled chunks make them static."""
    counts = {k: [0] * STREAMS for k in ("launches", "nccl_calls", "gemms")}
    for op in function.walk():
        kind = (
            "launches"
            if isinstance(op, gpu.LaunchFuncOp)
            else "nccl_calls"
            if isinstance(op, NcclCollectiveOp | NcclSendOp | NcclRecvOp)
            else "gemms"
            if isinstance(op, GemmOp)
            else None
        )
        if kind is not None:
            counts[kind][stream_of(op)] += 1
    return counts


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("name", OVERLAP_EXAMPLES)
def test_overlap_examples_match_the_interpreter(name: str, world: int):
    module = optimized(name)
    assert any(isinstance(op, coco.OverlapOp) for op in module.walk())
    run = emulate(module.clone(), world, seeds=(0,))
    for key, value in run.expected[0].items():
        np.testing.assert_allclose(
            run.actual[0][key], value, rtol=1e-5, atol=1e-5, err_msg=key
        )
    functions = [f for f in run.lowered.ops if isinstance(f, func.FuncOp)]
    for stage, function in enumerate(functions):
        counts = static_counts(function)
        for kind, per_stream in counts.items():
            for rank in range(world):
                assert run.stats[kind][stage * world + rank] == per_stream, (
                    function.sym_name.data,
                    kind,
                )


def overlap_function(name: str, world: int) -> func.FuncOp:
    module = lowered(name, world)
    (function,) = [
        f
        for f in module.ops
        if isinstance(f, func.FuncOp)
        and any(isinstance(o, RecordEventOp) for o in f.walk())
    ]
    return function


@pytest.mark.parametrize(
    "name, kernel_on_1",
    [
        ("matmul_reduce_scatter", None),
        ("sequence_parallel", None),
        ("megatron", "sum_rs_fused"),
        ("pipeline", None),
    ],
)
def test_stream_roles(name: str, kernel_on_1: str | None):
    """Gemms on stream 0; every collective (NCCL call or fused kernel) of the
    overlap on stream 1; the region starts and ends with an event pair."""
    function = overlap_function(name, 2)
    ops = list(function.body.block.ops)
    gemms = [o for o in ops if isinstance(o, GemmOp)]
    assert len(gemms) == 4 and all(stream_of(o) == 0 for o in gemms)
    inside = ops[
        next(i for i, o in enumerate(ops) if isinstance(o, RecordEventOp)) : max(
            i for i, o in enumerate(ops) if isinstance(o, WaitEventOp)
        )
    ]
    collectives = [o for o in inside if isinstance(o, NcclCollectiveOp)]
    fused = [
        o
        for o in inside
        if isinstance(o, gpu.LaunchFuncOp)
        and kernel_on_1 is not None
        and kernel_on_1 in o.kernel.nested_references.data[-1].data
    ]
    assert len(collectives) + len(fused) == 4
    assert all(stream_of(o) == 1 for o in [*collectives, *fused])
    first, last = inside[0], ops[ops.index(inside[-1]) + 1]
    assert isinstance(first, RecordEventOp) and stream_of(first) == 0
    assert isinstance(ops[1 + ops.index(first)], WaitEventOp)
    assert stream_of(ops[1 + ops.index(first)]) == 1
    assert isinstance(last, WaitEventOp) and stream_of(last) == 0
    assert stream_of(last.event.owner) == 1  # type: ignore[arg-type]
    # Nothing after the join runs on stream 1.
    assert all(stream_of(o) == 0 for o in ops[ops.index(last) :])


FLAG_KERNELS = """
__global__ void test_wait_flag(coco_peers peers) {
  if (threadIdx.x == 0 && blockIdx.x == 0)
    coco::wait_signal(coco::own_slot(peers, 0), 1);
}
__global__ void test_set_flag(coco_peers peers) {
  if (threadIdx.x == 0 && blockIdx.x == 0)
    coco::signal(coco::own_slot(peers, 0), 1);
}
"""


def with_flags(source: str, serialize: bool) -> str:
    """The printed matmul_reduce_scatter with a stream-1 kernel that waits for
    a flag before the FIRST chunk's reduce_scatter, and a stream-0 kernel that
    sets it after the LAST chunk's gemm: it ends only if stream 1 runs while
    stream 0 still multiplies."""
    include = '#include "coco_runtime.h"\n'
    source = source.replace(include, include + FLAG_KERNELS, 1)
    lines = source.splitlines()
    first = next(i for i, line in enumerate(lines) if "ncclReduceScatter(" in line)
    last = max(i for i, line in enumerate(lines) if "cublasGemmEx(" in line)
    launch = (
        "  COCO_LAUNCH({}, dim3(1u), dim3(1u), 0, ctx->streams[{}], "
        "coco::peers_of(ctx));"
    )
    lines.insert(last + 1, launch.format("test_set_flag", 0))
    lines.insert(first, launch.format("test_wait_flag", 1))
    text = "\n".join(lines) + "\n"
    if serialize:
        text = text.replace("ctx->streams[1]", "ctx->streams[0]")
    return text


def flag_run(serialize: bool, world: int = 2) -> dict:
    module = lowered("matmul_reduce_scatter", world)
    library = compile_emulated(with_flags(cuda_source(module), serialize))
    (function,) = [
        f for f in optimized("matmul_reduce_scatter").ops if isinstance(f, func.FuncOp)
    ]
    inputs = draw_inputs(optimized("matmul_reduce_scatter"), world)
    args: list[list[np.ndarray]] = [[] for _ in range(world)]
    for position, arg in enumerate(function.body.block.args):
        key = f"{function.sym_name.data}.arg{position}"
        value = DistValue.from_global(arg.type, inputs[key], world)  # type: ignore[arg-type]
        for r in range(world):
            args[r].append(np.array(value.rank(r), copy=True, order="C"))
    for r in range(world):
        args[r].append(np.zeros((32 // world, 32), np.float32))
    _, stats = run_emulated(
        library,
        world,
        [EntryCall("coco_matmul_reduce_scatter", args)],
        signal_slots=64,
        watchdog=5,
        timeout=120,
    )
    return stats


def test_streams_really_overlap():
    stats = flag_run(serialize=False)
    assert stats["kernels"]["test_wait_flag"] == 2
    assert [s[:2] for s in stats["nccl_calls"]] == [[0, 4]] * 2


def test_one_stream_would_deadlock():
    """The control: the same program on stream 0 only never ends (the
    watchdog names the wait), so the test above can fail."""
    with pytest.raises(EmulationError, match=r"(?i)wait|stuck|timeout|timed out"):
        flag_run(serialize=True)


@pytest.mark.parametrize("name", OVERLAP_EXAMPLES)
def test_overlap_is_thread_sanitizer_clean_three_calls_back_to_back(name: str):
    module = optimized(name).clone()
    run = emulate(module, 2, seeds=(0, 1, 2), sanitize="thread")
    for expected, actual in zip(run.expected, run.actual):
        for key, value in expected.items():
            np.testing.assert_allclose(actual[key], value, rtol=1e-5, atol=1e-5)
    overlapped = overlap_function(name, 2)
    gemms = static_counts(overlapped)["gemms"][0]
    stage = [f for f in run.lowered.ops if isinstance(f, func.FuncOp)].index(
        next(
            f
            for f in run.lowered.ops
            if isinstance(f, func.FuncOp)
            and f.sym_name.data == overlapped.sym_name.data
        )
    )
    assert [s[0] for s in run.stats["gemms"][2 * stage : 2 * stage + 2]] == [
        3 * gemms
    ] * 2


@pytest.mark.parametrize("world", [2, 4])
def test_pipeline_sends_the_slice(world: int):
    """After coco-fuse-send the sender's fused kernel is followed by a send of
    its slice (S/N bytes per rank across the stage boundary, S the layer's
    activation), the receiver gathers it inside the overlap with its matmul,
    on stream 1."""
    module = lowered("pipeline", world)
    stage1, stage2 = [f for f in module.ops if isinstance(f, func.FuncOp)]
    sends = [o for o in stage1.walk() if isinstance(o, NcclSendOp)]
    assert len(sends) == 1
    assert sends[0].input.type.get_shape() == (4, 8 // world, 64)  # type: ignore[attr-defined]
    launches = [
        o for o in stage1.body.block.ops if isinstance(o, gpu.LaunchFuncOp | NcclSendOp)
    ]
    assert isinstance(launches[-1], NcclSendOp)  # after the fused kernel
    fused = launches[-2]
    assert isinstance(fused, gpu.LaunchFuncOp)
    assert "sum_rs_fused" in fused.kernel.nested_references.data[-1].data
    gathers = [o for o in stage2.walk() if isinstance(o, NcclCollectiveOp)]
    assert len(gathers) == 4 and all(stream_of(o) == 1 for o in gathers)
    run = emulate(optimized("pipeline").clone(), world, seeds=(0,))
    for key, value in run.expected[0].items():
        np.testing.assert_allclose(run.actual[0][key], value, rtol=1e-5, atol=1e-5)
    moved = np.array(run.stats["bytes"]).sum(axis=-1)
    slice_bytes = 4 * 8 * 64 * 4 // world
    across = moved[:world, world:]  # stage 1's ranks -> stage 2's ranks
    assert (across == np.diag([slice_bytes] * world)).all()
