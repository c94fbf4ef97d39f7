"""Compile time of the coco passes, the lowering and the CUDA target against
program size.

Builds SGD-with-momentum steps over L parameter tensors (each: an all_reduce
and five elementwise ops, one update), parses and verifies them, runs every pass
and `coco-optimize`, lowers them (`convert-coco-to-gpu{world=4}`, as written
and after `coco-optimize`), prints the lowered module as CUDA C, and prints the
time per op of the coco program. Everything must stay linear in program size:
the microseconds per op should not grow with L.

`--program mlp` builds instead L sequence-parallel MLP blocks in a row
(all_gather, fc1, GELU, fc2, reduce_scatter at GPT-3-like widths, bf16) and
times the per-peer decomposition, coco-optimize's choice of overlap (every
block becomes one coco.per_peer) and the lowering of the per-peer regions on
8 ranks (each region unrolled into 8 steps).

    python benchmarks/compile_time.py [--program sgd|mlp] [--sizes 50 100 200 400]
        [--repeat 3] [--no-gc]
"""

from __future__ import annotations

import argparse
import gc
import io
import time

import coconet_ir as cc
from coconet_ir.backend.cuda.printer import print_cuda

PASSES = (
    "coco-split-all-reduce",
    "coco-split-all-reduce,coco-reorder",
    "coco-split-all-reduce,coco-reorder,coco-slice-state",
    "coco-split-all-reduce,coco-reorder,coco-fuse",
    "coco-dce",
    "coco-optimize",
    "convert-coco-to-gpu{world=4}",
    "coco-optimize,convert-coco-to-gpu{world=4}",
)
LOWERED = "coco-optimize,convert-coco-to-gpu{world=4}"
"""The pipeline whose output the `-t cuda` row prints."""

MLP_PASSES = (
    "coco-overlap{per_peer=true}",
    "coco-overlap{auto=true}",
    "coco-optimize",
    "coco-optimize,convert-coco-to-gpu{world=8}",
)
MLP_LOWERED = "coco-optimize,convert-coco-to-gpu{world=8}"

T = "!coco.tensor<1024xf32, {}>"


def program(layers: int) -> str:
    """A step over `layers` parameters: g (local), w and mom (replicated)."""
    rep, loc = T.format("replicated"), T.format("local")
    scalar = "!coco.tensor<f32, replicated>"
    args = [f"%lr: {scalar}", f"%mu: {scalar}"]
    body: list[str] = []
    for i in range(layers):
        args += [f"%g{i}: {loc}", f"%w{i}: {rep}", f"%m{i}: {rep}"]
        binary = f"({rep}, {rep}) -> {rep}"
        body += [
            f"%s{i} = coco.all_reduce %g{i} reduction = sum : {loc} -> {rep}",
            f"%a{i} = coco.mul %mu, %m{i} : ({scalar}, {rep}) -> {rep}",
            f"%m1_{i} = coco.add %a{i}, %s{i} : {binary}",
            f"%d{i} = coco.mul %lr, %m1_{i} : ({scalar}, {rep}) -> {rep}",
            f"%w1_{i} = coco.sub %w{i}, %d{i} : {binary}",
            f"coco.update %w{i}, %w1_{i} : {rep}",
            f"coco.update %m{i}, %m1_{i} : {rep}",
        ]
    lines = "\n  ".join(body)
    return f"func.func @step({', '.join(args)}) {{\n  {lines}\n  func.return\n}}\n"


def mlp_program(layers: int) -> str:
    """`layers` sequence-parallel MLP blocks, each reduce_scatter feeding the
    next all_gather (S = 2048, H = 8192, F = 32768, bf16)."""

    def t(shape: str, layout: str) -> str:
        return f"!coco.tensor<{shape}xbf16, {layout}>"

    x, g = t("2048x8192", "sliced<0>"), t("2048x8192", "replicated")
    w1, w2 = t("8192x32768", "sliced<1>"), t("32768x8192", "sliced<0>")
    h, p = t("2048x32768", "sliced<1>"), t("2048x8192", "local")
    args = [f"%x0: {x}"]
    body: list[str] = []
    for i in range(layers):
        args += [f"%a{i}: {w1}", f"%b{i}: {w2}"]
        body += [
            f"%g{i} = coco.all_gather %x{i} : {x} -> {g}",
            f"%h{i} = coco.matmul %g{i}, %a{i} : ({g}, {w1}) -> {h}",
            f"%e{i} = coco.gelu %h{i} : ({h}) -> {h}",
            f"%p{i} = coco.matmul %e{i}, %b{i} : ({h}, {w2}) -> {p}",
            f"%x{i + 1} = coco.reduce_scatter %p{i} reduction = sum dim = 0 : "
            f"{p} -> {x}",
        ]
    lines = "\n  ".join(body)
    return (
        f"func.func @stack({', '.join(args)}) -> {x} {{\n  {lines}\n"
        f"  func.return %x{layers} : {x}\n}}\n"
    )


def seconds(action, repeat: int) -> float:
    """The best of `repeat` runs of `action()` (each on fresh input)."""
    best = float("inf")
    for _ in range(repeat):
        run = action()
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--program", choices=["sgd", "mlp"], default="sgd")
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 100, 200, 400])
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs per cell, the best is shown"
    )
    parser.add_argument(
        "--no-gc",
        action="store_true",
        help="turn Python's cyclic garbage collector off while timing (its "
        "passes over a large heap are the one cost that grows with the module)",
    )
    args = parser.parse_args()
    if args.no_gc:
        gc.disable()
    print("| step | " + " | ".join(f"L={n} (µs/op)" for n in args.sizes) + " |")
    print("| --- |" + " --- |" * len(args.sizes))
    build, passes, lowered_by = (
        (mlp_program, MLP_PASSES, MLP_LOWERED)
        if args.program == "mlp"
        else (program, PASSES, LOWERED)
    )
    texts = {n: build(n) for n in args.sizes}
    ops = {n: sum(1 for _ in cc.parse(texts[n]).walk()) for n in args.sizes}
    row = [
        seconds(lambda n=n: lambda: cc.parse(texts[n]), args.repeat) / ops[n] * 1e6
        for n in args.sizes
    ]
    print("| parse + verify | " + " | ".join(f"{t:.0f}" for t in row) + " |")
    for spec in passes:
        pipeline = cc.Pipeline(spec)
        row = []
        for n in args.sizes:

            def run(n: int = n):
                module = cc.parse(texts[n])
                return lambda: pipeline.apply(module)

            row.append(seconds(run, args.repeat) / ops[n] * 1e6)
        print(f"| `{spec}` | " + " | ".join(f"{t:.0f}" for t in row) + " |")
    row = []
    for n in args.sizes:

        def emit(n: int = n):
            lowered = cc.Pipeline(lowered_by)(cc.parse(texts[n]))
            return lambda: print_cuda(lowered, io.StringIO())

        row.append(seconds(emit, args.repeat) / ops[n] * 1e6)
    print("| `-t cuda` (print) | " + " | ".join(f"{t:.0f}" for t in row) + " |")


if __name__ == "__main__":
    main()
