"""A mixture of experts' combine (the third fused computation-collective
operator of Punniyamurthy et al., 2023): expert-parallel, each of `N` ranks
holds `E/N` experts. After the dispatch, `tokens` [E, S, C, H] holds, for
expert `e`, the `C` tokens (capacity) that source rank `s` routed to it; it
is cut along the experts, as are the experts' weights `w` [E, H, H]. Each
rank's experts multiply their tokens (`coco.batch_matmul`: group `e` times
expert `e`'s matrix), then the all_to_all sends every token's result back to
its source rank (`dim = 1`). The same module as `moe_gemm_a2a.mlir`.

`coco-optimize` fuses the experts' GEMM and the all_to_all into one
`coco.fusion` (`coco-fuse-collective`), which the lowering makes ONE
tile-granular kernel whose blocks send each finished tile of tokens to its
source rank at once (docs/fused-operators.md).

Run: `python examples/moe_gemm_a2a.py` prints the IR; `coconet-run
examples/moe_gemm_a2a.mlir --world 4` interprets it.
"""

from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc

E, S, C, H = 8, 8, 2, 32  # experts, source ranks, capacity, hidden


@cc.function
def moe_gemm_a2a(
    tokens: cc.tensor([E, S, C, H], cc.f32, cc.sliced(0)),
    w: cc.tensor([E, H, H], cc.f32, cc.sliced(0)),
):
    outputs = cc.batch_matmul(tokens, w, name="experts")
    return cc.all_to_all(outputs, dim=1, name="combine")


def build() -> ModuleOp:
    """The experts' GEMM and the combine all_to_all."""
    return cc.module(moe_gemm_a2a)


if __name__ == "__main__":
    print(cc.to_text(build()), end="")
