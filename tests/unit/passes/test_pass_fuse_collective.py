"""coco-fuse-collective on random programs of the three operators
(docs/passes/coco-fuse-collective.md): the pass keeps every function's
values on 2, 4 and 8 ranks, builds one fusion per producer + collective
pair, and the lowering turns each fusion it has a tile kernel for into one
launch whose static peer bytes are the collective's."""

from __future__ import annotations

import re
from math import prod

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import scaled_examples

import coconet_ir as cc
from coconet_ir.dialects.coco import FusionOp
from coconet_ir.dialects.coco_gpu import PEER_BYTES_ATTR
from coconet_ir.lowering.tile_collectives import (
    EmbeddingAllToAll,
    GemmAllToAll,
    GemvAllReduce,
)

ELEMENTS = ["f32", "bf16", "f16"]


def t(dims, element: str, layout: str) -> str:
    return f"!coco.tensor<{'x'.join(map(str, dims))}x{element}, {layout}>"


@st.composite
def operators(draw) -> tuple[str, str]:
    """(kind, program): one of the three operators at random sizes that 8
    divides where the layouts cut."""
    kind = draw(st.sampled_from(["dlrm", "gemv", "moe", "moe_shared"]))
    element = draw(st.sampled_from(ELEMENTS))
    n = lambda lo, hi: draw(st.integers(lo, hi))  # noqa: E731
    if kind == "dlrm":
        tables, rows, width, bags, length = 8 * n(1, 2), n(2, 9), n(1, 6), 8, n(1, 4)
        tables_t = t((tables, rows, width), element, "sliced<0>")
        indices_t = t((tables, bags, length), "i32", "sliced<0>")
        pooled, out = (
            t((tables, bags, width), element, f"sliced<{d}>") for d in (0, 1)
        )
        pooling = draw(st.sampled_from(["sum", "mean", "max"]))
        body = (
            f"%p = coco.embedding %a, %b pooling = {pooling} : "
            f"({tables_t}, {indices_t}) -> {pooled}\n"
            f"  %o = coco.all_to_all %p dim = 1 : {pooled} -> {out}"
        )
        args = (tables_t, indices_t)
    elif kind == "gemv":
        rows, k, m = n(1, 4), 8 * n(1, 8), 8 * n(1, 8)
        x, w = t((rows, k), element, "sliced<1>"), t((k, m), element, "sliced<0>")
        partial, out = (
            t((rows, m), element, "local"),
            t((rows, m), element, "replicated"),
        )
        body = (
            f"%p = coco.matmul %a, %b : ({x}, {w}) -> {partial}\n"
            f"  %o = coco.all_reduce %p reduction = sum : {partial} -> {out}"
        )
        args = (x, w)
    else:
        experts, sources, capacity, h, f = 8, 8, n(1, 3), n(1, 24), n(1, 40)
        dim = draw(st.sampled_from([1, 2])) if capacity % 8 == 0 else 1
        x = t((experts, sources, capacity, h), element, "sliced<0>")
        grouped = kind == "moe"
        w = t(
            (experts, h, f) if grouped else (h, f),
            element,
            "sliced<0>" if grouped else "replicated",
        )
        op = "coco.batch_matmul" if grouped else "coco.matmul"
        result, out = (
            t((experts, sources, capacity, f), element, f"sliced<{d}>")
            for d in (0, dim)
        )
        body = (
            f"%p = {op} %a, %b : ({x}, {w}) -> {result}\n"
            f"  %o = coco.all_to_all %p dim = {dim} : {result} -> {out}"
        )
        args = (x, w)
    out_type = body.rsplit("-> ", 1)[1]
    program = (
        f"func.func @f(%a: {args[0]}, %b: {args[1]}) -> {out_type} {{\n"
        f"  {body}\n  func.return %o : {out_type}\n}}"
    )
    return kind, program


@settings(max_examples=scaled_examples(40), deadline=None)
@given(operator=operators(), world=st.sampled_from([2, 4, 8]))
def test_the_fusion_keeps_the_values_and_lowers_to_one_tile_kernel(operator, world):
    kind, program = operator
    before = cc.parse(program)
    after = cc.Pipeline("coco-fuse-collective")(cc.parse(program))
    (fusion,) = [op for op in after.walk() if isinstance(op, FusionOp)]
    result = cc.equivalent(before, after, world)
    assert result.ok, result.first_difference
    plan = {
        "dlrm": EmbeddingAllToAll.of,
        "gemv": GemvAllReduce.of,
        "moe": GemmAllToAll.of,
        "moe_shared": GemmAllToAll.of,
    }[kind](fusion, world)
    lowered = cc.Pipeline(f"convert-coco-to-gpu{{world={world}}}")(after)
    launches = [op for op in lowered.walk() if op.name == "gpu.launch_func"]
    if plan is None:  # GEMV columns not cut into whole tiles per rank
        assert kind == "gemv"
        return
    assert len(launches) == 1
    assert not [op for op in lowered.walk() if op.name.startswith("coco_gpu.nccl")]
    assert launches[0].attributes[PEER_BYTES_ATTR].value.data == plan.peer_bytes()
    out = fusion.results[0].type
    size = prod(out.dims) * (2 if "16" in str(out.element_type) else 4)
    if kind == "gemv":  # two-shot: 2 (N-1)/N of the output, evenly
        assert plan.peer_bytes() * world == 2 * size
    else:  # all_to_all: (N-1)/N of the rank's block, evenly
        assert plan.peer_bytes() * world * world == size


@pytest.mark.parametrize("world", [2, 4, 8])
def test_only_the_producers_only_user_fuses(world):
    """A matmul whose result has a second use stays outside any fusion."""
    program = """
func.func @f(%a: !coco.tensor<8x8x2x16xf32, sliced<0>>, %b: !coco.tensor<8x16x8xf32, sliced<0>>) -> (!coco.tensor<8x8x2x8xf32, sliced<1>>, !coco.tensor<8x8x2x8xf32, sliced<0>>) {
  %p = coco.batch_matmul %a, %b : (!coco.tensor<8x8x2x16xf32, sliced<0>>, !coco.tensor<8x16x8xf32, sliced<0>>) -> !coco.tensor<8x8x2x8xf32, sliced<0>>
  %o = coco.all_to_all %p dim = 1 : !coco.tensor<8x8x2x8xf32, sliced<0>> -> !coco.tensor<8x8x2x8xf32, sliced<1>>
  func.return %o, %p : !coco.tensor<8x8x2x8xf32, sliced<1>>, !coco.tensor<8x8x2x8xf32, sliced<0>>
}
"""  # noqa: E501
    after = cc.Pipeline("coco-fuse-collective")(cc.parse(program))
    assert not [op for op in after.walk() if isinstance(op, FusionOp)]
    assert cc.equivalent(cc.parse(program), after, world).ok


@pytest.mark.parametrize(
    "producer,collective,message",
    [
        (
            "%p = coco.batch_matmul %a, %b : (!coco.tensor<8x1x16xf32, local>, "
            "!coco.tensor<8x16x8xf32, replicated>) -> !coco.tensor<8x1x8xf32, local>",
            "%o = coco.all_reduce %p reduction = sum : !coco.tensor<8x1x8xf32, local> "
            "-> !coco.tensor<8x1x8xf32, replicated>",
            "a coco.batch_matmul and its coco.all_reduce have no tile kernel",
        ),
        (
            "%p = coco.batch_matmul %a, %b : (!coco.tensor<8x1x16xf32, local>, "
            "!coco.tensor<8x16x8xf32, replicated>) -> !coco.tensor<8x1x8xf32, local>",
            "%o = coco.reduce_scatter %p reduction = sum dim = 0 : "
            "!coco.tensor<8x1x8xf32, local> -> !coco.tensor<8x1x8xf32, sliced<0>>",
            "a coco.batch_matmul and its coco.reduce_scatter have no tile kernel",
        ),
    ],
)
def test_where_it_pays_fuses_only_pairs_with_a_tile_kernel(
    producer: str, collective: str, message: str
):
    """coco-optimize's rule: a pair the lowering has no tile kernel for is
    left to CoCoNet's split, reorder and overlap; named, it is refused with
    the reason and the module is unchanged."""
    a, b = producer.split("(")[1].split(")")[0].split(", !")
    out = collective.rsplit("-> ", 1)[1]
    program = cc.parse(
        f'func.func @f(%a: {a}, %b: !{b}) -> {out} {{\n  {producer} {{name = "p"}}\n'
        f"  {collective}\n  func.return %o : {out}\n}}".replace(' {name = "p"}', "")
    )
    text = cc.to_text(program)
    with pytest.warns(Warning, match=re.escape(message)):
        cc.Pipeline("coco-fuse-collective{where_it_pays=true}")(program)
    assert cc.to_text(program) == text
    with pytest.raises(cc.CocoError, match=re.escape(message)):
        cc.Pipeline("coco-fuse-collective{where_it_pays=true op=p}")(
            cc.parse(
                text.replace(
                    "coco.batch_matmul %a, %b", 'coco.batch_matmul %a, %b {name = "p"}'
                )
            )
        )
