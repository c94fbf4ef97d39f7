"""`coco.shift` in the reference interpreter against numpy (docs/dialect.md,
"coco.shift"): rank `r` receives what rank `(r + K) mod N` holds, on 2, 4 and
8 ranks, for every layout and offsets past `N` either way. (Issue 25: only a
pass test ran it before.)"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import T

from coconet_ir.interpreter import RunResult, interpret
from coconet_ir.ir import parse

WORLDS = [2, 4, 8]


def shift(by: int, t: str) -> str:
    return f"""
func.func @f(%a0: {t}) -> {t} {{
  %r = coco.shift %a0 by = {by} : {t} -> {t}
  func.return %r : {t}
}}"""


def run(source: str, world: int) -> RunResult:
    return interpret(parse(source), world)


def offsets(world: int) -> list[int]:
    """The next and previous rank, a far one, a whole turn either way (the
    identity), and past a turn."""
    return [1, -1, world // 2 + 1, world, -world, 0, world + 1, -2 * world - 1]


def expected_blocks(blocks: list[np.ndarray], by: int) -> list[np.ndarray]:
    """Rank `r` gets rank `(r + by) mod N`'s block."""
    n = len(blocks)
    return [blocks[(r + by) % n] for r in range(n)]


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("dim", [0, 1])
def test_shift_of_a_sliced_value_rotates_the_blocks(dim: int, world: int) -> None:
    t = T("16x8xf32", f"sliced<{dim}>")
    for by in offsets(world):
        result = run(shift(by, t), world)
        x = result.inputs["f.arg0"]
        blocks = np.split(x, world, axis=dim)
        expected = np.concatenate(expected_blocks(blocks, by), axis=dim)
        np.testing.assert_array_equal(result["f.result0"], expected, f"by = {by}")


@pytest.mark.parametrize("world", WORLDS)
def test_shift_of_a_local_value_takes_the_peer_value(world: int) -> None:
    t = T("3x5xf32", "local")
    for by in offsets(world):
        result = run(shift(by, t), world)
        x = result.inputs["f.arg0"]
        assert x.shape == (world, 3, 5)
        expected = np.stack(expected_blocks(list(x), by))
        np.testing.assert_array_equal(result["f.result0"], expected, f"by = {by}")
        # rank 0 holds rank (by mod N)'s value: the peer index, not its inverse
        np.testing.assert_array_equal(result["f.result0"][0], x[by % world])


@pytest.mark.parametrize("world", WORLDS)
def test_shift_of_a_replicated_value_is_the_identity(world: int) -> None:
    t = T("6xf32")
    for by in [1, -1, world + 1]:
        result = run(shift(by, t), world)
        np.testing.assert_array_equal(result["f.result0"], result.inputs["f.arg0"])


@pytest.mark.parametrize("world", WORLDS)
def test_shifts_compose_and_undo(world: int) -> None:
    """Shifting by `a` then by `b` is shifting by `a + b`; by `K` then `-K`
    gives every rank its own value back."""
    t = T("8x2xi32", "local")
    source = f"""
func.func @f(%a0: {t}) -> ({t}, {t}) {{
  %a = coco.shift %a0 by = 1 : {t} -> {t}
  %b = coco.shift %a by = 2 : {t} -> {t}
  %c = coco.shift %b by = -3 : {t} -> {t}
  func.return %b, %c : {t}, {t}
}}"""
    result = run(source, world)
    x = result.inputs["f.arg0"]
    np.testing.assert_array_equal(result["f.result0"], np.roll(x, -3, axis=0))
    np.testing.assert_array_equal(result["f.result1"], x)
