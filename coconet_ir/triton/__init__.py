"""Workgroup-granular communication for Triton kernels (docs/triton.md).

`coconet_ir.triton.language` holds `@triton.jit` device functions (`put`,
`signal`, `wait`, `peer_ptr`) over symmetric buffers and signal pads;
`coconet_ir.triton.world` gives every rank those buffers and their pointer
tables: PyTorch's symmetric memory on GPUs, shared memory between processes
on a CPU.

On a machine without a GPU, importing this package sets `TRITON_INTERPRET=1`
(unless it is set), so kernels decorated after it run under Triton's
interpreter: import it before your kernels' module.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Container, MutableMapping

from coconet_ir.diagnostics import CocoError


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def choose_interpreter(
    environ: MutableMapping[str, str], imported: Container[str], has_gpu: bool
) -> None:
    """Set TRITON_INTERPRET=1 in `environ` where there is no GPU (unless it
    is set); a CocoError if `triton` is already `imported` without it:
    triton.language's own jit functions (tl.zeros, ...) were made for a GPU
    when it was imported, and an interpreted kernel would fail inside."""
    if "TRITON_INTERPRET" in environ or has_gpu:
        return
    if "triton" in imported:
        raise CocoError(
            "coconet_ir.triton: there is no GPU, so kernels must run under Triton's "
            "interpreter, but triton was imported before coconet_ir.triton without "
            "TRITON_INTERPRET=1: set TRITON_INTERPRET=1, or import coconet_ir.triton "
            "first"
        )
    environ["TRITON_INTERPRET"] = "1"


if "TRITON_INTERPRET" not in os.environ:
    choose_interpreter(os.environ, sys.modules, _has_gpu())

from coconet_ir.triton import language  # noqa: E402
from coconet_ir.triton.world import (  # noqa: E402
    RanksFailed,
    SymmetricWorld,
    WaitTimeout,
    open_world,
    spawn,
)

__all__ = [
    "RanksFailed",
    "SymmetricWorld",
    "WaitTimeout",
    "language",
    "open_world",
    "spawn",
]
