"""A rank's side of a run through the `triton` target
(`coconet_ir.emulate.run_triton`, docs/triton.md): the printed module as an
importable file, the rank's buffers as torch tensors (`backend.tensors`),
its entry calls.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from coconet_ir.backend.tensors import array_of, tensor_of
from coconet_ir.backend.triton.printer import identifier

CACHE = Path.home() / ".cache" / "coconet-ir" / "triton"
"""Where the printed modules are written (by the hash of their text)."""


def write_module(text: str) -> Path:
    """The printed module as a file Python can import (Triton's JIT reads
    its kernels' source)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"coco_{hashlib.sha256(text.encode()).hexdigest()[:16]}.py"
    if not path.exists():
        path.write_text(text)
    return path


def import_module(path: Path) -> ModuleType:
    name = path.stem
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run_rank(
    world: Any,
    path: Path,
    entries: list[tuple[str, list[np.ndarray]]],
    wanted: dict[str, list[int]],
    calls: int,
) -> dict[str, list[np.ndarray]]:
    """One rank: its entry points in order, `calls` times on the same
    buffers (updated parameters carry over, as in `emulate`); the buffers
    `wanted` of each entry (by name) after the last call."""
    module = import_module(path)
    tensors = {name: [tensor_of(b) for b in buffers] for name, buffers in entries}
    for _ in range(calls):
        for name, _buffers in entries:
            getattr(module, f"coco_{identifier(name)}")(world, *tensors[name])
    return {
        name: [
            array_of(tensors[name][i], buffers[i].dtype, buffers[i].shape)
            for i in wanted[name]
        ]
        for name, buffers in entries
    }
