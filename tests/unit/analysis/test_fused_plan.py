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
from coconet_ir.dialects.coco import FusionOp, RsqrtOp
from coconet_ir.interpreter.values import cut


def the_fusion(module) -> FusionOp:
    (fusion,) = (op for op in module.walk() if isinstance(op, FusionOp))
    return fusion


def optimized(name: str):
    """`name` after coco-optimize with CoCoNet's chunked overlap."""
    return cc.Pipeline("coco-optimize{overlap_mode=chunks}")(example(name))


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
    assert layout.offsets["scratch", rs] == 0
    assert layout.offsets["gather", ag] == 2 * 512 * 4
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


# ------------------------------------------------------ slice reductions


def test_lamb_has_two_stages():
    """LAMB after coco-optimize: the moments and `r` in stage 0, the update
    in stage 1 after both norms' boundary; `r` (read by the update) is
    stored between the stages (`m1` and `v1` are stage 0's outputs); `w`'s
    slice and the scalar arithmetic are recomputed."""
    fusion = the_fusion(optimized("lamb"))
    plan = FusedPlan.of(fusion, 4)
    assert isinstance(plan, FusedPlan)
    assert plan.stage_count == 2
    assert len(plan.slice_reductions) == len(plan.scalar_all_reduces) == 2
    names = {v.name_hint: plan.stage(v) for op in fusion.body.ops for v in op.results}
    assert names["m1"] == names["r"] == names["rnorm_partial"] == 0
    assert names["rnorm_squared"] == names["trust"] == names["w1"] == 1
    assert [v.name_hint for v in plan.carried] == ["r"]
    # 1024 elements, one chunk per rank: max(1, 3) = 3 blocks at most.
    assert plan.max_blocks == 3
    slots = plan.slots
    assert slots.phase(1) == 4 and slots.scalars(0) == 8
    assert slots.arrivals(0) == 12 and slots.flag(0) == 15
    assert plan.signal_slots == slots.total == 16
    kinds = [(b.kind, b.count) for b in plan.symmetric_buffers()]
    assert kinds == [
        ("scratch", 4 * 256),
        ("gather", 4 * 256),
        ("partials", 3),
        ("exchange", 4),
        ("partials", 3),
        ("exchange", 4),
        ("result", 1),
        ("result", 1),
    ]
    # 2 (N-1)/N S and the two f32 partials.
    assert fused_all_reduce_bytes(fusion, 4) == 2 * 3 * 1024 + 3 * 2 * 4


REDUCED = """
func.func @f(%g: {local}) -> {out} {{
  %r = coco.fusion (%g) : ({local}) -> {out} {{
  ^bb0(%g1: {local}):
    %s = coco.reduce_scatter %g1 reduction = sum dim = 0 : {local} -> {sliced}
    {body}
  }}
  func.return %r : {out}
}}
"""


def reduced(body: str, out: str) -> FusionOp:
    text = REDUCED.format(local=T("8x4xf32", "local"), sliced=SLICE, out=out, body=body)
    return the_fusion(cc.parse(text))


SCALAR_LOCAL, SCALAR = T("f32", "local"), T("f32")


def test_refuses_a_partial_used_outside_an_all_reduce():
    fusion = reduced(
        f"""%p = coco.reduce %s kind = sum dims = [0, 1] : ({SLICE}) -> {SCALAR_LOCAL}
    %q = coco.mul %p, %p : ({SCALAR_LOCAL}, {SCALAR_LOCAL}) -> {SCALAR_LOCAL}
    coco.yield %q : {SCALAR_LOCAL}""",
        SCALAR_LOCAL,
    )
    plan = FusedPlan.of(fusion, 2)
    assert isinstance(plan, str)
    assert "uses the partial of 'coco.reduce' in 'coco.mul'" in plan


def test_refuses_a_reduction_of_part_of_the_slice():
    fusion = reduced(
        f"""%p = coco.reduce %s kind = max dims = [1] : ({SLICE}) -> {ROWS}
    coco.yield %p : {ROWS}""",
        ROWS,
    )
    plan = FusedPlan.of(fusion, 2)
    assert isinstance(plan, str) and "not of a whole slice" in plan


def test_a_three_boundary_chain():
    """max, then sum of a value divided by the max, then min: stages 0..3."""
    fusion = reduced(
        f"""%p0 = coco.reduce %s kind = max dims = [0, 1] : ({SLICE}) -> {SCALAR_LOCAL}
    %a0 = coco.all_reduce %p0 reduction = max : {SCALAR_LOCAL} -> {SCALAR}
    %d0 = coco.div %s, %a0 : ({SLICE}, {SCALAR}) -> {SLICE}
    %p1 = coco.reduce %d0 kind = sum dims = [0, 1] : ({SLICE}) -> {SCALAR_LOCAL}
    %a1 = coco.all_reduce %p1 reduction = sum : {SCALAR_LOCAL} -> {SCALAR}
    %d1 = coco.sub %d0, %a1 : ({SLICE}, {SCALAR}) -> {SLICE}
    %p2 = coco.reduce %d1 kind = min dims = [0, 1] : ({SLICE}) -> {SCALAR_LOCAL}
    %a2 = coco.all_reduce %p2 reduction = min : {SCALAR_LOCAL} -> {SCALAR}
    %d2 = coco.add %d1, %a2 : ({SLICE}, {SCALAR}) -> {SLICE}
    coco.yield %d2 : {SLICE}""",
        SLICE,
    )
    plan = FusedPlan.of(fusion, 2)
    assert isinstance(plan, FusedPlan)
    assert plan.stage_count == 4
    assert [plan.stage(v) for v in fusion.yield_op.arguments] == [3]
    # %s (stage 0, read in stage 1), %d0 (stage 1, read in 2), %d1 (2, 3).
    assert [v.name_hint for v in plan.carried] == ["s", "d0", "d1"]
    assert plan.slots.total == 2 * 2 * 1 + 3 * (2 + 1 + 1)


def test_halves_accumulate_their_partials_in_f32():
    """A bf16 slice summed as written (slice-norm converts to f32 itself):
    the blocks' partials in f32, the ranks' partials and the result in the
    all_reduce's bf16."""
    sliced, local, scalar = (
        T("8x4xbf16", "sliced<0>"),
        T("f32", "local").replace("f32", "bf16"),
        T("bf16"),
    )
    text = REDUCED.format(
        local=T("8x4xbf16", "local"),
        sliced=sliced,
        out=sliced,
        body=f"""%p = coco.reduce %s kind = sum dims = [0, 1] : ({sliced}) -> {local}
    %a = coco.all_reduce %p reduction = sum : {local} -> {scalar}
    %d = coco.div %s, %a : ({sliced}, {scalar}) -> {sliced}
    coco.yield %d : {sliced}""",
    )
    plan = FusedPlan.of(the_fusion(cc.parse(text)), 2)
    assert isinstance(plan, FusedPlan)
    types = {b.kind: str(b.element_type) for b in plan.symmetric_buffers()}
    assert types["partials"] == "f32"
    assert types["exchange"] == types["result"] == "bf16"


# ----------------------------------------------------------------------------
# Row reductions (docs/gpu/fused.md, "Row reductions: a norm in the kernel")
# ----------------------------------------------------------------------------

ROW = T("8x1xf32", "sliced<0>")
COLUMNS = T("1x4xf32", "local")
ALONG_ROWS = f"({SLICE}) -> {COLUMNS}"


def test_a_layer_norm_is_three_stages_of_rows():
    """The mean's rows, then the variance's: each a stage boundary the
    block completes alone (no cooperative launch), the centred value
    carried from stage 1 to 2; the rows' arithmetic is computed again."""
    fusion = reduced(
        f"""%m = coco.reduce %s kind = sum dims = [1] keep_dims : ({SLICE}) -> {ROW}
    %c = coco.sub %s, %m : ({SLICE}, {ROW}) -> {SLICE}
    %q = coco.mul %c, %c : ({SLICE}, {SLICE}) -> {SLICE}
    %v = coco.reduce %q kind = sum dims = [1] keep_dims : ({SLICE}) -> {ROW}
    %e = coco.rsqrt %v : ({ROW}) -> {ROW}
    %y = coco.mul %c, %e : ({SLICE}, {ROW}) -> {SLICE}
    coco.yield %y : {SLICE}""",
        SLICE,
    )
    plan = FusedPlan.of(fusion, 2, chunk_elements=6)
    assert isinstance(plan, FusedPlan)
    assert [op.result.name_hint for op in plan.row_reductions] == ["m", "v"]
    assert plan.slice_reductions == () and not plan.cooperative
    assert plan.row_length == 4 and plan.rows == 4
    assert plan.stage_count == 3 and plan.segments == [[0, 1, 2]]
    assert [v.name_hint for v in plan.carried] == ["s", "c"]
    assert plan.chunk_size == 8 and plan.chunks == 2  # 6 rounded to 2 rows
    rsqrt = next(op for op in plan.compute if isinstance(op, RsqrtOp))
    assert plan.is_recomputed(rsqrt) and plan.stages[rsqrt] == 2


@pytest.mark.parametrize(
    ("body", "out", "refusal"),
    [
        (
            f"""%m = coco.reduce %s kind = sum dims = [0] keep_dims : {ALONG_ROWS}
    %a = coco.all_reduce %m reduction = sum : {COLUMNS} -> {T("1x4xf32")}
    %y = coco.sub %s, %a : ({SLICE}, {T("1x4xf32")}) -> {SLICE}
    coco.yield %y : {SLICE}""",
            SLICE,
            "not of rows after the cut",
        ),
        (
            f"""%m = coco.reduce %s kind = sum dims = [1] keep_dims : ({SLICE}) -> {ROW}
    %d = coco.dropout %m p = 5.000000e-01 seed = 1 : ({ROW}) -> {ROW}
    %y = coco.sub %s, %d : ({SLICE}, {ROW}) -> {SLICE}
    coco.yield %y : {SLICE}""",
            SLICE,
            "drops out rows",
        ),
    ],
    ids=["over-the-cut", "dropout"],
)
def test_refuses_rows_it_cannot_keep(body: str, out: str, refusal: str):
    plan = FusedPlan.of(reduced(body, out), 2)
    assert isinstance(plan, str) and refusal in plan, plan


def test_refuses_rows_of_two_lengths():
    sliced, local = T("2x4x8xf32", "sliced<0>"), T("2x4x8xf32", "local")
    rows8, rows32 = T("2x4x1xf32", "sliced<0>"), T("2x1x1xf32", "sliced<0>")
    per_row = f"({sliced}) -> {rows8}"
    text = REDUCED.format(
        local=local,
        sliced=sliced,
        out=sliced,
        body=f"""%a = coco.reduce %s kind = sum dims = [2] keep_dims : {per_row}
    %b = coco.reduce %s kind = max dims = [1, 2] keep_dims : ({sliced}) -> {rows32}
    %y = coco.sub %s, %a : ({sliced}, {rows8}) -> {sliced}
    %z = coco.sub %y, %b : ({sliced}, {rows32}) -> {sliced}
    coco.yield %z : {sliced}""",
    )
    plan = FusedPlan.of(the_fusion(cc.parse(text)), 2)
    assert plan == "reduces rows of different lengths ([8, 32] elements)"


# ----------------------------------------------------------------------------
# Several slice shapes (docs/gpu/fused.md, "Several slice shapes")
# ----------------------------------------------------------------------------


def test_several_shapes_are_parts_of_one_plan():
    """AdamW with clipping by global norm over three parameters, not
    bucketed: one plan, a part per slice shape (chunks, phase slots and
    buffers of its own), the three partials completed at one boundary."""
    optimized = cc.Pipeline("coco-optimize{bucket=false}")(example("adamw_clip"))
    plan = FusedPlan.of(the_fusion(optimized), 4, chunk_elements=1000)
    assert isinstance(plan, FusedPlan), plan
    geometries = [p.geometry for p in plan.parts]
    assert geometries == [
        SliceGeometry((256, 64), 0, 4),
        SliceGeometry((64,), 0, 4),
        SliceGeometry((128, 32), 0, 4),
    ]
    assert [p.chunks for p in plan.parts] == [5, 1, 2]  # 4096, 16, 1024 elements
    assert plan.max_blocks == 3 * 5
    slots = plan.slots
    # part 0: slots 0-39, part 1: 40-47, part 2: 48-63; phase 1 after phase 0
    assert [slots.phase(1, part) for part in range(3)] == [20, 44, 56]
    assert slots.scalars(0) == 2 * 4 * (5 + 1 + 2)
    assert len(plan.slice_reductions) == 3 and plan.scalar_boundaries == {0}
    scratch = [b.count for b in plan.symmetric_buffers() if b.kind == "scratch"]
    assert scratch == [4 * 4096, 4 * 16, 4 * 1024]
    elements = 256 * 64 + 64 + 128 * 32
    assert plan.peer_bytes() == 2 * elements * 4 // 4 + 3 * 4


def test_refuses_rows_with_several_shapes():
    sliced, rows, other = (
        T("8x4xf32", "sliced<0>"),
        T("8x1xf32", "sliced<0>"),
        T("16xf32", "sliced<0>"),
    )
    text = f"""
func.func @f(%g: {T("8x4xf32", "local")}, %h: {T("16xf32", "local")}) -> ({sliced}, {other}) {{
  %r, %q = coco.fusion (%g, %h) : ({T("8x4xf32", "local")}, {T("16xf32", "local")}) -> ({sliced}, {other}) {{
  ^bb0(%g1: {T("8x4xf32", "local")}, %h1: {T("16xf32", "local")}):
    %s = coco.reduce_scatter %g1 reduction = sum dim = 0 : {T("8x4xf32", "local")} -> {sliced}
    %t = coco.reduce_scatter %h1 reduction = sum dim = 0 : {T("16xf32", "local")} -> {other}
    %m = coco.reduce %s kind = sum dims = [1] keep_dims : ({sliced}) -> {rows}
    %y = coco.sub %s, %m : ({sliced}, {rows}) -> {sliced}
    coco.yield %y, %t : {sliced}, {other}
  }}
  func.return %r, %q : {sliced}, {other}
}}
"""  # noqa: E501
    plan = FusedPlan.of(the_fusion(cc.parse(text)), 2)
    assert plan == "reduces rows in a fusion of several slice shapes"


def test_refuses_rows_of_a_second_part():
    """The rows of the second part's slice (a keep-dims reduction of a
    12x6 slice beside an 8x4 one) are refused too, not taken for the first
    part's."""
    la, sa = T("8x4xf32", "local"), T("8x4xf32", "sliced<0>")
    lb, sb = T("12x6xf32", "local"), T("12x6xf32", "sliced<0>")
    rows = T("12x1xf32", "sliced<0>")
    text = f"""
func.func @f(%a: {la}, %b: {lb}) -> ({sa}, {sb}) {{
  %x1, %y1 = coco.fusion (%a, %b) : ({la}, {lb}) -> ({sa}, {sb}) {{
  ^bb0(%a1: {la}, %b1: {lb}):
    %x = coco.reduce_scatter %a1 reduction = sum dim = 0 : {la} -> {sa}
    %y = coco.reduce_scatter %b1 reduction = sum dim = 0 : {lb} -> {sb}
    %m = coco.reduce %y kind = sum dims = [1] keep_dims : ({sb}) -> {rows}
    %y2 = coco.sub %y, %m : ({sb}, {rows}) -> {sb}
    coco.yield %x, %y2 : {sa}, {sb}
  }}
  func.return %x1, %y1 : {sa}, {sb}
}}
"""
    plan = FusedPlan.of(the_fusion(cc.parse(text)), 4)
    assert plan == "reduces rows in a fusion of several slice shapes"


def test_a_part_of_a_rows_shape_is_a_part():
    """Slices 8x4x6 and 8x4x1 (the second has the shape of the first's
    rows): two parts, no rows."""
    la, sa = T("8x4x6xf32", "local"), T("8x4x6xf32", "sliced<0>")
    lb, sb = T("8x4x1xf32", "local"), T("8x4x1xf32", "sliced<0>")
    text = f"""
func.func @f(%a: {la}, %b: {lb}) -> ({sa}, {sb}) {{
  %x1, %y1 = coco.fusion (%a, %b) : ({la}, {lb}) -> ({sa}, {sb}) {{
  ^bb0(%a1: {la}, %b1: {lb}):
    %x = coco.reduce_scatter %a1 reduction = sum dim = 0 : {la} -> {sa}
    %y = coco.reduce_scatter %b1 reduction = sum dim = 0 : {lb} -> {sb}
    %y2 = coco.relu %y : ({sb}) -> {sb}
    coco.yield %x, %y2 : {sa}, {sb}
  }}
  func.return %x1, %y1 : {sa}, {sb}
}}
"""
    plan = FusedPlan.of(the_fusion(cc.parse(text)), 4)
    assert isinstance(plan, FusedPlan), plan
    assert len(plan.parts) == 2 and plan.row_length == 1
