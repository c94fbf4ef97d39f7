"""`coconet-bench`: the paper's workloads at the paper's sizes, each as
written (the unfused baseline), under each CoCoNet schedule, autotuned, and
against the bound max(compute, communication).

    coconet-bench [--machine NAME] [--workload NAME ...] [--png DIR]
                  [--markdown] [--backend model|cuda]

With `--backend model` (the default) every time is a prediction of the cost
model (`coconet_ir.costmodel`), labelled so, next to the model's calibration
error against published measurements; with `--backend cuda` the generated
CUDA C is built with nvcc and timed on this machine's GPUs. docs/cli.md
describes the options and exit codes; docs/performance.md ("Benchmarks:
coconet-bench") the rows, the bound and a full run's output:

- 0: every requested workload was benchmarked;
- 1: a workload failed (a pass, the cost model, the build or run on GPUs;
  `--backend cuda` without GPUs);
- 2: bad usage (an unknown workload or machine, a `--png` directory that
  cannot be made).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64

from coconet_ir.costmodel import Machine, Prediction, machine, predict, total_time
from coconet_ir.diagnostics import CocoError
from coconet_ir.dialects.coco import WORLD_SIZE_ATTR
from coconet_ir.tools.errors import run_guarded

TOOL = "coconet-bench"
BACKENDS = ("model", "cuda")
WORLD = 8
"""Every workload is tensor- (or data-, expert-, table-) parallel over 8
GPUs, as in the papers (TP = 8); a pipeline has 8 per stage."""

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
"""The examples the workloads are built by (a source checkout's)."""

OVERLAP_SCHEDULES = (
    "coco-optimize{overlap=false}",
    "coco-optimize{overlap_mode=chunks}",
    "coco-optimize{overlap_mode=per_peer}",
    "coco-optimize",
)
"""A matmul next to a collective: no overlap, CoCoNet's chunks, per-peer
decomposition, and the default (the estimate picks for each matmul)."""

OPTIMIZER_SCHEDULES = ("coco-optimize{fuse=false}", "coco-optimize")
"""An optimizer step: reduce_scatter, the update on slices and all_gather as
separate kernels, then fused into one region per tensor (the default)."""

FUSED_OPERATOR_SCHEDULES = ("coco-optimize{fuse_collective=false}", "coco-optimize")
"""A workgroup-granular fused operator: the default schedule without and
with the tile-granular fusion of the computation and its collective."""


class UsageError(CocoError):
    """A bad request on the command line; exits 2."""

    exit_code = EXIT_USAGE


# ============================================================================
# Workloads
# ============================================================================


@dataclass(frozen=True)
class Workload:
    """One of the paper's programs at the paper's size."""

    name: str
    description: str
    build: Callable[[], ModuleOp]
    schedules: Callable[[], tuple[str, ...]]
    """The CoCoNet schedules to compare, as coconet-opt pipelines."""
    world: int = WORLD
    """The ranks of each stage."""
    stages: int = 1
    """Its pipeline's stages (each on `world` GPUs of its own)."""
    scale_out: ScaleOut | None = None
    """Its sweep over node counts, on a machine of several nodes."""


@dataclass(frozen=True)
class ScaleOut:
    """A workload weakly scaled from one node to a machine's all: the
    program at each world size, and the seed's figures to set beside it."""

    build: Callable[[int], ModuleOp]
    """The program for `world` ranks."""
    sizes: str
    """How it scales, in words."""
    seed: tuple[tuple[str, float], ...]
    """The seed's published gains to compare with: (what, gain)."""


def load_example(name: str) -> ModuleType:
    """Import `examples/NAME.py` from its path (examples are scripts, not a
    package)."""
    path = EXAMPLES / f"{name}.py"
    if not path.is_file():
        raise CocoError(
            f"the workloads are built by the repository's examples/*.py, and "
            f"{path} does not exist: run {TOOL} from a source checkout "
            "(pip install -e .)"
        )
    spec = importlib.util.spec_from_file_location(f"coconet_example_{name}", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = example  # dataclasses look their module up
    spec.loader.exec_module(example)
    return example


def at_model_size(name: str) -> Callable[[], ModuleOp]:
    """An example's module at its `MODEL` sizes (its `--model`)."""

    def build() -> ModuleOp:
        example = load_example(name)
        return example.build(example.MODEL)

    return build


def lamb_bert() -> ModuleOp:
    bert = load_example("lamb_bert")
    return bert.build(bert.BERT_LARGE)


def adam_bert() -> ModuleOp:
    """examples/adam_bert.py: adam.py's update for every tensor of BERT-large."""
    return load_example("adam_bert").build()


DLRM_SCALE_OUT_TABLES = 1024
"""Tables of the scale-out DLRM (1M x 128 bf16 each, 256 MiB): as many as
the largest world has ranks, so every rank owns at least one."""
DLRM_BAGS_PER_RANK = 256
"""The batch grows with the ranks (data-parallel samples, weak scaling):
each rank's lookups and all_to_all bytes stay the same at every size."""


def dlrm_at_world(world: int) -> ModuleOp:
    """examples/dlrm_embedding.py at the scale-out sizes on `world` ranks."""
    example = load_example("dlrm_embedding")
    return example.build(
        dict(
            example.MODEL,
            T=DLRM_SCALE_OUT_TABLES,
            B=DLRM_BAGS_PER_RANK * world,
        )
    )


DLRM_SCALE_OUT = ScaleOut(
    dlrm_at_world,
    f"{DLRM_SCALE_OUT_TABLES} tables of 1M x 128 bf16 cut over the ranks, "
    f"{DLRM_BAGS_PER_RANK} bags of 32 lookups per rank (the batch grows with "
    "the ranks)",
    (
        ("seed, embedding + All-to-All inter-node (measured, mean)", 0.31),
        ("seed, whole DLRM at 128 nodes (simulated)", 0.21),
    ),
)


def lamb_schedules() -> tuple[str, ...]:
    """The optimizer schedules and CoCoNet's per-tensor LAMB schedule as
    examples/lamb_bert.py writes it (read when the workload runs)."""
    written = load_example("lamb_bert").SCHEDULE
    return (OPTIMIZER_SCHEDULES[0], written, OPTIMIZER_SCHEDULES[1])


WORKLOADS: tuple[Workload, ...] = (
    Workload(
        "adam-bert",
        "data-parallel Adam over BERT-large's 391 tensors (335M parameters, f32)",
        adam_bert,
        lambda: OPTIMIZER_SCHEDULES,
    ),
    Workload(
        "lamb-bert",
        "data-parallel LAMB over BERT-large's 391 tensors (335M parameters, f32)",
        lamb_bert,
        lamb_schedules,
    ),
    Workload(
        "megatron",
        "Megatron's row-parallel layer, B=8 S=2048 H=12288 bf16, TP=8",
        at_model_size("megatron"),
        lambda: OVERLAP_SCHEDULES,
    ),
    Workload(
        "pipeline",
        "GPT-3-like pipeline stages (row-parallel layer, send; GELU, matmul), "
        "B=8 S=2048 H=12288 bf16, TP=8 per stage",
        at_model_size("pipeline"),
        lambda: OVERLAP_SCHEDULES,
        stages=2,
    ),
    Workload(
        "ag-matmul",
        "all_gather -> matmul at FLUX's shape: 4096x12288 gathered, times a "
        "12288x49152 weight sliced by columns, bf16, TP=8",
        at_model_size("sequence_parallel"),
        lambda: OVERLAP_SCHEDULES,
    ),
    Workload(
        "matmul-rs",
        "matmul -> reduce_scatter at FLUX's shape: 4096x49152 times 49152x12288, "
        "the contracted dim sliced, bf16, TP=8",
        at_model_size("matmul_reduce_scatter"),
        lambda: OVERLAP_SCHEDULES,
    ),
    Workload(
        "sp-mlp",
        "sequence-parallel MLP block, S=2048 B=1 H=12288 F=49152 bf16, TP=8",
        at_model_size("sequence_parallel_mlp"),
        lambda: OVERLAP_SCHEDULES,
    ),
    Workload(
        "dlrm-embedding",
        "DLRM embedding + all_to_all, 64 tables of 1M x 128 bf16, batch 2048, "
        "32 lookups per bag",
        at_model_size("dlrm_embedding"),
        lambda: FUSED_OPERATOR_SCHEDULES,
        scale_out=DLRM_SCALE_OUT,
    ),
    Workload(
        "gemv-allreduce",
        "decode-time GEMV + all_reduce, batch 1, H=12288 bf16, TP=8",
        at_model_size("gemv_allreduce"),
        lambda: FUSED_OPERATOR_SCHEDULES,
    ),
    Workload(
        "moe-gemm-a2a",
        "MoE experts' GEMM + all_to_all, 64 experts, capacity 256, F=14336 "
        "H=4096 bf16, EP=8",
        at_model_size("moe_gemm_a2a"),
        lambda: FUSED_OPERATOR_SCHEDULES,
    ),
)
"""Every workload, in the order of the issue (Adam and LAMB, Megatron, the
pipeline, FLUX's two shapes, the MLP block, the three fused operators)."""

BY_NAME = {w.name: w for w in WORKLOADS}


# ============================================================================
# Rows
# ============================================================================


@dataclass
class Row:
    """One program of a workload: its labels (several schedules that give
    the same program share a row) and its prediction per function."""

    kind: str
    """`baseline`, `schedule` or `autotuned`."""
    labels: list[str]
    module: ModuleOp
    text: str
    """The program's text, to tell identical schedules apart."""
    predictions: dict[str, Prediction]
    measured_s: float | None = None

    @property
    def label(self) -> str:
        first, *same = self.labels
        return first + "".join(f" = {s}" for s in same)

    @property
    def time_s(self) -> float:
        """A step: the slowest stage."""
        return total_time(self.predictions)

    @property
    def launches(self) -> int:
        """Per rank: the busiest stage's."""
        return max(p.launches for p in self.predictions.values())

    @property
    def bytes_sent(self) -> int:
        """Per rank: the stage that sends most."""
        return max(p.bytes_sent for p in self.predictions.values())

    @property
    def bound_s(self) -> float:
        """max(compute, communication) of the slowest stage's work."""
        return max(p.bound_s for p in self.predictions.values())


@dataclass
class Result:
    """A workload's rows, the bound, and what was left out."""

    workload: Workload
    machine: Machine
    rows: list[Row]
    notes: list[str] = field(default_factory=list[str])
    seconds: float = 0.0
    """How long the compiler and the model took for the workload."""

    @property
    def baseline(self) -> Row:
        return self.rows[0]

    @property
    def bound_s(self) -> float:
        """No schedule of the table beats the longer of its own compute and
        communication: the least of these bounds."""
        return min(row.bound_s for row in self.rows)

    @property
    def chosen(self) -> Row:
        """The fastest row (predicted, or measured with --backend cuda)."""
        return min(self.rows, key=lambda r: r.measured_s or r.time_s)


def with_world(module: ModuleOp, world: int) -> ModuleOp:
    """The module declares the world it runs on, for coco-optimize's splits."""
    module.attributes[WORLD_SIZE_ATTR] = IntegerAttr(world, i64)
    return module


def add_row(
    rows: list[Row],
    kind: str,
    label: str,
    module: ModuleOp,
    machine: Machine,
    world: int,
) -> None:
    """A row for `module`, or one more label for an identical earlier row."""
    from coconet_ir.ir import to_text

    text = to_text(module)
    for row in rows:
        if row.text == text and row.kind == kind:
            row.labels.append(label)
            return
    rows.append(Row(kind, [label], module, text, predict(module, machine, world)))


def autotuned(module: ModuleOp, machine: Machine, world: int) -> tuple[str, ModuleOp]:
    """The schedule the autotuner predicts fastest (`coco-autotune`'s
    `autotune`: its report's best candidate)."""
    from coconet_ir.passes.autotune import autotune

    best = autotune(module, machine=machine, world=world).best
    assert best.module is not None  # the best is never a refused candidate
    return f"autotuned: {best.pipeline or 'the program as written'}", best.module


def run_workload(workload: Workload, machine: Machine) -> Result:
    """The baseline, each schedule and the autotuned program, predicted; a
    progress bar on stderr when it is a terminal (the largest workloads
    take minutes)."""
    from coconet_ir.pipeline import Pipeline

    start = time.perf_counter()
    world = workload.world
    module = with_world(workload.build(), world)
    schedules = workload.schedules()
    with progress(workload.name, len(schedules) + 2) as step:
        rows: list[Row] = []
        baseline = "baseline (unfused: every op a kernel, NCCL)"
        add_row(rows, "baseline", baseline, module, machine, world)
        step()
        for schedule in schedules:
            scheduled = Pipeline(schedule)(module)
            add_row(rows, "schedule", schedule, scheduled, machine, world)
            step()
        label, tuned = autotuned(module, machine, world)
        add_row(rows, "autotuned", label, tuned, machine, world)
        step()
    return Result(workload, machine, rows, [], time.perf_counter() - start)


@contextmanager
def progress(name: str, total: int) -> Iterator[Callable[[], None]]:
    """A step counter for one workload: a tqdm bar on a terminal's stderr,
    else nothing (logs and tests see only the tables)."""
    if not sys.stderr.isatty():
        yield lambda: None
        return
    from tqdm import tqdm

    with tqdm(
        total=total, desc=name, unit="schedule", file=sys.stderr, leave=False
    ) as bar:

        def step() -> None:
            bar.update()

        yield step


# ============================================================================
# Tables
# ============================================================================


def format_time(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} us"


def format_bytes(count: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{int(count)} B"


def table(result: Result, backend: str) -> list[list[str]]:
    """Header, then one line per row and the bound. With --backend cuda the
    measured time comes first, the prediction next to it."""
    cuda = backend == "cuda"
    predicted = f"predicted (cost model, {result.machine.name})"
    times = (
        [f"measured (cuda, {result.workload.world} GPUs per stage)", predicted]
        if cuda
        else [predicted]
    )
    header = ["schedule", *times, "speedup", "launches", "bytes per rank"]
    baseline = result.baseline.measured_s or result.baseline.time_s
    lines = [header]
    for row in result.rows:
        time_s = row.measured_s or row.time_s
        shown = (
            [format_time(time_s), format_time(row.time_s)]
            if cuda
            else [format_time(time_s)]
        )
        lines.append(
            [
                row.label,
                *shown,
                f"{baseline / time_s:.2f}x",
                str(row.launches),
                format_bytes(row.bytes_sent),
            ]
        )
    bound = format_time(result.bound_s)
    lines.append(
        [
            "bound: max(compute, communication)",
            *(["", bound] if cuda else [bound]),
            f"{result.baseline.time_s / result.bound_s:.2f}x",
            "",
            "",
        ]
    )
    return lines


def aligned(lines: list[list[str]], left: Sequence[int] = (0,)) -> list[str]:
    """Columns padded to their widths: text (`left`) on the left, numbers on
    the right."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return [
        "  ".join(
            cell.ljust(w) if i in left else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(line, widths, strict=True))
        ).rstrip()
        for line in lines
    ]


def markdown(lines: list[list[str]], left: Sequence[int] = (0,)) -> list[str]:
    """A markdown table: text (`left`) aligned left, numbers right."""
    header, *body = lines
    rule = ["---" if i in left else "---:" for i in range(len(header))]
    return [
        "| " + " | ".join(line) + " |"
        for line in (
            header,
            rule,
            *([c.replace("|", "\\|") for c in line] for line in body),
        )
    ]


def report(result: Result, backend: str, as_markdown: bool) -> list[str]:
    """A workload's title, table, notes and the chosen schedule."""
    w = result.workload
    lines = [f"### {w.name}" if as_markdown else f"== {w.name} ==", ""]
    lines += [w.description, ""]
    rows = table(result, backend)
    lines += markdown(rows) if as_markdown else aligned(rows)
    lines.append("")
    lines += [f"- {note}" if as_markdown else note for note in result.notes]
    chosen = result.chosen
    lines.append(
        f"{'- ' if as_markdown else ''}fastest: {chosen.labels[0]} "
        f"({format_time(chosen.measured_s or chosen.time_s)}, "
        f"{result.baseline.time_s / chosen.time_s:.2f}x over the baseline)"
    )
    lines.append("")
    return lines


def calibration_lines(as_markdown: bool) -> list[str]:
    """The model's error against each published measurement it was checked
    against (coconet_ir/costmodel/calibration.py)."""
    from coconet_ir.costmodel.calibration import CASES

    lines = [
        ["calibration case", "model", "measured", "error", "kind", "source"],
        *(
            [
                case.name,
                f"{case.predict():.3f}",
                f"{case.measured:.3f}",
                f"{case.error():+.1%}",
                "fitted" if case.fitted else "held out",
                case.source,
            ]
            for case in CASES
        ),
    ]
    held_out = [abs(case.error()) for case in CASES if not case.fitted]
    title = (
        "The cost model against published measurements "
        f"(largest held-out error {max(held_out):.1%}):"
    )
    text = (0, 4, 5)
    body = markdown(lines, text) if as_markdown else aligned(lines, text)
    return [title, "", *body, ""]


def header_lines(machine: Machine, backend: str, world: int) -> list[str]:
    if backend == "cuda":
        return [
            f"{TOOL}: measured on this machine's GPUs (cuda, {world} ranks per "
            f"stage), next to the cost model's predictions for {machine.name}",
            "",
        ]
    return [
        f"{TOOL}: MODEL PREDICTIONS, not measurements: every time is predicted by "
        f"the cost model for {machine.name} ({machine.description}); "
        f"{world} ranks per stage",
        "",
    ]


# ============================================================================
# Scale-out: a fused operator from one node to all of a machine's
# ============================================================================


@dataclass(frozen=True)
class ScalePoint:
    """One node count of a scale-out sweep, predicted."""

    nodes: int
    world: int
    library_s: float
    """The computation, then the library collective (NCCL)."""
    fused_s: float
    """One fused kernel whose workgroups send each finished tile."""
    fused: bool
    """Whether coco-optimize fused them at this size."""
    network_share: float
    """Of the bytes a rank sends, the part for other nodes."""

    @property
    def gain(self) -> float:
        """The time the fused kernel saves, as a fraction of the library's."""
        return 1 - self.fused_s / self.library_s


def node_counts(nodes: int) -> list[int]:
    """1, 2, 4, ... up to `nodes` (and `nodes` itself)."""
    counts = [1 << k for k in range(nodes.bit_length()) if 1 << k <= nodes]
    return counts if counts[-1] == nodes else [*counts, nodes]


def scale_out(workload: Workload, machine: Machine) -> list[ScalePoint]:
    """The library-based and the fused program at each node count of
    `machine` (its first 1, 2, 4, ... nodes), predicted by the cost model."""
    from coconet_ir.costmodel.formulas import network_share
    from coconet_ir.dialects.coco import FusionOp
    from coconet_ir.pipeline import Pipeline

    assert workload.scale_out is not None
    library_schedule, fused_schedule = FUSED_OPERATOR_SCHEDULES
    points = []
    for nodes in node_counts(machine.nodes):
        part = machine.with_nodes(nodes)
        world = part.gpus
        module = with_world(workload.scale_out.build(world), world)
        library = Pipeline(library_schedule)(module)
        fused = Pipeline(fused_schedule)(module)
        points.append(
            ScalePoint(
                nodes,
                world,
                total_time(predict(library, part, world)),
                total_time(predict(fused, part, world)),
                any(isinstance(op, FusionOp) for op in fused.walk()),
                network_share(world, part),
            )
        )
    return points


def scale_out_lines(
    workload: Workload, machine: Machine, points: list[ScalePoint], as_markdown: bool
) -> list[str]:
    """The sweep's table, the seed's figures beside it."""
    assert workload.scale_out is not None
    title = f"{workload.name}: scale-out on {machine.name}, 1 to {machine.nodes} nodes"
    lines = [
        f"### {title}" if as_markdown else f"== {title} ==",
        "",
        f"MODEL PREDICTIONS: {workload.scale_out.sizes}; library = "
        f"{FUSED_OPERATOR_SCHEDULES[0]} (the lookup, then NCCL's all_to_all), "
        "fused = coco-optimize (one kernel whose workgroups put each finished "
        "tile into its destination, across nodes by GPU-initiated network "
        "puts).",
        "",
    ]
    rows = [
        [
            "nodes",
            "GPUs",
            "to other nodes",
            "library",
            "fused",
            "gain",
        ],
        *(
            [
                str(p.nodes),
                str(p.world),
                f"{p.network_share:.0%}",
                format_time(p.library_s),
                format_time(p.fused_s) + ("" if p.fused else " (not fused)"),
                f"{p.gain:.1%}",
            ]
            for p in points
        ),
    ]
    lines += markdown(rows, ()) if as_markdown else aligned(rows, ())
    lines.append("")
    bullet = "- " if as_markdown else ""
    for what, gain in workload.scale_out.seed:
        lines.append(f"{bullet}{what}: {gain:.0%}")
    lines.append("")
    return lines


def write_scale_out_png(
    workload: Workload, machine: Machine, points: list[ScalePoint], directory: Path
) -> Path:
    """The predicted gain against the node count, the seed's figures as
    lines beside it."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    assert workload.scale_out is not None
    path = directory / f"{workload.name}-scale-out.png"
    figure, axes = plt.subplots(figsize=(7, 4))
    nodes = [p.nodes for p in points]
    gains = [100 * p.gain for p in points]
    axes.plot(nodes, gains, "o-", label="cost model (predicted)")
    for (what, gain), style in zip(workload.scale_out.seed, ("--", ":"), strict=False):
        axes.axhline(100 * gain, linestyle=style, color="gray", label=what)
    axes.set_xscale("log", base=2)
    axes.set_xticks(nodes, [str(n) for n in nodes])
    axes.set_xlabel(f"nodes ({machine.gpus_per_node} GPUs each)")
    axes.set_ylabel("time saved by the fused kernel (%)")
    axes.set_ylim(bottom=0)
    axes.set_title(
        f"{workload.name}, fused vs library, {machine.name}\n"
        "cost-model prediction, not a measurement",
        fontsize=9,
    )
    axes.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


# ============================================================================
# Timeline pictures
# ============================================================================


def write_png(result: Result, directory: Path, backend: str) -> Path:
    from coconet_ir.tools.timeline_png import draw_timeline

    chosen = result.chosen
    path = directory / f"{result.workload.name}.png"
    title = (
        f"{result.workload.name}: {chosen.labels[0]}\n"
        f"cost-model prediction for {result.machine.name}, not a measurement"
    )
    draw_timeline(chosen.predictions, title, path)
    return path


# ============================================================================
# Measuring on GPUs (--backend cuda)
# ============================================================================


def check_gpus(workloads: Sequence[Workload]) -> None:
    """Fail before any work when this machine cannot run the workloads."""
    from coconet_ir.backend.cuda.gpu_run import GpuRunError, gpu_count
    from coconet_ir.backend.cuda.toolchain import nvcc

    needed = max(w.world * w.stages for w in workloads)
    found = gpu_count()
    if found < needed:
        raise GpuRunError(
            f"no GPU: --backend cuda measures on this machine's GPUs and needs "
            f"{needed}, {found} visible; --backend model (the default) prints "
            "the cost model's predictions instead"
        )
    if nvcc() is None:
        raise GpuRunError(
            "no nvcc: --backend cuda builds the generated CUDA C with nvcc; "
            "install the CUDA toolkit or set COCONET_NVCC"
        )


def measure(row: Row, world: int, warmup: int = 5, iters: int = 20) -> float:
    """Seconds per call of `row`'s program on this machine's GPUs: lowered
    for `world` ranks, built with nvcc, every argument zero-filled (the time,
    not the values, is measured: zeros are valid embedding indices; norms of
    zeros give NaNs, which cost what numbers do), the slowest rank's mean
    over `iters` calls after `warmup` (`run_gpu`, CUDA events on stream 0)."""
    import numpy as np
    from xdsl.dialects.func import FuncOp

    from coconet_ir.analysis.channels import PipelineChannels
    from coconet_ir.backend.cuda.gpu_run import compile_gpu, run_gpu
    from coconet_ir.backend.emu import EntryCall
    from coconet_ir.dialects.coco import TensorType
    from coconet_ir.emulate import lower
    from coconet_ir.interpreter.values import local_shape, storage_dtype

    lowered = lower(row.module, world, passes="")
    library = compile_gpu(lowered.cuda)
    stages = PipelineChannels.of(lowered.coco).stage_indices()
    calls: list[EntryCall] = []
    for func in lowered.coco.ops:
        if not isinstance(func, FuncOp):
            continue
        types = [*func.function_type.inputs.data, *func.function_type.outputs.data]
        # One host array per argument, the same for every rank: each rank's
        # device gets its own copy (run_gpu), so ranks share no buffer.
        arrays = [
            np.zeros(local_shape(t, world), storage_dtype(t.element_type))
            for t in types
            if isinstance(t, TensorType)
        ]
        calls.append(
            EntryCall(
                f"coco_{func.sym_name.data}",
                [arrays] * world,
                stage=stages[func.sym_name.data],
            )
        )
    _, run = run_gpu(
        library,
        world,
        calls,
        num_stages=max(stages.values(), default=0) + 1,
        symmetric_bytes=lowered.symmetric_bytes,
        signal_slots=max(lowered.signal_slots, 1),
        warmup=warmup,
        iters=iters,
    )
    return run["timing"]["ms"] / 1e3


# ============================================================================
# Command line
# ============================================================================


def build_parser() -> argparse.ArgumentParser:
    from coconet_ir.costmodel import DEFAULT_MACHINE, PRESETS

    parser = argparse.ArgumentParser(
        prog=TOOL,
        description="Predict (or, with --backend cuda, measure) the paper's "
        "workloads at the paper's sizes, or your own program (FILE): the "
        "unfused baseline, each CoCoNet schedule, the autotuned one and the "
        "bound max(compute, communication).",
        epilog="workloads: " + ", ".join(BY_NAME) + ". exit codes: 0 success; "
        "1 a workload failed, or --backend cuda without GPUs; 2 bad usage. "
        "See docs/cli.md.",
    )
    parser.add_argument(
        "file",
        nargs="?",
        metavar="FILE",
        help="a coco program (.mlir) to bench instead of the paper's workloads",
    )
    parser.add_argument(
        "--world",
        type=int,
        metavar="N",
        help="with FILE: the ranks of each stage (default: its coco.world_size, "
        f"else {WORLD})",
    )
    parser.add_argument(
        "--machine",
        default=DEFAULT_MACHINE,
        metavar="NAME",
        help=f"the machine to predict for: {', '.join(PRESETS)} "
        f"(default: {DEFAULT_MACHINE})",
    )
    parser.add_argument(
        "--workload",
        action="append",
        metavar="NAME",
        help="a workload to run (repeatable; default: all)",
    )
    parser.add_argument(
        "--png",
        metavar="DIR",
        help="write the fastest schedule's timeline as DIR/WORKLOAD.png",
    )
    parser.add_argument("--markdown", action="store_true", help="print markdown tables")
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="model",
        help="model: the cost model's predictions (default); cuda: build the "
        "generated CUDA C with nvcc and time it on this machine's GPUs",
    )
    return parser


USER_SCHEDULES = (
    *dict.fromkeys(
        s
        for group in (FUSED_OPERATOR_SCHEDULES, OPTIMIZER_SCHEDULES, OVERLAP_SCHEDULES)
        for s in group
        if s != "coco-optimize"
    ),
    "coco-optimize",
)
"""A program of the user's: every schedule the paper's workloads compare
(schedules that give the same program share a row)."""


def file_workload(path: str, world: int | None) -> Workload:
    """The user's program at `path` as a workload on `world` ranks (else its
    `coco.world_size`, else `WORLD`) per stage."""
    from coconet_ir.analysis.channels import PipelineChannels
    from coconet_ir.dialects.coco import world_size
    from coconet_ir.ir import check_arguments_divisible, parse_file

    if world is not None and world < 1:
        raise UsageError(f"--world must be >= 1, got {world}")
    module = parse_file(path)
    declared = world_size(module)
    if world is not None and declared is not None and world != declared:
        raise UsageError(
            f"--world {world} disagrees with {path}'s {WORLD_SIZE_ATTR} = {declared}"
        )
    ranks = world or declared or WORLD
    check_arguments_divisible(with_world(module.clone(), ranks))
    stages = max(PipelineChannels.of(module).stage_indices().values(), default=0) + 1
    return Workload(
        Path(path).stem,
        f"{path}, {ranks} ranks per stage",
        module.clone,
        lambda: USER_SCHEDULES,
        world=ranks,
        stages=stages,
    )


def chosen_workloads(names: Sequence[str] | None) -> list[Workload]:
    if not names:
        return list(WORKLOADS)
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise UsageError(
            f"unknown workload '{unknown[0]}'; the workloads are {', '.join(BY_NAME)}"
        )
    return [BY_NAME[n] for n in dict.fromkeys(names)]


def png_directory(path: str | None) -> Path | None:
    if path is None:
        return None
    directory = Path(path)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(
            f"cannot make the --png directory {path}: {err.strerror or err}"
        ) from None
    return directory


def bench(args: argparse.Namespace) -> int:
    try:
        target = machine(args.machine)
    except CocoError as err:
        raise UsageError(str(err.diagnostic.message)) from None
    if args.file is not None and args.workload:
        raise UsageError("give a FILE or --workload, not both")
    if args.file is None and args.world is not None:
        raise UsageError(f"--world applies to a FILE (the workloads run on {WORLD})")
    if args.file is not None:
        workloads = [file_workload(args.file, args.world)]
    else:
        workloads = chosen_workloads(args.workload)
    directory = png_directory(args.png)
    if args.backend == "cuda":
        check_gpus(workloads)
    start = time.perf_counter()
    world = max(w.world for w in workloads)
    print("\n".join(header_lines(target, args.backend, world)))
    print("\n".join(calibration_lines(args.markdown)), flush=True)
    for workload in workloads:
        result = run_workload(workload, target)
        if args.backend == "cuda":
            for row in result.rows:
                row.measured_s = measure(row, workload.world)
        lines = report(result, args.backend, args.markdown)
        if directory is not None:
            path = write_png(result, directory, args.backend)
            lines.insert(-1, f"{'- ' if args.markdown else ''}timeline: {path}")
        print("\n".join(lines), flush=True)
        if workload.scale_out is not None and target.nodes > 1:
            points = scale_out(workload, target)
            lines = scale_out_lines(workload, target, points, args.markdown)
            if directory is not None:
                path = write_scale_out_png(workload, target, points, directory)
                lines.insert(-1, f"{'- ' if args.markdown else ''}plot: {path}")
            print("\n".join(lines), flush=True)
    count = len(workloads)
    plural = "" if count == 1 else "s"
    print(f"{count} workload{plural} in {time.perf_counter() - start:.1f} s")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    run_guarded(TOOL, lambda: bench(args), user_error_code=EXIT_FAILED)


if __name__ == "__main__":
    main(sys.argv[1:])
