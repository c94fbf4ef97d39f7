"""Semantic equivalence of two programs (docs/interpreter.md, "Equivalence").

Both programs run on the same inputs (drawn for `a`, fed to `b` by key: function
name and argument position, as global values, so an argument may change layout),
twice: on the default inputs (positive floats) and on a signed set (floats in
[-1, 1), i32 of both signs), so that rewrites wrong only for negative values are
caught. The signed run is skipped when `a` itself cannot run on it (e.g. an i32
division by zero).
Every output key is compared: global values for replicated/sliced outputs,
per-rank values for local ones, and a replicated/sliced output against every
rank of a local one. Floats are compared as `|b - a| <= atol + rtol * |a|` with
the element type's default tolerance (`coco.element_info(t).tolerance`); NaN
equals NaN; i32 and i1 must match exactly.

Two programs whose signatures differ cannot be compared, and `equivalent()`
raises `NotComparable` (a CocoError) before running either: an argument or a
result that only one of them has, an argument fed in another shape (a layout
may change, `local` <-> global may not), or a floating-point argument that
becomes an integer one. Outputs of the same key that differ in shape or element
type, or a parameter only one of them updates, are Differences: both programs
ran on the same inputs and computed different things.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute

from coconet_ir.diagnostics import CocoError
from coconet_ir.dialects.coco import TensorType, element_info, is_float
from coconet_ir.interpreter.inputs import (
    draw_inputs,
    fed_shape,
    function_arguments,
    result_key,
)
from coconet_ir.interpreter.runner import Output, interpret
from coconet_ir.interpreter.stages import select_functions


@dataclass(frozen=True)
class Difference:
    """Why one output (or input) keeps two programs from being equivalent."""

    key: str
    max_abs_error: float
    max_rel_error: float
    message: str


@dataclass
class Comparison:
    """The verdict of `equivalent()`; true when the programs are equivalent."""

    ok: bool
    first_difference: Difference | None
    compared: list[str]
    """Every output key examined (those of `a`, then those only in `b`)."""
    differences: list[Difference] = field(default_factory=list[Difference])

    def __bool__(self) -> bool:
        return self.ok

    def described_as(self, context: str) -> Comparison:
        """The same verdict with `context` in front of every message."""
        differences = [
            Difference(
                d.key, d.max_abs_error, d.max_rel_error, f"{context}: {d.message}"
            )
            for d in self.differences
        ]
        first = differences[0] if differences else None
        return Comparison(self.ok, first, self.compared, differences)


def tolerances(
    tensor_type: TensorType, rtol: float | None, atol: float | None
) -> tuple[float, float]:
    """The `(rtol, atol)` for an output: the user's, else the type's default."""
    default_rtol, default_atol = element_info(tensor_type.element_type).tolerance
    return (
        default_rtol if rtol is None else rtol,
        default_atol if atol is None else atol,
    )


def mismatch(key: str, message: str) -> Difference:
    return Difference(key, float("inf"), float("inf"), f"{key}: {message}")


def per_rank_views(a: Output, b: Output, world: int) -> tuple[np.ndarray, np.ndarray]:
    """The two values in comparable form: if one is local, the other's global
    value is repeated for every rank."""
    va, vb = a.value, b.value
    if a.type.layout.is_local and not b.type.layout.is_local:
        vb = np.broadcast_to(vb, (world, *vb.shape))
    elif b.type.layout.is_local and not a.type.layout.is_local:
        va = np.broadcast_to(va, (world, *va.shape))
    return va, vb


def compare_output(
    a: Output, b: Output, world: int, rtol: float | None, atol: float | None
) -> Difference | None:
    """None if the two outputs agree within tolerance, else the difference."""
    key = a.key
    if a.type.element_type != b.type.element_type:
        return mismatch(
            key,
            f"element type {a.type.element_type} in a but {b.type.element_type} in b",
        )
    if a.type.dims != b.type.dims:
        return mismatch(
            key, f"shape {list(a.type.dims)} in a but {list(b.type.dims)} in b"
        )
    va, vb = per_rank_views(a, b, world)
    if va.shape != vb.shape:
        return mismatch(
            key, f"value shape {list(va.shape)} in a but {list(vb.shape)} in b"
        )
    rtol_used, atol_used = tolerances(a.type, rtol, atol)
    x, y = va.astype(np.float64), vb.astype(np.float64)
    with np.errstate(all="ignore"):
        error = np.abs(y - x)
        same = (x == y) | (np.isnan(x) & np.isnan(y))
        error = np.where(same, 0.0, np.where(np.isnan(error), np.inf, error))
        scale = np.where(np.isfinite(x), np.abs(x), 0.0)
        bad = error > atol_used + rtol_used * scale
        relative = np.where(error == 0.0, 0.0, error / np.abs(x))
    if not np.any(bad):
        return None
    worst = np.unravel_index(int(np.argmax(np.where(bad, error, -1.0))), error.shape)
    max_abs, max_rel = float(np.max(error)), float(np.max(relative))
    where = where_text(worst, a.type, b.type)
    return Difference(
        key,
        max_abs,
        max_rel,
        f"{key}: max abs error {max_abs:.6g} (rel {max_rel:.6g}) exceeds "
        f"atol={atol_used:g} rtol={rtol_used:g}; {int(np.sum(bad))} of {bad.size} "
        f"elements differ, e.g. at {where}: a={x[worst]:.9g} b={y[worst]:.9g}",
    )


def where_text(index: tuple[np.intp, ...], a: TensorType, b: TensorType) -> str:
    position = [int(i) for i in index]
    if a.layout.is_local or b.layout.is_local:
        return f"rank {position[0]} index {position[1:]}"
    return f"index {position}"


class NotComparable(CocoError):
    """The two programs' signatures differ, so no input set runs both and
    equivalence cannot be decided. `reasons` says why, one per argument or
    result, naming its key."""

    def __init__(self, reasons: list[str]):
        self.reasons = reasons
        super().__init__(
            f"cannot compare a with b, their signatures differ: {'; '.join(reasons)}"
        )


def check_comparable(
    a_functions: list[FuncOp], b_functions: list[FuncOp], world: int
) -> None:
    """Raise NotComparable unless `b` takes exactly the inputs `a` is fed (by
    key, in the shape fed) and returns results under the same keys."""
    reasons = [
        *argument_mismatches(
            function_arguments(a_functions), function_arguments(b_functions), world
        ),
        *only_in_one(
            "result", function_results(a_functions), function_results(b_functions)
        ),
    ]
    if reasons:
        raise NotComparable(reasons)


def function_results(functions: list[FuncOp]) -> dict[str, Attribute]:
    """Every returned value of the run, by key (`FUNC.resultI`)."""
    return {
        result_key(func, position): result_type
        for func in functions
        for position, result_type in enumerate(func.function_type.outputs)
    }


def only_in_one(
    what: str, a_keys: Mapping[str, Attribute], b_keys: Mapping[str, Attribute]
) -> list[str]:
    """`argument f.arg2 (TYPE) of b is not in a`, for every key of one only."""
    return [
        *(
            f"{what} {k} ({t}) of a is not in b"
            for k, t in a_keys.items()
            if k not in b_keys
        ),
        *(
            f"{what} {k} ({t}) of b is not in a"
            for k, t in b_keys.items()
            if k not in a_keys
        ),
    ]


def argument_mismatches(
    a_arguments: dict[str, TensorType], b_arguments: dict[str, TensorType], world: int
) -> list[str]:
    """Why the inputs drawn for `a` cannot be fed to `b`, argument by argument."""
    reasons = only_in_one("argument", a_arguments, b_arguments)
    for key, a_type in a_arguments.items():
        b_type = b_arguments.get(key)
        if b_type is None:
            continue
        a_shape, b_shape = fed_shape(a_type, world), fed_shape(b_type, world)
        if a_shape != b_shape:
            reasons.append(
                f"argument {key} is {a_type} in a but {b_type} in b (fed as "
                f"{list(a_shape)} and {list(b_shape)} on {world} ranks)"
            )
        elif is_float(a_type.element_type) and not is_float(b_type.element_type):
            reasons.append(
                f"argument {key} is {a_type} in a but {b_type} in b (floating-point "
                f"inputs cannot be fed to {b_type.element_type})"
            )
    return reasons


def equivalent(
    a: ModuleOp,
    b: ModuleOp,
    world: int,
    *,
    seed: int = 0,
    rtol: float | None = None,
    atol: float | None = None,
    entry: str | None = None,
) -> Comparison:
    """Whether `a` and `b` compute the same outputs on the same inputs, both
    the default ones and the signed ones (see the module docstring).

    Raises NotComparable (a CocoError) when their signatures differ."""
    b = named_like(a, b, entry)
    check_comparable(select_functions(a, entry), select_functions(b, entry), world)
    comparison = compare_on(a, b, world, seed, rtol, atol, entry, None)
    if not comparison.ok:
        return comparison
    signed = draw_inputs(a, world, seed, entry, signed=True)
    try:
        on_signed = compare_on(a, b, world, seed, rtol, atol, entry, signed)
    except SkippedInputs:
        return comparison
    if on_signed.ok:
        return comparison
    return on_signed.described_as("with signed inputs")


def named_like(a: ModuleOp, b: ModuleOp, entry: str | None) -> ModuleOp:
    """`b`, with its function renamed to `a`'s when each runs one function:
    single programs are matched by position, pipelines by stage name."""
    if entry is not None:
        return b
    try:
        functions_a, functions_b = select_functions(a, None), select_functions(b, None)
    except CocoError:
        return b  # the comparison itself reports it
    if len(functions_a) != 1 or len(functions_b) != 1:
        return b
    name = functions_a[0].sym_name
    if functions_b[0].sym_name == name:
        return b
    renamed = b.clone()
    for op in renamed.ops:
        if isinstance(op, FuncOp) and op.sym_name == functions_b[0].sym_name:
            op.sym_name = name
    return renamed


class SkippedInputs(Exception):
    """`a` cannot run on an input set, so it tells nothing about `b`."""


def compare_on(
    a: ModuleOp,
    b: ModuleOp,
    world: int,
    seed: int,
    rtol: float | None,
    atol: float | None,
    entry: str | None,
    inputs: dict[str, np.ndarray] | None,
) -> Comparison:
    """Run both on `inputs` (None: the default draw) and compare the outputs."""
    if inputs is None:
        run_a = interpret(a, world, seed=seed, entry=entry)
    else:
        try:
            run_a = interpret(a, world, inputs=inputs, seed=seed, entry=entry)
        except CocoError as err:
            raise SkippedInputs(str(err)) from None
    run_b = interpret(b, world, inputs=run_a.inputs, seed=seed, entry=entry)
    keys = [*run_a.outputs, *(k for k in run_b.outputs if k not in run_a.outputs)]
    differences: list[Difference] = []
    for key in keys:
        difference = compare_key(key, run_a.outputs, run_b.outputs, world, rtol, atol)
        if difference is not None:
            differences.append(difference)
    first = differences[0] if differences else None
    return Comparison(not differences, first, keys, differences)


def compare_key(
    key: str,
    a_outputs: dict[str, Output],
    b_outputs: dict[str, Output],
    world: int,
    rtol: float | None,
    atol: float | None,
) -> Difference | None:
    # Results are in both (check_comparable); only updated parameters can differ.
    if key not in b_outputs:
        return mismatch(key, "a updates this parameter (coco.update) but b does not")
    if key not in a_outputs:
        return mismatch(key, "b updates this parameter (coco.update) but a does not")
    return compare_output(a_outputs[key], b_outputs[key], world, rtol, atol)
