"""The coco dialect: types, builders' inferred types and the layout rules.

The layout rules are checked against a small independent model written from
docs/dialect.md, "Compute ops" (`model_*` below), on random shapes and layouts.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp, i1
from xdsl.dialects.func import Func, FuncOp, ReturnOp
from xdsl.ir import Attribute, Block, Region
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

import coconet_ir as cc
from coconet_ir.dialects import coco
from coconet_ir.dialects.coco import (
    ELEMENT_TYPES,
    LOCAL,
    REPLICATED,
    LayoutAttr,
    LayoutError,
    TensorType,
    tensor,
)

# ----------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------


def context() -> Context:
    ctx = Context()
    for dialect in (Builtin, Func, coco.Coco):
        ctx.load_dialect(dialect)
    return ctx


def parse_type(text: str) -> Attribute:
    return Parser(context(), text).parse_type()


def parse_module(text: str) -> ModuleOp:
    return Parser(context(), text).parse_module()


def function_of(*arg_types: TensorType) -> tuple[FuncOp, Block]:
    """A func.func inside a module, with arguments of the given types."""
    block = Block(arg_types=arg_types)
    func = FuncOp("f", (list(arg_types), []), Region(block))
    ModuleOp([func])
    return func, block


def verify_error(text: str) -> str:
    """Parse and verify `text`; return the verifier's message."""
    module = parse_module(text)
    with pytest.raises(VerifyException) as err:
        module.verify()
    return str(err.value)


def sliced(dim: int) -> LayoutAttr:
    return LayoutAttr.sliced(dim)


# ----------------------------------------------------------------------------
# The type: syntax, element types, layouts
# ----------------------------------------------------------------------------

LAYOUT_SPELLINGS = ["replicated", "local", "sliced<0>", "sliced<1>"]


@pytest.mark.parametrize("element", list(ELEMENT_TYPES))
@pytest.mark.parametrize("layout", LAYOUT_SPELLINGS)
def test_type_round_trip(element: str, layout: str) -> None:
    text = f"!coco.tensor<8x16x{element}, {layout}>"
    parsed = parse_type(text)
    assert isinstance(parsed, TensorType)
    assert str(parsed) == text
    assert parsed.dims == (8, 16)
    assert parsed.element_type == ELEMENT_TYPES[element]
    assert str(parsed.layout) == layout


@pytest.mark.parametrize("element", list(ELEMENT_TYPES))
def test_rank_zero_type(element: str) -> None:
    text = f"!coco.tensor<{element}, replicated>"
    parsed = parse_type(text)
    assert isinstance(parsed, TensorType)
    assert parsed.rank == 0
    assert str(parsed) == text


def test_tensor_shorthand_and_helpers() -> None:
    t = tensor([4, 8], "f16", sliced(1))
    assert str(t) == "!coco.tensor<4x8xf16, sliced<1>>"
    assert t.with_layout(LOCAL).layout == LOCAL
    assert t.with_shape([2, 8]).dims == (2, 8)
    assert coco.element_type_name(t.element_type) == "f16"
    assert t.layout.is_sliced and t.layout.sliced_dim == 1
    with pytest.raises(ValueError, match="not a coco element type"):
        tensor([4], "i8", LOCAL)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("!coco.tensor<4xi8, local>", "element type must be one of"),
        ("!coco.tensor<4xf32, sliced<1>>", "sliced<1> is out of range"),
        ("!coco.tensor<f32, sliced<0>>", "a rank-0 tensor cannot be sliced"),
        ("!coco.tensor<?x4xf32, local>", "static with positive sizes, got ?x4"),
        ("!coco.tensor<0xf32, local>", "static with positive sizes, got 0"),
    ],
)
def test_type_rules_are_located_diagnostics(text: str, message: str) -> None:
    with pytest.raises(VerifyException, match=r"^<unknown>:1:\d+: error: ") as err:
        parse_type(text)
    assert message in str(err.value)


@pytest.mark.parametrize(
    "text",
    [
        "!coco.tensor<4xf32>",
        "!coco.tensor<4xf32, slice<0>>",
        "!coco.tensor<4xf32, sliced<-1>>",
        "!coco.tensor<4xf32, sliced>",
    ],
)
def test_type_syntax_errors(text: str) -> None:
    from xdsl.utils.exceptions import ParseError

    with pytest.raises(ParseError):
        parse_type(text)


def test_type_verifier_for_built_types() -> None:
    with pytest.raises(VerifyException, match="out of range"):
        tensor([4], "f32", sliced(3))
    with pytest.raises(VerifyException, match="static with positive sizes"):
        tensor([0], "f32", LOCAL)


# ----------------------------------------------------------------------------
# An independent model of the layout rules (docs/dialect.md, "Compute ops")
# ----------------------------------------------------------------------------


def model_broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    rank = max(len(a), len(b))
    pa = (1,) * (rank - len(a)) + a
    pb = (1,) * (rank - len(b)) + b
    out = []
    for x, y in zip(pa, pb, strict=True):
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return tuple(out)


def model_elementwise(a: TensorType, b: TensorType) -> TensorType | None:
    shape = model_broadcast(a.dims, b.dims)
    if shape is None:
        return None
    kinds = {a.layout.kind.data, b.layout.kind.data}
    if kinds == {"local", "sliced"}:
        return None
    cuts = set()
    for t in (a, b):
        if t.layout.is_sliced:
            cut = t.layout.sliced_dim + len(shape) - t.rank
            if t.dims[t.layout.sliced_dim] != shape[cut]:
                return None
            cuts.add(cut)
    if len(cuts) > 1:
        return None
    if cuts:
        layout = sliced(cuts.pop())
    elif "local" in kinds:
        layout = LOCAL
    else:
        layout = REPLICATED
    return TensorType(shape, a.element_type, layout)


def model_reduce(a: TensorType, dims: list[int]) -> TensorType:
    shape = [s for i, s in enumerate(a.dims) if i not in dims]
    if not a.layout.is_sliced:
        return TensorType(shape, a.element_type, a.layout)
    d = a.layout.sliced_dim
    if d in dims:
        return TensorType(shape, a.element_type, LOCAL)
    renumbered = d - len([x for x in dims if x < d])
    return TensorType(shape, a.element_type, sliced(renumbered))


@st.composite
def shapes(draw: st.DrawFn, max_rank: int = 3, min_rank: int = 0) -> tuple[int, ...]:
    rank = draw(st.integers(min_rank, max_rank))
    return tuple(draw(st.sampled_from([1, 2, 4])) for _ in range(rank))


@st.composite
def tensors(draw: st.DrawFn, min_rank: int = 0) -> TensorType:
    shape = draw(shapes(min_rank=min_rank))
    choices = [REPLICATED, LOCAL, *(sliced(d) for d in range(len(shape)))]
    return TensorType(shape, ELEMENT_TYPES["f32"], draw(st.sampled_from(choices)))


@settings(max_examples=400, deadline=None)
@given(tensors(), tensors())
def test_elementwise_inference_matches_model(a: TensorType, b: TensorType) -> None:
    func, block = function_of(a, b)
    expected = model_elementwise(a, b)
    if expected is None:
        with pytest.raises(LayoutError, match=r"^'coco\.add' op "):
            coco.AddOp(block.args[0], block.args[1])
        return
    op = coco.AddOp(block.args[0], block.args[1])
    assert op.result.type == expected
    block.add_ops([op, ReturnOp()])
    func.verify()


@settings(max_examples=300, deadline=None)
@given(tensors(min_rank=1), st.data())
def test_reduce_inference_matches_model(a: TensorType, data: st.DataObject) -> None:
    dims = data.draw(
        st.lists(st.integers(0, a.rank - 1), min_size=1, max_size=a.rank, unique=True)
    )
    _, block = function_of(a)
    op = coco.ReduceOp(block.args[0], "sum", dims)
    assert op.result.type == model_reduce(a, dims)
    op.verify()


# ----------------------------------------------------------------------------
# Elementwise rules, one by one
# ----------------------------------------------------------------------------


def build(op_class: type, *types: TensorType, **kwargs: object):
    _, block = function_of(*types)
    return op_class(*block.args, **kwargs)


def test_replicated_takes_the_other_layout() -> None:
    r = tensor([16], "f32", REPLICATED)
    x = tensor([8, 16], "f32", sliced(0))
    assert build(coco.AddOp, r, x).result.type == x
    assert build(coco.AddOp, x, r).result.type == x
    loc = tensor([8, 16], "f32", LOCAL)
    assert build(coco.MulOp, r, loc).result.type == loc


def test_rank_zero_broadcasts_to_anything() -> None:
    s = tensor([], "f32", REPLICATED)
    x = tensor([4, 8, 16], "f32", sliced(2))
    assert build(coco.SubOp, s, x).result.type == x


def test_lower_rank_sliced_operand_is_renumbered() -> None:
    y = tensor([16], "f32", sliced(0))
    x = tensor([8, 16], "f32", sliced(1))
    assert build(coco.AddOp, y, x).result.type == x


def test_local_with_sliced_is_an_error() -> None:
    with pytest.raises(LayoutError, match="cannot combine a local operand with a"):
        build(coco.AddOp, tensor([8], "f32", LOCAL), tensor([8], "f32", sliced(0)))


def test_element_types_must_match() -> None:
    with pytest.raises(LayoutError, match=r"use coco\.convert"):
        build(coco.AddOp, tensor([8], "f32", LOCAL), tensor([8], "f16", LOCAL))


def test_i1_is_not_arithmetic() -> None:
    b = tensor([8], "i1", LOCAL)
    with pytest.raises(LayoutError, match="does not take i1 operands"):
        build(coco.AddOp, b, b)
    with pytest.raises(LayoutError, match="does not take an i1 operand"):
        build(coco.NegOp, b)


def test_float_only_ops() -> None:
    i = tensor([8], "i32", LOCAL)
    for op_class in (coco.SqrtOp, coco.RsqrtOp, coco.ExpOp, coco.LogOp):
        with pytest.raises(LayoutError, match="needs a floating-point operand"):
            build(op_class, i)
    for op_class in (coco.NegOp, coco.AbsOp, coco.ReluOp):
        assert build(op_class, i).result.type == i
    with pytest.raises(LayoutError, match="needs floating-point operands"):
        build(coco.PowOp, i, i)


def test_cmp_gives_i1_and_select_takes_it() -> None:
    a = tensor([8], "f32", LOCAL)
    s = tensor([], "f32", REPLICATED)
    _, block = function_of(a, s)
    cmp = coco.CmpOp(block.args[0], block.args[1], "gt")
    assert cmp.result.type == tensor([8], "i1", LOCAL)
    select = coco.SelectOp(cmp, block.args[0], block.args[1])
    assert select.result.type == a
    with pytest.raises(LayoutError, match="condition must have element type i1"):
        coco.SelectOp(block.args[0], block.args[0], block.args[0])


def test_convert_keeps_shape_and_layout() -> None:
    op = build(coco.ConvertOp, tensor([8], "f32", sliced(0)), element_type="bf16")
    assert op.result.type == tensor([8], "bf16", sliced(0))


# ----------------------------------------------------------------------------
# Reductions, norm, matmul
# ----------------------------------------------------------------------------


def test_reduce_rules() -> None:
    x = tensor([2, 8, 4], "f32", sliced(1))
    assert build(coco.ReduceOp, x, kind="sum", dims=[1]).result.type == tensor(
        [2, 4], "f32", LOCAL
    )
    assert build(coco.ReduceOp, x, kind="max", dims=[0]).result.type == tensor(
        [8, 4], "f32", sliced(0)
    )
    assert build(coco.ReduceOp, x, kind="min", dims=[2]).result.type == tensor(
        [2, 8], "f32", sliced(1)
    )
    with pytest.raises(LayoutError, match="needs at least one dimension"):
        build(coco.ReduceOp, x, kind="sum", dims=[])
    with pytest.raises(LayoutError, match="dim 3 is out of range"):
        build(coco.ReduceOp, x, kind="sum", dims=[3])


def test_norm_rules() -> None:
    assert build(coco.NormOp, tensor([8], "f32", LOCAL)).result.type == tensor(
        [], "f32", LOCAL
    )
    with pytest.raises(LayoutError, match="operand must be replicated or local"):
        build(coco.NormOp, tensor([8], "f32", sliced(0)))


MATMUL_TABLE = [
    (REPLICATED, REPLICATED, REPLICATED),
    (sliced(0), REPLICATED, sliced(0)),
    (sliced(1), REPLICATED, sliced(1)),
    (REPLICATED, sliced(1), sliced(2)),
    (sliced(2), sliced(0), LOCAL),
    (LOCAL, REPLICATED, LOCAL),
]
ALL_LAYOUTS_3D = [REPLICATED, LOCAL, sliced(0), sliced(1), sliced(2)]
ALL_LAYOUTS_2D = [REPLICATED, LOCAL, sliced(0), sliced(1)]


@pytest.mark.parametrize("a", ALL_LAYOUTS_3D, ids=str)
@pytest.mark.parametrize("b", ALL_LAYOUTS_2D, ids=str)
def test_matmul_table(a: LayoutAttr, b: LayoutAttr) -> None:
    lhs = tensor([2, 4, 8], "f32", a)
    rhs = tensor([8, 6], "f32", b)
    expected = {(x, y): z for x, y, z in MATMUL_TABLE}.get((a, b))
    if expected is None:
        with pytest.raises(LayoutError, match="has no layout rule for lhs"):
            build(coco.MatmulOp, lhs, rhs)
        return
    result = build(coco.MatmulOp, lhs, rhs).result.type
    assert result == tensor([2, 4, 6], "f32", expected)


REP_4X8 = tensor([4, 8], "f32", REPLICATED)
REP_8X4 = tensor([8, 4], "f32", REPLICATED)


def test_matmul_shapes() -> None:
    with pytest.raises(LayoutError, match="contraction sizes differ"):
        build(coco.MatmulOp, tensor([4, 8], "f32", REPLICATED), REP_4X8)
    with pytest.raises(LayoutError, match="rank >= 2"):
        build(coco.MatmulOp, tensor([8], "f32", REPLICATED), REP_8X4)


# ----------------------------------------------------------------------------
# Collectives and all_slice
# ----------------------------------------------------------------------------


def test_collective_builders_infer_results() -> None:
    loc = tensor([8, 4], "f32", LOCAL)
    s = tensor([8, 4], "f32", sliced(0))
    r = tensor([8, 4], "f32", REPLICATED)
    assert build(coco.AllReduceOp, loc).result.type == r
    assert build(coco.AllReduceOp, r, reduction="max").result.type == r
    scattered = build(coco.ReduceScatterOp, loc, dim=1).result.type
    assert scattered == s.with_layout(sliced(1))
    assert build(coco.AllGatherOp, s).result.type == r
    assert build(coco.BroadcastOp, loc, root=1).result.type == r
    assert build(coco.AllToAllOp, s, dim=1).result.type == s.with_layout(sliced(1))
    assert build(coco.AllSliceOp, r, dim=1).result.type == r.with_layout(sliced(1))


@pytest.mark.parametrize(
    ("op_class", "layout", "kwargs", "message"),
    [
        (coco.AllReduceOp, sliced(0), {}, "operand must be local or replicated"),
        (coco.ReduceScatterOp, REPLICATED, {"dim": 0}, "operand must be local"),
        (coco.AllGatherOp, LOCAL, {}, "operand must be sliced"),
        (coco.BroadcastOp, REPLICATED, {}, "operand must be local"),
        (coco.AllToAllOp, LOCAL, {"dim": 0}, "operand must be sliced"),
        (coco.AllSliceOp, LOCAL, {"dim": 0}, "operand must be replicated"),
    ],
)
def test_collective_input_layouts(
    op_class: type, layout: LayoutAttr, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(LayoutError, match=f"^'{op_class.name}' op {message}"):
        build(op_class, tensor([8, 4], "f32", layout), **kwargs)


# ----------------------------------------------------------------------------
# Verifier messages on parsed programs
# ----------------------------------------------------------------------------


def test_world_size_makes_divisibility_checked() -> None:
    rep, cut = "!coco.tensor<6xf32, replicated>", "!coco.tensor<6xf32, sliced<0>>"
    body = f"""
      func.func @f(%a: {rep}) {{
        %s = coco.all_slice %a dim = 0 : ({rep}) -> {cut}
        func.return
      }}"""
    parse_module(body).verify()  # N unknown: fine
    message = verify_error(
        "builtin.module attributes {coco.world_size = 4 : i64} {" + body + "}"
    )
    assert "(size 6) is not divisible by the world size 4" in message
    parse_module(
        "builtin.module attributes {coco.world_size = 3 : i64} {" + body + "}"
    ).verify()


LOCAL_8 = "!coco.tensor<8xf32, local>"


def test_dropout_probability_range() -> None:
    def program(p: str) -> str:
        return f"""
          func.func @f(%a: {LOCAL_8}) {{
            %d = coco.dropout %a p = {p} seed = 1 : ({LOCAL_8}) -> {LOCAL_8}
            func.return
          }}"""

    parse_module(program("0")).verify()
    parse_module(program("0.999")).verify()
    for bad in ("1", "1.5", "-0.1"):
        assert "probability must satisfy 0 <= p < 1" in verify_error(program(bad))


def test_wrong_result_type_names_the_rule() -> None:
    message = verify_error(f"""
      func.func @f(%a: {LOCAL_8}) {{
        %b = coco.all_reduce %a reduction = sum : {LOCAL_8} -> {LOCAL_8}
        func.return
      }}""")
    assert (
        "result type must be !coco.tensor<8xf32, replicated> by the layout rules, "
        "got !coco.tensor<8xf32, local>"
    ) in message


def test_update_rules() -> None:
    w = tensor([8], "f32", REPLICATED)
    func, block = function_of(w, w.with_layout(LOCAL))
    with pytest.raises(VerifyException, match="must equal the parameter type"):
        coco.UpdateOp(block.args[0], block.args[1])
    bad = coco.UpdateOp.create(operands=[block.args[0], block.args[1]])
    block.add_ops([bad, ReturnOp()])
    with pytest.raises(VerifyException, match="expected from variable 'T'"):
        func.verify()
    bad.detach()
    bad.erase()
    neg = coco.NegOp(block.args[0])
    update = coco.UpdateOp(neg, block.args[0])
    block.insert_ops_before([neg, update], block.last_op)
    with pytest.raises(VerifyException, match="must be an argument of the enclosing"):
        func.verify()
    update.detach()
    update.erase()
    block.insert_ops_before(
        [coco.UpdateOp(block.args[0], neg), coco.UpdateOp(block.args[0], neg)],
        block.last_op,
    )
    with pytest.raises(VerifyException, match="updated 2 times"):
        func.verify()


PIPELINE = """
  func.func @a(%x: !coco.tensor<8xf32, local>) {{
    coco.send %x to @b channel = {send_channel} : !coco.tensor<8xf32, local>
    func.return
  }}
  func.func @b() {{
    %y = coco.recv from @a channel = {recv_channel} : !coco.tensor<8x{elt}, local>
    func.return
  }}"""


def channel_error(text: str) -> str:
    """The message of the module-level channel check (`cc.verify`) on `text`,
    whose ops each verify on their own."""
    module = parse_module(text)
    module.verify()
    with pytest.raises(cc.CocoError) as err:
        cc.verify(module)
    return str(err.value)


def test_send_recv_matching() -> None:
    cc.verify(parse_module(PIPELINE.format(send_channel=0, recv_channel=0, elt="f32")))
    assert "needs exactly one coco.recv from @a on channel 0" in channel_error(
        PIPELINE.format(send_channel=0, recv_channel=1, elt="f32")
    )
    assert "the matching coco.recv in @b receives" in channel_error(
        PIPELINE.format(send_channel=0, recv_channel=0, elt="f16")
    )


# ----------------------------------------------------------------------------
# Constants and printing
# ----------------------------------------------------------------------------


def test_constant_builder() -> None:
    c = coco.ConstantOp(0.5, "f32")
    assert c.result.type == tensor([], "f32", REPLICATED)
    assert c.python_value == 0.5
    b = coco.ConstantOp(True, i1)
    assert b.python_value == 1
    assert coco.ConstantOp.value_problem(2, i1) is not None
    assert coco.ConstantOp.value_problem(2**31, ELEMENT_TYPES["i32"]) is not None


@pytest.mark.parametrize(
    ("literal", "element", "printed"),
    [
        ("1", "f32", "1.000000e+00"),
        ("0.9", "f32", "9.000000e-01"),
        ("true", "i1", "true"),
        ("0", "i1", "false"),
        ("-7", "i32", "-7"),
        ("0x7FF0000000000000", "f64", "0x7FF0000000000000"),
        ("0xFF800000", "f32", "0xFF800000"),
        ("0x7C00", "f16", "0x7C00"),
        ("0xFF80", "bf16", "0xFF80"),
    ],
)
def test_constant_spellings_print_to_a_fixed_point(
    literal: str, element: str, printed: str
) -> None:
    text = f"""
      func.func @f() {{
        %c = coco.constant {literal} : !coco.tensor<{element}, replicated>
        func.return
      }}"""
    module = parse_module(text)
    module.verify()
    once = str(module)
    assert f"coco.constant {printed} : !coco.tensor<{element}, replicated>" in once
    assert str(parse_module(once)) == once


def test_name_attribute_survives() -> None:
    _, block = function_of(tensor([8], "f32", LOCAL))
    op = coco.AllReduceOp(block.args[0], label="grads")
    assert op.label is not None and op.label.data == "grads"
