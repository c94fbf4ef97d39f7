"""Holes a mutation run found in the pass tests (issue 25): a bucket of
non-sum all_reduces must keep their reduction, and coco-reorder must not move
a replicated producer that has a use outside the slice set. Each test here
failed with the bug it names injected."""

from __future__ import annotations

import pytest
from helpers import ROOT, ops_of

import coconet_ir as cc
from coconet_ir.dialects import coco

REDUCTIONS = ["max", "min", "prod"]


def T(dims: str, layout: str) -> str:
    return f"!coco.tensor<{dims}xf32, {layout}>"


def reductions_alone(reduction: str, other: str | None = None) -> str:
    """Two all_reduces whose results are returned (DDP's bucket: concat ->
    all_reduce -> split); the second one `other`'s reduction when given."""
    second = other or reduction
    a, b = T("16", "local"), T("8x4", "local")
    ra, rb = T("16", "replicated"), T("8x4", "replicated")
    return f"""func.func @f(%a: {a}, %b: {b}) -> ({ra}, {rb}) {{
  %x = coco.all_reduce %a reduction = {reduction} : {a} -> {ra}
  %y = coco.all_reduce %b reduction = {second} : {b} -> {rb}
  func.return %x, %y : {ra}, {rb}
}}
"""


def reductions_with_chains(reduction: str) -> str:
    """Two SGD-like parameters `w - lr * allreduce(g)`: the whole chain is
    bucketed (one flat all_reduce, the chain once on the flat bucket)."""
    s = "!coco.tensor<f32, replicated>"
    lines, args = [], []
    for i, dims in enumerate(["16", "8"]):
        g, t = T(dims, "local"), T(dims, "replicated")
        args += [f"%g{i}: {g}", f"%w{i}: {t}"]
        lines += [
            f"%s{i} = coco.all_reduce %g{i} reduction = {reduction} : {g} -> {t}",
            f"%d{i} = coco.mul %lr, %s{i} : ({s}, {t}) -> {t}",
            f"%n{i} = coco.sub %w{i}, %d{i} : ({t}, {t}) -> {t}",
            f"coco.update %w{i}, %n{i} : {t}",
        ]
    body = "\n  ".join(lines)
    signature = ", ".join([*args, f"%lr: {s}"])
    return f"func.func @step({signature}) {{\n  {body}\n  func.return\n}}\n"


def all_reduces(module) -> list[coco.AllReduceOp]:
    return ops_of(module, coco.AllReduceOp)


def assert_equivalent_on_2_4_8(before, after) -> None:
    for world in (2, 4, 8):
        verdict = cc.equivalent(before, after, world, seed=world)
        assert verdict, (world, verdict.first_difference)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("program", [reductions_alone, reductions_with_chains])
def test_a_bucket_keeps_a_non_sum_reduction(program, reduction: str) -> None:
    """Bucketing two `max` (`min`, `prod`) all_reduces makes one bucket whose
    all_reduce is still `max`, and the program computes what it did."""
    before = cc.parse(program(reduction))
    after = cc.Pipeline("coco-bucket")(before)
    (bucket,) = all_reduces(after)
    assert bucket.attributes["name"].data == "bucket0"
    assert bucket.reduction.data.value == reduction
    assert_equivalent_on_2_4_8(before, after)


def test_different_reductions_do_not_share_a_bucket() -> None:
    """A `max` and a `min` all_reduce are two buckets of one (left alone)."""
    before = cc.parse(reductions_alone("max", "min"))
    after = cc.Pipeline("coco-bucket")(before)
    assert sorted(r.reduction.data.value for r in all_reduces(after)) == ["max", "min"]
    assert not ops_of(after, coco.ConcatOp)
    assert_equivalent_on_2_4_8(before, after)


# ----------------------------------------------------------------------------
# coco-reorder: a replicated producer with a use outside the slice set stays
# ----------------------------------------------------------------------------

OUTSIDE_USE = ROOT / "tests/filecheck/passes/coco-reorder-outside-use.mlir"
"""`@returned` and `@updated`: `%bm = b1 * m` feeds the slice set and is also
returned / stored whole; `@pulled`: only the slice set reads it."""


def function_named(module, name: str):
    return next(op for op in module.ops if op.sym_name.data == name)


@pytest.mark.parametrize(
    ("entry", "pulled"), [("returned", False), ("updated", False), ("pulled", True)]
)
def test_reorder_keeps_a_producer_used_outside_the_slice_set(
    entry: str, pulled: bool
) -> None:
    """`b1 * m` moves onto slices only when the slice set is its only user;
    otherwise it stays replicated, the slice set reads its all_slice, and the
    one all_gather left is the slice set's result's. Both compute what the
    program did on 2, 4 and 8 ranks."""
    before = cc.parse_file(str(OUTSIDE_USE))
    after = cc.Pipeline("coco-reorder")(before)
    function = function_named(after, entry)
    (mul,) = ops_of(function, coco.MulOp)
    layout = coco.tensor_type(mul.result).layout
    assert layout.is_sliced if pulled else layout.is_replicated
    assert len(ops_of(function, coco.AllGatherOp)) == 1
    (cut,) = ops_of(function, coco.AllSliceOp)
    assert (cut.operand.name_hint == "m") if pulled else (cut.operand is mul.result)
    for world in (2, 4, 8):
        verdict = cc.equivalent(before, after, world, seed=world, entry=entry)
        assert verdict, (world, verdict.first_difference)


# ----------------------------------------------------------------------------
# coco-split-all-reduce keeps a non-sum reduction
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_split_all_reduce_keeps_a_non_sum_reduction(reduction: str) -> None:
    """`all_reduce max` becomes `reduce_scatter max` + `all_gather`, and the
    program computes what it did on 2, 4 and 8 ranks."""
    g, r = T("16x4", "local"), T("16x4", "replicated")
    before = cc.parse(
        f"""func.func @f(%g: {g}) -> {r} {{
  %s = coco.all_reduce %g reduction = {reduction} : {g} -> {r}
  func.return %s : {r}
}}"""
    )
    after = cc.Pipeline("coco-split-all-reduce")(before)
    (scatter,) = ops_of(after, coco.ReduceScatterOp)
    assert scatter.reduction.data.value == reduction
    assert len(ops_of(after, coco.AllGatherOp)) == 1
    assert_equivalent_on_2_4_8(before, after)


# ----------------------------------------------------------------------------
# coco-slice-state: a bucket whose parameters' dim 0 the world does not divide
# ----------------------------------------------------------------------------


def test_slice_state_keeps_a_bucket_replicated_when_dim_0_does_not_divide() -> None:
    """Two Adam parameters of 12x2 on 8 ranks: 24 elements each, so they
    share a bucket, but 8 does not divide dim 0 (12), so coco-slice-state
    leaves the bucket's state replicated; 16x2 parameters get theirs sliced.
    Both steps compute what the written one does."""
    from test_pass_bucket import step_program

    for dims, sliced in (([12, 2], False), ([16, 2], True)):
        before = cc.parse(step_program("adam", [dims, dims]))
        after = cc.Pipeline("coco-optimize{world=8}")(before)
        assert ops_of(after, coco.ConcatOp), "not bucketed"
        function = next(iter(after.ops))
        layouts = {a.name_hint: a.type.layout for a in function.body.block.args}
        assert layouts["m0"].is_sliced is sliced, dims
        assert layouts["v1"].is_sliced is sliced, dims
        verdict = cc.equivalent(before, after, 8, seed=8)
        assert verdict, (dims, verdict.first_difference)
