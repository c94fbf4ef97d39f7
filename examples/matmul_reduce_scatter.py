"""Matmul + reduce_scatter (the row-parallel layer of sequence-parallel tensor
parallelism): `a` [M, K] sliced along K times `b` [K, N] sliced along its rows
gives each rank a partial sum (local); a reduce_scatter adds them up and leaves
rank r with block r of the rows. The same module as
`matmul_reduce_scatter.mlir`.

Run: `python examples/matmul_reduce_scatter.py` prints the IR (`--model`: at
FLUX's TP=8 shape); `coconet-run examples/matmul_reduce_scatter.mlir --world 4`
interprets it.
"""

import argparse

from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc

TEST = dict(M=32, K=64, N=32, element=cc.f32)
"""Small enough to interpret and emulate on 2, 4 and 8 ranks."""

MODEL = dict(M=4096, K=49152, N=12288, element=cc.bf16)
"""FLUX's (Chang et al. 2024) GEMM + reduce-scatter case at TP=8, bf16
(`--model`): the MLP's second, row-parallel GEMM, contracting the 49152-wide
hidden dim sliced over the ranks into 4096 x 12288 partial sums (the same
FLOPs and reduce-scattered bytes as the all-gather + GEMM case,
sequence_parallel.py). To lower and inspect; coco-optimize decomposes it per
peer."""


def layer(M, K, N, element):
    @cc.function
    def matmul_reduce_scatter(
        a: cc.tensor([M, K], element, cc.sliced(1)),
        b: cc.tensor([K, N], element, cc.sliced(0)),
    ):
        partial = cc.matmul(a, b, name="matmul")
        return cc.reduce_scatter(partial, "sum", dim=0, name="reduce_scatter")

    return matmul_reduce_scatter


def build(sizes: dict = TEST) -> ModuleOp:
    """The matmul + reduce_scatter module."""
    return cc.module(layer(**sizes))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="print the example's module")
    parser.add_argument("--model", action="store_true", help="at MODEL sizes")
    sizes = MODEL if parser.parse_args().model else TEST
    print(cc.to_text(build(sizes)), end="")
