"""LLaMA's pre-norm under sequence parallelism, in bf16: the row-parallel
output's partial sums are reduce-scattered along the sequence, the residual
added, then RMSNorm (Zhang and Sennrich, 2019: `x / sqrt(mean(x*x) + eps) *
weight`, no bias, no dropout) on each rank's rows, and the normalized rows
all-gathered. The same module as `sequence_parallel_rmsnorm.mlir`.

The norm computes in f32, as PyTorch's does for halves (`cc.rms_norm`
converts up and back). Returned: the new residual stream (sliced, bf16) and
the gathered normalized activations.

Run: `python examples/sequence_parallel_rmsnorm.py` prints the IR
(`--model`: LLaMA-2 70B's hidden size); `coconet-run
examples/sequence_parallel_rmsnorm.mlir --world 4` interprets it.
"""

import argparse

from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc

TEST = dict(S=32, H=64)
"""Small enough to interpret and emulate on 2, 4 and 8 ranks."""

MODEL = dict(S=4096, H=8192)
"""A 4096-token sequence at LLaMA-2 70B's hidden size."""


def layer(S, H):
    @cc.function
    def sequence_parallel_rmsnorm(
        partial: cc.tensor([S, H], cc.bf16, cc.local),
        r: cc.tensor([S, H], cc.bf16, cc.sliced(0)),
        weight: cc.tensor([H], cc.bf16, cc.replicated),
    ):
        rows = cc.reduce_scatter(partial, "sum", 0, name="rs")
        h = cc.add(rows, r, name="residual")
        normed = cc.rms_norm(h, weight, eps=1e-5, name="rms")
        return h, cc.all_gather(normed, name="ag")

    return sequence_parallel_rmsnorm


def build(sizes: dict = TEST) -> ModuleOp:
    """The sequence-parallel RMSNorm module."""
    return cc.module(layer(**sizes))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="print the example's module")
    parser.add_argument("--model", action="store_true", help="at MODEL sizes")
    sizes = MODEL if parser.parse_args().model else TEST
    print(cc.to_text(build(sizes)), end="")
