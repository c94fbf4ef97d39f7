"""A rank's side of a run through the `triton` target
(`coconet_ir.emulate.run_triton`, docs/triton.md): the printed module as an
importable file, the rank's buffers as torch tensors, its entry calls.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

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


def to_torch(array: np.ndarray) -> Any:
    """A torch tensor sharing `array`'s memory (bf16 through its bits)."""
    import torch

    if array.dtype.name == "bfloat16":
        return torch.from_numpy(array.view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def from_torch(tensor: Any, like: np.ndarray) -> np.ndarray:
    if like.dtype.name == "bfloat16":
        import torch

        return tensor.view(torch.int16).numpy().view(like.dtype).copy()
    return tensor.numpy().copy()


def run_rank(
    world: Any, path: Path, calls: list[tuple[str, list[np.ndarray], list[int]]]
) -> dict[str, list[np.ndarray]]:
    """One rank: every call of its entry points; the output buffers of the
    last call of each (by entry name)."""
    module = import_module(path)
    outputs: dict[str, list[np.ndarray]] = {}
    for name, buffers, wanted in calls:
        tensors = [to_torch(b) for b in buffers]
        getattr(module, f"coco_{identifier(name)}")(world, *tensors)
        outputs[name] = [from_torch(tensors[i], buffers[i]) for i in wanted]
    return outputs
