"""`coco.embedding` (docs/dialect.md): the interpreter's pooled lookup against
numpy's EmbeddingBag arithmetic, every layout of the table against the
replicated lookup on 2, 4 and 8 ranks (hypothesis draws the shapes), the
indices the inputs draw, and the out-of-range error."""

from __future__ import annotations

import numpy as np
import pytest
from embedding_programs import LAYOUTS, POOLINGS, embedding_bag, program
from hypothesis import given, settings
from hypothesis import strategies as st

import coconet_ir as cc
from coconet_ir.interpreter.inputs import draw_inputs


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
