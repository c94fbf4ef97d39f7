"""Data-parallel SGD, the program of docs/dialect.md, "Programs" (CoCoNet's
running example): sum the per-rank gradients with an all_reduce, then
`w <- w - lr * sum`. The same module as `sgd.mlir`.

Run: `python examples/sgd.py` prints the IR; `coconet-run examples/sgd.mlir --world 4`
interprets it.
"""

from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc

N = 1024


@cc.function
def sgd(
    g: cc.tensor([N], cc.f32, cc.local),
    w: cc.tensor([N], cc.f32, cc.replicated),
    lr: cc.tensor([], cc.f32, cc.replicated),
):
    s = cc.all_reduce(g, "sum", name="sum")
    cc.update(w, w - lr * s)


def build() -> ModuleOp:
    """The SGD module."""
    return cc.module(sgd)


if __name__ == "__main__":
    print(cc.to_text(build()), end="")
