"""Optimization remarks (docs/cli.md, "Remarks"): what a pass did, did not do
and why, located at the op, shown only when asked for, filtered by pass."""

from __future__ import annotations

import warnings

import pytest
from helpers import EXAMPLES_DIR

import coconet_ir as cc
from coconet_ir.diagnostics import Remark, RemarkFilter, RemarkKind, remark

GEMV = EXAMPLES_DIR / "gemv_allreduce.mlir"


def remarks_of(passes: str, accept: RemarkFilter = RemarkFilter(all=".*")):
    found: list[Remark] = []
    with warnings.catch_warnings(), cc.remarks_to(found.append, accept):
        warnings.simplefilter("ignore", cc.CocoWarning)
        cc.Pipeline(passes)(cc.parse_file(str(GEMV)))
    return found


def test_the_fused_gemv_is_a_region_and_one_kernel():
    found = remarks_of("coco-optimize{world=4},convert-coco-to-gpu{world=4}")
    assert [(r.kind, r.category, r.name) for r in found] == [
        (RemarkKind.PASSED, "coco-fuse-collective", "FusedCollective"),
        (RemarkKind.PASSED, "convert-coco-to-gpu", "OneKernel"),
    ]
    fused, kernel = found
    assert fused.location == f"{GEMV}:14:3" and fused.function == "gemv_allreduce"
    assert kernel.message.startswith("lowered as one kernel: a tile kernel")
    assert str(kernel) == (
        f"{GEMV}:14:3: remark: [Passed] OneKernel | Category:convert-coco-to-gpu"
        ' | Function=gemv_allreduce | Remark="lowered as one kernel: a tile kernel '
        '(docs/fused-operators.md)"'
    )


def test_a_fusion_lowered_op_by_op_is_a_missed_remark_naming_why():
    found = remarks_of(
        "coco-split-all-reduce,coco-reorder,coco-fuse,convert-coco-to-gpu{world=4}"
    )
    (missed,) = [r for r in found if r.kind == RemarkKind.MISSED]
    assert missed.name == "OneKernel" and missed.location == f"{GEMV}:15:3"
    assert missed.message.startswith("the fused collective kernel refuses it: it cuts")
    assert str(missed).endswith(f'| Reason="{missed.message}"')


@pytest.mark.parametrize(
    ("accept", "names"),
    [
        (RemarkFilter(all="coco-.*"), ["FusedCollective"]),
        (RemarkFilter(passed="convert-coco-to-gpu"), ["OneKernel"]),
        (RemarkFilter(missed=".*", analysis=".*"), []),
        (RemarkFilter(all="coco"), []),  # matched whole, as mlir-opt's
        (RemarkFilter(), []),
    ],
)
def test_filters_match_the_whole_pass_name_per_kind(accept, names):
    found = remarks_of("coco-optimize{world=4},convert-coco-to-gpu{world=4}", accept)
    assert [r.name for r in found] == names


def test_without_a_listener_a_remark_is_not_even_worded():
    def wording() -> str:
        raise AssertionError("worded with no one listening")

    remark(RemarkKind.ANALYSIS, "coco-test", "Nothing", wording)
    found: list[Remark] = []
    with cc.remarks_to(found.append):
        remark(RemarkKind.ANALYSIS, "coco-test", "Something", lambda: "said")
    assert [(r.name, r.message, r.location, r.function) for r in found] == [
        ("Something", "said", None, None)
    ]
