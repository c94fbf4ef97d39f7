"""coconet-bench: its tables at the paper's sizes for two quick workloads (the
rows, the labels saying the times are predictions, the bound), the timeline
PNG, and its clean refusals (no GPU for --backend cuda, bad usage). The full
run over every workload is a benchmark (docs/performance.md), not a test."""

from __future__ import annotations

import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest
from helpers import assert_clean_error

from coconet_ir.costmodel import machine
from coconet_ir.tools.coconet_bench import (
    BY_NAME,
    WORLD,
    run_workload,
)

QUICK = ("gemv-allreduce", "matmul-rs")
"""Workloads whose schedules take well under a second to compile and
predict, at the paper's sizes."""


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "coconet_ir.tools.coconet_bench", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    directory = tmp_path_factory.mktemp("png")
    args = [arg for name in QUICK for arg in ("--workload", name)]
    run = bench(*args, "--png", str(directory))
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    return run.stdout, directory


UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}

GEMV = Path(__file__).parents[3] / "examples" / "gemv_allreduce.mlir"


def seconds(row: str) -> float:
    """The predicted time of a table row ("... 2.229 ms  1.68x ...")."""
    words = row.split()
    for value, unit in pairwise(words):
        if unit in UNITS:
            return float(value) * UNITS[unit]
    raise AssertionError(f"no time in {row!r}")


def section(stdout: str, name: str) -> str:
    return stdout.split(f"== {name} ==", 1)[1].split("\n== ", 1)[0]


def test_every_time_is_labelled_a_prediction_of_the_model(quick_run) -> None:
    stdout, _ = quick_run
    assert stdout.startswith("coconet-bench: MODEL PREDICTIONS, not measurements")
    for name in QUICK:
        assert "predicted (cost model, h100x8)" in section(stdout, name)


def test_the_table_has_the_baseline_each_schedule_and_the_bound(quick_run) -> None:
    stdout, _ = quick_run
    lines = section(stdout, "matmul-rs").splitlines()
    rows = [line.split("  ")[0] for line in lines if line.strip()]
    assert rows[1:8] == [
        "schedule",
        "baseline (unfused: every op a kernel, NCCL)",
        "coco-optimize{overlap=false}",
        "coco-optimize{overlap_mode=chunks}",
        "coco-optimize{overlap_mode=per_peer} = coco-optimize",
        "autotuned: coco-optimize",
        "bound: max(compute, communication)",
    ]
    baseline = next(line for line in lines if line.startswith("baseline"))
    assert " 1.00x " in baseline
    (fastest,) = [line for line in lines if line.startswith("fastest: ")]
    labels = [label for row in rows[2:7] for label in row.split(" = ")]
    assert any(fastest.startswith(f"fastest: {label} (") for label in labels)


def test_the_autotuned_row_is_never_slower_than_coco_optimize(quick_run) -> None:
    """Every workload has one autotuned row, naming its pipeline, and it is
    predicted no slower than the coco-optimize row (the autotuner's
    invariant: coco-optimize is one of its candidates)."""
    stdout, _ = quick_run
    for name in QUICK:
        lines = section(stdout, name).splitlines()
        (tuned,) = [line for line in lines if line.startswith("autotuned: ")]
        optimized = next(line for line in lines if "coco-optimize" in line)
        assert seconds(tuned) <= seconds(optimized) * (1 + 1e-3), (tuned, optimized)


def test_the_calibration_error_is_shown(quick_run) -> None:
    from coconet_ir.costmodel.calibration import CASES

    stdout, _ = quick_run
    assert "largest held-out error" in stdout
    for case in CASES:
        assert case.name in stdout
        assert f"{case.error():+.1%}" in stdout


def test_a_timeline_picture_per_workload(quick_run) -> None:
    _, directory = quick_run
    for name in QUICK:
        picture = directory / f"{name}.png"
        assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert picture.stat().st_size > 10_000


@pytest.mark.parametrize("name", QUICK)
def test_no_row_beats_the_bound(name: str) -> None:
    """Every row takes at least its own max(compute, communication), hence
    at least the table's bound (the least of them)."""
    result = run_workload(BY_NAME[name], machine("h100x8"))
    assert len(result.rows) >= 3
    assert all(
        p.world == WORLD for row in result.rows for p in row.predictions.values()
    )
    for row in result.rows:
        assert row.time_s >= row.bound_s >= result.bound_s, row.label


def test_the_baseline_is_above_every_schedules_bound_when_no_work_is_added() -> None:
    """A schedule that only fuses and overlaps does no more work than the
    baseline: its bound is below the baseline's time. (Not so for a chunked
    matmul, which gives NCCL's SMs away: docs/performance.md.)"""
    result = run_workload(BY_NAME["gemv-allreduce"], machine("h100x8"))
    for row in result.rows:
        assert result.baseline.time_s >= row.bound_s, row.label


def test_markdown_tables() -> None:
    run = bench("--workload", "gemv-allreduce", "--markdown")
    assert run.returncode == 0, run.stderr
    assert "| schedule | predicted (cost model, h100x8) | speedup |" in run.stdout
    assert "| bound: max(compute, communication) |" in run.stdout


def test_cuda_without_gpus_is_a_clean_error() -> None:
    from coconet_ir.backend.cuda.gpu_run import gpu_count

    if gpu_count() >= WORLD:
        pytest.skip("this machine has GPUs: --backend cuda would measure")
    run = bench("--backend", "cuda", "--workload", "gemv-allreduce")
    assert_clean_error(run, "coconet-bench: error: no GPU: --backend cuda")
    assert run.stdout == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workload", "bert"], "unknown workload 'bert'; the workloads are"),
        (["--machine", "tpu"], "unknown machine 'tpu'; the presets are"),
        (["--world", "4"], "--world applies to a FILE"),
        ([str(GEMV), "--workload", "megatron"], "give a FILE or --workload"),
        ([str(GEMV), "--world", "0"], "--world must be >= 1, got 0"),
    ],
)
def test_bad_usage_exits_2(args: list[str], message: str) -> None:
    assert_clean_error(bench(*args), message, code=2)


def test_a_png_directory_that_cannot_be_made(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    run = bench("--workload", "gemv-allreduce", "--png", str(blocker / "sub"))
    assert_clean_error(run, "cannot make the --png directory", code=2)


def test_a_users_own_program(tmp_path: Path) -> None:
    """Issue 27: `coconet-bench FILE --world N` gives the same table for the
    user's module: the baseline, every schedule the workloads compare (those
    giving the same program on one row), the autotuned one and the bound;
    its timeline draws the fused GEMV + all_reduce as both computation and
    communication."""
    run = bench(str(GEMV), "--world", "4", "--png", str(tmp_path))
    assert run.returncode == 0, run.stderr
    assert "4 ranks per stage" in run.stdout.splitlines()[0]
    table = section(run.stdout, "gemv_allreduce")
    assert f"{GEMV}, 4 ranks per stage" in table
    rows = [line.split("  ")[0] for line in table.splitlines() if line.strip()]
    assert rows[2] == "baseline (unfused: every op a kernel, NCCL)"
    assert any(row.startswith("coco-optimize{fuse_collective=false}") for row in rows)
    assert any(row.startswith("autotuned: ") for row in rows)
    assert "bound: max(compute, communication)" in rows
    assert (tmp_path / "gemv_allreduce.png").stat().st_size > 10_000


def test_a_fused_kernel_is_computation_and_communication_at_once() -> None:
    import coconet_ir as cc
    from coconet_ir.costmodel import predict

    fused = cc.Pipeline("coco-optimize{world=4}")(cc.parse_file(str(GEMV)))
    (prediction,) = predict(fused, machine("h100x8"), 4).values()
    (kernel,) = [i for i in prediction.timeline if i.overlapped]
    assert (kernel.kind, kernel.label) == ("communication", "proj_fused")
    unfused = cc.parse_file(str(GEMV))
    (written,) = predict(unfused, machine("h100x8"), 4).values()
    assert not any(i.overlapped for i in written.timeline)


def test_a_file_that_does_not_divide_among_the_ranks(tmp_path: Path) -> None:
    run = bench(str(GEMV), "--world", "3")
    assert_clean_error(run, "is not divisible by the world size 3", code=1)
