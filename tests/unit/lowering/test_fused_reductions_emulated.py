"""Fused kernels with slice reductions (docs/gpu/fused.md, "Reductions inside a
fused kernel"): LAMB as one cooperative launch, and a three-boundary program
with max, sum and min reductions, run under the CPU emulation on N ranks,
three calls back to back, against the interpreter; the bytes each rank stores
into its peers against the static prediction; ThreadSanitizer; mutations of
the boundary protocol that the comparison or the sanitizer must catch."""

from __future__ import annotations

import re
import shutil

import fused_emulation
import numpy as np
import pytest
from fused_emulation import emulate, peer_bytes
from helpers import T, example, load_example, ops_of
from test_fused_emulated import CALLS, assert_traffic, launches_of
from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc
from coconet_ir.analysis.fused_plan import FusedPlan
from coconet_ir.backend.emu import EmulationError
from coconet_ir.dialects.coco import FusionOp
from coconet_ir.lowering.coco_to_gpu import KERNELS_MODULE, why_not_one_kernel
from coconet_ir.lowering.fused_collectives import fused_parameter_problem
from coconet_ir.lowering.kernels import KernelModule
from coconet_ir.lowering.state import Lowering

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def lamb(element: str = "f32") -> ModuleOp:
    """examples/lamb.mlir (1024 elements), optionally in another element
    type, after coco-optimize: one fusion."""
    text = example("lamb")
    if element != "f32":
        text = cc.parse(str(text).replace("f32", element))
    return cc.Pipeline("coco-optimize")(text)


def assert_close(run, rtol: float, atol: float) -> None:
    """The kernel sums a slice in block and thread order, the interpreter in
    numpy's: equal up to reassociation."""
    for expected, actual in zip(run.expected, run.actual, strict=True):
        assert expected.keys() == actual.keys()
        for key, want in expected.items():
            np.testing.assert_allclose(
                actual[key].astype(np.float64),
                want.astype(np.float64),
                rtol=rtol,
                atol=atol,
                err_msg=key,
            )


@pytest.mark.parametrize("world", [2, 4, 8])
def test_lamb_is_one_launch(world: int):
    module = lamb()
    run = emulate(module, world)
    assert_close(run, rtol=1e-5, atol=1e-6)
    assert launches_of(run, "fused") == CALLS * world
    assert sum(run.stats["kernels"].values()) == CALLS * world
    assert sum(map(sum, run.stats["nccl_calls"])) == 0
    assert_traffic(run, module, world)
    # The fused all-reduce's 2 (N-1)/N S (S = 4 KiB) plus two f32 partials
    # (the norms of w and r) to each peer.
    per_call = 2 * (world - 1) * 4096 // world + (world - 1) * 2 * 4
    assert peer_bytes(run.stats, world)[0].sum() == CALLS * per_call


@pytest.mark.parametrize("element", ["f16", "bf16"])
def test_lamb_in_halves_accumulates_in_f32(element: str):
    run = emulate(lamb(element), 4, fused_chunk=40)
    assert_close(run, rtol=1e-2, atol=1e-3)


def test_lamb_in_small_chunks():
    """Many chunks per block (16 chunks per rank, the grid capped at the
    emulator's resident blocks)."""
    run = emulate(lamb(), 4, fused_chunk=16)
    assert_close(run, rtol=1e-5, atol=1e-6)


STAGED = """
func.func @staged(%g: {local}, %w: {rep}) {{
  %gs = coco.reduce_scatter %g reduction = sum dim = 0 : {local} -> {sl}
  %ws = coco.all_slice %w dim = 0 : ({rep}) -> {sl}
  %sq = coco.mul %gs, %gs : ({sl}, {sl}) -> {sl}
  %p0 = coco.reduce %sq kind = max dims = [0] : ({sl}) -> {slocal}
  %top = coco.all_reduce %p0 reduction = max : {slocal} -> {srep}
  %scaled = coco.div %gs, %top : ({sl}, {srep}) -> {sl}
  %sq1 = coco.mul %scaled, %scaled : ({sl}, {sl}) -> {sl}
  %p1 = coco.reduce %sq1 kind = sum dims = [0] : ({sl}) -> {slocal}
  %s1 = coco.all_reduce %p1 reduction = sum : {slocal} -> {srep}
  %n = coco.sqrt %s1 : ({srep}) -> {srep}
  %unit = coco.div %scaled, %n : ({sl}, {srep}) -> {sl}
  %p2 = coco.reduce %unit kind = min dims = [0] : ({sl}) -> {slocal}
  %low = coco.all_reduce %p2 reduction = min : {slocal} -> {srep}
  %w1 = coco.sub %ws, %unit : ({sl}, {sl}) -> {sl}
  %w2 = coco.add %w1, %low : ({sl}, {srep}) -> {sl}
  %wg = coco.all_gather %w2 : {sl} -> {rep}
  coco.update %w, %wg : {rep}
  func.return
}}
"""


def staged() -> ModuleOp:
    """Three boundaries (max, sum, min), a value (`%scaled`) computed in one
    stage and read in the next two, 1000 elements (blocks of 125 at N = 8)."""
    module = cc.parse(
        STAGED.format(
            local=T("1000xf32", "local"),
            rep=T("1000xf32"),
            sl=T("1000xf32", "sliced<0>"),
            slocal=T("f32", "local"),
            srep=T("f32"),
        )
    )
    return cc.Pipeline("coco-fuse")(module)


@pytest.mark.parametrize("world,chunk", [(2, None), (8, 3)])
def test_three_boundaries(world: int, chunk: int | None):
    module = staged()
    run = emulate(module, world, fused_chunk=chunk)
    assert_close(run, rtol=1e-5, atol=1e-6)
    assert launches_of(run, "fused") == CALLS * world
    assert_traffic(run, module, world)


@pytest.mark.parametrize("program", ["lamb", "staged"])
def test_thread_sanitizer(program: str):
    """Three launches back to back under ThreadSanitizer: no report."""
    module = lamb() if program == "lamb" else staged()
    run = emulate(module, 4, fused_chunk=16, sanitize="thread")
    assert_close(run, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- mutations


def mutated(pattern: str, replacement: str, count: int = 1):
    """`fused_emulation.cuda_source` with the first `count` matches of
    `pattern` in the CUDA C replaced."""
    original = fused_emulation.cuda_source

    def source(lowered: ModuleOp) -> str:
        text, made = re.subn(pattern, replacement, original(lowered), count=count)
        if made != count:
            raise LookupError(f"no {pattern!r} in the kernel")
        return text

    return source


MUTATIONS = {
    # Block 0 combines the block partials before the other blocks have
    # stored theirs (the first boundary's arrival waits, in a loop over
    # blocks).
    "arrival": (
        r"(for \(int64_t block\w* = [^\n]*\n\s*)(coco::wait_signal)",
        r"\1//\2",
    ),
    # The other blocks read an all_reduce's result before block 0 has
    # stored it (the first boundary's flag wait).
    "flag": (r"(coco::wait_signal\(coco::own_slot\(peers, flag_slot\w*\),)", r"//\1"),
}


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_a_missing_wait_is_caught(monkeypatch: pytest.MonkeyPatch, mutation: str):
    """Each wait of the boundary protocol matters: without it
    ThreadSanitizer reports a race, or the results differ."""
    monkeypatch.setattr(fused_emulation, "cuda_source", mutated(*MUTATIONS[mutation]))
    with pytest.raises((EmulationError, AssertionError)):
        run = emulate(staged(), 4, fused_chunk=3, sanitize="thread")
        assert_close(run, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("world", [2, 4, 8])
def test_adamw_with_global_norm_clipping(world: int):
    """examples/adamw_clip.mlir (three parameters, one norm over all their
    gradients) after coco-optimize: ONE fused cooperative kernel for the
    bucket, besides the copies into and out of it (a concat and a split
    launch); no NCCL; the fused all-reduce's bytes plus one f32 partial."""
    module = cc.Pipeline("coco-optimize")(example("adamw_clip"))
    run = emulate(module, world)
    assert_close(run, rtol=1e-5, atol=1e-6)
    assert launches_of(run, "fused") == CALLS * world
    assert sum(run.stats["kernels"].values()) == 3 * CALLS * world
    assert sum(map(sum, run.stats["nccl_calls"])) == 0
    assert_traffic(run, module, world)
    elements = 256 * 64 + 64 + 128 * 32
    per_call = 2 * (world - 1) * elements * 4 // world + (world - 1) * 4
    assert peer_bytes(run.stats, world)[0].sum() == CALLS * per_call


@pytest.mark.parametrize("world", [2, 4, 8])
def test_adamw_with_global_norm_clipping_unbucketed_is_one_launch(world: int):
    """The same step without buckets: ONE fused kernel over the three
    parameters' slices (a part per shape: docs/gpu/fused.md, "Several slice
    shapes"), the three partials completed at one boundary; no copies."""
    module = cc.Pipeline("coco-optimize{bucket=false}")(example("adamw_clip"))
    run = emulate(module, world, fused_chunk=1000)
    assert_close(run, rtol=1e-5, atol=1e-6)
    assert sum(run.stats["kernels"].values()) == launches_of(run, "fused")
    assert launches_of(run, "fused") == CALLS * world
    assert sum(map(sum, run.stats["nccl_calls"])) == 0
    assert_traffic(run, module, world)


PARTS = """
func.func @parts(%a: {la}, %b: {lb}, %c: {lc}, %r: {ra}) -> ({sa}, {rb}, {rc}) {{
  %x1, %yg, %zg = coco.fusion (%a, %b, %c, %r) : ({la}, {lb}, {lc}, {ra}) -> ({sa}, {rb}, {rc}) {{
  ^bb0(%a1: {la}, %b1: {lb}, %c1: {lc}, %r1: {ra}):
    %x = coco.reduce_scatter %a1 reduction = sum dim = 0 : {la} -> {sa}
    %y = coco.reduce_scatter %b1 reduction = sum dim = 1 : {lb} -> {sb}
    %z = coco.reduce_scatter %c1 reduction = max dim = 2 : {lc} -> {sc}
    %rs = coco.all_slice %r1 dim = 0 : ({ra}) -> {sa}
    %x2 = coco.add %x, %rs : ({sa}, {sa}) -> {sa}
    %y1 = coco.dropout %y p = 2.500000e-01 seed = 3 : ({sb}) -> {sb}
    %z1 = coco.relu %z : ({sc}) -> {sc}
    %yg1 = coco.all_gather %y1 : {sb} -> {rb}
    %zg1 = coco.all_gather %z1 : {sc} -> {rc}
    coco.yield %x2, %yg1, %zg1 : {sa}, {rb}, {rc}
  }}
  func.return %x1, %yg, %zg : {sa}, {rb}, {rc}
}}
"""  # noqa: E501


def parts_program() -> ModuleOp:
    """Three shapes cut along three dims (the last two not contiguous), an
    all_slice, a dropout and two gathers, in one fusion."""
    return cc.parse(
        PARTS.format(
            la=T("32x8xf32", "local"),
            sa=T("32x8xf32", "sliced<0>"),
            ra=T("32x8xf32"),
            lb=T("4x16x6xf32", "local"),
            sb=T("4x16x6xf32", "sliced<1>"),
            rb=T("4x16x6xf32"),
            lc=T("2x3x16xf32", "local"),
            sc=T("2x3x16xf32", "sliced<2>"),
            rc=T("2x3x16xf32"),
        )
    )


@pytest.mark.parametrize(("world", "chunk"), [(2, None), (4, 7), (8, 5)])
def test_three_parts_in_one_kernel(world: int, chunk: int | None):
    """Every part pushes, reduces, computes and gathers its own chunks (a
    short last chunk in each at N = 4, 8); the bytes are the sum of the
    parts' fused all-reduces and reduce_scatters."""
    module = parts_program()
    run = emulate(module, world, fused_chunk=chunk)
    assert_close(run, rtol=1e-6, atol=1e-6)
    assert launches_of(run, "fused") == CALLS * world
    assert sum(map(sum, run.stats["nccl_calls"])) == 0
    assert_traffic(run, module, world)


def test_three_parts_under_the_thread_sanitizer():
    run = emulate(parts_program(), 4, fused_chunk=7, sanitize="thread")
    assert_close(run, rtol=1e-6, atol=1e-6)


def test_a_kernel_of_too_many_buffers_is_refused_with_the_reason():
    """Clipping over 360 parameters without buckets: one plan, but its
    kernel would take more than CUDA's 32,764 bytes of parameters (nvcc:
    "Formal parameter space overflowed"), so the lowering keeps to the op by
    op form and says why; buckets take few buffers (docs/gpu/fused.md,
    "Limits")."""
    clipped = load_example("adamw_clip")
    tensors = [(f"p{i}", [8]) for i in range(360)]
    split = "coco-split-all-reduce{world=4},coco-reorder,coco-fuse"
    module = cc.Pipeline(split)(clipped.build(tensors))
    (fusion,) = ops_of(module, FusionOp)
    plan = FusedPlan.of(fusion, 4)
    assert isinstance(plan, FusedPlan)
    lowering = Lowering(4, 256, KernelModule.create(KERNELS_MODULE))
    problem = fused_parameter_problem(lowering, plan)
    assert problem is not None and "more than CUDA's 32764 bytes" in problem
    assert "(coco-bucket takes fewer)" in why_not_one_kernel(lowering, fusion)


def test_clipping_over_a_bert_of_several_buckets():
    """BERT's tensors at toy sizes (1 layer: 23 tensors; the emulator's
    entry takes at most 1024 arguments, ctypes' limit, so not BERT-large's
    391 x 4) in 1 KiB buckets: one fused kernel for all the buckets (the norm
    joins them), the buckets' copies, and what the interpreter computes."""
    adam_bert = load_example("adam_bert")
    shapes = adam_bert.Shapes(layers=1, hidden=16, ffn=32, vocab=40, positions=16)
    tensors = adam_bert.parameters(shapes)
    module = cc.Pipeline("coco-optimize{world=4 bucket_bytes=1024}")(
        load_example("adamw_clip").build(tensors)
    )
    (fusion,) = ops_of(module, FusionOp)
    plan = FusedPlan.of(fusion, 4)
    assert isinstance(plan, FusedPlan) and len(plan.reductions) > 4  # buckets
    run = emulate(module, 4, seeds=(0,))
    assert_close(run, rtol=1e-5, atol=1e-6)
    assert launches_of(run, "fused") == 4


INPUT_READERS = {
    # rows of an input, not of the reduce_scatter's slice
    "row reduction": """
func.func @f(%a: {loc}, %h: {sl}) -> {rep} {{
  %x = coco.reduce_scatter %a reduction = sum dim = 0 : {loc} -> {sl}
  %m = coco.reduce %h kind = sum dims = [1] keep_dims : ({sl}) -> {rows}
  %y = coco.mul %x, %m : ({sl}, {rows}) -> {sl}
  %g = coco.all_gather %y : {sl} -> {rep}
  func.return %g : {rep}
}}""",
    # a norm of an input scales the reduced slice
    "slice reduction": """
func.func @f(%a: {loc}, %h: {sl}) -> {rep} {{
  %x = coco.reduce_scatter %a reduction = sum dim = 0 : {loc} -> {sl}
  %p = coco.reduce %h kind = sum dims = [0, 1] : ({sl}) -> {scl}
  %s = coco.all_reduce %p reduction = sum : {scl} -> {sc}
  %y = coco.mul %x, %s : ({sl}, {sc}) -> {sl}
  %g = coco.all_gather %y : {sl} -> {rep}
  func.return %g : {rep}
}}""",
    # an input gathered as it is, in the fusion of another slice
    "gather": """
func.func @f(%a: {loc}, %h: {sl}) -> ({sl}, {rep}) {{
  %y0, %g0 = coco.fusion (%a, %h) : ({loc}, {sl}) -> ({sl}, {rep}) {{
  ^bb0(%a1: {loc}, %h1: {sl}):
    %x = coco.reduce_scatter %a1 reduction = sum dim = 0 : {loc} -> {sl}
    %y = coco.relu %x : ({sl}) -> {sl}
    %g = coco.all_gather %h1 : {sl} -> {rep}
    coco.yield %y, %g : {sl}, {rep}
  }}
  func.return %y0, %g0 : {sl}, {rep}
}}""",
}


@pytest.mark.parametrize("world", [2, 4, 8])
@pytest.mark.parametrize("reader", INPUT_READERS)
def test_an_input_reduced_or_gathered_as_it_is(reader: str, world: int):
    """A fusion input read by a reduction or a gather, not by compute, is
    still read (a chain of its own, or its readers' chain)."""
    text = INPUT_READERS[reader].format(
        loc=T("32x64xf32", "local"),
        sl=T("32x64xf32", "sliced<0>"),
        rep=T("32x64xf32"),
        rows=T("32x1xf32", "sliced<0>"),
        scl=T("f32", "local"),
        sc=T("f32"),
    )
    module = cc.Pipeline("coco-optimize" if reader != "gather" else "coco-dce")(
        cc.parse(text)
    )
    assert ops_of(module, FusionOp)
    run = emulate(module, world, fused_chunk=500)
    assert_close(run, rtol=1e-5, atol=1e-5)
    assert launches_of(run, "fused") == CALLS * world
