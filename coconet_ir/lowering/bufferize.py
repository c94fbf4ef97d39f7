"""Bufferization for convert-coco-to-gpu: per-rank buffers of coco values
(docs/gpu/device.md, "Bufferization").

A `!coco.tensor<SHAPE x T, LAYOUT>` lives on each rank as the buffer
`memref<LOCAL_SHAPE x T>`: the global shape for `replicated` and `local`, the
rank's block (`shape[D] / N` along `D`) for `sliced<D>`; rank 0 gives
`memref<T>`. During the conversion a coco value and its buffer meet through
`builtin.unrealized_conversion_cast` (MLIR's materializations): `buffer_of`
gives the buffer of a value, `as_tensor` the value of a buffer, and
`fold_casts` removes the pairs once every coco op is gone.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from functools import lru_cache

from xdsl.dialects import memref
from xdsl.dialects.builtin import (
    MemRefType,
    UnrealizedConversionCastOp,
)
from xdsl.ir import Attribute, Operation, SSAValue

from coconet_ir.dialects.coco import TensorType

__all__ = [
    "alloc",
    "as_tensor",
    "buffer_of",
    "buffer_type",
    "element_count",
    "fold_casts",
    "local_shape",
    "memref_of",
]


def local_shape(t: TensorType, world: int) -> tuple[int, ...]:
    """The shape of a rank's buffer of a value of type `t` on `world` ranks."""
    dims = list(t.dims)
    if t.layout.is_sliced:
        dims[t.layout.sliced_dim] //= world
    return tuple(dims)


def element_count(t: TensorType, world: int) -> int:
    """The number of elements of a rank's buffer."""
    return math.prod(local_shape(t, world))


def buffer_type(t: TensorType, world: int) -> MemRefType:
    """`memref<LOCAL_SHAPE x T>`, the per-rank buffer of a value of type `t`."""
    return memref_of(t.element_type, local_shape(t, world))


@lru_cache(maxsize=1 << 16)
def memref_of(element: Attribute, shape: tuple[int, ...]) -> MemRefType:
    """`memref<SHAPE x T>`, made once (the lowering of a model asks for the
    same few types thousands of times, and making one is costly)."""
    return MemRefType(element, shape)


def alloc(element: Attribute, shape: Iterable[int]) -> memref.AllocOp:
    """`memref.alloc() : memref<SHAPE x T>`."""
    return memref.AllocOp([], [], memref_of(element, tuple(shape)))


def lowered_buffer(value: SSAValue) -> SSAValue | None:
    """The memref the lowering of `value`'s producer cast back to a tensor,
    if it has been lowered."""
    owner = value.owner
    if (
        isinstance(owner, UnrealizedConversionCastOp)
        and len(owner.inputs) == 1
        and isinstance(owner.inputs[0].type, MemRefType)
    ):
        return owner.inputs[0]
    return None


def buffer_of(value: SSAValue, world: int) -> tuple[list[Operation], SSAValue]:
    """The buffer holding the coco value `value`: the memref its producer's
    lowering cast back to a tensor, else a cast to insert (with the ops)."""
    lowered = lowered_buffer(value)
    if lowered is not None:
        return [], lowered
    assert isinstance(value.type, TensorType)
    cast = materialize(value, buffer_type(value.type, world))
    cast.results[0].name_hint = value.name_hint
    return [cast], cast.results[0]


def as_tensor(buffer: SSAValue, t: Attribute) -> UnrealizedConversionCastOp:
    """The cast that lets coco ops still to be lowered read `buffer` as `t`."""
    return materialize(buffer, t)


def materialize(value: SSAValue, t: Attribute) -> UnrealizedConversionCastOp:
    """`builtin.unrealized_conversion_cast %value : ... to t`, built directly
    (the conversion makes one or two for every op it lowers)."""
    return UnrealizedConversionCastOp.create(operands=[value], result_types=[t])


def fold_casts(ops: Sequence[Operation]) -> None:
    """Replace every `memref → tensor → memref` cast pair among `ops` by the
    memref, then erase the casts nothing uses any more."""
    casts = [op for op in ops if isinstance(op, UnrealizedConversionCastOp)]
    for cast in casts:
        source = cast.inputs[0].owner
        if (
            isinstance(source, UnrealizedConversionCastOp)
            and isinstance(source.inputs[0].type, MemRefType)
            and source.inputs[0].type == cast.results[0].type
        ):
            cast.results[0].replace_all_uses_with(source.inputs[0])
    for cast in reversed(casts):
        if not any(r.uses for r in cast.results):
            cast.detach()
            cast.erase()
