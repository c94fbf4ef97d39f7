"""Philox4x32-10 as `arith` ops, for dropout kernels (`coco.dropout`:
docs/dialect.md; its generator: docs/interpreter.md, "Dropout").

`u(seed, i)` is Philox4x32-10 (Salmon et al., SC'11, as in Random123) with
counter `(i mod 2^32, i div 2^32, 0, 0)` and key `(seed mod 2^32, seed div
2^32)`; `u = (out[0] >> 8) * 2^-24`. Each round is two `arith.mului_extended`
and a few `arith.xori`, so a dropout kernel stays upstream-only. The seed is
either a compile-time integer (the key schedule is folded into constants) or
an `i64` value, a kernel argument (the round keys are `arith.addi`s of the
key words, wrapping as Philox's do), so that one kernel serves dropouts that
differ only in their seed (docs/gpu/device.md, "Kernels"). `keep = u >= p` is
decided on integers: `out[0] >> 8 >= ceil(p * 2^24)` (exact, as `u` is a
multiple of 2^-24), the same mask as the interpreter's
(coconet_ir/interpreter/philox.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, i1, i32, i64
from xdsl.ir import SSAValue

PHILOX_M0 = 0xD2511F53
PHILOX_M1 = 0xCD9E8D57
PHILOX_W0 = 0x9E3779B9
PHILOX_W1 = 0xBB67AE85
PHILOX_ROUNDS = 10
MASK32 = 0xFFFFFFFF

__all__ = ["dropout_keep", "keep_threshold", "philox_out0"]


def _i32(b: Builder, value: int) -> SSAValue:
    """An i32 constant holding the 32-bit pattern `value`."""
    value &= MASK32
    signed = value - (1 << 32) if value >= 1 << 31 else value
    return b.insert(arith.ConstantOp(IntegerAttr(signed, i32))).result


def philox_out0(b: Builder, seed: int | SSAValue, index: SSAValue) -> SSAValue:
    """`out[0]` of Philox4x32-10 for the counter of the i64 `index` and the key
    of `seed` (an integer, or an i64 value)."""
    shift = b.insert(arith.ConstantOp(IntegerAttr(32, i64))).result
    c0 = b.insert(arith.TruncIOp(index, i32)).result
    high = b.insert(arith.ShRUIOp(index, shift)).result
    c1 = b.insert(arith.TruncIOp(high, i32)).result
    c2 = _i32(b, 0)
    c3 = c2
    m0, m1 = _i32(b, PHILOX_M0), _i32(b, PHILOX_M1)
    keys = _KeySchedule.of(b, seed)
    for round_index in range(PHILOX_ROUNDS):
        p0 = b.insert(arith.MulUIExtendedOp(m0, c0))
        p1 = b.insert(arith.MulUIExtendedOp(m1, c2))
        lo0, hi0 = p0.results
        lo1, hi1 = p1.results
        x0 = b.insert(arith.XOrIOp(hi1, c1)).result
        x2 = b.insert(arith.XOrIOp(hi0, c3)).result
        c0 = b.insert(arith.XOrIOp(x0, keys.word(b, round_index, 0))).result
        c2 = b.insert(arith.XOrIOp(x2, keys.word(b, round_index, 1))).result
        c1, c3 = lo1, lo0
    return c0


@dataclass
class _KeySchedule:
    """Philox's key words: the seed's two 32-bit halves, bumped by (W0, W1)
    each round; folded when the seed is an integer, `arith.addi`s of the
    key words when it is a value."""

    seed: int | tuple[SSAValue, SSAValue]

    @staticmethod
    def of(b: Builder, seed: int | SSAValue) -> _KeySchedule:
        if isinstance(seed, int):
            return _KeySchedule(seed)
        shift = b.insert(arith.ConstantOp(IntegerAttr(32, i64))).result
        low = b.insert(arith.TruncIOp(seed, i32)).result
        high = b.insert(arith.ShRUIOp(seed, shift)).result
        return _KeySchedule((low, b.insert(arith.TruncIOp(high, i32)).result))

    def word(self, b: Builder, r: int, k: int) -> SSAValue:
        """Key word `k` (0 or 1) of round `r` (0-based)."""
        bump = r * (PHILOX_W0, PHILOX_W1)[k]
        if isinstance(self.seed, int):
            return _i32(b, (self.seed >> 32 * k) + bump)
        if r == 0:
            return self.seed[k]
        return b.insert(arith.AddiOp(self.seed[k], _i32(b, bump))).result


def keep_threshold(p: float) -> int:
    """The least `k` with `k * 2^-24 >= p`: `u >= p` iff `out[0] >> 8 >= k`."""
    return max(0, math.ceil(p * (1 << 24)))


def dropout_keep(
    b: Builder, seed: int | SSAValue, p: float, index: SSAValue
) -> SSAValue:
    """The `i1` that says whether dropout keeps the element at global linear
    index `index` (an i64), for `seed` (an integer, or an i64 value)."""
    out0 = philox_out0(b, seed, index)
    bits = b.insert(arith.ShRUIOp(out0, _i32(b, 8))).result
    threshold = keep_threshold(p)
    if threshold > MASK32 >> 8:
        return b.insert(arith.ConstantOp(IntegerAttr(0, i1))).result
    return b.insert(arith.CmpiOp(bits, _i32(b, threshold), "uge")).result
