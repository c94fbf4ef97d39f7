"""The builder DSL: types, operators, every op builder, scalar promotion,
errors and pipelines."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from helpers import EXAMPLES_DIR
from xdsl.dialects.builtin import IntegerAttr, StringAttr, i64
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Operation

import coconet_ir as cc
from coconet_ir import dsl
from coconet_ir.dialects import coco
from coconet_ir.ir import CocoError

R = cc.tensor([8, 16], cc.f32, cc.replicated)
L = cc.tensor([8, 16], cc.f32, cc.local)
S0 = cc.tensor([8, 16], cc.f32, cc.sliced(0))
S1 = cc.tensor([8, 16], cc.f32, cc.sliced(1))
SCALAR = cc.tensor([], cc.f32, cc.replicated)


def build(types: Sequence[coco.TensorType], body: Callable[..., Any]) -> FuncOp:
    """A function of the given argument types whose body is `body`."""

    def fn(*args: dsl.Value) -> Any:
        return body(*args)

    fn.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(f"a{i}", inspect.Parameter.POSITIONAL_ONLY, annotation=t)
            for i, t in enumerate(types)
        ]
    )
    return cc.function(fn).func_op


def body_ops(func: FuncOp) -> list[Operation]:
    """The ops of a function, without its func.return."""
    return [op for op in func.body.block.ops if not isinstance(op, ReturnOp)]


def last_op(func: FuncOp) -> Operation:
    return body_ops(func)[-1]


# ----------------------------------------------------------------------------
# Types and layouts
# ----------------------------------------------------------------------------


def test_tensor_is_the_coco_type() -> None:
    assert cc.tensor([4, 8], cc.f32, cc.sliced(1)) == coco.tensor(
        [4, 8], "f32", coco.LayoutAttr.sliced(1)
    )
    assert cc.tensor([], "bf16", "replicated") == coco.TensorType(
        [], cc.bf16, coco.REPLICATED
    )
    assert cc.tensor([8], cc.i32, "sliced<0>").layout == cc.sliced(0)
    assert cc.local == coco.LOCAL


def test_element_types() -> None:
    names = {"f16": cc.f16, "bf16": cc.bf16, "f32": cc.f32, "f64": cc.f64}
    names |= {"i32": cc.i32, "i1": cc.i1}
    assert names == coco.ELEMENT_TYPES


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: cc.tensor([8], "f8", cc.local), "unknown element type 'f8'"),
        (lambda: cc.tensor([8], cc.f32, cc.sliced(1)), "sliced<1> is out of range"),
        (lambda: cc.tensor([8], cc.f32, "striped"), "unknown layout 'striped'"),
        (lambda: cc.tensor([0], cc.f32, cc.local), "static .*positive"),
        (lambda: cc.sliced(-1), "dimension >= 0"),
    ],
)
def test_bad_types_raise_coco_errors(make: Callable[[], object], message: str) -> None:
    with pytest.raises(CocoError, match=message):
        make()


def test_value_properties() -> None:
    seen: list[dsl.Value] = []
    build([S1], seen.append)
    (x,) = seen
    assert x.type == S1
    assert x.shape == (8, 16)
    assert x.layout == cc.sliced(1)
    assert x.element_type == cc.f32
    assert x.rank == 2
    assert "a0" in repr(x)


# ----------------------------------------------------------------------------
# Operators
# ----------------------------------------------------------------------------

BINARY_OPERATORS = [
    (lambda a, b: a + b, coco.AddOp),
    (lambda a, b: a - b, coco.SubOp),
    (lambda a, b: a * b, coco.MulOp),
    (lambda a, b: a / b, coco.DivOp),
    (lambda a, b: a**b, coco.PowOp),
]


@pytest.mark.parametrize(("apply", "op_type"), BINARY_OPERATORS)
def test_binary_operators(apply: Callable[..., Any], op_type: type[Operation]) -> None:
    func = build([S0, cc.tensor([16], cc.f32, cc.replicated)], apply)
    op = last_op(func)
    assert isinstance(op, op_type)
    assert tuple(op.operands) == tuple(func.body.block.args)
    assert op.results[0].type == S0


@pytest.mark.parametrize(
    ("apply", "predicate"),
    [
        (lambda a, b: a < b, "lt"),
        (lambda a, b: a <= b, "le"),
        (lambda a, b: a > b, "gt"),
        (lambda a, b: a >= b, "ge"),
    ],
)
def test_comparison_operators(apply: Callable[..., Any], predicate: str) -> None:
    op = last_op(build([R, R], apply))
    assert isinstance(op, coco.CmpOp)
    assert op.predicate.data == predicate
    assert op.result.type == cc.tensor([8, 16], cc.i1, cc.replicated)


def test_equality_is_not_overloaded() -> None:
    def body(a: dsl.Value, b: dsl.Value) -> None:
        assert (a == b) is False
        assert (a == a) is True
        assert a != b

    assert body_ops(build([R, R], body)) == []


def test_matmul_and_negation_operators() -> None:
    w = cc.tensor([16, 4], cc.f32, cc.replicated)
    func = build([R, w], lambda a, b: -(a @ b))
    matmul, neg = body_ops(func)
    assert isinstance(matmul, coco.MatmulOp)
    assert isinstance(neg, coco.NegOp)
    assert neg.result.type == cc.tensor([8, 4], cc.f32, cc.replicated)


def test_values_have_no_truth_value() -> None:
    with pytest.raises(CocoError, match="no Python truth value"):
        build([R, R], lambda a, b: bool(a < b))


# ----------------------------------------------------------------------------
# Scalar promotion
# ----------------------------------------------------------------------------


def constant_of(op: Operation) -> tuple[float | int, coco.TensorType]:
    assert isinstance(op, coco.ConstantOp)
    assert isinstance(op.result.type, coco.TensorType)
    return op.python_value, op.result.type


def test_number_on_the_right_becomes_a_constant() -> None:
    func = build([S0], lambda x: x * 2)
    const, mul = body_ops(func)
    assert constant_of(const) == (2.0, SCALAR)
    assert isinstance(mul, coco.MulOp)
    assert mul.lhs == func.body.block.args[0]
    assert mul.rhs == const.results[0]


@pytest.mark.parametrize(
    ("apply", "op_type"),
    [
        (lambda x: 1 + x, coco.AddOp),
        (lambda x: 1 - x, coco.SubOp),
        (lambda x: 1 * x, coco.MulOp),
        (lambda x: 1 / x, coco.DivOp),
        (lambda x: 1**x, coco.PowOp),
    ],
)
def test_number_on_the_left_becomes_a_constant(
    apply: Callable[..., Any], op_type: type[Operation]
) -> None:
    func = build([R], apply)
    const, op = body_ops(func)
    assert constant_of(const)[0] == 1.0
    assert isinstance(op, op_type)
    assert tuple(op.operands) == (const.results[0], func.body.block.args[0])


@pytest.mark.parametrize(
    ("elt", "number", "value"),
    [(cc.f16, 0.5, 0.5), (cc.bf16, 3, 3.0), (cc.i32, 2, 2), (cc.f64, True, 1.0)],
)
def test_constant_takes_the_element_type(
    elt: Any, number: float, value: float | int
) -> None:
    x_type = cc.tensor([8], elt, cc.local)
    const = body_ops(build([x_type], lambda x: x + number))[0]
    assert constant_of(const) == (value, cc.tensor([], elt, cc.replicated))


def test_numpy_scalars_promote() -> None:
    np = pytest.importorskip("numpy")
    const, op = body_ops(build([R], lambda x: np.float32(0.25) * x))
    assert constant_of(const)[0] == 0.25
    assert isinstance(op, coco.MulOp)


def test_fractional_number_with_integer_tensor_is_an_error() -> None:
    x_type = cc.tensor([8], cc.i32, cc.replicated)
    with pytest.raises(CocoError, match=r"'coco.constant' op 0.5 is not an integer"):
        build([x_type], lambda x: x * 0.5)


def test_two_numbers_are_not_an_op() -> None:
    with pytest.raises(CocoError, match=r"'coco.max' op needs at least one coco value"):
        build([], lambda: cc.maximum(1.0, 2.0))


# ----------------------------------------------------------------------------
# Every builder
# ----------------------------------------------------------------------------

I1 = cc.tensor([8, 16], cc.i1, cc.replicated)

# id, argument types, body(*args, **name), op type, result type, text in the op
BUILDERS: list[
    tuple[str, list[coco.TensorType], Callable[..., Any], type, Any, str]
] = [
    ("add", [R, R], lambda a, b, **k: cc.add(a, b, **k), coco.AddOp, R, ""),
    ("sub", [R, R], lambda a, b, **k: cc.sub(a, b, **k), coco.SubOp, R, ""),
    ("mul", [R, L], lambda a, b, **k: cc.mul(a, b, **k), coco.MulOp, L, ""),
    ("div", [S0, R], lambda a, b, **k: cc.div(a, b, **k), coco.DivOp, S0, ""),
    ("maximum", [R, R], lambda a, b, **k: cc.maximum(a, b, **k), coco.MaxOp, R, ""),
    ("minimum", [R, R], lambda a, b, **k: cc.minimum(a, b, **k), coco.MinOp, R, ""),
    ("pow", [R, R], lambda a, b, **k: cc.pow(a, b, **k), coco.PowOp, R, ""),
    ("neg", [R], lambda a, **k: cc.neg(a, **k), coco.NegOp, R, ""),
    ("abs", [L], lambda a, **k: cc.abs(a, **k), coco.AbsOp, L, ""),
    ("sqrt", [R], lambda a, **k: cc.sqrt(a, **k), coco.SqrtOp, R, ""),
    ("rsqrt", [R], lambda a, **k: cc.rsqrt(a, **k), coco.RsqrtOp, R, ""),
    ("exp", [R], lambda a, **k: cc.exp(a, **k), coco.ExpOp, R, ""),
    ("log", [R], lambda a, **k: cc.log(a, **k), coco.LogOp, R, ""),
    ("tanh", [R], lambda a, **k: cc.tanh(a, **k), coco.TanhOp, R, ""),
    ("relu", [S1], lambda a, **k: cc.relu(a, **k), coco.ReluOp, S1, ""),
    ("gelu", [R], lambda a, **k: cc.gelu(a, **k), coco.GeluOp, R, ""),
    (
        "cmp",
        [R, R],
        lambda a, b, **k: cc.cmp(a, b, "eq", **k),
        coco.CmpOp,
        I1,
        "predicate = eq",
    ),
    (
        "select",
        [I1, R, S0],
        lambda c, a, b, **k: cc.select(c, a, b, **k),
        coco.SelectOp,
        S0,
        "",
    ),
    (
        "convert",
        [R],
        lambda a, **k: cc.convert(a, cc.bf16, **k),
        coco.ConvertOp,
        cc.tensor([8, 16], cc.bf16, cc.replicated),
        "",
    ),
    (
        "constant",
        [],
        lambda **k: cc.constant(0.9, cc.f64, **k),
        coco.ConstantOp,
        cc.tensor([], cc.f64, cc.replicated),
        "coco.constant 9.000000e-01",
    ),
    (
        "dropout",
        [S0],
        lambda a, **k: cc.dropout(a, 0.25, seed=3, **k),
        coco.DropoutOp,
        S0,
        "p = 2.500000e-01 seed = 3",
    ),
    (
        "reduce",
        [S0],
        lambda a, **k: cc.reduce(a, "max", [1], **k),
        coco.ReduceOp,
        cc.tensor([8], cc.f32, cc.sliced(0)),
        "kind = max dims = [1]",
    ),
    (
        "reduce_all_dims",
        [S0],
        lambda a, **k: cc.reduce(a, **k),
        coco.ReduceOp,
        cc.tensor([], cc.f32, cc.local),
        "kind = sum dims = [0, 1]",
    ),
    (
        "reduce_keep_dims",
        [S0],
        lambda a, **k: cc.reduce(a, "sum", 1, keep_dims=True, **k),
        coco.ReduceOp,
        cc.tensor([8, 1], cc.f32, cc.sliced(0)),
        "kind = sum dims = [1] keep_dims",
    ),
    (
        "transpose",
        [S0],
        lambda a, **k: cc.transpose(a, **k),
        coco.TransposeOp,
        cc.tensor([16, 8], cc.f32, cc.sliced(1)),
        "perm = [1, 0]",
    ),
    (
        "reshape",
        [S1],
        lambda a, **k: cc.reshape(a, [8, 4, 4], **k),
        coco.ReshapeOp,
        cc.tensor([8, 4, 4], cc.f32, cc.sliced(1)),
        "-> !coco.tensor<8x4x4xf32, sliced<1>>",
    ),
    (
        "splat_constant",
        [],
        lambda **k: cc.constant(1, cc.bf16, shape=[4, 2], **k),
        coco.ConstantOp,
        cc.tensor([4, 2], cc.bf16, cc.replicated),
        "coco.constant 1.000000e+00 : !coco.tensor<4x2xbf16, replicated>",
    ),
    (
        "layer_norm",
        [
            S0,
            cc.tensor([16], cc.f32, cc.replicated),
            cc.tensor([16], cc.f32, cc.replicated),
        ],
        lambda a, w, b, **k: cc.layer_norm(a, w, b, **k),
        coco.AddOp,
        S0,
        "",
    ),
    (
        "rms_norm",
        [cc.tensor([8, 16], cc.bf16, cc.sliced(1))],
        lambda a, **k: cc.rms_norm(a, **k),
        coco.ConvertOp,
        cc.tensor([8, 16], cc.bf16, cc.sliced(1)),
        "",
    ),
    (
        "norm",
        [L],
        lambda a, **k: cc.norm(a, **k),
        coco.NormOp,
        cc.tensor([], cc.f32, cc.local),
        "",
    ),
    (
        "matmul",
        [S0, cc.tensor([16, 4], cc.f32, cc.replicated)],
        lambda a, b, **k: cc.matmul(a, b, **k),
        coco.MatmulOp,
        cc.tensor([8, 4], cc.f32, cc.sliced(0)),
        "",
    ),
    (
        "batch_matmul",
        [
            cc.tensor([8, 6, 16], cc.f32, cc.sliced(0)),
            cc.tensor([8, 16, 4], cc.f32, cc.sliced(0)),
        ],
        lambda a, b, **k: cc.batch_matmul(a, b, **k),
        coco.BatchMatmulOp,
        cc.tensor([8, 6, 4], cc.f32, cc.sliced(0)),
        "",
    ),
    (
        "embedding",
        [
            cc.tensor([8, 10, 4], cc.f32, cc.sliced(0)),
            cc.tensor([8, 6, 3], cc.i32, cc.replicated),
        ],
        lambda a, b, **k: cc.embedding(a, b, "mean", **k),
        coco.EmbeddingOp,
        cc.tensor([8, 6, 4], cc.f32, cc.sliced(0)),
        "pooling = mean",
    ),
    (
        "all_slice",
        [R],
        lambda a, **k: cc.all_slice(a, 1, **k),
        coco.AllSliceOp,
        S1,
        "dim = 1",
    ),
    (
        "update",
        [R, R],
        lambda a, b, **k: cc.update(a, b, **k),
        coco.UpdateOp,
        None,
        "coco.update",
    ),
    (
        "all_reduce",
        [L],
        lambda a, **k: cc.all_reduce(a, "max", **k),
        coco.AllReduceOp,
        R,
        "reduction = max",
    ),
    (
        "reduce_scatter",
        [L],
        lambda a, **k: cc.reduce_scatter(a, "sum", 1, **k),
        coco.ReduceScatterOp,
        S1,
        "reduction = sum dim = 1",
    ),
    (
        "all_gather",
        [S1],
        lambda a, **k: cc.all_gather(a, **k),
        coco.AllGatherOp,
        R,
        "",
    ),
    (
        "broadcast",
        [L],
        lambda a, **k: cc.broadcast(a, 3, **k),
        coco.BroadcastOp,
        R,
        "root = 3",
    ),
    (
        "all_to_all",
        [S0],
        lambda a, **k: cc.all_to_all(a, 1, **k),
        coco.AllToAllOp,
        S1,
        "dim = 1",
    ),
    (
        "shift",
        [S0],
        lambda a, **k: cc.shift(a, -1, **k),
        coco.ShiftOp,
        S0,
        "by = -1",
    ),
]


@pytest.mark.parametrize(
    ("types", "body", "op_type", "result", "text"),
    [case[1:] for case in BUILDERS],
    ids=[case[0] for case in BUILDERS],
)
def test_builder(
    types: list[coco.TensorType],
    body: Callable[..., Any],
    op_type: type,
    result: coco.TensorType | None,
    text: str,
) -> None:
    func = build(types, body)
    op = last_op(func)
    assert type(op) is op_type
    assert [r.type for r in op.results] == ([result] if result else [])
    assert text in str(op)
    assert "name" not in op.attributes


@pytest.mark.parametrize(
    ("types", "body"),
    [case[1:3] for case in BUILDERS],
    ids=[case[0] for case in BUILDERS],
)
def test_builder_names_its_op(
    types: list[coco.TensorType], body: Callable[..., Any]
) -> None:
    op = last_op(build(types, lambda *args: body(*args, name="stage_x")))
    assert op.attributes["name"] == StringAttr("stage_x")
    for result in op.results:
        assert result.name_hint == "stage_x"


def test_every_builder_is_tested() -> None:
    tested = {case[0] for case in BUILDERS} | {"send", "recv"}
    not_ops = {"function", "module", "tensor", "sliced"}
    builders = {
        name
        for name in dsl.__all__
        if callable(getattr(dsl, name)) and name.islower() and name not in not_ops
    }
    assert builders <= tested


def test_dsl_names_are_package_attributes() -> None:
    for name in dsl.__all__:
        assert getattr(cc, name) is getattr(dsl, name)


# ----------------------------------------------------------------------------
# Functions and modules
# ----------------------------------------------------------------------------

SGD_TEXT = """
func.func @sgd(%g: !coco.tensor<1024xf32, local>,
               %w: !coco.tensor<1024xf32, replicated>,
               %lr: !coco.tensor<f32, replicated>) {
  %s = coco.all_reduce %g reduction = sum {name = "sum"} : !coco.tensor<1024xf32, local> -> !coco.tensor<1024xf32, replicated>
  %d = coco.mul %lr, %s : (!coco.tensor<f32, replicated>, !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated>
  %w1 = coco.sub %w, %d : (!coco.tensor<1024xf32, replicated>, !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated>
  coco.update %w, %w1 : !coco.tensor<1024xf32, replicated>
  func.return
}
"""  # noqa: E501


@cc.function
def sgd(
    g: cc.tensor([1024], cc.f32, cc.local),
    w: cc.tensor([1024], cc.f32, cc.replicated),
    lr: cc.tensor([], cc.f32, cc.replicated),
):
    s = cc.all_reduce(g, "sum", name="sum")
    cc.update(w, w - lr * s)


def test_sgd_reads_as_in_the_paper() -> None:
    module = cc.module(sgd)
    assert module.is_structurally_equivalent(cc.parse(SGD_TEXT))
    assert sgd.module.is_structurally_equivalent(module)
    assert sgd.name == "sgd"
    text = cc.to_text(module)
    assert "func.func @sgd(%g: !coco.tensor<1024xf32, local>" in text
    assert '%sum = coco.all_reduce %g reduction = sum {name = "sum"}' in text
    assert cc.parse(text).is_structurally_equivalent(module)


def test_each_module_gets_its_own_copy() -> None:
    first, second = cc.module(sgd), sgd.module
    assert first.body.block.first_op is not second.body.block.first_op
    assert first.body.block.first_op is not sgd.func_op


def test_returned_values_become_results() -> None:
    @cc.function
    def two(x: cc.tensor([8], cc.f32, cc.local)):
        y = cc.all_reduce(x)
        return y, x

    ret = two.func_op.body.block.last_op
    assert isinstance(ret, ReturnOp)
    assert ret.operands[1] == two.func_op.body.block.args[0]
    assert list(two.func_op.function_type.outputs) == [
        cc.tensor([8], cc.f32, cc.replicated),
        cc.tensor([8], cc.f32, cc.local),
    ]


def test_function_can_be_renamed() -> None:
    @cc.function(name="step")
    def f(x: cc.tensor([8], cc.f32, cc.replicated)):
        return cc.exp(x)

    assert f.func_op.sym_name == StringAttr("step")
    assert f.name == "step"


def test_string_annotations_are_evaluated() -> None:
    @cc.function
    def f(x: cc.tensor([8], cc.f32, cc.replicated)):
        return x

    assert f.func_op.function_type.inputs.data[0] == cc.tensor(
        [8], cc.f32, cc.replicated
    )


def test_string_annotations_see_local_names() -> None:
    local_type = cc.tensor([8], cc.f32, cc.local)

    @cc.function
    def f(x: local_type):
        return x

    assert list(f.func_op.function_type.inputs) == [local_type]


def test_unknown_annotation_name_is_an_error() -> None:
    with pytest.raises(CocoError, match="cannot evaluate the annotations of f"):

        @cc.function
        def f(x: no_such_type):  # noqa: F821
            return x


def test_missing_annotation_is_an_error() -> None:
    with pytest.raises(CocoError, match="parameter 'x' of f must be annotated"):

        @cc.function
        def f(x):  # type: ignore[no-untyped-def]
            return x


def test_world_size_checks_sliced_dims() -> None:
    @cc.function
    def f(x: cc.tensor([12], cc.f32, cc.sliced(0))):
        return cc.all_gather(x)

    assert cc.module(f, world_size=4).attributes["coco.world_size"] == IntegerAttr(
        4, i64
    )
    with pytest.raises(CocoError, match="not divisible by the world size 8"):
        cc.module(f, world_size=8)


def test_module_rejects_duplicate_functions() -> None:
    with pytest.raises(CocoError, match="two functions named @sgd"):
        cc.module(sgd, sgd)


# ----------------------------------------------------------------------------
# Errors
# ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("types", "body", "message"),
    [
        (
            [L, S0],
            lambda a, b: a + b,
            "'coco.add' op .*local operand .*sliced",
        ),
        (
            [S0],
            lambda a: cc.all_reduce(a),
            "'coco.all_reduce' op operand must be local or replicated, got sliced<0>",
        ),
        (
            [R],
            lambda a: cc.reduce_scatter(a),
            "'coco.reduce_scatter' op operand must be local, got replicated",
        ),
        (
            [L, cc.tensor([16, 4], cc.f32, cc.sliced(0))],
            lambda a, b: a @ b,
            "'coco.matmul' op has no layout rule for lhs local and rhs sliced<0>",
        ),
        (
            [S0],
            lambda a: cc.norm(a),
            "'coco.norm' op operand must be replicated or local",
        ),
        (
            [R, cc.tensor([8, 16], cc.f16, cc.replicated)],
            lambda a, b: a * b,
            "'coco.mul' op operands must have the same element type",
        ),
        (
            [R],
            lambda a: cc.all_slice(a, 2),
            "'coco.all_slice' op .*2 is out of range .*rank 2",
        ),
        (
            [R],
            lambda a: cc.all_reduce(a, "avg"),
            "'coco.all_reduce' op 'avg' is not a valid ReductionKind",
        ),
        (
            [R, L],
            lambda a, b: cc.update(a, b),
            "'coco.update' op value type .* must equal the parameter type",
        ),
        (
            [R],
            lambda a: cc.update(a + 1.0, a),
            "'coco.update' op parameter must be an argument of the enclosing function",
        ),
        ([R], lambda a: cc.sqrt(2.0), "'coco.sqrt' op operand must be a coco value"),
        ([R], lambda a: cc.send(a, 3), "'coco.send' op the stage must be a function"),
        ([R], lambda a: cc.cmp(a, a, "gtx"), "'coco.cmp' op 'gtx' is not a valid"),
    ],
)
def test_broken_rules_raise_coco_errors(
    types: list[coco.TensorType], body: Callable[..., Any], message: str
) -> None:
    with pytest.raises(CocoError, match=message) as info:
        build(types, body)
    assert str(info.value).startswith(f"{__file__}:")
    assert " op op " not in str(info.value)
    assert info.value.__cause__ is None
    assert info.value.__context__ is None or info.value.__suppress_context__


def test_a_failed_op_leaves_no_trace() -> None:
    seen: list[dsl.Value] = []

    def body(a: dsl.Value) -> None:
        seen.append(a + 1.0)
        cc.update(seen[0], a)  # fails once inserted: not a function argument

    with pytest.raises(CocoError, match=r"'coco.update' op"):
        build([R], body)
    assert not seen[0].ssa.uses


def test_error_points_at_the_user_line_and_column() -> None:
    def body(a: dsl.Value, b: dsl.Value) -> dsl.Value:
        return a + b

    line = body.__code__.co_firstlineno + 1
    column = inspect.getsource(body).splitlines()[1].index("a + b") + 1
    with pytest.raises(CocoError, match=f"^{__file__}:{line}:{column}: error: "):
        build([L, S0], body)


def test_ops_outside_a_function_are_an_error() -> None:
    with pytest.raises(CocoError, match="only be built inside a function"):
        cc.constant(1.0)


def test_values_of_another_function_are_an_error() -> None:
    leaked: list[dsl.Value] = []
    build([R], leaked.append)
    with pytest.raises(CocoError, match="belongs to @fn, not to @fn"):
        build([R], lambda a: a + leaked[0])


# ----------------------------------------------------------------------------
# Pipelines
# ----------------------------------------------------------------------------

ACT = cc.tensor([8, 16], cc.f32, cc.replicated)


@cc.function
def stage1(x: ACT):
    cc.send(cc.relu(x), "stage2", channel=1, name="send")


@cc.function
def stage2():
    h = cc.recv(ACT, "stage1", channel=1, name="recv")
    return cc.exp(h)


def test_pipeline_of_two_stages() -> None:
    module = cc.module(stage1, stage2)
    first, second = module.body.block.ops
    assert isinstance(first, FuncOp) and isinstance(second, FuncOp)
    send = last_op(first)
    assert isinstance(send, coco.SendOp)
    assert send.stage.root_reference == StringAttr("stage2")
    assert send.channel == IntegerAttr(1, i64)
    recv = body_ops(second)[0]
    assert isinstance(recv, coco.RecvOp)
    assert recv.result.type == ACT
    assert "coco.recv from @stage1 channel = 1" in cc.to_text(module)
    assert cc.parse(cc.to_text(module)).is_structurally_equivalent(module)


def test_stages_can_be_named_by_their_function() -> None:
    @cc.function(name="stage1")
    def source(x: ACT):
        cc.send(x, stage2, channel=1)

    sent = last_op(cc.module(source, stage2).body.block.ops.first)  # type: ignore[arg-type]
    assert isinstance(sent, coco.SendOp)
    assert sent.stage.root_reference == StringAttr("stage2")


def test_send_without_its_stage_is_an_error() -> None:
    with pytest.raises(
        CocoError, match=r"'coco.send' op .*@stage2, which is not a function"
    ):
        cc.module(stage1)


def test_send_and_recv_types_must_agree() -> None:
    @cc.function
    def stage2():
        return cc.recv(cc.tensor([8, 16], cc.f32, cc.local), "stage1", channel=1)

    with pytest.raises(
        CocoError, match=r"'coco.send' op .*sends !coco.tensor<8x16xf32, replicated>"
    ):
        cc.module(stage1, stage2)


def test_parse_file_takes_a_path_and_locates_in_it() -> None:
    module = cc.parse_file(EXAMPLES_DIR / "sgd.mlir")
    op = next(op for op in module.walk() if isinstance(op, coco.AllReduceOp))
    assert cc.diagnostics.location_text(op).startswith(str(EXAMPLES_DIR / "sgd.mlir"))


def test_truth_value_and_missing_annotation_errors_point_at_the_user() -> None:
    with pytest.raises(CocoError, match=rf"^{__file__}:\d+:\d+: error: a coco value"):

        @cc.function
        def f(x: cc.tensor([8], cc.f32, cc.replicated)):
            if x:
                pass

    with pytest.raises(CocoError, match=r"must be annotated .*; it has none"):

        @cc.function
        def g(x):
            pass
