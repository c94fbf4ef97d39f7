"""canonicalize and cse on coco: equivalence on every example (2, 4 and 8
ranks), canonicalize undoing coco-split-all-reduce, the patterns the op traits
give, and what xDSL's cse merges."""

from pathlib import Path

import pytest
from helpers import EXAMPLES_DIR
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.traits import HasCanonicalizationPatternsTrait

import coconet_ir as cc
from coconet_ir.dialects import coco
from coconet_ir.dialects.coco import canonicalization as canon

EXAMPLES = sorted(EXAMPLES_DIR.glob("*.mlir"))

L = "!coco.tensor<8x16xf32, local>"
R = "!coco.tensor<8x16xf32, replicated>"


def count(module: ModuleOp, op_type: type) -> int:
    return sum(isinstance(op, op_type) for op in module.walk())


@pytest.mark.parametrize("pipeline", ["canonicalize", "cse"])
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("world", [2, 4, 8])
def test_examples_stay_equivalent(pipeline: str, path: Path, world: int):
    before = cc.parse_file(str(path))
    after = cc.Pipeline(pipeline)(before)
    result = cc.equivalent(before, after, world)
    assert result.ok, result.first_difference


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_canonicalize_undoes_split(path: Path):
    """The canonical form of reduce_scatter + all_gather is the all_reduce."""
    before = cc.parse_file(str(path))
    canonical = cc.Pipeline("canonicalize")(before)
    round_trip = cc.Pipeline("coco-split-all-reduce,canonicalize")(before)
    assert round_trip.is_structurally_equivalent(canonical)


@pytest.mark.parametrize(
    ("op_type", "patterns"),
    [
        (coco.AllSliceOp, {canon.SliceOfGather}),
        (coco.AllGatherOp, {canon.GatherOfSlice, canon.GatherOfScatter}),
        (coco.AllReduceOp, {canon.ReplicatedIdempotentAllReduce}),
        (coco.ConvertOp, {canon.SameTypeConvert}),
        (coco.TransposeOp, {canon.ComposeTransposes}),
        (coco.ReshapeOp, {canon.ComposeReshapes}),
    ],
)
def test_ops_carry_their_patterns(op_type: type, patterns: set[type]):
    traits = op_type.get_traits_of_type(HasCanonicalizationPatternsTrait)
    found = {type(p) for t in traits for p in t.get_patterns(op_type)}
    assert found == patterns


@pytest.mark.parametrize(
    ("rs_name", "ag_name", "merged"),
    [
        ("avg_rs", "avg_ag", "avg"),
        ("avg_rs", "other", "other"),
        (None, "g", "g"),
        ("avg_rs", None, None),
    ],
)
def test_merged_all_reduce_name(rs_name, ag_name, merged):
    module = cc.parse(f"""
func.func @f(%g: {L}) -> {R} {{
  %rs = coco.reduce_scatter %g reduction = prod dim = 0 : {L} -> !coco.tensor<8x16xf32, sliced<0>>
  %ag = coco.all_gather %rs : !coco.tensor<8x16xf32, sliced<0>> -> {R}
  func.return %ag : {R}
}}""")  # noqa: E501
    for op, name in zip(
        (o for o in module.walk() if isinstance(o, coco.CollectiveOp)),
        (rs_name, ag_name),
    ):
        if name is not None:
            op.attributes["name"] = StringAttr(name)
    after = cc.Pipeline("canonicalize")(module)
    (reduce,) = (op for op in after.walk() if isinstance(op, coco.AllReduceOp))
    assert reduce.reduction.data == coco.ReductionKind.PROD
    name = reduce.attributes.get("name")
    assert (None if name is None else name.data) == merged
    assert count(after, coco.ReduceScatterOp) == count(after, coco.AllGatherOp) == 0


@pytest.mark.parametrize("world", [2, 4, 8])
def test_cse_merges_compute_and_collectives_soundly(world: int):
    """Collectives declare no memory effect (SPMD): cse merges two identical
    all_reduces and xDSL's dce drops an unused one; the result computes the
    same on every world size."""
    module = cc.parse(f"""
func.func @f(%g: {L}) -> ({R}, {L}) {{
  %a = coco.all_reduce %g reduction = sum : {L} -> {R}
  %b = coco.all_reduce %g reduction = sum : {L} -> {R}
  %unused = coco.all_reduce %g reduction = max : {L} -> {R}
  %c = coco.exp %g : ({L}) -> {L}
  %d = coco.exp %g : ({L}) -> {L}
  %s = coco.add %a, %b : ({R}, {R}) -> {R}
  %t = coco.add %c, %d : ({L}, {L}) -> {L}
  func.return %s, %t : {R}, {L}
}}""")
    after = cc.Pipeline("cse")(module)
    assert count(after, coco.AllReduceOp) == 1
    assert count(after, coco.ExpOp) == 1
    assert cc.equivalent(module, after, world)
    assert count(cc.Pipeline("dce")(module), coco.AllReduceOp) == 2
