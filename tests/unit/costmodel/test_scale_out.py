"""The cost model on many nodes (docs/performance.md, "Many nodes"): the
rail-optimized cluster presets, an all_to_all's bytes split between NVLink
and the NICs term by term, the sub-clusters a sweep takes, and coconet-bench's
DLRM sweep from 1 to 128 nodes."""

from __future__ import annotations

import pytest

from coconet_ir.costmodel import PRESETS, machine
from coconet_ir.costmodel import formulas as f
from coconet_ir.diagnostics import CocoError
from coconet_ir.tools.coconet_bench import (
    BY_NAME,
    node_counts,
    scale_out,
    scale_out_lines,
    write_scale_out_png,
)

CLUSTER = machine("h100x1024-ib")
S = 64 * 1024 * 1024


def test_the_cluster_presets() -> None:
    unit, four_units = machine("h100x256-ib"), CLUSTER
    assert (unit.nodes, unit.gpus, four_units.nodes, four_units.gpus) == (
        32,
        256,
        128,
        1024,
    )
    for m in (unit, four_units):
        assert m.rails and m.network is not None
        assert m.network.bytes_per_s == 50e9  # 400 Gb/s NDR, one NIC per GPU
        assert m.gpus_per_node == 8
    assert not PRESETS["h100x16-ib"].rails


def test_sub_clusters_keep_the_links() -> None:
    two = CLUSTER.with_nodes(2)
    assert (two.name, two.nodes, two.gpus) == ("h100x1024-ib/2", 2, 16)
    assert (two.network, two.rails) == (CLUSTER.network, True)
    one = CLUSTER.with_nodes(1)
    assert (one.name, one.nodes, one.network) == ("h100x1024-ib/1", 1, None)
    with pytest.raises(CocoError, match="has 128 nodes; cannot take 256"):
        CLUSTER.with_nodes(256)


def test_inside_a_node_an_exchange_is_all_nvlink() -> None:
    nvlink = CLUSTER.nvlink.bytes_per_s * CLUSTER.efficiency.link
    assert f.exchange_s(S, 8, CLUSTER) == pytest.approx(S / nvlink)


@pytest.mark.parametrize("nodes", [2, 16, 128])
def test_across_nodes_the_nic_carries_the_other_nodes_share(nodes: int) -> None:
    """(W-G)/(W-1) of the bytes leave the node; with rails, the other rails'
    part of them crosses NVLink too, but the NIC (9x slower) binds."""
    m = CLUSTER.with_nodes(nodes)
    world, g = m.gpus, m.gpus_per_node
    efficiency = m.efficiency.link
    network = S * (world - g) / (world - 1)
    nvlink = S - network + network * (g - 1) / g
    assert m.network is not None
    expected = max(
        nvlink / (m.nvlink.bytes_per_s * efficiency),
        network / (m.network.bytes_per_s * efficiency),
    )
    assert f.exchange_s(S, world, m) == pytest.approx(expected)
    assert f.exchange_s(S, world, m) == pytest.approx(
        network / (m.network.bytes_per_s * efficiency)
    )
    assert f.transfer_s(
        "all_to_all", S * world / (world - 1), world, m
    ) == pytest.approx(expected + m.collective_base_s + m.network.hop_s)


def test_a_two_node_ring_machine_without_rails_still_splits_the_bytes() -> None:
    m = machine("h100x16-ib")
    assert m.network is not None
    network = S * 8 / 15
    assert f.exchange_s(S, 16, m) == pytest.approx(
        max(
            (S - network) / (m.nvlink.bytes_per_s * m.efficiency.link),
            network / (m.network.bytes_per_s * m.efficiency.link),
        )
    )


def test_node_counts() -> None:
    assert node_counts(128) == [1, 2, 4, 8, 16, 32, 64, 128]
    assert node_counts(1) == [1]
    assert node_counts(6) == [1, 2, 4, 6]


@pytest.fixture(scope="module")
def dlrm_points():
    return scale_out(BY_NAME["dlrm-embedding"], CLUSTER)


def test_the_dlrm_sweep_from_1_to_128_nodes(dlrm_points) -> None:
    assert [p.nodes for p in dlrm_points] == [1, 2, 4, 8, 16, 32, 64, 128]
    assert all(p.fused for p in dlrm_points)
    assert all(0 < p.gain < 1 for p in dlrm_points)
    shares = [p.network_share for p in dlrm_points]
    assert shares[0] == 0 and shares == sorted(shares) and shares[-1] > 0.99
    # weak scaling: a rank's lookups stay, its all_to_all moves to the NIC
    library = [p.library_s for p in dlrm_points]
    assert library == sorted(library)
    # at 128 nodes the library pays the lookup and then the NIC: ~2.4 ms
    assert 2.0e-3 < dlrm_points[-1].library_s < 3.0e-3


def test_the_lookup_bytes_set_the_one_node_point(dlrm_points) -> None:
    """Catches a sweep that scales the per-rank work (the tables or the bags
    per rank wrongly): every rank pools (1024/W)·256W = 262,144 bags of 32
    rows of 256 B, 2.15 GB at 0.9 of 3.35 TB/s."""
    lookup = 262_144 * 32 * 256 / (CLUSTER.hbm_bytes_per_s * CLUSTER.efficiency.hbm)
    one = dlrm_points[0]
    assert lookup < one.fused_s < 1.2 * lookup


def test_the_sweep_table_and_plot(dlrm_points, tmp_path) -> None:
    workload = BY_NAME["dlrm-embedding"]
    text = "\n".join(scale_out_lines(workload, CLUSTER, dlrm_points, as_markdown=False))
    assert "MODEL PREDICTIONS" in text
    assert "seed, whole DLRM at 128 nodes (simulated): 21%" in text
    assert "seed, embedding + All-to-All inter-node (measured, mean): 31%" in text
    assert "\n  128  1024" in text
    path = write_scale_out_png(workload, CLUSTER, dlrm_points, tmp_path)
    assert path.stat().st_size > 10_000


def test_rails_cost_nvlink_bytes_where_the_nic_is_fast() -> None:
    """With a NIC as fast as NVLink, NVLink binds once the other rails' bytes
    cross it first (PXN); without rails it carries the node's share alone."""
    from dataclasses import replace

    from coconet_ir.costmodel.machines import Link

    fast = replace(CLUSTER.with_nodes(2), network=Link(450e9, CLUSTER.nvlink.hop_s))
    world = fast.gpus
    nvlink = fast.nvlink.bytes_per_s * fast.efficiency.link
    network = S * 8 / 15
    assert f.exchange_s(S, world, fast) == pytest.approx(
        (S - network + network * 7 / 8) / nvlink
    )
    flat = replace(fast, rails=False)
    assert f.exchange_s(S, world, flat) == pytest.approx(network / nvlink)
