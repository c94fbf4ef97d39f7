"""The reference interpreter: every op against a plain numpy computation, on
several layouts and world sizes, plus pipelines, deadlocks and user errors."""

from __future__ import annotations

import re
import time

import ml_dtypes
import numpy as np
import pytest
from helpers import T
from xdsl.interpreter import InterpreterFunctions, impl, register_impls
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    result_def,
)

from coconet_ir.dialects.coco import TensorType
from coconet_ir.interpreter import (
    RunResult,
    dropout_uniform,
    interpret,
    register_functions,
    stage_context,
)
from coconet_ir.interpreter.runner import EXTRA_FUNCTIONS
from coconet_ir.ir import CocoError, make_context, parse

WORLDS = [2, 4, 8]


def compute(op: str, arg_types: list[str], result_type: str) -> str:
    """A function @f(%a0, %a1, ...) returning `%r = OP : (ARGS) -> RESULT`."""
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(arg_types))
    return f"""
func.func @f({args}) -> {result_type} {{
  %r = {op} : ({", ".join(arg_types)}) -> {result_type}
  func.return %r : {result_type}
}}"""


def collective(op: str, in_type: str, out_type: str) -> str:
    """A function @f(%a0) returning `%r = OP : IN -> OUT`."""
    return f"""
func.func @f(%a0: {in_type}) -> {out_type} {{
  %r = {op} : {in_type} -> {out_type}
  func.return %r : {out_type}
}}"""


def run(source: str, world: int, **inputs: np.ndarray) -> RunResult:
    """Interpret; keyword inputs `a0=...` mean `f.arg0`."""
    given = {f"f.arg{name[1:]}": value for name, value in inputs.items()}
    return interpret(parse(source), world, inputs=given or None)


def fed(result: RunResult, position: int) -> np.ndarray:
    return result.inputs[f"f.arg{position}"]


# ============================================================================
# Elementwise ops
# ============================================================================

BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "max": np.maximum,
    "min": np.minimum,
    "pow": np.power,
}


@pytest.mark.parametrize("name", BINARY)
def test_binary_ops_match_numpy(name):
    t = T("4x6xf32")
    result = run(compute(f"coco.{name} %a0, %a1", [t, t], t), 2)
    expected = BINARY[name](fed(result, 0), fed(result, 1))
    assert result["f.result0"].dtype == np.float32
    np.testing.assert_array_equal(result["f.result0"], expected)


LAYOUTS = ["replicated", "local", "sliced<0>", "sliced<1>"]


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_add_on_every_layout(layout, world):
    t = T("8x16xf32", layout)
    result = run(compute("coco.add %a0, %a1", [t, t], t), world)
    a, b = fed(result, 0), fed(result, 1)
    expected_shape = (world, 8, 16) if layout == "local" else (8, 16)
    assert a.shape == expected_shape
    np.testing.assert_array_equal(result["f.result0"], a + b)


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("layout", ["sliced<0>", "sliced<1>", "local"])
def test_replicated_bias_broadcasts_against_distributed_values(layout, world):
    x, bias = T("8x16xf32", layout), T("16xf32")
    result = run(compute("coco.add %a0, %a1", [x, bias], x), world)
    np.testing.assert_array_equal(result["f.result0"], fed(result, 0) + fed(result, 1))


@pytest.mark.parametrize("world", WORLDS)
def test_replicated_column_broadcasts_against_sliced_last_dim(world):
    x, column = T("8x16xf32", "sliced<1>"), T("8x1xf32")
    result = run(compute("coco.mul %a0, %a1", [x, column], x), world)
    np.testing.assert_array_equal(result["f.result0"], fed(result, 0) * fed(result, 1))


@pytest.mark.parametrize("world", WORLDS)
def test_replicated_full_operand_is_cut_like_the_sliced_one(world):
    x, y = T("8x16xf32", "sliced<0>"), T("8x16xf32")
    result = run(compute("coco.sub %a0, %a1", [y, x], x), world)
    np.testing.assert_array_equal(result["f.result0"], fed(result, 0) - fed(result, 1))


@pytest.mark.parametrize("world", [2, 4])
def test_sliced_operands_of_different_ranks_align_trailing_dims(world):
    x, v = T("4x8xf32", "sliced<1>"), T("8xf32", "sliced<0>")
    result = run(compute("coco.add %a0, %a1", [x, v], x), world)
    np.testing.assert_array_equal(result["f.result0"], fed(result, 0) + fed(result, 1))


def test_rank_zero_scalar_broadcasts_to_anything():
    x, s = T("8x4xf32", "sliced<0>"), T("f32")
    result = run(compute("coco.mul %a0, %a1", [s, x], x), 4, a0=np.float32(3.0))
    np.testing.assert_array_equal(result["f.result0"], 3.0 * fed(result, 1))


def gelu_reference(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x**3)))


UNARY = {
    "neg": np.negative,
    "abs": np.abs,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "exp": np.exp,
    "log": np.log,
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, 0),
    "gelu": gelu_reference,
}


@pytest.mark.parametrize("name", UNARY)
def test_unary_ops_match_numpy(name):
    t = T("64xf64", "sliced<0>")
    values = np.linspace(-3, 3, 64) if name not in ("sqrt", "rsqrt", "log") else None
    result = run(
        compute(f"coco.{name} %a0", [t], t),
        4,
        **({"a0": values} if values is not None else {}),
    )
    np.testing.assert_allclose(
        result["f.result0"], UNARY[name](fed(result, 0)), rtol=1e-13, atol=1e-15
    )


@pytest.mark.parametrize("predicate", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_cmp_gives_i1(predicate):
    t, r = T("16xi32", "sliced<0>"), T("16xi1", "sliced<0>")
    a = np.arange(16, dtype=np.int32) % 4
    b = np.full(16, 2, np.int32)
    result = run(
        compute(f"coco.cmp %a0, %a1 predicate = {predicate}", [t, t], r), 2, a0=a, a1=b
    )
    ops = {
        "eq": "__eq__",
        "ne": "__ne__",
        "lt": "__lt__",
        "le": "__le__",
        "gt": "__gt__",
        "ge": "__ge__",
    }
    expected = getattr(a, ops[predicate])(b)
    assert result["f.result0"].dtype == np.bool_
    np.testing.assert_array_equal(result["f.result0"], expected)


@pytest.mark.parametrize("element", ["f32", "i1"])
def test_select(element):
    c, t = T("8x4xi1", "sliced<0>"), T(f"8x4x{element}", "sliced<0>")
    result = run(compute("coco.select %a0, %a1, %a2", [c, t, t], t), 4)
    expected = np.where(fed(result, 0), fed(result, 1), fed(result, 2))
    np.testing.assert_array_equal(result["f.result0"], expected)


def test_select_with_a_replicated_condition_on_sliced_values():
    c, t = T("4xi1"), T("8x4xf32", "sliced<1>")
    result = run(compute("coco.select %a0, %a1, %a2", [c, t, t], t), 2)
    expected = np.where(fed(result, 0), fed(result, 1), fed(result, 2))
    np.testing.assert_array_equal(result["f.result0"], expected)


# ============================================================================
# Element types
# ============================================================================


@pytest.mark.parametrize(
    ("element", "dtype"), [("f16", np.float16), ("bf16", ml_dtypes.bfloat16)]
)
def test_half_arithmetic_runs_in_f32_and_rounds_after_each_op(element, dtype):
    t = T(f"256x{element}", "sliced<0>")
    source = f"""
func.func @f(%a0: {t}, %a1: {t}) -> {t} {{
  %m = coco.mul %a0, %a1 : ({t}, {t}) -> {t}
  %r = coco.add %m, %a0 : ({t}, {t}) -> {t}
  func.return %r : {t}
}}"""
    result = run(source, 4)
    a, b = fed(result, 0).astype(np.float32), fed(result, 1).astype(np.float32)
    per_op = ((a * b).astype(dtype).astype(np.float32) + a).astype(dtype)
    fused = (a * b + a).astype(dtype)
    assert result["f.result0"].dtype == np.dtype(dtype)
    np.testing.assert_array_equal(result["f.result0"], per_op)
    assert not np.array_equal(per_op, fused)


def test_half_sum_accumulates_in_f32():
    t, r = T("4096xf16"), T("f16")
    values = np.full(4096, 1.0, np.float16)
    values[0] = 2048.0
    result = run(compute("coco.reduce %a0 kind = sum dims = [0]", [t], r), 1, a0=values)
    assert result["f.result0"] == np.float16(2048 + 4095)
    assert np.cumsum(values, dtype=np.float16)[-1] == 2048


def test_i32_division_truncates_toward_zero():
    t = T("6xi32")
    a = np.array([7, -7, 7, -7, 1, -1], np.int32)
    b = np.array([2, 2, -2, -2, 3, 3], np.int32)
    result = run(compute("coco.div %a0, %a1", [t, t], t), 2, a0=a, a1=b)
    np.testing.assert_array_equal(result["f.result0"], [3, -3, -3, 3, 0, 0])


def test_i32_division_by_zero_is_an_error():
    t = T("2xi32")
    source = compute("coco.div %a0, %a1", [t, t], t)
    with pytest.raises(
        CocoError, match=re.escape("'coco.div' op divides an i32 by zero")
    ):
        run(source, 2, a1=np.array([1, 0], np.int32))


def test_i32_overflow_wraps():
    t = T("2xi32")
    big = np.array([2**31 - 1, -(2**31)], np.int32)
    result = run(
        compute("coco.add %a0, %a1", [t, t], t),
        2,
        a0=big,
        a1=np.array([1, -1], np.int32),
    )
    np.testing.assert_array_equal(result["f.result0"], [-(2**31), 2**31 - 1])


def test_i32_all_reduce_wraps():
    t = T("1xi32", "local")
    values = np.full((4, 1), 2**30, np.int32)
    result = run(
        collective("coco.all_reduce %a0 reduction = sum", t, T("1xi32")), 4, a0=values
    )
    assert result["f.result0"][0] == 0


DTYPES = {
    "f16": np.float16,
    "bf16": ml_dtypes.bfloat16,
    "f32": np.float32,
    "f64": np.float64,
    "i32": np.int32,
    "i1": np.bool_,
}

CONVERSIONS = [
    ("f32", "i32", [2.9, -2.9, 0.5, -0.5], [2, -2, 0, 0]),
    ("f32", "i1", [0.0, -0.0, 2.5, -1.0], [False, False, True, True]),
    ("i1", "f32", [True, False, True, False], [1.0, 0.0, 1.0, 0.0]),
    ("i32", "f32", [3, -4, 0, 7], [3.0, -4.0, 0.0, 7.0]),
    ("i32", "i1", [3, 0, -1, 0], [True, False, True, False]),
    (
        "f32",
        "f16",
        [0.1, 65504.0, 1e-8, 3.0],
        np.array([0.1, 65504.0, 1e-8, 3.0], np.float32).astype(np.float16),
    ),
    (
        "f64",
        "bf16",
        [0.1, 1.0, 3.14159, 256.5],
        np.array([0.1, 1.0, 3.14159, 256.5]).astype(ml_dtypes.bfloat16),
    ),
    (
        "f16",
        "f32",
        [0.1, 2.0, -1.5, 0.0],
        np.array([0.1, 2.0, -1.5, 0.0], np.float16).astype(np.float32),
    ),
]


@pytest.mark.parametrize(("source_type", "target", "values", "expected"), CONVERSIONS)
def test_convert(source_type, target, values, expected):
    source = compute(
        "coco.convert %a0",
        [T(f"4x{source_type}", "sliced<0>")],
        T(f"4x{target}", "sliced<0>"),
    )
    result = run(source, 2, a0=np.array(values))
    out = result["f.result0"]
    assert out.dtype == np.dtype(DTYPES[target])
    np.testing.assert_array_equal(
        out.astype(np.float64), np.asarray(expected).astype(np.float64)
    )


@pytest.mark.parametrize(
    ("text", "element", "expected"),
    [
        ("2.5", "f32", np.float32(2.5)),
        ("0.1", "f16", np.float16(0.1)),
        ("-3", "i32", np.int32(-3)),
        ("true", "i1", True),
    ],
)
def test_constant(text, element, expected):
    source = f"""
func.func @f() -> {T(element)} {{
  %c = coco.constant {text} : {T(element)}
  func.return %c : {T(element)}
}}"""
    value = interpret(parse(source), 4)["f.result0"]
    assert value.shape == ()
    assert value.dtype == np.asarray(expected).dtype
    assert value == expected


# ============================================================================
# Dropout
# ============================================================================


def dropout_reference(x: np.ndarray, p: float, seed: int) -> np.ndarray:
    indices = np.arange(x.size).reshape(x.shape)
    keep = dropout_uniform(seed, indices) >= p
    return np.where(keep, x, 0) / np.float32(1 - p)


@pytest.mark.parametrize("layout", ["replicated", "sliced<0>", "sliced<1>"])
def test_dropout_uses_global_indices(layout):
    t = T("8x16xf32", layout)
    result = run(compute("coco.dropout %a0 p = 0.25 seed = 11", [t], t), 4)
    expected = dropout_reference(fed(result, 0), 0.25, 11)
    assert np.sum(expected == 0) > 10
    np.testing.assert_array_equal(result["f.result0"], expected.astype(np.float32))


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("dim", [0, 1])
def test_dropout_commutes_with_slicing(dim, world):
    full, sliced = T("8x16xf32"), T("8x16xf32", f"sliced<{dim}>")
    source = f"""
func.func @f(%a0: {full}) -> ({full}, {full}) {{
  %whole = coco.dropout %a0 p = 0.5 seed = 3 : ({full}) -> {full}
  %s = coco.all_slice %a0 dim = {dim} : ({full}) -> {sliced}
  %part = coco.dropout %s p = 0.5 seed = 3 : ({sliced}) -> {sliced}
  %g = coco.all_gather %part : {sliced} -> {full}
  func.return %whole, %g : {full}, {full}
}}"""
    result = interpret(parse(source), world)
    np.testing.assert_array_equal(result["f.result0"], result["f.result1"])
    assert np.any(result["f.result0"] == 0)


def test_dropout_of_a_local_value_uses_the_same_mask_on_every_rank():
    t = T("64xf32", "local")
    result = run(compute("coco.dropout %a0 p = 0.5 seed = 1", [t], t), 4)
    x = fed(result, 0)
    expected = np.stack([dropout_reference(x[r], 0.5, 1) for r in range(4)])
    np.testing.assert_array_equal(result["f.result0"], expected.astype(np.float32))


def test_dropout_on_f16_scales_by_the_rounded_keep_probability():
    t = T("256xf16", "sliced<0>")
    result = run(compute("coco.dropout %a0 p = 0.3 seed = 5", [t], t), 2)
    x = fed(result, 0).astype(np.float32)
    keep = dropout_uniform(5, np.arange(256)) >= 0.3
    scale = np.float32(np.float16(1 - 0.3))
    expected = (np.where(keep, x, 0) / scale).astype(np.float16)
    np.testing.assert_array_equal(result["f.result0"], expected)


def test_dropout_with_zero_probability_is_the_identity():
    t = T("32xf32", "sliced<0>")
    result = run(compute("coco.dropout %a0 p = 0.0 seed = 0", [t], t), 4)
    np.testing.assert_array_equal(result["f.result0"], fed(result, 0))


# ============================================================================
# Reductions, norm, matmul
# ============================================================================

REDUCE = {"sum": np.sum, "max": np.max, "min": np.min}


@pytest.mark.parametrize("kind", REDUCE)
@pytest.mark.parametrize("dims", [[0], [1], [0, 2]])
def test_reduce_replicated(kind, dims):
    source = compute(
        f"coco.reduce %a0 kind = {kind} dims = {dims}",
        [T("4x6x8xf64")],
        T("x".join(str(s) for i, s in enumerate((4, 6, 8)) if i not in dims) + "xf64"),
    )
    result = run(source, 2)
    np.testing.assert_allclose(
        result["f.result0"], REDUCE[kind](fed(result, 0), axis=tuple(dims)), rtol=1e-13
    )


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("kind", REDUCE)
def test_reduce_over_the_sliced_dim_gives_local_partials(kind, world):
    source = compute(
        f"coco.reduce %a0 kind = {kind} dims = [0]",
        [T("16x4xf64", "sliced<0>")],
        T("4xf64", "local"),
    )
    result = run(source, world)
    blocks = fed(result, 0).reshape(world, 16 // world, 4)
    np.testing.assert_allclose(
        result["f.result0"], REDUCE[kind](blocks, axis=1), rtol=1e-13
    )


@pytest.mark.parametrize("world", WORLDS)
def test_reduce_excluding_the_sliced_dim_stays_sliced(world):
    source = compute(
        "coco.reduce %a0 kind = sum dims = [0]",
        [T("3x16x4xf64", "sliced<1>")],
        T("16x4xf64", "sliced<0>"),
    )
    result = run(source, world)
    np.testing.assert_allclose(
        result["f.result0"], fed(result, 0).sum(axis=0), rtol=1e-13
    )


@pytest.mark.parametrize("world", WORLDS)
def test_sliced_reduce_then_all_reduce_is_the_global_reduction(world):
    s, loc, rep = T("16x8xf64", "sliced<1>"), T("16xf64", "local"), T("16xf64")
    source = f"""
func.func @f(%a0: {s}) -> {rep} {{
  %p = coco.reduce %a0 kind = max dims = [1] : ({s}) -> {loc}
  %r = coco.all_reduce %p reduction = max : {loc} -> {rep}
  func.return %r : {rep}
}}"""
    result = run(source, world)
    np.testing.assert_array_equal(result["f.result0"], fed(result, 0).max(axis=1))


@pytest.mark.parametrize("layout", ["replicated", "local"])
def test_norm(layout):
    result = run(compute("coco.norm %a0", [T("8x8xf64", layout)], T("f64", layout)), 4)
    x = fed(result, 0)
    if layout == "local":
        expected = np.sqrt((x * x).sum(axis=(1, 2)))
    else:
        expected = np.sqrt((x * x).sum())
    np.testing.assert_allclose(result["f.result0"], expected, rtol=1e-13)


MATMULS = [
    ("replicated", "replicated", "replicated"),
    ("sliced<0>", "replicated", "sliced<0>"),
    ("sliced<1>", "replicated", "sliced<1>"),
    ("replicated", "sliced<1>", "sliced<2>"),
]


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize(("la", "lb", "lr"), MATMULS)
def test_matmul_layouts(la, lb, lr, world):
    a, b, r = T("8x8x16xf64", la), T("16x8xf64", lb), T("8x8x8xf64", lr)
    result = run(compute("coco.matmul %a0, %a1", [a, b], r), world)
    np.testing.assert_allclose(
        result["f.result0"], fed(result, 0) @ fed(result, 1), rtol=1e-12
    )


@pytest.mark.parametrize("world", WORLDS)
def test_row_parallel_matmul_gives_partial_sums(world):
    a, b, r = (
        T("4x16xf64", "sliced<1>"),
        T("16x8xf64", "sliced<0>"),
        T("4x8xf64", "local"),
    )
    result = run(compute("coco.matmul %a0, %a1", [a, b], r), world)
    x, w = fed(result, 0), fed(result, 1)
    k = 16 // world
    partials = np.stack(
        [x[:, i * k : (i + 1) * k] @ w[i * k : (i + 1) * k] for i in range(world)]
    )
    np.testing.assert_allclose(result["f.result0"], partials, rtol=1e-12)
    np.testing.assert_allclose(result["f.result0"].sum(axis=0), x @ w, rtol=1e-12)


def test_local_matmul_is_per_rank():
    a, b, r = T("4x6xf32", "local"), T("6x3xf32"), T("4x3xf32", "local")
    result = run(compute("coco.matmul %a0, %a1", [a, b], r), 4)
    np.testing.assert_allclose(
        result["f.result0"], fed(result, 0) @ fed(result, 1), rtol=1e-6
    )


def test_half_matmul_accumulates_in_f32():
    a, b = T("4x64xf16"), T("64x4xf16")
    result = run(compute("coco.matmul %a0, %a1", [a, b], T("4x4xf16")), 2)
    x, w = fed(result, 0).astype(np.float32), fed(result, 1).astype(np.float32)
    np.testing.assert_array_equal(result["f.result0"], (x @ w).astype(np.float16))


# ============================================================================
# Collectives
# ============================================================================

RANK_REDUCTIONS = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("reduction", RANK_REDUCTIONS)
def test_all_reduce(reduction, world):
    source = collective(
        f"coco.all_reduce %a0 reduction = {reduction}",
        T("4x4xf64", "local"),
        T("4x4xf64"),
    )
    result = run(source, world)
    expected = RANK_REDUCTIONS[reduction](fed(result, 0), axis=0)
    np.testing.assert_allclose(result["f.result0"], expected, rtol=1e-13)


def test_all_reduce_of_a_replicated_value_combines_every_rank_copy():
    source = collective("coco.all_reduce %a0 reduction = sum", T("4xf64"), T("4xf64"))
    result = run(source, 4)
    np.testing.assert_allclose(result["f.result0"], 4 * fed(result, 0), rtol=1e-15)


def test_all_reduce_accumulates_in_rank_order():
    """((1 + -1) + 1e-8) + 0 in f32 is 1e-8; other orders give 0."""
    values = np.array([[1.0], [-1.0], [1e-8], [0.0]], np.float32)
    source = collective(
        "coco.all_reduce %a0 reduction = sum", T("1xf32", "local"), T("1xf32")
    )
    result = run(source, 4, a0=values)
    assert result["f.result0"][0] == np.float32(1e-8)
    assert np.float32(np.float32(1.0) + np.float32(1e-8)) == np.float32(1.0)


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("dim", [0, 1])
def test_reduce_scatter(dim, world):
    source = collective(
        f"coco.reduce_scatter %a0 reduction = sum dim = {dim}",
        T("8x16xf64", "local"),
        T("8x16xf64", f"sliced<{dim}>"),
    )
    result = run(source, world)
    np.testing.assert_allclose(
        result["f.result0"], fed(result, 0).sum(axis=0), rtol=1e-13
    )


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("dim", [0, 1])
def test_all_gather_concatenates_the_blocks(dim, world):
    source = collective(
        "coco.all_gather %a0", T("8x16xf32", f"sliced<{dim}>"), T("8x16xf32")
    )
    result = run(source, world)
    np.testing.assert_array_equal(result["f.result0"], fed(result, 0))


@pytest.mark.parametrize("world", WORLDS)
def test_broadcast_takes_the_root_value(world):
    root = world - 1
    source = collective(
        f"coco.broadcast %a0 root = {root}", T("3x5xf32", "local"), T("3x5xf32")
    )
    result = run(source, world)
    np.testing.assert_array_equal(result["f.result0"], fed(result, 0)[root])


def test_broadcast_root_outside_the_group_is_an_error():
    source = collective("coco.broadcast %a0 root = 4", T("3xf32", "local"), T("3xf32"))
    with pytest.raises(CocoError, match="root 4 is not a rank of the group of 4"):
        run(source, 4)


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize(("d", "e"), [(0, 1), (1, 0), (1, 1)])
def test_all_to_all_recuts_the_same_global_value(d, e, world):
    source_type, cut_type = T("8x16xf32", f"sliced<{d}>"), T("8x16xf32", f"sliced<{e}>")
    partial_type = T(("16" if e == 0 else "8") + "xf32", "local")
    source = f"""
func.func @f(%a0: {source_type}) -> ({cut_type}, {partial_type}) {{
  %r = coco.all_to_all %a0 dim = {e} : {source_type} -> {cut_type}
  %p = coco.reduce %r kind = sum dims = [{e}] : ({cut_type}) -> {partial_type}
  func.return %r, %p : {cut_type}, {partial_type}
}}"""
    result = run(source, world)
    x = fed(result, 0)
    np.testing.assert_array_equal(result["f.result0"], x)
    expected = np.stack([block.sum(axis=e) for block in np.split(x, world, axis=e)])
    np.testing.assert_allclose(result["f.result1"], expected, rtol=1e-6)


@pytest.mark.parametrize("world", WORLDS)
def test_all_slice_keeps_each_rank_block(world):
    FULL, SLICED, PARTIAL = (
        T("16x4xf32"),
        T("16x4xf32", "sliced<0>"),
        T("4xf32", "local"),
    )
    source = f"""
func.func @f(%a0: {FULL}) -> {PARTIAL} {{
  %s = coco.all_slice %a0 dim = 0 : ({FULL}) -> {SLICED}
  %r = coco.reduce %s kind = sum dims = [0] : ({SLICED}) -> {PARTIAL}
  func.return %r : {PARTIAL}
}}"""
    result = run(source, world)
    blocks = fed(result, 0).reshape(world, 16 // world, 4)
    np.testing.assert_allclose(result["f.result0"], blocks.sum(axis=1), rtol=1e-6)


# ============================================================================
# Outputs, updates, inputs
# ============================================================================

G16, W16, LR = T("16xf32", "local"), T("16xf32"), T("f32")
SGD = f"""
func.func @sgd(%g: {G16}, %w: {W16}, %lr: {LR}) -> {W16} {{
  %s = coco.all_reduce %g reduction = sum : {G16} -> {W16}
  %d = coco.mul %lr, %s : ({LR}, {W16}) -> {W16}
  %w1 = coco.sub %w, %d : ({W16}, {W16}) -> {W16}
  coco.update %w, %w1 : {W16}
  func.return %s : {W16}
}}
"""


@pytest.mark.parametrize("world", WORLDS)
def test_update_and_result_keys(world):
    result = interpret(parse(SGD), world)
    assert list(result.outputs) == ["sgd.result0", "sgd.arg1"]
    g, w, lr = (result.inputs[f"sgd.arg{i}"] for i in range(3))
    assert g.shape == (world, 16) and w.shape == (16,) and lr.shape == ()
    np.testing.assert_allclose(result["sgd.result0"], g.sum(axis=0), rtol=1e-6)
    np.testing.assert_allclose(result["sgd.arg1"], w - lr * g.sum(axis=0), rtol=1e-6)
    assert str(result.outputs["sgd.arg1"].type) == "!coco.tensor<16xf32, replicated>"


def test_local_outputs_are_stacked_per_rank():
    source = compute("coco.neg %a0", [T("3xf32", "local")], T("3xf32", "local"))
    result = run(source, 4)
    assert result["f.result0"].shape == (4, 3)
    np.testing.assert_array_equal(result["f.result0"], -fed(result, 0))


def test_given_inputs_override_drawn_ones_and_are_reported():
    result = interpret(parse(SGD), 2, inputs={"sgd.arg2": 0.5})
    assert result.inputs["sgd.arg2"].dtype == np.float32
    assert result.inputs["sgd.arg2"] == np.float32(0.5)
    again = interpret(parse(SGD), 2, inputs=result.inputs, seed=99)
    for key, output in result.outputs.items():
        np.testing.assert_array_equal(again[key], output.value)


# ============================================================================
# Pipelines
# ============================================================================

T4 = T("8x4xf32")
PIPELINE = f"""
func.func @second(%b: {T4}) -> {T4} {{
  %h = coco.recv from @first channel = 0 : {T4}
  %r = coco.add %h, %b : ({T4}, {T4}) -> {T4}
  func.return %r : {T4}
}}
func.func @first(%a: {T4}) {{
  %c = coco.constant 2.0 : {T("f32")}
  %x = coco.mul %a, %c : ({T4}, {T("f32")}) -> {T4}
  coco.send %x to @second channel = 0 : {T4}
  func.return
}}
"""


@pytest.mark.parametrize("world", WORLDS)
def test_two_stage_pipeline(world):
    result = interpret(parse(PIPELINE), world)
    assert list(result.outputs) == ["second.result0"]
    assert sorted(result.inputs) == ["first.arg0", "second.arg0"]
    expected = 2 * result.inputs["first.arg0"] + result.inputs["second.arg0"]
    np.testing.assert_array_equal(result["second.result0"], expected)


def test_entry_runs_the_connected_stages():
    result = interpret(parse(PIPELINE), 2, entry="second")
    assert sorted(result.inputs) == ["first.arg0", "second.arg0"]


@pytest.mark.parametrize("world", [2, 4])
def test_rank_r_sends_to_rank_r_both_ways(world):
    loc = T("8x4xf32", "local")
    source = f"""
func.func @a(%x: {loc}) -> {loc} {{
  coco.send %x to @b channel = 1 : {loc}
  %back = coco.recv from @b channel = 2 : {loc}
  func.return %back : {loc}
}}
func.func @b(%y: {loc}) {{
  %got = coco.recv from @a channel = 1 : {loc}
  %sum = coco.add %got, %y : ({loc}, {loc}) -> {loc}
  coco.send %sum to @a channel = 2 : {loc}
  func.return
}}"""
    result = interpret(parse(source), world)
    expected = result.inputs["a.arg0"] + result.inputs["b.arg0"]
    np.testing.assert_array_equal(result["a.result0"], expected)


def test_deadlock_names_the_waiting_receives():
    source = f"""
func.func @s1() {{
  %x = coco.recv from @s2 channel = 0 : {T4}
  coco.send %x to @s2 channel = 1 : {T4}
  func.return
}}
func.func @s2() {{
  %y = coco.recv from @s1 channel = 1 : {T4}
  coco.send %y to @s1 channel = 0 : {T4}
  func.return
}}"""
    with pytest.raises(CocoError) as err:
        interpret(parse(source), 2)
    message = str(err.value)
    assert message.startswith("error: deadlock:")
    assert "@s1 waits at 'coco.recv' from @s2 channel 0 at <input>:3:" in message
    assert "@s2 waits at 'coco.recv' from @s1 channel 1 at <input>:8:" in message


# ============================================================================
# Errors
# ============================================================================


def test_not_divisible_names_the_op_and_the_world():
    source = compute(
        "coco.neg %a0", [T("8x6xf32", "sliced<1>")], T("8x6xf32", "sliced<1>")
    )
    with pytest.raises(
        CocoError,
        match=r"^<input>:2:\d+: error: argument %a0 of @f: dimension 1 of .* "
        r"\(size 6\) is not divisible by the world size 4",
    ):
        interpret(parse(source), 4)
    interpret(parse(source), 3)


def test_not_divisible_intermediate_result():
    source = f"""
func.func @f(%a0: {T("6x4xf32")}) -> {T("6x4xf32")} {{
  %s = coco.all_slice %a0 dim = 0 : ({T("6x4xf32")}) -> {T("6x4xf32", "sliced<0>")}
  %g = coco.all_gather %s : {T("6x4xf32", "sliced<0>")} -> {T("6x4xf32")}
  func.return %g : {T("6x4xf32")}
}}"""
    with pytest.raises(CocoError, match=r"<input>:3:.*'coco.all_slice' op dimension 0"):
        interpret(parse(source), 4)


def test_missing_entry():
    with pytest.raises(
        CocoError,
        match=re.escape(
            "entry function @nope is not in the module (functions: @second, @first)"
        ),
    ):
        interpret(parse(PIPELINE), 2, entry="nope")


def test_unconnected_functions_need_an_entry():
    source = compute("coco.neg %a0", [T("4xf32")], T("4xf32")) + compute(
        "coco.abs %a0", [T("4xf32")], T("4xf32")
    ).replace("@f", "@g")
    with pytest.raises(CocoError, match=r"2 unconnected groups .*entry"):
        interpret(parse(source), 2)
    assert list(interpret(parse(source), 2, entry="g").outputs) == ["g.result0"]


@pytest.mark.parametrize("world", [0, -1])
def test_world_must_be_positive(world):
    with pytest.raises(CocoError, match="world size must be a positive integer"):
        interpret(parse(SGD), world)


def test_world_must_match_the_module_world_size():
    fixed = parse("builtin.module attributes {coco.world_size = 4} {" + SGD + "}")
    assert list(interpret(fixed, 4).outputs) == ["sgd.result0", "sgd.arg1"]
    with pytest.raises(
        CocoError, match=r"fixed to coco\.world_size = 4 but is run on 2"
    ):
        interpret(fixed, 2)


def test_wrong_input_shape():
    with pytest.raises(
        CocoError,
        match=re.escape(
            "must have the per-rank values (N, *shape) shape [2, 16], got [16]"
        ),
    ):
        interpret(parse(SGD), 2, inputs={"sgd.arg0": np.zeros(16)})


def test_unknown_input_key():
    with pytest.raises(
        CocoError,
        match=re.escape(
            "unknown input 'sgd.arg7'; the arguments are sgd.arg0, sgd.arg1, sgd.arg2"
        ),
    ):
        interpret(parse(SGD), 2, inputs={"sgd.arg7": np.zeros(16)})


def test_float_input_for_an_integer_argument():
    source = compute("coco.neg %a0", [T("4xi32")], T("4xi32"))
    with pytest.raises(
        CocoError, match="floating-point values but the argument is i32"
    ):
        run(source, 2, a0=np.zeros(4))


def test_op_without_a_rule():
    source = f"""
func.func @f(%a0: {T("4xf32")}) -> {T("4xf32")} {{
  %c = arith.constant 1 : i32
  func.return %a0 : {T("4xf32")}
}}"""
    with pytest.raises(
        CocoError,
        match=re.escape("'arith.constant' op has no rule in the reference interpreter"),
    ):
        interpret(parse(source), 2)


def test_small_programs_run_in_milliseconds():
    module = parse(SGD.replace("16x", "4096x"))
    interpret(module, 8)
    start = time.perf_counter()
    for _ in range(5):
        interpret(module, 8)
    assert (time.perf_counter() - start) / 5 < 0.05


# ============================================================================
# Rules of ops defined elsewhere
# ============================================================================


@irdl_op_definition
class TwiceOp(IRDLOperation):
    """A stand-in for an op another module gives a meaning to."""

    name = "test_interp.twice"
    operand = operand_def(TensorType)
    result = result_def(TensorType)
    assembly_format = "$operand attr-dict `:` type($operand) `->` type($result)"


@register_impls
class TwiceFunctions(InterpreterFunctions):
    @impl(TwiceOp)
    def run_twice(self, interpreter, op, args):
        (value,) = args
        assert stage_context(interpreter).world == value.world
        return (value.with_data(value.type, value.data * 2),)


def test_registered_functions_give_new_ops_a_meaning():
    ctx = make_context()
    ctx.load_op(TwiceOp)
    t = T("8xf32", "sliced<0>")
    source = f"""
func.func @f(%a0: {t}) -> {t} {{
  %r = test_interp.twice %a0 : {t} -> {t}
  func.return %r : {t}
}}"""
    module = parse(source, ctx=ctx)
    if not any(isinstance(f, TwiceFunctions) for f in EXTRA_FUNCTIONS):
        with pytest.raises(CocoError, match="has no rule in the reference interpreter"):
            interpret(module, 2)
    register_functions(TwiceFunctions())
    result = interpret(module, 2)
    np.testing.assert_array_equal(result["f.result0"], 2 * fed(result, 0))
