"""Input generation (docs/interpreter.md, "Inputs"): deterministic, global values
distributed by layout, local arguments drawn per rank."""

from __future__ import annotations

import zlib

import ml_dtypes
import numpy as np
import pytest
from helpers import T

from coconet_ir.interpreter import draw_inputs, interpret
from coconet_ir.ir import CocoError, parse


def identity(name: str, *arg_types: str) -> str:
    """A function returning nothing, only there to have arguments."""
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(arg_types))
    return f"func.func @{name}({args}) {{\n  func.return\n}}\n"


MIXED = identity(
    "f",
    T("8x4xf32"),
    T("8x4xf32", "sliced<0>"),
    T("8x4xf32", "local"),
    T("16xi32", "sliced<0>"),
    T("16xi1"),
    T("4x4xf16"),
    T("4x4xbf16", "local"),
    T("f64"),
)


def test_same_seed_same_values():
    module = parse(MIXED)
    first, second = draw_inputs(module, 4, seed=3), draw_inputs(module, 4, seed=3)
    assert list(first) == [f"f.arg{i}" for i in range(8)]
    for key in first:
        np.testing.assert_array_equal(first[key], second[key])


def test_another_seed_other_values():
    module = parse(MIXED)
    a, b = draw_inputs(module, 4, seed=0), draw_inputs(module, 4, seed=1)
    assert not np.array_equal(a["f.arg0"], b["f.arg0"])


def test_values_follow_the_documented_generator():
    inputs = draw_inputs(parse(MIXED), 4, seed=5)
    rng = np.random.default_rng([5, zlib.crc32(b"f"), 0])
    np.testing.assert_array_equal(
        inputs["f.arg0"], rng.random((8, 4)).astype(np.float32)
    )
    rng = np.random.default_rng([5, zlib.crc32(b"f"), 2])
    np.testing.assert_array_equal(
        inputs["f.arg2"], rng.random((4, 8, 4)).astype(np.float32)
    )


def test_shapes_dtypes_and_ranges():
    inputs = draw_inputs(parse(MIXED), 4)
    expected = {
        "f.arg0": ((8, 4), np.float32),
        "f.arg1": ((8, 4), np.float32),
        "f.arg2": ((4, 8, 4), np.float32),
        "f.arg3": ((16,), np.int32),
        "f.arg4": ((16,), np.bool_),
        "f.arg5": ((4, 4), np.float16),
        "f.arg6": ((4, 4, 4), ml_dtypes.bfloat16),
        "f.arg7": ((), np.float64),
    }
    for key, (shape, dtype) in expected.items():
        assert inputs[key].shape == shape, key
        assert inputs[key].dtype == np.dtype(dtype), key
    floats = inputs["f.arg0"]
    assert np.all((floats >= 0) & (floats < 1))
    assert set(np.unique(inputs["f.arg3"])) <= set(range(1, 11))
    assert inputs["f.arg3"].min() >= 1


def test_local_arguments_are_drawn_per_rank():
    inputs = draw_inputs(parse(MIXED), 4)
    per_rank = inputs["f.arg2"]
    assert per_rank.shape == (4, 8, 4)
    assert len({per_rank[r].tobytes() for r in range(4)}) == 4


def test_argument_position_and_function_name_select_the_stream():
    inputs = draw_inputs(parse(MIXED), 2)
    assert not np.array_equal(inputs["f.arg0"], inputs["f.arg1"])
    renamed = draw_inputs(parse(MIXED.replace("@f", "@g")), 2)
    assert not np.array_equal(inputs["f.arg0"], renamed["g.arg0"])


@pytest.mark.parametrize("layout", ["sliced<0>", "sliced<1>"])
def test_the_global_value_does_not_depend_on_the_layout(layout):
    replicated = draw_inputs(parse(identity("f", T("8x8xf32"))), 4)
    sliced = draw_inputs(parse(identity("f", T("8x8xf32", layout))), 4)
    np.testing.assert_array_equal(replicated["f.arg0"], sliced["f.arg0"])


def test_the_global_value_does_not_depend_on_the_world():
    module = parse(identity("f", T("8x8xf32", "sliced<0>")))
    np.testing.assert_array_equal(
        draw_inputs(module, 2)["f.arg0"], draw_inputs(module, 8)["f.arg0"]
    )


def test_interpret_feeds_exactly_the_drawn_inputs():
    module = parse(MIXED)
    drawn = draw_inputs(module, 2, seed=9)
    fed = interpret(module, 2, seed=9).inputs
    assert list(fed) == list(drawn)
    for key in drawn:
        np.testing.assert_array_equal(fed[key], drawn[key])


def test_pipeline_draws_every_stage():
    t = T("4xf32")
    source = f"""
func.func @one(%x: {t}) {{
  coco.send %x to @two channel = 0 : {t}
  func.return
}}
func.func @two(%y: {t}) -> {t} {{
  %r = coco.recv from @one channel = 0 : {t}
  func.return %r : {t}
}}"""
    inputs = draw_inputs(parse(source), 2)
    assert list(inputs) == ["one.arg0", "two.arg0"]
    assert list(draw_inputs(parse(source), 2, entry="two")) == list(inputs)


def test_bad_seed_or_world_is_a_coco_error():
    module = parse(MIXED)
    with pytest.raises(CocoError, match="seed must be a non-negative integer"):
        draw_inputs(module, 2, seed=-1)
    with pytest.raises(CocoError, match="world size must be a positive integer"):
        draw_inputs(module, 0)
