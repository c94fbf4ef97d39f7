"""CoCoNet's own schedules (Jangda et al., ASPLOS'22, sections 5 and 6),
written line for line with `cc.Schedule`: the programs with the stage names
CoCoNet's examples use, then split → reorder → fuse (→ overlap) naming the
stages, as CoCoNet's `split`, `reorder`, `fuse` and `overlap` do. Each test
checks the structure the paper describes and the interpreter's equivalence
on 2, 4 and 8 ranks; LAMB's also lowers to one kernel launch."""

from __future__ import annotations

import pytest

import coconet_ir as cc
from coconet_ir.dialects import coco

N = 1024
Param = cc.tensor([N], cc.f32, cc.replicated)
Scalar = cc.tensor([], cc.f32, cc.replicated)
Grad = cc.tensor([N], cc.f32, cc.local)

adam_stages: dict[str, cc.Value] = {}
"""The stages Adam's body names, as CoCoNet's C++ keeps them in variables (a
schedule may take the values themselves)."""


def ops_named(module, name: str) -> list:
    return [op for op in module.walk() if coco.label_of(op) == name]


def the_fusion(module) -> coco.FusionOp:
    (fusion,) = [op for op in module.walk() if isinstance(op, coco.FusionOp)]
    return fusion


def kinds_in(region) -> list[str]:
    return [op.name for op in region.body.block.ops]


def outside(module, kind: type) -> list:
    return [
        op
        for op in module.walk()
        if isinstance(op, kind) and not isinstance(op.parent_op(), coco.FusionOp)
    ]


def assert_equivalent(before, after) -> None:
    for world in (2, 4, 8):
        verdict = cc.equivalent(before, after, world)
        assert verdict, f"N={world}: {verdict.first_difference}"


# ------------------------------------------------------------------ Adam


@cc.function
def adam(g: Grad, w: Param, m: Param, v: Param, lr: Scalar, b1t: Scalar, b2t: Scalar):
    one, b1, b2, eps = (cc.constant(c) for c in (1.0, 0.9, 0.999, 1e-8))
    g1 = cc.all_reduce(g, "sum", name="g1")  # Stage g1 = AllReduce(Sum, g)
    m_ = cc.add(b1 * m, (one - b1) * g1, name="m_")  # Update(m, ...)
    v_ = cc.add(b2 * v, (one - b2) * g1 * g1, name="v_")
    m1 = cc.div(m_, one - b1t, name="m1")
    v1 = cc.div(v_, one - b2t, name="v1")
    w_ = cc.sub(w, lr * m1 / (cc.sqrt(v1) + eps), name="w_")
    cc.update(w, w_)
    cc.update(m, m_)
    cc.update(v, v_)
    adam_stages.update(g1=g1, m_=m_, v_=v_, w_=w_)


def test_adam_fused_all_reduce_with_sliced_state():
    """CoCoNet's Adam schedule: split the gradient's all-reduce, reorder the
    update onto the slices, keep the moments sliced, fuse everything into
    one fused all-reduce. Structure: one region holding the reduce-scatter,
    every tensor op of the update and the all-gather of the weights; m and v
    are parameters of type sliced<0>; only rank-0 scalars are computed
    outside it."""
    stages = adam_stages
    sched = cc.Schedule(adam)
    rsG, agG = sched.split(stages["g1"])  # split(g1, AllReduceRSAG)
    sched.reorder(agG, [stages["m_"], stages["v_"], stages["w_"]])
    sched.slice_state("m")  # the optimizer state stays sliced (ZeRO)
    sched.slice_state("v")
    sched.fuse([rsG, stages["m_"], stages["v_"], stages["w_"], "w__ag"])
    after = sched.module
    fusion = the_fusion(after)
    kinds = kinds_in(fusion)
    assert kinds.count("coco.reduce_scatter") == kinds.count("coco.all_gather") == 1
    for name in ("m_", "v_", "m1", "v1", "w_"):
        (op,) = ops_named(after, name)
        assert op.parent_op() is fusion
        assert coco.tensor_type(op.results[0]).layout.is_sliced, name
    types = the_function(after).function_type.inputs.data
    assert [str(t.layout) for t in types[2:4]] == ["sliced<0>", "sliced<0>"]
    for op in after.walk():
        results = [r for r in op.results if isinstance(r.type, coco.TensorType)]
        if results and op is not fusion and op.parent_op() is not fusion:
            assert coco.tensor_type(results[0]).rank == 0, op.name
    assert_equivalent(adam.module, after)


def the_function(module):
    from xdsl.dialects.func import FuncOp

    (func,) = [op for op in module.walk() if isinstance(op, FuncOp)]
    return func


# ------------------------------------------------------------------ LAMB


@cc.function
def lamb(g: Grad, w: Param, m: Param, v: Param, lr: Scalar, b1t: Scalar, b2t: Scalar):
    one, b1, b2, eps, wd = (cc.constant(c) for c in (1.0, 0.9, 0.999, 1e-6, 0.01))
    g1 = cc.all_reduce(g, "sum", name="g1")
    m_ = cc.add(b1 * m, (one - b1) * g1, name="m_")
    v_ = cc.add(b2 * v, (one - b2) * g1 * g1, name="v_")
    m1 = cc.div(m_, one - b1t, name="m1")
    v1 = cc.div(v_, one - b2t, name="v1")
    r = cc.add(m1 / (cc.sqrt(v1) + eps), wd * w, name="r")
    r_norm = cc.norm(r, name="r_norm")
    w_norm = cc.norm(w, name="w_norm")
    w_ = cc.sub(w, lr * (w_norm / r_norm) * r, name="w_")
    cc.update(w, w_)
    cc.update(m, m_)
    cc.update(v, v_)


def test_lamb_fuse_rs_c_ag_is_one_region_and_one_launch():
    """CoCoNet's `lamb_fuse_RS_C_AG`: ten stages, reduce-scatter → moments →
    both norms (on slices: slice sums and scalar all-reduces) → trust ratio
    and update → all-gather, in ONE fused region, lowered to ONE kernel."""
    sched = cc.Schedule(lamb)
    rsG, agG = sched.split("g1")
    sched.reorder(agG, ["m_", "v_", "r", "r_norm", "w_"])
    sched.slice_state("m")
    sched.slice_state("v")
    sched.apply("coco-slice-norm")  # norm(w) on w's slice
    fused = sched.fuse([rsG, "m_", "v_", "r", "r_norm_ar", "w_norm_ar", "w_", "w__ag"])
    after = sched.module
    fusion = the_fusion(after)
    assert coco.label_of(fusion) == str(fused)
    kinds = kinds_in(fusion)
    assert kinds.count("coco.reduce_scatter") == kinds.count("coco.all_gather") == 1
    assert kinds.count("coco.reduce") == kinds.count("coco.all_reduce") == 2
    assert "coco.norm" not in [op.name for op in after.walk()]
    assert not outside(after, coco.AllReduceOp)
    assert_equivalent(lamb.module, after)
    lowered = cc.Pipeline("convert-coco-to-gpu{world=8}")(after)
    launches = [op for op in lowered.walk() if op.name == "gpu.launch_func"]
    assert len(launches) == 1 and "coco_gpu.cooperative" in launches[0].attributes
    assert not [op for op in lowered.walk() if op.name.startswith("coco_gpu.nccl")]


def test_lamb_under_coco_optimize_is_the_same_region():
    after = cc.Pipeline("coco-optimize")(lamb.module)
    kinds = kinds_in(the_fusion(after))
    assert kinds.count("coco.reduce") == kinds.count("coco.all_reduce") == 2
    assert not outside(after, coco.AllReduceOp)


def test_a_stage_that_cannot_join_is_named():
    """The schedule refuses, naming the op, and leaves the program as it
    was: the weights' norm is of the replicated `w` until coco-slice-norm
    has run, and the norm op cannot be in a fused kernel."""
    sched = cc.Schedule(lamb)
    rsG, agG = sched.split("g1")
    sched.reorder(agG, ["m_", "v_", "r", "r_norm", "w_"])
    before = cc.to_text(sched.module)
    with pytest.raises(cc.CocoError, match=r"'coco.norm' at .* a fused kernel cannot"):
        sched.fuse([rsG, "m_", "w_norm", "w_"])
    assert cc.to_text(sched.module) == before


# --------------------------------------------------- model parallel layer

B, S, H = 4, 8, 64


@cc.function
def model_parallel(
    input: cc.tensor([B, S, H], cc.f32, cc.sliced(2)),
    w: cc.tensor([H, H], cc.f32, cc.sliced(0)),
    b: cc.tensor([H], cc.f32, cc.replicated),
    r: cc.tensor([B, S, H], cc.f32, cc.replicated),
):
    layer = cc.matmul(input, w, name="layer")  # Stage layer = MatMul(in, w)
    sum_ = cc.all_reduce(layer, "sum", name="sum")  # AllReduce(Sum, layer)
    d = cc.dropout(cc.add(sum_, b), 0.1, seed=7, name="d")  # Dropout(sum + b)
    return cc.add(d, r, name="out")  # out = d + r


def test_model_parallel_fuse_then_overlap():
    """CoCoNet's model-parallel schedule (section 5.2): split the
    all-reduce, reorder bias + dropout + residual onto the slices, fuse
    them with the collectives, overlap the matmul with the fused region.
    Structure: one overlap region of 4 chunks holding the matmul and one
    fusion of reduce-scatter, add, dropout, add, all-gather."""
    sched = cc.Schedule(model_parallel)
    rsSum, agSum = sched.split("sum", dim=2)
    sched.reorder(agSum, ["d", "out"])
    fused = sched.fuse([rsSum, "d", "out", "out_ag"])
    overlapped = sched.overlap("layer", fused, chunks=4)
    after = sched.module
    (overlap,) = [op for op in after.walk() if isinstance(op, coco.OverlapOp)]
    assert coco.label_of(overlap) == str(overlapped)
    assert overlap.chunk_count == 4
    assert kinds_in(overlap) == ["coco.matmul", "coco.fusion", "coco.yield"]
    assert [k for k in kinds_in(the_fusion(after)) if k != "coco.all_slice"] == [
        "coco.reduce_scatter",
        "coco.add",
        "coco.dropout",
        "coco.add",
        "coco.all_gather",
        "coco.yield",
    ]
    assert_equivalent(model_parallel.module, after)
