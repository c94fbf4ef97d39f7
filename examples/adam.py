"""Data-parallel Adam (CoCoNet, ASPLOS'22): all_reduce the gradients, then
Adam with bias correction. The same module as `adam.mlir`.

Arguments: the local gradient `g`; the replicated parameter `w` and moments
`m`, `v` (all updated in place); rank-0 replicated `lr` and `b1t = beta1^t`,
`b2t = beta2^t` (the bias-correction powers for step `t`, computed by the
training loop). `beta1 = 0.9`, `beta2 = 0.999` and `eps = 1e-8` are constants:

    m1 = b1*m + (1-b1)*g;  v1 = b2*v + (1-b2)*g*g
    mhat = m1/(1-b1^t);    vhat = v1/(1-b2^t)
    w1 = w - lr*mhat/(sqrt(vhat)+eps)

Run: `python examples/adam.py` prints the IR; `coconet-run examples/adam.mlir
--world 4` interprets it.
"""

from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc

N = 1024
Param = cc.tensor([N], cc.f32, cc.replicated)
Scalar = cc.tensor([], cc.f32, cc.replicated)


def adam_update(g, w, m, v, lr, b1t, b2t, grad_name: str = "grad_sum") -> None:
    """Adam for one tensor: its gradient's all_reduce is named `grad_name`.
    examples/lamb_bert.py applies it to every tensor of BERT-large
    (`build(BERT_LARGE, update=...)`; coconet-bench's `adam-bert`)."""
    one = cc.constant(1.0)
    b1 = cc.constant(0.9)
    b2 = cc.constant(0.999)
    eps = cc.constant(1e-8)
    s = cc.all_reduce(g, "sum", name=grad_name)
    m1 = b1 * m + (one - b1) * s
    v1 = b2 * v + (one - b2) * s * s
    mhat = m1 / (one - b1t)
    vhat = v1 / (one - b2t)
    w1 = w - lr * mhat / (cc.sqrt(vhat) + eps)
    cc.update(w, w1)
    cc.update(m, m1)
    cc.update(v, v1)


@cc.function
def adam(
    g: cc.tensor([N], cc.f32, cc.local),
    w: Param,
    m: Param,
    v: Param,
    lr: Scalar,
    b1t: Scalar,
    b2t: Scalar,
):
    adam_update(g, w, m, v, lr, b1t, b2t)


def build() -> ModuleOp:
    """The Adam module."""
    return cc.module(adam)


if __name__ == "__main__":
    print(cc.to_text(build()), end="")
