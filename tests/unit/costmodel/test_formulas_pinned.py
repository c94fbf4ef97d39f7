"""The ring formulas of the cost model pinned term by term at known world
sizes (issue 25's mutation run: one hop of latency too few per ring went
unnoticed). NCCL's ring all-reduce of `S` bytes on `N` ranks sends
`2 (N-1)/N · S` per rank and takes `2 (N-1)` steps; reduce-scatter and
all-gather half of each; all-to-all one step; a send `S` and one hop."""

from __future__ import annotations

import pytest

from coconet_ir.costmodel import formulas as f
from coconet_ir.costmodel import machine

H100 = machine("h100x8")
S = 64 * 1024 * 1024


def beta(world: int) -> float:
    return H100.link(world).bytes_per_s * H100.efficiency.link


def hop(world: int) -> float:
    return H100.link(world).hop_s


@pytest.mark.parametrize("world", [4, 8])
def test_ring_collectives_term_by_term(world: int) -> None:
    n = world
    base = H100.collective_base_s
    assert f.ring_latency(n, H100, 3) == pytest.approx(base + 3 * hop(n))
    assert f.all_reduce_s(S, n, H100) == pytest.approx(
        2 * (n - 1) / n * S / beta(n) + base + 2 * (n - 1) * hop(n)
    )
    for kind in ("reduce_scatter", "all_gather"):
        assert f.transfer_s(kind, S, n, H100) == pytest.approx(
            (n - 1) / n * S / beta(n) + base + (n - 1) * hop(n)
        )
    assert f.gather_scatter_s(S, n, H100) == f.transfer_s("all_gather", S, n, H100)
    assert f.transfer_s("all_to_all", S, n, H100) == pytest.approx(
        (n - 1) / n * S / beta(n) + base + hop(n)
    )
    assert f.peer_s(S, n, H100) == pytest.approx(S / beta(n) + hop(n))
    assert f.transfer_s("all_reduce", S, 1, H100) == 0.0


def test_latency_alone_at_one_byte() -> None:
    """At 1 byte a ring is its latency: 14 hops at 8 ranks, 6 at 4."""
    for n, steps in ((4, 6), (8, 14)):
        latency = f.all_reduce_s(1, n, H100) - 2 * (n - 1) / n / beta(n)
        assert latency == pytest.approx(H100.collective_base_s + steps * hop(n))
