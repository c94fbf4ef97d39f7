"""The norm-layer ops in the interpreter (docs/dialect.md, "Norm layers"):
keep-dims reductions, transpose, reshape and splat constants give the global
values numpy gives, on every layout and on 2, 4 and 8 ranks; LayerNorm and
RMSNorm as `cc.layer_norm` / `cc.rms_norm` write them equal
`torch.nn.functional`'s formulas."""

from __future__ import annotations

import numpy as np
import pytest
from norm_programs import norm_program, ops_program

import coconet_ir as cc

WORLDS = (2, 4, 8)


@pytest.mark.parametrize("world", WORLDS)
def test_ops_give_numpy_global_values(world: int) -> None:
    run = cc.interpret(cc.module(ops_program()), world)
    x, h, c, loc = (run.inputs[f"ops.arg{k}"].astype(np.float64) for k in range(4))
    blocks = np.split(h, world, axis=1)
    expected = [
        x.sum(1, keepdims=True),
        np.stack([b.max(1, keepdims=True) for b in blocks]),
        h.sum(1, keepdims=True),
        x.T,
        np.transpose(c, (2, 0, 1)),
        x.reshape(128),
        h.reshape(8, 8, 2),
        loc.reshape(world, 4, 32),
        2 * x,
    ]
    outputs = [o.value.astype(np.float64) for o in run.outputs.values()]
    assert len(outputs) == len(expected)
    for k, (got, want) in enumerate(zip(outputs, expected)):
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"result {k}")


def test_a_sliced_transpose_keeps_each_ranks_block() -> None:
    """Transposing `sliced<0>` gives `sliced<1>`: rank r holds the transpose
    of its own rows (no data moves)."""
    run = cc.interpret(cc.module(ops_program()), 4)
    x = run.inputs["ops.arg0"]
    (result,) = [o for k, o in run.outputs.items() if k == "ops.result3"]
    assert result.type == cc.tensor([16, 8], cc.f32, cc.sliced(1))
    np.testing.assert_array_equal(result.value[:, :2], x[:2].T)


LAYOUTS = [cc.sliced(0), cc.sliced(1), cc.replicated]


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("element", ["f32", "bf16"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_layer_norm_and_rms_norm_match_torch_formulas(layout, element, world) -> None:
    run = cc.interpret(cc.module(norm_program(layout, element)), world, seed=world)
    x, w, b = (run.inputs[f"norms.arg{k}"].astype(np.float64) for k in range(3))
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    layer = (x - mean) / np.sqrt(variance + 1e-5) * w + b
    rms = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w
    tolerance = 1e-5 if element == "f32" else 1e-2
    for got, want in zip(run.outputs.values(), (layer, rms)):
        assert got.type.element_type == cc.tensor([1], element, cc.local).element_type
        np.testing.assert_allclose(
            got.value.astype(np.float64), want, rtol=tolerance, atol=tolerance
        )


def test_a_norm_over_a_sliced_dim_sums_across_ranks() -> None:
    """With the hidden dim cut across ranks, each partial sum is completed by
    an all_reduce (the only communication of a norm); rows cut across ranks
    need none."""
    for layout, all_reduces in ((cc.sliced(1), 3), (cc.sliced(0), 0)):
        module = cc.module(norm_program(layout, "f32"))
        names = [op.name for op in module.walk()]
        assert names.count("coco.all_reduce") == all_reduces


def test_a_wrong_norm_is_caught_at_model_width() -> None:
    """The oracle is sound both ways at a model's width (H = 4096): the
    biased variance passes, the unbiased one (a realistic slip) fails."""
    run = cc.interpret(cc.module(norm_program(cc.sliced(0), "f32", 4096)), 4)
    x, w, b = (run.inputs[f"norms.arg{k}"].astype(np.float64) for k in range(3))
    mean = x.mean(-1, keepdims=True)
    got = next(iter(run.outputs.values())).value.astype(np.float64)
    for ddof, agrees in ((0, True), (1, False)):
        variance = x.var(-1, keepdims=True, ddof=ddof)
        want = (x - mean) / np.sqrt(variance + 1e-5) * w + b
        assert np.allclose(got, want, rtol=1e-5, atol=1e-5) == agrees


def test_layer_norm_names_its_result_and_rejects_a_bad_dim() -> None:
    @cc.function
    def named(x: cc.tensor([8, 16], cc.f32, cc.sliced(0))):
        return cc.layer_norm(x, name="ln")

    text = cc.to_text(cc.module(named))
    assert "%ln = coco.mul" in text and '{name = "ln"}' in text
    with pytest.raises(cc.CocoError, match=r"'cc.layer_norm' op dim 2 is out of range"):

        @cc.function
        def bad(x: cc.tensor([8, 16], cc.f32, cc.sliced(0))):
            return cc.layer_norm(x, dim=2)
