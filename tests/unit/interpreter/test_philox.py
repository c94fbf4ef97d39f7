"""Philox4x32-10 against Random123's known answers and a scalar reference, and
the dropout uniform `u(seed, i)` of docs/interpreter.md, "Dropout"."""

from __future__ import annotations

import numpy as np
import pytest

from coconet_ir.interpreter import dropout_uniform, philox4x32_10

MASK = 0xFFFFFFFF

KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    (
        (MASK, MASK, MASK, MASK),
        (MASK, MASK),
        (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD),
    ),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]
"""Random123's kat_vectors for philox4x32_10."""


def philox_scalar(
    counter: tuple[int, ...], key: tuple[int, ...]
) -> tuple[int, int, int, int]:
    """Philox4x32-10 on Python ints, straight from the paper."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for round_index in range(10):
        if round_index:
            k0, k1 = (k0 + 0x9E3779B9) & MASK, (k1 + 0xBB67AE85) & MASK
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = (
            (p1 >> 32) ^ c1 ^ k0,
            p1 & MASK,
            (p0 >> 32) ^ c3 ^ k1,
            p0 & MASK,
        )
    return c0, c1, c2, c3


def uniform_scalar(seed: int, index: int) -> float:
    counter = (index & MASK, index >> 32, 0, 0)
    out = philox_scalar(counter, (seed & MASK, seed >> 32))
    return (out[0] >> 8) * 2.0**-24


@pytest.mark.parametrize(("counter", "key", "expected"), KNOWN_ANSWERS)
def test_known_answers(counter, key, expected):
    out = philox4x32_10(np.array(counter, np.uint32), np.array(key, np.uint32))
    assert out.dtype == np.uint32
    assert tuple(int(x) for x in out) == expected


@pytest.mark.parametrize(("counter", "key", "expected"), KNOWN_ANSWERS)
def test_scalar_reference_gives_known_answers(counter, key, expected):
    assert philox_scalar(counter, key) == expected


def test_vectorized_matches_scalar_reference():
    rng = np.random.default_rng(1)
    counters = rng.integers(0, 1 << 32, size=(64, 4), dtype=np.uint64).astype(np.uint32)
    keys = rng.integers(0, 1 << 32, size=(64, 2), dtype=np.uint64).astype(np.uint32)
    out = philox4x32_10(counters, keys)
    assert out.shape == (64, 4)
    for row in range(64):
        expected = philox_scalar(
            tuple(int(x) for x in counters[row]), tuple(int(x) for x in keys[row])
        )
        assert tuple(int(x) for x in out[row]) == expected


def test_key_broadcasts_against_counters():
    counters = np.arange(40, dtype=np.uint32).reshape(2, 5, 4)
    key = np.array([5, 6], np.uint32)
    out = philox4x32_10(counters, key)
    assert out.shape == (2, 5, 4)
    expected = philox_scalar(tuple(int(x) for x in counters[1, 3]), (5, 6))
    assert tuple(int(x) for x in out[1, 3]) == expected


@pytest.mark.parametrize("seed", [0, 7, 123456789, (3 << 32) + 11])
def test_dropout_uniform_matches_scalar_reference(seed):
    indices = np.array([0, 1, 2, 1000, MASK, 1 << 32, (5 << 32) + 17], np.int64)
    u = dropout_uniform(seed, indices)
    assert u.shape == indices.shape
    assert [float(x) for x in u] == [uniform_scalar(seed, int(i)) for i in indices]


def test_dropout_uniform_is_on_the_24_bit_grid_and_uniform():
    u = dropout_uniform(7, np.arange(100_000))
    assert np.all((u >= 0) & (u < 1))
    assert np.all(u * 2**24 == np.floor(u * 2**24))
    assert abs(float(u.mean()) - 0.5) < 0.01
    assert abs(float(np.mean(u < 0.1)) - 0.1) < 0.01


def test_dropout_uniform_keeps_the_index_shape_and_depends_on_the_seed():
    indices = np.arange(12).reshape(3, 4)
    u = dropout_uniform(1, indices)
    assert u.shape == (3, 4)
    assert not np.array_equal(u, dropout_uniform(2, indices))
    assert np.array_equal(u.ravel()[5], dropout_uniform(1, np.array([5]))[0])
