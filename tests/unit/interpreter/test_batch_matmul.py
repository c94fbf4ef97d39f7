"""`coco.batch_matmul` in the interpreter (docs/dialect.md): every layout row
equals numpy's grouped product of the global operands, for floats, halves
and wrapping integers; the DSL's `cc.batch_matmul` builds the textual op."""

from __future__ import annotations

import numpy as np
import pytest

import coconet_ir as cc

PROGRAM = """
func.func @f(%a: !coco.tensor<{a}x{t}, {la}>, %b: !coco.tensor<{b}x{t}, {lb}>) -> !coco.tensor<{o}x{t}, {lo}> {{
  %c = coco.batch_matmul %a, %b : (!coco.tensor<{a}x{t}, {la}>, !coco.tensor<{b}x{t}, {lb}>) -> !coco.tensor<{o}x{t}, {lo}>
  func.return %c : !coco.tensor<{o}x{t}, {lo}>
}}
"""  # noqa: E501

CASES = [
    ("8x16x32", "8x32x24", "8x16x24", "replicated", "replicated", "replicated"),
    ("8x16x32", "8x32x24", "8x16x24", "sliced<0>", "sliced<0>", "sliced<0>"),
    ("8x16x32", "8x32x24", "8x16x24", "sliced<1>", "replicated", "sliced<1>"),
    ("8x2x8x32", "8x32x24", "8x2x8x24", "sliced<0>", "sliced<0>", "sliced<0>"),
    ("8x32", "8x32x24", "8x24", "sliced<0>", "sliced<0>", "sliced<0>"),
]


def program(case, element: str):
    a, b, o, la, lb, lo = case
    return cc.parse(PROGRAM.format(a=a, b=b, o=o, la=la, lb=lb, lo=lo, t=element))


@pytest.mark.parametrize("world", [2, 4, 8])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[3]}x{c[4]}")
@pytest.mark.parametrize("element", ["f32", "bf16", "i32"])
def test_each_layout_is_the_grouped_product(world, case, element):
    run = cc.interpret(program(case, element), world, seed=world)
    a, b = run.inputs["f.arg0"], run.inputs["f.arg1"]
    got = run["f.result0"]
    if element == "i32":  # wraps as int32 arithmetic does
        want = np.einsum("g...k,gkm->g...m", a.astype(np.int64), b.astype(np.int64))
        np.testing.assert_array_equal(got, want.astype(np.int32))
        return
    want = np.einsum("g...k,gkm->g...m", a.astype(np.float64), b.astype(np.float64))
    tolerance = 2e-2 if element == "bf16" else 1e-5
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tolerance, atol=1e-3)


def test_local_operands_multiply_rank_by_rank():
    case = ("8x16x32", "8x32x24", "8x16x24", "local", "replicated", "local")
    run = cc.interpret(program(case, "f32"), 4, seed=1)
    a, b = run.inputs["f.arg0"], run.inputs["f.arg1"]  # a: one block per rank
    want = np.einsum("rgik,gkm->rgim", a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(run["f.result0"], want, rtol=1e-5)


def test_the_dsl_builds_the_op():
    @cc.function
    def f(
        a: cc.tensor([8, 16, 32], cc.f32, cc.sliced(0)),
        b: cc.tensor([8, 32, 24], cc.f32, cc.sliced(0)),
    ):
        return cc.batch_matmul(a, b)

    text = PROGRAM.format(
        a="8x16x32",
        b="8x32x24",
        o="8x16x24",
        la="sliced<0>",
        lb="sliced<0>",
        lo="sliced<0>",
        t="f32",
    )
    assert cc.module(f).is_structurally_equivalent(cc.parse(text))
