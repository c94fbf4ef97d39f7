"""Decode-time row-parallel projection (a transformer's attention or MLP
output projection generating one token at batch 1; the second fused
computation-collective operator of Punniyamurthy et al., 2023): the
activation `x` [B, S, H] with `B = S = 1` is cut along H and the weight `w`
[H, H] along its rows, so each rank's GEMV gives a partial sum (local) that
the all_reduce adds up; the bias [H] is added after it, as Megatron's layer
does. The same module as `gemv_allreduce.mlir`.

`coco-optimize` fuses the GEMV and the all_reduce into one `coco.fusion`
(`coco-fuse-collective`; the bias stays outside), which the lowering makes
ONE tile-granular kernel (docs/fused-operators.md).

Run: `python examples/gemv_allreduce.py` prints the IR (`--model`: at GPT-3's
hidden size); `coconet-run examples/gemv_allreduce.mlir --world 4` interprets
it.
"""

import argparse

from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc

TEST = dict(B=1, S=1, H=256, element=cc.f32)
"""Batch, sequence (one token) and hidden size: small enough to interpret
and emulate on 2, 4 and 8 ranks."""

MODEL = dict(B=1, S=1, H=12288, element=cc.bf16)
"""GPT-3 175B's hidden size at batch 1 (`--model`): to lower and inspect."""


def layer(B, S, H, element):
    @cc.function
    def gemv_allreduce(
        x: cc.tensor([B, S, H], element, cc.sliced(2)),
        w: cc.tensor([H, H], element, cc.sliced(0)),
        bias: cc.tensor([H], element, cc.replicated),
    ):
        partial = cc.matmul(x, w, name="proj")
        total = cc.all_reduce(partial, "sum", name="sum")
        return cc.add(total, bias, name="out")

    return gemv_allreduce


def build(sizes: dict = TEST) -> ModuleOp:
    """The decode-time row-parallel projection module."""
    return cc.module(layer(**sizes))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="print the example's module")
    parser.add_argument("--model", action="store_true", help="at MODEL sizes")
    sizes = MODEL if parser.parse_args().model else TEST
    print(cc.to_text(build(sizes)), end="")
