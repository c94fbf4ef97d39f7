"""Matmul + reduce_scatter (the row-parallel layer of sequence-parallel tensor
parallelism): `a` [M, K] sliced along K times `b` [K, N] sliced along its rows
gives each rank a partial sum (local); a reduce_scatter adds them up and leaves
rank r with block r of the rows. The same module as
`matmul_reduce_scatter.mlir`.

Run: `python examples/matmul_reduce_scatter.py` prints the IR; `coconet-run
examples/matmul_reduce_scatter.mlir --world 4` interprets it.
"""

from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc

M, K, N = 32, 64, 32


@cc.function
def matmul_reduce_scatter(
    a: cc.tensor([M, K], cc.f32, cc.sliced(1)),
    b: cc.tensor([K, N], cc.f32, cc.sliced(0)),
):
    partial = cc.matmul(a, b, name="matmul")
    return cc.reduce_scatter(partial, "sum", dim=0, name="reduce_scatter")


def build() -> ModuleOp:
    """The matmul + reduce_scatter module."""
    return cc.module(matmul_reduce_scatter)


if __name__ == "__main__":
    print(cc.to_text(build()), end="")
