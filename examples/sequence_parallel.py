"""Sequence-parallel tensor parallelism (Megatron-LM's sequence parallelism,
Korthikanti et al. 2022): the activations `x` [S, B, H] are sliced along the
sequence; an all_gather rebuilds them before a column-parallel matmul with
`w` [H, F] sliced along its columns, whose result is sliced along F. The batch
dim B is what a chunked overlap of the gather with the matmul cuts (the
sequence dim is sliced, H is contracted). The same
module as `sequence_parallel.mlir`.

Run: `python examples/sequence_parallel.py` prints the IR; `coconet-run
examples/sequence_parallel.mlir --world 4` interprets it.
"""

from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc

S, B, H, F = 16, 8, 32, 64


@cc.function
def sequence_parallel(
    x: cc.tensor([S, B, H], cc.f32, cc.sliced(0)),
    w: cc.tensor([H, F], cc.f32, cc.sliced(1)),
):
    full = cc.all_gather(x, name="gather")
    return cc.matmul(full, w, name="matmul")


def build() -> ModuleOp:
    """The all_gather + matmul module."""
    return cc.module(sequence_parallel)


if __name__ == "__main__":
    print(cc.to_text(build()), end="")
