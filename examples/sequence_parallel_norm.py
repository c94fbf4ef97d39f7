"""The LayerNorm of a transformer layer under Megatron-LM's sequence
parallelism (Korthikanti et al., 2022): the row-parallel matmul's partial
sums are reduce-scattered along the sequence, then `+ bias -> dropout ->
+ residual -> LayerNorm` runs on each rank's rows, and the normalized rows
are all-gathered for the next column-parallel matmul. The same module as
`sequence_parallel_norm.mlir`.

`partial` [S, H] is each rank's partial sum (local); the residual `r` [S, H]
is cut along the sequence like the result of the reduce_scatter; `bias`,
`gamma` and `beta` [H] are replicated. The norm is over the hidden dim, which
every rank holds whole, so it needs no communication of its own. Returned:
the new residual stream (sliced) and the gathered normalized activations.

Run: `python examples/sequence_parallel_norm.py` prints the IR (`--model`:
GPT-3's widths, bf16); `coconet-run examples/sequence_parallel_norm.mlir
--world 4` interprets it.
"""

import argparse

from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc

TEST = dict(S=64, H=32, element=cc.f32)
"""Small enough to interpret and emulate on 2, 4 and 8 ranks."""

MODEL = dict(S=2048, H=12288, element=cc.bf16)
"""One sequence of 2048 tokens at GPT-3 175B's hidden size, bf16."""


def layer(S, H, element):
    @cc.function
    def sequence_parallel_norm(
        partial: cc.tensor([S, H], element, cc.local),
        bias: cc.tensor([H], element, cc.replicated),
        r: cc.tensor([S, H], element, cc.sliced(0)),
        gamma: cc.tensor([H], element, cc.replicated),
        beta: cc.tensor([H], element, cc.replicated),
    ):
        rows = cc.reduce_scatter(partial, "sum", 0, name="rs")
        dropped = cc.dropout(rows + bias, 0.1, seed=11, name="dropout")
        h = cc.add(dropped, r, name="residual")
        normed = cc.layer_norm(h, gamma, beta, name="ln")
        return h, cc.all_gather(normed, name="ag")

    return sequence_parallel_norm


def build(sizes: dict = TEST) -> ModuleOp:
    """The sequence-parallel LayerNorm module."""
    return cc.module(layer(**sizes))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="print the example's module")
    parser.add_argument("--model", action="store_true", help="at MODEL sizes")
    sizes = MODEL if parser.parse_args().model else TEST
    print(cc.to_text(build(sizes)), end="")
