"""Data-parallel LAMB (CoCoNet, ASPLOS'22): Adam's moments, then a layer-wise
trust ratio. The same module as `lamb.mlir`.

Arguments as in `adam.py` (`g` local; `w`, `m`, `v` replicated and updated;
rank-0 `lr`, `b1t = beta1^t`, `b2t = beta2^t`); constants `beta1 = 0.9`,
`beta2 = 0.999`, `eps = 1e-6`, weight decay `wd = 0.01`:

    m1, v1, mhat, vhat as in Adam
    r = mhat/(sqrt(vhat)+eps) + wd*w
    trust = norm(w)/norm(r)
    w1 = w - lr*trust*r

The norms are `coco.norm`s of replicated values; once a pass slices `w` and
`r` they become `sqrt(all_reduce(reduce(x*x)))`.

Run: `python examples/lamb.py` prints the IR; `coconet-run examples/lamb.mlir
--world 4` interprets it.
"""

from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc

N = 1024
Param = cc.tensor([N], cc.f32, cc.replicated)
Scalar = cc.tensor([], cc.f32, cc.replicated)


@cc.function
def lamb(
    g: cc.tensor([N], cc.f32, cc.local),
    w: Param,
    m: Param,
    v: Param,
    lr: Scalar,
    b1t: Scalar,
    b2t: Scalar,
):
    one = cc.constant(1.0)
    b1 = cc.constant(0.9)
    b2 = cc.constant(0.999)
    eps = cc.constant(1e-6)
    wd = cc.constant(0.01)
    s = cc.all_reduce(g, "sum", name="grad_sum")
    m1 = b1 * m + (one - b1) * s
    v1 = b2 * v + (one - b2) * s * s
    mhat = m1 / (one - b1t)
    vhat = v1 / (one - b2t)
    r = mhat / (cc.sqrt(vhat) + eps) + wd * w
    trust = cc.norm(w, name="w_norm") / cc.norm(r, name="r_norm")
    w1 = w - lr * trust * r
    cc.update(w, w1)
    cc.update(m, m1)
    cc.update(v, v1)


def build() -> ModuleOp:
    """The LAMB module."""
    return cc.module(lamb)


if __name__ == "__main__":
    print(cc.to_text(build()), end="")
