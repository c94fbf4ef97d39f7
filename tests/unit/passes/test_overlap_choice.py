"""coco-optimize's choice of overlap (docs/passes/coco-overlap.md, "Choosing
the overlap"): the estimate's formulas, the toy examples left alone (launch
bound), and programs at a model's sizes overlapped per peer or in chunks."""

from __future__ import annotations

import pytest
from helpers import T, example, load_example, ops_of

import coconet_ir as cc
from coconet_ir.analysis.overlap_choice import A100_NVLINK, OverlapMode, Work, estimate
from coconet_ir.dialects import coco
from coconet_ir.passes.overlap import choose_overlap


def the_matmul(module, label: str) -> coco.MatmulOp:
    (op,) = [
        m for m in ops_of(module, coco.MatmulOp) if m.label and m.label.data == label
    ]
    return op


def test_the_estimate_is_the_documented_formulas() -> None:
    """1 ms of compute, 0.5 ms of communication, one collective, 3 launches
    on 8 ranks: none adds them; 4 chunks pipeline them; per peer runs 8 steps
    of 1/8 of the compute, each waiting for 1/7 of the bytes and one hop.
    With 1 us of compute and no bytes, the launches bound the time."""
    m = A100_NVLINK
    work = Work(
        compute_s=1e-3,
        communication_s=5e-4,
        collectives=1,
        launches=3,
        compute_launches=2,
    )
    latency = m.collective_base_s + 7 * m.hop_s
    assert estimate(work, OverlapMode.NONE, 8, 4, m) == pytest.approx(
        1e-3 + 5e-4 + latency
    )
    c, comm = 1e-3 / 4, 5e-4 / 4 + latency
    assert estimate(work, OverlapMode.CHUNKS, 8, 4, m) == pytest.approx(
        c + comm + 3 * max(c, comm)
    )
    c, comm = 1e-3 / 8, 5e-4 / 7 + m.hop_s
    assert estimate(work, OverlapMode.PER_PEER, 8, 4, m) == pytest.approx(
        c + 7 * max(c, comm)
    )
    tiny = Work(
        compute_s=1e-6,
        communication_s=0,
        collectives=1,
        launches=3,
        compute_launches=2,
    )
    assert estimate(tiny, OverlapMode.PER_PEER, 8, 4, m) == pytest.approx(
        (8 * 2 + 4 * 7) * m.launch_s
    )
    assert estimate(tiny, OverlapMode.CHUNKS, 8, 4, m) == pytest.approx(
        max(1e-6 / 4 + latency + 3 * latency, 4 * 3 * m.launch_s)
    )


@pytest.mark.parametrize(
    "name",
    ["sequence_parallel", "matmul_reduce_scatter", "sequence_parallel_mlp", "megatron"],
)
def test_toy_examples_are_launch_bound_and_not_overlapped(name: str) -> None:
    """At the examples' test sizes a matmul takes nanoseconds: the extra
    launches of any overlap cost more than it hides."""
    module = example(name)
    for matmul in ops_of(module, coco.MatmulOp):
        choice = choose_overlap(matmul, 4, 8)
        if choice is not None:
            assert choice.best is OverlapMode.NONE, choice.times
    after = cc.Pipeline("coco-optimize")(example(name))
    assert not ops_of(after, coco.OverlapOp) and not ops_of(after, coco.PerPeerOp)


def test_the_mlp_at_gpt3_widths_is_one_per_peer_region() -> None:
    """S = 2048, H = 12288, F = 49152, bf16, TP = 8: ~1 ms of matmul per
    layer against ~0.15 ms of gather: per peer hides the communication and
    is faster than none and than chunks (B = 1 leaves no dim to chunk but the
    sequence, which is sliced)."""
    mlp = load_example("sequence_parallel_mlp")
    module = mlp.build(mlp.MODEL)
    choice = choose_overlap(the_matmul(module, "fc1"), 4, 8)
    assert choice is not None and choice.best is OverlapMode.PER_PEER, choice.times
    after = cc.Pipeline("coco-optimize")(module)
    (region,) = ops_of(after, coco.PerPeerOp)
    assert region.gathered(0) and region.scattered(0)
    inside = [op.name for op in region.block.ops]
    assert inside == ["coco.matmul", "coco.fusion", "coco.matmul", "coco.yield"]
    cc.verify(after)


@pytest.mark.parametrize(
    ("name", "gathered", "scattered"),
    [("sequence_parallel", True, False), ("matmul_reduce_scatter", False, True)],
)
def test_flux_shapes_are_decomposed_per_peer(
    name: str, gathered: bool, scattered: bool
) -> None:
    """FLUX's TP=8 shapes (M = 4096, K = 12288, N = 49152, bf16), the two
    examples' `--model` sizes: both become one per-peer region."""
    example_module = load_example(name)
    after = cc.Pipeline("coco-optimize")(example_module.build(example_module.MODEL))
    (region,) = ops_of(after, coco.PerPeerOp)
    assert region.gathered(0) is gathered and region.scattered(0) is scattered
    cc.verify(after)


def test_the_world_size_comes_from_the_module() -> None:
    """The estimate is made for the module's coco.world_size (2 ranks: two
    steps, each hiding half of the gather); per peer still pays."""
    mlp = load_example("sequence_parallel_mlp")
    module = cc.module(mlp.layer(**mlp.MODEL), world_size=2)
    after = cc.Pipeline("coco-optimize")(module)
    assert len(ops_of(after, coco.PerPeerOp)) == 1


def megatron_at(b: int, s: int, h: int) -> str:
    x, w = T(f"{b}x{s}x{h}xbf16", "sliced<2>"), T(f"{h}x{h}xbf16", "sliced<0>")
    p, r = T(f"{b}x{s}x{h}xbf16", "local"), T(f"{b}x{s}x{h}xbf16")
    return f"""
func.func @layer(%x: {x}, %w: {w}) -> {r} {{
  %p = coco.matmul %x, %w {{name = "layer"}} : ({x}, {w}) -> {p}
  %r = coco.all_reduce %p reduction = sum : {p} -> {r}
  func.return %r : {r}
}}"""


def test_megatrons_row_parallel_layer_at_paper_size_is_chunked() -> None:
    """B = 8, S = 2048, H = 12288 (the paper's §6 layer) at TP = 8: matmul ->
    all_reduce has no per-peer form; chunking it beats running it whole."""
    module = cc.parse(megatron_at(8, 2048, 12288))
    choice = choose_overlap(the_matmul(module, "layer"), 4, 8)
    assert choice is not None and OverlapMode.PER_PEER not in choice.times
    assert choice.best is OverlapMode.CHUNKS, choice.times
    after = cc.Pipeline("coco-optimize{split=false}")(module)
    (region,) = ops_of(after, coco.OverlapOp)
    assert region.chunk_count == 4


def test_overlap_mode_per_peer_forces_it() -> None:
    after = cc.Pipeline("coco-optimize{overlap_mode=per_peer}")(
        example("sequence_parallel_mlp")
    )
    assert len(ops_of(after, coco.PerPeerOp)) == 1
    assert cc.equivalent(example("sequence_parallel_mlp"), after, 4).ok


def test_a_bad_mode_is_refused() -> None:
    with pytest.raises(
        cc.CocoError, match="overlap_mode must be auto, chunks or per_peer"
    ):
        cc.Pipeline("coco-optimize{overlap_mode=fast}")(example("megatron"))


def mlp_stack(layers: int, s: int, h: int, f: int, element: str) -> str:
    """`layers` sequence-parallel MLP blocks, each block's reduce_scatter
    feeding the next block's all_gather."""
    x, g = T(f"{s}x{h}x{element}", "sliced<0>"), T(f"{s}x{h}x{element}")
    w1, w2 = T(f"{h}x{f}x{element}", "sliced<1>"), T(f"{f}x{h}x{element}", "sliced<0>")
    y, p = T(f"{s}x{f}x{element}", "sliced<1>"), T(f"{s}x{h}x{element}", "local")
    args = ", ".join(
        [f"%x0: {x}"] + [f"%a{i}: {w1}, %b{i}: {w2}" for i in range(layers)]
    )
    body = "\n".join(
        f"  %g{i} = coco.all_gather %x{i} : {x} -> {g}\n"
        f"  %h{i} = coco.matmul %g{i}, %a{i} : ({g}, {w1}) -> {y}\n"
        f"  %e{i} = coco.gelu %h{i} : ({y}) -> {y}\n"
        f"  %p{i} = coco.matmul %e{i}, %b{i} : ({y}, {w2}) -> {p}\n"
        f"  %x{i + 1} = coco.reduce_scatter %p{i} reduction = sum dim = 0 : {p} -> {x}"
        for i in range(layers)
    )
    return (
        f"func.func @stack({args}) -> {x} {{\n{body}\n"
        f"  func.return %x{layers} : {x}\n}}"
    )


def test_every_block_of_a_deep_stack_is_one_per_peer_region() -> None:
    """48 blocks at GPT-3-like widths: per peer chooses before coco-fuse, so
    a block's reduce_scatter and the next block's all_gather are not paired
    into an all-reduce first; every block is one region."""
    after = cc.Pipeline("coco-optimize")(
        cc.parse(mlp_stack(48, 2048, 8192, 32768, "bf16"))
    )
    assert len(ops_of(after, coco.PerPeerOp)) == 48
    assert not ops_of(after, coco.AllGatherOp) and not ops_of(
        after, coco.ReduceScatterOp
    )


@pytest.mark.parametrize("world", [2, 4, 8])
def test_a_stack_forced_per_peer_keeps_its_values(world: int) -> None:
    program = mlp_stack(3, 16, 32, 64, "f32")
    after = cc.Pipeline("coco-optimize{overlap_mode=per_peer}")(cc.parse(program))
    assert len(ops_of(after, coco.PerPeerOp)) == 3
    assert cc.equivalent(cc.parse(program), after, world).ok
