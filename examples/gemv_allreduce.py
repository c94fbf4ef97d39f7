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

Run: `python examples/gemv_allreduce.py` prints the IR; `coconet-run
examples/gemv_allreduce.mlir --world 4` interprets it.
"""

from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc

B, S, H = 1, 1, 256


@cc.function
def gemv_allreduce(
    x: cc.tensor([B, S, H], cc.f32, cc.sliced(2)),
    w: cc.tensor([H, H], cc.f32, cc.sliced(0)),
    bias: cc.tensor([H], cc.f32, cc.replicated),
):
    partial = cc.matmul(x, w, name="proj")
    total = cc.all_reduce(partial, "sum", name="sum")
    return cc.add(total, bias, name="out")


def build() -> ModuleOp:
    """The decode-time row-parallel projection module."""
    return cc.module(gemv_allreduce)


if __name__ == "__main__":
    print(cc.to_text(build()), end="")
