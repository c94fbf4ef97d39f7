"""numpy arrays and torch tensors, bit for bit (bf16 as ml_dtypes' bfloat16
on the numpy side): what crosses between the interpreter's values and the
tensors the generated code runs on (`torch_op`, the `triton` target's runs).
A coco element type's numpy name is its torch dtype's too (`float32`,
`bfloat16`, ...)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def tensor_of(array: np.ndarray) -> Any:
    """A CPU torch tensor of `array`'s dtype and shape holding a copy of its
    bits."""
    import torch

    flat = np.ascontiguousarray(array).reshape(-1)
    raw = torch.from_numpy(flat.view(np.uint8).copy())
    return raw.view(getattr(torch, array.dtype.name)).reshape(array.shape)


def array_of(tensor: Any, dtype: np.dtype, shape: Sequence[int]) -> np.ndarray:
    """A tensor's bits as a numpy array of `dtype` and `shape` (a copy)."""
    import torch

    raw = tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
    return raw.numpy().view(dtype).reshape(shape).copy()
