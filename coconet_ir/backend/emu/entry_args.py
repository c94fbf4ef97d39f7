"""How an entry's scalar arguments cross ctypes (docs/gpu/emulation.md), for the
emulation and the GPU runner alike.

A scalar is passed by value as a C type: `scalar_spec` names it (the ctypes
type's name and a Python value, which the emulation's child process, which
imports ctypes but not numpy, makes with `getattr(ctypes, name)(value)`);
`c_scalar` makes it here.
"""

from __future__ import annotations

import ctypes

import numpy as np

SCALARS = {
    np.dtype(np.int8): "c_int8",
    np.dtype(np.uint8): "c_uint8",
    np.dtype(np.int16): "c_int16",
    np.dtype(np.uint16): "c_uint16",
    np.dtype(np.int32): "c_int32",
    np.dtype(np.uint32): "c_uint32",
    np.dtype(np.int64): "c_int64",
    np.dtype(np.uint64): "c_uint64",
    np.dtype(np.float32): "c_float",
    np.dtype(np.float64): "c_double",
    np.dtype(np.bool_): "c_bool",
}
"""A numpy scalar's dtype → the name of the ctypes type it is passed by value as."""


def scalar_spec(value: object) -> tuple[str, int | float | bool]:
    """A scalar entry argument as (ctypes type name, Python value): a numpy
    scalar with its C type, a Python int as `long long`, a Python float as
    `double`. A float's value is exact in the C type (a float32's Python
    float is the float32)."""
    if isinstance(value, np.generic):
        return SCALARS[value.dtype], value.item()
    if isinstance(value, bool | int):
        return "c_int64", int(value)
    if isinstance(value, float):
        return "c_double", value
    raise TypeError(f"cannot pass {type(value).__name__} to an entry")


def c_scalar(value: object) -> ctypes._SimpleCData:
    """A scalar entry argument as ctypes passes it (`scalar_spec`)."""
    name, python = scalar_spec(value)
    return getattr(ctypes, name)(python)
