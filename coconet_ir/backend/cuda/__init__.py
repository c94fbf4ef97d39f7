"""The `cuda` target: the device level printed as CUDA C (docs/gpu/cuda.md)."""

from __future__ import annotations

from pathlib import Path

from coconet_ir.backend.cuda.printer import CudaPrinter, emit_cuda, print_cuda
from coconet_ir.backend.cuda.target import CudaTarget


def runtime_dir() -> Path:
    """The directory of `coco_runtime.h` (and its CPU emulation), the include
    path of every emitted `.cu`."""
    return Path(__file__).parent / "runtime"


__all__ = ["CudaPrinter", "CudaTarget", "emit_cuda", "print_cuda", "runtime_dir"]
