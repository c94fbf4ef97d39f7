"""coco-slice-state: Adam's and LAMB's moments stay sliced after split and
reorder, the programs stay equivalent (2, 4 and 8 ranks), and refusals leave
the module untouched."""

from pathlib import Path

import pytest
from helpers import EXAMPLES_DIR, ops_of, the_function

import coconet_ir as cc
from coconet_ir.analysis.costs import function_costs
from coconet_ir.dialects import coco
from coconet_ir.dialects.coco import ELEMENTWISE_OPS
from coconet_ir.passes.reorder import Reorder
from coconet_ir.passes.slice_state import SliceState
from coconet_ir.passes.split_all_reduce import SplitAllReduce

EXAMPLES = sorted(EXAMPLES_DIR.glob("*.mlir"))
EXAMPLE = {path.stem: path for path in EXAMPLES}
WORLDS = [2, 4, 8]
ZERO = "coco-split-all-reduce,coco-reorder,coco-slice-state"

STATE = """
func.func @state(%p: !coco.tensor<64xf32, replicated>, %s: !coco.tensor<64xf32, sliced<0>>) {
  %p_slice = coco.all_slice %p dim = 0 : (!coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, sliced<0>>
  %p1 = coco.add %p_slice, %s : (!coco.tensor<64xf32, sliced<0>>, !coco.tensor<64xf32, sliced<0>>) -> !coco.tensor<64xf32, sliced<0>>
  %p1_ag = coco.all_gather %p1 : !coco.tensor<64xf32, sliced<0>> -> !coco.tensor<64xf32, replicated>
  coco.update %p, %p1_ag {name = "p_update"} : !coco.tensor<64xf32, replicated>
  func.return
}
"""  # noqa: E501


def argument_layouts(module) -> dict[str, str]:
    return {
        arg.name_hint: str(arg.type.layout)
        for arg in the_function(module).body.block.args
    }


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("world", WORLDS)
def test_examples_stay_equivalent(path: Path, world: int):
    before = cc.parse_file(str(path))
    after = cc.Pipeline(ZERO)(before)
    result = cc.equivalent(before, after, world)
    assert result.ok, result.first_difference


@pytest.mark.parametrize("name", ["adam", "lamb"])
def test_optimizer_state_stays_sliced(name: str):
    after = cc.Pipeline(ZERO)(cc.parse_file(str(EXAMPLE[name])))
    layouts = argument_layouts(after)
    assert layouts["m"] == layouts["v"] == "sliced<0>"
    assert layouts["w"] == "replicated"
    assert len(ops_of(after, coco.ReduceScatterOp)) == 1
    # Only the weights are still cut from a replicated value.
    assert {op.operand.name_hint for op in ops_of(after, coco.AllSliceOp)} == {"w"}
    # The only all_gather brings the new weights back for their update.
    (gather,) = ops_of(after, coco.AllGatherOp)
    (use,) = gather.result.uses
    assert isinstance(use.operation, coco.UpdateOp)
    assert use.operation.param.name_hint == "w"
    for op in the_function(after).walk():
        if isinstance(op, ELEMENTWISE_OPS) and op.results[0].type.rank > 0:
            assert op.results[0].type.layout.is_sliced, op
    for update in ops_of(after, coco.UpdateOp):
        if update.param.name_hint in ("m", "v"):
            assert update.value.type.layout.is_sliced


@pytest.mark.parametrize("world", WORLDS)
def test_adam_elementwise_work_drops_by_the_world_size(world: int):
    split = cc.Pipeline("coco-split-all-reduce")(cc.parse_file(str(EXAMPLE["adam"])))
    after = cc.Pipeline("coco-reorder,coco-slice-state")(split)
    scalars = sum(
        1
        for op in the_function(split).walk()
        if isinstance(op, ELEMENTWISE_OPS) and op.results[0].type.rank == 0
    )
    before_work = function_costs(the_function(split), world).elementwise_elements
    after_costs = function_costs(the_function(after), world)
    assert before_work - scalars == world * (after_costs.elementwise_elements - scalars)
    assert after_costs.collectives == {
        "coco.reduce_scatter": 1,
        "coco.all_gather": 1,
    }


@pytest.mark.parametrize("world", WORLDS)
def test_weights_option_slices_the_weights_too(world: int):
    before = cc.parse_file(str(EXAMPLE["sgd"]))
    default = cc.Pipeline(ZERO)(before)
    assert argument_layouts(default)["w"] == "replicated"
    after = cc.Pipeline([SplitAllReduce(), Reorder(), SliceState(weights=True)])(before)
    assert argument_layouts(after)["w"] == "sliced<0>"
    assert not ops_of(after, coco.AllGatherOp)
    assert cc.equivalent(before, after, world).ok


def test_named_update_is_sliced_whichever_it_is():
    module = cc.parse(STATE)
    SliceState(op="p_update").apply(cc.make_context(), module)
    assert argument_layouts(module)["p"] == "sliced<0>"
    assert not ops_of(module, coco.AllGatherOp)
    assert not ops_of(module, coco.AllSliceOp)
    assert str(the_function(module).function_type.inputs.data[0]) == (
        "!coco.tensor<64xf32, sliced<0>>"
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda text: text.replace(
                "coco.update %p, %p1_ag {",
                "%n = coco.norm %p : (!coco.tensor<64xf32, replicated>) -> "
                "!coco.tensor<f32, replicated>\n  coco.update %p, %p1_ag {",
            ),
            "is used by 'coco.norm'",
        ),
        (
            lambda text: text.replace("coco.update %p, %p1_ag", "coco.update %p, %p"),
            "not produced by a coco.all_gather",
        ),
        (lambda text: text.replace('"p_update"', '"other"'), 'no op named "p_update"'),
    ],
)
def test_refusal_leaves_the_module_unchanged(edit, message):
    module = cc.parse(edit(STATE))
    text = cc.to_text(module)
    with pytest.raises(cc.CocoError, match=message):
        SliceState(op="p_update").apply(cc.make_context(), module)
    assert cc.to_text(module) == text
