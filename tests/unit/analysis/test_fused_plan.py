"""The fused-collective plan (analysis/fused_plan.py) and its traffic
prediction (analysis/traffic.py): the shapes the fused kernel accepts, the
slice geometry it computes addresses with, and the bytes it moves."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import T, example

import coconet_ir as cc
from coconet_ir.analysis.fused_plan import FusedPlan, SliceGeometry, fused_plans
from coconet_ir.analysis.traffic import (
    fused_all_reduce_bytes,
    fused_peer_bytes,
    fused_send_bytes,
)
from coconet_ir.dialects.coco import FusionOp
from coconet_ir.interpreter.values import cut


def the_fusion(module) -> FusionOp:
    (fusion,) = (op for op in module.walk() if isinstance(op, FusionOp))
    return fusion


def optimized(name: str):
    return cc.Pipeline("coco-optimize")(example(name))


@pytest.mark.parametrize(
    "dims,dim,world",
    [
        ((1024,), 0, 4),
        ((1, 8, 64), 1, 8),
        ((4, 8, 6), 1, 2),
        ((6, 4), 0, 2),
        ((3, 4, 8), 2, 4),
    ],
)
def test_global_index_matches_the_layout(dims, dim, world):
    """Element `l` of rank `r`'s block is the global element the layout's
    cut puts there."""
    geometry = SliceGeometry(dims, dim, world)
    indices = np.arange(np.prod(dims)).reshape(dims)
    blocks = cut(indices, dim, world)
    for rank in range(world):
        flat = blocks[rank].reshape(-1)
        assert geometry.elements == flat.size
        assert [geometry.global_index(rank, i) for i in range(flat.size)] == list(flat)
    assert geometry.contiguous == (np.prod(dims[:dim]) == 1)


@pytest.mark.parametrize("world", [2, 4, 8])
def test_adam_moves_two_n_minus_one_over_n_of_s(world):
    fusion = the_fusion(optimized("adam"))
    s = 1024 * 4
    assert fused_all_reduce_bytes(fusion, world) == 2 * (world - 1) * s // world
    pairs = fused_peer_bytes(fusion, world)
    assert len(pairs) == world * (world - 1)
    assert set(pairs.values()) == {2 * s // world}
    assert fused_send_bytes(fusion, world) == 0


@pytest.mark.parametrize("world", [2, 4, 8])
def test_megatron_chunk_fusion(world):
    plan = FusedPlan.of(the_fusion(optimized("megatron")), world)
    assert isinstance(plan, FusedPlan)
    assert plan.geometry == SliceGeometry((1, 8, 64), 1, world)
    assert len(plan.gathers) == 1 and not plan.sends
    s = 8 * 64 * 4
    assert fused_all_reduce_bytes(plan.fusion, world) == 2 * (world - 1) * s // world


@pytest.mark.parametrize("world", [2, 4, 8])
def test_pipeline_send_variant(world):
    module = optimized("pipeline")
    fusion = the_fusion(module)
    plan = FusedPlan.of(fusion, world)
    assert isinstance(plan, FusedPlan) and len(plan.sends) == 1 and not plan.gathers
    s = 4 * 8 * 64 * 4
    assert fused_all_reduce_bytes(fusion, world) == (world - 1) * s // world
    assert fused_send_bytes(fusion, world) == s // world


def test_chunks_and_slots():
    fusion = the_fusion(optimized("adam"))
    plan = FusedPlan.of(fusion, 2, chunk_elements=100)
    assert isinstance(plan, FusedPlan)
    assert plan.chunks == 6  # 512 elements per rank: 5 full chunks and 12
    assert plan.signal_slots == 2 * 2 * 6
    layout = plan.symmetric_layout()
    (rs,) = plan.reductions
    (ag,) = plan.gathers
    assert layout.offsets[rs] == 0
    assert layout.offsets[ag] == 2 * 512 * 4
    assert layout.total == 2 * 2 * 512 * 4


FUSION = """
func.func @f(%g: {local}, %x: {other}) -> {result} {{
  %r = coco.fusion (%g, %x) : ({local}, {other}) -> {result} {{
  ^bb0(%g1: {local}, %x1: {other}):
    %s = coco.reduce_scatter %g1 reduction = sum dim = 0 : {local} -> {sliced}
    %y = {compute}
    coco.yield %y : {result}
  }}
  func.return %r : {result}
}}
"""


SLICE = T("8x4xf32", "sliced<0>")
ROWS = T("8xf32", "sliced<0>")


def fusion_of(other: str, compute: str, result: str) -> FusionOp:
    text = FUSION.format(
        local=T("8x4xf32", "local"),
        sliced=T("8x4xf32", "sliced<0>"),
        other=other,
        result=result,
        compute=compute,
    )
    return the_fusion(cc.parse(text))


def test_refuses_a_reduction_inside_the_fusion():
    fusion = fusion_of(
        T("8x4xf32", "replicated"),
        f"coco.reduce %s kind = sum dims = [1] : ({SLICE}) -> {ROWS}",
        T("8xf32", "sliced<0>"),
    )
    plan = FusedPlan.of(fusion, 2)
    assert isinstance(plan, str) and "coco.reduce" in plan


def test_accepts_a_broadcast_replicated_operand():
    fusion = fusion_of(
        T("4xf32", "replicated"),
        f"coco.mul %s, %x1 : ({SLICE}, {T('4xf32', 'replicated')}) -> {SLICE}",
        T("8x4xf32", "sliced<0>"),
    )
    assert isinstance(FusedPlan.of(fusion, 2), FusedPlan)
    assert isinstance(FusedPlan.of(fusion, 3), str)  # 8 rows do not cut in 3


def test_fused_plans_of_a_module():
    module = optimized("adam")
    (plan,) = fused_plans(module, 4).values()
    assert isinstance(plan, FusedPlan) and plan.chunks == 1


def test_refuses_to_yield_an_input():
    whole = T("8x4xf32", "replicated")
    text = FUSION.format(
        local=T("8x4xf32", "local"),
        sliced=SLICE,
        other=whole,
        result=whole,
        compute=f"coco.all_slice %x1 dim = 0 : ({whole}) -> {SLICE}",
    ).replace("coco.yield %y", "coco.yield %x1")
    plan = FusedPlan.of(the_fusion(cc.parse(text)), 2)
    assert plan == "yields one of its inputs unchanged"
