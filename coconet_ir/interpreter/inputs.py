"""Input generation and validation (docs/interpreter.md, "Inputs").

Every argument of every function a run executes is drawn once as a GLOBAL value
from a numpy `Generator` seeded by `(seed, crc32(function name), argument
position)`, then distributed by its layout; a `local` argument is drawn per rank
(shape `(N, *shape)`, row `r` for rank `r`) from the same generator. Because the
value depends only on the function name, the position, the shape and the element
type, a transformed program whose argument changed layout gets the same global
input. Floats are uniform in [0, 1) (drawn in f64, then cast): positive, so
`sqrt`/`log` of an input are defined. i32 inputs are integers in [1, 10] (never
zero, so division is defined), i1 inputs random booleans; an i32 argument
used as the indices of a `coco.embedding` (directly or through a region's
block argument) is drawn in `[0, R)`, `R` the fewest rows of the tables it
indexes, in both input sets.

`signed=True` draws from the same generators a second input set that also has
negative values: floats uniform in [-1, 1), i32 in [-10, -1] and [1, 10].
`equivalent()` compares on both, so that a rewrite that is wrong only for
negative values (a dropped `relu` or `abs`, a wrong `cmp`) is caught too.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.ir import SSAValue

from coconet_ir.diagnostics import CocoError
from coconet_ir.dialects.coco import (
    ElementKind,
    EmbeddingOp,
    RegionOp,
    TensorType,
    as_tensor_type,
    element_info,
    is_float,
)
from coconet_ir.interpreter.stages import select_functions

I32_INPUT_RANGE = (1, 10)
"""Inclusive range of drawn i32 inputs."""


def argument_key(func: FuncOp, position: int) -> str:
    """`FUNC.argI`: the key of an input and of an updated parameter."""
    return f"{func.sym_name.data}.arg{position}"


def result_key(func: FuncOp, position: int) -> str:
    """`FUNC.resultI`: the key of the I-th `func.return` operand."""
    return f"{func.sym_name.data}.result{position}"


def fed_shape(tensor_type: TensorType, world: int) -> tuple[int, ...]:
    """The shape of an input as fed: global, or `(N, *shape)` for local."""
    if tensor_type.layout.is_local:
        return (world, *tensor_type.dims)
    return tensor_type.dims


def function_arguments(functions: list[FuncOp]) -> dict[str, TensorType]:
    """Every argument of the run, by key, in module then position order."""
    arguments: dict[str, TensorType] = {}
    for func in functions:
        for position, arg in enumerate(func.body.block.args):
            assert isinstance(arg.type, TensorType)
            arguments[argument_key(func, position)] = arg.type
    return arguments


def generator_for(seed: int, func_name: str, position: int) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(func_name.encode()), position])


def index_bound(value: SSAValue) -> int | None:
    """The fewest rows of the tables `value` indexes as the indices of a
    `coco.embedding` (through regions' block arguments), or None."""
    bounds: list[int] = []
    for use in value.uses:
        user = use.operation
        if isinstance(user, EmbeddingOp) and use.index == 1:
            bounds.append(as_tensor_type(user.tables).dims[1])
        elif isinstance(user, RegionOp):
            inner = index_bound(user.block.args[use.index])
            if inner is not None:
                bounds.append(inner)
    return min(bounds, default=None)


def draw_value(
    rng: np.random.Generator,
    tensor_type: TensorType,
    world: int,
    signed: bool = False,
    bound: int | None = None,
) -> np.ndarray:
    """One input, in the shape it is fed (see `fed_shape`); `bound`: an
    embedding's indices, drawn in `[0, bound)`."""
    shape = fed_shape(tensor_type, world)
    info = element_info(tensor_type.element_type)
    dtype = info.storage
    if bound is not None:
        return rng.integers(0, bound, size=shape).astype(dtype)
    if info.kind is ElementKind.BOOL:
        return rng.integers(0, 2, size=shape).astype(dtype)
    if info.kind is ElementKind.INT:
        low, high = I32_INPUT_RANGE
        magnitude = rng.integers(low, high + 1, size=shape)
        if signed:
            magnitude = magnitude * rng.choice([-1, 1], size=shape)
        return magnitude.astype(dtype)
    unit = np.asarray(rng.random(size=shape))
    return (2 * unit - 1 if signed else unit).astype(dtype)


def draw_function_inputs(
    functions: list[FuncOp], world: int, seed: int, signed: bool = False
) -> dict[str, np.ndarray]:
    check_seed(seed)
    drawn: dict[str, np.ndarray] = {}
    for func in functions:
        for position, arg in enumerate(func.body.block.args):
            assert isinstance(arg.type, TensorType)
            rng = generator_for(seed, func.sym_name.data, position)
            drawn[argument_key(func, position)] = draw_value(
                rng, arg.type, world, signed, index_bound(arg)
            )
    return drawn


def draw_inputs(
    module: ModuleOp,
    world: int,
    seed: int = 0,
    entry: str | None = None,
    *,
    signed: bool = False,
) -> dict[str, np.ndarray]:
    """The inputs `interpret(module, world, seed=seed, entry=entry)` draws, or
    with `signed=True` the second set that `equivalent()` also compares on."""
    check_world(world)
    return draw_function_inputs(select_functions(module, entry), world, seed, signed)


def check_world(world: int) -> None:
    if not isinstance(world, int | np.integer) or world < 1:
        raise CocoError(f"the world size must be a positive integer, got {world!r}")


def check_seed(seed: int) -> None:
    if not isinstance(seed, int | np.integer) or seed < 0:
        raise CocoError(f"the input seed must be a non-negative integer, got {seed!r}")


def prepare_inputs(
    functions: list[FuncOp],
    world: int,
    seed: int,
    given: Mapping[str, np.ndarray] | None,
) -> dict[str, np.ndarray]:
    """Drawn inputs overridden by the user's, every one checked and cast to its
    element type."""
    arguments = function_arguments(functions)
    given = dict(given or {})
    unknown = [key for key in given if key not in arguments]
    if unknown:
        raise CocoError(
            f"unknown input {', '.join(repr(k) for k in unknown)}; the arguments "
            f"are {', '.join(arguments) or '(none)'}"
        )
    fed = draw_function_inputs(functions, world, seed)
    for key, value in given.items():
        fed[key] = checked_input(key, value, arguments[key], world)
    return fed


def is_float_dtype(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype == element_info("bf16").storage


def is_numeric_dtype(dtype: np.dtype) -> bool:
    return dtype.kind in "biu" or is_float_dtype(dtype)


def checked_input(
    key: str, value: object, tensor_type: TensorType, world: int
) -> np.ndarray:
    """A user input converted to the element type; a clear error if its shape
    or kind does not fit."""
    array = np.asarray(value)
    expected = fed_shape(tensor_type, world)
    if array.shape != expected:
        what = (
            "per-rank values (N, *shape)" if tensor_type.layout.is_local else "global"
        )
        raise CocoError(
            f"input {key!r} of type {tensor_type} must have the {what} shape "
            f"{list(expected)}, got {list(array.shape)}"
        )
    if not is_numeric_dtype(array.dtype):
        raise CocoError(f"input {key!r} must be numeric, got dtype {array.dtype}")
    if is_float_dtype(array.dtype) and not is_float(tensor_type.element_type):
        raise CocoError(
            f"input {key!r} has floating-point values but the argument is "
            f"{tensor_type.element_type}"
        )
    return array.astype(element_info(tensor_type.element_type).storage)
