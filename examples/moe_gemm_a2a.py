"""A mixture of experts' combine (the third fused computation-collective
operator of Punniyamurthy et al., 2023): expert-parallel, each of `N` ranks
holds `E/N` experts. After the dispatch, `tokens` [E, S, C, F] holds, for
expert `e`, the `C` tokens (capacity) that source rank `s` routed to it, in
the experts' inner width `F` (after their up-projection and activation); it
is cut along the experts, as are the experts' down-projections `w` [E, F,
H]. Each rank's experts multiply their tokens (`coco.batch_matmul`: group
`e` times expert `e`'s matrix), then the all_to_all sends every token's
result back to its source rank (`dim = 1`). The same module as
`moe_gemm_a2a.mlir`.

`coco-optimize` fuses the experts' GEMM and the all_to_all into one
`coco.fusion` (`coco-fuse-collective`), which the lowering makes ONE
tile-granular kernel whose blocks send each finished tile of tokens to its
source rank at once (docs/fused-operators.md).

Run: `python examples/moe_gemm_a2a.py` prints the IR (`--model`: 64 experts
at Mixtral-like widths); `coconet-run examples/moe_gemm_a2a.mlir --world 4`
interprets it.
"""

import argparse

from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc

TEST = dict(E=8, S=8, C=2, F=32, H=32, element=cc.f32)
"""Experts, source ranks, capacity (tokens per expert and source), the
experts' inner width and the model width: small enough to interpret and
emulate on 2, 4 and 8 ranks."""

MODEL = dict(E=64, S=8, C=256, F=14336, H=4096, element=cc.bf16)
"""Mixtral-like widths with 64 experts on 8 ranks (`--model`): to lower and
inspect."""


def layer(E, S, C, F, H, element):
    @cc.function
    def moe_gemm_a2a(
        tokens: cc.tensor([E, S, C, F], element, cc.sliced(0)),
        w: cc.tensor([E, F, H], element, cc.sliced(0)),
    ):
        outputs = cc.batch_matmul(tokens, w, name="experts")
        return cc.all_to_all(outputs, dim=1, name="combine")

    return moe_gemm_a2a


def build(sizes: dict = TEST) -> ModuleOp:
    """The experts' GEMM and the combine all_to_all."""
    return cc.module(layer(**sizes))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="print the example's module")
    parser.add_argument("--model", action="store_true", help="at MODEL sizes")
    sizes = MODEL if parser.parse_args().model else TEST
    print(cc.to_text(build(sizes)), end="")
