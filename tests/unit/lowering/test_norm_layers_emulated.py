"""The norm-layer ops lowered and emulated (docs/gpu/device.md, "Transpose
and reshape"): keep-dims reductions, transposes, reshapes and splat
constants on every layout, and LayerNorm / RMSNorm of a value cut along the
normalized dim (two all_reduces of partial row sums), compute what the
interpreter computes on 2, 4 and 8 ranks, as written and after
coco-optimize."""

from __future__ import annotations

import pytest
from norm_programs import norm_program, ops_program

import coconet_ir as cc
from coconet_ir.emulate import compare_runs, emulate


def check(function: cc.Function, world: int, passes: str = "") -> None:
    module = cc.module(function)
    reference = cc.interpret(module, world, seed=world)
    emulated = emulate(module, world, passes=passes, seed=world)
    verdict = compare_runs(reference, emulated, module)
    assert verdict, f"N={world} after {passes!r}: {verdict.first_difference}"


@pytest.mark.parametrize("world", [2, 4, 8])
def test_the_ops_match_the_interpreter(world: int) -> None:
    check(ops_program(), world)


@pytest.mark.parametrize("world", [2, 4, 8])
def test_norms_over_the_cut_dim_match_the_interpreter(world: int) -> None:
    check(norm_program(cc.sliced(1), "bf16"), world, "coco-optimize")
