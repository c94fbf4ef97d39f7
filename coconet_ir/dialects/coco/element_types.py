"""The element types of `!coco.tensor`, and everything the compiler knows about
each: the one table the dialect, the interpreter, the cost analysis and the
lowering read (docs/dialect.md, "Element types").

| name | kind | stored as | computed in | promoted to | bytes | CUDA C |
| --- | --- | --- | --- | --- | --- | --- |
| f16 | half | float16 | float32 | f16 | 2 | `__half` |
| bf16 | half | bfloat16 (ml_dtypes) | float32 | bf16 | 2 | `__nv_bfloat16` |
| f32 | float | float32 | float32 | f64 | 4 | `float` |
| f64 | float | float64 | float64 | f64 | 8 | `double` |
| i32 | int | int32 | int32 | i32 | 4 | `int32_t` |
| i1 | bool | bool | bool | i1 | 1 | `bool` |

Half-precision arithmetic runs in f32 and is rounded back after each op, as the
generated CUDA does. `tolerance` is the `(rtol, atol)` an equivalence check uses
by default for values of the type.

An equivalence check runs both programs *promoted* (docs/interpreter.md,
"Equivalence"): an f32 value is held and computed as an f64 (`promoted` names
the type a value is held as), and every float is computed in f64; halves are
still rounded to their type after each op, which is their meaning. A promoted
value is compared with the tolerance of the type it is held as.

numpy (and ml_dtypes, for bf16) is imported only when a numpy dtype is asked
for, so that loading the dialect stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import auto
from functools import cache
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import bf16, f16, f32, f64, i1, i32
from xdsl.ir import Attribute
from xdsl.utils.str_enum import StrEnum

if TYPE_CHECKING:
    import numpy as np


class ElementKind(StrEnum):
    FLOAT = auto()
    """A float computed in its own precision."""
    HALF = auto()
    """A 16-bit float, computed in f32 and rounded after each op."""
    INT = auto()
    BOOL = auto()


@dataclass(frozen=True)
class ElementType:
    """One element type of `!coco.tensor`."""

    name: str
    """The MLIR spelling, as in `!coco.tensor<4xf32, local>`."""
    ir_type: Attribute
    kind: ElementKind
    numpy_name: str
    """The numpy dtype that holds a value, by name (`storage` is the dtype)."""
    bytes: int
    """The size of a value in memory."""
    cuda: str
    """The CUDA C type of a value."""
    tolerance: tuple[float, float]
    """The default `(rtol, atol)` of an equivalence check of values held in
    this type."""
    promoted: str
    """The type a value is held as in a promoted (comparison) run, by name:
    f64 for f32, the type itself otherwise."""

    @property
    def is_float(self) -> bool:
        return self.kind in (ElementKind.FLOAT, ElementKind.HALF)

    @property
    def is_half(self) -> bool:
        return self.kind is ElementKind.HALF

    @property
    def storage(self) -> np.dtype:
        """The numpy dtype that holds a value."""
        return numpy_dtype(self.numpy_name)

    @property
    def compute(self) -> np.dtype:
        """The numpy dtype arithmetic runs in."""
        return numpy_dtype("float32") if self.is_half else self.storage

    @property
    def compute_type(self) -> Attribute:
        """The IR type arithmetic runs in: f32 for halves, else the type."""
        return f32 if self.is_half else self.ir_type

    @property
    def promoted_storage(self) -> np.dtype:
        """The numpy dtype that holds a value in a promoted run."""
        return element_info(self.promoted).storage

    @property
    def promoted_compute(self) -> np.dtype:
        """The numpy dtype arithmetic runs in in a promoted run: f64 for every
        float (a half is still rounded to its type after each op)."""
        return numpy_dtype("float64") if self.is_float else self.storage

    @property
    def unit_roundoff(self) -> float:
        """`u`, half the machine epsilon of the dtype arithmetic runs in (f32's
        for halves, which accumulate in f32): the relative error of one
        rounded operation."""
        import numpy as np

        if not self.is_float:
            return 0.0
        return float(np.finfo(self.compute).eps) / 2

    def from_bits(self, bits: int) -> float:
        """The float whose bit pattern is `bits` (MLIR's meaning of a
        hexadecimal float literal)."""
        import numpy as np

        pattern = np.array([bits], dtype=f"<u{self.bytes}")
        return float(pattern.view(self.storage)[0])

    def bits(self, value: float) -> str:
        """`0x...`: the bit pattern of `value`, as MLIR prints non-finite
        floats."""
        import numpy as np

        pattern = np.array([value]).astype(self.storage).view(f"<u{self.bytes}")
        return f"0x{int(pattern[0]):0{2 * self.bytes}X}"


@cache
def numpy_dtype(name: str) -> np.dtype:
    """A numpy dtype by name (`bfloat16` from ml_dtypes), imported on first use."""
    import numpy as np

    if name == "bfloat16":
        from ml_dtypes import bfloat16

        return np.dtype(bfloat16)
    return np.dtype(name)


_HALF, _FLOAT, _INT, _BOOL = (
    ElementKind.HALF,
    ElementKind.FLOAT,
    ElementKind.INT,
    ElementKind.BOOL,
)
ELEMENT_TABLE: tuple[ElementType, ...] = (
    ElementType("f16", f16, _HALF, "float16", 2, "__half", (1e-2, 1e-3), "f16"),
    ElementType(
        "bf16", bf16, _HALF, "bfloat16", 2, "__nv_bfloat16", (2e-2, 1e-2), "bf16"
    ),
    ElementType("f32", f32, _FLOAT, "float32", 4, "float", (1e-5, 1e-6), "f64"),
    ElementType("f64", f64, _FLOAT, "float64", 8, "double", (1e-9, 1e-12), "f64"),
    ElementType("i32", i32, _INT, "int32", 4, "int32_t", (0.0, 0.0), "i32"),
    ElementType("i1", i1, _BOOL, "bool", 1, "bool", (0.0, 0.0), "i1"),
)

ELEMENT_TYPES: dict[str, Attribute] = {e.name: e.ir_type for e in ELEMENT_TABLE}
"""The IR types a `!coco.tensor` may hold, by their MLIR spelling."""

_BY_NAME = {e.name: e for e in ELEMENT_TABLE}
_BY_TYPE = {e.ir_type: e for e in ELEMENT_TABLE}


def element_info(element_type: Attribute | str) -> ElementType:
    """The table row of an element type, given as its IR type or its name."""
    table = _BY_NAME if isinstance(element_type, str) else _BY_TYPE
    info = table.get(element_type)  # pyright: ignore[reportArgumentType]
    if info is None:
        raise ValueError(
            f"not a coco element type: {element_type} (expected one of "
            f"{', '.join(_BY_NAME)})"
        )
    return info


def element_type_name(element_type: Attribute) -> str:
    return element_info(element_type).name


def is_float(element_type: Attribute) -> bool:
    """Whether `element_type` is one of the float element types."""
    info = _BY_TYPE.get(element_type)
    return info is not None and info.is_float


def as_element_type(element_type: Attribute | str) -> Attribute:
    """An element type given as an IR type or by its spelling (`"f32"`)."""
    if isinstance(element_type, str):
        return element_info(element_type).ir_type
    return element_type
