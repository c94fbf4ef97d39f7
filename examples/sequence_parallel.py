"""Sequence-parallel tensor parallelism (Megatron-LM's sequence parallelism,
Korthikanti et al. 2022): the activations `x` [S, B, H] are sliced along the
sequence; an all_gather rebuilds them before a column-parallel matmul with
`w` [H, F] sliced along its columns, whose result is sliced along F. The batch
dim B is what a chunked overlap of the gather with the matmul cuts (the
sequence dim is sliced, H is contracted). The same
module as `sequence_parallel.mlir`.

Run: `python examples/sequence_parallel.py` prints the IR (`--model`: at
FLUX's TP=8 shape); `coconet-run examples/sequence_parallel.mlir --world 4`
interprets it.
"""

import argparse

from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc

TEST = dict(S=16, B=8, H=32, F=64, element=cc.f32)
"""Small enough to interpret and emulate on 2, 4 and 8 ranks."""

MODEL = dict(S=4096, B=1, H=12288, F=49152, element=cc.bf16)
"""FLUX's (Chang et al. 2024) all-gather + GEMM case at TP=8, bf16
(`--model`, M = S·B = 4096 tokens): to lower and inspect; coco-optimize
decomposes it per peer (B = 1 leaves nothing to chunk but the sliced
sequence)."""


def layer(S, B, H, F, element):
    @cc.function
    def sequence_parallel(
        x: cc.tensor([S, B, H], element, cc.sliced(0)),
        w: cc.tensor([H, F], element, cc.sliced(1)),
    ):
        full = cc.all_gather(x, name="gather")
        return cc.matmul(full, w, name="matmul")

    return sequence_parallel


def build(sizes: dict = TEST) -> ModuleOp:
    """The all_gather + matmul module."""
    return cc.module(layer(**sizes))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="print the example's module")
    parser.add_argument("--model", action="store_true", help="at MODEL sizes")
    sizes = MODEL if parser.parse_args().model else TEST
    print(cc.to_text(build(sizes)), end="")
