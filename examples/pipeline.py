"""A two-stage pipeline (CoCoNet, ASPLOS'22, section 6): stage 1 ends with
Megatron's row-parallel layer and sends its output to stage 2, which applies
GELU and a replicated matmul. The same module as `pipeline.mlir`.

Each stage runs on its own group of N ranks; rank r of @stage1 sends to rank r
of @stage2 on channel 0.

Run: `python examples/pipeline.py` prints the IR; `coconet-run
examples/pipeline.mlir --world 4` interprets it.
"""

from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc

B, S, H = 4, 8, 64
Activation = cc.tensor([B, S, H], cc.f32, cc.replicated)


@cc.function
def stage1(
    x: cc.tensor([B, S, H], cc.f32, cc.sliced(2)),
    w: cc.tensor([H, H], cc.f32, cc.sliced(0)),
    bias: cc.tensor([H], cc.f32, cc.replicated),
    r: Activation,
):
    layer = cc.matmul(x, w, name="layer")
    total = cc.all_reduce(layer, "sum", name="sum")
    dropped = cc.dropout(total + bias, 0.1, seed=7, name="dropout")
    out = cc.add(dropped, r, name="out")
    cc.send(out, "stage2", channel=0, name="send")


@cc.function
def stage2(w2: cc.tensor([H, H], cc.f32, cc.replicated)):
    h = cc.recv(Activation, "stage1", channel=0, name="recv")
    return cc.matmul(cc.gelu(h), w2, name="mlp")


def build() -> ModuleOp:
    """The two-stage pipeline module."""
    return cc.module(stage1, stage2)


if __name__ == "__main__":
    print(cc.to_text(build()), end="")
