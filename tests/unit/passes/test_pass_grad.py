"""coco-grad: the derived backward against finite differences of the forward,
on the interpreter, on 2, 4 and 8 ranks (docs/passes/coco-grad.md).

The oracle: for random inputs `x`, a random direction `v` of every
floating-point argument and random cotangents `dy` of the results, the
backward's gradients `g = f_grad(x, dy)` must satisfy
`sum <g, v> = sum <dy, (f(x + eps v) - f(x - eps v)) / 2 eps>` (central
differences in f64). Both sides sum over global values (per-rank values for
local ones), so a gradient off by a factor N, missing an all_reduce, cut
along the wrong dim or sent to the wrong rank makes them differ.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import StageBuilder, run_steps, scaled_examples
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp

import coconet_ir as cc
from coconet_ir.diagnostics import CocoError
from coconet_ir.dialects import coco
from coconet_ir.dialects.coco import TensorType
from coconet_ir.interpreter.inputs import draw_inputs, fed_shape
from coconet_ir.passes.grad import NotDifferentiable, backward_function, differentiable
from coconet_ir.pipeline import Pipeline

f64, R, L = cc.f64, cc.replicated, cc.local
S = cc.sliced
WORLDS = (2, 4, 8)
EPS = 1e-6


def directional(
    module: ModuleOp, world: int, seed: int = 0, scale: float = 1.0
) -> tuple[float, float]:
    """`(sum <g, v>, sum <dy, finite difference>)` for the module's one
    function (see the module docstring); `scale` sizes the inputs."""
    (forward,) = [f for f in module.ops if isinstance(f, FuncOp)]
    name = forward.sym_name.data
    backward = cc.grad(module)
    cc.verify(backward)
    (func,) = backward.ops
    assert isinstance(func, FuncOp)
    args = forward.body.block.args
    assert list(func.function_type.outputs.data) == [
        a.type for a in args if differentiable(a.type)
    ], "a gradient must have its argument's type (layout included)"
    rng = np.random.default_rng(seed)
    x = {
        k: v * scale if v.dtype.kind == "f" else v
        for k, v in draw_inputs(module, world, seed).items()
    }
    args = forward.body.block.args
    v = {
        f"{name}.arg{i}": rng.standard_normal(x[f"{name}.arg{i}"].shape)
        for i, a in enumerate(args)
        if differentiable(a.type)
    }
    returned = forward.body.block.last_op
    assert isinstance(returned, ReturnOp)
    seeded = [
        (j, r.type) for j, r in enumerate(returned.operands) if differentiable(r.type)
    ]
    dy = [rng.standard_normal(fed_shape(t, world)) for _, t in seeded]

    feed = {f"{name}_grad.arg{i}": x[f"{name}.arg{i}"] for i in range(len(args))}
    for k, d in enumerate(dy):
        feed[f"{name}_grad.arg{len(args) + k}"] = d
    grads = cc.interpret(backward, world, inputs=feed)
    analytic = 0.0
    for k, key in enumerate(v):
        analytic += float(np.sum(grads[f"{name}_grad.result{k}"] * v[key]))

    def run(sign: float) -> list[np.ndarray]:
        moved = {k: x[k] + sign * EPS * v[k] if k in v else x[k] for k in x}
        out = cc.interpret(module, world, inputs=moved)
        return [out[f"{name}.result{j}"] for j, _ in seeded]

    numeric = sum(
        float(np.sum(d * (p - m) / (2 * EPS))) for d, p, m in zip(dy, run(1), run(-1))
    )
    return analytic, numeric


def assert_gradients(module: ModuleOp, worlds=WORLDS, scale: float = 1.0) -> None:
    for world in worlds:
        analytic, numeric = directional(module, world, seed=world, scale=scale)
        assert analytic == pytest.approx(numeric, rel=1e-5, abs=1e-6), (
            f"world {world}: gradient {analytic} but finite differences {numeric}"
        )


# -- one program per rule -------------------------------------------------------


@cc.function
def megatron_mlp(
    x: cc.tensor([8, 16], f64, R),
    w1: cc.tensor([16, 32], f64, S(1)),
    w2: cc.tensor([32, 16], f64, S(0)),
    b2: cc.tensor([16], f64, R),
):
    """The training example's block: column- then row-parallel, all_reduce."""
    h = cc.gelu(cc.matmul(x, w1))
    return cc.all_reduce(cc.matmul(h, w2), "sum") + b2 + x


@cc.function
def sequence_parallel(
    x: cc.tensor([16, 8], f64, S(0)), w: cc.tensor([8, 16], f64, S(1))
):
    """all_gather -> column-parallel matmul -> reduce_scatter after a
    row-parallel one: Megatron's sequence parallelism."""
    full = cc.all_gather(x)
    h = cc.tanh(cc.matmul(full, w))
    back = cc.matmul(h, cc.transpose(w, [1, 0]))  # sliced<1> x sliced<0>: local
    return cc.reduce_scatter(back, "sum", 0)


@cc.function
def data_parallel(
    x: cc.tensor([16, 8], f64, S(0)),
    w: cc.tensor([8, 8], f64, R),
    b: cc.tensor([8], f64, R),
):
    """Rows cut across ranks, replicated weights: their gradient is partial
    on every rank and all-reduced once."""
    y = cc.relu(cc.matmul(x, w) + b)
    return cc.all_reduce(cc.reduce(y * y, "sum", [0, 1]), "sum")


@cc.function
def gather_partial(x: cc.tensor([16, 8], f64, S(0)), m: cc.tensor([16, 8], f64, L)):
    """all_gather whose cotangent is partial (the result feeds a local
    product): its transpose is a reduce_scatter."""
    return cc.all_gather(x) * m


@cc.function
def elementwise(
    a: cc.tensor([8, 16], f64, S(1)),
    b: cc.tensor([16], f64, R),
    c: cc.tensor([8, 1], f64, R),
    s: cc.tensor([], f64, R),
):
    """Every elementwise rule, broadcasting along sliced and replicated dims."""
    pos = cc.abs(a) + 1.0
    y = (a * b - c) / (pos + s * s)
    y = cc.maximum(y, c) + cc.minimum(a, b) + pos ** cc.tanh(b)
    y = y + cc.sqrt(pos) + cc.rsqrt(pos) + cc.exp(cc.tanh(a)) + cc.log(pos)
    y = cc.select(a > b, y, -y) + cc.gelu(a) + cc.relu(a - 0.25)
    return cc.dropout(y, 0.25, seed=3)


@cc.function
def reductions(a: cc.tensor([8, 16], f64, S(0)), b: cc.tensor([8, 16], f64, L)):
    """reduce sum/max with and without keep_dims, over the sliced dim and
    not, a norm, a transpose and a reshape."""
    partial = cc.reduce(a, "sum", [0])  # over the cut: local partial sums
    total = cc.all_reduce(partial, "sum")
    rows = cc.reduce(a, "max", [1], keep_dims=True)
    centred = cc.reshape(a - rows, [8, 4, 4])
    flat = cc.reshape(cc.transpose(centred, [1, 2, 0]), [16, 8])
    m = cc.reduce(b, "max", [0]) + cc.norm(b) * cc.reduce(b, "sum", [1], keep_dims=True)
    return total, flat, m


@cc.function
def relayout(a: cc.tensor([8, 16], f64, S(0)), r: cc.tensor([8, 16], f64, R)):
    """all_to_all, all_slice, shift and an all_reduce of a replicated value
    (N times it)."""
    moved = cc.all_to_all(a, 1) * cc.all_slice(r, 1)
    return cc.shift(moved, 1), cc.all_reduce(r * r, "sum")


@cc.function
def extrema(a: cc.tensor([8, 16], f64, L), r: cc.tensor([16], f64, R)):
    """all_reduce max/min of local and replicated values; ties split evenly
    (a relu'd operand ties at 0 on many ranks)."""
    top = cc.all_reduce(cc.relu(a), "max") * cc.all_reduce(a, "min")
    return top + cc.all_reduce(r, "max") * cc.reduce(
        cc.relu(a - 1.0), "max", [1], keep_dims=True
    )


BUCKET = cc.parse("""
func.func @bucket(%a: !coco.tensor<16xf64, local>, %b: !coco.tensor<8x8xf64, local>)
    -> (!coco.tensor<16xf64, replicated>, !coco.tensor<8x8xf64, replicated>) {
  %sq = coco.mul %a, %a : (!coco.tensor<16xf64, local>, !coco.tensor<16xf64, local>) -> !coco.tensor<16xf64, local>
  %t = coco.tanh %b : (!coco.tensor<8x8xf64, local>) -> !coco.tensor<8x8xf64, local>
  %flat = coco.concat %sq, %t : (!coco.tensor<16xf64, local>, !coco.tensor<8x8xf64, local>) -> !coco.tensor<80xf64, local>
  %sum = coco.all_reduce %flat reduction = sum : !coco.tensor<80xf64, local> -> !coco.tensor<80xf64, replicated>
  %x, %y = coco.split %sum : (!coco.tensor<80xf64, replicated>) -> (!coco.tensor<16xf64, replicated>, !coco.tensor<8x8xf64, replicated>)
  func.return %x, %y : !coco.tensor<16xf64, replicated>, !coco.tensor<8x8xf64, replicated>
}
""")  # noqa: E501
"""concat -> all_reduce -> split: the bucketed gradient all_reduce."""


@cc.function
def batched(x: cc.tensor([8, 4, 16], f64, S(0)), w: cc.tensor([16, 8], f64, R)):
    """A matmul of a batched operand: the weights' gradient flattens the
    batch dims into the rows."""
    return cc.all_gather(cc.matmul(x, w))


@cc.function
def unused(
    x: cc.tensor([8], f64, L), y: cc.tensor([8], f64, S(0)), z: cc.tensor([8], f64, R)
):
    """Arguments no result depends on get zero gradients of their layout."""
    return cc.all_reduce(x, "sum") * 0.0 + 1.0


RULE_PROGRAMS = [
    megatron_mlp,
    sequence_parallel,
    data_parallel,
    gather_partial,
    elementwise,
    reductions,
    relayout,
    extrema,
    batched,
    unused,
]


@pytest.mark.parametrize("program", RULE_PROGRAMS, ids=lambda f: f.name)
def test_gradient_matches_finite_differences(program):
    assert_gradients(program.module)


LOCAL_PIECES = cc.parse("""
func.func @pieces(%a: !coco.tensor<16xf64, local>, %b: !coco.tensor<8x8xf64, local>) -> (!coco.tensor<16xf64, replicated>, !coco.tensor<8x8xf64, local>) {
  %flat = coco.concat %a, %b : (!coco.tensor<16xf64, local>, !coco.tensor<8x8xf64, local>) -> !coco.tensor<80xf64, local>
  %x, %y, %z = coco.split %flat : (!coco.tensor<80xf64, local>) -> (!coco.tensor<16xf64, local>, !coco.tensor<56xf64, local>, !coco.tensor<8xf64, local>)
  %s = coco.all_reduce %x reduction = sum : !coco.tensor<16xf64, local> -> !coco.tensor<16xf64, replicated>
  %t = coco.mul %b, %b : (!coco.tensor<8x8xf64, local>, !coco.tensor<8x8xf64, local>) -> !coco.tensor<8x8xf64, local>
  func.return %s, %t : !coco.tensor<16xf64, replicated>, !coco.tensor<8x8xf64, local>
}
""")  # noqa: E501
"""A local bucket: one piece's cotangent replicated (an all_reduce's), two
pieces without one (zeros of the local layout)."""


@pytest.mark.parametrize("module", [BUCKET, LOCAL_PIECES], ids=["bucket", "local"])
def test_bucket_gradient_matches_finite_differences(module):
    assert_gradients(module)


def test_gradient_at_model_sizes():
    """K = 2048: a column- then row-parallel block at a width models have."""

    @cc.function
    def block(
        x: cc.tensor([4, 2048], f64, R),
        w1: cc.tensor([2048, 512], f64, S(1)),
        w2: cc.tensor([512, 2048], f64, S(0)),
    ):
        return cc.all_reduce(cc.matmul(cc.gelu(cc.matmul(x, w1)), w2), "sum")

    assert_gradients(block.module, worlds=(8,), scale=0.05)


def test_wrong_gradient_fails_the_oracle(monkeypatch):
    """The oracle fails a realistic one-line bug: the transpose of an
    all_gather slicing a partial cotangent instead of reduce-scattering it."""
    from coconet_ir.passes import grad

    original = grad.Backward.contribute

    def slicing(self, v, value, partial=False):
        if (
            coco.tensor_type(value).layout.is_local
            and coco.tensor_type(v).layout.is_sliced
        ):
            value = self.emit(
                coco.AllSliceOp(self.emit(coco.AllReduceOp(value, "sum")), 0)
            )
            value = self.scale(value, 0.5)
        original(self, v, value, partial)

    monkeypatch.setattr(grad.Backward, "contribute", slicing)
    with pytest.raises(AssertionError, match="finite differences"):
        assert_gradients(gather_partial.module, worlds=(2, 4))


# -- the training example's block ------------------------------------------------


GELU_C, GELU_K = 0.7978845608, 0.044715


def gelu_grad(h):
    """d gelu(h) / dh, written by hand."""
    t = cc.tanh(GELU_C * (h + GELU_K * h * h * h))
    return 0.5 * (1.0 + t) + 0.5 * h * (1.0 - t * t) * GELU_C * (
        1.0 + 3.0 * GELU_K * h * h
    )


def handwritten_mlp_backward(T: int, H: int, F: int) -> cc.Function:
    """The tensor-parallel MLP block's backward as one writes it by hand
    (Megatron-LM): the saved `h`, the matmuls transposed, one all_reduce."""

    @cc.function
    def backward(
        dy: cc.tensor([T, H], cc.f32, R),
        x: cc.tensor([T, H], cc.f32, R),
        w1: cc.tensor([H, F], cc.f32, S(1)),
        w2: cc.tensor([F, H], cc.f32, S(0)),
    ):
        h = cc.matmul(x, w1)
        db2 = cc.reduce(dy, "sum", [0])
        dh = cc.matmul(dy, cc.transpose(w2)) * gelu_grad(h)
        dw2 = cc.matmul(cc.transpose(cc.gelu(h)), dy)
        dw1 = cc.matmul(cc.transpose(x), dh)
        dx = cc.all_reduce(cc.matmul(dh, cc.transpose(w1)), "sum") + dy
        return dx, dw1, dw2, db2

    return backward


def test_derived_backward_is_the_handwritten_one():
    """The training example's block: its derived backward and the one
    written by hand give the same gradients on 2, 4, 8 ranks, and the
    derived one has the Megatron shape: one all_reduce (the input's
    gradient), no other collective. A partial cotangent of an all_gather is
    reduce-scattered (not all-reduced and sliced)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[3] / "examples"))
    from tp_mlp_train import block

    forward = block(8, 16, 64)
    backward = handwritten_mlp_backward(8, 16, 64)
    derived = ModuleOp([backward_function(forward.func_op)])
    names = [op.name for op in derived.walk() if isinstance(op, coco.CollectiveOp)]
    assert names == ["coco.all_reduce"]
    kinds = {
        type(op)
        for op in backward_function(gather_partial.func_op).walk()
        if isinstance(op, coco.CollectiveOp)
    }  # the forward's all_gather recomputed, the partial cotangent reduce-scattered
    assert kinds == {coco.AllGatherOp, coco.ReduceScatterOp}
    for world in WORLDS:
        x = draw_inputs(forward.module, world, seed=world)
        dy = np.random.default_rng(world).standard_normal((8, 16)).astype(np.float32)
        hand = cc.interpret(
            backward.module,
            world,
            inputs={
                "backward.arg0": dy,
                "backward.arg1": x["mlp_block.arg0"],
                "backward.arg2": x["mlp_block.arg1"],
                "backward.arg3": x["mlp_block.arg2"],
            },
        )
        got = cc.interpret(
            derived,
            world,
            inputs={
                **{f"mlp_block_grad.arg{i}": x[f"mlp_block.arg{i}"] for i in range(4)},
                "mlp_block_grad.arg4": dy,
            },
        )
        for k in range(4):
            np.testing.assert_allclose(
                got[f"mlp_block_grad.result{k}"],
                hand[f"backward.result{k}"],
                rtol=1e-5,
                atol=1e-5,
            )


# -- random programs -----------------------------------------------------------------


def without_updates(func: FuncOp) -> None:
    """Turn every `coco.update %p, %v` into a result `%v` (the generator's
    optimizer steps, which have no gradient, as computations that do)."""
    returned = func.body.block.last_op
    assert isinstance(returned, ReturnOp)
    values = list(returned.operands)
    for op in list(func.body.block.ops):
        if isinstance(op, coco.UpdateOp):
            values.append(op.value)
            op.detach()
            op.erase()
    returned.operands = values
    func.function_type = type(func.function_type).from_lists(
        func.function_type.inputs.data, [v.type for v in values]
    )


@st.composite
def f64_programs(draw) -> ModuleOp:
    stage = StageBuilder(draw, "main", "f64")
    run_steps(stage, max_steps=5)
    func = stage.build()
    without_updates(func)
    module = ModuleOp([func])
    cc.verify(module)
    return module


def only_f64(module: ModuleOp) -> bool:
    """No value of a narrower float type (a mixed-precision round trip makes
    finite differences meaningless)."""
    for op in module.walk():
        for value in [*op.results, *op.operands]:
            t = value.type
            if (
                isinstance(t, TensorType)
                and differentiable(t)
                and t.element_type != f64
            ):
                return False
    return True


@settings(
    max_examples=scaled_examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(f64_programs())
def test_random_programs(module):
    assume(only_f64(module))
    (func,) = [f for f in module.ops if isinstance(f, FuncOp)]
    try:
        backward_function(func)
    except NotDifferentiable:
        assume(False)
    assert_gradients(module)


# -- the pass and its refusals -----------------------------------------------------


def test_pass_adds_the_backward_and_refuses_cleanly():
    module = megatron_mlp.module
    Pipeline("coco-grad").apply(module)
    assert [f.sym_name.data for f in module.ops] == [
        "megatron_mlp",
        "megatron_mlp_grad",
    ]
    with pytest.raises(CocoError, match="already has a @megatron_mlp_grad"):
        Pipeline("coco-grad{func=megatron_mlp}").apply(module)

    @cc.function
    def sgd(g: cc.tensor([16], f64, L), w: cc.tensor([16], f64, R)):
        cc.update(w, w - 0.1 * cc.all_reduce(g, "sum"))

    optimizer = sgd.module
    before = cc.to_text(optimizer)
    with pytest.raises(
        CocoError,
        match=r"'coco.update' op coco-grad cannot differentiate it: it updates a param",
    ):
        Pipeline("coco-grad").apply(optimizer)
    assert cc.to_text(optimizer) == before


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda x: cc.broadcast(x, 1), "'coco.broadcast' op .*rank K's alone"),
        (lambda x: cc.all_reduce(x, "prod"), "reduction = prod has no gradient"),
    ],
)
def test_refusals_name_the_op(build, message):
    @cc.function
    def f(x: cc.tensor([8], f64, L)):
        return build(x)

    with pytest.raises(NotDifferentiable, match=message) as info:
        backward_function(f.func_op)
    assert "test_pass_grad.py" in str(info.value)


def test_rank_dependent_cotangent_of_a_local_product_is_refused():
    @cc.function
    def f(a: cc.tensor([8, 16], f64, S(1)), b: cc.tensor([16, 8], f64, S(0))):
        return cc.matmul(a, b)  # local, and its cotangent is rank-dependent

    with pytest.raises(
        NotDifferentiable, match=r"'coco.matmul' op .*matmul table lacks"
    ):
        backward_function(f.func_op)


def test_optimized_programs_are_refused():
    module = megatron_mlp.module
    Pipeline("coco-optimize").apply(module)
    if not any(isinstance(op, coco.RegionOp) for op in module.walk()):
        pytest.skip("coco-optimize made no region of this program")
    with pytest.raises(CocoError, match="differentiate before coco-optimize"):
        Pipeline("coco-grad").apply(module)
