"""`equivalent()`: equal programs agree, wrong rewrites are caught with a
Difference naming the output and the error, also those wrong only for negative
values (caught by the signed-input run), and programs whose signatures differ
raise NotComparable naming the argument or result."""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import T

from coconet_ir.interpreter import (
    Comparison,
    Difference,
    NotComparable,
    equivalent,
    interpret,
)
from coconet_ir.ir import parse

WORLDS = [2, 4, 8]


LOC, REP = T("8x16xf32", "local"), T("8x16xf32")
UPDATE = f"""
func.func @f(%a: {REP}, %b: {REP}) {{
  %r = coco.add %a, %b : ({REP}, {REP}) -> {REP}
  coco.update %a, %r : {REP}
  func.return
}}"""
S0, S1 = T("8x16xf32", "sliced<0>"), T("8x16xf32", "sliced<1>")

ALL_REDUCE = f"""
func.func @f(%g: {LOC}) -> {REP} {{
  %r = coco.all_reduce %g reduction = sum : {LOC} -> {REP}
  func.return %r : {REP}
}}"""


def split(dim: int) -> str:
    """all_reduce written as reduce_scatter over `dim` then all_gather."""
    sliced = T("8x16xf32", f"sliced<{dim}>")
    return f"""
func.func @f(%g: {LOC}) -> {REP} {{
  %s = coco.reduce_scatter %g reduction = sum dim = {dim} : {LOC} -> {sliced}
  %r = coco.all_gather %s : {sliced} -> {REP}
  func.return %r : {REP}
}}"""


def binary(op: str, a: str = REP, b: str = REP, result: str = REP) -> str:
    return f"""
func.func @f(%a: {a}, %b: {b}) -> {result} {{
  %r = coco.{op} %a, %b : ({a}, {b}) -> {result}
  func.return %r : {result}
}}"""


@pytest.mark.parametrize("world", WORLDS)
def test_a_program_is_equivalent_to_itself(world):
    comparison = equivalent(parse(ALL_REDUCE), parse(ALL_REDUCE), world)
    assert isinstance(comparison, Comparison)
    assert comparison.ok and bool(comparison)
    assert comparison.first_difference is None
    assert comparison.compared == ["f.result0"]


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("dim", [0, 1])
def test_split_all_reduce_is_equivalent(dim, world):
    assert equivalent(parse(ALL_REDUCE), parse(split(dim)), world)


@pytest.mark.parametrize("world", WORLDS)
def test_sub_instead_of_add_is_not_equivalent(world):
    comparison = equivalent(parse(binary("add")), parse(binary("sub")), world)
    assert not comparison
    difference = comparison.first_difference
    assert isinstance(difference, Difference)
    assert difference.key == "f.result0"
    assert difference.max_abs_error > 0.1
    assert difference.message.startswith(
        f"f.result0: max abs error {difference.max_abs_error:.6g} (rel "
    )
    assert "exceeds atol=1e-12 rtol=1e-09 of max |a| = " in difference.message


@pytest.mark.parametrize("world", WORLDS)
def test_split_with_the_wrong_reduction_is_caught(world):
    wrong = split(1).replace("reduction = sum", "reduction = max")
    comparison = equivalent(parse(ALL_REDUCE), parse(wrong), world)
    assert not comparison
    assert comparison.first_difference.key == "f.result0"


def sliced_norm(with_all_reduce: bool) -> str:
    """The norm of a replicated vector computed on slices; without the
    cross-rank all_reduce each rank only has its own block's norm."""
    v, s, scalar = T("64xf32"), T("64xf32", "sliced<0>"), T("f32")
    local = T("f32", "local")
    total = (
        f"%t = coco.all_reduce %p reduction = sum : {local} -> {scalar}\n"
        f"  %n = coco.sqrt %t : ({scalar}) -> {scalar}\n"
        f"  func.return %n : {scalar}"
        if with_all_reduce
        else f"%n = coco.sqrt %p : ({local}) -> {local}\n  func.return %n : {local}"
    )
    result = scalar if with_all_reduce else local
    return f"""
func.func @f(%a: {v}) -> {result} {{
  %x = coco.all_slice %a dim = 0 : ({v}) -> {s}
  %q = coco.mul %x, %x : ({s}, {s}) -> {s}
  %p = coco.reduce %q kind = sum dims = [0] : ({s}) -> {local}
  {total}
}}"""


NORM = f"""
func.func @f(%a: {T("64xf32")}) -> {T("f32")} {{
  %n = coco.norm %a : ({T("64xf32")}) -> {T("f32")}
  func.return %n : {T("f32")}
}}"""


@pytest.mark.parametrize("world", WORLDS)
def test_sliced_norm_needs_its_all_reduce(world):
    assert equivalent(parse(NORM), parse(sliced_norm(True)), world)
    comparison = equivalent(parse(NORM), parse(sliced_norm(False)), world)
    assert not comparison
    assert re.search(r"at rank \d index \[\]: a=", comparison.first_difference.message)


@pytest.mark.parametrize("world", WORLDS)
def test_argument_layout_may_change(world):
    sliced = binary("add", S0, REP, S0).replace(
        f"func.return %r : {S0}",
        f"%g = coco.all_gather %r : {S0} -> {REP}\n  func.return %g : {REP}",
    )
    sliced = sliced.replace(f") -> {S0} {{", f") -> {REP} {{")
    assert equivalent(parse(binary("add")), parse(sliced), world)


def test_replicated_output_is_compared_against_every_rank_of_a_local_one():
    local = binary("add", LOC, REP, LOC)
    broadcast_local = f"""
func.func @f(%a: {LOC}, %b: {REP}) -> {LOC} {{
  %r = coco.add %a, %b : ({LOC}, {REP}) -> {LOC}
  func.return %r : {LOC}
}}"""
    assert equivalent(parse(local), parse(broadcast_local), 4)
    replicated = f"""
func.func @f(%a: {LOC}, %b: {REP}) -> {REP} {{
  %r = coco.broadcast %a root = 0 : {LOC} -> {REP}
  %s = coco.add %r, %b : ({REP}, {REP}) -> {REP}
  func.return %s : {REP}
}}"""
    comparison = equivalent(parse(local), parse(replicated), 4)
    assert not comparison
    message = comparison.first_difference.message
    assert "384 of 512 elements differ" in message  # rank 0 (the root) agrees
    assert re.search(r"at rank [123] index \[", message)
    assert equivalent(parse(replicated), parse(local), 1)


def test_a_result_in_one_program_only_cannot_be_compared():
    two = f"""
func.func @f(%a: {REP}, %b: {REP}) -> ({REP}, {REP}) {{
  %r = coco.add %a, %b : ({REP}, {REP}) -> {REP}
  func.return %r, %r : {REP}, {REP}
}}"""
    with pytest.raises(NotComparable) as caught:
        equivalent(parse(binary("add")), parse(two), 2)
    assert caught.value.reasons == [f"result f.result1 ({REP}) of b is not in a"]
    assert str(caught.value).startswith(
        "error: cannot compare a with b, their signatures differ: result f.result1"
    )
    with pytest.raises(NotComparable, match=r"result f\.result1 .* of a is not in b"):
        equivalent(parse(two), parse(binary("add")), 2)


def test_a_parameter_updated_by_one_program_only_is_a_difference():
    update = UPDATE
    no_update = update.replace(f"  coco.update %a, %r : {REP}\n", "")
    comparison = equivalent(parse(update), parse(no_update), 2)
    assert not comparison
    assert comparison.first_difference.key == "f.arg0"
    assert "a updates this parameter" in comparison.first_difference.message
    reverse = equivalent(parse(no_update), parse(update), 2)
    assert "b updates this parameter" in reverse.first_difference.message


def test_shape_mismatch_is_a_difference_not_a_crash():
    small = T("8xf32")
    reduced = f"""
func.func @f(%a: {REP}, %b: {REP}) -> {small} {{
  %r = coco.reduce %a kind = sum dims = [1] : ({REP}) -> {small}
  func.return %r : {small}
}}"""
    comparison = equivalent(parse(binary("add")), parse(reduced), 2)
    assert not comparison
    assert "shape [8, 16] in a but [8] in b" in comparison.first_difference.message


def test_tolerances_default_by_element_type_and_can_be_overridden():
    t = T("64xf32")
    exact = f"""
func.func @f(%a: {t}) -> {t} {{
  %c = coco.constant 3.0 : {T("f32")}
  %r = coco.mul %a, %c : ({t}, {T("f32")}) -> {t}
  func.return %r : {t}
}}"""
    rounded = exact.replace("3.0", "3.0001")
    assert not equivalent(parse(exact), parse(rounded), 2)
    assert equivalent(parse(exact), parse(rounded), 2, rtol=1e-4)
    assert equivalent(parse(exact), parse(rounded), 2, atol=1e-3)
    assert not equivalent(parse(exact), parse(rounded), 2, rtol=0.0, atol=0.0)
    half = exact.replace("xf32", "xf16").replace("<f32", "<f16")
    assert equivalent(parse(half), parse(half.replace("3.0", "3.004")), 2)
    assert not equivalent(parse(exact), parse(exact.replace("3.0", "3.004")), 2)


def test_integers_compare_exactly():
    t = T("16xi32")
    add = binary("add", t, t, t)
    assert equivalent(parse(add), parse(add), 2)
    assert not equivalent(parse(add), parse(binary("max", t, t, t)), 2)


def test_nan_equals_nan():
    t = T("16xf32")
    source = f"""
func.func @f(%a: {t}) -> {t} {{
  %m = coco.abs %a : ({t}) -> {t}
  %n = coco.neg %m : ({t}) -> {t}
  %r = coco.log %n : ({t}) -> {t}
  func.return %r : {t}
}}"""
    assert equivalent(parse(source), parse(source), 2)
    other = source.replace("coco.log", "coco.sqrt")
    assert equivalent(parse(source), parse(other), 2)
    different = source.replace("%r = coco.log %n", "%r = coco.exp %n")
    comparison = equivalent(parse(source), parse(different), 2)
    assert not comparison
    assert comparison.first_difference.max_abs_error == float("inf")


def test_an_argument_of_another_shape_cannot_be_compared():
    wide = binary("add", T("8x32xf32"), T("8x32xf32"), T("8x32xf32"))
    with pytest.raises(NotComparable) as caught:
        equivalent(parse(binary("add")), parse(wide), 2)
    assert caught.value.reasons[0] == (
        f"argument f.arg0 is {REP} in a but {T('8x32xf32')} in b "
        "(fed as [8, 16] and [8, 32] on 2 ranks)"
    )
    assert len(caught.value.reasons) == 2  # and f.arg1


@pytest.mark.parametrize("world", WORLDS)
def test_local_and_global_arguments_cannot_be_compared(world):
    with pytest.raises(NotComparable, match=r"argument f\.arg0 is .*local.* in a"):
        equivalent(parse(binary("add", LOC, REP, LOC)), parse(binary("add")), world)


def test_an_argument_added_or_removed_cannot_be_compared():
    one = f"""
func.func @f(%a: {REP}) -> {REP} {{
  %r = coco.add %a, %a : ({REP}, {REP}) -> {REP}
  func.return %r : {REP}
}}"""
    with pytest.raises(NotComparable) as caught:
        equivalent(parse(one), parse(binary("add")), 2)
    assert caught.value.reasons == [f"argument f.arg1 ({REP}) of b is not in a"]
    with pytest.raises(NotComparable, match=r"argument f\.arg1 .* of a is not in b"):
        equivalent(parse(binary("add")), parse(one), 2)


def test_a_float_argument_that_becomes_an_integer_cannot_be_compared():
    t, i = T("16xf32"), T("16xi32")
    as_int = f"""
func.func @f(%a: {i}, %b: {t}) -> {t} {{
  %c = coco.convert %a : ({i}) -> {t}
  %r = coco.add %c, %b : ({t}, {t}) -> {t}
  func.return %r : {t}
}}"""
    with pytest.raises(NotComparable, match="floating-point inputs cannot be fed"):
        equivalent(parse(binary("add", t, t, t)), parse(as_int), 2)


def test_signatures_are_checked_before_running():
    """A program that would fail to run is not run: the signatures decide."""
    wide = binary("add", T("8x32xf32"), T("8x32xf32"), T("8x32xf32"))
    with pytest.raises(NotComparable):
        equivalent(parse(binary("add", S1, S1, S1)), parse(wide), 3)


def test_updated_parameters_are_compared():
    update = UPDATE
    assert equivalent(parse(update), parse(update), 2).compared == ["f.arg0"]
    wrong = update.replace("coco.add", "coco.min")
    comparison = equivalent(parse(update), parse(wrong), 2)
    assert comparison.first_difference.key == "f.arg0"
    assert np.isfinite(comparison.first_difference.max_rel_error)


def test_single_functions_are_matched_by_position_not_name():
    t = T("16xf32")
    add = binary("add", t, t, t)
    renamed = add.replace("@f(", "@g(")
    assert renamed != add
    assert equivalent(parse(add), parse(renamed), 2)
    wrong = binary("sub", t, t, t).replace("@f(", "@g(")
    assert not equivalent(parse(add), parse(wrong), 2)


# ---------------------------------------------------------------------------
# Rewrites wrong only for negative values: the signed-input run
# ---------------------------------------------------------------------------

SCALAR = T("f32")


def sgd(magnitude: bool) -> str:
    """An SGD step; with `magnitude`, the buggy rewrite that steps along
    `abs(gradient)`: the same on the default (non-negative) inputs."""
    gradient = "%mag" if magnitude else "%sum"
    abs_line = f"\n  %mag = coco.abs %sum : ({REP}) -> {REP}" if magnitude else ""
    return f"""
func.func @sgd(%g: {LOC}, %w: {REP}, %lr: {SCALAR}) {{
  %sum = coco.all_reduce %g reduction = sum : {LOC} -> {REP}{abs_line}
  %step = coco.mul %lr, {gradient} : ({SCALAR}, {REP}) -> {REP}
  %w1 = coco.sub %w, %step : ({REP}, {REP}) -> {REP}
  coco.update %w, %w1 : {REP}
  func.return
}}"""


def layer(relu: bool) -> str:
    """A row-parallel layer's epilogue: all_reduce, bias, relu; without
    `relu`, the buggy rewrite that dropped it."""
    bias = T("16xf32")
    out = "%y" if relu else "%r"
    relu_line = f"\n  %y = coco.relu %r : ({REP}) -> {REP}" if relu else ""
    return f"""
func.func @layer(%p: {LOC}, %b: {bias}) -> {REP} {{
  %s = coco.all_reduce %p reduction = sum : {LOC} -> {REP}
  %r = coco.add %s, %b : ({REP}, {bias}) -> {REP}{relu_line}
  func.return {out} : {REP}
}}"""


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize(
    ("original", "rewritten", "key"),
    [
        (sgd(magnitude=False), sgd(magnitude=True), "sgd.arg1"),
        (layer(relu=True), layer(relu=False), "layer.result0"),
    ],
    ids=["abs-before-update", "dropped-relu"],
)
def test_rewrite_wrong_only_for_negative_values_is_caught(
    original: str, rewritten: str, key: str, world: int
):
    a, b = parse(original), parse(rewritten)
    run_a, run_b = interpret(a, world), interpret(b, world)  # default inputs
    assert list(run_a.outputs) == [key]
    np.testing.assert_array_equal(run_a[key], run_b[key])
    comparison = equivalent(a, b, world)
    assert not comparison
    difference = comparison.first_difference
    assert difference is not None and difference.key == key
    assert difference.message.startswith(f"with signed inputs: {key}: max abs error")
    assert [d.key for d in comparison.differences] == [key]
