"""Compile time of parsing, each pass, the lowering and the CUDA target against
program size, and of the whole `coconet-opt` pipeline against its own parse +
print.

Builds programs of 1,000 to 100,000 coco ops (`--ops`, rounded to whole
layers) of four kinds (`--program`):

- `sgd`: SGD with momentum over L parameters (an all_reduce, four elementwise
  ops and two updates per parameter);
- `adam`: Adam with bias correction over L parameters (an all_reduce, fourteen
  elementwise ops and three updates per parameter; the scalars shared);
- `megatron`: L Megatron MLP blocks in a row (column-parallel matmul,
  row-parallel matmul → all_reduce → + bias → dropout → + residual);
- `mlp`: L sequence-parallel MLP blocks (all_gather, fc1, GELU, fc2,
  reduce_scatter at GPT-3-like widths; lowered on 8 ranks);
- `lamb`: LAMB over a BERT of L layers at BERT-large's widths
  (examples/lamb_bert.py: 16 tensors a layer and 7 more, 33 ops each; every
  tensor one fused kernel launch with two norms; lowered on 8 ranks; 24
  layers is BERT-large, 12,906 ops).

For each size it writes the program to a `.mlir` file and times, as rows (the
least CPU time of `--repeat` runs, seconds, subprocesses included):

- `coconet-opt FILE`: parse, verify and print, no pass, run in-process through
  coconet-opt's own driver (`CocoNetOptMain`), the reference of the ratios;
- parse + verify (`cc.parse`);
- each part of `coco-optimize`, in its order, on the output of the parts
  before it (no verification in between, as inside coco-optimize);
- `coco-optimize` and then `convert-coco-to-gpu{world=N}`, each followed by
  the module verification the drivers run after every pass; `coco-grad` +
  verification for the kinds it applies to (`megatron`, `mlp`);
- the CUDA emission (`-t cuda`) of the lowered module;
- `coconet-opt FILE -p 'coco-optimize,convert-coco-to-gpu{world=N}' -t cuda`,
  in-process;
- the two `coconet-opt` runs again as subprocesses of the installed command
  (`--cli`; start-up included).

Below each table: the ratio full pipeline / parse + print, and each row's
growth when the program doubles (time at 2n ops / time at n ops). The targets
(docs/performance.md): full ≤ 6x parse + print, growth ≤ 2.4x.

    python benchmarks/compile_time.py [--program sgd adam megatron mlp lamb]
        [--ops 1000 2000 4000 8000 16000] [--repeat 3] [--cli] [--quick]
        [--headline] [--no-gc]

`--quick` runs 250, 500 and 1,000 ops once; `--headline` times only the
`coconet-opt` rows (for the largest sizes).
"""

from __future__ import annotations

import argparse
import gc
import io
import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc
import coconet_ir.ir as ir
from coconet_ir.backend.cuda.printer import print_cuda
from coconet_ir.passes.optimize import Optimize
from coconet_ir.tools.coconet_bench import load_example
from coconet_ir.tools.coconet_opt import CocoNetOptMain

T = "!coco.tensor<1024xf32, {}>"
REP, LOC = T.format("replicated"), T.format("local")
SCALAR = "!coco.tensor<f32, replicated>"
BINARY = f"({REP}, {REP}) -> {REP}"
SCALED = f"({SCALAR}, {REP}) -> {REP}"


def program(layers: int) -> str:
    """A step over `layers` parameters: g (local), w and mom (replicated)."""
    args = [f"%lr: {SCALAR}", f"%mu: {SCALAR}"]
    body: list[str] = []
    for i in range(layers):
        args += [f"%g{i}: {LOC}", f"%w{i}: {REP}", f"%m{i}: {REP}"]
        body += [
            f"%s{i} = coco.all_reduce %g{i} reduction = sum : {LOC} -> {REP}",
            f"%a{i} = coco.mul %mu, %m{i} : {SCALED}",
            f"%m1_{i} = coco.add %a{i}, %s{i} : {BINARY}",
            f"%d{i} = coco.mul %lr, %m1_{i} : {SCALED}",
            f"%w1_{i} = coco.sub %w{i}, %d{i} : {BINARY}",
            f"coco.update %w{i}, %w1_{i} : {REP}",
            f"coco.update %m{i}, %m1_{i} : {REP}",
        ]
    lines = "\n  ".join(body)
    return f"func.func @step({', '.join(args)}) {{\n  {lines}\n  func.return\n}}\n"


def adam_program(layers: int) -> str:
    """Adam (examples/adam.mlir) over `layers` parameters g, w, m, v; the
    constants and the bias corrections are computed once."""
    args = [f"%lr: {SCALAR}", f"%b1t: {SCALAR}", f"%b2t: {SCALAR}"]
    scalar_sub = f"({SCALAR}, {SCALAR}) -> {SCALAR}"
    body = [
        f"%one = coco.constant 1.0 : {SCALAR}",
        f"%b1 = coco.constant 0.9 : {SCALAR}",
        f"%b2 = coco.constant 0.999 : {SCALAR}",
        f"%eps = coco.constant 1.0e-08 : {SCALAR}",
        f"%omb1 = coco.sub %one, %b1 : {scalar_sub}",
        f"%omb2 = coco.sub %one, %b2 : {scalar_sub}",
        f"%bc1 = coco.sub %one, %b1t : {scalar_sub}",
        f"%bc2 = coco.sub %one, %b2t : {scalar_sub}",
    ]
    divided = f"({REP}, {SCALAR}) -> {REP}"
    for i in range(layers):
        args += [f"%g{i}: {LOC}", f"%w{i}: {REP}", f"%m{i}: {REP}", f"%v{i}: {REP}"]
        body += [
            f"%grad{i} = coco.all_reduce %g{i} reduction = sum : {LOC} -> {REP}",
            f"%b1m{i} = coco.mul %b1, %m{i} : {SCALED}",
            f"%mg{i} = coco.mul %omb1, %grad{i} : {SCALED}",
            f"%m1_{i} = coco.add %b1m{i}, %mg{i} : {BINARY}",
            f"%b2v{i} = coco.mul %b2, %v{i} : {SCALED}",
            f"%vg{i} = coco.mul %omb2, %grad{i} : {SCALED}",
            f"%vgg{i} = coco.mul %vg{i}, %grad{i} : {BINARY}",
            f"%v1_{i} = coco.add %b2v{i}, %vgg{i} : {BINARY}",
            f"%mhat{i} = coco.div %m1_{i}, %bc1 : {divided}",
            f"%vhat{i} = coco.div %v1_{i}, %bc2 : {divided}",
            f"%lrm{i} = coco.mul %lr, %mhat{i} : {SCALED}",
            f"%root{i} = coco.sqrt %vhat{i} : ({REP}) -> {REP}",
            f"%den{i} = coco.add %root{i}, %eps : {divided}",
            f"%step{i} = coco.div %lrm{i}, %den{i} : {BINARY}",
            f"%w1_{i} = coco.sub %w{i}, %step{i} : {BINARY}",
            f"coco.update %w{i}, %w1_{i} : {REP}",
            f"coco.update %m{i}, %m1_{i} : {REP}",
            f"coco.update %v{i}, %v1_{i} : {REP}",
        ]
    lines = "\n  ".join(body)
    return f"func.func @adam({', '.join(args)}) {{\n  {lines}\n  func.return\n}}\n"


def megatron_program(layers: int) -> str:
    """`layers` Megatron MLP blocks (f16, B = 8, S = 1024, H = 4096, F = 4H):
    x @ A (A's columns sliced) @ B (B's rows sliced) gives each rank a partial
    sum; all_reduce, + bias, dropout, + x (examples/megatron.mlir's layer)."""

    def t(shape: str, layout: str) -> str:
        return f"!coco.tensor<{shape}xf16, {layout}>"

    x, p = t("8x1024x4096", "replicated"), t("8x1024x4096", "local")
    a, b = t("4096x16384", "sliced<1>"), t("16384x4096", "sliced<0>")
    h, bias = t("8x1024x16384", "sliced<2>"), t("4096", "replicated")
    args = [f"%x0: {x}"]
    body: list[str] = []
    for i in range(layers):
        args += [f"%a{i}: {a}", f"%b{i}: {b}", f"%c{i}: {bias}"]
        body += [
            f"%h{i} = coco.matmul %x{i}, %a{i} : ({x}, {a}) -> {h}",
            f"%p{i} = coco.matmul %h{i}, %b{i} : ({h}, {b}) -> {p}",
            f"%s{i} = coco.all_reduce %p{i} reduction = sum : {p} -> {x}",
            f"%y{i} = coco.add %s{i}, %c{i} : ({x}, {bias}) -> {x}",
            f"%d{i} = coco.dropout %y{i} p = 0.1 seed = {i} : ({x}) -> {x}",
            f"%x{i + 1} = coco.add %d{i}, %x{i} : ({x}, {x}) -> {x}",
        ]
    lines = "\n  ".join(body)
    return (
        f"func.func @layers({', '.join(args)}) -> {x} {{\n  {lines}\n"
        f"  func.return %x{layers} : {x}\n}}\n"
    )


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


def lamb_program(layers: int) -> str:
    """LAMB over BERT-large's tensor shapes with `layers` layers, as
    examples/lamb_bert.py builds it."""
    example = load_example("lamb_bert")
    return cc.to_text(example.build(example.Shapes(layers=layers)))


@dataclass(frozen=True)
class Kind:
    """A program kind: its builder, coco ops per layer (the few shared ops
    aside) and the world size it is lowered for."""

    build: Callable[[int], str]
    ops_per_layer: int
    world: int = 4
    differentiable: bool = False
    """Whether `coco-grad` applies (no `coco.update`): a row of its own."""

    def full_pipeline(self) -> str:
        return f"coco-optimize,convert-coco-to-gpu{{world={self.world}}}"


KINDS = {
    "sgd": Kind(program, 7),
    "adam": Kind(adam_program, 18),
    "megatron": Kind(megatron_program, 6, differentiable=True),
    "mlp": Kind(mlp_program, 5, world=8, differentiable=True),
    "lamb": Kind(lamb_program, 528, world=8),
}


def coco_ops(module: ModuleOp) -> int:
    return sum(1 for op in module.walk() if op.dialect_name() == "coco")


def best(setup: Callable[[], Callable[[], object]], repeat: int) -> float:
    """The least CPU time of `repeat` runs of `setup()()`, this process's and
    its children's (another load on the machine disturbs it less than the
    wall-clock time): setup, untimed, returns the action to time on fresh
    input."""
    times = []
    for _ in range(repeat):
        action = setup()
        gc.collect()
        start = cpu_time()
        action()
        times.append(cpu_time() - start)
    return min(times)


def cpu_time() -> float:
    """User + system seconds of this process and its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def coconet_opt(argv: list[str]) -> None:
    """`coconet-opt ARGV` in this process, through its own driver."""
    CocoNetOptMain(argv).run()


def coconet_opt_process(argv: list[str]) -> None:
    """The installed `coconet-opt ARGV` as a subprocess (start-up included)."""
    subprocess.run(["coconet-opt", *argv], check=True)


def rows_for(
    kind: Kind, path: Path, out: Path, repeat: int, headline: bool, cli: bool
) -> dict[str, float]:
    """The seconds of every row for the program in `path`."""
    text = path.read_text()
    full = [str(path), "-p", kind.full_pipeline(), "-t", "cuda", "-o", str(out)]
    plain = [str(path), "-o", str(out)]
    rows: dict[str, float] = {}

    def measure(row: str, setup: Callable[[], Callable[[], object]]) -> None:
        print(f"  {row} ...", end="", file=sys.stderr, flush=True)
        rows[row] = best(setup, repeat)
        print(f" {rows[row]:.2f} s", file=sys.stderr)

    measure("`coconet-opt FILE`", lambda: lambda: coconet_opt(plain))
    if not headline:
        measure("parse + verify", lambda: lambda: cc.parse(text))
        ctx = ir.make_context()
        optimize = Optimize()
        module = cc.parse(text)
        for step in optimize.steps():

            def on_copy(step=step, state=module) -> Callable[[], object]:
                copy = state.clone()
                return lambda: step(copy)

            measure(f"  `{step.part.name}`", on_copy)
            step(module)
        lower = cc.Pipeline(f"convert-coco-to-gpu{{world={kind.world}}}").passes[0]

        def then_verify(pass_, module: ModuleOp) -> Callable[[], object]:
            return lambda: (pass_.apply(ctx, module), ir.verify(module))

        measure(
            "`coco-optimize` + verify",
            lambda: then_verify(optimize, cc.parse(text)),
        )
        if kind.differentiable:
            grad = cc.Pipeline("coco-grad").passes[0]
            measure("`coco-grad` + verify", lambda: then_verify(grad, cc.parse(text)))
        optimized = cc.Pipeline("coco-optimize")(cc.parse(text))
        measure(
            f"`convert-coco-to-gpu{{world={kind.world}}}` + verify",
            lambda: then_verify(lower, optimized.clone()),
        )
        lowered = cc.Pipeline(kind.full_pipeline())(cc.parse(text))
        measure(
            "`-t cuda` (emission)", lambda: lambda: print_cuda(lowered, io.StringIO())
        )
    measure("`coconet-opt FILE -p FULL -t cuda`", lambda: lambda: coconet_opt(full))
    if cli:
        measure("CLI `coconet-opt FILE`", lambda: lambda: coconet_opt_process(plain))
        measure(
            "CLI `coconet-opt FILE -p FULL -t cuda`",
            lambda: lambda: coconet_opt_process(full),
        )
    return rows


def ratio_rows(sizes: list[int], table: dict[int, dict[str, float]]) -> list[str]:
    """The ratio full / parse + print at each size, in-process and as CLI."""
    lines = []
    for prefix in ("", "CLI "):
        full = f"{prefix}`coconet-opt FILE -p FULL -t cuda`"
        plain = f"{prefix}`coconet-opt FILE`"
        if all(full in table[n] and plain in table[n] for n in sizes):
            cells = [f"{table[n][full] / table[n][plain]:.2f}x" for n in sizes]
            lines.append(
                f"| **{prefix}full / parse + print** | " + " | ".join(cells) + " |"
            )
    return lines


def growth_lines(sizes: list[int], table: dict[int, dict[str, float]]) -> list[str]:
    """Each row's time at 2n ops / at n ops, for every size that doubles the
    one before it (within 10%)."""
    pairs = [(a, b) for a, b in pairwise(sizes) if abs(b / a - 2) < 0.2]
    if not pairs:
        return []
    lines = [
        "",
        "| growth when the program doubles | "
        + " | ".join(f"{a:,} → {b:,}" for a, b in pairs)
        + " |",
        "| --- |" + " ---: |" * len(pairs),
    ]
    for row in table[sizes[0]]:
        cells = [f"{table[b][row] / table[a][row]:.2f}x" for a, b in pairs]
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--program", nargs="+", choices=list(KINDS), default=["sgd"])
    parser.add_argument(
        "--ops",
        type=int,
        nargs="+",
        default=[1000, 2000, 4000, 8000, 16000],
        help="program sizes in coco ops (rounded to whole layers)",
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs per cell, the best is shown"
    )
    parser.add_argument("--quick", action="store_true", help="250, 500, 1000 ops once")
    parser.add_argument(
        "--headline", action="store_true", help="only the coconet-opt rows"
    )
    parser.add_argument(
        "--cli", action="store_true", help="also time the coconet-opt command"
    )
    parser.add_argument(
        "--no-gc",
        action="store_true",
        help="turn Python's cyclic garbage collector off while timing",
    )
    args = parser.parse_args()
    if args.quick:
        args.ops, args.repeat = [250, 500, 1000], 1
    if args.no_gc:
        gc.disable()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.program:
            kind = KINDS[name]
            table: dict[int, dict[str, float]] = {}
            sizes: list[int] = []
            for target in args.ops:
                layers = max(1, round(target / kind.ops_per_layer))
                path = Path(tmp, f"{name}_{layers}.mlir")
                path.write_text(kind.build(layers))
                n = coco_ops(cc.parse(path.read_text()))
                print(f"{name}, {layers} layers, {n} coco ops", file=sys.stderr)
                sizes.append(n)
                table[n] = rows_for(
                    kind, path, Path(tmp, "out"), args.repeat, args.headline, args.cli
                )
            print(f"\n`{name}` (FULL = `{kind.full_pipeline()}`), seconds:\n")
            print("| step | " + " | ".join(f"{n:,} ops" for n in sizes) + " |")
            print("| --- |" + " ---: |" * len(sizes))
            for row in table[sizes[0]]:
                cells = [f"{table[n][row]:.2f}" for n in sizes]
                print(f"| {row} | " + " | ".join(cells) + " |")
            for line in ratio_rows(sizes, table) + growth_lines(sizes, table):
                print(line)


if __name__ == "__main__":
    main()
