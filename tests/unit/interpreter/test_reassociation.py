"""The oracle knows reassociation (docs/interpreter.md, "Equivalence"): a K-long
matmul split across ranks (Megatron's row-parallel layer: local partial
products, then an `all_reduce`) is equivalent to the plain matmul at K = 4096 on
2, 4 and 8 ranks, because both run promoted (f32 in f64); wrong rewrites, down
to one input term perturbed by 1e-5, are still caught. `compare_outputs`
accepts real-f32 results summed in another order (sequentially, chunked by
rank) within `reduction_tolerance`, and rejects wrong ones."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers import T

from coconet_ir.interpreter import (
    compare_outputs,
    draw_inputs,
    equivalent,
    interpret,
    matmul_magnitude,
    reduction_tolerance,
)
from coconet_ir.ir import parse

WORLDS = [2, 4, 8]
M, K, N = 64, 4096, 64


def types(element: str = "f32") -> dict[str, str]:
    return {
        "a": T(f"{M}x{K}x{element}"),
        "b": T(f"{K}x{N}x{element}"),
        "c": T(f"{M}x{N}x{element}"),
        "a_k": T(f"{M}x{K}x{element}", "sliced<1>"),
        "b_k": T(f"{K}x{N}x{element}", "sliced<0>"),
        "b_n": T(f"{K}x{N}x{element}", "sliced<1>"),
        "c_n": T(f"{M}x{N}x{element}", "sliced<1>"),
        "partial": T(f"{M}x{N}x{element}", "local"),
        "scalar": T(element),
        "mask": T(f"{M}x{K}xi1"),
    }


def plain(element: str = "f32") -> str:
    """`a @ b`, both replicated."""
    t = types(element)
    return f"""
func.func @f(%a: {t["a"]}, %b: {t["b"]}) -> {t["c"]} {{
  %c = coco.matmul %a, %b : ({t["a"]}, {t["b"]}) -> {t["c"]}
  func.return %c : {t["c"]}
}}"""


def row_parallel(element: str = "f32", combine: str | None = None) -> str:
    """K sliced across ranks: local partial products, then `combine` (an
    all_reduce sum unless told otherwise) to a replicated result."""
    t = types(element)
    combine = combine or "coco.all_reduce %p reduction = sum"
    return f"""
func.func @f(%a: {t["a_k"]}, %b: {t["b_k"]}) -> {t["c"]} {{
  %p = coco.matmul %a, %b : ({t["a_k"]}, {t["b_k"]}) -> {t["partial"]}
  %c = {combine} : {t["partial"]} -> {t["c"]}
  func.return %c : {t["c"]}
}}"""


def column_parallel_summed_again() -> str:
    """A correct column-parallel matmul, gathered, then all_reduced as if it
    were a partial sum (N times the result)."""
    t = types()
    return f"""
func.func @f(%a: {t["a"]}, %b: {t["b_n"]}) -> {t["c"]} {{
  %p = coco.matmul %a, %b : ({t["a"]}, {t["b_n"]}) -> {t["c_n"]}
  %g = coco.all_gather %p : {t["c_n"]} -> {t["c"]}
  %c = coco.all_reduce %g reduction = sum : {t["c"]} -> {t["c"]}
  func.return %c : {t["c"]}
}}"""


def one_term_changed(change: str) -> str:
    """`a @ b` with one input term changed: the largest element of `a` (one
    term of every element of its row of the result) becomes `change` applied
    to it (`%x`)."""
    t = types()
    a, s, mask = t["a"], t["scalar"], t["mask"]
    return f"""
func.func @f(%a: {a}, %b: {t["b"]}) -> {t["c"]} {{
  %m = coco.reduce %a kind = max dims = [0, 1] : ({a}) -> {s}
  %e = coco.cmp %m, %a predicate = eq : ({s}, {a}) -> {mask}
  {change}
  %a2 = coco.select %e, %y, %a : ({mask}, {a}, {a}) -> {a}
  %c = coco.matmul %a2, %b : ({a}, {t["b"]}) -> {t["c"]}
  func.return %c : {t["c"]}
}}"""


def perturbed(delta: float) -> str:
    t = types()
    a, s = t["a"], t["scalar"]
    return one_term_changed(
        f"%d = coco.constant {delta:e} : {s}\n"
        f"  %y = coco.add %a, %d : ({a}, {s}) -> {a}"
    )


def dropped() -> str:
    t = types()
    a, s = t["a"], t["scalar"]
    return one_term_changed(
        f"%z = coco.constant 0.0 : {s}\n  %y = coco.mul %a, %z : ({a}, {s}) -> {a}"
    )


# ---------------------------------------------------------------------------
# equivalent(): promoted runs
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("world", WORLDS)
def test_row_parallel_matmul_is_equivalent_to_the_plain_one(world):
    comparison = equivalent(parse(plain()), parse(row_parallel()), world)
    assert comparison, comparison.first_difference
    backwards = equivalent(parse(row_parallel()), parse(plain()), world)
    assert backwards, backwards.first_difference


@pytest.mark.parametrize("element", ["f16", "bf16"])
def test_row_parallel_matmul_on_halves_is_equivalent(element):
    # Partial sums rounded to the half type on each rank, then summed: within
    # the half's tolerance of the output's largest magnitude.
    comparison = equivalent(parse(plain(element)), parse(row_parallel(element)), 4)
    assert comparison, comparison.first_difference


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize(
    "wrong",
    [
        pytest.param(
            row_parallel(combine="coco.all_reduce %p reduction = max"), id="max"
        ),
        pytest.param(row_parallel(combine="coco.broadcast %p root = 0"), id="rank0"),
        pytest.param(column_parallel_summed_again(), id="summed-twice"),
        pytest.param(dropped(), id="dropped-term"),
        pytest.param(perturbed(1e-3), id="perturbed-1e-3"),
        pytest.param(perturbed(1e-5), id="perturbed-1e-5"),
    ],
)
def test_a_wrong_rewrite_of_the_matmul_is_caught(wrong, world):
    for a, b in [(plain(), wrong), (row_parallel(), wrong)]:
        comparison = equivalent(parse(a), parse(b), world)
        assert not comparison
        assert comparison.first_difference.key == "f.result0"


def test_promoted_runs_hold_f32_as_f64_and_plain_runs_do_not():
    module = parse(row_parallel())
    inputs = draw_inputs(module, 2)
    assert interpret(module, 2)["f.result0"].dtype == np.float32
    promoted = interpret(module, 2, promoted=True)
    assert promoted["f.result0"].dtype == np.float64
    assert promoted.inputs["f.arg0"].dtype == np.float32
    np.testing.assert_array_equal(promoted.inputs["f.arg0"], inputs["f.arg0"])


def test_a_promoted_f32_constant_is_rounded_to_f32():
    s = T("f32")
    source = f"""
func.func @f() -> {s} {{
  %c = coco.constant 0.1 : {s}
  func.return %c : {s}
}}"""
    value = interpret(parse(source), 2, promoted=True)["f.result0"]
    assert value == np.float64(np.float32(0.1))


# ---------------------------------------------------------------------------
# compare_outputs(): real f32 in another order
# ---------------------------------------------------------------------------


def sequential_f32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`a @ b` in f32, adding the K products one by one (the order farthest
    from numpy's blocked one)."""
    total = np.zeros((a.shape[0], b.shape[1]), dtype=np.float32)
    for k in range(a.shape[1]):
        total += a[:, k : k + 1] * b[k : k + 1, :]
    return total


def by_rank_f32(a: np.ndarray, b: np.ndarray, world: int) -> np.ndarray:
    """`a @ b` in f32 as the row-parallel layer on `world` ranks: per-rank
    partial products, summed in rank order."""
    partials = [
        pa @ pb
        for pa, pb in zip(
            np.split(a, world, axis=1), np.split(b, world, axis=0), strict=True
        )
    ]
    total = partials[0]
    for p in partials[1:]:
        total = total + p
    return total


@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("world", WORLDS)
def test_real_f32_in_another_order_is_within_the_reduction_bound(world, signed):
    module = parse(plain())
    inputs = draw_inputs(module, world, signed=signed)
    a, b = inputs["f.arg0"], inputs["f.arg1"]
    reference = interpret(module, world, inputs=inputs, promoted=True)["f.result0"]
    magnitude = matmul_magnitude(a, b)
    for actual in (sequential_f32(a, b), by_rank_f32(a, b, world), a @ b):
        assert actual.dtype == np.float32
        for known, worst_case in itertools.product((magnitude, None), (True, False)):
            # The reduction bound alone (no rtol, no atol) covers the order.
            difference = compare_outputs(
                reference,
                actual,
                "f32",
                reduction_length=K,
                magnitude=known,
                rtol=0.0,
                atol=0.0,
                worst_case=worst_case,
            )
            assert difference is None, difference
    if signed:  # the f32 tolerance elementwise, as before, fails under cancellation
        error = np.abs(sequential_f32(a, b) - reference)
        assert np.any(error > 1e-6 + 1e-5 * np.abs(reference))


@pytest.mark.parametrize("signed", [False, True])
def test_real_f32_of_a_wrong_computation_is_rejected(signed):
    module = parse(plain())
    inputs = draw_inputs(module, 4, signed=signed)
    a, b = inputs["f.arg0"], inputs["f.arg1"]
    reference = interpret(module, 4, inputs=inputs, promoted=True)["f.result0"]
    magnitude = matmul_magnitude(a, b)
    halves = np.split(a, 2, axis=1), np.split(b, 2, axis=0)
    one_partial = halves[0][0] @ halves[1][0]
    rank_max = np.maximum.reduce([x @ y for x, y in zip(*halves, strict=True)])
    for worst_case in (True, False):
        bound = reduction_tolerance("f32", K, magnitude[0, 0], worst_case=worst_case)
        nudged = a @ b
        nudged[0, 0] += 2 * float(bound)
        for wrong in (one_partial, rank_max, nudged):
            difference = compare_outputs(
                reference,
                wrong,
                "f32",
                reduction_length=K,
                magnitude=magnitude,
                worst_case=worst_case,
            )
            assert difference is not None
            assert "reduction bound" in difference.message


def test_reduction_tolerance_scales_with_length_and_magnitude():
    u = 2.0**-24
    assert reduction_tolerance("f32", 1, 1.0) == pytest.approx(2 * u / (1 - u))
    assert reduction_tolerance("f32", 4096, 10.0) == pytest.approx(
        10 * 2 * 4096 * u / (1 - 4096 * u)
    )
    assert reduction_tolerance("f64", 4096, 1.0) < 1e-12
    assert reduction_tolerance("i32", 4096, 1.0) == 0.0
    assert reduction_tolerance("f32", 2**24, 1.0) == float("inf")
    probable = reduction_tolerance("f32", 4096, 10.0, worst_case=False)
    assert probable == pytest.approx(8 * 64 * u * 10)
    per_element = reduction_tolerance("f32", 8, np.array([1.0, 2.0]))
    assert isinstance(per_element, np.ndarray)
    assert per_element[1] == pytest.approx(2 * per_element[0])


def test_an_infinite_reduction_bound_still_catches_nan_and_infinity():
    # K u >= 1 makes the worst-case bound infinite; a NaN or an infinity
    # against a number is still a difference, NaN against NaN is not.
    reference = np.array([1.0, np.nan, np.inf])
    assert compare_outputs(reference, reference, "f32", reduction_length=2**24) is None
    for actual in ([np.nan, np.nan, np.inf], [1.0, 2.0, np.inf], [1.0, np.nan, 3.0]):
        difference = compare_outputs(
            reference, np.array(actual), "f32", reduction_length=2**24
        )
        assert difference is not None
