"""The tile-granular kernels (coconet_ir/lowering/tile_collectives.py):
embedding + all_to_all, GEMV + all_reduce, GEMM + all_to_all: the device IR
against the
interpreter (numpy evaluator), the printed CUDA C under the CPU emulation on
2, 4 and 8 ranks, three calls back to back (one launch per call, no NCCL,
(N-1)/N of each rank's pooled block into its peers), ThreadSanitizer, and a
mutation of the tile counters that the sanitizer must catch."""

from __future__ import annotations

import re
import shutil
import warnings
from math import prod
from pathlib import Path

import fused_emulation
import numpy as np
import pytest
from device_eval import run_device
from fused_emulation import emulate, peer_bytes
from test_fused_emulated import CALLS, launches_of
from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc
from coconet_ir.backend.emu import EmulationError
from coconet_ir.dialects.coco import FusionOp
from coconet_ir.interpreter.inputs import draw_inputs
from coconet_ir.lowering.tile_collectives import (
    EmbeddingAllToAll,
    GemmAllToAll,
    GemvAllReduce,
)

DLRM = """
func.func @dlrm(%t: !coco.tensor<8x16x8xELT, sliced<0>>, %i: !coco.tensor<8x8x3xi32, IDX>) -> !coco.tensor<8x8x8xELT, sliced<1>> {
  %e = coco.embedding %t, %i pooling = POOL {name = "emb"} : (!coco.tensor<8x16x8xELT, sliced<0>>, !coco.tensor<8x8x3xi32, IDX>) -> !coco.tensor<8x8x8xELT, sliced<0>>
  %a = coco.all_to_all %e dim = 1 : !coco.tensor<8x8x8xELT, sliced<0>> -> !coco.tensor<8x8x8xELT, sliced<1>>
  func.return %a : !coco.tensor<8x8x8xELT, sliced<1>>
}
"""  # noqa: E501


def dlrm(element="f32", indices="sliced<0>", pooling="sum", length=3) -> ModuleOp:
    text = DLRM.replace("ELT", element).replace("IDX", indices)
    text = text.replace("8x8x3xi32", f"8x8x{length}xi32")
    return cc.Pipeline("coco-fuse-collective")(cc.parse(text.replace("POOL", pooling)))


def assert_close(run, rtol: float) -> None:
    for expected, actual in zip(run.expected, run.actual, strict=True):
        for key, want in expected.items():
            np.testing.assert_allclose(
                actual[key].astype(np.float64), want.astype(np.float64), rtol=rtol
            )


def test_the_plan():
    module = dlrm()
    (fusion,) = [op for op in module.walk() if isinstance(op, FusionOp)]
    plan = EmbeddingAllToAll.of(fusion, 4)
    assert plan is not None
    assert (plan.tables, plan.bags, plan.tile) == (2, 2, 16)
    assert plan.peer_bytes() == 2 * 16 * 4  # T' tiles of B' x D f32
    assert plan.slots == 4 + 4 * 2


@pytest.mark.parametrize("world", [2, 4, 8])
@pytest.mark.parametrize("indices", ["sliced<0>", "replicated"])
def test_device_ir_matches_the_interpreter(world: int, indices: str):
    module = dlrm(indices=indices, pooling="max")
    lowered = cc.Pipeline(f"convert-coco-to-gpu{{world={world}}}")(module)
    launches = [op for op in lowered.walk() if op.name == "gpu.launch_func"]
    assert len(launches) == 1
    assert not [op for op in lowered.walk() if op.name.startswith("coco_gpu.nccl")]
    inputs = draw_inputs(module, world, seed=3)
    expected = cc.interpret(module, world, seed=3)["dlrm.result0"]
    got = run_device(lowered, world, inputs)["dlrm.result0"]
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("pooling", ["sum", "mean", "max"])
@pytest.mark.parametrize("misaligned", [False, True])
def test_bag_tiles_device_ir_matches_the_interpreter(
    monkeypatch: pytest.MonkeyPatch, pooling: str, misaligned: bool
):
    """Tiles of one bag (`EMBEDDING_TILE_ELEMENTS` = D): B' tiles per table
    and destination; a row of 8 f32 is two 16-byte vectors, 4 indices a
    bag are pooled 4 at a time; on buffers that start off 16 bytes, the
    scalar path."""
    import device_eval

    from coconet_ir.lowering import embedding, tile_collectives

    monkeypatch.setattr(tile_collectives, "EMBEDDING_TILE_ELEMENTS", 8)
    module = dlrm(pooling=pooling, length=4)
    (fusion,) = [op for op in module.walk() if isinstance(op, FusionOp)]
    plan = EmbeddingAllToAll.of(fusion, 2)
    assert plan is not None
    assert (plan.bag_tile, plan.chunks, plan.per_peer, plan.tile) == (1, 4, 16, 8)
    assert plan.peer_bytes() == 4 * 4 * 8 * 4  # T' x B' x D f32, as before
    vectors = embedding.vector_of(plan.lookup), embedding.unroll_of(plan.lookup)
    assert vectors == (4, 4)
    if misaligned:
        monkeypatch.setattr(device_eval, "POINTER_OFFSET", 4)
    check_one_launch_equals_interpreter(module, 2, seed=7, threads=32)


def test_rows_not_whole_vectors_have_only_the_scalar_path():
    """D = 3 f32 (12 bytes a row): no vector loads, no alignment check."""
    text = DLRM.replace("ELT", "f32").replace("IDX", "sliced<0>")
    text = text.replace("POOL", "sum").replace("x8xf32", "x3xf32")
    module = cc.Pipeline("coco-fuse-collective")(cc.parse(text))
    lowered = cc.Pipeline("convert-coco-to-gpu{world=4}")(module)
    names = {op.name for op in lowered.walk()}
    assert "gpu.launch_func" in names and "vector.load" not in names
    assert "memref.extract_aligned_pointer_as_index" not in names
    check_one_launch_equals_interpreter(module, 4, seed=9, threads=32)


pytestmark_emulation = pytest.mark.skipif(
    shutil.which("g++") is None, reason="needs g++"
)


@pytestmark_emulation
@pytest.mark.parametrize(
    "world,element,indices,pooling",
    [
        (2, "f32", "sliced<0>", "sum"),
        (4, "bf16", "replicated", "mean"),
        (8, "f32", "sliced<0>", "max"),
    ],
)
def test_one_launch_and_the_all_to_all_bytes(world, element, indices, pooling):
    module = dlrm(element, indices, pooling)
    run = emulate(module, world, threads=16)
    assert_close(run, rtol=1e-2 if element == "bf16" else 1e-6)
    assert launches_of(run, "fused") == CALLS * world
    assert sum(run.stats["kernels"].values()) == CALLS * world
    assert sum(map(sum, run.stats["nccl_calls"])) == 0
    # Each rank's pooled block is T/N x B x D; (N-1)/N of it leaves, evenly.
    block = 8 // world * 8 * 8 * (2 if element == "bf16" else 4)
    within = peer_bytes(run.stats, world)
    for r in range(world):
        for p in range(world):
            assert within[r, p] == (0 if p == r else CALLS * block // world)


@pytestmark_emulation
@pytest.mark.parametrize("world", [1, 4])
def test_bag_tiles_under_the_emulator(monkeypatch: pytest.MonkeyPatch, world: int):
    """Tiles of two bags, rows of 8 bf16 (one 16-byte vector), 4 indices
    pooled at once: the interpreter's result, one launch a call, and each
    rank's part of the all_to_all, exactly, into each peer."""
    from coconet_ir.lowering import tile_collectives

    monkeypatch.setattr(tile_collectives, "EMBEDDING_TILE_ELEMENTS", 16)
    run = emulate(dlrm("bf16", pooling="mean", length=4), world, threads=16)
    assert_close(run, rtol=1e-2)
    assert launches_of(run, "fused") == CALLS * world
    block = 8 // world * 8 * 8 * 2
    within = peer_bytes(run.stats, world)
    for r in range(world):
        for p in range(world):
            assert within[r, p] == (0 if p == r else CALLS * block // world)


@pytestmark_emulation
def test_the_models_rows_under_the_emulator():
    """The model's rows (128 bf16: 16 lanes of 16 bytes a bag) and bags (32
    indices: 4 steps of 8) at a smaller size, 128 bags on 2 ranks: tiles of
    16 bags, 4 per table and destination; the interpreter's result and the
    all_to_all's bytes exactly."""
    text = DLRM.replace("ELT", "bf16").replace("IDX", "sliced<0>")
    text = text.replace("POOL", "sum").replace("8x16x8x", "8x64x128x")
    text = text.replace("8x8x3xi32", "8x128x32xi32").replace("8x8x8x", "8x128x128x")
    module = cc.Pipeline("coco-fuse-collective")(cc.parse(text))
    (fusion,) = [op for op in module.walk() if isinstance(op, FusionOp)]
    plan = EmbeddingAllToAll.of(fusion, 2)
    assert plan is not None and (plan.bag_tile, plan.chunks) == (16, 4)
    run = emulate(module, 2, seeds=(0,), threads=256)
    assert_close(run, rtol=1e-2)
    within = peer_bytes(run.stats, 2)
    assert within[0, 1] == within[1, 0] == plan.peer_bytes() == 4 * 64 * 128 * 2


@pytestmark_emulation
def test_an_index_out_of_range_stops_the_vector_path():
    """The fused kernel's 16-byte path checks every index before it loads
    the rows: one out of range stops it with the op's message."""
    from coconet_ir.emulate import emulate as emulate_program

    module = dlrm(length=4)
    tables = np.ones((8, 16, 8), np.float32)
    indices = np.zeros((8, 8, 4), np.int32)
    indices[5, 3, 2] = 16
    with pytest.raises(cc.CocoError, match=r"an index is out of range \[0, 16\)"):
        emulate_program(
            module,
            2,
            passes="",
            inputs={"dlrm.arg0": tables, "dlrm.arg1": indices},
            threads=32,
        )


@pytestmark_emulation
def test_thread_sanitizer():
    run = emulate(dlrm(), 4, threads=8, sanitize="thread")
    assert_close(run, rtol=1e-6)


@pytestmark_emulation
@pytest.mark.parametrize(
    "program,waits,which",
    [("dlrm", 2, -1), ("gemv", 3, -1), ("gemv_sliced", 4, 1), ("moe", 2, -1)],
)
def test_a_missing_tile_wait_is_caught(
    monkeypatch: pytest.MonkeyPatch, program: str, waits: int, which: int
):
    """Without the tail's wait for a tile's counter (`which` -1), the copy
    races with the peer's stores; without the GEMV's wait for a tile's other
    slices (1), its last slice's block reads them before they are written:
    ThreadSanitizer reports it (or the results differ)."""
    original = fused_emulation.cuda_source

    def without_tile_wait(lowered: ModuleOp) -> str:
        text = original(lowered)
        found = list(re.finditer(r"coco::wait_signal\(", text))
        if len(found) != waits:
            raise LookupError(f"{len(found)} waits in the kernel")
        at = found[which].start()
        return text[:at] + "//" + text[at:]

    monkeypatch.setattr(fused_emulation, "cuda_source", without_tile_wait)
    module = {
        "dlrm": dlrm,
        "gemv": lambda: gemv(rows=2, k=256, m=64),
        "gemv_sliced": lambda: gemv(rows=1, k=1024, m=256),
        "moe": lambda: moe(experts=4, tokens=4, hidden=64, ffn=32),
    }[program]()
    with pytest.raises((EmulationError, AssertionError)):
        run = emulate(module, 4, threads=8, sanitize="thread")
        assert_close(run, rtol=1e-4)


NVCC_PROGRAMS = ("dlrm", "gemv", "gemv_rows16", "moe")


@pytest.fixture(scope="module")
def nvcc_report(tmp_path_factory: pytest.TempPathFactory) -> str:
    """ptxas's report on the three fused programs (bf16, world 8; and a GEMV
    of 16 f32 rows, the most registers per thread), for sm_80
    and sm_90, from one nvcc call on them joined (`one_translation_unit`),
    the device code only (`device_only`), once per run (`once_per_run`)."""
    import subprocess

    from helpers import device_only, for_every_arch, once_per_run, one_unit_command

    from coconet_ir.backend.cuda.toolchain import nvcc

    if nvcc() is None:
        pytest.skip("needs nvcc")

    def compute() -> str:
        modules = {
            "dlrm": dlrm("bf16", pooling="mean"),
            "gemv": gemv(4, 4096, 256, "bf16"),
            "gemv_rows16": gemv(16, 4096, 256, "f32"),
            "moe": moe(element="bf16"),
        }
        sources = {
            name: fused_emulation.cuda_source(
                cc.Pipeline("convert-coco-to-gpu{world=8}")(module)
            )
            for name, module in modules.items()
        }
        command = device_only(
            one_unit_command(sources, tmp_path_factory.mktemp("nvcc"))
        )
        done = subprocess.run(
            [*for_every_arch(command, ("sm_80", "sm_90")), "-Xptxas", "-v"],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        return done.stderr

    return once_per_run(tmp_path_factory, "nvcc_report", compute)


@pytest.mark.parametrize("program", NVCC_PROGRAMS)
def test_the_kernel_compiles_with_nvcc_without_spills(program, nvcc_report):
    """For sm_80 and sm_90: one fused kernel each, no spill."""
    from helpers import PTXAS_KERNEL, of_source

    kernels = [
        k for k in PTXAS_KERNEL.finditer(nvcc_report) if of_source(k["kernel"], program)
    ]
    assert sorted(k["arch"] for k in kernels) == ["sm_80", "sm_90"], nvcc_report
    assert all(re.search(r"_fused_0", k["kernel"]) for k in kernels)
    assert all(k["spills"] == "0" for k in kernels), nvcc_report


# ------------------------------------------------------------ GEMV + all_reduce

GEMV = """
func.func @decode(%x: !coco.tensor<ROWSxKxELT, sliced<1>>, %w: !coco.tensor<KxMxELT, sliced<0>>) -> !coco.tensor<ROWSxMxELT, replicated> {
  %y = coco.matmul %x, %w {name = "proj"} : (!coco.tensor<ROWSxKxELT, sliced<1>>, !coco.tensor<KxMxELT, sliced<0>>) -> !coco.tensor<ROWSxMxELT, local>
  %s = coco.all_reduce %y reduction = sum : !coco.tensor<ROWSxMxELT, local> -> !coco.tensor<ROWSxMxELT, replicated>
  func.return %s : !coco.tensor<ROWSxMxELT, replicated>
}
"""  # noqa: E501


def gemv(rows=1, k=64, m=64, element="f32") -> ModuleOp:
    text = GEMV.replace("ROWS", str(rows)).replace("ELT", element)
    text = text.replace("KxM", f"{k}x{m}").replace("xKx", f"x{k}x")
    text = text.replace("xMx", f"x{m}x")
    return cc.Pipeline("coco-fuse-collective")(cc.parse(text))


def check_one_launch_equals_interpreter(
    module: ModuleOp, world: int, seed: int, threads: int = 256
):
    """The lowered fusion (`threads` a block) is one launch, no NCCL call,
    and its device IR gives the interpreter's result (rtol 1e-5)."""
    options = f"world={world} threads={threads}"
    lowered = cc.Pipeline(f"convert-coco-to-gpu{{{options}}}")(module)
    assert len([op for op in lowered.walk() if op.name == "gpu.launch_func"]) == 1
    assert not [op for op in lowered.walk() if op.name.startswith("coco_gpu.nccl")]
    inputs = draw_inputs(module, world, seed=seed)
    reference = cc.interpret(module, world, seed=seed)
    (key,) = reference.outputs
    got = run_device(lowered, world, inputs)[key]
    np.testing.assert_allclose(got, reference[key], rtol=1e-5)


@pytest.mark.parametrize("world", [2, 4, 8])
def test_gemv_device_ir_matches_the_interpreter(world: int):
    check_one_launch_equals_interpreter(gemv(rows=2, k=32, m=32), world, seed=5)


@pytest.mark.parametrize("misaligned", [False, True])
def test_gemv_split_k_device_ir_matches_the_interpreter(
    monkeypatch: pytest.MonkeyPatch, misaligned: bool
):
    """Eight slices of K per tile (split-K, slices of any size allowed: the
    block of a tile's last slice adds the others'), with the vector loads
    and, on buffers that start off 16 bytes, the scalar loads."""
    import device_eval

    from coconet_ir.lowering import tile_collectives

    monkeypatch.setattr(tile_collectives, "GEMV_MIN_SLICE_BYTES", 1)
    module = gemv(rows=2, k=64, m=32)
    (fusion,) = [op for op in module.walk() if isinstance(op, FusionOp)]
    plan = GemvAllReduce.of(fusion, 2)
    assert plan is not None and (plan.slices, plan.vector) == (8, 4)
    if misaligned:
        monkeypatch.setattr(device_eval, "POINTER_OFFSET", 4)
    check_one_launch_equals_interpreter(module, 2, seed=6, threads=32)


def test_gemv_on_one_rank_stores_straight_into_the_output(
    monkeypatch: pytest.MonkeyPatch,
):
    """On one rank there is no all-reduce to do: the block of a tile's last
    slice stores it into the output, and the kernel waits only for a tile's
    other slices (no READY, PARTIAL or DONE wait, no peer view); the device
    IR gives the interpreter's result."""
    from coconet_ir.lowering import tile_collectives

    monkeypatch.setattr(tile_collectives, "GEMV_MIN_SLICE_BYTES", 1)
    module = gemv(rows=2, k=64, m=32)
    lowered = cc.Pipeline("convert-coco-to-gpu{world=1 threads=32}")(module)
    names = [op.name for op in lowered.walk()]
    assert names.count("coco_gpu.wait_signal") == 1
    assert "coco_gpu.peer_view" not in names
    check_one_launch_equals_interpreter(module, 1, seed=8, threads=32)


@pytestmark_emulation
def test_gemv_on_one_rank_emulated():
    """The printed kernel on one rank, 16 slices of K per tile, three calls:
    the interpreter's result, one launch, nothing stored into a peer."""
    run = emulate(gemv(rows=1, k=1024, m=64), 1, threads=32)
    assert_close(run, rtol=1e-4)
    assert launches_of(run, "fused") == CALLS
    assert peer_bytes(run.stats, 1).sum() == 0


@pytestmark_emulation
@pytest.mark.parametrize(
    "world,rows,k,m,element",
    [(2, 1, 4096, 64, "f32"), (4, 4, 2048, 128, "f32"), (8, 1, 1024, 64, "bf16")],
)
def test_gemv_one_launch_and_the_all_reduce_bytes(world, rows, k, m, element):
    """K in the thousands: one launch, no NCCL, each rank stores the
    two-shot all-reduce's 2 (N-1)/N S into its peers, evenly."""
    module = gemv(rows, k, m, element)
    run = emulate(module, world, threads=32)
    assert_close(run, rtol=2e-2 if element == "bf16" else 1e-4)
    assert launches_of(run, "fused") == CALLS * world
    assert sum(run.stats["kernels"].values()) == CALLS * world
    assert sum(map(sum, run.stats["nccl_calls"])) == 0
    size = rows * m * (2 if element == "bf16" else 4)
    within = peer_bytes(run.stats, world)
    for r in range(world):
        assert within[r].sum() == CALLS * 2 * (world - 1) * size // world
        for p in range(world):
            assert within[r, p] == (0 if p == r else CALLS * 2 * size // world)


@pytestmark_emulation
@pytest.mark.parametrize("rows,k,m", [(2, 256, 64), (1, 1024, 256)])
def test_gemv_thread_sanitizer(rows: int, k: int, m: int):
    """One slice of K per tile, and (K = 1024) four."""
    run = emulate(gemv(rows=rows, k=k, m=m), 4, threads=8, sanitize="thread")
    assert_close(run, rtol=1e-4)


def op_by_op(module: ModuleOp, world: int, *ops: str) -> ModuleOp:
    """`module` lowered at `world`, which must warn that its fusion goes op
    by op, naming `ops` (issue 27: no silent fallback)."""
    named = ", ".join(f"'{op}'" for op in ops)
    with pytest.warns(cc.CocoWarning, match="lowered op by op") as caught:
        lowered = cc.Pipeline(f"convert-coco-to-gpu{{world={world}}}")(module)
    (warning,) = [str(w.message) for w in caught]
    assert "<input>:3:3: warning: 'coco.fusion' op" in warning, warning
    assert f"it holds {named}, in a form no tile kernel" in warning, warning
    assert f"takes at world {world}" in warning, warning
    return lowered


def test_a_wide_gemm_or_uneven_tiles_lower_op_by_op():
    """More than 16 rows is no GEMV, and 3 ranks do not divide 64 columns
    into whole tiles per rank: both lower op by op (cuBLAS, then NCCL), and
    the conversion says so at the fusion."""
    for module, world in ((gemv(rows=32, k=32, m=32), 2), (gemv(k=96, m=64), 3)):
        lowered = op_by_op(module, world, "coco.matmul", "coco.all_reduce")
        names = {op.name for op in lowered.walk()}
        assert "coco_gpu.gemm" in names and "coco_gpu.nccl_all_reduce" in names


# ------------------------------------------------------------ GEMM + all_to_all

MOE = """
func.func @moe(%x: !coco.tensor<ExSxCxHxELT, sliced<0>>, %w: WEIGHTS) -> !coco.tensor<ExSxCxFxELT, sliced<DIM>> {
  %h = PRODUCER %x, %w {name = "experts"} : (!coco.tensor<ExSxCxHxELT, sliced<0>>, WEIGHTS) -> !coco.tensor<ExSxCxFxELT, sliced<0>>
  %o = coco.all_to_all %h dim = DIM {name = "combine"} : !coco.tensor<ExSxCxFxELT, sliced<0>> -> !coco.tensor<ExSxCxFxELT, sliced<DIM>>
  func.return %o : !coco.tensor<ExSxCxFxELT, sliced<DIM>>
}
"""  # noqa: E501


def moe(
    experts=8,
    sources=8,
    tokens=4,
    hidden=64,
    ffn=48,
    element="f32",
    dim=1,
    grouped=True,
) -> ModuleOp:
    """Experts' GEMMs (`x: [E, S, C, H]`, tokens from source S for expert
    E), then the all_to_all of the tokens back to their sources (`dim`)."""
    weights = (
        f"!coco.tensor<{experts}x{hidden}x{ffn}x{element}, sliced<0>>"
        if grouped
        else f"!coco.tensor<{hidden}x{ffn}x{element}, replicated>"
    )
    text = MOE.replace("WEIGHTS", weights).replace("DIM", str(dim))
    text = text.replace("PRODUCER", "coco.batch_matmul" if grouped else "coco.matmul")
    text = text.replace("ExSxC", f"{experts}x{sources}x{tokens}")
    text = text.replace("xHx", f"x{hidden}x").replace("xFx", f"x{ffn}x")
    return cc.Pipeline("coco-fuse-collective")(cc.parse(text.replace("ELT", element)))


def test_gemm_plan():
    module = moe()
    (fusion,) = [op for op in module.walk() if isinstance(op, FusionOp)]
    plan = GemmAllToAll.of(fusion, 4)
    assert plan is not None
    # Rank block [2, 8, 4, 48]; destination p's part [2, 2, 4, 48]: 16 rows.
    assert (plan.block, plan.part, plan.rows, plan.columns) == (
        (2, 8, 4, 48),
        (2, 2, 4, 48),
        16,
        48,
    )
    assert (plan.tile_rows, plan.tile_columns, plan.per_peer) == (16, 48, 1)
    assert plan.peer_bytes() == 16 * 48 * 4
    assert plan.slots == 4 + 4 * 1


@pytest.mark.parametrize("world", [2, 4, 8])
@pytest.mark.parametrize("grouped", [True, False])
def test_gemm_device_ir_matches_the_interpreter(world: int, grouped: bool):
    module = moe(sources=8, tokens=1, hidden=8, ffn=8, grouped=grouped)
    check_one_launch_equals_interpreter(module, world, seed=7)


@pytestmark_emulation
@pytest.mark.parametrize(
    "world,shape,element,dim,grouped",
    [
        (2, dict(experts=4, tokens=2, hidden=1024, ffn=32), "f32", 1, True),
        (4, dict(tokens=16, ffn=256), "bf16", 1, True),
        (8, dict(tokens=8), "f32", 2, False),
    ],
)
def test_gemm_one_launch_and_the_all_to_all_bytes(world, shape, element, dim, grouped):
    """K in the thousands, several tiles per destination, halves: one launch,
    no NCCL, (N-1)/N of each rank's GEMM block into its peers, evenly."""
    module = moe(element=element, dim=dim, grouped=grouped, **shape)
    run = emulate(module, world, threads=32)
    assert_close(run, rtol=2e-2 if element == "bf16" else 1e-4)
    assert launches_of(run, "fused") == CALLS * world
    assert sum(run.stats["kernels"].values()) == CALLS * world
    assert sum(map(sum, run.stats["nccl_calls"])) == 0
    (fusion,) = [op for op in module.walk() if isinstance(op, FusionOp)]
    plan = GemmAllToAll.of(fusion, world)
    assert plan is not None
    block = prod(plan.block) * (2 if element == "bf16" else 4)
    within = peer_bytes(run.stats, world)
    for r in range(world):
        for p in range(world):
            assert within[r, p] == (0 if p == r else CALLS * block // world)


@pytestmark_emulation
def test_gemm_thread_sanitizer():
    run = emulate(moe(tokens=2, hidden=32, ffn=32), 4, threads=8, sanitize="thread")
    assert_close(run, rtol=1e-4)


def test_gemm_into_the_last_dim_lowers_op_by_op():
    """An all_to_all along the GEMM's columns has no tile kernel (yet): the
    fusion lowers op by op (cuBLAS, then NCCL)."""
    module = moe(dim=3, ffn=64)
    lowered = op_by_op(module, 4, "coco.batch_matmul", "coco.all_to_all")
    names = {op.name for op in lowered.walk()}
    assert "coco_gpu.gemm" in names and "coco_gpu.nccl_all_to_all" in names


MOE_BEHIND = """
func.func @moe(%t: !coco.tensor<8x8x2x32xf32, sliced<1>>, %w: !coco.tensor<8x32x32xf32, sliced<0>>) -> !coco.tensor<8x8x2x32xf32, sliced<1>> {
  %d = coco.all_to_all %t dim = 0 : !coco.tensor<8x8x2x32xf32, sliced<1>> -> !coco.tensor<8x8x2x32xf32, sliced<0>>
  PROLOGUE
  %h = coco.batch_matmul %a, %w : (!coco.tensor<8x8x2x32xf32, sliced<0>>, !coco.tensor<8x32x32xf32, sliced<0>>) -> !coco.tensor<8x8x2x32xf32, sliced<0>>
  %o = coco.all_to_all %h dim = 1 : !coco.tensor<8x8x2x32xf32, sliced<0>> -> !coco.tensor<8x8x2x32xf32, sliced<1>>
  func.return %o : !coco.tensor<8x8x2x32xf32, sliced<1>>
}
"""  # noqa: E501
T = "!coco.tensor<8x8x2x32xf32, sliced<0>>"
GELU = f"%a = coco.gelu %d : ({T}) -> {T}"
GELU_RELU = f"%g = coco.gelu %d : ({T}) -> {T}\n  %a = coco.relu %g : ({T}) -> {T}"
SQUARE = f"%a = coco.mul %d, %d : ({T}, {T}) -> {T}"


def lowered_with_remarks(module: ModuleOp, world: int) -> tuple[ModuleOp, list]:
    """coco-optimize and the conversion at `world`, with their remarks; an
    op-by-op fallback (its warning) fails the test."""
    passes = f"coco-optimize{{world={world}}},convert-coco-to-gpu{{world={world}}}"
    found: list[cc.Remark] = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", cc.CocoWarning)
        with cc.remarks_to(found.append):
            lowered = cc.Pipeline(passes)(module)
    return lowered, found


@pytestmark_emulation
@pytest.mark.parametrize("world", [2, 4, 8])
def test_elementwise_ops_before_the_expert_gemm_run_inside_the_tile_kernel(
    world: int,
):
    """Issue 27: all_to_all -> gelu -> batch_matmul -> all_to_all. The
    conversion takes the gelu into the tile kernel, which applies it to each
    element of the tokens it loads (its prologue): after the dispatch (NCCL,
    and its unpack kernel where the layout needs one) ONE kernel, and a
    passed remark. Emulated = interpreter."""
    from coconet_ir.emulate import compare_runs
    from coconet_ir.emulate import emulate as emulate_program

    module = cc.parse(MOE_BEHIND.replace("PROLOGUE", GELU))
    lowered, found = lowered_with_remarks(module, world)
    assert kernels_after_the_dispatch(lowered) == ["@kernels::@moe_fused_0"]
    assert "coco_gpu.gemm" not in {op.name for op in lowered.walk()}
    prologue = [
        (r.location, r.message.split("'")[1])
        for r in found
        if r.name == "Prologue" and r.kind == cc.RemarkKind.PASSED
    ]
    assert prologue == [("<input>:4:3", "coco.gelu")]
    optimize = f"coco-optimize{{world={world}}}"
    run = emulate_program(module, world, seed=3, passes=optimize)
    verdict = compare_runs(cc.interpret(module, world, seed=3), run, module)
    assert verdict, verdict.first_difference


@pytest.mark.parametrize("world", [2, 4, 8])
def test_a_prologue_device_ir_matches_the_interpreter(world: int):
    """The tile kernel's prologue in the device IR: (-x) @ w per expert."""
    x = "!coco.tensor<8x8x1x8xf32, sliced<0>>"
    w = "!coco.tensor<8x8x8xf32, sliced<0>>"
    out = "!coco.tensor<8x8x1x8xf32, sliced<1>>"
    module = cc.parse(
        f"func.func @moe(%x: {x}, %w: {w}) -> {out} {{\n"
        f"  %r = coco.neg %x : ({x}) -> {x}\n"
        f"  %h = coco.batch_matmul %r, %w : ({x}, {w}) -> {x}\n"
        f"  %o = coco.all_to_all %h dim = 1 : {x} -> {out}\n"
        f"  func.return %o : {out}\n}}"
    )
    check_one_launch_equals_interpreter(
        cc.Pipeline("coco-fuse-collective")(module), world, seed=7
    )


def kernels_after_the_dispatch(lowered: ModuleOp) -> list[str]:
    """The kernels launched, but the dispatch all_to_all's unpack."""
    launches = [op for op in lowered.walk() if op.name == "gpu.launch_func"]
    names = [str(op.kernel) for op in launches]  # type: ignore[attr-defined]
    return [name for name in names if "unpack" not in name]


@pytest.mark.parametrize(
    ("prologue", "op", "kernel"),
    [(SQUARE, "coco.mul", "mul"), (GELU_RELU, "coco.fusion", "fusion")],
    ids=["two-operands", "a-fused-region"],
)
def test_what_no_prologue_takes_stays_a_kernel_of_its_own(prologue, op, kernel):
    """`d * d` has two operands, and gelu -> relu is one region after
    coco-fuse: no tile kernel applies them as it loads. They stay a kernel
    of their own, the GEMM + all_to_all one tile kernel, and a missed remark
    says why."""
    module = cc.parse(MOE_BEHIND.replace("PROLOGUE", prologue))
    lowered, found = lowered_with_remarks(module, 4)
    assert kernels_after_the_dispatch(lowered) == [
        f"@kernels::@moe_{kernel}_0",
        "@kernels::@moe_fused_0",
    ]
    (missed,) = [r for r in found if r.kind == cc.RemarkKind.MISSED]
    assert (missed.name, missed.location) == ("Prologue", "<input>:4:3")
    assert missed.message.startswith(f"'{op}' runs as a kernel of its own")


@pytestmark_emulation
@pytest.mark.parametrize("element", ["f32", "bf16", "i32"])
@pytest.mark.parametrize("layouts", ["sliced<0>,sliced<0>", "sliced<1>,replicated"])
def test_batch_matmul_alone_is_one_batched_gemm(element: str, layouts: str):
    """Op by op, coco.batch_matmul is one strided-batched cuBLAS GEMM of the
    rank's groups (a kernel for integers), equal to the interpreter."""
    from coconet_ir.emulate import compare_runs
    from coconet_ir.emulate import emulate as emulate_program

    a, b = layouts.split(",")
    x, w = (
        f"!coco.tensor<8x4x6x16x{element}, {a}>",
        f"!coco.tensor<8x16x12x{element}, {b}>",
    )
    out = f"!coco.tensor<8x4x6x12x{element}, {a}>"
    module = cc.parse(
        f"func.func @f(%x: {x}, %w: {w}) -> {out} {{\n"
        f"  %h = coco.batch_matmul %x, %w : ({x}, {w}) -> {out}\n"
        f"  func.return %h : {out}\n}}"
    )
    lowered = cc.Pipeline("convert-coco-to-gpu{world=4}")(module)
    names = [op.name for op in lowered.walk()]
    assert names.count("coco_gpu.gemm") == (0 if element == "i32" else 1)
    reference = cc.interpret(module, 4, seed=2)
    verdict = compare_runs(reference, emulate_program(module, 4, seed=2), module)
    assert verdict, verdict.first_difference


# ------------------------------------------------------------ the timeline


@pytestmark_emulation
@pytest.mark.parametrize("program", ["dlrm", "gemv", "moe"])
def test_the_timeline_shows_communication_before_computation_ends(program: str):
    """Issue 10's proof of overlap, for each operator at N = 4: on every
    rank and every call, the first store into a peer is numbered before the
    last tile is computed (one process-wide event counter; a thread's events
    in program order), and each rank moves exactly the collective's bytes."""
    from coconet_ir.emulate import emulate as emulate_program

    module, plan_of = {
        "dlrm": (dlrm(), EmbeddingAllToAll.of),
        "gemv": (gemv(rows=1, k=1024, m=256), GemvAllReduce.of),
        "moe": (moe(tokens=16, ffn=256), GemmAllToAll.of),
    }[program]
    (fusion,) = [op for op in module.walk() if isinstance(op, FusionOp)]
    plan = plan_of(fusion, 4)
    assert plan is not None
    run = emulate_program(module, 4, seed=4, calls=CALLS)
    assert run.stats is not None
    launches = run.stats.timeline
    assert sorted(launch.rank for launch in launches) == sorted(
        r for r in range(4) for _ in range(CALLS)
    )
    for launch in launches:
        assert launch.tiles == plan.computed
        assert launch.overlapped, launch
    assert run.stats.bytes_per_rank().tolist() == [3 * plan.peer_bytes()] * 4


@pytestmark_emulation
def test_only_tile_kernels_have_a_timeline():
    """A fused all-reduce kernel stores into its peers but marks no tiles:
    the emulator keeps no timeline for it (docs/gpu/emulation.md)."""
    from helpers import example

    from coconet_ir.emulate import emulate as emulate_program

    run = emulate_program(example("adam"), 2, calls=2)
    assert run.stats is not None and run.stats.bytes_per_rank().sum() > 0
    assert run.stats.raw["timeline"] == []


def test_gemm_with_no_wide_tile_lowers_op_by_op():
    """An output width with no divisor from 16 to 128 (131, prime) would
    give one-column tiles: the fusion lowers op by op instead."""
    lowered = op_by_op(moe(ffn=131), 4, "coco.batch_matmul", "coco.all_to_all")
    names = {op.name for op in lowered.walk()}
    assert "coco_gpu.gemm" in names and "coco_gpu.nccl_all_to_all" in names
    with warnings.catch_warnings():
        warnings.simplefilter("error", cc.CocoWarning)  # one kernel: no warning
        wide = cc.Pipeline("convert-coco-to-gpu{world=4}")(moe(ffn=12))
    assert "coco_gpu.nccl_all_to_all" not in {op.name for op in wide.walk()}


# ------------------------------------------------ GEMV at model size (static)

H100_SMS = 132
"""The SMs of an H100 (SXM) and an H200: the device the grid must fill."""

REGISTERS_PER_SM = 65536
SHARED_BYTES_PER_SM = 228 * 1024
"""sm_90's registers and shared memory per SM (sm_80: 64 K and 164 KiB)."""


def blocks_per_sm() -> int:
    """`COCO_BLOCKS_PER_SM`, the runtime's cap on a grid's blocks per SM
    (`coco::grid_blocks`), as coco_runtime.h defines it."""
    from helpers import ROOT

    header = ROOT / "coconet_ir/backend/cuda/runtime/coco_runtime.h"
    found = re.search(r"#define COCO_BLOCKS_PER_SM (\d+)", header.read_text())
    assert found is not None
    return int(found[1])


def gemv_at_model_size() -> ModuleOp:
    """`examples/gemv_allreduce.py --model` (H = 12288, bf16), optimized
    (the GEMV and its all_reduce fused) and lowered at world 1."""
    from helpers import load_example

    example = load_example("gemv_allreduce")
    module = example.build(example.MODEL)
    return cc.Pipeline("coco-optimize,convert-coco-to-gpu{world=1}")(module)


def test_the_gemv_grid_covers_every_sm():
    """The fused GEMV's launch at H = 12288 on one rank: a grid of
    `coco::resident_blocks` over its work items (48 tiles x 32 slices of
    K), which on a 132-SM device is `COCO_BLOCKS_PER_SM` blocks on every SM
    (its occupancy allows as many: `test_the_gemv_kernel_at_model_size_...`),
    each with about three items to stream; it was 48 blocks, one per tile."""
    from coconet_ir.dialects import gpu
    from coconet_ir.dialects.coco_gpu import GridBlocksOp

    lowered = gemv_at_model_size()
    (launch,) = [
        op
        for op in lowered.walk()
        if isinstance(op, gpu.LaunchFuncOp) and "fused" in op.kernel.string_value()
    ]
    grid = launch.gridSizeX.owner
    assert isinstance(grid, GridBlocksOp) and grid.kernel is not None  # resident
    count, threads = (
        op.value.value.data  # type: ignore[union-attr]
        for op in (grid.count.owner, grid.threads.owner)
    )
    items = count // threads
    assert items == 48 * 32
    # coco::grid_blocks: the items, at most COCO_BLOCKS_PER_SM a SM;
    # coco::resident_blocks caps that by the occupancy, >= COCO_BLOCKS_PER_SM.
    blocks = min(items, H100_SMS * blocks_per_sm())
    assert blocks == H100_SMS * blocks_per_sm() >= H100_SMS
    assert items >= 2 * blocks


def model_build(directory: Path, name: str, module: ModuleOp) -> str:
    """A model-size module's device code for sm_90 in `directory`: NAME.fatbin
    (`device_only`) and NAME.ptx; returns ptxas's report."""
    import subprocess

    from helpers import device_only

    from coconet_ir.backend.cuda.toolchain import nvcc, nvcc_command

    if nvcc() is None:
        pytest.skip("needs nvcc")
    source = directory / f"{name}.cu"
    source.write_text(fused_emulation.cuda_source(module))
    command = nvcc_command(source, "sm_90", directory / f"{name}.o")
    done = subprocess.run(
        [*device_only(command), "-Xptxas", "-v"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    command[command.index("-c")] = "-ptx"
    command[command.index("-o") + 1] = str(directory / f"{name}.ptx")
    made = subprocess.run(command, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    return done.stderr


def ptxas_usage(report: str, kernel: str) -> tuple[int, int, int, int]:
    """`kernel`'s spill stores, spill loads, registers and shared memory
    bytes (0 if none) in ptxas's sm_90 report."""
    found = re.search(
        rf"entry function '{kernel}' for 'sm_90'.*?(\d+) bytes spill stores, "
        r"(\d+) bytes spill loads.*?Used (\d+) registers[^\n]*?(?:(\d+) bytes smem)?\n",
        report,
        re.DOTALL,
    )
    assert found is not None, report
    stores, loads, registers, shared = (int(x or 0) for x in found.groups())
    return stores, loads, registers, shared


def ptx_entry(ptx: Path, kernel: str) -> str:
    """The text of `kernel`'s `.entry` in a PTX file."""
    found = re.search(rf"\.entry {kernel}\(.*?\n}}", ptx.read_text(), re.DOTALL)
    assert found is not None
    return found[0]


def wide_loads(fatbin: Path, kernel: str, use: str) -> tuple[int, int]:
    """`kernel`'s SASS (cuobjdump; skips where there is none): how many
    16-byte loads (LDG.E.128) it has, and the most of them issued before the
    next `use` instruction (what consumes the loads: loads in flight)."""
    import subprocess

    tool = cuobjdump()
    if tool is None:
        pytest.skip("needs cuobjdump")
    command, env = tool
    done = subprocess.run(
        [command, "-sass", "-fun", kernel, str(fatbin)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    sass = [line for line in done.stdout.splitlines() if "/*" in line]
    wide = [i for i, line in enumerate(sass) if "LDG.E.128" in line]
    runs = [
        next((j for j in range(i, len(sass)) if use in sass[j]), len(sass))
        for i in wide
    ]
    ahead = [sum(1 for w in wide if i <= w < r) for i, r in zip(wide, runs)]
    return len(wide), max(ahead, default=0)


@pytest.fixture(scope="module")
def gemv_model_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The model-size GEMV built for sm_90 (`model_build`): (directory,
    ptxas's report)."""
    directory = tmp_path_factory.mktemp("gemv_model")
    return directory, model_build(directory, "gemv", gemv_at_model_size())


GEMV_KERNEL = "gemv_allreduce_proj_fused_0"


def test_the_gemv_kernel_at_model_size_has_no_spills_and_four_blocks_per_sm(
    gemv_model_build: tuple[Path, str],
):
    """ptxas, sm_90: no spills; registers and shared memory let
    `COCO_BLOCKS_PER_SM` blocks of 256 threads share an SM, so the resident
    grid is the whole `coco::grid_blocks` one."""
    _, report = gemv_model_build
    stores, loads, registers, shared = ptxas_usage(report, GEMV_KERNEL)
    assert (stores, loads) == (0, 0)
    assert registers * 256 * blocks_per_sm() <= REGISTERS_PER_SM
    assert 0 < shared * blocks_per_sm() <= SHARED_BYTES_PER_SM


def test_the_gemv_kernel_at_model_size_has_16_byte_loads_in_its_ptx(
    gemv_model_build: tuple[Path, str],
):
    """The model-size kernel's PTX (sm_90): its weight loads are
    `ld.global.v4.u32`, 16 bytes each (what ptxas makes LDG.E.128: the SASS
    test below, where cuobjdump is at hand)."""
    directory, _ = gemv_model_build
    entry = ptx_entry(directory / "gemv.ptx", GEMV_KERNEL)
    loads = re.findall(r"ld\.global(?:\.nc)?\.v4\.(?:u32|b32|f32)", entry)
    assert len(loads) >= 8


def cuobjdump() -> tuple[str, dict[str, str]] | None:
    """cuobjdump and an environment where it finds nvdisasm: on PATH, beside
    nvcc, or from NVIDIA's wheels (nvidia-cuda-cuobjdump, -nvdisasm) in this
    Python's site-packages; None where there is none."""
    import os
    import site
    import sys

    from coconet_ir.backend.cuda.toolchain import nvcc

    places = [Path(p) for p in os.environ.get("PATH", "").split(os.pathsep) if p]
    compiler = nvcc()
    if compiler is not None:
        places.append(compiler.resolve().parent)
    for root in [*site.getsitepackages(), sys.prefix]:
        places.append(Path(root) / "nvidia" / "cu13" / "bin")
    found = [p for p in places if (p / "cuobjdump").is_file()]
    if not found:
        return None
    path = os.pathsep.join(str(p) for p in dict.fromkeys(places))
    return str(found[0] / "cuobjdump"), {**os.environ, "PATH": path}


def test_the_gemv_kernel_loads_the_weights_16_bytes_at_a_time(
    gemv_model_build: tuple[Path, str],
):
    """The SASS of the model-size kernel (sm_90): its weight loads are
    LDG.E.128, several issued before the first FMA that uses them."""
    directory, _ = gemv_model_build
    count, ahead = wide_loads(directory / "gemv.fatbin", GEMV_KERNEL, "FFMA")
    assert count >= 8
    # The loop's loads: at least four 16-byte loads before the next FFMA.
    assert ahead >= 4


# --------------------------------------- embedding at model size (static)

DLRM_KERNEL = "dlrm_embedding_lookup_fused_0"


def dlrm_at_model_size() -> ModuleOp:
    """`examples/dlrm_embedding.py --model` (64 tables of 1M x 128 bf16,
    2048 bags of 32), optimized (the lookup and its all_to_all fused) and
    lowered at world 1."""
    from helpers import load_example

    example = load_example("dlrm_embedding")
    module = example.build(example.MODEL)
    return cc.Pipeline("coco-optimize,convert-coco-to-gpu{world=1}")(module)


def test_the_embedding_plan_at_model_size():
    """Tiles of 16 bags (2048 elements: one pass of a 256-thread block, 8
    bf16 a thread), 128 per table: 8192 work items at world 1 (1024 on each
    of 8 ranks), not 64; rows of 128 bf16 are 16 vectors of 16 bytes, and a
    thread pools 8 indices a step."""
    from helpers import load_example

    from coconet_ir.lowering.embedding import unroll_of, vector_of

    example = load_example("dlrm_embedding")
    module = cc.Pipeline("coco-optimize")(example.build(example.MODEL))
    (fusion,) = [op for op in module.walk() if isinstance(op, FusionOp)]
    for world, items in ((1, 8192), (8, 1024)):
        plan = EmbeddingAllToAll.of(fusion, world)
        assert plan is not None and plan.resident
        assert (plan.bag_tile, plan.tile, plan.items) == (16, 2048, items)
        assert plan.peer_bytes() == 64 // world * 2048 // world * 128 * 2
        assert (vector_of(plan.lookup), unroll_of(plan.lookup)) == (8, 8)


def test_the_embedding_grid_covers_every_sm():
    """The fused lookup's launch at model size on one rank: a grid of
    `coco::resident_blocks` over 8192 work items, which on a 132-SM device
    is `COCO_BLOCKS_PER_SM` blocks on every SM (its occupancy allows as
    many: the ptxas test below); it was 64 blocks, one per table."""
    from coconet_ir.dialects import gpu
    from coconet_ir.dialects.coco_gpu import GridBlocksOp

    lowered = dlrm_at_model_size()
    (launch,) = [
        op
        for op in lowered.walk()
        if isinstance(op, gpu.LaunchFuncOp) and "fused" in op.kernel.string_value()
    ]
    grid = launch.gridSizeX.owner
    assert isinstance(grid, GridBlocksOp) and grid.kernel is not None  # resident
    count, threads = (
        op.value.value.data  # type: ignore[union-attr]
        for op in (grid.count.owner, grid.threads.owner)
    )
    assert (count // threads, threads) == (8192, 256)
    blocks = min(count // threads, H100_SMS * blocks_per_sm())
    assert blocks == H100_SMS * blocks_per_sm() >= H100_SMS
    assert count // threads >= 8 * blocks


@pytest.fixture(scope="module")
def dlrm_model_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The model-size lookup built for sm_90 (`model_build`): (directory,
    ptxas's report)."""
    directory = tmp_path_factory.mktemp("dlrm_model")
    return directory, model_build(directory, "dlrm", dlrm_at_model_size())


def test_the_embedding_kernel_at_model_size_has_no_spills_and_four_blocks_per_sm(
    dlrm_model_build: tuple[Path, str],
):
    """ptxas, sm_90: no spills, and few enough registers for
    `COCO_BLOCKS_PER_SM` blocks of 256 threads an SM."""
    _, report = dlrm_model_build
    stores, loads, registers, _ = ptxas_usage(report, DLRM_KERNEL)
    assert (stores, loads) == (0, 0)
    assert registers * 256 * blocks_per_sm() <= REGISTERS_PER_SM


def test_the_embedding_kernel_loads_table_rows_16_bytes_at_a_time_in_ptx(
    dlrm_model_build: tuple[Path, str],
):
    """The model-size kernel's PTX: its row loads are `ld.global.v4.u32`, 16
    bytes each, 8 of them (a step's indices) in the pooling loop."""
    directory, _ = dlrm_model_build
    entry = ptx_entry(directory / "dlrm.ptx", DLRM_KERNEL)
    loads = re.findall(r"ld\.global(?:\.nc)?\.v4\.(?:u32|b32)", entry)
    assert len(loads) >= 8


def test_the_embedding_kernel_has_8_row_loads_in_flight(
    dlrm_model_build: tuple[Path, str],
):
    """The SASS (sm_90): the row loads are LDG.E.128, at least 8 issued
    before the first instruction that adds what they loaded."""
    directory, _ = dlrm_model_build
    count, ahead = wide_loads(directory / "dlrm.fatbin", DLRM_KERNEL, "FADD")
    assert count >= 8
    assert ahead >= 8


@pytest.mark.parametrize(("prologue", "own"), [(GELU, False), (SQUARE, True)])
def test_the_cost_model_prices_a_prologue_inside_the_tile_kernel(prologue, own):
    """The tensor-level model agrees with the lowering: a gelu the tile
    kernel applies as it loads is no kernel of its own (`is_tile_prologue`);
    `d * d` is."""
    from coconet_ir.costmodel import machine, predict

    module = cc.parse(MOE_BEHIND.replace("PROLOGUE", prologue))
    optimized = cc.Pipeline("coco-optimize{world=4 never_slower=false}")(module)
    (prediction,) = predict(optimized, machine("h100x8"), 4).values()
    labels = [interval.label for interval in prediction.timeline]
    assert any(label.startswith("mul") for label in labels) == own, labels
    assert not any(label.startswith("gelu") for label in labels), labels
