"""LAMB over BERT-large's parameters (CoCoNet, ASPLOS'22, section 6; You et
al., "Large Batch Optimization for Deep Learning: Training BERT in 76
minutes"): one data-parallel optimizer step over every parameter tensor of
the model, each with its own layer-wise trust ratio.

BERT-large has 24 layers of hidden size 1024 and feed-forward size 4096, a
30522-word vocabulary and 512 positions: 391 parameter tensors, 335 million
parameters. For each tensor `p` the step takes its local gradient `g_p` and
the replicated `p`, `m_p`, `v_p` (updated in place), and computes, as
`lamb.py` does for one tensor,

    s = all_reduce(g)                                   name p_grad
    m1 = b1*m + (1-b1)*s                                name p_m1
    v1 = b2*v + (1-b2)*s*s                              name p_v1
    r = m1/(1-b1^t) / (sqrt(v1/(1-b2^t)) + eps) + wd*p  name p_r
    trust = norm(p) / norm(r)                           names p_w_norm, p_r_norm
    p1 = p - lr*trust*r                                 name p_w1

with `lr`, `b1t = b1^t`, `b2t = b2^t` shared rank-0 arguments.

The schedule, per tensor, CoCoNet's `lamb_fuse_RS_C_AG` written with
`cc.Schedule` (docs/passes/coco-fuse.md, "Through reductions"):

    rs, ag = sched.split(f"{p}_grad")   # all_reduce -> reduce_scatter, all_gather
    sched.reorder(ag)                   # the update runs on slices
    sched.slice_state(f"m_{p}")         # ZeRO: the moments stay sliced
    sched.slice_state(f"v_{p}")
    sched.apply("coco-slice-norm")      # |p| on p's slice + a scalar all_reduce
    sched.fuse([rs, f"{p}_w_norm_ar", f"{p}_r_norm_ar", f"{p}_w1"])  # one region

`coco-split-all-reduce,coco-reorder,coco-slice-state,coco-slice-norm,coco-fuse`
does the same for every tensor at once: ONE `coco.fusion` per tensor holding
reduce_scatter -> moments -> both norms' slice sums and scalar all_reduces
-> update -> all_gather. `coco-optimize` gives the same regions, and
`convert-coco-to-gpu` makes each ONE cooperative kernel launch: 391 launches
per step for BERT-large, no NCCL call (docs/gpu/fused.md, "Reductions inside a
fused kernel"), of 8 kernels, one per distinct tensor shape: each launch
passes its tensor's signal slots (docs/gpu/device.md, "Kernels").

Run: `python examples/lamb_bert.py` prints the model's size and what the
schedule makes of it; `--layers 2 --hidden 64 --ffn 256 --vocab 1000
--positions 64` a model small enough to interpret. `build(shapes)` returns the
module.
"""

from __future__ import annotations

import argparse
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from math import prod

from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc
from coconet_ir.dialects import coco


@dataclass(frozen=True)
class Shapes:
    layers: int = 24
    hidden: int = 1024
    ffn: int = 4096
    vocab: int = 30522
    positions: int = 512
    token_types: int = 2


BERT_LARGE = Shapes()

SCHEDULE = (
    "coco-split-all-reduce,coco-reorder,coco-slice-state,coco-slice-norm,coco-fuse"
)
"""What the module docstring's per-tensor schedule does, for every tensor."""


def parameters(shapes: Shapes) -> list[tuple[str, list[int]]]:
    """BERT's parameter tensors, by name and shape, in the order of the model."""
    h, f = shapes.hidden, shapes.ffn
    found = [
        ("word_embeddings", [shapes.vocab, h]),
        ("position_embeddings", [shapes.positions, h]),
        ("token_type_embeddings", [shapes.token_types, h]),
        ("embeddings_ln_gamma", [h]),
        ("embeddings_ln_beta", [h]),
    ]
    for layer in range(shapes.layers):
        p = f"layer{layer}_"
        for matrix in ("query", "key", "value", "attention_out"):
            found += [(p + matrix, [h, h]), (p + matrix + "_bias", [h])]
        found += [(p + "attention_ln_gamma", [h]), (p + "attention_ln_beta", [h])]
        found += [(p + "ffn_in", [h, f]), (p + "ffn_in_bias", [f])]
        found += [(p + "ffn_out", [f, h]), (p + "ffn_out_bias", [h])]
        found += [(p + "output_ln_gamma", [h]), (p + "output_ln_beta", [h])]
    found += [("pooler", [h, h]), ("pooler_bias", [h])]
    return found


def lamb_update(p: str, g, w, m, v, lr, b1t, b2t) -> None:
    """LAMB for one tensor named `p`; its ops are named `p_...`."""
    one, b1, b2 = cc.constant(1.0), cc.constant(0.9), cc.constant(0.999)
    eps, wd = cc.constant(1e-6), cc.constant(0.01)
    s = cc.all_reduce(g, "sum", name=f"{p}_grad")
    m1 = cc.add(b1 * m, (one - b1) * s, name=f"{p}_m1")
    v1 = cc.add(b2 * v, (one - b2) * s * s, name=f"{p}_v1")
    denominator = cc.sqrt(v1 / (one - b2t)) + eps
    r = cc.add(m1 / (one - b1t) / denominator, wd * w, name=f"{p}_r")
    trust = cc.norm(w, name=f"{p}_w_norm") / cc.norm(r, name=f"{p}_r_norm")
    cc.update(w, cc.sub(w, lr * trust * r, name=f"{p}_w1"))
    cc.update(m, m1, name=f"{p}_m")
    cc.update(v, v1, name=f"{p}_v")


def build(
    shapes: Shapes = BERT_LARGE,
    update: Callable[..., None] = lamb_update,
    name: str = "lamb_bert",
) -> ModuleOp:
    """The module of one LAMB step over every parameter of BERT at `shapes`:
    `@lamb_bert(g_0, w_0, m_0, v_0, g_1, ..., lr, b1t, b2t)`. Another
    optimizer's `update(p, g, w, m, v, lr, b1t, b2t)` for one tensor named
    `p` makes its step over the same tensors, in a function called `name`
    (coconet-bench builds Adam over BERT-large so, with examples/adam.py's
    `adam_update`)."""
    tensors = parameters(shapes)
    scalar = cc.tensor([], cc.f32, cc.replicated)
    signature = []
    for tensor, shape in tensors:
        signature += [
            (f"g_{tensor}", cc.tensor(shape, cc.f32, cc.local)),
            (f"w_{tensor}", cc.tensor(shape, cc.f32, cc.replicated)),
            (f"m_{tensor}", cc.tensor(shape, cc.f32, cc.replicated)),
            (f"v_{tensor}", cc.tensor(shape, cc.f32, cc.replicated)),
        ]
    signature += [("lr", scalar), ("b1t", scalar), ("b2t", scalar)]

    def lamb_bert(*args):
        *state, lr, b1t, b2t = args
        for i, (tensor, _) in enumerate(tensors):
            g, w, m, v = state[4 * i : 4 * i + 4]
            update(tensor, g, w, m, v, lr, b1t, b2t)

    lamb_bert.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(arg, inspect.Parameter.POSITIONAL_ONLY, annotation=t)
            for arg, t in signature
        ]
    )
    return cc.module(cc.function(lamb_bert, name=name))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for field, default in vars(BERT_LARGE).items():
        parser.add_argument(f"--{field.replace('_', '-')}", type=int, default=default)
    args = parser.parse_args()
    shapes = Shapes(**{k: getattr(args, k) for k in vars(BERT_LARGE)})
    tensors = parameters(shapes)
    start = time.perf_counter()
    module = build(shapes)
    built = time.perf_counter() - start
    ops = sum(1 for _ in module.walk())
    count = sum(prod(shape) for _, shape in tensors)
    print(f"{len(tensors)} parameter tensors, {count:,} parameters, {ops:,} ops")
    print(f"built in {built:.1f} s")
    start = time.perf_counter()
    scheduled = cc.Pipeline(SCHEDULE)(module)
    fusions = [op for op in scheduled.walk() if isinstance(op, coco.FusionOp)]
    print(f"{SCHEDULE}: {len(fusions)} fusions in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
