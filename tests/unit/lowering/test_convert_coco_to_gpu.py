"""convert-coco-to-gpu on the examples: the output verifies, re-parses and
round-trips; elementwise kernels use upstream ops only."""

from __future__ import annotations

import pytest
from helpers import EXAMPLES_DIR
from xdsl.dialects import gpu

import coconet_ir as cc

EXAMPLES = sorted(p.stem for p in EXAMPLES_DIR.glob("*.mlir"))
UPSTREAM = ("arith.", "math.", "memref.", "scf.", "gpu.")


def lower(name: str, world: int, optimize: bool = False):
    module = cc.parse_file(str(EXAMPLES_DIR / f"{name}.mlir"))
    pipeline = f"convert-coco-to-gpu{{world={world}}}"
    if optimize:
        pipeline = f"coco-optimize,{pipeline}"
    return cc.Pipeline(pipeline)(module)


def test_sgd_is_all_reduce_then_two_kernels():
    module = lower("sgd", 4)
    cc.verify(module)
    text = cc.to_text(module)
    assert "coco_gpu.nccl_all_reduce" in text
    assert "@kernels::@sgd_mul_0" in text and "@kernels::@sgd_sub_0" in text
    assert "memref.copy" not in text  # the sub writes %w in place
    assert not [op for op in module.walk() if op.name.startswith("coco.")]


def test_sgd_round_trips():
    text = cc.to_text(lower("sgd", 2))
    assert cc.to_text(cc.parse(text)) == text


@pytest.mark.parametrize("name", ["sgd"])
def test_elementwise_kernels_are_upstream_only(name: str):
    module = lower(name, 4)
    for kernel in module.walk():
        if isinstance(kernel, gpu.FuncOp):
            for op in kernel.walk():
                if op is not kernel:
                    assert op.name.startswith(UPSTREAM), op.name
