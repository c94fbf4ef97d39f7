"""Megatron-LM's row-parallel layer (CoCoNet, ASPLOS'22, section 6):
`matmul -> all_reduce -> + bias -> dropout -> + residual`. The same module as
`megatron.mlir`.

The input `x` [B, S, H] is sliced along H and the weight `w` [H, H] along its
rows, so each rank's matmul gives a partial sum (local) that the all_reduce
adds up; `bias` [H] and the residual `r` [B, S, H] are replicated.

Run: `python examples/megatron.py` prints the IR; `coconet-run
examples/megatron.mlir --world 4` interprets it.
"""

from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc

B, S, H = 4, 8, 64


@cc.function
def megatron(
    x: cc.tensor([B, S, H], cc.f32, cc.sliced(2)),
    w: cc.tensor([H, H], cc.f32, cc.sliced(0)),
    bias: cc.tensor([H], cc.f32, cc.replicated),
    r: cc.tensor([B, S, H], cc.f32, cc.replicated),
):
    layer = cc.matmul(x, w, name="layer")
    total = cc.all_reduce(layer, "sum", name="sum")
    dropped = cc.dropout(total + bias, 0.1, seed=7, name="dropout")
    return cc.add(dropped, r, name="out")


def build() -> ModuleOp:
    """The Megatron row-parallel layer module."""
    return cc.module(megatron)


if __name__ == "__main__":
    print(cc.to_text(build()), end="")
