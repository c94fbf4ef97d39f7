"""coco-reorder: equivalence on every example (2, 4 and 8 ranks), the structure
and per-rank work of the reordered programs, broadcasting of replicated
operands, values gathered along different dims, and refusals that leave the
module untouched."""

from pathlib import Path

import pytest
from helpers import EXAMPLES_DIR, ops_of, the_function
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp

import coconet_ir as cc
from coconet_ir.analysis.costs import function_costs
from coconet_ir.dialects import coco
from coconet_ir.dialects.coco import ELEMENTWISE_OPS, label_of
from coconet_ir.passes.reorder import Reorder
from coconet_ir.passes.split_all_reduce import SplitAllReduce

EXAMPLES = sorted(EXAMPLES_DIR.glob("*.mlir"))
EXAMPLE = {path.stem: path for path in EXAMPLES}
WORLDS = [2, 4, 8]
SPLIT_REORDER = "coco-split-all-reduce,coco-reorder"

BIAS = """
func.func @bias(%x: !coco.tensor<16x32xf32, sliced<DIM>>, %b: !coco.tensor<BIASxf32, replicated>) -> !coco.tensor<16x32xf32, replicated> {
  %xg = coco.all_gather %x {name = "x_ag"} : !coco.tensor<16x32xf32, sliced<DIM>> -> !coco.tensor<16x32xf32, replicated>
  %y = coco.add %xg, %b : (!coco.tensor<16x32xf32, replicated>, !coco.tensor<BIASxf32, replicated>) -> !coco.tensor<16x32xf32, replicated>
  func.return %y : !coco.tensor<16x32xf32, replicated>
}
"""  # noqa: E501


def scalar_work(func: FuncOp) -> int:
    """Elements of the rank-0 elementwise ops (the same before and after)."""
    return sum(
        1
        for op in func.walk()
        if isinstance(op, ELEMENTWISE_OPS) and op.results[0].type.rank == 0
    )


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("world", WORLDS)
def test_examples_stay_equivalent(path: Path, world: int):
    before = cc.parse_file(str(path))
    after = cc.Pipeline(SPLIT_REORDER)(before)
    result = cc.equivalent(before, after, world)
    assert result.ok, result.first_difference


@pytest.mark.parametrize("name", ["sgd", "adam", "megatron"])
@pytest.mark.parametrize("world", WORLDS)
def test_elementwise_work_drops_by_the_world_size(name: str, world: int):
    split = cc.Pipeline("coco-split-all-reduce")(cc.parse_file(str(EXAMPLE[name])))
    after = cc.Pipeline("coco-reorder")(split)
    before_func, after_func = the_function(split), the_function(after)
    scalars = scalar_work(before_func)
    assert scalar_work(after_func) == scalars
    before_work = function_costs(before_func, world).elementwise_elements
    after_work = function_costs(after_func, world).elementwise_elements
    assert before_work - scalars == world * (after_work - scalars)


def test_lamb_norm_of_a_sliced_value_is_written_out():
    after = cc.Pipeline(SPLIT_REORDER)(cc.parse_file(str(EXAMPLE["lamb"])))
    (root,) = (op for op in ops_of(after, coco.SqrtOp) if label_of(op) == "r_norm")
    total = root.operand.owner
    assert isinstance(total, coco.AllReduceOp)
    assert total.reduction.data == coco.ReductionKind.SUM
    partial = total.operand.owner
    assert isinstance(partial, coco.ReduceOp)
    assert partial.operand.type.layout.is_sliced
    # The norm of the replicated weights stays a plain norm.
    (w_norm,) = ops_of(after, coco.NormOp)
    assert w_norm.operand.type.layout.is_replicated
    work = {
        w: function_costs(the_function(after), w).elementwise_elements for w in WORLDS
    }
    assert work[2] > work[4] > work[8]


def test_adam_structure_after_reorder():
    after = cc.Pipeline(SPLIT_REORDER)(cc.parse_file(str(EXAMPLE["adam"])))
    assert len(ops_of(after, coco.ReduceScatterOp)) == 1
    assert not ops_of(after, coco.AllReduceOp)
    gathers = ops_of(after, coco.AllGatherOp)
    assert len(gathers) == 3  # the new w, m and v, for their updates
    assert all(
        isinstance(use.operation, coco.UpdateOp)
        for gather in gathers
        for use in gather.result.uses
    )
    sliced = {str(op.operand) for op in ops_of(after, coco.AllSliceOp)}
    assert len(sliced) == 3  # w, m, v: b1*m and b2*v run on the slices
    for op in the_function(after).walk():
        if isinstance(op, ELEMENTWISE_OPS) and op.results[0].type.rank > 0:
            assert op.results[0].type.layout.is_sliced, op


@pytest.mark.parametrize(
    ("dim", "bias", "bias_layout"),
    [
        (0, "32", "replicated"),  # [32] is broadcast along the rows
        (1, "32", "sliced<0>"),
        (0, "1x32", "replicated"),  # size 1 along the sliced dim
        (1, "1x32", "sliced<1>"),
    ],
)
@pytest.mark.parametrize("world", WORLDS)
def test_bias_is_sliced_only_when_not_broadcast(
    dim: int, bias: str, bias_layout: str, world: int
):
    before = cc.parse(BIAS.replace("DIM", str(dim)).replace("BIAS", bias))
    after = cc.Pipeline([Reorder()])(before)
    (add,) = ops_of(after, coco.AddOp)
    assert str(add.rhs.type.layout) == bias_layout
    assert str(add.result.type.layout) == f"sliced<{dim}>"
    (gather,) = ops_of(after, coco.AllGatherOp)
    assert gather.operand is add.result
    assert cc.equivalent(before, after, world).ok


def test_named_all_gather_only():
    module = cc.Pipeline([SplitAllReduce(), Reorder(op="grad_sum_ag")])(
        cc.parse_file(str(EXAMPLE["adam"]))
    )
    names = [label_of(op) for op in module.walk()]
    assert "grad_sum_ag" not in names
    assert "grad_sum_rs" in names


@pytest.mark.parametrize(
    ("example", "options", "message"),
    [
        ("adam", {"op": "grad_sum_rs"}, "it is not a coco.all_gather"),
        ("sequence_parallel", {"op": "gather"}, "nothing to move"),
        ("sgd", {"op": "missing"}, 'no op named "missing"'),
    ],
)
def test_refusal_leaves_the_module_unchanged(example, options, message):
    module = cc.Pipeline([SplitAllReduce()])(cc.parse_file(str(EXAMPLE[example])))
    text = cc.to_text(module)
    with pytest.raises(cc.CocoError, match=message):
        Reorder(**options).apply(cc.make_context(), module)
    assert cc.to_text(module) == text


def test_untargeted_reorder_skips_what_it_cannot_move():
    module = cc.parse_file(str(EXAMPLE["sequence_parallel"]))
    text = cc.to_text(module)
    Reorder().apply(cc.make_context(), module)
    assert cc.to_text(module) == text


def test_f16_norm_is_widened_like_coco_norm():
    """The written-out norm squares and sums in f32 on halves, as coco.norm
    does: squaring in f16 would overflow (inf) for gradients around 100."""
    import numpy as np

    from coconet_ir.interpreter import draw_inputs

    source = """
func.func @f(%g: !coco.tensor<64xf16, local>) -> !coco.tensor<f16, replicated> {
  %s = coco.all_reduce %g reduction = sum : !coco.tensor<64xf16, local> -> !coco.tensor<64xf16, replicated>
  %n = coco.norm %s : (!coco.tensor<64xf16, replicated>) -> !coco.tensor<f16, replicated>
  func.return %n : !coco.tensor<f16, replicated>
}"""  # noqa: E501
    before = cc.parse(source)
    after = cc.Pipeline("coco-split-all-reduce,coco-reorder")(before)
    large = {k: v * 100 for k, v in draw_inputs(before, 4).items()}
    expected = cc.interpret(before, 4, inputs=large)["f.result0"]
    got = cc.interpret(after, 4, inputs=large)["f.result0"]
    assert np.isfinite(expected) and got == expected


# ---------------------------------------------------------------------------
# Values gathered along different dims
# ---------------------------------------------------------------------------

S0 = "!coco.tensor<8x16xf32, sliced<0>>"
S1 = "!coco.tensor<8x16xf32, sliced<1>>"
REP = "!coco.tensor<8x16xf32, replicated>"
SCALAR = "!coco.tensor<f32, replicated>"
VECTOR = "!coco.tensor<16xf32, sliced<0>>"
VECTOR_REP = "!coco.tensor<16xf32, replicated>"

CROSS = f"""
func.func @cross(%a: {S0}, %b: {S1}) -> {REP} {{
  %ag = coco.all_gather %a {{name = "rows"}} : {S0} -> {REP}
  %bg = coco.all_gather %b {{name = "cols"}} : {S1} -> {REP}
  %s = coco.add %ag, %bg {{name = "sum"}} : ({REP}, {REP}) -> {REP}
  func.return %s : {REP}
}}
"""
"""An add of a value gathered along dim 0 and one gathered along dim 1: no
dim of the result lines up with both, so the add cannot run on slices of both."""

CROSS_CHAINS = f"""
func.func @cross(%a: {S0}, %b: {S1}, %c: {SCALAR}) -> {REP} {{
  %ag = coco.all_gather %a {{name = "rows"}} : {S0} -> {REP}
  %bg = coco.all_gather %b {{name = "cols"}} : {S1} -> {REP}
  %e = coco.exp %ag : ({REP}) -> {REP}
  %m = coco.mul %bg, %c : ({REP}, {SCALAR}) -> {REP}
  %s = coco.add %e, %m {{name = "sum"}} : ({REP}, {REP}) -> {REP}
  %r = coco.relu %s : ({REP}) -> {REP}
  func.return %r : {REP}
}}
"""
"""The same after an elementwise op on each gathered value: those move onto
their own slices; the add (and what follows) stays on whole values."""


def the_add(module: ModuleOp) -> coco.AddOp:
    (add,) = ops_of(module, coco.AddOp)
    return add


@pytest.mark.parametrize("world", WORLDS)
def test_values_gathered_along_different_dims_are_added_whole(world: int):
    before = cc.parse(CROSS)
    after = cc.Pipeline([Reorder()])(before)
    assert cc.to_text(after) == cc.to_text(before)
    assert cc.equivalent(before, after, world).ok


ALIGNED = f"""
func.func @aligned(%x: {S1}, %v: {VECTOR}) -> {REP} {{
  %xg = coco.all_gather %x : {S1} -> {REP}
  %vg = coco.all_gather %v : {VECTOR} -> {VECTOR_REP}
  %s = coco.add %xg, %vg : ({REP}, {VECTOR_REP}) -> {REP}
  func.return %s : {REP}
}}
"""
"""Gathered along different dims of the operands, which line up in the result
(broadcasting aligns dims from the right): both cut the result's dim 1."""


@pytest.mark.parametrize("world", WORLDS)
def test_values_gathered_along_dims_that_line_up_are_added_on_slices(world: int):
    before = cc.parse(ALIGNED)
    after = cc.Pipeline([Reorder()])(before)
    add = the_add(after)
    assert str(add.result.type.layout) == "sliced<1>"
    assert list(add.operands) == list(the_function(after).args)
    (gather,) = ops_of(after, coco.AllGatherOp)
    assert gather.operand is add.result
    assert cc.equivalent(before, after, world).ok


@pytest.mark.parametrize("world", WORLDS)
def test_ops_before_a_combination_of_different_dims_still_move(world: int):
    before = cc.parse(CROSS_CHAINS)
    after = cc.Pipeline([Reorder()])(before)
    (exp,) = ops_of(after, coco.ExpOp)
    (mul,) = ops_of(after, coco.MulOp)
    assert str(exp.result.type.layout) == "sliced<0>"
    assert str(mul.result.type.layout) == "sliced<1>"
    add = the_add(after)
    assert add.result.type.layout.is_replicated
    for operand, moved in ((add.lhs, exp), (add.rhs, mul)):
        assert isinstance(operand.owner, coco.AllGatherOp)
        assert operand.owner.operand is moved.result
    (relu,) = ops_of(after, coco.ReluOp)
    assert relu.operand is add.result and relu.result.type.layout.is_replicated
    assert cc.equivalent(before, after, world).ok


@pytest.mark.parametrize(("target", "dim"), [("rows", 0), ("cols", 1)])
@pytest.mark.parametrize("world", WORLDS)
def test_targeted_reorder_cuts_the_value_gathered_along_the_other_dim(
    target: str, dim: int, world: int
):
    """Only the named all_gather is reordered: the other gathered value is a
    replicated operand like any other, cut by all_slice along `dim`."""
    before = cc.parse(CROSS)
    after = cc.Pipeline([Reorder(op=target)])(before)
    add = the_add(after)
    assert str(add.result.type.layout) == f"sliced<{dim}>"
    sliced, cut = (add.lhs, add.rhs) if dim == 0 else (add.rhs, add.lhs)
    assert sliced is the_function(after).args[dim]  # %a: sliced<0>, %b: sliced<1>
    assert isinstance(cut.owner, coco.AllSliceOp) and cut.owner.dim.value.data == dim
    kept = cut.owner.operand.owner
    assert isinstance(kept, coco.AllGatherOp)
    assert label_of(kept) == ("cols" if target == "rows" else "rows")
    (use,) = add.result.uses
    assert isinstance(use.operation, coco.AllGatherOp)
    assert cc.equivalent(before, after, world).ok


def test_targeting_both_gathers_of_a_combination_of_different_dims_refuses():
    module = cc.parse(CROSS.replace('"cols"', '"rows"'))
    text = cc.to_text(module)
    with pytest.raises(cc.CocoError, match="nothing to move"):
        Reorder(op="rows").apply(cc.make_context(), module)
    assert cc.to_text(module) == text


@pytest.mark.parametrize("cut", [0, 1])
@pytest.mark.parametrize("world", WORLDS)
def test_a_layer_norm_after_an_all_gather_moves_onto_slices(cut: int, world: int):
    """Its keep-dims row statistics keep their dims on slices: over the
    other dim a sliced reduction (rows of the rank's rows), over the cut
    dim a partial and its all_reduce."""

    @cc.function
    def normed(
        x: cc.tensor([16, 64], cc.f32, cc.sliced(cut)),
        w: cc.tensor([64], cc.f32, cc.replicated),
        b: cc.tensor([64], cc.f32, cc.replicated),
    ):
        return cc.layer_norm(cc.all_gather(x), w, b)

    before = cc.module(normed)
    after = cc.Pipeline("coco-reorder")(before)
    reductions = ops_of(after, coco.ReduceOp)
    assert len(reductions) == 2 and all(op.keeps_dims for op in reductions)
    layouts = {coco.tensor_type(op.result).layout for op in reductions}
    assert layouts == {coco.LayoutAttr.sliced(0) if cut == 0 else coco.LOCAL}
    assert len(ops_of(after, coco.AllReduceOp)) == 2 * cut
    result = cc.equivalent(before, after, world)
    assert result.ok, result.first_difference
