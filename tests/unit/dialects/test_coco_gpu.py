"""coco_gpu.view and the NCCL collectives' groups: round trips, and the
verifier's refusals."""

from __future__ import annotations

import pytest

import coconet_ir as cc
from coconet_ir.diagnostics import CocoError

VIEW = """
func.func @f(%a: memref<4x8xf32>) {{
  %v = coco_gpu.view %a[{offset}] : memref<4x8xf32> to {result}
  func.return
}}
"""


def test_view_round_trips():
    text = VIEW.format(offset=16, result="memref<2x8xf32>")
    module = cc.parse(text)
    cc.verify(module)
    assert cc.to_text(cc.parse(cc.to_text(module))) == cc.to_text(module)
    assert "coco_gpu.view %a[16] : memref<4x8xf32> to memref<2x8xf32>" in cc.to_text(
        module
    )


@pytest.mark.parametrize(
    "offset, result, message",
    [
        (24, "memref<2x8xf32>", r"elements \[24, 40\) are not within the 32"),
        (0, "memref<2x8xf16>", "element type"),
        (0, "memref<2x8xf32, strided<[8, 1]>>", "identity-layout"),
    ],
)
def test_view_refusals(offset: int, result: str, message: str):
    with pytest.raises(CocoError, match=message):
        cc.verify(cc.parse(VIEW.format(offset=offset, result=result)))


NCCL = """
func.func @f(%a: memref<4xf32>) {{
  {op}
  func.return
}}
"""


def test_a_collective_on_a_sub_communicator_round_trips():
    text = NCCL.format(
        op='coco_gpu.nccl_all_reduce %a, %a reduction = sum group = "across" : '
        "memref<4xf32>, memref<4xf32>"
    )
    module = cc.parse(text)
    cc.verify(module)
    assert 'reduction = sum group = "across"' in cc.to_text(module)


@pytest.mark.parametrize(
    "op, message",
    [
        (
            'coco_gpu.nccl_all_gather %a, %a group = "rack" : memref<4xf32>, '
            "memref<4xf32>",
            "group must be one of node, across, got 'rack'",
        ),
        (
            'coco_gpu.nccl_all_to_all %a, %a group = "node" : memref<4xf32>, '
            "memref<4xf32>",
            "runs on the stage's communicator only",
        ),
    ],
)
def test_a_collective_group_is_node_or_across_where_one_may_be(op: str, message: str):
    with pytest.raises(CocoError, match=message):
        cc.verify(cc.parse(NCCL.format(op=op)))
