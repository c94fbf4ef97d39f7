"""The `cuda` target: the device level printed as CUDA C (docs/gpu.md §2)."""

from __future__ import annotations

from pathlib import Path

from coconet_ir.backend.cuda.printer import CudaPrinter, print_cuda
from coconet_ir.backend.cuda.target import CudaTarget


def runtime_dir() -> Path:
    """The directory of `coco_runtime.h` (and its CPU emulation), the include
    path of every emitted `.cu`."""
    return Path(__file__).parent / "runtime"


__all__ = ["CudaPrinter", "CudaTarget", "print_cuda", "runtime_dir"]
