"""The proof of the lowering (docs/gpu/emulation.md, "Proof"): every example, optimized
by `coco-optimize` and by each single transformation, lowered, printed as
CUDA C and run under the CPU emulation, gives the reference interpreter's
results on the ORIGINAL program; the emulator's launch and byte counts equal
the static prediction from the device-level IR (`analysis.device_traffic`)."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from helpers import EXAMPLES, example, pipeline_of
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import Program, programs, scaled_examples
from xdsl.dialects.builtin import ModuleOp, i64
from xdsl.dialects.gpu import FuncOp as GpuFuncOp
from xdsl.dialects.gpu import LaunchFuncOp

import coconet_ir as cc
from coconet_ir.analysis.channels import PipelineChannels
from coconet_ir.analysis.device_traffic import device_traffic
from coconet_ir.dialects.coco import PerPeerOp
from coconet_ir.emulate import EmulationResult, compare_runs, emulate

SINGLE_PASSES = [
    "",
    "coco-split-all-reduce",
    "coco-split-all-reduce,coco-reorder",
    "coco-split-all-reduce,coco-reorder,coco-slice-state",
    "coco-split-all-reduce,coco-reorder,coco-fuse",
    "coco-overlap",
    "coco-overlap{per_peer=true}",
    "coco-fuse-send",
]


def assert_counts_predicted(result: EmulationResult) -> None:
    assert result.stats is not None and result.lowered is not None
    stages = PipelineChannels.of(result.lowered.coco).stage_indices()
    for name, traffic in device_traffic(result.lowered.device).items():
        problems = result.stats.disagreements(traffic, stages[name])
        assert not problems, f"@{name}: {problems}"


@cache
def reference(name: str, world: int) -> cc.RunResult:
    """The interpreter's run of the example as written (the same for every
    pipeline the example is emulated after: computed once per worker)."""
    return cc.interpret(example(name), world, seed=world)


def check(name: str, world: int, passes: str) -> EmulationResult:
    return check_module(example(name), world, passes, name, reference(name, world))


def check_module(
    original: ModuleOp,
    world: int,
    passes: str,
    name: str = "module",
    reference: cc.RunResult | None = None,
) -> EmulationResult:
    if reference is None:
        reference = cc.interpret(original, world, seed=world)
    emulated = emulate(original, world, passes=passes, seed=world)
    verdict = compare_runs(reference, emulated, original)
    assert verdict, f"{name} at N={world} after {passes!r}: {verdict.first_difference}"
    assert_counts_predicted(emulated)
    return emulated


@pytest.mark.parametrize("world", [2, 4, 8])
@pytest.mark.parametrize("name", EXAMPLES)
def test_optimized_example_matches_the_interpreter(name: str, world: int) -> None:
    if world == 8 and name in ("sgd", "lamb", "matmul_reduce_scatter"):
        pytest.skip("N = 8 is covered by the other examples (suite time)")
    check(name, world, "coco-optimize")


@pytest.mark.parametrize("passes", SINGLE_PASSES)
@pytest.mark.parametrize("name", EXAMPLES)
def test_each_transformation_matches_the_interpreter(name: str, passes: str) -> None:
    try:
        check(name, 4, passes)
    except cc.CocoError as err:
        if "applies nowhere" in str(err) or "nothing to" in str(err):
            pytest.skip(f"{passes} does not apply to {name}")
        raise


def test_other_inputs_are_caught() -> None:
    """The comparison is not vacuous: the emulator fed another seed's inputs
    differs from the interpreter."""
    original = example("megatron")
    reference = cc.interpret(original, 4, seed=1)
    assert not compare_runs(reference, emulate(original, 4, seed=2), original)


@pytest.mark.parametrize("world", [2, 4, 8])
def test_the_fused_all_reduce_moves_two_n_minus_one_over_n_of_s(world: int) -> None:
    size = 1024 * 4  # adam's gradient, f32
    fused = emulate(example("adam"), world)
    assert fused.stats is not None
    assert (
        list(fused.stats.bytes_per_rank()) == [2 * (world - 1) * size // world] * world
    )


def test_fused_adam_is_one_launch_and_unfused_needs_more() -> None:
    fused = emulate(example("adam"), 4)
    unfused = emulate(example("adam"), 4, passes="")
    assert fused.stats is not None and unfused.stats is not None
    assert fused.stats.total_launches == 1
    assert unfused.stats.total_launches >= 2


def test_send_fusion_sends_a_slice_across_the_stage_boundary() -> None:
    world, size = 4, 4 * 8 * 64 * 4
    fused = emulate(example("pipeline"), world)
    unfused = emulate(example("pipeline"), world, passes="")
    assert fused.stats is not None and unfused.stats is not None
    assert list(fused.stats.bytes_to_other_stages(0)) == [size // world] * world
    assert list(unfused.stats.bytes_to_other_stages(0)) == [size] * world


@pytest.mark.parametrize(
    ("name", "sanitizer"),
    [
        ("adam", "thread"),
        ("megatron", "thread"),
        ("pipeline", "thread"),
        ("adam", "address"),
        ("pipeline", "address"),
    ],
)
def test_three_calls_back_to_back_under_a_sanitizer(name: str, sanitizer: str) -> None:
    """Epochs and flags carry over from call to call: the last call gives what the
    interpreter gives after three steps (updated parameters fed back). Blocks of
    32 threads: under AddressSanitizer every emulated thread is an OS thread."""
    original = example(name)
    emulated = emulate(original, 4, calls=3, threads=32, sanitize=sanitizer)
    inputs = dict(emulated.inputs)
    for _ in range(3):
        reference = cc.interpret(original, 4, inputs=inputs)
        for key, output in reference.outputs.items():
            if ".arg" in key:
                inputs[key] = np.asarray(output.value)
    assert compare_runs(reference, emulated, original)


@settings(max_examples=scaled_examples(6), deadline=None)
@given(program=programs(), data=st.data())
def test_random_optimized_programs_run_under_the_emulator(
    program: Program, data: st.DataObject
) -> None:
    """Hypothesis-generated programs (`strategies.programs`), optimized,
    lowered, printed, compiled and emulated, give the interpreter's results
    on the original program (a smaller count than the evaluator's property
    tests in tests/unit/lowering: every example is a g++ build)."""
    world = data.draw(st.sampled_from(program.worlds), label="world")
    module = cc.parse(cc.to_text(program.module))
    reference = cc.interpret(module, world, seed=world)
    emulated = emulate(module, world, seed=world, threads=32)
    verdict = compare_runs(reference, emulated, module)
    assert verdict, f"{verdict.first_difference}\n{cc.to_text(module)}"


@pytest.mark.parametrize("stages", [3, 4])
def test_a_deep_pipeline_sends_slices_at_every_hop(stages: int):
    """After one coco-optimize every stage of a 3- and 4-stage pipeline sends
    its slice: under the emulator each rank moves S/N across each hop, and
    the results are the interpreter's."""
    module = cc.parse(pipeline_of(stages))
    result = emulate(module, 4, passes="coco-optimize", seed=4)
    verdict = compare_runs(cc.interpret(module, 4, seed=4), result, module)
    assert verdict, verdict.first_difference
    assert result.stats is not None
    assert_counts_predicted(result)
    for stage in range(stages - 1):
        slice_bytes = 32 * 64 * 4 // 4
        assert result.stats.bytes_to_other_stages(stage).tolist() == [slice_bytes] * 4


@pytest.mark.parametrize("world", [2, 4, 8])
def test_mlp_optimized_per_peer_matches_the_interpreter(world: int) -> None:
    """coco-optimize forced per peer: the MLP block is one coco.per_peer
    whose step body holds the fused bias + GELU kernel; the emulated CUDA
    equals the interpreter and moves (N-1)/N of x and of the partial."""
    check("sequence_parallel_mlp", world, "coco-optimize{overlap_mode=per_peer}")


@pytest.mark.parametrize("element", ["f32", "bf16"])
def test_a_stack_of_per_peer_blocks_matches_the_interpreter(element: str) -> None:
    """Three MLP blocks, each one coco.per_peer after coco-optimize (forced
    per peer): each region's scattered output is the next one's gathered
    input; symmetric buffers, flags and events of three regions live in one
    call. N = 4: equal to the interpreter, counts as predicted."""
    blocks = []
    x, g = (
        f"!coco.tensor<16x32x{element}, sliced<0>>",
        f"!coco.tensor<16x32x{element}, replicated>",
    )
    w1, w2 = (
        f"!coco.tensor<32x64x{element}, sliced<1>>",
        f"!coco.tensor<64x32x{element}, sliced<0>>",
    )
    h, p = (
        f"!coco.tensor<16x64x{element}, sliced<1>>",
        f"!coco.tensor<16x32x{element}, local>",
    )
    for i in range(3):
        blocks.append(
            f"  %g{i} = coco.all_gather %x{i} : {x} -> {g}\n"
            f"  %h{i} = coco.matmul %g{i}, %a{i} : ({g}, {w1}) -> {h}\n"
            f"  %e{i} = coco.gelu %h{i} : ({h}) -> {h}\n"
            f"  %p{i} = coco.matmul %e{i}, %b{i} : ({h}, {w2}) -> {p}\n"
            f"  %x{i + 1} = coco.reduce_scatter %p{i} reduction = sum dim = 0 : "
            f"{p} -> {x}"
        )
    args = ", ".join([f"%x0: {x}"] + [f"%a{i}: {w1}, %b{i}: {w2}" for i in range(3)])
    original = cc.parse(
        f"func.func @stack({args}) -> {x} {{\n"
        + "\n".join(blocks)
        + f"\n  func.return %x3 : {x}\n}}"
    )
    passes = "coco-optimize{overlap_mode=per_peer}"
    assert (
        len(
            [
                op
                for op in cc.Pipeline(passes)(original.clone()).walk()
                if isinstance(op, PerPeerOp)
            ]
        )
        == 3
    )
    reference = cc.interpret(original, 4, seed=4)
    emulated = emulate(original, 4, passes=passes, seed=4)
    verdict = compare_runs(reference, emulated, original)
    assert verdict, verdict.first_difference
    assert_counts_predicted(emulated)


def test_layers_differing_only_in_seeds_share_one_kernel() -> None:
    """Three Megatron-like layers (all_reduce → + bias → dropout → +
    residual, dropout seeds 5, 6, 7): the fused elementwise kernel takes the
    seed as an argument, so one kernel serves the three layers; each launch
    passes its own seed (the emulated masks equal the interpreter's)."""
    t = "!coco.tensor<8x16xf32, replicated>"
    body, x = [], "%x0"
    for layer in range(3):
        body += [
            f"%s{layer} = coco.all_reduce %p{layer} reduction = sum : "
            f"!coco.tensor<8x16xf32, local> -> {t}",
            f"%y{layer} = coco.add %s{layer}, %b{layer} : ({t}, "
            f"!coco.tensor<16xf32, replicated>) -> {t}",
            f"%d{layer} = coco.dropout %y{layer} p = 0.25 seed = {5 + layer} : "
            f"({t}) -> {t}",
            f"%x{layer + 1} = coco.add %d{layer}, {x} : ({t}, {t}) -> {t}",
        ]
        x = f"%x{layer + 1}"
    args = ", ".join(
        [f"%x0: {t}"]
        + [f"%p{k}: !coco.tensor<8x16xf32, local>" for k in range(3)]
        + [f"%b{k}: !coco.tensor<16xf32, replicated>" for k in range(3)]
    )
    module = cc.parse(
        f"func.func @layers({args}) -> {t} {{\n  "
        + "\n  ".join(body)
        + f"\n  func.return {x} : {t}\n}}"
    )
    result = check_module(module, 4, "coco-fuse")
    assert result.lowered is not None
    kernels = [
        k.sym_name.data
        for k in result.lowered.device.walk()
        if isinstance(k, GpuFuncOp) and "fusion" in k.sym_name.data
    ]
    assert kernels == ["layers_fusion_0"]
    seeds = [
        seed.owner.value.value.data  # type: ignore[union-attr]
        for launch in result.lowered.device.walk()
        if isinstance(launch, LaunchFuncOp)
        for seed in launch.kernelOperands
        if seed.type == i64
    ]
    assert seeds == [5, 6, 7]
