"""coco-split-all-reduce: rewrites, refusals that leave the module untouched, and
equivalence on every example (2, 4 and 8 ranks)."""

from pathlib import Path

import pytest
from helpers import EXAMPLES_DIR

import coconet_ir as cc
from coconet_ir.dialects import coco
from coconet_ir.passes.split_all_reduce import SplitAllReduce

EXAMPLES = sorted(EXAMPLES_DIR.glob("*.mlir"))

SGD = """
func.func @sgd(%g: !coco.tensor<8x64xf32, local>, %w: !coco.tensor<8x64xf32, replicated>) {
  %s = coco.all_reduce %g reduction = sum {name = "avg"} : !coco.tensor<8x64xf32, local> -> !coco.tensor<8x64xf32, replicated>
  %w1 = coco.sub %w, %s : (!coco.tensor<8x64xf32, replicated>, !coco.tensor<8x64xf32, replicated>) -> !coco.tensor<8x64xf32, replicated>
  coco.update %w, %w1 : !coco.tensor<8x64xf32, replicated>
  func.return
}
"""  # noqa: E501


def op_names(module) -> list[str]:
    return [op.name for op in module.walk()]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("world", [2, 4, 8])
def test_examples_stay_equivalent(path: Path, world: int):
    before = cc.parse_file(str(path))
    after = cc.Pipeline("coco-split-all-reduce")(before)
    assert "coco.all_reduce" not in op_names(after) or path.stem == "lamb"
    result = cc.equivalent(before, after, world)
    assert result.ok, result.first_difference


def test_split_names_and_types():
    module = cc.Pipeline([SplitAllReduce(dim=0)])(cc.parse(SGD))
    scatter, gather = (
        op
        for op in module.walk()
        if isinstance(op, coco.ReduceScatterOp | coco.AllGatherOp)
    )
    assert scatter.attributes["name"].data == "avg_rs"
    assert gather.attributes["name"].data == "avg_ag"
    assert str(scatter.result.type) == "!coco.tensor<8x64xf32, sliced<0>>"
    assert gather.operand is scatter.result


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"op": "avg", "dim": 5}, "dim 5 is out of range for rank 2"),
        ({"op": "missing"}, 'no op named "missing"'),
    ],
)
def test_refusal_leaves_the_module_unchanged(options, message):
    module = cc.parse(SGD)
    text = cc.to_text(module)
    with pytest.raises(cc.CocoError, match=message):
        SplitAllReduce(**options).apply(cc.make_context(), module)
    assert cc.to_text(module) == text


def test_untargeted_split_skips_what_it_cannot_split():
    module = cc.parse(SGD.replace("8x64xf32, local>", "8x64xf32, replicated>"))
    before = cc.to_text(module)
    SplitAllReduce().apply(cc.make_context(), module)
    assert cc.to_text(module) == before


def test_a_fused_regions_all_reduce_is_not_split():
    """coco-fuse-collective's GEMV + all_reduce is one tile kernel: the split
    leaves it alone, and refuses it by name, the module unchanged."""
    decode = """
func.func @decode(%x: !coco.tensor<1x64xf32, sliced<1>>, %w: !coco.tensor<64x32xf32, sliced<0>>) -> !coco.tensor<1x32xf32, replicated> {
  %y = coco.matmul %x, %w {name = "proj"} : (!coco.tensor<1x64xf32, sliced<1>>, !coco.tensor<64x32xf32, sliced<0>>) -> !coco.tensor<1x32xf32, local>
  %s = coco.all_reduce %y reduction = sum {name = "total"} : !coco.tensor<1x32xf32, local> -> !coco.tensor<1x32xf32, replicated>
  func.return %s : !coco.tensor<1x32xf32, replicated>
}
"""  # noqa: E501
    module = cc.Pipeline("coco-fuse-collective")(cc.parse(decode))
    text = cc.to_text(module)
    SplitAllReduce().apply(cc.make_context(), module)
    assert cc.to_text(module) == text
    with pytest.raises(cc.CocoError, match=r"inside the coco.fusion 'proj_fused'"):
        SplitAllReduce(op="total").apply(cc.make_context(), module)
    assert cc.to_text(module) == text
