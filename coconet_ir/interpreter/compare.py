"""Semantic equivalence of two programs (docs/interpreter.md, "Equivalence").

Both programs run on the same inputs (drawn for `a`, fed to `b` by key: function
name and argument position, as global values, so an argument may change layout),
twice: on the default inputs (positive floats) and on a signed set (floats in
[-1, 1), i32 of both signs), so that rewrites wrong only for negative values are
caught. The signed run is skipped when `a` itself cannot run on it (e.g. an i32
division by zero).

Both programs run *promoted* (`interpret(..., promoted=True)`): f32 values are
held and computed as f64, every float is computed in f64, halves are still
rounded to their type after each op. A valid reassociation (a sum split across
ranks, chunked, reordered) then differs by ~1e-16 relative to the terms summed,
a wrong rewrite by far more than the tight f64 tolerance.
Every output key is compared: global values for replicated/sliced outputs,
per-rank values for local ones, and a replicated/sliced output against every
rank of a local one. Floats are compared as `|b - a| <= atol + rtol * max|a|`
(`max|a|` over the output's finite elements: a sum that cancels to near zero
carries the rounding of terms as large as its neighbours') with the default
tolerance of the type the values are held as (`element_info(t).promoted`: f64
for f32); NaN equals NaN; i32 and i1 must match exactly.

`compare_outputs` compares real-arithmetic results of a reordered computation
(the GPU, its CPU emulation) with a reference, allowing the rounding error of
sums of K terms (`reduction_tolerance`).

Two programs whose signatures differ cannot be compared, and `equivalent()`
raises `NotComparable` (a CocoError) before running either: an argument or a
result that only one of them has, an argument fed in another shape (a layout
may change, `local` <-> global may not), or a floating-point argument that
becomes an integer one. Outputs of the same key that differ in shape or element
type, or a parameter only one of them updates, are Differences: both programs
ran on the same inputs and computed different things.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
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
    tensor_type: TensorType,
    rtol: float | None,
    atol: float | None,
    promoted: bool = True,
) -> tuple[float, float]:
    """The `(rtol, atol)` for an output: the user's, else the default of the
    type its values are held as (f64 for an f32 output of a promoted run)."""
    info = element_info(tensor_type.element_type)
    held = element_info(info.promoted) if promoted else info
    default_rtol, default_atol = held.tolerance
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


def largest_magnitude(values: np.ndarray) -> float:
    """`max |a|` over the finite elements (0 if there are none): the scale
    `rtol` is relative to."""
    finite = np.abs(values[np.isfinite(values)])
    return float(finite.max()) if finite.size else 0.0


def differing(
    key: str,
    reference: np.ndarray,
    actual: np.ndarray,
    rtol: float,
    atol: float,
    extra: np.ndarray | float = 0.0,
    where: Callable[[tuple[int, ...]], str] | None = None,
) -> Difference | None:
    """None if every element has `|b - a| <= atol + rtol * max|a| + extra`
    (`a` the reference, `max|a|` over the output's finite elements, `extra` a
    per-element allowance such as `reduction_tolerance`), NaN equal to NaN
    and equal infinities equal, but never a NaN or an infinity equal to
    anything else; else the difference."""
    x, y = reference.astype(np.float64), actual.astype(np.float64)
    scale = largest_magnitude(x)
    with np.errstate(all="ignore"):
        error = np.abs(y - x)
        same = (x == y) | (np.isnan(x) & np.isnan(y))
        error = np.where(same, 0.0, np.where(np.isnan(error), np.inf, error))
        bad = (error > atol + rtol * scale + extra) | np.isinf(error)
        relative = np.where(error == 0.0, 0.0, error / np.abs(x))
    if not np.any(bad):
        return None
    worst = np.unravel_index(int(np.argmax(np.where(bad, error, -1.0))), error.shape)
    position = tuple(int(i) for i in worst)
    max_abs, max_rel = float(np.max(error)), float(np.max(relative))
    at = where(position) if where is not None else f"index {list(position)}"
    allowance = "" if np.all(np.asarray(extra) == 0) else " + reduction bound"
    return Difference(
        key,
        max_abs,
        max_rel,
        f"{key}: max abs error {max_abs:.6g} (rel {max_rel:.6g}) exceeds "
        f"atol={atol:g} rtol={rtol:g} of max |a| = {scale:.6g}{allowance}; "
        f"{int(np.sum(bad))} of {bad.size} elements differ, e.g. at {at}: "
        f"a={x[worst]:.9g} b={y[worst]:.9g}",
    )


def compare_output(
    a: Output,
    b: Output,
    world: int,
    rtol: float | None,
    atol: float | None,
    promoted: bool = True,
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
    rtol_used, atol_used = tolerances(a.type, rtol, atol, promoted)
    return differing(
        key,
        va,
        vb,
        rtol_used,
        atol_used,
        where=lambda position: where_text(position, a.type, b.type),
    )


# ============================================================================
# Real arithmetic in another order (the GPU, its CPU emulation)
# ============================================================================


PROBABLE_FACTOR = 8.0
"""The safety factor of the probable reduction bound `8 sqrt(K) u magnitude`:
measured sequential f32 sums of K = 4096 random terms reach 0.76 of
`sqrt(K) u magnitude` (docs/interpreter.md, "Real arithmetic in another
order")."""


def reduction_tolerance(
    element_type: Attribute | str,
    reduction_length: int,
    magnitude: np.ndarray | float,
    *,
    worst_case: bool = True,
) -> np.ndarray | float:
    """What summing `reduction_length` terms whose absolute values add up to
    `magnitude` (per output element) in real `element_type` arithmetic may
    differ from the same sum in any other order.

    Worst case (the default): `2 gamma_K magnitude`, `gamma_K = K u / (1 - K
    u)` (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed.,
    sections 3.1 and 4.2), `u` the unit roundoff of the dtype the type
    accumulates in (f32 for halves): it holds for every order (sequential,
    pairwise, chunked, split across ranks, the products of a dot product
    included) with both sides rounded, so a correct reordering never exceeds
    it; infinite when `K u >= 1`. `worst_case=False`: the probable bound
    `PROBABLE_FACTOR sqrt(K) u magnitude`, which assumes rounding errors of
    random sign (random data), `sqrt(K)` times tighter at the price of
    rigour."""
    u = element_info(element_type).unit_roundoff
    length = max(int(reduction_length), 0)
    if u == 0 or length == 0:
        return 0.0
    scale = np.asarray(magnitude, dtype=np.float64)
    if not worst_case:
        return PROBABLE_FACTOR * float(np.sqrt(length)) * u * scale
    k_u = length * u
    gamma = k_u / (1 - k_u) if k_u < 1 else float("inf")
    return 2 * gamma * scale


def compare_outputs(
    reference: np.ndarray,
    actual: np.ndarray,
    element_type: Attribute | str,
    *,
    reduction_length: int = 1,
    magnitude: np.ndarray | float | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    worst_case: bool = True,
    key: str = "output",
) -> Difference | None:
    """Compare `actual`, an output computed in real `element_type` arithmetic
    in some order (the GPU, the CPU emulation of the generated CUDA), with
    `reference` (best the promoted interpreter's output, `interpret(...,
    promoted=True)`; another real run works too). None if every element has

        |actual - reference| <= atol + rtol * max|reference|
                                + reduction_tolerance(type, K, magnitude)

    with the type's own tolerance (f32: 1e-5, 1e-6) unless given.
    `reduction_length` is the longest chain of sums behind an element (a
    matmul's K, the elements a reduce or norm adds, times the ranks an
    all_reduce adds); `magnitude` the sum of the absolute values of the terms
    of each element (`|A| @ |B|` for `A @ B`, see `matmul_magnitude`), or, when
    not given, `max|reference|` as an estimate (exact for non-negative terms,
    an underestimate under cancellation: docs/interpreter.md). `worst_case`
    chooses the reduction bound (see `reduction_tolerance`)."""
    x = np.asarray(reference, dtype=np.float64)
    y = np.asarray(actual, dtype=np.float64)
    if x.shape != y.shape:
        return mismatch(
            key, f"shape {list(x.shape)} of the reference but {list(y.shape)}"
        )
    info = element_info(element_type)
    default_rtol, default_atol = info.tolerance
    scale = largest_magnitude(x) if magnitude is None else magnitude
    extra = reduction_tolerance(
        element_type, reduction_length, scale, worst_case=worst_case
    )
    return differing(
        key,
        x,
        y,
        default_rtol if rtol is None else rtol,
        default_atol if atol is None else atol,
        extra,
    )


def matmul_magnitude(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`|a| @ |b|` in f64: for every element of `a @ b`, the sum of the
    absolute values of the K products it adds (the `magnitude` of
    `compare_outputs`)."""
    return np.abs(np.asarray(a, dtype=np.float64)) @ np.abs(
        np.asarray(b, dtype=np.float64)
    )


def where_text(index: tuple[int, ...], a: TensorType, b: TensorType) -> str:
    position = list(index)
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
    promoted: bool = True,
) -> Comparison:
    """Whether `a` and `b` compute the same outputs on the same inputs, both
    the default ones and the signed ones (see the module docstring), run
    promoted (`promoted=False`: in the element types, as `interpret` runs).

    Raises NotComparable (a CocoError) when their signatures differ."""
    b = named_like(a, b, entry)
    check_comparable(select_functions(a, entry), select_functions(b, entry), world)
    tolerance = (rtol, atol, promoted)
    comparison = compare_on(a, b, world, seed, tolerance, entry, None)
    if not comparison.ok:
        return comparison
    signed = draw_inputs(a, world, seed, entry, signed=True)
    try:
        on_signed = compare_on(a, b, world, seed, tolerance, entry, signed)
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
    tolerance: tuple[float | None, float | None, bool],
    entry: str | None,
    inputs: dict[str, np.ndarray] | None,
) -> Comparison:
    """Run both on `inputs` (None: the default draw), promoted unless
    `tolerance` (rtol, atol, promoted) says not, and compare the outputs."""
    rtol, atol, promoted = tolerance
    if inputs is None:
        run_a = interpret(a, world, seed=seed, entry=entry, promoted=promoted)
    else:
        try:
            run_a = interpret(
                a, world, inputs=inputs, seed=seed, entry=entry, promoted=promoted
            )
        except CocoError as err:
            raise SkippedInputs(str(err)) from None
    run_b = interpret(
        b, world, inputs=run_a.inputs, seed=seed, entry=entry, promoted=promoted
    )
    keys = [*run_a.outputs, *(k for k in run_b.outputs if k not in run_a.outputs)]
    differences: list[Difference] = []
    for key in keys:
        difference = compare_key(
            key, run_a.outputs, run_b.outputs, world, rtol, atol, promoted
        )
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
    promoted: bool,
) -> Difference | None:
    # Results are in both (check_comparable); only updated parameters can differ.
    if key not in b_outputs:
        return mismatch(key, "a updates this parameter (coco.update) but b does not")
    if key not in a_outputs:
        return mismatch(key, "b updates this parameter (coco.update) but a does not")
    return compare_output(a_outputs[key], b_outputs[key], world, rtol, atol, promoted)
