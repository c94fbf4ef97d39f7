"""The generated code beside PyTorch on one GPU: the issue-26 table as one
command (docs/performance.md, "On a GPU").

    python benchmarks/gpu_peers.py --build DIR [--arch sm_90] [--only NAMES]
    python3 benchmarks/gpu_peers.py --run DIR [--only NAMES] [--json FILE]

`--build` runs where the compiler is installed, no GPU needed: it builds each
workload at model size, `coco-optimize,convert-coco-to-gpu{world=1}`, prints
it with `-t 'cuda{main=true}'` into `DIR/NAME.cu` and builds the benchmark
program `DIR/NAME` with nvcc (`python -m coconet_ir.backend.cuda.toolchain`'s
command, `-O3`), and writes `DIR/manifest.json`: per workload the program,
the PyTorch equivalent to time beside it, and the least work of a step
(`coconet_ir.analysis.costs.function_floor`: matmul FLOPs, and the bytes of
reading every argument and writing every result and update once). The
workloads whose collectives are all the project's own kernels are built for
4 ranks too (`DIR/NAME-w4`), which `--run` runs with every rank on GPU 0
(`--devices 0,0,0,0`): the same step's work split among four ranks that
exchange it through the fused kernels' peer stores, beside the same
single-GPU PyTorch op.

`--run` runs on a GPU machine, with PyTorch and the copied `DIR` only (it
imports neither coconet_ir nor xDSL): it measures the device's two ceilings
(a device-to-device copy of 2 GiB, bytes read + written; an 8192^3 bf16
matmul on random data), runs each program (its own timing: the mean of
`--iters` calls between two CUDA events after `--warmup` calls) and the
PyTorch equivalent (the same: CUDA events around `iters` calls after
`warmup`), and prints, per workload, both times, their ratio and the bound:
max(bytes / copy bandwidth, FLOPs / matmul rate). JSON goes to `--json`
(default `DIR/results.json`). Without a GPU it says so and exits 0. NCCL and
cuBLAS are found through the `nvidia` wheels of the Python that runs it
(PyTorch's), put on `LD_LIBRARY_PATH` for the programs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEVICE = "cuda"
"""Where `--run` puts the PyTorch side (a test runs it on the CPU)."""


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    build: Callable[[], Any]
    """The coco module at model size (imports coconet_ir; --build only)."""
    torch: Callable[[], dict[str, Any]]
    """The PyTorch equivalent, as a spec `--run` turns into a step."""
    warmup: int = 3
    iters: int = 20
    shared: tuple[int, ...] = ()
    """Worlds to run besides 1, every rank on GPU 0 (docs/gpu/running.md,
    "Ranks sharing a GPU"): programs whose collectives are all the project's
    own kernels."""


# ============================================================================
# --build: the workloads at model size
# ============================================================================


def example(name: str) -> Any:
    from coconet_ir.tools.coconet_bench import load_example

    return load_example(name)


def model(name: str) -> Callable[[], Any]:
    def build() -> Any:
        module = example(name)
        return module.build(module.MODEL)

    return build


def sizes(name: str) -> dict[str, Any]:
    return {k: v for k, v in example(name).MODEL.items() if k != "element"}


def bert_shapes() -> list[list[int]]:
    bert = example("lamb_bert")
    return [shape for _, shape in bert.parameters(bert.BERT_LARGE)]


def bias_dropout_residual() -> Any:
    """Megatron's epilogue alone (B=8 S=2048 H=12288 bf16): a pure
    elementwise chain."""
    import coconet_ir as cc

    B, S, H = 8, 2048, 12288

    @cc.function
    def bias_dropout_residual(
        x: cc.tensor([B, S, H], cc.bf16, cc.replicated),
        bias: cc.tensor([H], cc.bf16, cc.replicated),
        r: cc.tensor([B, S, H], cc.bf16, cc.replicated),
    ):
        dropped = cc.dropout(x + bias, 0.1, seed=7, name="dropout")
        return cc.add(dropped, r, name="out")

    return cc.module(bias_dropout_residual)


def adam_bert() -> Any:
    return example("adam_bert").build()


def lamb_bert() -> Any:
    bert = example("lamb_bert")
    return bert.build(bert.BERT_LARGE)


WORKLOADS: tuple[Workload, ...] = (
    Workload(
        "gemv_allreduce",
        "GEMV + all_reduce, H=12288 bf16",
        model("gemv_allreduce"),
        lambda: {"kind": "linear", **sizes("gemv_allreduce")},
        shared=(4,),
    ),
    Workload(
        "moe_gemm_a2a",
        "MoE GEMM + all_to_all, 64 experts, Mixtral widths",
        model("moe_gemm_a2a"),
        lambda: {"kind": "bmm", **sizes("moe_gemm_a2a")},
        warmup=1,
        iters=2,
        shared=(4,),
    ),
    Workload(
        "megatron",
        "Megatron layer 8x2048x12288 bf16",
        model("megatron"),
        lambda: {"kind": "megatron", **sizes("megatron")},
    ),  # not shared: at model size its 4-rank program calls ncclAllGather
    Workload(
        "sequence_parallel_mlp",
        "sequence-parallel MLP 2048x12288x49152 bf16",
        model("sequence_parallel_mlp"),
        lambda: {"kind": "mlp", **sizes("sequence_parallel_mlp")},
    ),
    Workload(
        "adam_bert",
        "Adam over BERT-large (335M f32)",
        adam_bert,
        lambda: {"kind": "adam", "shapes": bert_shapes()},
    ),
    Workload(
        "lamb_bert",
        "LAMB over BERT-large (335M f32)",
        lamb_bert,
        lambda: {"kind": "lamb", "shapes": bert_shapes()},
    ),
    Workload(
        "dlrm_embedding",
        "DLRM embedding + all_to_all, 64 tables 1M x 128 bf16",
        model("dlrm_embedding"),
        lambda: {"kind": "embedding_bag", **sizes("dlrm_embedding")},
        shared=(4,),
    ),
    Workload(
        "bias_dropout_residual",
        "bias + dropout + residual, 8x2048x12288 bf16",
        bias_dropout_residual,
        lambda: {"kind": "bias_dropout_residual", "B": 8, "S": 2048, "H": 12288},
    ),
)

BY_NAME = {w.name: w for w in WORKLOADS}


def build_one(
    workload: Workload,
    world: int,
    directory: Path,
    arch: str,
    compile_it: bool = True,
) -> dict[str, Any]:
    """Lower for `world` ranks, print and (unless not `compile_it`) compile
    one workload; its manifest entry. Its bound is the work of the whole
    step on one GPU (world 1), whatever the ranks sharing it."""
    import coconet_ir as cc
    from coconet_ir.analysis.costs import function_floor
    from coconet_ir.backend.cuda.printer import emit_cuda
    from coconet_ir.backend.cuda.toolchain import nvcc_command

    started = time.perf_counter()
    module = workload.build()
    (function,) = [op for op in module.ops if op.name == "func.func"]
    flops, nbytes = function_floor(function, 1)
    device = cc.Pipeline(f"coco-optimize,convert-coco-to-gpu{{world={world}}}")(module)
    name = workload.name if world == 1 else f"{workload.name}-w{world}"
    source = directory / f"{name}.cu"
    text = emit_cuda(device, main=True)
    source.write_text(text)
    lowered = time.perf_counter() - started
    program = directory / name
    command = nvcc_command(
        source, arch, program, executable=True, harness=True, optimize=True
    )
    done = (
        subprocess.run(command, capture_output=True, text=True) if compile_it else None
    )
    if done and done.returncode:
        raise SystemExit(f"{name}: nvcc failed:\n{done.stderr[-4000:]}")
    print(
        f"  {name}: lowered in {lowered:.1f} s, built in "
        f"{time.perf_counter() - started - lowered:.1f} s",
        flush=True,
    )
    return {
        "name": name,
        "title": workload.title
        + (f", {world} ranks sharing the GPU" if world > 1 else ""),
        "program": name,
        "world": world,
        "warmup": workload.warmup,
        "iters": workload.iters,
        "flops": flops,
        "bytes": nbytes,
        "kernels": text.count("__global__"),
        "torch": workload.torch(),
    }


def build(
    directory: Path, arch: str, names: list[str], jobs: int, compile_it: bool = True
) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    programs = [(BY_NAME[n], world) for n in names for world in (1, *BY_NAME[n].shared)]
    print(f"gpu_peers --build: {len(programs)} programs for {arch} into {directory}")
    with ThreadPoolExecutor(jobs) as pool:
        entries = list(
            pool.map(lambda p: build_one(*p, directory, arch, compile_it), programs)
        )
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    manifest = {"arch": arch, "commit": commit, "workloads": entries}
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=1))
    print(
        f"wrote {directory / 'manifest.json'}; run it with "
        f"`python3 benchmarks/gpu_peers.py --run {directory}` on a GPU machine"
    )
    return 0


# ============================================================================
# --run: on the GPU, beside PyTorch
# ============================================================================


@dataclass
class Measured:
    name: str
    title: str
    ours_us: float | None = None
    torch_us: float | None = None
    torch_label: str = ""
    bound_us: float = 0.0
    notes: list[str] = field(default_factory=list[str])

    @property
    def ratio(self) -> float | None:
        if self.ours_us is None or not self.torch_us:
            return None
        return self.ours_us / self.torch_us


def library_path() -> str:
    """NCCL's and cuBLAS's library folders in this Python's `nvidia` wheels."""
    try:
        import nvidia  # type: ignore[import-not-found]
    except ImportError:
        return ""
    found = [
        str(lib)
        for root in nvidia.__path__
        for lib in sorted(Path(root).glob("*/lib"))
        if any(lib.glob("libnccl.so*")) or any(lib.glob("libcublas.so*"))
    ]
    return ":".join(found)


def run_program(directory: Path, entry: dict[str, Any]) -> tuple[float | None, str]:
    """The program's mean µs per call (its own table), or None and why."""
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = ":".join(
        p for p in (library_path(), env.get("LD_LIBRARY_PATH", "")) if p
    )
    command = [
        str(directory / entry["program"]),
        "--warmup",
        str(entry["warmup"]),
        "--iters",
        str(entry["iters"]),
    ]
    if entry["world"] > 1:  # every rank on GPU 0
        command += ["--devices", ",".join(["0"] * entry["world"])]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    if done.returncode:
        said = (done.stderr or done.stdout).strip().splitlines() or ["(no output)"]
        return None, f"exit {done.returncode}: {said[-1][:300]}"
    for line in done.stdout.splitlines():
        fields = line.split()
        if fields and not line.startswith("#") and len(fields) >= 3:
            return float(fields[2]), ""
    return None, "no timing row in its output"


def timed(torch: Any, step: Callable[[], Any], warmup: int, iters: int) -> float:
    """Mean µs per call between two CUDA events, after `warmup` calls (the
    benchmark main's method)."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        step()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) * 1000.0 / iters


def ceilings(torch: Any) -> tuple[float, float]:
    """(bytes/s of a device-to-device copy counting read + write, bf16 matmul
    FLOP/s on random data), each the median of 5 timings."""
    return copy_bandwidth(torch), matmul_rate(torch)


def copy_bandwidth(torch: Any) -> float:
    source = torch.randn(1 << 30, device=DEVICE, dtype=torch.bfloat16)  # 2 GiB
    target = torch.empty_like(source)
    times = [timed(torch, lambda: target.copy_(source), 2, 10) for _ in range(5)]
    return (
        2 * source.numel() * source.element_size() / (statistics.median(times) * 1e-6)
    )


def matmul_rate(torch: Any) -> float:
    m = 8192
    x = torch.randn(m, m, device=DEVICE, dtype=torch.bfloat16)
    y = torch.randn(m, m, device=DEVICE, dtype=torch.bfloat16)
    times = [timed(torch, lambda: x @ y, 2, 10) for _ in range(5)]
    return 2 * m**3 / (statistics.median(times) * 1e-6)


def torch_step(torch: Any, spec: dict[str, Any]) -> tuple[str, Callable[[], Any]]:
    """The PyTorch equivalent of a workload: its label and one step."""
    F = torch.nn.functional
    bf16, dev = torch.bfloat16, DEVICE
    kind = spec["kind"]
    if kind == "linear":
        H = spec["H"]
        x = torch.randn(spec["B"] * spec["S"], H, device=dev, dtype=bf16)
        w = torch.randn(H, H, device=dev, dtype=bf16) / H**0.5
        b = torch.randn(H, device=dev, dtype=bf16)
        return "x @ w + b", lambda: torch.addmm(b, x, w)
    if kind == "bmm":
        E, S, C, Fw, H = (spec[k] for k in ("E", "S", "C", "F", "H"))
        t = torch.randn(E, S * C, Fw, device=dev, dtype=bf16)
        w = torch.randn(E, Fw, H, device=dev, dtype=bf16) / Fw**0.5
        return "torch.bmm", lambda: torch.bmm(t, w)
    if kind in ("megatron", "bias_dropout_residual"):
        B, S, H = spec["B"], spec["S"], spec["H"]
        x = torch.randn(B * S, H, device=dev, dtype=bf16)
        r = torch.randn(B * S, H, device=dev, dtype=bf16)
        b = torch.randn(H, device=dev, dtype=bf16)
        if kind == "bias_dropout_residual":
            return "eager dropout(x + b) + r", lambda: F.dropout(x + b, 0.1) + r
        w = torch.randn(H, H, device=dev, dtype=bf16) / H**0.5
        return (
            "eager matmul, bias, dropout, residual",
            lambda: F.dropout(x @ w + b, 0.1) + r,
        )
    if kind == "mlp":
        S, B, H, Fw = spec["S"], spec["B"], spec["H"], spec["F"]
        x = torch.randn(S * B, H, device=dev, dtype=bf16)
        w1 = torch.randn(H, Fw, device=dev, dtype=bf16) / H**0.5
        b1 = torch.randn(Fw, device=dev, dtype=bf16)
        w2 = torch.randn(Fw, H, device=dev, dtype=bf16) / Fw**0.5
        return "eager fc1, bias, GELU, fc2", lambda: F.gelu(x @ w1 + b1) @ w2
    if kind == "adam":
        params = [torch.randn(s, device=dev) for s in spec["shapes"]]
        for p in params:
            p.grad = torch.randn_like(p)
        optimizer = torch.optim.Adam(params, lr=1e-4, fused=True)
        return "torch.optim.Adam(fused=True)", optimizer.step
    if kind == "lamb":
        return "torch._foreach_* LAMB", lamb_step(torch, spec["shapes"])
    if kind == "embedding_bag":
        T, R, D, B, L = (spec[k] for k in ("T", "R", "D", "B", "L"))
        tables = torch.randn(T * R, D, device=dev, dtype=bf16)
        rows = torch.randint(0, R, (T, B, L), device=dev)
        flat = (rows + torch.arange(T, device=dev).view(T, 1, 1) * R).view(T * B, L)
        return "F.embedding_bag (flattened tables)", lambda: F.embedding_bag(
            flat, tables, mode="sum"
        )
    raise ValueError(f"unknown PyTorch equivalent {kind!r}")


def lamb_step(torch: Any, shapes: list[list[int]]) -> Callable[[], None]:
    """examples/lamb.py's update over every tensor with torch._foreach_* ops
    (beta1 0.9, beta2 0.999, eps 1e-6, weight decay 0.01)."""
    w = [torch.randn(s, device=DEVICE) for s in shapes]
    g = [torch.randn_like(p) for p in w]
    m = [torch.zeros_like(p) for p in w]
    v = [torch.zeros_like(p) for p in w]
    lr, b1, b2, eps, wd, b1t, b2t = 1e-3, 0.9, 0.999, 1e-6, 0.01, 0.9, 0.999

    def step() -> None:
        torch._foreach_mul_(m, b1)
        torch._foreach_add_(m, g, alpha=1 - b1)
        torch._foreach_mul_(v, b2)
        torch._foreach_addcmul_(v, g, g, value=1 - b2)
        denominator = torch._foreach_div(v, 1 - b2t)
        torch._foreach_sqrt_(denominator)
        torch._foreach_add_(denominator, eps)
        r = torch._foreach_div(m, 1 - b1t)
        torch._foreach_div_(r, denominator)
        torch._foreach_add_(r, w, alpha=wd)
        trust = torch._foreach_div(torch._foreach_norm(w), torch._foreach_norm(r))
        torch._foreach_mul_(r, trust)
        torch._foreach_add_(w, r, alpha=-lr)

    return step


def run(directory: Path, names: list[str] | None, json_path: Path) -> int:
    try:
        import torch  # type: ignore[import-not-found]
    except ImportError:
        print("gpu_peers --run: no PyTorch here, so no GPU to time on: nothing run")
        return 0
    if not torch.cuda.is_available():
        print("gpu_peers --run: no GPU on this machine: nothing run")
        return 0
    manifest = json.loads((directory / "manifest.json").read_text())
    device = torch.cuda.get_device_name()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    bandwidth, rate = ceilings(torch)
    print(f"# {device}, {when}; build {manifest['commit']} for {manifest['arch']}")
    print(
        f"# measured: copy {bandwidth / 1e12:.2f} TB/s (read + write), "
        f"bf16 matmul {rate / 1e12:.0f} TFLOP/s",
        flush=True,
    )
    results: list[Measured] = []
    for entry in manifest["workloads"]:
        if names and entry["name"] not in names:
            continue
        row = Measured(entry["name"], entry["title"])
        row.bound_us = max(entry["bytes"] / bandwidth, entry["flops"] / rate) * 1e6
        row.ours_us, why = run_program(directory, entry)
        if why:
            row.notes.append(f"coconet-ir: {why}")
        try:
            row.torch_label, step = torch_step(torch, entry["torch"])
            row.torch_us = timed(torch, step, entry["warmup"], max(entry["iters"], 5))
            del step
        except Exception as error:  # reported in the table
            row.notes.append(f"PyTorch: {type(error).__name__}: {error}"[:300])
        torch.cuda.empty_cache()
        results.append(row)
        print(
            f"  {row.name}: {fmt(row.ours_us)} us vs {fmt(row.torch_us)} us "
            f"{' '.join(row.notes)}",
            flush=True,
        )
    print_table(results)
    json_path.write_text(
        json.dumps(
            {
                "device": device,
                "date": when,
                "commit": manifest["commit"],
                "arch": manifest["arch"],
                "copy_bytes_per_s": bandwidth,
                "bf16_flops_per_s": rate,
                "rows": [vars(r) for r in results],
            },
            indent=1,
        )
    )
    print(f"wrote {json_path}")
    return 0


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def print_table(rows: list[Measured]) -> None:
    header = [
        "workload",
        "coconet-ir us",
        "PyTorch us",
        "PyTorch",
        "ratio",
        "bound us",
        "ours/bound",
    ]
    lines = [header]
    for r in rows:
        lines.append(
            [
                r.name,
                fmt(r.ours_us),
                fmt(r.torch_us),
                r.torch_label,
                "-" if r.ratio is None else f"{r.ratio:.2f}x",
                fmt(r.bound_us),
                "-" if r.ours_us is None else f"{r.ours_us / r.bound_us:.2f}x",
            ]
        )
    widths = [max(len(line[k]) for line in lines) for k in range(len(header))]
    for line in lines:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(line, widths)) + " |")
    for r in rows:
        for note in r.notes:
            print(f"{r.name}: {note}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--build", type=Path, metavar="DIR")
    action.add_argument("--run", type=Path, metavar="DIR")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--only", help="comma-separated workload names")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--emit-only",
        action="store_true",
        help="--build: lower, print and write the manifest, but run no nvcc",
    )
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else None
    if names:
        unknown = [n for n in names if n not in BY_NAME]
        if unknown:
            parser.error(f"unknown workload(s) {unknown}; known: {list(BY_NAME)}")
    if args.build:
        return build(
            args.build, args.arch, names or list(BY_NAME), args.jobs, not args.emit_only
        )
    return run(args.run, names, args.json or args.run / "results.json")


if __name__ == "__main__":
    sys.exit(main())
