"""The schedule API (cc.Schedule) on the DSL programs of examples/: the paper's
schedules, as docs/passes.md writes them, are equivalent on 2, 4 and 8 ranks;
misuse is refused and leaves the program as it was."""

import importlib.util
import sys

import pytest
from helpers import ROOT

import coconet_ir as cc
from coconet_ir.dialects import coco


def load(name: str):
    spec = importlib.util.spec_from_file_location(
        f"example_{name}", ROOT / "examples" / f"{name}.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def kinds(module) -> list[type]:
    return [type(op) for op in module.walk()]


def assert_equivalent(before, after):
    for world in (2, 4, 8):
        result = cc.equivalent(before, after, world)
        assert result.ok, result.first_difference


def test_adam_fused_all_reduce_with_sliced_state():
    adam = load("adam").adam
    sched = cc.Schedule(adam)
    rs, ag = sched.split("grad_sum")
    assert (rs.name, ag.name) == ("grad_sum_rs", "grad_sum_ag")
    sched.reorder(ag)
    sched.slice_state("m")
    sched.slice_state(adam.arg("v"))
    fused = sched.fuse(rs, ag)
    assert fused.name == "grad_sum_rs_fused"
    inputs = sched.module.ops.first.function_type.inputs.data
    assert [str(t.layout) for t in inputs[2:4]] == ["sliced<0>", "sliced<0>"]
    assert kinds(sched.module).count(coco.FusionOp) == 1
    assert_equivalent(adam.module, sched.module)


def test_megatron_overlap_and_fuse():
    megatron = load("megatron").megatron
    sched = cc.Schedule(megatron)
    rs, ag = sched.split("sum", dim=2)
    sched.reorder(ag)
    fused = sched.fuse(rs, ag)
    overlap = sched.overlap("layer", fused, chunks=4)
    assert overlap.name == "layer_overlap"
    assert coco.OverlapOp in kinds(sched.module)
    assert_equivalent(megatron.module, sched.module)


def test_pipeline_send_fusion():
    pipeline = load("pipeline")
    sched = cc.Schedule(pipeline.stage1, pipeline.stage2)
    rs, ag = sched.split("sum", dim=2)
    sched.reorder(ag)
    sched.fuse_send("send")
    sched.fuse(rs)
    (send,) = [op for op in sched.module.walk() if isinstance(op, coco.SendOp)]
    assert send.operand.type.layout.is_sliced
    assert isinstance(send.parent_op(), coco.FusionOp)
    assert_equivalent(cc.module(pipeline.stage1, pipeline.stage2), sched.module)


def test_schedule_on_a_parsed_module_and_apply():
    module = cc.parse_file(str(ROOT / "examples" / "sgd.mlir"))
    sched = cc.Schedule(module)
    _, ag = sched.split("sum")
    sched.reorder(ag)
    sched.apply("coco-fuse,coco-dce")
    assert coco.FusionOp in kinds(sched.module)
    assert coco.AllReduceOp in kinds(module)  # the schedule works on a copy
    assert_equivalent(module, sched.module)


def test_refused_step_names_the_precondition_and_changes_nothing():
    sched = cc.Schedule(load("sgd").sgd)
    before = cc.to_text(sched.module)
    with pytest.raises(cc.CocoError, match="dim 3 is out of range"):
        sched.split("sum", dim=3)
    with pytest.raises(cc.CocoError, match="no op named"):
        sched.reorder("nonexistent")
    with pytest.raises(cc.CocoError, match="parameters are named 'q'"):
        sched.slice_state("q")
    assert cc.to_text(sched.module) == before


def test_a_refused_step_keeps_no_label_it_generated():
    """slice_state before split and reorder is refused; the label it gave the
    unlabelled update of w must not stay, and the next steps still find the
    ops the user's values name."""
    adam = load("adam").adam
    sched = cc.Schedule(adam)
    before = cc.to_text(sched.module)
    with pytest.raises(cc.CocoError, match=r"not produced by a coco\.all_gather"):
        sched.slice_state(adam.arg("w"))
    assert cc.to_text(sched.module) == before
    module = sched.module
    _, ag = sched.split("grad_sum")
    sched.reorder(ag)
    sched.slice_state(adam.arg("m"))
    assert sched.module is module
    assert_equivalent(adam.module, sched.module)


def test_schedule_needs_a_program():
    with pytest.raises(cc.CocoError, match="takes one module"):
        cc.Schedule()


def test_fuse_and_overlap_check_the_ops_they_are_given():
    megatron = load("megatron").megatron
    sched = cc.Schedule(megatron)
    rs, ag = sched.split("sum", dim=2)
    sched.reorder(ag, ["dropout", "out"])
    with pytest.raises(cc.CocoError, match="no op named 'no_such_op'"):
        sched.fuse(rs, "no_such_op")
    with pytest.raises(cc.CocoError, match="is not an op of the program"):
        sched.fuse(rs, 42)  # type: ignore[arg-type]
    before = cc.to_text(sched.module)
    with pytest.raises(cc.CocoError, match="named 'layer' is not in the region"):
        sched.fuse(rs, "layer")  # the matmul stays outside the fused kernel
    assert cc.to_text(sched.module) == before
    fused = sched.fuse(rs, "dropout", ag)  # reorder replaced ag: nothing to check
    sched.overlap("layer", fused, chunks=2)
    assert_equivalent(megatron.module, sched.module)


def test_reorder_accepts_rewritten_norms_and_refuses_what_did_not_move():
    lamb = load("lamb").lamb
    sched = cc.Schedule(lamb)
    _, ag = sched.split("grad_sum")
    before = cc.to_text(sched.module)
    with pytest.raises(cc.CocoError, match="'w_norm' does not use the all_gather"):
        sched.reorder(ag, ["w_norm"])  # the norm of the weights reads w, not ag
    assert cc.to_text(sched.module) == before
    sched.reorder(ag, ["r_norm"])  # written out as sqrt(all_reduce(...))
    assert_equivalent(lamb.module, sched.module)


def test_reorder_refuses_when_a_listed_computation_stays_after_the_gather():
    source = """
func.func @f(%x: !coco.tensor<16x8xf32, sliced<0>>, %w: !coco.tensor<8x8xf32, replicated>) -> (!coco.tensor<16x8xf32, replicated>, !coco.tensor<16x8xf32, replicated>) {
  %g = coco.all_gather %x {name = "g"} : !coco.tensor<16x8xf32, sliced<0>> -> !coco.tensor<16x8xf32, replicated>
  %r = coco.relu %g {name = "act"} : (!coco.tensor<16x8xf32, replicated>) -> !coco.tensor<16x8xf32, replicated>
  %m = coco.matmul %g, %w {name = "mm"} : (!coco.tensor<16x8xf32, replicated>, !coco.tensor<8x8xf32, replicated>) -> !coco.tensor<16x8xf32, replicated>
  func.return %r, %m : !coco.tensor<16x8xf32, replicated>, !coco.tensor<16x8xf32, replicated>
}"""  # noqa: E501
    sched = cc.Schedule(cc.parse(source))
    before = cc.to_text(sched.module)
    with pytest.raises(
        cc.CocoError, match=r"'coco.matmul' at .* cannot move onto the slices: only"
    ):
        sched.reorder("g", ["act", "mm"])
    assert cc.to_text(sched.module) == before
    sched.reorder("g", ["act"])
    assert_equivalent(cc.parse(source), sched.module)


def test_fuse_takes_the_list_of_its_stages():
    """`sched.fuse([...])` (coco-fuse{ops=...}): LAMB's stages from the
    gradient's reduce_scatter to both norms' scalar all_reduces become ONE
    region, with what lies between them and what only they read."""
    lamb = load("lamb").lamb
    sched = cc.Schedule(lamb)
    rs, ag = sched.split("grad_sum")
    sched.reorder(ag)
    sched.slice_state("m")
    sched.slice_state("v")
    sched.apply("coco-slice-norm")
    fused = sched.fuse([rs, "w_norm_ar", "r_norm_ar"])
    (region,) = [op for op in sched.module.walk() if isinstance(op, coco.FusionOp)]
    assert region.attributes["name"].data == fused.name == "grad_sum_rs_fused"
    inside = [op.name for op in region.body.block.ops]
    assert inside.count("coco.all_reduce") == 2 and "coco.reduce_scatter" in inside
    assert_equivalent(lamb.module, sched.module)


def test_fuse_of_a_list_names_the_op_that_prevents_one_region():
    megatron = load("megatron").megatron
    sched = cc.Schedule(megatron)
    rs, _ = sched.split("sum", dim=2)
    before = cc.to_text(sched.module)
    with pytest.raises(
        cc.CocoError,
        match=r"'coco.matmul' at .* is listed and a fused kernel cannot hold it",
    ):
        sched.fuse(["layer", rs])
    assert cc.to_text(sched.module) == before
    with pytest.raises(cc.CocoError, match='no op named "nothing"'):
        sched.fuse([rs, "nothing"])
    assert cc.to_text(sched.module) == before
