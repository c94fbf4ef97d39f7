"""How an entry's scalar arguments cross ctypes (docs/gpu/emulation.md), for the
emulation's child process and the GPU runner alike.

numpy and ctypes only: `_child.py` runs by path, outside the package, and
imports this module as its sibling.
"""

from __future__ import annotations

import ctypes

import numpy as np

SCALARS = {
    np.dtype(np.int8): ctypes.c_int8,
    np.dtype(np.uint8): ctypes.c_uint8,
    np.dtype(np.int16): ctypes.c_int16,
    np.dtype(np.uint16): ctypes.c_uint16,
    np.dtype(np.int32): ctypes.c_int32,
    np.dtype(np.uint32): ctypes.c_uint32,
    np.dtype(np.int64): ctypes.c_int64,
    np.dtype(np.uint64): ctypes.c_uint64,
    np.dtype(np.float32): ctypes.c_float,
    np.dtype(np.float64): ctypes.c_double,
    np.dtype(np.bool_): ctypes.c_bool,
}
"""A numpy scalar's dtype → the C type it is passed by value as."""


def c_scalar(value: object) -> ctypes._SimpleCData:
    """A scalar entry argument as ctypes passes it: a numpy scalar with its C
    type, a Python int as `long long`, a Python float as `double`."""
    if isinstance(value, np.generic):
        return SCALARS[value.dtype](value.item())
    if isinstance(value, bool | int):
        return ctypes.c_int64(int(value))
    if isinstance(value, float):
        return ctypes.c_double(value)
    raise TypeError(f"cannot pass {type(value).__name__} to an entry")
