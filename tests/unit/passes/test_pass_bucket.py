"""coco-bucket: buckets filled greedily in program order, full chains and
all_reduces alone (DDP), refusals that leave the module untouched, equivalence
of SGD, Adam and LAMB steps on 2, 4 and 8 ranks under several bucket sizes
(alone and under coco-optimize), a property test over random parameter
shapes, and a 391-tensor Adam that lowers to a handful of kernels."""

from __future__ import annotations

import functools
import importlib.util
import sys
from math import prod

import pytest
from helpers import EXAMPLES_DIR, ops_of
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc
from coconet_ir.dialects import coco
from coconet_ir.passes.base import PassRefused
from coconet_ir.passes.bucket import Bucketing

F32 = 4


def T(shape: list[int], layout: str) -> str:
    dims = "x".join(map(str, shape))
    return f"!coco.tensor<{dims}xf32, {layout}>"


def step_program(kind: str | list[str], shapes: list[list[int]]) -> str:
    """One data-parallel optimizer step over parameters of `shapes`: SGD
    (`w - lr*g`), Adam (moments, bias correction) or LAMB (Adam plus the
    layer-wise trust ratio `norm(w)/norm(r)`), one kind for all parameters
    or one each; scalars computed per parameter, as a user writes them."""
    kinds = [kind] * len(shapes) if isinstance(kind, str) else kind
    args = []
    lines = []
    for i, shape in enumerate(shapes):
        state = {"sgd": "w", "adam": "wmv", "lamb": "wmv"}[kinds[i]]
        args.append(f"%g{i}: {T(shape, 'local')}")
        args += [f"%{x}{i}: {T(shape, 'replicated')}" for x in state]
    args += [
        "%lr: !coco.tensor<f32, replicated>",
        "%b1t: !coco.tensor<f32, replicated>",
    ]
    scalar = "!coco.tensor<f32, replicated>"
    for i, shape in enumerate(shapes):
        kind = kinds[i]
        t, tl = T(shape, "replicated"), T(shape, "local")

        def op(name: str, a: str, b: str | None, ta: str, tb: str | None = None) -> str:
            if b is None:
                return f"coco.{name} {a} : ({ta}) -> {t}"
            return f"coco.{name} {a}, {b} : ({ta}, {tb}) -> {t}"

        lines.append(
            f'%s{i} = coco.all_reduce %g{i} reduction = sum {{name = "grad{i}"}} '
            f": {tl} -> {t}"
        )
        if kind == "sgd":
            lines += [
                f"%d{i} = {op('mul', '%lr', f'%s{i}', scalar, t)}",
                f"%w1_{i} = {op('sub', f'%w{i}', f'%d{i}', t, t)}",
                f"coco.update %w{i}, %w1_{i} : {t}",
            ]
            continue
        lines += [
            f"%one{i} = coco.constant 1.000000e+00 : {scalar}",
            f"%b1_{i} = coco.constant 9.000000e-01 : {scalar}",
            f"%eps{i} = coco.constant 1.000000e-06 : {scalar}",
            f"%omb1_{i} = coco.sub %one{i}, %b1_{i} : ({scalar}, {scalar}) -> {scalar}",
            f"%bc1_{i} = coco.sub %one{i}, %b1t : ({scalar}, {scalar}) -> {scalar}",
            f"%b1m{i} = {op('mul', f'%b1_{i}', f'%m{i}', scalar, t)}",
            f"%mg{i} = {op('mul', f'%omb1_{i}', f'%s{i}', scalar, t)}",
            f"%m1_{i} = {op('add', f'%b1m{i}', f'%mg{i}', t, t)}",
            f"%b2v{i} = {op('mul', f'%b1_{i}', f'%v{i}', scalar, t)}",
            f"%gg{i} = {op('mul', f'%s{i}', f'%s{i}', t, t)}",
            f"%vg{i} = {op('mul', f'%omb1_{i}', f'%gg{i}', scalar, t)}",
            f"%v1_{i} = {op('add', f'%b2v{i}', f'%vg{i}', t, t)}",
            f"%mhat{i} = {op('div', f'%m1_{i}', f'%bc1_{i}', t, scalar)}",
            f"%root{i} = {op('sqrt', f'%v1_{i}', None, t)}",
            f"%den{i} = {op('add', f'%root{i}', f'%eps{i}', t, scalar)}",
            f"%r{i} = {op('div', f'%mhat{i}', f'%den{i}', t, t)}",
        ]
        rate = "%lr"
        if kind == "lamb":
            lines += [
                f"%wn{i} = coco.norm %w{i} : ({t}) -> {scalar}",
                f"%rn{i} = coco.norm %r{i} : ({t}) -> {scalar}",
                f"%tr{i} = coco.div %wn{i}, %rn{i} : ({scalar}, {scalar}) -> {scalar}",
                f"%rate{i} = coco.mul %lr, %tr{i} : ({scalar}, {scalar}) -> {scalar}",
            ]
            rate = f"%rate{i}"
        lines += [
            f"%step{i} = {op('mul', rate, f'%r{i}', scalar, t)}",
            f"%w1_{i} = {op('sub', f'%w{i}', f'%step{i}', t, t)}",
            f"coco.update %w{i}, %w1_{i} : {t}",
            f"coco.update %m{i}, %m1_{i} : {t}",
            f"coco.update %v{i}, %v1_{i} : {t}",
        ]
    body = "\n  ".join(lines)
    return f"func.func @step({', '.join(args)}) {{\n  {body}\n  func.return\n}}\n"


SHAPES = [[16, 8], [8], [32], [8, 8], [64], [24]]


def ops_named(module, name: str) -> list:
    return [op for op in module.walk() if op.name == name]


def bucket_sizes(module) -> list[int]:
    """The number of parameters in each bucket (the concats of gradients)."""
    return [
        len(op.operands)
        for op in ops_named(module, "coco.concat")
        if coco.tensor_type(op.result).layout.is_local
    ]


@functools.cache
def step_module(kind: str) -> ModuleOp:
    """`step_program(kind, SHAPES)` parsed once per process (nine tests of
    each kind start from it); callers change only copies."""
    return cc.parse(step_program(kind, SHAPES))


@pytest.mark.parametrize("kind", ["sgd", "adam", "lamb"])
@pytest.mark.parametrize("limit", [160, 400, 25 * 1024 * 1024])
@pytest.mark.parametrize("world", [2, 4, 8])
def test_steps_stay_equivalent(kind: str, limit: int, world: int) -> None:
    before = step_module(kind).clone()
    after = cc.Pipeline([Bucketing(bytes=limit)])(before)
    assert bucket_sizes(after), "nothing was bucketed"
    verdict = cc.equivalent(before, after, world)
    assert verdict, verdict.first_difference
    if kind != "lamb":  # LAMB's norms keep it from the bucket (chains_only)
        optimized = cc.Pipeline(f"coco-optimize{{bucket_bytes={limit}}}")(before)
        verdict = cc.equivalent(before, optimized, world)
        assert verdict, verdict.first_difference


def test_buckets_fill_greedily_in_program_order() -> None:
    """Bytes of gradients: 512, 32, 128, 256, 256, 96. With 400 bytes: the
    512-byte parameter is its own bucket (left alone), then 32+128 (the next
    256 would pass 400), then 256 (+256 would pass), then 256+96."""
    module = cc.Pipeline([Bucketing(bytes=400)])(cc.parse(step_program("sgd", SHAPES)))
    assert bucket_sizes(module) == [2, 2]
    reduces = ops_named(module, "coco.all_reduce")
    assert sorted(op.attributes["name"].data for op in reduces) == [
        "bucket0",
        "bucket1",
        "grad0",
        "grad3",
    ]
    everything = cc.Pipeline("coco-bucket")(cc.parse(step_program("sgd", SHAPES)))
    assert bucket_sizes(everything) == [6]


def test_full_chain_bucket_shape() -> None:
    """Adam in one bucket: four concats (g, m, v, w), one all_reduce, the
    chain once on the flat bucket, three splits feeding the updates."""
    module = cc.Pipeline("coco-bucket,coco-dce")(cc.parse(step_program("adam", SHAPES)))
    assert len(ops_named(module, "coco.concat")) == 4
    assert len(ops_named(module, "coco.all_reduce")) == 1
    assert len(ops_named(module, "coco.split")) == 3
    assert len(ops_named(module, "coco.sqrt")) == 1
    flat = sum(prod(s) for s in SHAPES)
    (reduce,) = ops_named(module, "coco.all_reduce")
    assert coco.tensor_type(reduce.result).dims == (flat,)


def test_lamb_buckets_its_all_reduces_alone() -> None:
    """LAMB's per-layer norms cannot share a flat chain: DDP's bucket, concat
    -> all_reduce -> split, the chains untouched; chains_only leaves it."""
    before = cc.parse(step_program("lamb", SHAPES))
    module = cc.Pipeline("coco-bucket")(before)
    assert len(ops_named(module, "coco.concat")) == 1
    (split,) = ops_named(module, "coco.split")
    assert len(split.results) == len(SHAPES)
    assert len(ops_named(module, "coco.norm")) == 2 * len(SHAPES)
    untouched = cc.Pipeline("coco-bucket{chains_only=true}")(before)
    assert not ops_named(untouched, "coco.concat")


def test_different_chains_get_different_buckets() -> None:
    """SGD and Adam parameters interleaved in one step: a bucket of each."""
    before = cc.parse(
        step_program(["sgd", "adam", "sgd", "adam"], [[8], [24], [16], [32]])
    )
    after = cc.Pipeline("coco-bucket")(before)
    assert bucket_sizes(after) == [2, 2]
    for world in (2, 4):
        verdict = cc.equivalent(before, after, world)
        assert verdict, verdict.first_difference


def test_refusal_names_the_rule_and_leaves_the_module() -> None:
    module = cc.parse(step_program("sgd", [[3], [8]]).replace('"grad1"', '"grad0"'))
    text = cc.to_text(module)
    with pytest.raises(PassRefused, match="3 elements, not divisible by every world"):
        cc.Pipeline("coco-bucket{op=grad0}")(module)
    assert cc.to_text(module) == text
    with pytest.raises(PassRefused, match="bytes must be >= 1"):
        cc.Pipeline("coco-bucket{bytes=0}")(module)


def test_world_option_allows_what_it_divides() -> None:
    """6 elements divide by 2 but not by 8."""
    text = step_program("sgd", [[6], [10]])
    assert not bucket_sizes(cc.Pipeline("coco-bucket")(cc.parse(text)))
    assert bucket_sizes(cc.Pipeline("coco-bucket{world=2}")(cc.parse(text))) == [2]


def test_slice_state_keeps_bucketed_moments_sliced() -> None:
    """Under coco-optimize, Adam's bucketed m and v become sliced<0>
    arguments (ZeRO), the weights stay replicated, and the whole bucket is
    one coco.fusion."""
    optimized = cc.Pipeline("coco-optimize")(cc.parse(step_program("adam", SHAPES)))
    function = next(iter(optimized.ops))
    layouts = {a.name_hint: str(a.type.layout) for a in function.body.block.args}
    assert layouts["m0"] == layouts["v5"] == "sliced<0>"
    assert layouts["w0"] == "replicated"
    assert len(ops_named(optimized, "coco.fusion")) == 1


# ----------------------------------------------------------------------------
# Property: random parameter shapes and counts
# ----------------------------------------------------------------------------

shapes_strategy = st.lists(
    st.lists(st.sampled_from([1, 2, 4, 8, 16]), min_size=1, max_size=3).map(
        lambda dims: [dims[0] * 8, *dims[1:]]
    ),
    min_size=2,
    max_size=7,
)


@settings(max_examples=20, deadline=None)
@given(
    shapes=shapes_strategy,
    kind=st.sampled_from(["sgd", "adam"]),
    limit=st.sampled_from([32, 256, 1024, 1 << 20]),
    world=st.sampled_from([2, 4, 8]),
)
def test_random_buckets_stay_equivalent(
    shapes: list[list[int]], kind: str, limit: int, world: int
) -> None:
    before = cc.parse(step_program(kind, shapes))
    after = cc.Pipeline(f"coco-optimize{{bucket_bytes={limit}}}")(before)
    sizes = [prod(s) * F32 for s in shapes]
    for bucket in bucket_sizes(after):
        assert bucket >= 2
    if max(sizes) <= limit and len(shapes) >= 2 and sum(sizes[:2]) <= limit:
        assert bucket_sizes(after), "two small parameters were not bucketed"
    verdict = cc.equivalent(before, after, world)
    assert verdict, verdict.first_difference


# ----------------------------------------------------------------------------
# BERT-large's 391 tensors: a handful of kernels
# ----------------------------------------------------------------------------

TINY_BERT = {"layers": 24, "hidden": 16, "ffn": 32, "vocab": 40, "positions": 16}


def adam_bert():
    name = "coconet_example_adam_bert"
    spec = importlib.util.spec_from_file_location(name, EXAMPLES_DIR / "adam_bert.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_adam_over_bert_lowers_to_a_handful_of_kernels() -> None:
    """391 parameter tensors: 391 fused kernels without buckets; with them,
    one fused kernel per bucket plus its copies (the 2-row token-type table,
    whose dim 0 no 4 ranks divide, is fused on its own, so its moments stay
    sliced along dim 1), and the optimized step computes what the written
    one does."""
    example = adam_bert()
    shapes = example.Shapes(**TINY_BERT)
    before = example.build(shapes)
    assert len(example.parameters(shapes)) == 391
    bucketed = cc.Pipeline("coco-optimize{world=4}")(before)
    assert len(ops_named(bucketed, "coco.fusion")) == 2
    lowered = cc.Pipeline("convert-coco-to-gpu{world=4}")(bucketed)
    launches = ops_named(lowered, "gpu.launch_func")
    # the bucket: 4 concats and 3 splits of 390 pieces, each two launches
    # of at most 256 buffers, 1 fused kernel; the token types: 1
    assert len(launches) == 16
    assert sum("_rs_fused" in str(op.kernel) for op in launches) == 2
    verdict = cc.equivalent(before, bucketed, 4)
    assert verdict, verdict.first_difference


def test_slice_state_examines_a_bucket_once(monkeypatch) -> None:
    """coco-slice-state decides a bucket from its first parameter: a bucket
    of 64 parameters is examined once, not 64 times (each examination walks
    every parameter: 64 would make coco-optimize quadratic in the model)."""
    from coconet_ir.passes import slice_state

    calls = []
    examine = slice_state.bucket_group
    monkeypatch.setattr(
        slice_state,
        "bucket_group",
        lambda update: calls.append(update) or examine(update),
    )
    program = cc.parse(step_program("adam", [[8]] * 64))
    after = cc.Pipeline("coco-optimize{world=4}")(program)
    assert len(ops_of(after, coco.ConcatOp)) >= 1
    assert len(calls) == len(ops_of(after, coco.SplitOp))


# ---------------------------------------------------------------------------
# Sums across parameters (docs/passes/coco-bucket.md, "Sums across
# parameters"): clip_grad_norm_'s global norm
# ---------------------------------------------------------------------------


@functools.cache
def adamw_clip():
    path = EXAMPLES_DIR / "adamw_clip.py"
    spec = importlib.util.spec_from_file_location("coconet_example_adamw_clip", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


CLIPPED = [("a", [64, 16]), ("b", [32]), ("c", [16, 8]), ("d", [48, 4])]


@pytest.mark.parametrize("world", [2, 4, 8])
def test_a_global_norm_shares_the_bucket(world: int) -> None:
    """Every parameter's sum of squares becomes ONE sum over the bucket (the
    other terms 0, folded away): one concat per leaf, one all_reduce, one
    reduce; equivalent, alone and under coco-optimize, which makes the step
    one fused collective."""
    before = adamw_clip().build(CLIPPED)
    after = cc.Pipeline("coco-bucket,canonicalize")(before)
    assert len(ops_of(after, coco.AllReduceOp)) == 1
    assert len(ops_of(after, coco.ConcatOp)) == 4
    (total,) = ops_of(after, coco.ReduceOp)
    assert coco.tensor_type(total.operand).dims == (64 * 16 + 32 + 16 * 8 + 48 * 4,)
    verdict = cc.equivalent(before, after, world)
    assert verdict, verdict.first_difference
    optimized = cc.Pipeline("coco-optimize")(before)
    (fusion,) = ops_of(optimized, coco.FusionOp)
    assert ops_of(fusion, coco.ReduceScatterOp)
    verdict = cc.equivalent(before, optimized, world)
    assert verdict, verdict.first_difference


@pytest.mark.parametrize("limit", [64 * 16 * F32, 200 * F32])
def test_a_global_norm_over_several_buckets(limit: int) -> None:
    """Buckets smaller than the step: each bucket's terms become its sum,
    and the sum over buckets is still the whole norm."""
    before = adamw_clip().build(CLIPPED)
    after = cc.Pipeline(f"coco-bucket{{bytes={limit}}}")(before)
    assert len(ops_of(after, coco.AllReduceOp)) < len(CLIPPED)
    for world in (2, 4, 8):
        verdict = cc.equivalent(before, after, world)
        assert verdict, verdict.first_difference


SUM_USED_ALONE = """
func.func @f(%g0: {l0}, %w0: {r0}, %g1: {l1}, %w1: {r1}) {{
  %s0 = coco.all_reduce %g0 reduction = sum : {l0} -> {r0}
  %s1 = coco.all_reduce %g1 reduction = sum : {l1} -> {r1}
  %q0 = coco.mul %s0, %s0 : ({r0}, {r0}) -> {r0}
  %q1 = coco.mul %s1, %s1 : ({r1}, {r1}) -> {r1}
  %n0 = coco.reduce %q0 kind = sum dims = [0] : ({r0}) -> {sc}
  %n1 = coco.reduce %q1 kind = sum dims = [0] : ({r1}) -> {sc}
  %t = coco.add %n0, %n1 : ({sc}, {sc}) -> {sc}
  %u = coco.mul %t, %n0 : ({sc}, {sc}) -> {sc}
  %a0 = coco.mul %s0, %u : ({r0}, {sc}) -> {r0}
  %a1 = coco.mul %s1, %t : ({r1}, {sc}) -> {r1}
  %w2 = coco.sub %w0, %a0 : ({r0}, {r0}) -> {r0}
  %w3 = coco.sub %w1, %a1 : ({r1}, {r1}) -> {r1}
  coco.update %w0, %w2 : {r0}
  coco.update %w1, %w3 : {r1}
  func.return
}}
"""


def test_a_sum_read_on_its_own_is_no_term() -> None:
    """A parameter's sum also read by itself (`%t * %n0`) is not a term of
    the total alone: the chains differ, nothing is bucketed in full."""
    text = SUM_USED_ALONE.format(
        l0=T([16], "local"),
        r0=T([16], "replicated"),
        l1=T([16], "local"),
        r1=T([16], "replicated"),
        sc="!coco.tensor<f32, replicated>",
    )
    before = cc.parse(text)
    after = cc.Pipeline("coco-bucket{chains_only=true}")(before)
    assert len(ops_of(after, coco.AllReduceOp)) == 2
    assert cc.to_text(after) == cc.to_text(before)


TWO_NORMS = """
func.func @f({args}) {{
{grads}
  %ta = coco.add %n0, %n1 : ({sc}, {sc}) -> {sc}
  %tb = coco.add %n2, %n3 : ({sc}, {sc}) -> {sc}
  %c = coco.div %ta, %tb : ({sc}, {sc}) -> {sc}
{updates}
  func.return
}}
"""


@pytest.mark.parametrize("world", [2, 4, 8])
def test_two_norms_are_two_sums(world: int) -> None:
    """Two sums (of parameters 0, 1 and of 2, 3: each its own `coco.add`
    tree) whose ratio scales every update: the terms add up at different
    roots, so the chains are two buckets, each with its own sum."""
    loc, r = T([16], "local"), T([16], "replicated")
    sc = "!coco.tensor<f32, replicated>"
    grads = "\n".join(
        f"  %s{i} = coco.all_reduce %g{i} reduction = sum : {loc} -> {r}\n"
        f"  %q{i} = coco.mul %s{i}, %s{i} : ({r}, {r}) -> {r}\n"
        f"  %n{i} = coco.reduce %q{i} kind = sum dims = [0] : ({r}) -> {sc}"
        for i in range(4)
    )
    updates = "\n".join(
        f"  %a{i} = coco.mul %s{i}, %c : ({r}, {sc}) -> {r}\n"
        f"  %u{i} = coco.sub %w{i}, %a{i} : ({r}, {r}) -> {r}\n"
        f"  coco.update %w{i}, %u{i} : {r}"
        for i in range(4)
    )
    args = ", ".join(f"%g{i}: {loc}, %w{i}: {r}" for i in range(4))
    text = TWO_NORMS.format(args=args, sc=sc, grads=grads, updates=updates)
    before = cc.parse(text)
    after = cc.Pipeline("coco-bucket")(before)
    assert len(ops_of(after, coco.ReduceOp)) == 2
    verdict = cc.equivalent(before, after, world)
    assert verdict, verdict.first_difference


def test_a_parameters_own_sum_is_no_term() -> None:
    """`rsqrt(sum(g*g) + eps)` per parameter (a layer-wise norm): the sum is
    added to a constant, not to another parameter's, so the chains are not
    bucketed in full and the all_reduces alone share a bucket (DDP's)."""
    r, loc = T([64], "replicated"), T([64], "local")
    sc = "!coco.tensor<f32, replicated>"
    lines = [f"%eps = coco.constant 1.000000e-06 : {sc}"]
    for i in (1, 2):
        lines += [
            f"%r{i} = coco.all_reduce %g{i} reduction = sum : {loc} -> {r}",
            f"%q{i} = coco.mul %r{i}, %r{i} : ({r}, {r}) -> {r}",
            f"%s{i} = coco.reduce %q{i} kind = sum dims = [0] : ({r}) -> {sc}",
            f"%n{i} = coco.add %s{i}, %eps : ({sc}, {sc}) -> {sc}",
            f"%c{i} = coco.rsqrt %n{i} : ({sc}) -> {sc}",
            f"%u{i} = coco.mul %r{i}, %c{i} : ({r}, {sc}) -> {r}",
            f"%x{i} = coco.sub %w{i}, %u{i} : ({r}, {r}) -> {r}",
            f"coco.update %w{i}, %x{i} : {r}",
        ]
    args = ", ".join(f"%g{i}: {loc}, %w{i}: {r}" for i in (1, 2))
    body = "\n  ".join(lines)
    before = cc.parse(f"func.func @f({args}) {{\n  {body}\n  func.return\n}}")
    after = cc.Pipeline("coco-bucket")(before)
    assert len(ops_of(after, coco.AllReduceOp)) == 1
    assert len(ops_of(after, coco.ReduceOp)) == 2
    verdict = cc.equivalent(before, after, 4)
    assert verdict, verdict.first_difference
