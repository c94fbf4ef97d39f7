"""Generated norm-layer programs through the passes (docs/dialect.md, "Norm
layers"): a residual stream reaching its LayerNorm or RMSNorm on every
layout a transformer gives it (rows cut across ranks after a reduce_scatter,
the hidden dim cut, replicated, local), in f32 or bf16, with the transposes
and reshapes around it that a user writes (round trips through another
layout of the same data), optionally gathered after. Every pass pipeline
keeps what the program computes on 2, 4 and 8 ranks; coco-optimize's result
lowered and emulated computes what the interpreter computes.

A strategy of its own, not a step of the general generator
(tests/unit/strategies.py): its distribution, and so every other property
test's programs, stay as they were."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given, settings
from strategies import scaled_examples

import coconet_ir as cc
from coconet_ir.emulate import compare_runs, emulate

PIPELINES = (
    "coco-optimize",
    "coco-fuse",
    "coco-split-all-reduce,coco-reorder,coco-fuse",
    "coco-split-all-reduce,coco-reorder,coco-slice-state",
    "canonicalize,cse",
)


@st.composite
def norm_programs(draw: st.DrawFn) -> cc.Function:
    element = draw(st.sampled_from(["f32", "bf16"]))
    rows = draw(st.sampled_from([8, 16]))
    hidden = draw(st.sampled_from([16, 32]))
    source = draw(st.sampled_from(["reduce_scatter", "rows", "hidden", "replicated"]))
    norm = draw(st.sampled_from(["layer", "rms"]))
    detour = draw(st.sampled_from(["none", "transpose", "reshape"]))
    gather = draw(st.booleans())
    layout = {
        "reduce_scatter": cc.local,
        "rows": cc.sliced(0),
        "hidden": cc.sliced(1),
        "replicated": cc.replicated,
    }[source]

    @cc.function
    def step(
        x: cc.tensor([rows, hidden], element, layout),
        r: cc.tensor([rows, hidden], element, cc.replicated),
        gamma: cc.tensor([hidden], element, cc.replicated),
        beta: cc.tensor([hidden], element, cc.replicated),
    ):
        h = cc.reduce_scatter(x, "sum", 0) if source == "reduce_scatter" else x
        h = h + r
        if detour == "transpose":
            h = cc.transpose(cc.transpose(h) * 1.0)
        elif detour == "reshape":
            h = cc.reshape(cc.reshape(h, [rows, hidden // 4, 4]) + 0.5, [rows, hidden])
        if norm == "layer":
            y = cc.layer_norm(h, gamma, beta)
        else:
            y = cc.rms_norm(h, gamma)
        if gather and y.layout.is_sliced:
            y = cc.all_gather(y)
        return h, y

    return step


@settings(max_examples=scaled_examples(25))
@given(function=norm_programs(), pipeline=st.sampled_from(PIPELINES))
def test_passes_keep_norm_programs_equivalent(function: cc.Function, pipeline: str):
    before = cc.module(function)
    after = cc.Pipeline(pipeline)(before)
    for world in (2, 4, 8):
        verdict = cc.equivalent(before, after, world)
        assert verdict, f"{pipeline} at N={world}: {verdict.first_difference}"


@settings(max_examples=scaled_examples(6))
@given(function=norm_programs())
def test_optimized_norm_programs_run_under_the_emulator(function: cc.Function):
    module = cc.module(function)
    reference = cc.interpret(module, 4, seed=4)
    emulated = emulate(module, 4, passes="coco-optimize", seed=4)
    verdict = compare_runs(reference, emulated, module)
    assert verdict, verdict.first_difference
