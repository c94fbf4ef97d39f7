"""Locations after a pass (issue 25; docs/passes.md, "Locations after a
pass"): every op a pass creates carries the location of the op it stands for,
fused where it stands for several, so that a diagnostic after coco-optimize
points at the user's line, not `<unknown>`."""

from __future__ import annotations

import pytest
from helpers import EXAMPLES_DIR, example
from xdsl.dialects.builtin import FileLineColLoc, FusedLoc, ModuleOp, UnknownLoc
from xdsl.ir import Operation

import coconet_ir as cc
from coconet_ir.diagnostics import CocoError, location_of
from coconet_ir.dialects import coco
from coconet_ir.passes.optimize import Optimize

NAMES = sorted(p.stem for p in EXAMPLES_DIR.glob("*.mlir"))

T, TL = "!coco.tensor<64xf32, replicated>", "!coco.tensor<64xf32, local>"
SCALAR = "!coco.tensor<f32, replicated>"

ARGS = f"%g0: {TL}, %w0: {T}, %g1: {TL}, %w1: {T}, %lr: {SCALAR}"
TWO_SGD_STEPS = f"""func.func @two({ARGS}) {{
  %s0 = coco.all_reduce %g0 reduction = sum : {TL} -> {T}
  %d0 = coco.mul %lr, %s0 : ({SCALAR}, {T}) -> {T}
  %n0 = coco.sub %w0, %d0 : ({T}, {T}) -> {T}
  coco.update %w0, %n0 : {T}
  %s1 = coco.all_reduce %g1 reduction = sum : {TL} -> {T}
  %d1 = coco.mul %lr, %s1 : ({SCALAR}, {T}) -> {T}
  %n1 = coco.sub %w1, %d1 : ({T}, {T}) -> {T}
  coco.update %w1, %n1 : {T}
  func.return
}}
"""
"""Two parameters whose updates coco-bucket concatenates (line 2 onwards)."""


def unlocated(module: ModuleOp) -> list[str]:
    """The ops (but the module) and block arguments that have no location."""
    found: list[str] = []
    for op in module.walk():
        if op is not module and isinstance(op.location, UnknownLoc):
            found.append(op.name)
        for region in op.regions:
            for block in region.blocks:
                found += [
                    f"argument of {op.name}"
                    for arg in block.args
                    if isinstance(arg.location, UnknownLoc)
                ]
    return found


def kinds(module: ModuleOp) -> set[str]:
    return {op.name for op in module.walk()}


@pytest.mark.parametrize("name", NAMES)
def test_every_part_of_coco_optimize_leaves_every_op_located(name: str) -> None:
    module = example(name)
    for step in Optimize().steps():
        step(module)
        assert unlocated(module) == [], (name, step.part.name)


@pytest.mark.parametrize(
    ("name", "pipeline", "made"),
    [
        ("sequence_parallel", "coco-overlap{per_peer=true}", "coco.per_peer"),
        ("matmul_reduce_scatter", "coco-overlap{chunks=2}", "coco.overlap"),
        ("megatron", "coco-split-all-reduce{dim=1},coco-reorder", "coco.all_slice"),
        ("lamb", "coco-split-all-reduce,coco-reorder,coco-slice-norm", "coco.reduce"),
    ],
)
def test_passes_outside_the_default_schedule_locate_what_they_make(
    name: str, pipeline: str, made: str
) -> None:
    module = cc.Pipeline(pipeline)(example(name))
    assert made in kinds(module)
    assert unlocated(module) == []


def test_a_bucket_carries_the_fused_location_of_its_all_reduces() -> None:
    module = cc.Pipeline("coco-bucket")(cc.parse(TWO_SGD_STEPS, "two.mlir"))
    assert "coco.concat" in kinds(module)
    assert unlocated(module) == []
    (reduce,) = [op for op in module.walk() if isinstance(op, coco.AllReduceOp)]
    assert isinstance(reduce.location, FusedLoc)
    lines = [loc.line.data for loc in reduce.location.locations.data]  # type: ignore[union-attr]
    assert lines == [2, 6]
    assert location_of(reduce) == "two.mlir:2:3"  # as mlir-opt: the first


def test_an_error_after_coco_optimize_names_the_users_line() -> None:
    """coco-split-all-reduce turns the user's all_reduce (line 11 of sgd.mlir)
    into a reduce_scatter and an all_gather; the lowering's complaint about
    the reduce_scatter points at that line."""
    module = cc.Pipeline("coco-optimize")(example("sgd"))
    with pytest.raises(CocoError) as caught:
        cc.Pipeline("convert-coco-to-gpu{world=3}")(module)
    message = str(caught.value)
    assert message.startswith(f"{EXAMPLES_DIR / 'sgd.mlir'}:11:3: error: "), message
    assert "'coco.reduce_scatter' op" in message


def test_a_fusion_region_is_located_where_its_ops_are() -> None:
    module = cc.Pipeline("coco-split-all-reduce,coco-reorder,coco-fuse")(example("sgd"))
    (fusion,) = [op for op in module.walk() if isinstance(op, coco.FusionOp)]
    assert isinstance(fusion.location, FusedLoc)
    members: list[Operation] = list(fusion.block.ops)[:-1]  # not the yield
    inside = {loc for op in members for loc in located_parts(op)}
    assert set(fusion.location.locations.data) == inside
    assert location_of(fusion) == f"{EXAMPLES_DIR / 'sgd.mlir'}:11:3"


def located_parts(op: Operation) -> list[FileLineColLoc]:
    location = op.location
    if isinstance(location, FusedLoc):
        return list(location.locations.data)  # type: ignore[arg-type]
    assert isinstance(location, FileLineColLoc), op.name
    return [location]
