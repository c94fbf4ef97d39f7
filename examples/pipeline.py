"""A two-stage pipeline (CoCoNet, ASPLOS'22, section 6): stage 1 ends with
Megatron's row-parallel layer and sends its output to stage 2, which applies
GELU and a replicated matmul. The same module as `pipeline.mlir`.

Each stage runs on its own group of N ranks; rank r of @stage1 sends to rank r
of @stage2 on channel 0.

Run: `python examples/pipeline.py` prints the IR (`--model`: a GPT-3-like
stage); `coconet-run examples/pipeline.mlir --world 4` interprets it.
"""

import argparse

from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc

TEST = dict(B=4, S=8, H=64, element=cc.f32)
"""Small enough to interpret and emulate on 2, 4 and 8 ranks."""

MODEL = dict(B=8, S=2048, H=12288, element=cc.bf16)
"""A GPT-3-like stage boundary (hidden size 12288, sequence 2048, a
micro-batch of 8) at TP = 8 per stage, bf16 (`--model`): to lower and
inspect."""


def stages(B, S, H, element):
    activation = cc.tensor([B, S, H], element, cc.replicated)

    @cc.function
    def stage1(
        x: cc.tensor([B, S, H], element, cc.sliced(2)),
        w: cc.tensor([H, H], element, cc.sliced(0)),
        bias: cc.tensor([H], element, cc.replicated),
        r: activation,
    ):
        layer = cc.matmul(x, w, name="layer")
        total = cc.all_reduce(layer, "sum", name="sum")
        dropped = cc.dropout(total + bias, 0.1, seed=7, name="dropout")
        out = cc.add(dropped, r, name="out")
        cc.send(out, "stage2", channel=0, name="send")

    @cc.function
    def stage2(w2: cc.tensor([H, H], element, cc.replicated)):
        h = cc.recv(activation, "stage1", channel=0, name="recv")
        return cc.matmul(cc.gelu(h), w2, name="mlp")

    return stage1, stage2


stage1, stage2 = stages(**TEST)
"""The stages at TEST sizes (`cc.Schedule(stage1, stage2)`)."""


def build(sizes: dict = TEST) -> ModuleOp:
    """The two-stage pipeline module."""
    return cc.module(*stages(**sizes))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="print the example's module")
    parser.add_argument("--model", action="store_true", help="at MODEL sizes")
    sizes = MODEL if parser.parse_args().model else TEST
    print(cc.to_text(build(sizes)), end="")
