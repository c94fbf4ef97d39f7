"""coco-fuse-send: the pipeline example sends slices (N times fewer bytes) and
stays equivalent on 2, 4 and 8 ranks; refusals leave both stages untouched."""

import pytest
from helpers import EXAMPLES_DIR, stage
from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc
from coconet_ir.analysis.costs import bytes_sent
from coconet_ir.dialects import coco
from coconet_ir.passes.fuse_send import FuseSend

PIPELINE = EXAMPLES_DIR / "pipeline.mlir"
WORLDS = [2, 4, 8]

# @stage1 sends an all_reduce's result straight away; @stage2 receives it.
SEND_SUM = """
func.func @stage1(%g: !coco.tensor<8x64xf32, local>) {
  %s = coco.all_reduce %g reduction = sum {name = "sum"} : !coco.tensor<8x64xf32, local> -> !coco.tensor<8x64xf32, replicated>
  coco.send %s to @stage2 channel = 0 {name = "send"} : !coco.tensor<8x64xf32, replicated>
  func.return
}
func.func @stage2() -> !coco.tensor<8x64xf32, replicated> {
  %h = coco.recv from @stage1 channel = 0 {name = "recv"} : !coco.tensor<8x64xf32, replicated>
  %a = coco.gelu %h : (!coco.tensor<8x64xf32, replicated>) -> !coco.tensor<8x64xf32, replicated>
  func.return %a : !coco.tensor<8x64xf32, replicated>
}
"""  # noqa: E501


def send_bytes(module: ModuleOp, world: int) -> int:
    """Bytes one rank of @stage1 sends with coco.send."""
    return sum(
        bytes_sent(op, world)
        for op in stage(module, "stage1").walk()
        if isinstance(op, coco.SendOp)
    )


def check_sends_slices(before: ModuleOp, after: ModuleOp) -> None:
    """Equivalent on every world size, and the send moves N times fewer bytes."""
    for world in WORLDS:
        result = cc.equivalent(before, after, world)
        assert result.ok, result.first_difference
        assert send_bytes(after, world) * world == send_bytes(before, world)


def test_split_then_fuse_send_sends_the_slice_of_an_all_reduce():
    before = cc.parse(SEND_SUM)
    after = cc.Pipeline("coco-split-all-reduce,coco-fuse-send")(before)
    check_sends_slices(before, after)
    recv, gather = list(stage(after, "stage2").body.block.ops)[:2]
    assert isinstance(recv, coco.RecvOp) and isinstance(gather, coco.AllGatherOp)
    assert gather.operand is recv.result
    assert gather.attributes["name"].data == "recv_ag"
    assert not any(
        isinstance(op, coco.AllGatherOp) for op in stage(after, "stage1").walk()
    )


@pytest.mark.parametrize("world", WORLDS)
def test_pipeline_example_after_split_and_fuse_send(world: int):
    """Without coco-reorder the example's send carries the residual add's
    result, not an all_gather's: coco-fuse-send leaves it (no bytes saved)."""
    before = cc.parse_file(str(PIPELINE))
    after = cc.Pipeline("coco-split-all-reduce,coco-fuse-send")(before)
    result = cc.equivalent(before, after, world)
    assert result.ok, result.first_difference
    assert send_bytes(after, world) == send_bytes(before, world)


def test_pipeline_example_after_split_reorder_and_fuse_send():
    before = cc.parse_file(str(PIPELINE))
    after = cc.Pipeline("coco-split-all-reduce,coco-reorder,coco-fuse-send")(before)
    check_sends_slices(before, after)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (SEND_SUM, r"split the all_reduce first \(coco-split-all-reduce\)"),
        (PIPELINE.read_text(), "it comes from 'coco.add'"),
    ],
    ids=["all_reduce", "add"],
)
def test_targeted_refusal_leaves_both_stages_unchanged(text: str, message: str):
    module = cc.parse(text)
    before = cc.to_text(module)
    with pytest.raises(cc.CocoError, match=message):
        FuseSend(op="send").apply(cc.make_context(), module)
    assert cc.to_text(module) == before


def test_all_or_nothing_across_sends_sharing_a_name():
    """One send named `send` could be fused, the other not: neither is."""
    fusable = """
  %rs = coco.reduce_scatter %g reduction = sum dim = 0 : !coco.tensor<8x64xf32, local> -> !coco.tensor<8x64xf32, sliced<0>>
  %ag = coco.all_gather %rs : !coco.tensor<8x64xf32, sliced<0>> -> !coco.tensor<8x64xf32, replicated>
  coco.send %ag to @stage2 channel = 1 {name = "send"} : !coco.tensor<8x64xf32, replicated>
  func.return
"""  # noqa: E501
    text = SEND_SUM.replace("  func.return\n", fusable, 1).replace(
        "  func.return %a",
        "  %k = coco.recv from @stage1 channel = 1 : "
        "!coco.tensor<8x64xf32, replicated>\n  func.return %a",
    )
    module = cc.parse(text)
    before = cc.to_text(module)
    with pytest.raises(cc.CocoError, match="split the all_reduce first"):
        FuseSend(op="send").apply(cc.make_context(), module)
    assert cc.to_text(module) == before
    FuseSend().apply(cc.make_context(), module)
    assert "channel = 1 : !coco.tensor<8x64xf32, sliced<0>>" in cc.to_text(module)


def test_untargeted_pass_skips_what_it_cannot_fuse():
    module = cc.parse(SEND_SUM)
    before = cc.to_text(module)
    FuseSend().apply(cc.make_context(), module)
    assert cc.to_text(module) == before
