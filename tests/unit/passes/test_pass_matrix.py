"""Every pass alone, and the schedules built from them, on every example: the
program after computes what the program before computed, on 2, 4 and 8 ranks
(docs/interpreter.md, "Equivalence"), and still verifies."""

import pytest
from helpers import EXAMPLES_DIR

import coconet_ir as cc
from coconet_ir.universe import PASSES

EXAMPLES = sorted(EXAMPLES_DIR.glob("*.mlir"))

PIPELINES = [
    # each coco pass alone; coco-grad adds a backward rather than rewriting
    # the program (its oracle: finite differences, test_pass_grad.py)
    *(name for name in PASSES if name != "coco-grad"),
    "canonicalize",
    "cse",
    "coco-split-all-reduce,coco-reorder",
    "coco-split-all-reduce,coco-reorder,coco-slice-state",
    "coco-split-all-reduce,coco-reorder,coco-fuse",
    "coco-split-all-reduce,coco-reorder,coco-fuse-send",
    "coco-split-all-reduce,coco-reorder,coco-fuse,coco-overlap{chunks=2}",
    "coco-overlap{chunks=2}",
    "coco-overlap{per_peer=true}",
    "coco-overlap{per_peer=true},coco-fuse,coco-split-all-reduce,coco-reorder,coco-dce,canonicalize,cse",
    "coco-optimize{chunks=2}",
    "coco-optimize{overlap_mode=chunks}",
    "coco-optimize{overlap_mode=per_peer}",
    "coco-split-all-reduce,canonicalize",
]


@pytest.fixture(scope="module", params=EXAMPLES, ids=lambda p: p.stem)
def program(request):
    return cc.parse_file(str(request.param))


@pytest.mark.parametrize("spec", PIPELINES)
def test_pipeline_preserves_semantics(program, spec: str):
    after = cc.Pipeline(spec)(program)
    cc.verify(after)
    for world in (2, 4, 8):
        result = cc.equivalent(program, after, world)
        assert result.ok, f"{spec} on {world} ranks: {result.first_difference}"
