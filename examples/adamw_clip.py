"""AdamW with gradient clipping by global norm, data parallel: what
`torch.nn.utils.clip_grad_norm_(params, max_norm=1.0)` followed by
`torch.optim.AdamW` does in every LLM training step. The same module as
`adamw_clip.mlir` (three parameters); `--bert` builds it over BERT-large's
391 tensors and prints the kernel launches of one step.

For every parameter `p`: its local gradient `g_p` and the replicated `w_p`,
`m_p`, `v_p` (updated in place); `lr`, `b1t = beta1^t`, `b2t = beta2^t` are
shared rank-0 arguments:

    s_p = all_reduce(g_p)
    norm = sqrt(sum over p of sum(s_p * s_p))       one norm over ALL gradients
    c = min(1, max_norm / (norm + 1e-6))
    m1 = b1*m + (1-b1)*(c*s);  v1 = b2*v + (1-b2)*(c*s)*(c*s)
    w1 = w*(1 - lr*wd) - lr*(m1/(1-b1t))/(sqrt(v1/(1-b2t)) + eps)

`coco-optimize` buckets the parameters (`coco-bucket`: the squares' sums of
a bucket's parameters become one sum over the flat bucket), splits the
bucket's all_reduce, keeps the moments sliced and fuses the rest: ONE fused
kernel (cooperative: the norm's partials are combined across its grid and
the ranks inside it), besides the copies into and out of the buckets
(docs/passes/coco-bucket.md, "Sums across parameters"). Without buckets
(`coco-optimize{bucket=false}`) it is one fused kernel with a part per
parameter shape and no copies (docs/gpu/fused.md, "Several slice shapes").

Run: `python examples/adamw_clip.py` prints the IR; `--bert` the launches at
BERT-large's sizes; `coconet-run examples/adamw_clip.mlir --world 4`
interprets it.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType

from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc

TEST = [("embedding", [256, 64]), ("bias", [64]), ("projection", [128, 32])]
"""Three parameters, small enough to interpret and emulate on 2, 4 and 8
ranks."""

MAX_NORM, WEIGHT_DECAY = 1.0, 0.01


def clipped_step(tensors: list[tuple[str, list[int]]]):
    """One AdamW step with global-norm clipping over `tensors` (name, shape):
    `@adamw_clip(g_0, w_0, m_0, v_0, g_1, ..., lr, b1t, b2t)`."""
    scalar = cc.tensor([], cc.f32, cc.replicated)
    signature = []
    for name, shape in tensors:
        signature += [
            (f"g_{name}", cc.tensor(shape, cc.f32, cc.local)),
            (f"w_{name}", cc.tensor(shape, cc.f32, cc.replicated)),
            (f"m_{name}", cc.tensor(shape, cc.f32, cc.replicated)),
            (f"v_{name}", cc.tensor(shape, cc.f32, cc.replicated)),
        ]
    signature += [("lr", scalar), ("b1t", scalar), ("b2t", scalar)]

    def adamw_clip(*args):
        *state, lr, b1t, b2t = args
        grads = [
            cc.all_reduce(state[4 * i], "sum", name=f"{name}_grad")
            for i, (name, _) in enumerate(tensors)
        ]
        squares = None
        for s in grads:
            term = cc.reduce(s * s, "sum", list(range(s.rank)))
            squares = term if squares is None else squares + term
        norm = cc.sqrt(squares, name="grad_norm")
        one = cc.constant(1.0)
        clip = cc.minimum(one, cc.constant(MAX_NORM) / (norm + 1e-6), name="clip")
        b1, b2, eps = cc.constant(0.9), cc.constant(0.999), cc.constant(1e-8)
        decay = one - lr * WEIGHT_DECAY
        for i, s in enumerate(grads):
            _, w, m, v = state[4 * i : 4 * i + 4]
            g = s * clip
            m1 = b1 * m + (one - b1) * g
            v1 = b2 * v + (one - b2) * g * g
            step = (m1 / (one - b1t)) / (cc.sqrt(v1 / (one - b2t)) + eps)
            cc.update(w, w * decay - lr * step)
            cc.update(m, m1)
            cc.update(v, v1)

    adamw_clip.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(arg, inspect.Parameter.POSITIONAL_ONLY, annotation=t)
            for arg, t in signature
        ]
    )
    return cc.function(adamw_clip, name="adamw_clip")


def build(tensors: list[tuple[str, list[int]]] = TEST) -> ModuleOp:
    """The module of one clipped AdamW step over `tensors`."""
    return cc.module(clipped_step(tensors))


def bert_large() -> list[tuple[str, list[int]]]:
    """BERT-large's 391 parameter tensors (`lamb_bert.py` lists them)."""
    path = Path(__file__).with_name("lamb_bert.py")
    spec = importlib.util.spec_from_file_location("coconet_example_lamb_bert", path)
    assert spec is not None and spec.loader is not None
    lamb_bert: ModuleType = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = lamb_bert
    spec.loader.exec_module(lamb_bert)
    return lamb_bert.parameters(lamb_bert.BERT_LARGE)


def launches(module: ModuleOp, pipeline: str, world: int) -> dict[str, int]:
    """Kernel launches of one step after `pipeline` and the lowering, by
    kind: the fused kernels, and the others (copies, elementwise, ...)."""
    lowered = cc.Pipeline(f"{pipeline},convert-coco-to-gpu{{world={world}}}")(module)
    names = [
        str(op.attributes.get("kernel", op.properties.get("kernel")))
        for op in lowered.walk()
        if op.name == "gpu.launch_func"
    ]
    fused = sum("fused" in name for name in names)
    return {"fused": fused, "other": len(names) - fused}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="print the example's module")
    parser.add_argument("--bert", action="store_true", help="BERT-large's launches")
    parser.add_argument("--world", type=int, default=4)
    args = parser.parse_args()
    if not args.bert:
        print(cc.to_text(build()), end="")
    else:
        module = build(bert_large())
        for pipeline in ("coco-optimize{bucket=false}", "coco-optimize"):
            count = launches(module.clone(), pipeline, args.world)
            print(f"{pipeline}: {count} kernel launches on {args.world} ranks")
