"""The CUDA C spelling of the device level's types and the library enums
(NCCL, cuBLAS) that go with them (docs/gpu/cuda.md)."""

from __future__ import annotations

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    NoneAttr,
    VectorType,
)
from xdsl.ir import Attribute

from coconet_ir.dialects.coco.attributes import ReductionKind
from coconet_ir.dialects.coco_gpu import EventType, PeersType


class UnsupportedType(Exception):
    """A type the CUDA target has no spelling for (the printer reports it
    with the op that uses it)."""


def scalar_type(t: Attribute) -> str:
    """The C type of a scalar: index and i64 are `int64_t`."""
    match t:
        case IndexType():
            return "int64_t"
        case IntegerType():
            width = t.width.data
            if width == 1:
                return "bool"
            if width in (8, 16, 32, 64):
                return f"int{width}_t"
        case Float16Type():
            return "__half"
        case BFloat16Type():
            return "__nv_bfloat16"
        case Float32Type():
            return "float"
        case Float64Type():
            return "double"
        case PeersType():
            return "coco_peers"
        case EventType():
            return "cudaEvent_t"
        case _:
            pass
    raise UnsupportedType(f"type {t} has no CUDA C spelling")


def c_type(t: Attribute) -> str:
    """The C type of a value: a memref is a pointer to its elements, a 1-D
    vector a `coco::vec<T, W>`."""
    if isinstance(t, MemRefType):
        return f"{scalar_type(t.element_type)} *"
    if isinstance(t, VectorType) and t.get_num_dims() == 1:
        return f"coco::vec<{scalar_type(t.element_type)}, {t.get_shape()[0]}>"
    return scalar_type(t)


def unsigned_type(t: Attribute) -> str:
    """The unsigned C type of the same width as the integer type `t`."""
    if isinstance(t, IndexType):
        return "uint64_t"
    if isinstance(t, IntegerType) and t.width.data in (8, 16, 32, 64):
        return f"uint{t.width.data}_t"
    raise UnsupportedType(f"type {t} is not an integer type of 8 to 64 bits")


def is_half(t: Attribute) -> bool:
    """f16 and bf16: stored as 16 bits, computed in float."""
    return isinstance(t, Float16Type | BFloat16Type)


def is_float(t: Attribute) -> bool:
    return isinstance(t, Float16Type | BFloat16Type | Float32Type | Float64Type)


def to_float(t: Attribute) -> str:
    """The function that widens a half value to float."""
    return "__half2float" if isinstance(t, Float16Type) else "__bfloat162float"


def from_float(t: Attribute) -> str:
    """The function that rounds a float to the half type `t`."""
    return "__float2half" if isinstance(t, Float16Type) else "__float2bfloat16"


def element_bytes(t: Attribute) -> int:
    match t:
        case IndexType():
            return 8
        case IntegerType():
            return max(1, t.width.data // 8)
        case Float16Type() | BFloat16Type():
            return 2
        case Float32Type():
            return 4
        case Float64Type():
            return 8
        case _:
            raise UnsupportedType(f"type {t} has no size in memory")


FLOAT_LIBRARY_TYPES: dict[type[Attribute], tuple[str, str]] = {
    Float16Type: ("ncclHalf", "CUDA_R_16F"),
    BFloat16Type: ("ncclBfloat16", "CUDA_R_16BF"),
    Float32Type: ("ncclFloat", "CUDA_R_32F"),
    Float64Type: ("ncclDouble", "CUDA_R_64F"),
}
"""A float type → its NCCL `ncclDataType_t` and cuBLAS `cudaDataType_t`."""

NCCL_INTEGERS = {32: "ncclInt32", 64: "ncclInt64", 1: "ncclUint8", 8: "ncclUint8"}
"""An integer width → its NCCL data type (i1 is stored as a byte)."""


def nccl_type(t: Attribute) -> str:
    if type(t) in FLOAT_LIBRARY_TYPES:
        return FLOAT_LIBRARY_TYPES[type(t)][0]
    if isinstance(t, IntegerType) and t.width.data in NCCL_INTEGERS:
        return NCCL_INTEGERS[t.width.data]
    raise UnsupportedType(f"NCCL has no data type for {t}")


NCCL_OPS = {
    ReductionKind.SUM: "ncclSum",
    ReductionKind.PROD: "ncclProd",
    ReductionKind.MAX: "ncclMax",
    ReductionKind.MIN: "ncclMin",
}


def cublas_type(t: Attribute) -> str:
    if type(t) in FLOAT_LIBRARY_TYPES:
        return FLOAT_LIBRARY_TYPES[type(t)][1]
    raise UnsupportedType(f"cuBLAS has no matrix type for {t}")


def is_shared(t: MemRefType) -> bool:
    """Whether a memref lives in a block's shared memory: MLIR's
    `#gpu.address_space<workgroup>` or NVVM's address space 3."""
    space = t.memory_space
    if isinstance(space, NoneAttr):
        return False
    if isinstance(space, IntegerAttr):
        return space.value.data == 3
    return "workgroup" in str(space)
