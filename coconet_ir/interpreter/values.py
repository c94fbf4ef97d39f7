"""Distributed values: what an SSA value of type `!coco.tensor` holds on N ranks.

A distributed value is, formally (docs/dialect.md, "The distributed tensor
type"), a map from rank to
a numpy array: the full array for `replicated`/`local`, the rank's block for
`sliced<D>`. `DistValue` stores it as one stacked array whose leading axis is the
rank, so that an op on all ranks is one numpy call:

- `sliced<D>`: shape `(N, *block)`, row `r` is block `r` (size `shape[D] / N`
  along `D`);
- `local`: shape `(N, *shape)`, row `r` is rank `r`'s value;
- `replicated`: shape `(1, *shape)`, the one value every rank holds (numpy
  broadcasting stretches it against `N` rows).

`ranks()` gives the list of per-rank arrays, `global_value()` the global value.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np
from xdsl.ir import Attribute

from coconet_ir.dialects.coco import TensorType, element_info

_PROMOTED: ContextVar[bool] = ContextVar("coconet_promoted", default=False)


@contextmanager
def promoted_precision(promoted: bool = True) -> Iterator[None]:
    """Within the block, values are held and computed promoted (the element
    table's `promoted_storage`/`promoted_compute`: f32 as f64, every float
    computed in f64, halves still rounded after each op); `interpret(...,
    promoted=True)` runs a program so for an equivalence check."""
    token = _PROMOTED.set(promoted)
    try:
        yield
    finally:
        _PROMOTED.reset(token)


def is_promoted() -> bool:
    """Whether the current run holds and computes values promoted."""
    return _PROMOTED.get()


def storage_dtype(element_type: Attribute) -> np.dtype:
    """The numpy dtype that holds values of a coco element type in this run:
    the type's own, or its promoted one (f64 for f32) in a promoted run."""
    info = element_info(element_type)
    return info.promoted_storage if _PROMOTED.get() else info.storage


def compute_dtype(element_type: Attribute) -> np.dtype:
    """The dtype arithmetic runs in: f32 for f16/bf16 (rounded back after each
    op, as the generated CUDA does), the storage dtype otherwise; f64 for every
    float in a promoted run."""
    info = element_info(element_type)
    return info.promoted_compute if _PROMOTED.get() else info.compute


def rounded_constant(element_type: Attribute, value: object) -> np.ndarray:
    """A constant as a value of its element type (an f32 constant is rounded
    to f32 also in a promoted run, where it is then held exactly as an f64)."""
    exact = np.asarray(value).astype(element_info(element_type).storage)
    return exact.astype(storage_dtype(element_type))


def block_size(tensor_type: TensorType, world: int) -> int:
    """The extent of a sliced tensor's block along its sliced dimension."""
    return tensor_type.dims[tensor_type.layout.sliced_dim] // world


def local_shape(tensor_type: TensorType, world: int) -> tuple[int, ...]:
    """The shape of the array one rank holds."""
    shape = list(tensor_type.dims)
    if tensor_type.layout.is_sliced:
        shape[tensor_type.layout.sliced_dim] = block_size(tensor_type, world)
    return tuple(shape)


def cut(array: np.ndarray, dim: int, world: int) -> np.ndarray:
    """Cut a global array into `world` contiguous blocks along `dim`, stacked
    along a new leading rank axis."""
    size = array.shape[dim]
    blocks = array.reshape(
        (*array.shape[:dim], world, size // world, *array.shape[dim + 1 :])
    )
    return np.moveaxis(blocks, dim, 0)


def join(blocks: np.ndarray, dim: int) -> np.ndarray:
    """The inverse of `cut`: concatenate stacked blocks along `dim`."""
    moved = np.moveaxis(blocks, 0, dim)
    shape = moved.shape
    return moved.reshape((*shape[:dim], shape[dim] * shape[dim + 1], *shape[dim + 2 :]))


@dataclass(frozen=True)
class DistValue:
    """A `!coco.tensor` value on `world` ranks (see the module docstring)."""

    type: TensorType
    data: np.ndarray
    world: int

    @staticmethod
    def from_global(
        tensor_type: TensorType, value: np.ndarray, world: int
    ) -> DistValue:
        """Distribute a global value by the type's layout (`local` values are
        given per rank, shape `(N, *shape)`)."""
        value = np.asarray(value, dtype=storage_dtype(tensor_type.element_type))
        layout = tensor_type.layout
        if layout.is_local:
            return DistValue(tensor_type, value, world)
        if layout.is_sliced:
            return DistValue(tensor_type, cut(value, layout.sliced_dim, world), world)
        return DistValue(tensor_type, value[np.newaxis], world)

    def stacked(self) -> np.ndarray:
        """All ranks' arrays stacked, shape `(N, *local_shape)`."""
        shape = (self.world, *self.data.shape[1:])
        return np.broadcast_to(self.data, shape)

    def ranks(self) -> list[np.ndarray]:
        """The per-rank arrays, rank 0 first."""
        return list(self.stacked())

    def rank(self, r: int) -> np.ndarray:
        """The array rank `r` holds."""
        return self.data[r if self.data.shape[0] > 1 else 0]

    def global_value(self) -> np.ndarray:
        """The global value: the full array for `replicated`, the concatenated
        blocks for `sliced`, the per-rank values stacked `(N, *shape)` for
        `local` (which has no global value)."""
        layout = self.type.layout
        if layout.is_sliced:
            return join(self.data, layout.sliced_dim)
        if layout.is_replicated:
            return self.data[0]
        return np.ascontiguousarray(self.stacked())

    def with_data(self, tensor_type: TensorType, data: np.ndarray) -> DistValue:
        """A value of another type on the same ranks."""
        return DistValue(tensor_type, data, self.world)
