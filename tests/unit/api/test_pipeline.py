"""cc.Pipeline: built from the -p syntax or from pass instances; applies in place
or to a copy; bad specs are CocoErrors."""

import pytest
from helpers import EXAMPLES_DIR

import coconet_ir as cc
from coconet_ir.dialects import coco
from coconet_ir.passes.reorder import Reorder
from coconet_ir.passes.split_all_reduce import SplitAllReduce

SGD = EXAMPLES_DIR / "sgd.mlir"


def test_string_and_instances_give_the_same_program():
    module = cc.parse_file(str(SGD))
    by_text = cc.Pipeline("coco-split-all-reduce{dim=0},coco-reorder")(module)
    by_instances = cc.Pipeline([SplitAllReduce(dim=0), Reorder()])(module)
    mixed = cc.Pipeline([SplitAllReduce(dim=0), "coco-reorder"])(module)
    assert cc.to_text(by_text) == cc.to_text(by_instances) == cc.to_text(mixed)
    assert str(cc.Pipeline([SplitAllReduce(dim=0), Reorder()])) == (
        "coco-split-all-reduce{dim=0},coco-reorder"
    )


def test_call_copies_and_apply_changes_in_place():
    module = cc.parse_file(str(SGD))
    text = cc.to_text(module)
    pipeline = cc.Pipeline("coco-split-all-reduce")
    copy = pipeline(module)
    assert cc.to_text(module) == text
    assert pipeline.apply(module) is module
    assert cc.to_text(module) == cc.to_text(copy)
    assert any(isinstance(op, coco.ReduceScatterOp) for op in module.walk())


def test_xdsl_passes_are_available():
    module = cc.parse_file(str(SGD))
    cc.Pipeline("coco-split-all-reduce,canonicalize,cse")(module)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("coco-splt-all-reduce", "did you mean 'coco-split-all-reduce'"),
        ("coco-split-all-reduce{dim=x}", "bad options for pass"),
        ("cse{", "bad pass pipeline"),
    ],
)
def test_bad_specs(spec, message):
    with pytest.raises(cc.CocoError, match=message):
        cc.Pipeline(spec)
