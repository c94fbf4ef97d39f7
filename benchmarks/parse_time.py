"""Parse + verify + print time of coconet-opt against xdsl-opt, by file size.

Generates programs of N ops in a temporary directory and runs `coconet-opt FILE`
and `xdsl-opt FILE` (which loads the coco dialect as a plugin) on each, as
subprocesses that write the printed module to a file; both outputs must be the
same text. Two program shapes:

- `chain`: one function, a chain of `coco.add` (the shape of the issue report);
- `sgd`: a module with `coco.world_size` whose functions are SGD-with-momentum
  steps over 64 parameters each (an all_reduce, four elementwise ops and two
  updates per parameter, as in compile_time.py).

Prints a markdown table: seconds, microseconds per op and the ratio
coconet-opt / xdsl-opt. Both tools must stay linear in the size of the file (the
µs/op flat) and coconet-opt within 1.3x of xdsl-opt. The time is the CPU time
(user + sys) of the subprocess, which other load on the machine disturbs less
than wall-clock time (`--clock wall` for that); with `--repeat`, the best run.
The default sizes take about 4 minutes on 2 cores; 1M ops takes about 8 minutes
and 2.5 GB of memory per tool and shape.

    python benchmarks/parse_time.py [--sizes 1000 10000 100000 1000000]
        [--shapes chain sgd] [--repeat 1] [--clock cpu|wall]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

T = "!coco.tensor<1024xf32, {}>"
REP, LOC = T.format("replicated"), T.format("local")
SCALAR = "!coco.tensor<f32, replicated>"
LAYERS_PER_STEP = 64
OPS_PER_LAYER = 7
TOOLS = ("coconet-opt", "xdsl-opt")


def chain(ops: int) -> str:
    """One function: `ops` coco.add, each adding %b to the previous sum."""
    binary = f"({REP}, {REP}) -> {REP}"
    lines = [f"func.func @chain(%a: {REP}, %b: {REP}) -> {REP} {{"]
    lines.append(f"  %v0 = coco.add %a, %b : {binary}")
    lines += [f"  %v{i} = coco.add %v{i - 1}, %b : {binary}" for i in range(1, ops)]
    lines += [f"  func.return %v{ops - 1} : {REP}", "}", ""]
    return "\n".join(lines)


def sgd_step(step: int, layers: int) -> list[str]:
    """`@step_K`: SGD with momentum over `layers` parameters g, w, m."""
    args = [f"%lr: {SCALAR}", f"%mu: {SCALAR}"]
    body: list[str] = []
    binary = f"({REP}, {REP}) -> {REP}"
    for i in range(layers):
        args += [f"%g{i}: {LOC}", f"%w{i}: {REP}", f"%m{i}: {REP}"]
        body += [
            f"%s{i} = coco.all_reduce %g{i} reduction = sum : {LOC} -> {REP}",
            f"%a{i} = coco.mul %mu, %m{i} : ({SCALAR}, {REP}) -> {REP}",
            f"%m1_{i} = coco.add %a{i}, %s{i} : {binary}",
            f"%d{i} = coco.mul %lr, %m1_{i} : ({SCALAR}, {REP}) -> {REP}",
            f"%w1_{i} = coco.sub %w{i}, %d{i} : {binary}",
            f"coco.update %w{i}, %w1_{i} : {REP}",
            f"coco.update %m{i}, %m1_{i} : {REP}",
        ]
    signature = ",\n      ".join(args)
    return [
        f"  func.func @step_{step}({signature}) {{",
        *(f"    {line}" for line in body),
        "    func.return",
        "  }",
    ]


def sgd(ops: int) -> str:
    """A module of SGD steps with about `ops` ops in all."""
    layers = max(1, ops // OPS_PER_LAYER)
    lines = ["builtin.module attributes {coco.world_size = 8 : i64} {"]
    for step, first in enumerate(range(0, layers, LAYERS_PER_STEP)):
        lines += sgd_step(step, min(LAYERS_PER_STEP, layers - first))
    lines += ["}", ""]
    return "\n".join(lines)


SHAPES: dict[str, Callable[[int], str]] = {"chain": chain, "sgd": sgd}


def run(tool: str, source: Path, output: Path, clock: str) -> float:
    """Seconds (CPU or wall) that `tool SOURCE -o OUTPUT` takes; it must succeed."""
    before = os.times()
    start = time.perf_counter()
    proc = subprocess.run(
        [tool, str(source), "-o", str(output)], capture_output=True, text=True
    )
    wall = time.perf_counter() - start
    after = os.times()
    if proc.returncode != 0:
        sys.exit(f"{tool} {source.name} failed:\n{proc.stderr}")
    if clock == "wall":
        return wall
    return (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )


def measure(
    tools: dict[str, str], source: Path, repeat: int, clock: str
) -> dict[str, float]:
    """The best time of each tool on `source`; their outputs must be the same."""
    best = dict.fromkeys(tools, float("inf"))
    outputs = {name: source.with_suffix(f".{name}.out") for name in tools}
    for _ in range(repeat):
        for name, tool in tools.items():  # interleaved: both see the same load
            best[name] = min(best[name], run(tool, source, outputs[name], clock))
    first, *others = (path.read_bytes() for path in outputs.values())
    if any(other != first for other in others):
        sys.exit(f"{source.name}: coconet-opt and xdsl-opt print different modules")
    for path in outputs.values():
        path.unlink()
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    args = parser.parse_args()
    tools = {name: shutil.which(name) for name in TOOLS}
    missing = [name for name, path in tools.items() if path is None]
    if missing:
        sys.exit(f"not on PATH: {', '.join(missing)} (pip install -e . first)")
    found = {name: path for name, path in tools.items() if path is not None}

    print(
        f"| shape | ops | coconet-opt ({args.clock} s) | µs/op "
        f"| xdsl-opt ({args.clock} s) | µs/op | ratio |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory(prefix="parse_time.") as tmp:
        for shape in args.shapes:
            for ops in args.sizes:
                source = Path(tmp) / f"{shape}{ops}.mlir"
                source.write_text(SHAPES[shape](ops))
                times = measure(found, source, args.repeat, args.clock)
                source.unlink()
                ours, theirs = times["coconet-opt"], times["xdsl-opt"]
                print(
                    f"| {shape} | {ops} | {ours:.2f} | {ours / ops * 1e6:.0f} "
                    f"| {theirs:.2f} | {theirs / ops * 1e6:.0f} "
                    f"| {ours / theirs:.2f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
