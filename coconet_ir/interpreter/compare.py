"""Semantic equivalence of two programs (COCO_DIALECT.md section 8): `equivalent()`.

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
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp

from coconet_ir.diagnostics import CocoError
from coconet_ir.dialects.coco import TensorType, element_info, is_float
from coconet_ir.interpreter.inputs import (
    draw_inputs,
    fed_shape,
    function_arguments,
    is_float_dtype,
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


def input_difference(
    key: str, a_input: np.ndarray, b_type: TensorType, world: int
) -> Difference | None:
    """A reason `a`'s input cannot be fed to `b`'s argument, if any."""
    expected = fed_shape(b_type, world)
    if a_input.shape != expected:
        return mismatch(
            key,
            f"input shape {list(a_input.shape)} in a but {b_type} "
            f"(fed as {list(expected)}) in b",
        )
    if is_float_dtype(a_input.dtype) and not is_float(b_type.element_type):
        return mismatch(
            key, f"input is {a_input.dtype} in a but {b_type.element_type} in b"
        )
    return None


def inputs_for_b(
    b: ModuleOp, world: int, entry: str | None, a_inputs: dict[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], list[Difference]]:
    """The inputs of `a` that `b` takes (by key), and any that do not fit."""
    arguments = function_arguments(select_functions(b, entry))
    fed: dict[str, np.ndarray] = {}
    problems: list[Difference] = []
    for key, b_type in arguments.items():
        if key not in a_inputs:
            continue
        problem = input_difference(key, a_inputs[key], b_type, world)
        if problem is None:
            fed[key] = a_inputs[key]
        else:
            problems.append(problem)
    return fed, problems


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
    the default ones and the signed ones (see the module docstring)."""
    b = named_like(a, b, entry)
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
    fed_b, problems = inputs_for_b(b, world, entry, run_a.inputs)
    if problems:
        return Comparison(False, problems[0], [], problems)
    run_b = interpret(b, world, inputs=fed_b, seed=seed, entry=entry)
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
    if key not in b_outputs:
        return mismatch(key, "output of a is missing from b")
    if key not in a_outputs:
        return mismatch(key, "output of b is missing from a")
    return compare_output(a_outputs[key], b_outputs[key], world, rtol, atol)
