"""Shared by the emulation tests: the hand-written test `.cu`, NCCL and CUDA
type codes, and per-rank argument builders."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np

KERNELS = Path(__file__).parent / "cuda" / "runtime_kernels.cu"

NCCL_TYPES = {
    np.dtype(np.int32): 2,
    np.dtype(np.float16): 6,
    np.dtype(np.float32): 7,
    np.dtype(np.float64): 8,
    np.dtype(ml_dtypes.bfloat16): 9,
}
CUDA_TYPES = {
    np.dtype(np.float32): 0,
    np.dtype(np.float64): 1,
    np.dtype(np.float16): 2,
    np.dtype(ml_dtypes.bfloat16): 14,
}
NCCL_OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3}

SYMMETRIC_BYTES = 1 << 16


def kernels_source() -> str:
    return KERNELS.read_text()


def ring_bytes(kind: str, n: int, payload: int, root: int = 0) -> np.ndarray:
    """The bytes[src][dst] matrix (one stream) the emulation counts for one
    NCCL collective on `n` ranks (docs/gpu/emulation.md): `payload` is the
    all-reduce/broadcast message, the reduce-scatter input, the all-gather
    output."""
    expected = np.zeros((n, n), dtype=np.int64)
    for r in range(n):
        if kind == "all_reduce":
            sent = 2 * (n - 1) * payload // n
        elif kind in ("reduce_scatter", "all_gather"):
            sent = (n - 1) * payload // n
        else:  # broadcast: a pipeline from the root, the last rank keeps it
            sent = 0 if r == (root - 1) % n else payload
        expected[r, (r + 1) % n] += sent if n > 1 else 0
    return expected
