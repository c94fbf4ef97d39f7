"""The `triton` target (docs/triton.md, "The triton target"): the GEMM +
all_to_all, embedding + all_to_all and GEMV + all_reduce tile kernels
printed from their plans' records, run a process per rank under Triton's
interpreter, against the reference interpreter on 2 and 4 ranks (f32,
bf16, a grouped and a dense GEMM, sum/mean/max pooling, with 8 ranks for
tiles spanning experts, a GEMV with K in the thousands); one-line bugs in
the printed kernels are caught; an index out of range is the op's error;
what has no Triton form yet is refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("triton")

from helpers import load_example

import coconet_ir as cc
from coconet_ir.backend.triton import printer
from coconet_ir.backend.triton.printer import emit_triton
from coconet_ir.diagnostics import CocoError
from coconet_ir.emulate import compare_runs, lower, run_triton
from coconet_ir.interpreter import interpret

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def moe(**sizes) -> cc.ModuleOp:
    example = load_example("moe_gemm_a2a")
    return example.build(dict(example.TEST, **sizes))


def matches(module, world: int) -> bool:
    got = run_triton(module, world)
    reference = interpret(module, world, inputs=got.inputs)
    return compare_runs(reference, got, module).ok


@pytest.mark.parametrize("world", [2, 4])
def test_the_moe_gemm_all_to_all_matches_the_interpreter(world: int) -> None:
    assert matches(moe(), world)


def test_bf16_tiles_match_the_interpreter() -> None:
    assert matches(moe(element=cc.bf16), 2)


def test_tiles_spanning_several_experts() -> None:
    """C = 1, S = 4: a tile of 32 rows holds 8 experts' rows: one product
    per expert in the tile."""
    module = moe(E=8, S=4, C=1, F=16, H=16)
    text = emit_triton(lower(module, 4).device)
    assert "for g in range(g_lo, g_hi + 1):" in text
    assert matches(module, 4)


def dense() -> cc.ModuleOp:
    @cc.function
    def dense_a2a(
        x: cc.tensor([8, 4, 16], cc.f32, cc.sliced(0)),
        w: cc.tensor([16, 32], cc.f32, cc.replicated),
    ):
        y = cc.matmul(x, w, name="up")
        return cc.all_to_all(y, dim=1, name="combine")

    return cc.module(dense_a2a)


def test_a_dense_gemm_all_to_all() -> None:
    module = dense()
    text = emit_triton(lower(module, 2).device)
    assert '"""GEMM + all_to_all on 2 ranks' in text
    assert "g_lo" not in text  # one weight matrix
    assert matches(module, 2)


def test_the_printed_module_reads_as_the_plan_says() -> None:
    text = emit_triton(lower(moe(), 2).device)
    assert "cl.put(buffer_ptrs, peer, into, tile, mask=mask)" in text
    assert "cl.signal(pad_ptrs, peer, tile_slots + rank * 1 + t, epoch)" in text
    assert "cl.wait(pad_ptrs, rank, ready + peer, epoch, errors, max_spins)" in text
    assert "def coco_moe_gemm_a2a(world: ct.SymmetricWorld, tokens, w, result0)" in text
    assert "recv = world.view(0, (2048,), torch.float32)" in text
    compile(text, "<triton>", "exec")


MUTATIONS = [
    ("moe_gemm_a2a", "d1 = d1 + peer * 4", "d1 = d1 + rank * 4"),
    ("dlrm_embedding", "bag = peer * 8 +", "bag = rank * 8 +"),
    (
        "dlrm_embedding",
        "tile_slots + rank * 8 + t, epoch",
        "tile_slots + peer * 8 + t, epoch",
    ),
    ("gemv_allreduce", "into = rank * 256 + at", "into = owner * 256 + at"),
    (
        "gemv_allreduce",
        "c = owner + (pid % 1) * 2",
        "c = rank + (pid % 1) * 2",
    ),
]
"""The printed kernel with one realistic bug: the all_to_all's dim not moved
to the destination's block, the bags of the wrong destination, a tile
signalled on the wrong source's slot (a peer waits for it forever: the
watchdog), a GEMV partial at the owner's row instead of this rank's, the
partial of the wrong tile for an owner."""


@pytest.mark.parametrize(("example", "right", "wrong"), MUTATIONS)
def test_a_one_line_bug_in_the_printed_kernel_is_caught(
    monkeypatch: pytest.MonkeyPatch, example: str, right: str, wrong: str
) -> None:
    def mutated(module):
        text = emit_triton(module)
        assert right in text
        return text.replace(right, wrong)

    monkeypatch.setattr(printer, "emit_triton", mutated)
    monkeypatch.setattr("coconet_ir.triton.world.INTERPRETER_MAX_SPINS", 2000)
    module = cc.parse_file(str(EXAMPLES / f"{example}.mlir"))
    try:
        assert not matches(module, 2)
    except CocoError as error:  # the watchdog, or a rank that failed
        assert "gave up" in str(error)


def dlrm(**sizes) -> cc.ModuleOp:
    example = load_example("dlrm_embedding")
    return example.build(dict(example.TEST, **sizes))


@pytest.mark.parametrize("world", [2, 4])
def test_the_dlrm_embedding_all_to_all_matches_the_interpreter(world: int) -> None:
    assert matches(cc.parse_file(str(EXAMPLES / "dlrm_embedding.mlir")), world)


@pytest.mark.parametrize("pooling", ["mean", "max"])
def test_mean_and_max_pooling(pooling: str) -> None:
    example = load_example("dlrm_embedding")
    T, R, D, B, L = 8, 32, 8, 8, 3

    @cc.function
    def pooled(
        tables: cc.tensor([T, R, D], cc.f32, cc.sliced(0)),
        indices: cc.tensor([T, B, L], cc.i32, cc.sliced(0)),
    ):
        rows = cc.embedding(tables, indices, pooling, name="lookup")
        return cc.all_to_all(rows, dim=1, name="to_batch")

    assert example is not None
    assert matches(cc.module(pooled), 2)


def test_bf16_rows_pool_in_f32() -> None:
    assert matches(dlrm(element=cc.bf16), 2)


def test_an_index_out_of_range_is_the_ops_error() -> None:
    module = cc.parse_file(str(EXAMPLES / "dlrm_embedding.mlir"))
    inputs = dict(run_triton(module, 2).inputs)
    key = next(k for k, v in inputs.items() if v.dtype.kind == "i")
    inputs[key] = inputs[key].copy()
    inputs[key][0, 0, 0] = 64  # the tables have rows 0 .. 63
    with pytest.raises(
        CocoError,
        match=r"'coco.embedding' op 'lookup': an index is out of range \[0, 64\)",
    ):
        run_triton(module, 2, inputs=inputs)


@pytest.mark.parametrize("world", [2, 4])
def test_the_gemv_all_reduce_example_matches_the_interpreter(world: int) -> None:
    """The fused GEMV + all_reduce, then the bias as a map kernel."""
    module = cc.parse_file(str(EXAMPLES / "gemv_allreduce.mlir"))
    text = emit_triton(lower(module, world).device)
    assert '"""GEMV + all_reduce on' in text
    assert (
        "def gemv_allreduce_out_0(n, sum, bias, result0, BLOCK: tl.constexpr)" in text
    )
    assert matches(module, world)


def test_a_bf16_gemv_with_k_in_the_thousands() -> None:
    """H = 4096 on 4 ranks (K/N = 1024, 16 tiles, 4 reduced by each rank):
    partials rounded to bf16, reduced in f32."""

    @cc.function
    def gemv(
        x: cc.tensor([1, 1, 4096], cc.bf16, cc.sliced(2)),
        w: cc.tensor([4096, 4096], cc.bf16, cc.sliced(0)),
    ):
        y = cc.matmul(x, w, name="proj")
        return cc.all_reduce(y, "sum", name="sum")

    assert matches(cc.module(gemv), 4)


def test_operators_without_a_triton_form_are_refused_by_name() -> None:
    sgd = cc.parse_file(str(EXAMPLES / "sgd.mlir"))
    with pytest.raises(
        CocoError, match="kernel @sgd_sum_rs_fused_0 has no Triton form yet"
    ):
        emit_triton(lower(sgd, 2).device)
    mrs = cc.parse_file(str(EXAMPLES / "matmul_reduce_scatter.mlir"))
    with pytest.raises(CocoError, match=r"the host op 'coco_gpu\.gemm' has no Triton"):
        emit_triton(lower(mrs, 2).device)
    with pytest.raises(CocoError, match="not at the device level"):
        emit_triton(moe())


def test_coconet_run_checks_the_triton_backend(capsys: pytest.CaptureFixture) -> None:
    from coconet_ir.tools import coconet_run

    argv = [str(EXAMPLES / "moe_gemm_a2a.mlir"), "--backend", "triton", "--world", "2"]
    try:
        coconet_run.main([*argv, "--check"])
    except SystemExit as done:
        assert not done.code, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "backend triton" in out
    assert "matches the interpreter" in out
