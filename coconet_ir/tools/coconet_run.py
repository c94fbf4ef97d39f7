"""`coconet-run`: run a coco program on N simulated ranks, or compare two.

    coconet-run FILE --world N [--entry F] [--seed S] [--save OUT.npz]
                [--backend numpy|emu|cuda|triton] [--stats] [--check] [-p PIPELINE]
    coconet-run --compare A.mlir B.mlir --world N [--seed S] [--rtol R]
                [--atol A] [--entry F] [-p PIPELINE]

A run prints one summary line per output (result or updated parameter); a
comparison decides equivalence (docs/interpreter.md, "Equivalence"). docs/cli.md
describes the summary format, the `.npz` keys and the exit codes:

- 0: the run succeeded / the programs are equivalent;
- 1: a run failed on its input (the program does not parse, verify or run) /
  the programs are not equivalent;
- 2: bad usage (any mode), or bad input while comparing, including two
  programs whose signatures differ (they cannot be compared);
- 3: an internal error (a bug in coconet-ir).
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypedDict, cast

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline

import coconet_ir.ir as ir
from coconet_ir.dialects.coco import WORLD_SIZE_ATTR
from coconet_ir.tools.errors import run_guarded, write_problem

if TYPE_CHECKING:
    from coconet_ir.dialects.coco import TensorType
    from coconet_ir.emulate import EmulationResult, EmulatorStats, LaunchTimeline
    from coconet_ir.interpreter import Comparison, Output, RunResult

TOOL = "coconet-run"
BACKENDS = ("numpy", "emu", "cuda", "triton")
DEFAULT_LOWERED_PASSES = "coco-optimize"
"""What `--backend emu` applies before lowering unless `-p` says otherwise."""
STDIN = "-"
INPUT_PREFIX = "input:"
"""Prefix of the `--save` keys that hold the inputs a run drew."""

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3


class UsageError(ir.CocoError):
    """A bad request on the command line; exits 2 in every mode."""

    exit_code = EXIT_USAGE


# ============================================================================
# Command line
# ============================================================================


class PassListingParser(argparse.ArgumentParser):
    """`--help` ends with the passes `-p` accepts (coconet-opt's registry),
    listed only when help is shown: the registry is not loaded on a run."""

    def format_help(self) -> str:
        from coconet_ir.pipeline import available_passes

        names = ", ".join(sorted(available_passes()))
        listing = textwrap.fill(
            names, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False
        )
        return f"{super().format_help()}\npasses -p accepts:\n{listing}\n"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; argparse itself exits 2 on malformed usage."""
    parser = PassListingParser(
        prog=TOOL,
        description="Run a coco program on N simulated ranks with the reference "
        "interpreter, or check that two programs are equivalent.",
        epilog="exit codes: 0 success/equivalent; 1 the program failed to parse, "
        "verify or run / not equivalent; 2 bad usage, or bad input with "
        "--compare (including programs whose signatures differ); 3 internal "
        "error. See docs/cli.md.",
    )
    parser.add_argument(
        "file", nargs="?", metavar="FILE", help="program to run ('-': stdin)"
    )
    parser.add_argument(
        "--compare",
        nargs=2,
        metavar=("A", "B"),
        help="compare two programs on the same inputs instead of running one "
        "(one of them may be '-': stdin)",
    )
    parser.add_argument(
        "-w",
        "--world",
        type=int,
        metavar="N",
        help=f"number of ranks (default: the module's {WORLD_SIZE_ATTR})",
    )
    parser.add_argument(
        "--entry",
        metavar="F",
        help="function to run (default: the interpreter's choice; a pipeline "
        "of stages runs as a whole)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="S",
        help="seed of the random inputs (default: 0)",
    )
    parser.add_argument(
        "--save",
        metavar="OUT.npz",
        help="write every output and every input to this .npz file",
    )
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="numpy",
        help="execution backend: numpy (the reference interpreter, default), "
        "emu (the generated CUDA C on the CPU emulation), cuda (the generated "
        "CUDA C on this machine's GPUs), triton (the triton target's kernels, "
        "a process per rank; under Triton's interpreter without a GPU)",
    )
    parser.add_argument(
        "-p",
        "--passes",
        default=None,
        metavar="PIPELINE",
        help="coconet-opt pass pipeline to apply before running (default: none "
        f"for the interpreter, '{DEFAULT_LOWERED_PASSES}' for the emulator)",
    )
    parser.add_argument(
        "--stats",
        action="store_true",
        help="with --backend emu: print the kernel launches and the bytes each "
        "rank sent, as counted and as predicted from the IR",
    )
    parser.add_argument(
        "--devices",
        type=device_list,
        metavar="D0,D1,...",
        help="with --backend cuda: each rank's GPU, stage-major (default 0, 1, "
        "...); a GPU listed several times runs several ranks (programs whose "
        "collectives are all coconet-ir's own kernels)",
    )
    parser.add_argument(
        "--ranks-per-node",
        type=int,
        default=0,
        metavar="G",
        help="with --backend emu or cuda: the ranks of a stage on nodes of G "
        "(hierarchical all-reduces, no peer memory across nodes; "
        "docs/gpu/device.md, Several nodes)",
    )
    parser.add_argument(
        "--processes",
        action="store_true",
        help="with --backend emu: every rank a process of its own, as torchrun "
        "runs them (shared-memory workspaces; docs/gpu/emulation.md, "
        "Multi-process mode)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="with --backend emu: also run the reference interpreter on FILE "
        "and compare (exit 1 if they differ)",
    )
    parser.add_argument(
        "--rtol",
        type=float,
        metavar="R",
        help="relative tolerance of --compare (default: by element type)",
    )
    parser.add_argument(
        "--atol",
        type=float,
        metavar="A",
        help="absolute tolerance of --compare (default: by element type)",
    )
    parser.add_argument("-v", "--version", action="version", version=version())
    return parser


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        xdsl = installed("xdsl")
    except PackageNotFoundError:
        xdsl = "unknown"
    from coconet_ir import __version__

    return f"{TOOL} (coconet-ir {__version__}) built on xdsl version {xdsl}"


def check_usage(args: argparse.Namespace) -> None:
    """Reject requests argparse cannot: raise UsageError (exit 2)."""
    if args.compare is None and args.file is None:
        raise UsageError("give a FILE to run, or --compare A B")
    if args.compare is not None and args.file is not None:
        raise UsageError("give either a FILE or --compare A B, not both")
    if args.world is not None and args.world < 1:
        raise UsageError(f"--world must be at least 1, got {args.world}")
    if args.seed < 0:
        raise UsageError(f"--seed must be non-negative, got {args.seed}")
    if args.compare is None and (args.rtol is not None or args.atol is not None):
        raise UsageError("--rtol and --atol only apply with --compare")
    if args.compare is not None and args.compare.count(STDIN) > 1:
        raise UsageError("only one of A and B can be '-' (standard input)")
    if args.compare is not None and args.save is not None:
        raise UsageError("--save only applies to a run, not to --compare")
    for flag in ("rtol", "atol"):
        value = getattr(args, flag)
        if value is not None and not value >= 0:
            raise UsageError(f"--{flag} must be non-negative, got {value}")
    if args.stats and args.backend != "emu":
        raise UsageError("--stats only applies to --backend emu")
    if args.devices is not None and args.backend != "cuda":
        raise UsageError("--devices only applies to --backend cuda")
    if args.processes and args.backend != "emu":
        raise UsageError("--processes only applies to --backend emu")
    if args.ranks_per_node and args.backend in ("numpy", "triton"):
        raise UsageError("--ranks-per-node applies to --backend emu or cuda")
    if args.ranks_per_node < 0:
        raise UsageError("--ranks-per-node must be >= 1")
    if args.check and args.backend == "numpy":
        raise UsageError("--check only applies to --backend emu, cuda or triton")
    if args.compare is not None and args.backend != "numpy":
        raise UsageError(
            "--compare runs the reference interpreter; to check generated code "
            "against it, run one FILE with --backend emu --check"
        )
    if args.passes is None:
        args.passes = DEFAULT_LOWERED_PASSES if args.backend != "numpy" else ""
    if args.entry is not None:
        args.entry = args.entry.removeprefix("@")


# ============================================================================
# Loading programs
# ============================================================================


def make_pipeline(spec: str) -> PassPipeline:
    """The `-p` pipeline, verifying after every pass. A bad spec is bad input,
    as in coconet-opt (exit 1; 2 with --compare, where 1 means "not
    equivalent"), and an unknown pass points at this tool's `--help`."""
    from coconet_ir.pipeline import PassSpecError, available_passes, build_pipeline

    try:
        return build_pipeline(available_passes(), spec, verify_after_pass)
    except PassSpecError as err:
        raise err.for_tool(TOOL) from None


def verify_after_pass(
    previous: ModulePass | None, module: ModuleOp, upcoming: ModulePass | None
) -> None:
    """Pipeline callback: the IR must still verify after each pass."""
    if previous is None:
        return
    try:
        ir.verify(module)
    except ir.CocoError as err:
        note = f"note: the IR no longer verifies after pass '{previous.name}'"
        raise ir.CocoError(replace(err.diagnostic, context=note)) from None


def read_program(path: str) -> ModuleOp:
    """Parse and verify `path` (`-` reads standard input)."""
    if path == STDIN:
        return ir.parse(sys.stdin.buffer.read(), "<stdin>")
    return ir.parse_file(path)


def load(path: str, pipeline: PassPipeline) -> ModuleOp:
    """Parse and verify `path`, then apply the pipeline."""
    module = read_program(path)
    if pipeline.passes:
        pipeline.apply(ir.make_context(), module)
    return module


class RunInputs(TypedDict):
    """What picks a run's inputs, the same for every run one command makes
    (interpreted, emulated, compared): the seed they are drawn from and the
    function called."""

    seed: int
    entry: str | None


def device_list(text: str) -> list[int]:
    """`--devices 0,0,1,1`: non-negative device ordinals."""
    try:
        devices = [int(d) for d in text.split(",")]
    except ValueError:
        devices = []
    if not devices or min(devices) < 0:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated device numbers such as 0,0,1,1, got {text!r}"
        )
    return devices


def run_inputs(args: argparse.Namespace) -> RunInputs:
    """`--seed` and `--entry`, as the keywords of interpret, emulate and
    equivalent."""
    return RunInputs(seed=args.seed, entry=args.entry)


def resolve_world(requested: int | None, modules: dict[str, ModuleOp]) -> int:
    """The world size: `--world`, else the modules' `coco.world_size`; all that
    are given must agree."""
    declared = {
        path: world
        for path, module in modules.items()
        if (world := ir.declared_world_size(module, path)) is not None
    }
    if requested is not None:
        for path, world in declared.items():
            if world != requested:
                raise UsageError(
                    f"--world {requested} disagrees with the module's "
                    f"{WORLD_SIZE_ATTR} = {world}",
                    path,
                )
        return requested
    if not declared:
        raise UsageError(
            f"the world size is unknown: pass --world N or give the "
            f"module a {WORLD_SIZE_ATTR} attribute"
        )
    if len(set(declared.values())) > 1:
        found = ", ".join(f"{path}: {world}" for path, world in declared.items())
        raise UsageError(
            f"the programs disagree on {WORLD_SIZE_ATTR} ({found}); pass --world N"
        )
    return next(iter(declared.values()))


# ============================================================================
# Summaries and .npz files
# ============================================================================


def type_summary(tensor_type: TensorType) -> str:
    """`1024x8xf32 sliced<0>`: global shape with element type, then layout."""
    from coconet_ir.dialects.coco import element_type_name

    element = element_type_name(tensor_type.element_type)
    shape = "".join(f"{d}x" for d in tensor_type.dims)
    return f"{shape}{element} {tensor_type.layout}"


def canonical_bytes(value: np.ndarray) -> bytes:
    """The array's elements, row-major, little-endian, in its own element type."""
    array = np.ascontiguousarray(value)
    if array.dtype.kind == "V":  # ml_dtypes' bfloat16: hash its bit pattern
        array = array.view(f"u{array.dtype.itemsize}")
    elif array.dtype.kind == "b":
        array = array.view(np.uint8)
    return array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()


def checksum(value: np.ndarray) -> str:
    """The first 16 hex digits of the SHA-256 of `canonical_bytes(value)`."""
    return hashlib.sha256(canonical_bytes(value)).hexdigest()[:16]


def as_float64(value: np.ndarray) -> np.ndarray:
    return np.asarray(value).astype(np.float64).ravel()


def exact_sum(values: np.ndarray) -> float:
    """The correctly rounded float64 sum (math.fsum), so it does not depend on
    summation order; numpy's sum where fsum cannot (inf, nan, overflow)."""
    if not np.isfinite(values).all():
        return float(np.sum(values))
    try:
        return math.fsum(values.tolist())
    except OverflowError:
        return float(np.sum(values))


def format_number(x: float) -> str:
    return f"{x:.9g}"


def summary_line(output: Output) -> str:
    """`KEY SHAPExELT LAYOUT sum=S min=M max=X hash=H` for one output."""
    values = as_float64(output.value)
    stats = (
        f"sum={format_number(exact_sum(values))} "
        f"min={format_number(float(values.min()))} "
        f"max={format_number(float(values.max()))}"
    )
    return (
        f"{output.key} {type_summary(output.type)} {stats} "
        f"hash={checksum(output.value)}"
    )


def npz_value(value: np.ndarray) -> np.ndarray:
    """A value as .npz can store it: bfloat16 (no numpy dtype) becomes float32,
    which holds every bfloat16 exactly."""
    array = np.asarray(value)
    if array.dtype.kind == "V":
        return array.astype(np.float32)
    return array


def npz_arrays(result: RunResult) -> dict[str, np.ndarray]:
    """Every output under its key, then every input under `input:KEY`."""
    arrays = {key: npz_value(out.value) for key, out in result.outputs.items()}
    for key, value in result.inputs.items():
        arrays[f"{INPUT_PREFIX}{key}"] = npz_value(value)
    return arrays


def check_writable(path: str) -> None:
    """Fail before the run, not after it, when `--save` cannot write `path`;
    leave the file system as it was (no empty file, an existing file intact)."""
    try:
        if os.path.exists(path):
            with open(path, "ab"):  # opens for writing without truncating
                pass
        else:
            with open(path, "xb"):
                pass
            os.unlink(path)
    except OSError as err:
        raise UsageError(f"--save {path}: {write_problem(path, err)}") from None


def save(path: str, result: RunResult) -> int:
    """Write the run's arrays to `path` (exactly that name); return their count."""
    arrays = npz_arrays(result)
    with open(path, "wb") as f:
        np.savez(f, *(), **cast("dict[str, Any]", arrays))
    return len(arrays)


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


# ============================================================================
# The two modes
# ============================================================================


def run(args: argparse.Namespace) -> int:
    """Run one program and print its summary."""
    from coconet_ir.interpreter import interpret

    if args.save is not None:
        check_writable(args.save)
    if args.backend != "numpy":
        return run_emulated(args)
    pipeline = make_pipeline(args.passes)
    module = load(args.file, pipeline)
    world = resolve_world(args.world, {args.file: module})
    result = interpret(module, world, **run_inputs(args))
    print_run(args, result, world)
    return EXIT_OK


def run_emulated(args: argparse.Namespace) -> int:
    """Optimize, lower, print as CUDA C, run under the CPU emulation; with
    --stats print what it counted, with --check compare with the interpreter."""
    from coconet_ir.emulate import EmulationResult, compare_runs, emulate
    from coconet_ir.interpreter import interpret

    make_pipeline(args.passes)  # a bad -p is a usage error before any work
    module = read_program(args.file)
    world = resolve_world(args.world, {args.file: module})
    result: RunResult
    if args.backend == "triton":
        from coconet_ir.emulate import run_triton

        result = run_triton(module, world, passes=args.passes, **run_inputs(args))
    else:
        result = emulate(
            module,
            world,
            passes=args.passes,
            backend=args.backend,
            devices=args.devices,
            processes=args.processes,
            ranks_per_node=args.ranks_per_node,
            **run_inputs(args),
        )
    print_run(args, result, world)
    if args.stats and isinstance(result, EmulationResult) and result.stats:
        print(stats_report(result))
    if not args.check:
        return EXIT_OK
    reference = interpret(module, world, **run_inputs(args))
    verdict = compare_runs(reference, result, module)
    print(comparison_report(verdict, world, args.seed, against="the interpreter"))
    return EXIT_OK if verdict.ok else EXIT_FAILED


def stats_report(result: EmulationResult) -> str:
    """Per stage: launches per rank and stream, bytes each rank sent, and
    whether they agree with the prediction from the device-level IR."""
    from coconet_ir.analysis.channels import PipelineChannels
    from coconet_ir.analysis.device_traffic import device_traffic

    assert result.stats is not None and result.lowered is not None
    stats = result.stats
    predicted = device_traffic(result.lowered.device)
    stages = PipelineChannels.of(result.lowered.coco).stage_indices()
    lines: list[str] = []
    for name, traffic in predicted.items():
        if name not in stages:
            continue
        stage = stages[name]
        launches = stats.launches_per_call(stage)
        lines.append(f"@{name} (stage {stage}), per call and rank:")
        streams = ", ".join(
            f"stream {s}: {int(n)}" for s, n in enumerate(launches[0]) if n
        )
        lines.append(f"  kernel launches: {int(launches[0].sum())} ({streams or '-'})")
        sent = " ".join(str(int(b)) for b in stats.bytes_per_rank(stage))
        lines.append(f"  bytes sent within the stage, by rank: {sent}")
        if traffic.sent_to_stage:
            out = " ".join(str(int(b)) for b in stats.bytes_to_other_stages(stage))
            lines.append(f"  bytes sent to the next stage, by rank: {out}")
        problems = stats.disagreements(traffic, stage)
        verdict = "agree" if not problems else "DISAGREE: " + "; ".join(problems)
        lines.append(f"  static prediction (coconet_ir.analysis): {verdict}")
        lines += timeline_lines(stats, stage)
        lines += stream_lines(stats, stage)
    return "\n".join(lines)


def stream_lines(stats: EmulatorStats, stage: int) -> list[str]:
    """Per rank of `stage`, the GEMMs and peer copies each stream ran (event
    numbers: an order, not times), and how many of its GEMMs had a copy into
    or out of the rank in flight at the same time (docs/gpu/emulation.md,
    "Timeline")."""
    ranks = stats.stage_ranks(stage)
    lines: list[str] = []
    for rank in ranks:
        mine = [e for e in stats.stream_events if e.rank == rank]
        gemms = [e for e in mine if e.kind == "gemm"]
        copies = [
            e
            for e in stats.stream_events
            if e.kind == "peer_copy" and rank in (e.rank, e.peer)
        ]
        if not copies:
            continue
        if not lines:
            lines.append("  streams (event numbers: start-end, first call):")
        for stream in sorted({e.stream for e in mine}):
            events = sorted(
                (e for e in mine if e.stream == stream and e.kind != "copy"),
                key=lambda e: e.start,
            )
            text = ", ".join(
                f"{e.kind}{'>' + str(e.peer - ranks.start) if e.peer >= 0 else ''} "
                f"#{e.start}-#{e.end}"
                for e in events
            )
            if text:
                lines.append(f"    rank {rank - ranks.start} stream {stream}: {text}")
        overlapped = sum(any(g.overlaps(c) for c in copies) for g in gemms)
        lines.append(
            f"    rank {rank - ranks.start}: {overlapped} of {len(gemms)} gemms "
            "had a peer copy into or out of the rank in flight"
        )
    return lines


def timeline_lines(stats: EmulatorStats, stage: int) -> list[str]:
    """The first call's launch of each tile kernel, rank by rank: when its
    first remote store and its last computed tile happened (docs/gpu/emulation.md,
    "Timeline")."""
    ranks = stats.stage_ranks(stage)
    first_call: dict[tuple[str, int], LaunchTimeline] = {}
    for launch in stats.timeline:
        if launch.rank in ranks:
            first_call.setdefault((launch.kernel, launch.rank), launch)
    lines: list[str] = []
    for kernel in sorted({k for k, _ in first_call}):
        lines.append(f"  timeline of {kernel} (event numbers, first call):")
        for rank in ranks:
            launch = first_call.get((kernel, rank))
            if launch is None:
                continue
            if launch.remote_stores == 0:
                verdict = "no stores into peers"
            elif launch.overlapped:
                verdict = "communication starts before computation ends"
            else:
                verdict = "NO OVERLAP: the first store into a peer came after"
                verdict += " the last tile"
            lines.append(
                f"    rank {rank - ranks.start}: {launch.tiles} tiles computed "
                f"#{launch.first_tile}..#{launch.last_tile}, "
                f"{launch.remote_stores} remote stores "
                f"#{launch.first_remote_store}..#{launch.last_remote_store}: {verdict}"
            )
    return lines


def print_run(args: argparse.Namespace, result: RunResult, world: int) -> None:
    print(
        f"{args.file}: {plural(len(result.outputs), 'output')} on "
        f"{plural(world, 'rank')} (seed {args.seed}, backend {args.backend})"
    )
    for output in result.outputs.values():
        print(summary_line(output))
    if args.save is not None:
        count = save(args.save, result)
        print(f"saved {plural(count, 'array')} to {args.save}")


def compare(args: argparse.Namespace) -> int:
    """Compare two programs on the same inputs; 0 when equivalent, else 1.
    Programs whose signatures differ cannot be compared: a UsageError (2)."""
    from coconet_ir.interpreter import NotComparable, equivalent

    pipeline = make_pipeline(args.passes)
    path_a, path_b = args.compare
    module_a = load(path_a, pipeline)
    module_b = load(path_b, pipeline)
    world = resolve_world(args.world, {path_a: module_a, path_b: module_b})
    try:
        comparison = equivalent(
            module_a,
            module_b,
            world,
            rtol=args.rtol,
            atol=args.atol,
            **run_inputs(args),
        )
    except NotComparable as err:
        raise UsageError(
            f"cannot compare {path_a} (a) with {path_b} (b), their "
            f"signatures differ: {'; '.join(err.reasons)}"
        ) from None
    print(comparison_report(comparison, world, args.seed))
    return EXIT_OK if comparison.ok else EXIT_FAILED


def comparison_report(
    comparison: Comparison, world: int, seed: int, against: str | None = None
) -> str:
    """`equivalent: ...` or `not equivalent: KEY differs ...` (+ the message);
    `matches the interpreter: ...` / `differs from the interpreter: ...` when
    comparing a run `against` another."""
    ranks = plural(world, "rank")
    same, other = ("equivalent", "not equivalent")
    if against is not None:
        same, other = (f"matches {against}", f"differs from {against}")
    if comparison.ok:
        count = len(comparison.compared)
        verb = "agrees" if count == 1 else "agree"
        return f"{same}: {plural(count, 'output')} {verb} on {ranks} (seed {seed})"
    diff = comparison.first_difference
    if diff is None:
        return f"{other} on {ranks} (seed {seed})"
    line = f"{other}: {diff.key} differs on {ranks} (seed {seed})"
    errors = (diff.max_abs_error, diff.max_rel_error)
    if all(e is not None and math.isfinite(e) for e in errors):
        line += f": max abs error {errors[0]:.3e}, max rel error {errors[1]:.3e}"
    return f"{line}\n  {diff.message}" if diff.message else line


def dispatch(args: argparse.Namespace) -> int:
    check_usage(args)
    return compare(args) if args.compare is not None else run(args)


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    run_guarded(
        TOOL,
        lambda: dispatch(args),
        user_error_code=EXIT_USAGE if args.compare is not None else EXIT_FAILED,
        internal_error_code=EXIT_INTERNAL,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
