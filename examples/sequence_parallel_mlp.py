"""A transformer's MLP block with Megatron-LM's sequence parallelism
(Korthikanti et al. 2022): the activations `x` [S, B, H] are sliced along the
sequence; an all_gather rebuilds them before the column-parallel first layer
(`w1` [H, F] sliced along its columns), whose result is sliced along F; the
replicated bias `b1` [F] is added to each rank's columns and GELU applied to
them; the row-parallel second layer (`w2` [F, H] sliced along its rows) gives
each rank a partial sum (local), which a reduce_scatter adds up and cuts
along the sequence again, ready for the next block's sequence-parallel
LayerNorm and dropout. The two examples `sequence_parallel` and
`matmul_reduce_scatter`, joined by the bias and GELU. The same module as
`sequence_parallel_mlp.mlir`.

Run: `python examples/sequence_parallel_mlp.py` prints the IR (`--model`: at
GPT-3 175B's widths); `coconet-run examples/sequence_parallel_mlp.mlir
--world 4` interprets it.
"""

import argparse

from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc

TEST = dict(S=16, B=4, H=32, F=64, element=cc.f32)
"""Sequence, batch, hidden and MLP widths: small enough to interpret and
emulate on 2, 4 and 8 ranks."""

MODEL = dict(S=2048, B=1, H=12288, F=49152, element=cc.bf16)
"""GPT-3 175B's sequence length and widths at batch 1 (`--model`): to lower
and inspect."""


def layer(S, B, H, F, element):
    @cc.function
    def sequence_parallel_mlp(
        x: cc.tensor([S, B, H], element, cc.sliced(0)),
        w1: cc.tensor([H, F], element, cc.sliced(1)),
        b1: cc.tensor([F], element, cc.replicated),
        w2: cc.tensor([F, H], element, cc.sliced(0)),
    ):
        full = cc.all_gather(x, name="gather")
        hidden = cc.matmul(full, w1, name="fc1")
        biased = cc.add(hidden, b1, name="bias")
        activated = cc.gelu(biased, name="gelu")
        partial = cc.matmul(activated, w2, name="fc2")
        return cc.reduce_scatter(partial, "sum", dim=0, name="scatter")

    return sequence_parallel_mlp


def build(sizes: dict = TEST) -> ModuleOp:
    """The sequence-parallel MLP block module."""
    return cc.module(layer(**sizes))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="print the example's module")
    parser.add_argument("--model", action="store_true", help="at MODEL sizes")
    sizes = MODEL if parser.parse_args().model else TEST
    print(cc.to_text(build(sizes)), end="")
