"""Norm-layer test programs shared by the interpreter's and the lowering's
tests: the ops a norm is written with on every layout, and LayerNorm and
RMSNorm as the DSL writes them (docs/dialect.md, "Norm layers")."""

from __future__ import annotations

import coconet_ir as cc


def ops_program() -> cc.Function:
    @cc.function
    def ops(
        x: cc.tensor([8, 16], cc.f32, cc.sliced(0)),
        h: cc.tensor([8, 16], cc.f32, cc.sliced(1)),
        c: cc.tensor([2, 8, 16], cc.bf16, cc.sliced(2)),
        loc: cc.tensor([8, 16], cc.f32, cc.local),
    ):
        return (
            cc.reduce(x, "sum", 1, keep_dims=True),  # rows stay sliced
            cc.reduce(h, "max", 1, keep_dims=True),  # per-rank partial rows
            cc.all_reduce(cc.reduce(h, "sum", 1, keep_dims=True)),
            cc.transpose(x),
            cc.transpose(c, [2, 0, 1]),
            cc.reshape(x, [128]),
            cc.reshape(h, [8, 8, 2]),
            cc.reshape(loc, [4, 32]),
            x * cc.constant(2.0, shape=[8, 16]),
        )

    return ops


def norm_program(layout, element, width: int = 64) -> cc.Function:
    @cc.function
    def norms(
        x: cc.tensor([16, width], element, layout),
        w: cc.tensor([width], element, cc.replicated),
        b: cc.tensor([width], element, cc.replicated),
    ):
        return cc.layer_norm(x, w, b), cc.rms_norm(x, w)

    return norms
