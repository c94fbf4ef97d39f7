"""coco-dce: equivalence on every example (2, 4 and 8 ranks), dead chains and
dead ops across blocks removed (xDSL's dce on the effects coco declares), and
the targeted removal with its refusals."""

from pathlib import Path

import pytest
from helpers import EXAMPLES_DIR
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Region

import coconet_ir as cc
from coconet_ir.dialects import coco
from coconet_ir.passes.dce import CocoDCE

EXAMPLES = sorted(EXAMPLES_DIR.glob("*.mlir"))

T = "!coco.tensor<8x16xf32, local>"


def dead_chain(length: int) -> str:
    """A function whose `length` negations and all_reduce nobody reads."""
    lines = [f"  %v0 = coco.neg %x : ({T}) -> {T}"]
    lines += [f"  %v{i} = coco.neg %v{i - 1} : ({T}) -> {T}" for i in range(1, length)]
    lines.append(
        f"  %s = coco.all_reduce %v{length - 1} reduction = sum : {T} -> "
        "!coco.tensor<8x16xf32, replicated>"
    )
    body = "\n".join(lines)
    return f"func.func @f(%x: {T}) -> {T} {{\n{body}\n  func.return %x : {T}\n}}"


def coco_ops(module: ModuleOp) -> list[str]:
    return [op.name for op in module.walk() if op.name.startswith("coco.")]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("world", [2, 4, 8])
def test_examples_stay_equivalent(path: Path, world: int):
    before = cc.parse_file(str(path))
    after = cc.Pipeline("coco-dce")(before)
    result = cc.equivalent(before, after, world)
    assert result.ok, result.first_difference


@pytest.mark.parametrize("world", [2, 4, 8])
def test_split_reorder_then_dce_stays_equivalent(world: int):
    """What coco-optimize leaves for coco-dce: gathers whose users moved."""
    before = cc.parse_file(str(EXAMPLES[0].parent / "adam.mlir"))
    after = cc.Pipeline("coco-split-all-reduce,coco-reorder,coco-dce")(before)
    result = cc.equivalent(before, after, world)
    assert result.ok, result.first_difference


def test_a_dead_chain_goes_in_one_pass():
    module = cc.parse(dead_chain(300))
    CocoDCE().apply(cc.make_context(), module)
    assert coco_ops(module) == []


def test_an_op_used_only_by_a_dead_op_of_a_later_block_goes():
    """In a region whose later block defines what an earlier one uses (a
    back-edge), the producer dies only once its consumer has gone."""
    first = Block()
    second = Block(arg_types=[coco.tensor([8, 16], "f32", coco.LOCAL)])
    producer = coco.NegOp(second.args[0])
    consumer = coco.NegOp(producer)
    first.add_ops([consumer, ReturnOp()])
    second.add_ops([producer, ReturnOp()])
    module = ModuleOp([FuncOp.from_region("f", [], [], Region([first, second]))])
    CocoDCE().apply(cc.make_context(), module)
    assert consumer.parent is None and producer.parent is None


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("live", "its result is used by 'coco.neg'"),
        ("upd", "'coco.update' has an effect besides its results"),
        ("missing", 'no op named "missing"'),
    ],
)
def test_targeted_refusal_leaves_the_module_unchanged(name: str, message: str):
    module = cc.parse(f"""
func.func @f(%x: {T}, %w: {T}) -> {T} {{
  %a = coco.exp %x {{name = "live"}} : ({T}) -> {T}
  %b = coco.neg %a : ({T}) -> {T}
  coco.update %w, %b {{name = "upd"}} : {T}
  %dead = coco.exp %x : ({T}) -> {T}
  func.return %x : {T}
}}""")
    before = cc.to_text(module)
    with pytest.raises(cc.CocoError, match=message):
        CocoDCE(op=name).apply(cc.make_context(), module)
    assert cc.to_text(module) == before


def test_targeted_removal_does_not_cascade():
    text = dead_chain(3).replace("= sum", '= sum {name = "ar"}')
    module = cc.parse(text)
    CocoDCE(op="ar").apply(cc.make_context(), module)
    assert coco_ops(module) == ["coco.neg"] * 3
