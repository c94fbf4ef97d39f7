"""The `cuda` target: the device level printed as CUDA C (docs/gpu.md §2)."""

from __future__ import annotations

from pathlib import Path


def runtime_dir() -> Path:
    """The directory of `coco_runtime.h` (and its CPU emulation), the include
    path of every emitted `.cu`."""
    return Path(__file__).parent / "runtime"


__all__ = ["runtime_dir"]
