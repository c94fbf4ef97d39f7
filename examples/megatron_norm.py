"""Megatron-LM's row-parallel layer with the LayerNorm that follows it:
`matmul -> all_reduce -> + bias -> dropout -> + residual -> LayerNorm`, the
post-attention (or post-MLP) norm of a transformer layer. The same module as
`megatron_norm.mlir`; `megatron.py` is the layer without its norm, as the
CoCoNet paper (ASPLOS'22, section 6) writes it.

The input `x` [B, S, H] is sliced along H and the weight `w` [H, H] along its
rows, so each rank's matmul gives a partial sum (local) that the all_reduce
adds up; `bias`, `gamma`, `beta` [H] and the residual `r` [B, S, H] are
replicated. Returned: the new residual stream and its normalized
activations. `coco-optimize` splits the all_reduce along the sequence, moves
the whole chain, the norm's row statistics included, onto each rank's
sequence rows and fuses it: one kernel after the matmul
(docs/gpu/fused.md, "Row reductions: a norm in the kernel").

Run: `python examples/megatron_norm.py` prints the IR (`--model`: at the
paper's size); `coconet-run examples/megatron_norm.mlir --world 4` interprets
it.
"""

import argparse

from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc

TEST = dict(B=4, S=8, H=64, element=cc.f32)
"""Small enough to interpret and emulate on 2, 4 and 8 ranks."""

MODEL = dict(B=8, S=2048, H=12288, element=cc.bf16)
"""CoCoNet's evaluation of the layer (B = 8, S = 2048, H = 12288: GPT-3
175B's hidden size) at TP = 8, bf16 (`--model`): to lower and inspect."""


def layer(B, S, H, element):
    @cc.function
    def megatron_norm(
        x: cc.tensor([B, S, H], element, cc.sliced(2)),
        w: cc.tensor([H, H], element, cc.sliced(0)),
        bias: cc.tensor([H], element, cc.replicated),
        r: cc.tensor([B, S, H], element, cc.replicated),
        gamma: cc.tensor([H], element, cc.replicated),
        beta: cc.tensor([H], element, cc.replicated),
    ):
        product = cc.matmul(x, w, name="layer")
        total = cc.all_reduce(product, "sum", name="sum")
        dropped = cc.dropout(total + bias, 0.1, seed=7, name="dropout")
        out = cc.add(dropped, r, name="out")
        return out, cc.layer_norm(out, gamma, beta, name="ln")

    return megatron_norm


def build(sizes: dict = TEST) -> ModuleOp:
    """The Megatron row-parallel layer and its LayerNorm."""
    return cc.module(layer(**sizes))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="print the example's module")
    parser.add_argument("--model", action="store_true", help="at MODEL sizes")
    sizes = MODEL if parser.parse_args().model else TEST
    print(cc.to_text(build(sizes)), end="")
