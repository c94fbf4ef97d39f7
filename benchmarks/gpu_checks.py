"""Correctness of the generated code on one GPU, with N ranks sharing it
(docs/gpu/running.md, "Ranks sharing a GPU"; issue 26 item 4).

    python3 benchmarks/gpu_checks.py [--worlds 2,4] [--examples NAMES]
        [--sanitize NAMES] [--jobs 8]

For each example and world N it runs `coconet-run examples/NAME.mlir
--backend cuda --world N --devices 0,...,0 --check`: `coco-optimize`, the
lowering for N ranks, nvcc, N ranks on GPU 0 (each its own buffers, streams
and share of the multiprocessors), and the comparison with the reference
interpreter. The peer protocols (stores into a peer's buffer, release/acquire
signals, per-tile counters) so run on the GPU's own memory model, which the
CPU emulation does not have. With `--sanitize`, the named examples run again
at the largest world under compute-sanitizer's racecheck, synccheck and
memcheck. No NCCL communicator exists on a shared GPU (NCCL runs one rank per
GPU), so programs that still call NCCL fail with that message: they are
reported as such, not as wrong.

It needs coconet_ir's dependencies (xDSL...), cupy, nvcc and the NCCL/cuBLAS
wheels on the machine; a table goes to standard output, one log per run to
`--logs` (default `build/gpu_checks`).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = (
    "sgd",
    "adam",
    "lamb",
    "megatron",
    "gemv_allreduce",
    "dlrm_embedding",
    "moe_gemm_a2a",
)
"""The examples whose coco-optimize'd programs call no NCCL at N = 2 and 4."""
SANITIZED = ("lamb", "adam", "gemv_allreduce", "dlrm_embedding", "moe_gemm_a2a")
TOOLS = ("racecheck", "synccheck", "memcheck")
SUMMARY = re.compile(r"(ERROR|RACECHECK) SUMMARY: (\d+) (errors?|hazards?)")


def coconet_run(name: str, world: int) -> list[str]:
    devices = ",".join(["0"] * world)
    return [
        sys.executable,
        "-m",
        "coconet_ir.tools.coconet_run",
        str(ROOT / "examples" / f"{name}.mlir"),
        "--backend",
        "cuda",
        "--world",
        str(world),
        "--devices",
        devices,
        "--check",
    ]


def run(label: str, command: list[str], logs: Path, timeout: float) -> tuple[str, str]:
    """(verdict, detail) of one command, its output in logs/LABEL.log."""
    started = time.perf_counter()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, cwd=ROOT
        )
        output, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as stuck:
        output, code = f"{stuck.stdout or ''}{stuck.stderr or ''}", None
    seconds = time.perf_counter() - started
    (logs / f"{label}.log").write_text(output)
    found = SUMMARY.findall(output)
    if code is None:
        return "STUCK", f"no answer in {timeout:.0f} s"
    if found:
        counts = sum(int(n) for _, n, _ in found)
        verdict = "ok" if code == 0 and counts == 0 else "FAIL"
        return verdict, f"{counts} reported, exit {code}, {seconds:.0f} s"
    last = [line for line in output.splitlines() if line.strip()][-1:] or [""]
    if code == 0:
        return "ok", f"{seconds:.0f} s: {last[0][:120]}"
    if "no NCCL communicator" in output:
        return "needs NCCL", "calls NCCL: cannot share a GPU"
    return "FAIL", f"exit {code}: {last[0][:200]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--worlds", default="2,4")
    parser.add_argument("--examples", default=",".join(EXAMPLES))
    parser.add_argument("--sanitize", default=",".join(SANITIZED))
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=240.0)
    parser.add_argument("--logs", type=Path, default=ROOT / "build" / "gpu_checks")
    args = parser.parse_args(argv)
    worlds = [int(w) for w in args.worlds.split(",")]
    args.logs.mkdir(parents=True, exist_ok=True)
    jobs: list[tuple[str, list[str]]] = [
        (f"{name}-w{world}", coconet_run(name, world))
        for name in args.examples.split(",")
        if name
        for world in worlds
    ]
    with ThreadPoolExecutor(args.jobs) as pool:
        checks = list(pool.map(lambda j: run(*j, args.logs, args.timeout), jobs))
    sanitized: list[tuple[str, list[str]]] = [
        (
            f"{name}-w{max(worlds)}-{tool}",
            ["compute-sanitizer", "--tool", tool, *coconet_run(name, max(worlds))],
        )
        for name in args.sanitize.split(",")
        if name
        for tool in TOOLS
    ]
    with ThreadPoolExecutor(args.jobs) as pool:
        tools = list(pool.map(lambda j: run(*j, args.logs, args.timeout), sanitized))
    failed = 0
    print("| run | verdict | detail |\n|---|---|---|")
    for (label, _), (verdict, detail) in zip(jobs + sanitized, checks + tools):
        failed += verdict not in ("ok", "needs NCCL")
        print(f"| {label} | {verdict} | {detail} |")
    print(f"{failed} failed; logs in {args.logs}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
