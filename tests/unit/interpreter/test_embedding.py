"""`coco.embedding` (docs/dialect.md): the interpreter's pooled lookup against
numpy's EmbeddingBag arithmetic, every layout of the table against the
replicated lookup on 2, 4 and 8 ranks (hypothesis draws the shapes), the
indices the inputs draw, and the out-of-range error."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import coconet_ir as cc
from coconet_ir.interpreter.inputs import draw_inputs

PROGRAM = """
func.func @lookup(%t: {tables}, %i: {indices}) -> {out} {{
  %e = coco.embedding %t, %i pooling = {pooling} : ({tables}, {indices}) -> {pooled}
  {finish}
  func.return {returned} : {out}
}}
"""


def tensor(dims, element: str, layout: str) -> str:
    return f"!coco.tensor<{'x'.join(map(str, dims))}x{element}, {layout}>"


def program(
    shape: tuple[int, ...], pooling: str, tables: str, indices: str, element="f32"
):
    """The lookup with tables laid out `tables` and indices `indices`,
    finished by the collective that makes its result replicated."""
    t, r, d, b, length = shape
    pooled_layout = {
        ("replicated", "replicated"): "replicated",
        ("sliced<0>", "sliced<0>"): "sliced<0>",
        ("sliced<0>", "replicated"): "sliced<0>",
        ("sliced<1>", "replicated"): "local",
        ("sliced<2>", "replicated"): "sliced<2>",
        ("replicated", "sliced<1>"): "sliced<1>",
    }[tables, indices]
    pooled = tensor((t, b, d), element, pooled_layout)
    out = tensor((t, b, d), element, "replicated")
    if pooled_layout == "replicated":
        finish, returned = "", "%e"
    elif pooled_layout == "local":
        reduction = "max" if pooling == "max" else "sum"
        finish = f"%o = coco.all_reduce %e reduction = {reduction} : {pooled} -> {out}"
        returned = "%o"
    else:
        finish, returned = f"%o = coco.all_gather %e : {pooled} -> {out}", "%o"
    return cc.parse(
        PROGRAM.format(
            tables=tensor((t, r, d), element, tables),
            indices=tensor((t, b, length), "i32", indices),
            pooling=pooling,
            pooled=pooled,
            out=out,
            finish=finish,
            returned=returned,
        )
    )


def embedding_bag(tables: np.ndarray, indices: np.ndarray, pooling: str) -> np.ndarray:
    """PyTorch's EmbeddingBag, table by table, in f64."""
    rows = tables.astype(np.float64)[np.arange(len(tables))[:, None, None], indices]
    if pooling == "max":
        return rows.max(axis=2)
    total = rows.sum(axis=2)
    return total / indices.shape[2] if pooling == "mean" else total


POOLINGS = ["sum", "mean", "max"]
LAYOUTS = [
    ("sliced<0>", "sliced<0>"),
    ("sliced<0>", "replicated"),
    ("sliced<1>", "replicated"),
    ("sliced<2>", "replicated"),
    ("replicated", "sliced<1>"),
]


@pytest.mark.parametrize("pooling", POOLINGS)
def test_replicated_lookup_is_embedding_bag(pooling: str):
    module = program((3, 7, 5, 4, 6), pooling, "replicated", "replicated")
    run = cc.interpret(module, 2, seed=3)
    fed = draw_inputs(module, 2, seed=3)
    tables, indices = fed["lookup.arg0"], fed["lookup.arg1"]
    assert indices.min() >= 0 and indices.max() < 7  # drawn in [0, R)
    assert len(np.unique(indices)) > 3
    np.testing.assert_allclose(
        run["lookup.result0"], embedding_bag(tables, indices, pooling), rtol=1e-6
    )


@settings(max_examples=25, deadline=None)
@given(
    world=st.sampled_from([2, 4, 8]),
    blocks=st.tuples(*(st.integers(1, 3) for _ in range(4))),
    length=st.integers(1, 5),
    pooling=st.sampled_from(POOLINGS),
    layout=st.sampled_from(LAYOUTS),
    element=st.sampled_from(["f32", "bf16"]),
)
def test_every_layout_computes_the_replicated_lookup(
    world, blocks, length, pooling, layout, element
):
    """Table parallelism, row- and column-sliced tables and a batch split,
    each finished by its collective, equal the replicated lookup."""
    t, r, d, b = (world * k for k in blocks)
    shape = (t, r, d, b, length)
    reference = program(shape, pooling, "replicated", "replicated", element)
    variant = program(shape, pooling, *layout, element)
    verdict = cc.equivalent(reference, variant, world)
    assert verdict, verdict.first_difference


def test_a_wrong_rule_is_caught():
    """The oracle is not vacuous: the row-sliced partials combined by max
    instead of sum differ from the replicated lookup."""
    shape = (4, 8, 4, 4, 3)
    reference = program(shape, "sum", "replicated", "replicated")
    wrong = cc.parse(
        str(program(shape, "sum", "sliced<1>", "replicated")).replace(
            "reduction = sum", "reduction = max"
        )
    )
    assert not cc.equivalent(reference, wrong, 4)


def test_an_index_out_of_range_is_an_error_naming_the_table_and_bag():
    module = program((2, 4, 2, 2, 2), "sum", "sliced<0>", "sliced<0>")
    tables = np.zeros((2, 4, 2), np.float32)
    indices = np.array([[[0, 1], [2, 3]], [[3, 0], [1, 4]]], np.int32)
    with pytest.raises(cc.CocoError) as err:
        cc.interpret(module, 2, inputs={"lookup.arg0": tables, "lookup.arg1": indices})
    message = str(err.value)
    assert "'coco.embedding' op index 4 of table 1 (bag 1, position 1)" in message
    assert "is out of range [0, 4)" in message
    assert message.startswith("<input>:3:3: error:")


def test_a_negative_index_is_an_error():
    module = program((2, 4, 2, 2, 2), "max", "replicated", "sliced<1>")
    indices = np.zeros((2, 2, 2), np.int32)
    indices[0, 1, 0] = -1
    inputs = {"lookup.arg0": np.zeros((2, 4, 2), np.float32), "lookup.arg1": indices}
    with pytest.raises(
        cc.CocoError, match=r"index -1 of table 0 \(bag 1, position 0\)"
    ):
        cc.interpret(module, 2, inputs=inputs)
