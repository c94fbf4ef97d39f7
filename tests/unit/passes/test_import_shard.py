"""coco-import-shard on programs sharded as an MLIR user shards them: real
mlir-opt 22 runs `sharding-propagation`, the pass imports its output, and the
import must equal a hand-written coco program of the same math (the
interpreter, and `coconet-run --compare` once), then optimize, lower and
print as CUDA. Also each collective an annotation change implies, and the
refusals, which leave the module as it was."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import EXAMPLES_DIR, mlir_opt, tool_command, write

import coconet_ir as cc
from coconet_ir.backend.cuda.printer import emit_cuda
from coconet_ir.dialects import coco
from coconet_ir.passes.base import PassRefused

MLIR_OPT = mlir_opt()
needs_mlir_opt = pytest.mark.skipif(
    MLIR_OPT is None, reason="real MLIR 22 (mlir-opt) is not installed"
)
PROPAGATE = "--pass-pipeline=builtin.module(func.func(sharding-propagation))"


def propagate(program: str) -> str:
    """What real mlir-opt's sharding propagation prints for `program`."""
    assert MLIR_OPT is not None
    done = subprocess.run(
        [MLIR_OPT, PROPAGATE], input=program, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def imported(program: str) -> cc.ModuleOp:
    """`program` through sharding propagation, then coco-import-shard."""
    return cc.Pipeline("coco-import-shard")(cc.parse(propagate(program)))


def coco_ops(module) -> list[str]:
    return [op.name for op in module.walk() if op.name.startswith("coco.")]


def argument_layouts(module) -> list[str]:
    (func,) = module.ops
    return [str(arg.type.layout) for arg in func.body.block.args]


def zero_init(name: str, shape: str) -> str:
    return (
        f"  %{name}_e = tensor.empty() : tensor<{shape}xf32>\n"
        f"  %{name} = linalg.fill ins(%zero : f32) outs(%{name}_e : "
        f"tensor<{shape}xf32>) -> tensor<{shape}xf32>\n"
    )


def mlp(world: int, s: int, h: int, f: int) -> str:
    """Megatron's MLP as an MLIR user shards it: x replicated, W1 split by
    columns, W2 by rows; exp activation, residual."""
    x, w1, w2 = f"{s}x{h}", f"{h}x{f}", f"{f}x{h}"
    return f"""shard.grid @tp(shape = {world})
func.func @mlp(%x: tensor<{x}xf32>, %w1: tensor<{w1}xf32>, %w2: tensor<{w2}xf32>) -> tensor<{x}xf32> {{
  %rep = shard.sharding @tp split_axes = [[]] : !shard.sharding
  %cols = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
  %rows = shard.sharding @tp split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %rep annotate_for_users : tensor<{x}xf32>
  %w1s = shard.shard %w1 to %cols annotate_for_users : tensor<{w1}xf32>
  %w2s = shard.shard %w2 to %rows annotate_for_users : tensor<{w2}xf32>
  %zero = arith.constant 0.0 : f32
{zero_init("h0", f"{s}x{f}")}  %h = linalg.matmul ins(%xs, %w1s : tensor<{x}xf32>, tensor<{w1}xf32>) outs(%h0 : tensor<{s}x{f}xf32>) -> tensor<{s}x{f}xf32>
  %a0 = tensor.empty() : tensor<{s}x{f}xf32>
  %a = linalg.elementwise kind=#linalg.elementwise_kind<tanh> ins(%h : tensor<{s}x{f}xf32>) outs(%a0 : tensor<{s}x{f}xf32>) -> tensor<{s}x{f}xf32>
{zero_init("y0", x)}  %y = linalg.matmul ins(%a, %w2s : tensor<{s}x{f}xf32>, tensor<{w2}xf32>) outs(%y0 : tensor<{x}xf32>) -> tensor<{x}xf32>
  %r0 = tensor.empty() : tensor<{x}xf32>
  %r = linalg.add ins(%y, %xs : tensor<{x}xf32>, tensor<{x}xf32>) outs(%r0 : tensor<{x}xf32>) -> tensor<{x}xf32>
  %out = shard.shard %r to %rep : tensor<{x}xf32>
  return %out : tensor<{x}xf32>
}}
"""  # noqa: E501


def mlp_by_hand(s: int, h: int, f: int) -> str:
    """The same MLP, written in coco."""
    x = f"!coco.tensor<{s}x{h}xf32, replicated>"
    w1, w2 = (
        f"!coco.tensor<{h}x{f}xf32, sliced<1>>",
        f"!coco.tensor<{f}x{h}xf32, sliced<0>>",
    )
    hidden = f"!coco.tensor<{s}x{f}xf32, sliced<1>>"
    partial = f"!coco.tensor<{s}x{h}xf32, local>"
    return f"""func.func @mlp(%x: {x}, %w1: {w1}, %w2: {w2}) -> {x} {{
  %h = coco.matmul %x, %w1 : ({x}, {w1}) -> {hidden}
  %a = coco.tanh %h : ({hidden}) -> {hidden}
  %p = coco.matmul %a, %w2 : ({hidden}, {w2}) -> {partial}
  %y = coco.all_reduce %p reduction = sum : {partial} -> {x}
  %r = coco.add %y, %x : ({x}, {x}) -> {x}
  func.return %r : {x}
}}
"""


ATTENTION = """shard.grid @tp(shape = 4)
func.func @attention_projection(%x: tensor<16x32xf32>, %wv: tensor<32x64xf32>, %wo: tensor<64x32xf32>) -> tensor<16x32xf32> {
  %cols = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
  %rows = shard.sharding @tp split_axes = [[0]] : !shard.sharding
  %wvs = shard.shard %wv to %cols annotate_for_users : tensor<32x64xf32>
  %wos = shard.shard %wo to %rows annotate_for_users : tensor<64x32xf32>
  %zero = arith.constant 0.0 : f32
  %scale = arith.constant 0.125 : f32
  %v0e = tensor.empty() : tensor<16x64xf32>
  %v0 = linalg.fill ins(%zero : f32) outs(%v0e : tensor<16x64xf32>) -> tensor<16x64xf32>
  %v = linalg.matmul ins(%x, %wvs : tensor<16x32xf32>, tensor<32x64xf32>) outs(%v0 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %ke = tensor.empty() : tensor<16x64xf32>
  %k = linalg.fill ins(%scale : f32) outs(%ke : tensor<16x64xf32>) -> tensor<16x64xf32>
  %se = tensor.empty() : tensor<16x64xf32>
  %sv = linalg.mul ins(%v, %k : tensor<16x64xf32>, tensor<16x64xf32>) outs(%se : tensor<16x64xf32>) -> tensor<16x64xf32>
  %o0e = tensor.empty() : tensor<16x32xf32>
  %o0 = linalg.fill ins(%zero : f32) outs(%o0e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %o = linalg.matmul ins(%sv, %wos : tensor<16x64xf32>, tensor<64x32xf32>) outs(%o0 : tensor<16x32xf32>) -> tensor<16x32xf32>
  %out = shard.shard %o to %rows : tensor<16x32xf32>
  return %out : tensor<16x32xf32>
}
"""  # noqa: E501
"""An attention projection: V = x·Wv column-parallel, scaled, then ·Wo
row-parallel; the output stays sequence-parallel (split by rows)."""

ATTENTION_BY_HAND = """func.func @attention_projection(%x: !coco.tensor<16x32xf32, replicated>, %wv: !coco.tensor<32x64xf32, sliced<1>>, %wo: !coco.tensor<64x32xf32, sliced<0>>) -> !coco.tensor<16x32xf32, sliced<0>> {
  %v = coco.matmul %x, %wv : (!coco.tensor<16x32xf32, replicated>, !coco.tensor<32x64xf32, sliced<1>>) -> !coco.tensor<16x64xf32, sliced<1>>
  %k = coco.constant 0.125 : !coco.tensor<f32, replicated>
  %s = coco.mul %v, %k : (!coco.tensor<16x64xf32, sliced<1>>, !coco.tensor<f32, replicated>) -> !coco.tensor<16x64xf32, sliced<1>>
  %p = coco.matmul %s, %wo : (!coco.tensor<16x64xf32, sliced<1>>, !coco.tensor<64x32xf32, sliced<0>>) -> !coco.tensor<16x32xf32, local>
  %o = coco.reduce_scatter %p reduction = sum dim = 0 : !coco.tensor<16x32xf32, local> -> !coco.tensor<16x32xf32, sliced<0>>
  func.return %o : !coco.tensor<16x32xf32, sliced<0>>
}
"""  # noqa: E501

GRADIENT_SUM = """shard.grid @dp(shape = 4)
func.func @sgd(%xt: tensor<32x16xf32>, %dy: tensor<16x8xf32>, %w: tensor<32x8xf32>) -> tensor<32x8xf32> {
  %batch_cols = shard.sharding @dp split_axes = [[], [0]] : !shard.sharding
  %batch_rows = shard.sharding @dp split_axes = [[0]] : !shard.sharding
  %rep = shard.sharding @dp split_axes = [[]] : !shard.sharding
  %xts = shard.shard %xt to %batch_cols annotate_for_users : tensor<32x16xf32>
  %dys = shard.shard %dy to %batch_rows annotate_for_users : tensor<16x8xf32>
  %ws = shard.shard %w to %rep annotate_for_users : tensor<32x8xf32>
  %zero = arith.constant 0.0 : f32
  %lr = arith.constant 0.01 : f32
  %g0e = tensor.empty() : tensor<32x8xf32>
  %g0 = linalg.fill ins(%zero : f32) outs(%g0e : tensor<32x8xf32>) -> tensor<32x8xf32>
  %g = linalg.matmul ins(%xts, %dys : tensor<32x16xf32>, tensor<16x8xf32>) outs(%g0 : tensor<32x8xf32>) -> tensor<32x8xf32>
  %gs = shard.shard %g to %rep : tensor<32x8xf32>
  %lre = tensor.empty() : tensor<32x8xf32>
  %lrs = linalg.fill ins(%lr : f32) outs(%lre : tensor<32x8xf32>) -> tensor<32x8xf32>
  %de = tensor.empty() : tensor<32x8xf32>
  %d = linalg.mul ins(%gs, %lrs : tensor<32x8xf32>, tensor<32x8xf32>) outs(%de : tensor<32x8xf32>) -> tensor<32x8xf32>
  %ne = tensor.empty() : tensor<32x8xf32>
  %new = linalg.sub ins(%ws, %d : tensor<32x8xf32>, tensor<32x8xf32>) outs(%ne : tensor<32x8xf32>) -> tensor<32x8xf32>
  %out = shard.shard %new to %rep : tensor<32x8xf32>
  return %out : tensor<32x8xf32>
}
"""  # noqa: E501
"""Data parallelism: each device holds a slice of the batch (the contracted
dim of X^T·dY), so the weight gradient is a sum over devices; then SGD."""

GRADIENT_SUM_BY_HAND = """func.func @sgd(%xt: !coco.tensor<32x16xf32, sliced<1>>, %dy: !coco.tensor<16x8xf32, sliced<0>>, %w: !coco.tensor<32x8xf32, replicated>) -> !coco.tensor<32x8xf32, replicated> {
  %p = coco.matmul %xt, %dy : (!coco.tensor<32x16xf32, sliced<1>>, !coco.tensor<16x8xf32, sliced<0>>) -> !coco.tensor<32x8xf32, local>
  %g = coco.all_reduce %p reduction = sum : !coco.tensor<32x8xf32, local> -> !coco.tensor<32x8xf32, replicated>
  %lr = coco.constant 0.01 : !coco.tensor<f32, replicated>
  %d = coco.mul %g, %lr : (!coco.tensor<32x8xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<32x8xf32, replicated>
  %n = coco.sub %w, %d : (!coco.tensor<32x8xf32, replicated>, !coco.tensor<32x8xf32, replicated>) -> !coco.tensor<32x8xf32, replicated>
  func.return %n : !coco.tensor<32x8xf32, replicated>
}
"""  # noqa: E501


def tool(module: str, *args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*tool_command(module.replace("_", "-")), *map(str, args)],
        capture_output=True,
        text=True,
    )


# ---------------------------------------------------------------------------
# The three user programs
# ---------------------------------------------------------------------------


@needs_mlir_opt
def test_mlp_imports_to_megatron_and_compiles(tmp_path: Path):
    module = imported(mlp(4, 8, 16, 32))
    assert (
        module.attributes[coco.WORLD_SIZE_ATTR]
        == cc.parse(
            "builtin.module attributes {coco.world_size = 4 : i64} {}"
        ).attributes[coco.WORLD_SIZE_ATTR]
    )
    assert argument_layouts(module) == ["replicated", "sliced<1>", "sliced<0>"]
    assert coco_ops(module) == [
        "coco.matmul",
        "coco.tanh",
        "coco.matmul",
        "coco.all_reduce",
        "coco.add",
    ]
    ours = write(tmp_path, "imported.mlir", cc.to_text(module))
    theirs = write(tmp_path, "by_hand.mlir", mlp_by_hand(8, 16, 32))
    compared = tool("coconet_run", "--compare", ours, theirs, "--world", "4")
    assert compared.returncode == 0, compared.stdout + compared.stderr
    assert "equivalent" in compared.stdout
    cuda = tmp_path / "mlp.cu"
    lowered = tool(
        "coconet_opt",
        ours,
        "-p",
        "coco-optimize,convert-coco-to-gpu",
        "-t",
        "cuda",
        "-o",
        cuda,
    )
    assert lowered.returncode == 0, lowered.stderr
    assert "__global__" in cuda.read_text()
    emulated = tool("coconet_run", ours, "--backend", "emu", "--world", "4", "--check")
    assert emulated.returncode == 0, emulated.stdout + emulated.stderr


@needs_mlir_opt
@pytest.mark.parametrize(
    ("program", "by_hand", "collectives"),
    [
        (ATTENTION, ATTENTION_BY_HAND, ["coco.reduce_scatter"]),
        (GRADIENT_SUM, GRADIENT_SUM_BY_HAND, ["coco.all_reduce"]),
    ],
    ids=["attention_projection", "gradient_sum"],
)
def test_user_programs_equal_hand_written(program: str, by_hand: str, collectives):
    module = imported(program)
    names = coco_ops(module)
    assert [n for n in names if n in COLLECTIVES] == collectives
    verdict = cc.equivalent(module, cc.parse(by_hand), 4)
    assert verdict.ok, verdict.first_difference
    optimized = cc.Pipeline("coco-optimize,convert-coco-to-gpu")(module)
    assert "__global__" in emit_cuda(optimized)


@needs_mlir_opt
def test_mlp_at_a_realistic_size():
    """Hidden 1024, FFN 4096 (the second matmul contracts K=4096), 16 tokens."""
    module = imported(mlp(4, 16, 1024, 4096))
    verdict = cc.equivalent(module, cc.parse(mlp_by_hand(16, 1024, 4096)), 4)
    assert verdict.ok, verdict.first_difference


# ---------------------------------------------------------------------------
# Each change of annotation is its collective
# ---------------------------------------------------------------------------

COLLECTIVES = {
    "coco.all_reduce",
    "coco.reduce_scatter",
    "coco.all_gather",
    "coco.all_slice",
    "coco.all_to_all",
}

SPLITS = {"replicated": "[[]]", "rows": "[[0]]", "cols": "[[], [0]]"}


def reshard_program(world: int, given: str, wanted: str) -> str:
    """exp of an argument sharded `given`, its result annotated `wanted`."""
    return f"""shard.grid @grid(shape = {world})
func.func @f(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {{
  %given = shard.sharding @grid split_axes = {SPLITS[given]} : !shard.sharding
  %wanted = shard.sharding @grid split_axes = {SPLITS[wanted]} : !shard.sharding
  %xs = shard.shard %x to %given annotate_for_users : tensor<8x16xf32>
  %e = tensor.empty() : tensor<8x16xf32>
  %y = linalg.exp ins(%xs : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %ys = shard.shard %y to %wanted : tensor<8x16xf32>
  %z = shard.shard %ys to %wanted annotate_for_users : tensor<8x16xf32>
  return %z : tensor<8x16xf32>
}}
"""  # noqa: E501


def partial_program(world: int, wanted: str) -> str:
    """A row-parallel matmul (contracted dim split), its result `wanted`."""
    return f"""shard.grid @grid(shape = {world})
func.func @f(%a: tensor<8x32xf32>, %b: tensor<32x16xf32>) -> tensor<8x16xf32> {{
  %cols = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %rows = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %wanted = shard.sharding @grid split_axes = {SPLITS[wanted]} : !shard.sharding
  %as = shard.shard %a to %cols annotate_for_users : tensor<8x32xf32>
  %bs = shard.shard %b to %rows annotate_for_users : tensor<32x16xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = linalg.matmul ins(%as, %bs : tensor<8x32xf32>, tensor<32x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  %ys = shard.shard %y to %wanted : tensor<8x16xf32>
  return %ys : tensor<8x16xf32>
}}
"""  # noqa: E501


REPLICATED_EXP = """func.func @f(%x: !coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated> {
  %y = coco.exp %x : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  func.return %y : !coco.tensor<8x16xf32, replicated>
}
"""  # noqa: E501

REPLICATED_MATMUL = """func.func @f(%a: !coco.tensor<8x32xf32, replicated>, %b: !coco.tensor<32x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated> {
  %y = coco.matmul %a, %b : (!coco.tensor<8x32xf32, replicated>, !coco.tensor<32x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  func.return %y : !coco.tensor<8x16xf32, replicated>
}
"""  # noqa: E501


@needs_mlir_opt
@pytest.mark.parametrize("world", [2, 4, 8])
@pytest.mark.parametrize(
    ("program", "collective", "layout"),
    [
        (lambda w: partial_program(w, "replicated"), "coco.all_reduce", "replicated"),
        (lambda w: partial_program(w, "rows"), "coco.reduce_scatter", "sliced<0>"),
        (lambda w: reshard_program(w, "rows", "replicated"), "coco.all_gather", None),
        (lambda w: reshard_program(w, "replicated", "cols"), "coco.all_slice", None),
        (lambda w: reshard_program(w, "rows", "cols"), "coco.all_to_all", None),
    ],
    ids=[
        "partial_to_replicated",
        "partial_to_split",
        "split_to_replicated",
        "replicated_to_split",
        "split_to_split",
    ],
)
def test_annotation_change_is_its_collective(world, program, collective, layout):
    module = imported(program(world))
    assert [n for n in coco_ops(module) if n in COLLECTIVES] == [collective]
    (func,) = module.ops
    if layout is not None:
        assert str(func.function_type.outputs.data[0].layout) == layout
    by_hand = REPLICATED_MATMUL if "matmul" in str(coco_ops(module)) else REPLICATED_EXP
    verdict = cc.equivalent(module, cc.parse(by_hand), world, seed=world)
    assert verdict.ok, verdict.first_difference


def test_arith_and_generic_on_tensors_import():
    """arith/math on tensors (which MLIR 22's propagation does not handle, so
    annotated by hand) and a linalg.generic with one math op."""
    program = """
#id = affine_map<(d0, d1) -> (d0, d1)>
shard.grid @grid(shape = 2)
func.func @f(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %rows = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %rows annotate_for_users : tensor<4x8xf32>
  %ys = shard.shard %y to %rows annotate_for_users : tensor<4x8xf32>
  %s = arith.addf %xs, %ys : tensor<4x8xf32>
  %t = math.tanh %s : tensor<4x8xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %g = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%t, %xs : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %m = arith.mulf %b, %a : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}
"""  # noqa: E501
    module = cc.Pipeline("coco-import-shard")(cc.parse(program))
    assert coco_ops(module) == ["coco.add", "coco.tanh", "coco.mul"]
    assert argument_layouts(module) == ["sliced<0>", "sliced<0>"]
    t = "!coco.tensor<4x8xf32, replicated>"
    by_hand = f"""func.func @f(%x: {t}, %y: {t}) -> {t} {{
  %s = coco.add %x, %y : ({t}, {t}) -> {t}
  %u = coco.tanh %s : ({t}) -> {t}
  %g = coco.mul %x, %u : ({t}, {t}) -> {t}
  func.return %g : {t}
}}"""
    verdict = cc.equivalent(module, cc.parse(by_hand), 2)
    assert verdict.ok, verdict.first_difference


# ---------------------------------------------------------------------------
# Refusals: a diagnostic naming the op, and the module as it was
# ---------------------------------------------------------------------------


def annotated(body: str, grid: str = "4", args: str = "%x: tensor<8x16xf32>") -> str:
    return f"""shard.grid @grid(shape = {grid})
func.func @f({args}) -> tensor<8x16xf32> {{
  %rows = shard.sharding @grid split_axes = [[0]] : !shard.sharding
{body}
}}
"""


EXP_BODY = """  %xs = shard.shard %x to %rows annotate_for_users : tensor<8x16xf32>
  %e = tensor.empty() : tensor<8x16xf32>
  %y = linalg.exp ins(%xs : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>"""  # noqa: E501

MATMUL_INIT = """  %c = arith.constant {init} : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %z = linalg.fill ins(%c : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = linalg.matmul ins(%x, %w : tensor<8x32xf32>, tensor<32x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>"""  # noqa: E501

REFUSED = {
    "two_axis_grid": (
        annotated(EXP_BODY, grid="2x2"),
        "'shard.grid' op coco-import-shard: grid @grid has 2 axes",
    ),
    "nonzero_matmul_init": (
        annotated(
            MATMUL_INIT.format(init="1.0"),
            args="%x: tensor<8x32xf32>, %w: tensor<32x16xf32>",
        ),
        "'linalg.matmul' op coco-import-shard: accumulates into %z, not a "
        "zero-filled tensor",
    ),
    "extract_slice": (
        annotated(
            "  %y = tensor.extract_slice %x[0, 0] [8, 16] [1, 1] : "
            "tensor<8x32xf32> to tensor<8x16xf32>\n  return %y : tensor<8x16xf32>",
            args="%x: tensor<8x32xf32>",
        ),
        "'tensor.extract_slice' op coco-import-shard: has no coco equivalent",
    ),
    "convolution": (
        annotated(
            "  %e = tensor.empty() : tensor<1x1x6x14xf32>\n"
            "  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, "
            "strides = dense<1> : tensor<2xi64>} ins(%i, %k : tensor<1x1x8x16xf32>, "
            "tensor<1x1x3x3xf32>) outs(%e : tensor<1x1x6x14xf32>) -> "
            "tensor<1x1x6x14xf32>\n  return %x : tensor<8x16xf32>",
            args="%x: tensor<8x16xf32>, %i: tensor<1x1x8x16xf32>, "
            "%k: tensor<1x1x3x3xf32>",
        ),
        "'linalg.conv_2d_nchw_fchw' op coco-import-shard: has no coco equivalent",
    ),
    "uneven_split": (
        annotated(EXP_BODY, grid="16"),
        "'shard.shard' op coco-import-shard: splits dim 0 of size 8 over 16 devices",
    ),
    "halo": (
        annotated(EXP_BODY).replace("[[0]]", "[[0]] halo_sizes = [1, 1]"),
        "'shard.sharding' op coco-import-shard: halos and explicit shard offsets",
    ),
    "unsupported_elementwise_kind": (
        annotated(EXP_BODY.replace("linalg.exp", "linalg.erf")).replace(
            "linalg.erf ins",
            "linalg.elementwise kind=#linalg.elementwise_kind<erf> ins",
        ),
        "'linalg.elementwise' op coco-import-shard: elementwise kind erf has no "
        "coco equivalent",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refusal_names_the_op_and_changes_nothing(case: str):
    program, message = REFUSED[case]
    module = cc.parse(program)
    before = cc.to_text(module)
    with pytest.raises(PassRefused) as refused:
        cc.Pipeline("coco-import-shard")(module)
    assert message in str(refused.value)
    assert cc.to_text(module) == before


@needs_mlir_opt
def test_refusal_from_the_command_line(tmp_path: Path):
    """The diagnostic has the source location, and no traceback."""
    source = write(
        tmp_path,
        "conv.mlir",
        propagate(annotated(EXP_BODY, grid="2x2")),
    )
    done = tool("coconet_opt", source, "-p", "coco-import-shard")
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert f"{source}:2:3: error: 'shard.grid' op coco-import-shard" in done.stderr


@needs_mlir_opt
def test_shard_and_linalg_ops_round_trip_with_mlir_opt():
    """What mlir-opt's shard-partition prints (collectives, process queries,
    linalg.elementwise) parses here and prints back in a form mlir-opt reads."""
    assert MLIR_OPT is not None
    partition = PROPAGATE.replace(
        "sharding-propagation", "sharding-propagation,shard-partition"
    )
    partitioned = subprocess.run(
        [MLIR_OPT, partition],
        input=mlp(4, 8, 16, 32),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "shard.all_reduce" in partitioned
    assert "shard.process_multi_index" in partitioned
    printed = cc.to_text(cc.parse(partitioned))
    again = subprocess.run([MLIR_OPT], input=printed, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr


def test_a_coco_program_is_left_as_it_is() -> None:
    """No shard.grid and no builtin tensor: nothing to import (running the
    import on its own output, or on any coco program, changes nothing)."""
    module = cc.parse_file(str(EXAMPLES_DIR / "megatron.mlir"))
    before = cc.to_text(module)
    after = cc.Pipeline("coco-import-shard")(module)
    assert cc.to_text(after) == before
