"""coco-overlap{per_peer=true} and the ops it makes (docs/passes/coco-overlap.md,
"Per peer"; docs/dialect.md, "coco.shift" and "coco.per_peer"): the examples
and random programs keep their values on 2, 4 and 8 ranks, at toy sizes and at
a model's (K in the thousands), and the oracle rejects a wrong block."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import T, assert_equivalent
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import scaled_examples

import coconet_ir as cc
from coconet_ir.dialects import coco

PER_PEER = "coco-overlap{per_peer=true}"


def regions(module) -> list[coco.PerPeerOp]:
    return [op for op in module.walk() if isinstance(op, coco.PerPeerOp)]


# ---------------------------------------------------------------------------
# coco.shift
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("world", [2, 4, 8])
@pytest.mark.parametrize("by", [1, -1, 3, 9])
def test_shift_rotates_blocks_and_local_values(world: int, by: int) -> None:
    """Rank r receives what rank (r + by) mod N holds: a sliced value's
    blocks rotate, a local value's per-rank values too, a replicated value
    stays."""
    program = f"""
func.func @f(%x: {T("16x3xf32", "sliced<0>")}, %l: {T("5xf32", "local")}, %r: {T("4xf32")}) -> ({T("16x3xf32", "sliced<0>")}, {T("5xf32", "local")}, {T("4xf32")}) {{
  %a = coco.shift %x by = {by} : {T("16x3xf32", "sliced<0>")} -> {T("16x3xf32", "sliced<0>")}
  %b = coco.shift %l by = {by} : {T("5xf32", "local")} -> {T("5xf32", "local")}
  %c = coco.shift %r by = {by} : {T("4xf32")} -> {T("4xf32")}
  func.return %a, %b, %c : {T("16x3xf32", "sliced<0>")}, {T("5xf32", "local")}, {T("4xf32")}
}}"""  # noqa: E501
    x = np.arange(48, dtype=np.float32).reshape(16, 3)
    local = np.arange(5 * world, dtype=np.float32).reshape(world, 5)
    r = np.arange(4, dtype=np.float32)
    inputs = {"f.arg0": x, "f.arg1": local, "f.arg2": r}
    run = cc.interpret(cc.parse(program), world, inputs=inputs)
    a, b, c = (run[f"f.result{i}"] for i in range(3))
    blocks = np.split(x, world)
    expected = np.concatenate([blocks[(i + by) % world] for i in range(world)])
    np.testing.assert_array_equal(a, expected)
    np.testing.assert_array_equal(b, np.roll(local, -by, axis=0))
    np.testing.assert_array_equal(c, r)


# ---------------------------------------------------------------------------
# The examples
# ---------------------------------------------------------------------------


def test_sequence_parallel_is_one_block_per_rank() -> None:
    """The case plain coco-overlap refuses to cut along the sequence: the
    gathered x is cut along its sliced dim, one block per peer."""
    (region,) = regions(assert_equivalent("sequence_parallel", PER_PEER))
    assert region.input_dims.get_values() == (0, -1)
    assert region.gathered(0) and not region.gathered(1)
    assert [op.name for op in region.block.ops] == ["coco.matmul", "coco.yield"]


def test_matmul_reduce_scatter_scatters_the_partials() -> None:
    (region,) = regions(assert_equivalent("matmul_reduce_scatter", PER_PEER))
    assert region.output_dims.get_values() == (0,)
    assert region.scattered(0)
    assert region.yield_op.arguments[0].type.layout.is_local


def test_the_sequence_parallel_mlp_is_one_region() -> None:
    """all_gather, fc1, bias, GELU, fc2 and the reduce_scatter: one region
    with a gathered input and a scattered output."""
    (region,) = regions(assert_equivalent("sequence_parallel_mlp", PER_PEER))
    inside = [op.name for op in region.block.ops]
    assert inside.count("coco.matmul") == 2 and "coco.gelu" in inside
    assert not [name for name in inside if "gather" in name or "scatter" in name]
    assert region.gathered(0) and region.scattered(0)


def test_a_refusal_leaves_the_module_as_it_was() -> None:
    text = cc.to_text(cc.parse_file("examples/megatron.mlir"))
    module = cc.parse(text)
    with pytest.raises(cc.CocoError, match="no all_gather feeds it"):
        cc.Pipeline("coco-overlap{per_peer=true op=layer}")(module)
    assert cc.to_text(module) == text


# ---------------------------------------------------------------------------
# At a model's sizes, and the oracle's other side
# ---------------------------------------------------------------------------


def mlp(s: int, h: int, f: int, element: str = "f32") -> str:
    x, w1, w2 = (
        T(f"{s}x{h}x{element}", "sliced<0>"),
        T(f"{h}x{f}x{element}", "sliced<1>"),
        T(f"{f}x{h}x{element}", "sliced<0>"),
    )
    g, hh, p = (
        T(f"{s}x{h}x{element}"),
        T(f"{s}x{f}x{element}", "sliced<1>"),
        T(f"{s}x{h}x{element}", "local"),
    )
    return f"""
func.func @mlp(%x: {x}, %w1: {w1}, %w2: {w2}) -> {x} {{
  %a = coco.all_gather %x : {x} -> {g}
  %h = coco.matmul %a, %w1 : ({g}, {w1}) -> {hh}
  %e = coco.gelu %h : ({hh}) -> {hh}
  %d = coco.dropout %e p = 0.1 seed = 5 : ({hh}) -> {hh}
  %p = coco.matmul %d, %w2 : ({hh}, {w2}) -> {p}
  %y = coco.reduce_scatter %p reduction = sum dim = 0 : {p} -> {x}
  func.return %y : {x}
}}"""


@pytest.mark.parametrize("world", [2, 4, 8])
def test_model_sized_mlp_is_equivalent_and_a_wrong_block_is_not(world: int) -> None:
    """K = 4096 (fc1) and 2048 (fc2): the per-peer region equals the
    original; the same region fed the blocks one rank off (what a rotation
    bug would do) does not."""
    original = cc.parse(mlp(64, 4096, 2048))
    rewritten = cc.Pipeline(PER_PEER)(cc.parse(mlp(64, 4096, 2048)))
    assert len(regions(rewritten)) == 1
    assert cc.equivalent(original, rewritten, world).ok
    wrong = cc.to_text(rewritten).replace(
        "coco.per_peer (%x,", "coco.per_peer (%x_off,", 1
    )
    x = T("64x4096xf32", "sliced<0>")
    wrong = wrong.replace(
        "    %y = coco.per_peer",
        f"    %x_off = coco.shift %x by = 1 : {x} -> {x}\n    %y = coco.per_peer",
        1,
    )
    verdict = cc.equivalent(original, cc.parse(wrong), world)
    assert not verdict.ok


# ---------------------------------------------------------------------------
# Random programs
# ---------------------------------------------------------------------------

UNARY = ["gelu", "relu", "tanh", "neg"]


@st.composite
def chains(draw) -> str:
    """A matmul with an all_gather on one side and/or a reduce_scatter at the
    end of its chain of elementwise ops (and a second matmul), at sizes 8
    divides where layouts cut."""
    n = lambda lo, hi: 8 * draw(st.integers(lo, hi))  # noqa: E731
    element = draw(st.sampled_from(["f32", "f64"]))
    kind = draw(
        st.sampled_from(
            [
                "gather_lhs",
                "gather_rhs",
                "scatter",
                "mlp",
                "contract_lhs",
                "contract_rhs",
            ]
        )
    )
    batch = draw(st.sampled_from([[], [draw(st.integers(1, 3))]]))
    s, h, f = n(1, 4), n(1, 6), n(1, 6)

    def t(dims, layout="replicated"):
        return T("x".join(map(str, dims)) + f"x{element}", layout)

    lines: list[str] = []
    args: list[str] = []
    if kind.startswith("contract"):
        # the gathered dim is the contracted one: the steps' products add up
        a, w = t([s, *batch, h]), t([h, f])
        if kind == "contract_lhs":
            a = t([s, *batch, h], f"sliced<{len(batch) + 1}>")
            lines.append(f"%g = coco.all_gather %a : {a} -> {t([s, *batch, h])}")
            operands, types = "%g, %w", f"{t([s, *batch, h])}, {w}"
        else:
            w = t([h, f], "sliced<0>")
            lines.append(f"%g = coco.all_gather %w : {w} -> {t([h, f])}")
            operands, types = "%a, %g", f"{a}, {t([h, f])}"
        args = [f"%a: {a}", f"%w: {w}"]
        out = t([s, *batch, f])
        lines.append(f"%o = coco.matmul {operands} : ({types}) -> {out}")
        body = "\n  ".join(lines)
        return (
            f"func.func @f({', '.join(args)}) -> {out} {{\n  {body}\n"
            f"  func.return %o : {out}\n}}"
        )
    if kind == "gather_rhs":
        a, w = t([s, h]), t([h, f], "sliced<1>")
        args = [f"%a: {a}", f"%w: {w}"]
        lines.append(f"%g = coco.all_gather %w : {w} -> {t([h, f])}")
        lines.append(f"%v0 = coco.matmul %a, %g : ({a}, {t([h, f])}) -> {t([s, f])}")
        out = t([s, f])
    elif kind == "scatter":
        rows = [s, *batch]
        a, w = t([*rows, h], f"sliced<{len(rows)}>"), t([h, f], "sliced<0>")
        args = [f"%a: {a}", f"%w: {w}"]
        out = t([*rows, f], "local")
        lines.append(f"%v0 = coco.matmul %a, %w : ({a}, {w}) -> {out}")
    else:
        x = t([s, *batch, h], "sliced<0>")
        w = t([h, f], "sliced<1>")
        args = [f"%x: {x}", f"%w: {w}"]
        gathered = t([s, *batch, h])
        out = t([s, *batch, f], f"sliced<{len(batch) + 1}>")
        lines.append(f"%g = coco.all_gather %x : {x} -> {gathered}")
        lines.append(f"%v0 = coco.matmul %g, %w : ({gathered}, {w}) -> {out}")
    count = draw(st.integers(0, 3))
    for i in range(count):
        op = draw(st.sampled_from([*UNARY, "bias", "dropout"]))
        if op == "bias":
            width = int(out.split("<")[1].split("x")[-2])
            args.append(f"%b{i}: {t([width])}")
            lines.append(
                f"%v{i + 1} = coco.add %v{i}, %b{i} : ({out}, {t([width])}) -> {out}"
            )
        elif op == "dropout":
            lines.append(
                f"%v{i + 1} = coco.dropout %v{i} p = 0.25 seed = {i} : ({out}) -> {out}"
            )
        else:
            lines.append(f"%v{i + 1} = coco.{op} %v{i} : ({out}) -> {out}")
    result = f"%v{count}"
    if kind == "mlp":
        w2 = t([f, h], "sliced<0>")
        partial = t([s, *batch, h], "local")
        args.append(f"%w2: {w2}")
        lines.append(f"%p = coco.matmul {result}, %w2 : ({out}, {w2}) -> {partial}")
        result, out = "%p", partial
    if kind in ("mlp", "scatter"):
        last = len(batch) + 1  # the columns of the partial
        dim = 0 if kind == "mlp" else draw(st.sampled_from([0, last]))
        scattered = out.replace("local", f"sliced<{dim}>")
        lines.append(
            f"%o = coco.reduce_scatter {result} reduction = sum dim = {dim} : "
            f"{out} -> {scattered}"
        )
        result, out = "%o", scattered
    body = "\n  ".join(lines)
    return (
        f"func.func @f({', '.join(args)}) -> {out} {{\n  {body}\n"
        f"  func.return {result} : {out}\n}}"
    )


@settings(max_examples=scaled_examples(40), deadline=None)
@given(program=chains(), world=st.sampled_from([2, 4, 8]))
def test_random_chains_become_one_region_and_keep_their_values(program, world):
    before = cc.parse(program)
    after = cc.Pipeline(PER_PEER)(cc.parse(program))
    assert len(regions(after)) == 1, cc.to_text(after)
    result = cc.equivalent(before, after, world)
    assert result.ok, result.first_difference


def test_schedule_per_peer_and_the_shift_builder() -> None:
    """The Python API: `Schedule.per_peer` names the region, `cc.shift`
    builds the op."""

    @cc.function
    def layer(
        x: cc.tensor([16, 4, 32], cc.f32, cc.sliced(0)),
        w: cc.tensor([32, 64], cc.f32, cc.sliced(1)),
    ):
        return cc.gelu(cc.matmul(cc.all_gather(x), w, name="mm"))

    @cc.function
    def ring(x: cc.tensor([16], cc.f32, cc.sliced(0))):
        return cc.shift(x, 1, name="next")

    schedule = cc.Schedule(cc.module(layer))
    handle = schedule.per_peer("mm")
    assert str(handle) == "mm_per_peer"
    (region,) = regions(schedule.module)
    assert region.gathered(0)
    assert cc.equivalent(cc.module(layer), schedule.module, 4).ok
    (shift,) = [op for op in cc.module(ring).walk() if isinstance(op, coco.ShiftOp)]
    assert shift.offset == 1
