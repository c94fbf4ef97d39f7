"""Fused kernels with row reductions (docs/gpu/fused.md, "Row reductions: a
norm in the kernel"): the sequence-parallel LayerNorm and RMSNorm, and
Megatron's layer with its LayerNorm, each ONE launch after coco-optimize, run
under the CPU emulation on N ranks, three calls back to back, against the
interpreter; chunks of a few rows and a short last chunk; rows of thousands
of elements; a row reduction after a slice reduction (a cooperative launch);
ThreadSanitizer; and the one-line mistakes the comparison or the sanitizer
must catch."""

from __future__ import annotations

import shutil

import fused_emulation
import pytest
from fused_emulation import emulate
from helpers import example
from test_fused_emulated import CALLS, assert_traffic, launches_of
from test_fused_reductions_emulated import assert_close, mutated
from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc
from coconet_ir.analysis.fused_plan import FusedPlan
from coconet_ir.backend.emu import EmulationError
from coconet_ir.dialects import coco
from coconet_ir.dialects.coco_gpu import COOPERATIVE_ATTR

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")

NORMS = ["sequence_parallel_norm", "sequence_parallel_rmsnorm", "megatron_norm"]
TOLERANCE = {"sequence_parallel_rmsnorm": (1e-2, 1e-2)}
"""bf16 (RMSNorm's example); f32 otherwise: rtol 1e-5, atol 1e-5."""


def optimized(module: ModuleOp) -> ModuleOp:
    return cc.Pipeline("coco-optimize")(module)


def the_plan(module: ModuleOp, world: int) -> FusedPlan:
    (fusion,) = (op for op in module.walk() if isinstance(op, coco.FusionOp))
    plan = FusedPlan.of(fusion, world)
    assert isinstance(plan, FusedPlan), plan
    return plan


def cooperative_launches(run) -> int:
    return sum(
        COOPERATIVE_ATTR in op.attributes
        for op in run.lowered.walk()
        if op.name == "gpu.launch_func"
    )


def check(run, name: str) -> None:
    rtol, atol = TOLERANCE.get(name, (1e-5, 1e-5))
    assert_close(run, rtol=rtol, atol=atol)


@pytest.mark.parametrize("world", [2, 4, 8])
@pytest.mark.parametrize("name", NORMS)
def test_the_norm_chain_is_one_launch(name: str, world: int):
    """reduce_scatter, the residual, the norm's row statistics and the
    all_gather in one ordinary (not cooperative) launch; no NCCL; each rank
    moves the fused all-reduce's bytes exactly (rows stay on the rank)."""
    module = optimized(example(name))
    plan = the_plan(module, world)
    assert plan.row_reductions and not plan.cooperative
    run = emulate(module, world)
    check(run, name)
    assert launches_of(run, "fused") == CALLS * world
    assert sum(run.stats["kernels"].values()) == CALLS * world
    assert sum(map(sum, run.stats["nccl_calls"])) == 0
    assert cooperative_launches(run) == 0
    assert_traffic(run, module, world)


@pytest.mark.parametrize(
    ("world", "chunk"),
    [
        (4, 40),  # rounded up to 2 rows of 32: 8 chunks a rank
        (8, 96),  # 3 rows a chunk, 8 rows a rank: the last chunk is short
        (2, 1),  # one row a chunk
    ],
)
def test_chunks_of_whole_rows(world: int, chunk: int):
    module = optimized(example("sequence_parallel_norm"))
    plan = FusedPlan.of(the_plan(module, world).fusion, world, chunk)
    assert isinstance(plan, FusedPlan)
    assert plan.chunk_size % plan.row_length == 0
    run = emulate(module, world, fused_chunk=chunk)
    check(run, "sequence_parallel_norm")
    assert launches_of(run, "fused") == CALLS * world


def wide_norm(rows: int, hidden: int, element) -> ModuleOp:
    """The sequence-parallel LayerNorm at a model's width."""

    @cc.function
    def wide(
        partial: cc.tensor([rows, hidden], element, cc.local),
        r: cc.tensor([rows, hidden], element, cc.sliced(0)),
        gamma: cc.tensor([hidden], element, cc.replicated),
        beta: cc.tensor([hidden], element, cc.replicated),
    ):
        h = cc.reduce_scatter(partial, "sum", 0) + r
        return h, cc.all_gather(cc.layer_norm(h, gamma, beta))

    return optimized(cc.module(wide))


@pytest.mark.parametrize(("element", "tolerance"), [("f32", 1e-5), ("bf16", 1e-2)])
def test_rows_of_thousands_of_elements(element: str, tolerance: float):
    """H = 3072 (a row is many vectors per thread, and longer than the
    default chunk), 8 rows on 4 ranks."""
    module = wide_norm(8, 3072, getattr(cc, element))
    assert the_plan(module, 4).row_length == 3072
    run = emulate(module, 4, seeds=(0,))
    assert_close(run, rtol=tolerance, atol=tolerance)
    assert launches_of(run, "fused") == 4


def clipped_norm() -> ModuleOp:
    """A slice reduction before the rows: the residual scaled by its global
    norm (a scalar boundary), then its RMSNorm (a row boundary): one
    cooperative launch of three stages."""

    @cc.function
    def clipped(
        partial: cc.tensor([32, 64], cc.f32, cc.local),
        w: cc.tensor([64], cc.f32, cc.replicated),
    ):
        h = cc.reduce_scatter(partial, "sum", 0)
        total = cc.all_reduce(cc.reduce(h * h, "sum", [0, 1]))
        scaled = h / cc.sqrt(total)
        return cc.all_gather(cc.rms_norm(scaled, w))

    return optimized(cc.module(clipped))


@pytest.mark.parametrize("world", [2, 8])
def test_a_scalar_boundary_before_the_rows(world: int):
    module = clipped_norm()
    plan = the_plan(module, world)
    assert plan.cooperative and plan.stage_count == 3
    assert plan.segments == [[0], [1, 2]]
    run = emulate(module, world, fused_chunk=64)
    assert_close(run, rtol=1e-5, atol=1e-5)
    assert launches_of(run, "fused") == CALLS * world
    assert cooperative_launches(run) == 1


def test_thread_sanitizer():
    """Rows stored by thread 0 and read by the block after the barrier:
    three launches back to back under ThreadSanitizer, no report."""
    module = optimized(example("sequence_parallel_norm"))
    run = emulate(module, 4, fused_chunk=64, sanitize="thread")
    check(run, "sequence_parallel_norm")


MUTATIONS = {
    # The next stage reads the rows before thread 0 has stored them (the
    # barrier between a row stage and the next).
    "barrier": (
        r"(\n\s*)__syncthreads\(\);(\n\s*const int64_t \w+ = chunk\w* \* )",
        r"\1\2",
    ),
    # Element l reads the statistic of the row after its own.
    "row": (
        r"rows0\[\(int64_t\)\(\(uint64_t\)(\w+) / ",
        r"rows0[1 + (int64_t)((uint64_t)\1 / ",
    ),
    # A row's accumulator is not started again: it adds up the rows before.
    "reset": (r"(for \(int64_t row_1 = [^\n]*\n)\s*acc_1\[0\] = 0\.0f;", r"\1"),
}


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_a_mistake_is_caught(monkeypatch: pytest.MonkeyPatch, mutation: str):
    monkeypatch.setattr(fused_emulation, "cuda_source", mutated(*MUTATIONS[mutation]))
    module = optimized(example("sequence_parallel_norm"))
    with pytest.raises((EmulationError, AssertionError)):
        run = emulate(module, 4, fused_chunk=64, sanitize="thread")
        check(run, "sequence_parallel_norm")


def saved_statistics() -> ModuleOp:
    """A LayerNorm forward as training runs it (torch's native_layer_norm):
    the normalized rows gathered, and each row's sum, mean and 1 / std
    returned for the backward pass."""

    @cc.function
    def saved(
        partial: cc.tensor([32, 64], cc.f32, cc.local),
        r: cc.tensor([32, 64], cc.f32, cc.sliced(0)),
        gamma: cc.tensor([64], cc.f32, cc.replicated),
    ):
        h = cc.reduce_scatter(partial, "sum", 0) + r
        total = cc.reduce(h, "sum", 1, keep_dims=True)
        mean = total * (1 / 64)
        centred = h - mean
        variance = cc.reduce(centred * centred, "sum", 1, keep_dims=True) * (1 / 64)
        rstd = cc.rsqrt(variance + 1e-5)
        y = centred * rstd * gamma
        return cc.all_gather(y), total, mean, rstd

    return optimized(cc.module(saved))


@pytest.mark.parametrize(("world", "chunk"), [(2, None), (4, 128), (8, 64)])
def test_saved_row_statistics_stay_in_the_kernel(world: int, chunk: int | None):
    """Yielded rows: a row reduction's rows buffer is its result, rows
    computed from it are stored once per row; still one ordinary launch."""
    module = saved_statistics()
    plan = the_plan(module, world)
    assert len(plan.row_reductions) == 2 and not plan.cooperative
    run = emulate(module, world, fused_chunk=chunk)
    assert_close(run, rtol=1e-5, atol=1e-5)
    assert sum(run.stats["kernels"].values()) == CALLS * world
