"""Adam over BERT-large's parameters, bucketed (PyTorch DDP's gradient
buckets, ZeRO's flat parameters): one data-parallel optimizer step over every
parameter tensor of the model, as `adam.py` does for one tensor.

BERT-large has 24 layers of hidden size 1024 and feed-forward size 4096, a
30522-word vocabulary and 512 positions: 391 parameter tensors, 335 million
parameters (`lamb_bert.py` lists them). For each tensor `p` the step takes
its local gradient `g_p` and the replicated `p`, `m_p`, `v_p` (updated in
place), and computes

    s = all_reduce(g)                                   name p_grad
    m1 = b1*m + (1-b1)*s;  v1 = b2*v + (1-b2)*s*s
    p1 = p - lr*(m1/(1-b1^t))/(sqrt(v1/(1-b2^t))+eps)

with `lr`, `b1t = b1^t`, `b2t = b2^t` shared rank-0 arguments. Written per
tensor, `coco-optimize{bucket=false}` makes one fused kernel launch per
tensor: 391 launches per step (of one kernel per distinct tensor shape).
`coco-optimize` first runs `coco-bucket` (25 MiB buckets, DDP's default):
every bucket concatenates its tensors' gradients, weights and moments
(`coco.concat`), runs ONE all_reduce and ONE Adam chain on the flat bucket,
which the rest of the schedule makes one fused kernel, and splits the new
values back (`coco.split`). The moments stay sliced (ZeRO) bucket by
bucket. At BERT-large's size that is one fused kernel per bucket, plus the
copies into and out of the buckets.

Run: `python examples/adam_bert.py` prints the model's size and the kernel
launches with and without buckets; `--layers 2 --hidden 64 --ffn 256 --vocab
1000 --positions 64` a model small enough to interpret; `--bucket-bytes B` the
bucket capacity. `build(shapes)` returns the module.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc


def _example(name: str) -> ModuleType:
    """`examples/NAME.py` (loaded by path, as an example imports another)."""
    module_name = f"coconet_example_{name}"
    if module_name not in sys.modules:
        path = Path(__file__).with_name(f"{name}.py")
        spec = importlib.util.spec_from_file_location(module_name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return sys.modules[module_name]


Shapes = _example("lamb_bert").Shapes
BERT_LARGE = _example("lamb_bert").BERT_LARGE
parameters = _example("lamb_bert").parameters


def adam_update(p: str, g, w, m, v, lr, b1t, b2t) -> None:
    """Adam for one tensor named `p`: `adam.py`'s step, its all_reduce named
    `p_grad`."""
    _example("adam").adam_update(g, w, m, v, lr, b1t, b2t, grad_name=f"{p}_grad")


def build(shapes: Shapes = BERT_LARGE) -> ModuleOp:
    """The module of one Adam step over every parameter of BERT at `shapes`:
    `@adam_bert(g_0, w_0, m_0, v_0, g_1, ..., lr, b1t, b2t)` (`lamb_bert.py`'s
    step with Adam's update)."""
    return _example("lamb_bert").build(shapes, update=adam_update, name="adam_bert")


def launches(module: ModuleOp, pipeline: str, world: int) -> int:
    """Kernel launches of one step after `pipeline` and the lowering."""
    lowered = cc.Pipeline(f"{pipeline},convert-coco-to-gpu{{world={world}}}")(module)
    return sum(1 for op in lowered.walk() if op.name == "gpu.launch_func")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for field, default in vars(BERT_LARGE).items():
        parser.add_argument(f"--{field.replace('_', '-')}", type=int, default=default)
    parser.add_argument("--bucket-bytes", type=int, default=25 * 1024 * 1024)
    parser.add_argument("--world", type=int, default=4)
    args = parser.parse_args()
    shapes = Shapes(**{k: getattr(args, k) for k in vars(BERT_LARGE)})
    start = time.perf_counter()
    module = build(shapes)
    print(
        f"{len(parameters(shapes))} parameter tensors, built in "
        f"{time.perf_counter() - start:.1f} s"
    )
    for pipeline in (
        "coco-optimize{bucket=false}",
        f"coco-optimize{{bucket_bytes={args.bucket_bytes}}}",
    ):
        count = launches(module.clone(), pipeline, args.world)
        print(f"{pipeline}: {count} kernel launches on {args.world} ranks")


if __name__ == "__main__":
    main()
