"""Philox4x32-10 (Salmon et al., SC'11, as in Random123) and the dropout uniform.

docs/interpreter.md, "Dropout": `u(seed, i)` is Philox4x32-10 with counter
`(i mod 2^32, i div 2^32, 0, 0)` and key `(seed mod 2^32, seed div 2^32)`, and
`u = (out[0] >> 8) * 2^-24`. Everything here is vectorized over leading axes so
that a whole tensor's mask is one numpy computation.
"""

from __future__ import annotations

import numpy as np

PHILOX_M0 = np.uint64(0xD2511F53)
PHILOX_M1 = np.uint64(0xCD9E8D57)
PHILOX_W0 = np.uint32(0x9E3779B9)
PHILOX_W1 = np.uint32(0xBB67AE85)
PHILOX_ROUNDS = 10

_MASK32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)


def _mulhilo(multiplier: np.uint64, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The high and low 32-bit halves of the 64-bit product `multiplier * x`."""
    product = x.astype(np.uint64) * multiplier
    return (product >> _SHIFT32).astype(np.uint32), (product & _MASK32).astype(
        np.uint32
    )


def philox4x32_10(counter: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Philox4x32 with 10 rounds.

    `counter` has shape `(..., 4)` and `key` shape `(..., 2)` (uint32, broadcast
    against each other); the result is `(..., 4)` uint32.
    """
    counter = np.asarray(counter, dtype=np.uint32)
    key = np.asarray(key, dtype=np.uint32)
    c0, c1, c2, c3 = (counter[..., j] for j in range(4))
    k0, k1 = key[..., 0], key[..., 1]
    with np.errstate(over="ignore"):
        for round_index in range(PHILOX_ROUNDS):
            if round_index:
                k0 = k0 + PHILOX_W0
                k1 = k1 + PHILOX_W1
            hi0, lo0 = _mulhilo(PHILOX_M0, c0)
            hi1, lo1 = _mulhilo(PHILOX_M1, c2)
            c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return np.stack(np.broadcast_arrays(c0, c1, c2, c3), axis=-1)


def dropout_uniform(seed: int, indices: np.ndarray) -> np.ndarray:
    """`u(seed, i)` for every global linear index `i` of `indices` (float64,
    exact: `u` is a multiple of 2^-24 in [0, 1))."""
    if seed < 0 or seed >= 1 << 64:
        raise ValueError(f"dropout seed must be in [0, 2^64), got {seed}")
    flat = np.asarray(indices).astype(np.uint64)
    counter = np.zeros((*flat.shape, 4), dtype=np.uint32)
    counter[..., 0] = (flat & _MASK32).astype(np.uint32)
    counter[..., 1] = (flat >> _SHIFT32).astype(np.uint32)
    key = np.array([seed & 0xFFFFFFFF, seed >> 32], dtype=np.uint32)
    out0 = philox4x32_10(counter, key)[..., 0]
    return (out0 >> np.uint32(8)).astype(np.float64) * 2.0**-24
