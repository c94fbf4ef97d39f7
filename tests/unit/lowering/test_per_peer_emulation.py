"""`coco.per_peer` and `coco.shift` through convert-coco-to-gpu, the CUDA
target and the CPU emulation (coconet_ir/lowering/per_peer.py; docs/gpu/overlap.md,
"Per-peer overlap"): after `coco-overlap{per_peer=true}` the three programs
(all_gather -> matmul -> gelu, matmul -> reduce_scatter, and the
sequence-parallel MLP with both) equal the interpreter on 2, 4 and 8 ranks,
in f16 and bf16 and at K = 4096; each rank sends exactly (N-1)/N of the
gathered operand and of the partial, as the device IR predicts; three calls
back to back are ThreadSanitizer-clean; the stream timeline shows step s+1's
copy in flight before step s's gemm ends; and two injected bugs (a missing
arrival wait, chunk r instead of (r + s) mod N) are caught.

Summed outputs (the gathered dim contracted, on the left or on the right;
output dim -1), replicated (per-chunk slots summed in chunk order) or sliced
(gemms accumulating into the output): equal to the interpreter on 2, 4 and 8
ranks, in f16, bf16, f64 and i32 and at K = 4096, with exactly (N-1)/N of the
gathered operand sent; overwriting instead of accumulating, and accumulating
a replicated output in each rank's own order, are caught."""

from __future__ import annotations

import re
from functools import cache

import numpy as np
import pytest
from fused_emulation import cuda_source, emulate, peer_bytes
from helpers import EXAMPLES_DIR, load_example
from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc
from coconet_ir.analysis.device_traffic import device_traffic
from coconet_ir.backend.emu import EmulationError, compile_emulated
from coconet_ir.dialects import coco
from coconet_ir.dialects.coco import element_info
from coconet_ir.emulate import EmulatorStats
from coconet_ir.lowering import per_peer

PER_PEER = "coco-overlap{per_peer=true}"

GATHER_MATMUL = """
func.func @f(%x: !coco.tensor<RxKxELT, sliced<0>>, %w: !coco.tensor<KxMxELT, sliced<1>>) -> !coco.tensor<RxMxELT, sliced<1>> {
  %a = coco.all_gather %x : !coco.tensor<RxKxELT, sliced<0>> -> !coco.tensor<RxKxELT, replicated>
  %m = coco.matmul %a, %w {name = "mm"} : (!coco.tensor<RxKxELT, replicated>, !coco.tensor<KxMxELT, sliced<1>>) -> !coco.tensor<RxMxELT, sliced<1>>
  %g = coco.gelu %m : (!coco.tensor<RxMxELT, sliced<1>>) -> !coco.tensor<RxMxELT, sliced<1>>
  func.return %g : !coco.tensor<RxMxELT, sliced<1>>
}
"""  # noqa: E501

GATHER_DROPOUT = """
func.func @f(%x: !coco.tensor<16x32xf32, sliced<0>>, %w: !coco.tensor<32x64xf32, sliced<1>>) -> !coco.tensor<16x64xf32, sliced<1>> {
  %a = coco.all_gather %x : !coco.tensor<16x32xf32, sliced<0>> -> !coco.tensor<16x32xf32, replicated>
  %m = coco.matmul %a, %w : (!coco.tensor<16x32xf32, replicated>, !coco.tensor<32x64xf32, sliced<1>>) -> !coco.tensor<16x64xf32, sliced<1>>
  %d = coco.dropout %m p = 0.25 seed = 7 : (!coco.tensor<16x64xf32, sliced<1>>) -> !coco.tensor<16x64xf32, sliced<1>>
  func.return %d : !coco.tensor<16x64xf32, sliced<1>>
}
"""  # noqa: E501

MATMUL_RS = """
func.func @f(%a: !coco.tensor<32xKxELT, sliced<1>>, %b: !coco.tensor<Kx32xELT, sliced<0>>) -> !coco.tensor<32x32xELT, sliced<0>> {
  %p = coco.matmul %a, %b : (!coco.tensor<32xKxELT, sliced<1>>, !coco.tensor<Kx32xELT, sliced<0>>) -> !coco.tensor<32x32xELT, local>
  %c = coco.reduce_scatter %p reduction = sum dim = 0 : !coco.tensor<32x32xELT, local> -> !coco.tensor<32x32xELT, sliced<0>>
  func.return %c : !coco.tensor<32x32xELT, sliced<0>>
}
"""  # noqa: E501

CONTRACTED_LHS = """
func.func @f(%x: !coco.tensor<16xKxELT, sliced<1>>, %w: !coco.tensor<Kx32xELT, LAYOUT>) -> !coco.tensor<16x32xELT, LAYOUT> {
  %g = coco.all_gather %x : !coco.tensor<16xKxELT, sliced<1>> -> !coco.tensor<16xKxELT, replicated>
  %m = coco.matmul %g, %w {name = "mm"} : (!coco.tensor<16xKxELT, replicated>, !coco.tensor<Kx32xELT, LAYOUT>) -> !coco.tensor<16x32xELT, LAYOUT>
  func.return %m : !coco.tensor<16x32xELT, LAYOUT>
}
"""  # noqa: E501

CONTRACTED_RHS = """
func.func @f(%a: !coco.tensor<16xKxELT, LAYOUT>, %u: !coco.tensor<Kx32xELT, sliced<0>>) -> !coco.tensor<16x32xELT, LAYOUT> {
  %g = coco.all_gather %u : !coco.tensor<Kx32xELT, sliced<0>> -> !coco.tensor<Kx32xELT, replicated>
  %m = coco.matmul %a, %g {name = "mm"} : (!coco.tensor<16xKxELT, LAYOUT>, !coco.tensor<Kx32xELT, replicated>) -> !coco.tensor<16x32xELT, LAYOUT>
  func.return %m : !coco.tensor<16x32xELT, LAYOUT>
}
"""  # noqa: E501

SHIFT = """
func.func @f(%a: !coco.tensor<8x4xf32, LAYOUT>) -> !coco.tensor<8x4xf32, LAYOUT> {
  %s = coco.shift %a by = BY : !coco.tensor<8x4xf32, LAYOUT> -> !coco.tensor<8x4xf32, LAYOUT>
  %t = coco.add %s, %a : (!coco.tensor<8x4xf32, LAYOUT>, !coco.tensor<8x4xf32, LAYOUT>) -> !coco.tensor<8x4xf32, LAYOUT>
  func.return %t : !coco.tensor<8x4xf32, LAYOUT>
}
"""  # noqa: E501


def gather_matmul(rows=16, k=32, m=64, element="f32") -> str:
    return (
        GATHER_MATMUL.replace("RxK", f"{rows}x{k}")
        .replace("KxM", f"{k}x{m}")
        .replace("RxM", f"{rows}x{m}")
        .replace("ELT", element)
    )


def matmul_rs(k=64, element="f32") -> str:
    return (
        MATMUL_RS.replace("xKx", f"x{k}x")
        .replace("Kx32", f"{k}x32")
        .replace("ELT", element)
    )


def contracted(side: str, layout: str, k=64, element="f32") -> str:
    """all_gather -> matmul over the gathered (contracted) dim: `side` lhs
    (x sliced<1> times w) or rhs (a times u sliced<0>); `layout`: the other
    operand's and the result's, replicated or sliced (w's columns, a's rows)."""
    text = CONTRACTED_LHS if side == "lhs" else CONTRACTED_RHS
    if layout == "sliced":
        layout = "sliced<1>" if side == "lhs" else "sliced<0>"
    return (
        text.replace("xKx", f"x{k}x")
        .replace("Kx32", f"{k}x32")
        .replace("ELT", element)
        .replace("LAYOUT", layout)
    )


def mlp(element="f32") -> str:
    text = (EXAMPLES_DIR / "sequence_parallel_mlp.mlir").read_text()
    return text.replace("f32", element)


PROGRAMS = {
    "gather_matmul_gelu": gather_matmul(),
    "matmul_reduce_scatter": (EXAMPLES_DIR / "matmul_reduce_scatter.mlir").read_text(),
    "sequence_parallel_mlp": mlp(),
}


@cache
def per_peer_module(text: str) -> ModuleOp:
    module = cc.Pipeline(PER_PEER)(cc.parse(text))
    assert any(isinstance(op, coco.PerPeerOp) for op in module.walk())
    return module


def sizes(module: ModuleOp, world: int) -> tuple[int, int]:
    """The bytes of the gathered inputs and of the reduce-scattered partials
    of the module's per_peer regions (global: S)."""
    gathered = partial = 0
    for op in module.walk():
        if isinstance(op, coco.PerPeerOp):
            for i, value in enumerate(op.inputs):
                if op.gathered(i):
                    gathered += nbytes(value.type)  # type: ignore[arg-type]
            for j, value in enumerate(op.outputs):
                if op.scattered(j):
                    partial += nbytes(value.type)  # type: ignore[arg-type]
    return gathered, partial


def nbytes(t: coco.TensorType) -> int:
    return int(np.prod(t.dims)) * element_info(t.element_type).bytes


def assert_matches(run, element: str = "f32", k: int = 64) -> None:
    """The interpreter's tolerance for `element`, plus a sum of `k` terms."""
    rtol = {"f32": 1e-5, "f16": 2e-2, "bf16": 4e-2, "f64": 1e-12, "i32": 0}[element]
    for expected, actual in zip(run.expected, run.actual, strict=True):
        for key, want in expected.items():
            if not rtol:  # integers: exact
                np.testing.assert_array_equal(actual[key], want)
                continue
            got = actual[key].astype(np.float64)
            want = want.astype(np.float64)
            scale = float(np.abs(want).max()) or 1.0
            np.testing.assert_allclose(
                got, want, rtol=rtol, atol=rtol * scale + 2 * k * 2**-24 * scale
            )


def assert_bytes(run, module: ModuleOp, world: int) -> None:
    gathered, partial = sizes(module, world)
    want = (world - 1) * gathered // world + (world - 1) * partial // world
    sent = peer_bytes(run.stats, world).sum(axis=1) // len(run.expected)
    assert sent.tolist() == [want] * world
    (traffic,) = device_traffic(run.lowered).values()
    assert traffic.bytes_per_rank().tolist() == [want] * world


@pytest.mark.parametrize("world", [2, 4, 8])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_per_peer_matches_the_interpreter_with_the_bytes_of_the_collectives(
    name: str, world: int
):
    module = per_peer_module(PROGRAMS[name])
    run = emulate(module.clone(), world, seeds=(0,))
    assert_matches(run)
    assert_bytes(run, module, world)


@pytest.mark.parametrize("element", ["f16", "bf16"])
def test_halves_are_reduced_in_f32(element: str):
    module = per_peer_module(mlp(element))
    run = emulate(module.clone(), 4, seeds=(0,))
    assert_matches(run, element)
    assert_bytes(run, module, 4)
    kernels = cuda_source(run.lowered)
    assert "_accumulate_" in kernels and "_widen_" in kernels and "_round_" in kernels


def test_a_long_reduction_k_4096():
    module = per_peer_module(matmul_rs(k=4096))
    run = emulate(module.clone(), 4, seeds=(0,))
    assert_matches(run, k=4096)
    assert_bytes(run, module, 4)


def test_dropout_keeps_its_global_index():
    module = per_peer_module(GATHER_DROPOUT)
    for world in (2, 4):
        run = emulate(module.clone(), world, seeds=(0,))
        assert_matches(run)


@pytest.mark.parametrize(
    "layout, by, world",
    [("sliced<0>", 1, 2), ("sliced<0>", 3, 4), ("local", -1, 4), ("replicated", 1, 4)],
)
def test_shift(layout: str, by: int, world: int):
    module = cc.parse(SHIFT.replace("LAYOUT", layout).replace("BY", str(by)))
    run = emulate(module, world, seeds=(0, 1))
    assert_matches(run)
    block = 8 * 4 * 4 // (world if layout.startswith("sliced") else 1)
    moved = 0 if layout == "replicated" else block
    sent = peer_bytes(run.stats, world).sum(axis=1) // 2
    assert sent.tolist() == [moved] * world


def test_three_calls_back_to_back_are_thread_sanitizer_clean():
    module = per_peer_module(mlp())
    run = emulate(module.clone(), 4, seeds=(0, 1, 2), sanitize="thread")
    assert_matches(run)


def test_the_copy_of_step_s_plus_1_is_in_flight_before_the_gemm_of_step_s_ends():
    """On every rank, for every step s >= 1, the peer copy bringing step
    s+1's block (issued by rank r + s + 1 on its stream 1) starts before the
    rank's gemm of step s ends (event numbers of one counter, docs/gpu/emulation.md,
    "Timeline"). Step 0 is left out: its gemm, on the rank's own block, starts at
    once while the first copy waits for its credit to travel, so its margin
    is the smallest (thread starts and polls on a loaded two-core machine
    can take as long as that gemm)."""
    world = 4
    module = per_peer_module(gather_matmul(rows=64, k=2048, m=2048))
    run = emulate(module.clone(), world, seeds=(0,))
    assert_matches(run, k=2048)
    stats = EmulatorStats(run.stats, world)
    for r in range(world):
        gemms = stats.events_of(r, 0, "gemm")
        assert len(gemms) == world
        for s in range(1, world - 1):
            sender = (r + s + 1) % world
            (copy,) = [
                e for e in stats.events_of(sender, 1, "peer_copy") if e.peer == r
            ]
            assert copy.start < gemms[s].end, (r, s, copy, gemms[s])


def test_a_missing_arrival_wait_is_caught():
    """Drop the compute stream's waits for the gathered blocks: the body reads
    a block while (or before) its peer copy writes it."""
    module = per_peer_module(gather_matmul())
    lowered = cc.Pipeline("convert-coco-to-gpu{world=4 threads=32}")(module.clone())
    source = cuda_source(lowered)
    lines = source.splitlines()
    waits = [
        i
        for i, line in enumerate(lines)
        if "COCO_LAUNCH(f_wait_0" in line and "ctx->streams[0]" in line
    ]
    assert len(waits) == 3
    broken = "\n".join(line for i, line in enumerate(lines) if i not in waits)
    library = compile_emulated(broken, "thread")
    with pytest.raises((EmulationError, AssertionError)):
        run = emulate_library(library, module, lowered, 4)
        assert_matches(run)


def emulate_library(library, module, lowered, world):
    """`fused_emulation.emulate` on an already built (mutated) library."""
    import fused_emulation

    original = fused_emulation.compile_emulated
    fused_emulation.compile_emulated = lambda *_: library
    try:
        return emulate(module.clone(), world, seeds=(0, 1))
    finally:
        fused_emulation.compile_emulated = original


def test_chunk_r_instead_of_r_plus_s_is_caught(monkeypatch: pytest.MonkeyPatch):
    """Every step computing the rank's own chunk (the wrong place for the
    output) gives wrong values."""
    monkeypatch.setattr(per_peer, "chunk_at_step", lambda values, s: values.rank())
    module = per_peer_module(gather_matmul())
    run = emulate(module.clone(), 4, seeds=(0,))
    with pytest.raises(AssertionError):
        assert_matches(run)


# ============================================================================
# Summed outputs (a gathered contracted dim)
# ============================================================================


def summed_module(side: str, layout: str, k=64, element="f32") -> ModuleOp:
    module = per_peer_module(contracted(side, layout, k, element))
    (op,) = [o for o in module.walk() if isinstance(o, coco.PerPeerOp)]
    assert list(op.output_dims.get_values()) == [-1]
    return module


@pytest.mark.parametrize("world", [2, 4, 8])
@pytest.mark.parametrize("layout", ["replicated", "sliced"])
@pytest.mark.parametrize("side", ["lhs", "rhs"])
def test_summed_outputs_match_the_interpreter_with_the_bytes_of_the_gather(
    side: str, layout: str, world: int
):
    """Equal to the interpreter (and, replicated, bit for bit on every rank:
    `global_of`); each rank sends (N-1)/N of the gathered operand, nothing
    else, as the device IR predicts."""
    module = summed_module(side, layout)
    run = emulate(module.clone(), world, seeds=(0,))
    assert_matches(run)
    assert_bytes(run, module, world)
    assert sizes(module, world)[1] == 0
    kernels = cuda_source(run.lowered)
    if layout == "replicated":
        assert "_sum_" in kernels
    else:
        assert "_sum_" not in kernels and kernels.count("&beta") == world


@pytest.mark.parametrize("element", ["f16", "bf16"])
@pytest.mark.parametrize("layout", ["replicated", "sliced"])
@pytest.mark.parametrize("side", ["lhs", "rhs"])
def test_summed_halves_accumulate_in_f32(side: str, layout: str, element: str):
    """The gemms write f32 from the half blocks (an accumulator, or the
    slots), rounded into the output once."""
    module = summed_module(side, layout, element=element)
    run = emulate(module.clone(), 4, seeds=(0,))
    assert_matches(run, element)
    assert_bytes(run, module, 4)
    source = cuda_source(run.lowered)
    assert "CUDA_R_32F" in source
    assert ("_sum_" if layout == "replicated" else "_round_") in source


@pytest.mark.parametrize("element", ["f64", "i32"])
def test_summed_f64_and_integers(element: str):
    """f64 gemms compute in f64; an integer matmul (a kernel) adds its
    partials by a kernel, any order giving the same sum."""
    for layout in ("replicated", "sliced"):
        module = summed_module("lhs", layout, element=element)
        run = emulate(module.clone(), 4, seeds=(0,))
        assert_matches(run, element)
        assert_bytes(run, module, 4)


@pytest.mark.parametrize("layout", ["replicated", "sliced"])
def test_summed_a_long_contracted_dim_k_4096(layout: str):
    module = summed_module("lhs", layout, k=4096)
    run = emulate(module.clone(), 4, seeds=(0,))
    assert_matches(run, k=4096)
    assert_bytes(run, module, 4)


@pytest.mark.parametrize("layout", ["replicated", "sliced"])
def test_summed_three_calls_back_to_back_are_thread_sanitizer_clean(layout: str):
    module = summed_module("rhs", layout)
    run = emulate(module.clone(), 4, seeds=(0, 1, 2), sanitize="thread")
    assert_matches(run)


def test_summed_overwriting_instead_of_accumulating_is_caught(
    monkeypatch: pytest.MonkeyPatch,
):
    """Every step's gemm with beta = 0: the output holds the last step's
    partial product only."""
    right = per_peer.GemmOp
    monkeypatch.setattr(per_peer, "GemmOp", lambda a, b, c, **_: right(a, b, c))
    module = summed_module("lhs", "sliced")
    run = emulate(module.clone(), 4, seeds=(0,))
    assert "&beta" in cuda_source(run.lowered)
    with pytest.raises(AssertionError):
        assert_matches(run)


def test_summed_replicated_in_each_ranks_order_is_caught(
    monkeypatch: pytest.MonkeyPatch,
):
    """A replicated output accumulated as the chunks come (rank r from chunk
    r on): right up to rounding, but the ranks disagree on 4 ranks."""
    monkeypatch.setattr(per_peer, "sums_in_chunk_order", lambda t: False)
    module = summed_module("rhs", "replicated")
    with pytest.raises(cc.CocoError, match="ranks disagree"):
        emulate(module.clone(), 4, seeds=(0, 1))


# ============================================================================
# World 1: nothing to overlap (docs/gpu/overlap.md, "At world 1")
# ============================================================================

OVERLAP_KERNELS = ("_widen_", "_round_", "_accumulate_", "_sum_", "_signal_", "_wait_")
"""Kernels a per-peer region adds to its body's own: none at world 1."""

WORLD_1_PROGRAMS = {
    "gather_matmul_gelu": gather_matmul(element="bf16"),
    "matmul_reduce_scatter": matmul_rs(element="bf16"),
    "sequence_parallel_mlp": mlp("bf16"),
    "summed_lhs_replicated": contracted("lhs", "replicated", element="bf16"),
    "summed_rhs_sliced": contracted("rhs", "sliced", element="bf16"),
    "summed_integers": contracted("lhs", "sliced", element="i32"),
}


@pytest.mark.parametrize("name", sorted(WORLD_1_PROGRAMS))
def test_world_1_is_the_body_writing_its_outputs(name: str):
    """On one rank a per-peer region is its body once, on the rank's own
    blocks, straight into its outputs: each float matmul one gemm into the
    output in the output's type (no f32 accumulator, no slots), no flag
    kernels, events, peer copies or rounding; equal to the interpreter. On
    two ranks the same module has them all (the control)."""
    text = WORLD_1_PROGRAMS[name]
    module = per_peer_module(text)
    run = emulate(module.clone(), 1, seeds=(0,))
    element = "i32" if "i32" in text else "bf16"
    assert_matches(run, element)
    source = cuda_source(run.lowered)
    kernels = re.findall(r"__global__ .* (\w+)\(", source)
    assert not [k for k in kernels for part in OVERLAP_KERNELS if part in k]
    for absent in ("cudaEventRecord", "peer_copy", "CUDA_R_32F", "next_epoch"):
        assert absent not in source
    matmuls = sum(isinstance(op, coco.MatmulOp) for op in module.walk())
    assert source.count("cublasGemmEx(") == (0 if element == "i32" else matmuls)
    assert EmulatorStats(run.stats, 1).total_launches == len(kernels)
    two = cuda_source(cc.Pipeline("convert-coco-to-gpu{world=2}")(module.clone()))
    assert "cudaEventRecord" in two and "_signal_0(" in two


MEGATRON_PER_PEER = (
    "coco-split-all-reduce,coco-reorder,coco-overlap{per_peer=true},coco-fuse"
)
"""What `coco-optimize` makes of the Megatron layer at model size (a per-peer
matmul -> reduce_scatter, the all_slice of the residual, one fused
bias -> dropout -> residual kernel, an all_gather), at any size."""


megatron = load_example("megatron")


def test_megatron_at_world_1_is_a_gemm_and_one_kernel():
    """The Megatron layer's per-peer form on one rank (bf16): one gemm
    straight into the product, then the fused kernel reading the residual
    where it is and writing the result: no widen/round kernels, no
    all_slice copy, no all_gather (2 -> 0 extra launches, 6 -> 1 in all);
    equal to the interpreter."""
    sizes = {**megatron.TEST, "element": cc.bf16}
    module = cc.Pipeline(MEGATRON_PER_PEER)(megatron.build(sizes))
    run = emulate(module.clone(), 1, seeds=(0, 1))
    assert_matches(run, "bf16")
    source = cuda_source(run.lowered)
    assert EmulatorStats(run.stats, 1, calls=2).total_launches == 1
    assert source.count("__global__") == 1 and "_dropout_fused_" in source
    assert source.count("cublasGemmEx(") == 1 and "nccl" not in source
    assert "CUDA_R_32F" not in source and "Memcpy" not in source


def test_megatron_at_model_size_and_world_1_is_cublas_and_one_kernel():
    """`examples/megatron.py --model` through `coco-optimize`: on one rank a
    gemm into the product and one vectorized kernel writing the result; on 4
    ranks the per-peer form stays."""
    module = cc.Pipeline("coco-optimize")(megatron.build(megatron.MODEL))
    assert any(isinstance(op, coco.PerPeerOp) for op in module.walk())
    one = cuda_source(cc.Pipeline("convert-coco-to-gpu{world=1}")(module.clone()))
    assert one.count("__global__") == 1 and one.count("cublasGemmEx(") == 1
    assert "nccl" not in one and "cudaEventRecord" not in one
    # 16 bytes a load and a store (docs/gpu/cuda.md, "Vectorization"); the
    # dropout's index is the lane's own: its block is one run of the value.
    for loaded in ("sum", "r"):
        assert f"reinterpret_cast<const uint4 *>({loaded})[v]" in one
    assert "reinterpret_cast<uint4 *>(result0)[v] =" in one
    assert "const int64_t index_cast = (int64_t)(v * 8 + 0);" in one
    four = cuda_source(cc.Pipeline("convert-coco-to-gpu{world=4}")(module.clone()))
    assert "_widen_" in four and "peer_copy" in four
