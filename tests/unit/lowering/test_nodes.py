"""Several nodes (docs/gpu/device.md, "Several nodes"): with a stage's ranks
on nodes of `ranks_per_node`, the lowering makes each all-reduce the cost
model prefers hierarchical (reduce-scatter in the node, all-reduce across,
all-gather in the node), refuses what needs a peer's memory across nodes,
and the emulation (threads or a process per rank, ranks on other nodes
without pointers into each other's memory) gives the interpreter's results
with exactly the predicted bytes, fewer of them crossing nodes than one ring
over every rank sends."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import example

import coconet_ir as cc
from coconet_ir.analysis.channels import PipelineChannels
from coconet_ir.analysis.device_traffic import device_traffic
from coconet_ir.costmodel.formulas import flat_all_reduce_s, hierarchical_all_reduce_s
from coconet_ir.costmodel.machines import machine
from coconet_ir.emulate import EmulationResult, compare_runs, emulate, lower
from coconet_ir.lowering.state import Nodes

UNFUSED = "coco-optimize{fuse=false fuse_collective=false}"


def cross_node_bytes(result: EmulationResult, ranks_per_node: int) -> int:
    assert result.stats is not None
    sent = np.array(result.stats.raw["bytes"]).sum(axis=2)
    n = sent.shape[0]
    return int(
        sum(
            sent[s, d]
            for s in range(n)
            for d in range(n)
            if s // ranks_per_node != d // ranks_per_node
        )
    )


def assert_predicted(result: EmulationResult) -> None:
    assert result.stats is not None and result.lowered is not None
    stages = PipelineChannels.of(result.lowered.coco).stage_indices()
    for name, traffic in device_traffic(result.lowered.device).items():
        assert not result.stats.disagreements(traffic, stages[name]), name


@pytest.mark.parametrize(
    ("name", "world", "ranks_per_node", "processes"),
    [
        ("adam", 4, 2, True),  # 2 nodes x 2 ranks, a process per rank
        ("megatron", 4, 2, False),
        ("lamb", 8, 2, False),  # 4 nodes x 2: the norms' scalar all-reduces too
        ("sgd", 8, 4, False),
    ],
)
def test_ranks_on_nodes_give_the_interpreters_results(
    name, world, ranks_per_node, processes
):
    module = example(name)
    nodes = emulate(
        module,
        world,
        passes=UNFUSED,
        seed=2,
        ranks_per_node=ranks_per_node,
        processes=processes,
    )
    verdict = compare_runs(cc.interpret(module, world, seed=2), nodes, module)
    assert verdict.ok, verdict
    assert_predicted(nodes)
    assert nodes.lowered is not None and 'group = "across"' in str(nodes.lowered.device)


def test_the_hierarchical_all_reduce_crosses_nodes_with_1_over_g_of_the_data():
    """adam's 4 KiB gradient on 2 nodes x 2 ranks: across the nodes each rank
    all-reduces its half (2 KiB) with its twin, 2 KiB each way; one ring of
    4 ranks crosses the node boundary twice with 2·3/4·4 KiB."""
    module = example("adam")
    nodes = emulate(module, 4, passes=UNFUSED, ranks_per_node=2)
    one_ring = emulate(module, 4, passes=UNFUSED)
    assert cross_node_bytes(nodes, 2) == 4 * 2048
    assert cross_node_bytes(one_ring, 2) == 2 * 6144


def test_what_needs_a_peers_memory_across_nodes_is_refused():
    with pytest.raises(
        cc.CocoError, match=r"'coco.fusion' holds a collective.*2 nodes"
    ):
        lower(example("adam"), 4, "coco-optimize", ranks_per_node=2)
    with pytest.raises(cc.CocoError, match=r"'coco.per_peer' copies into its peers"):
        lower(
            example("matmul_reduce_scatter"),
            4,
            "coco-overlap{per_peer=true}",
            ranks_per_node=2,
        )
    with pytest.raises(cc.CocoError, match="ranks_per_node must divide the world"):
        lower(example("sgd"), 4, "", ranks_per_node=3)
    # Inside one node the same programs lower.
    assert lower(example("adam"), 4, "coco-optimize", ranks_per_node=4).symmetric_bytes


@pytest.mark.parametrize(
    ("name", "world"),
    [("adam", 4), ("lamb", 8), ("megatron", 4), ("gemv_allreduce", 4)],
)
def test_coco_optimize_for_nodes_makes_nothing_that_needs_a_peers_memory(name, world):
    """`coco-optimize{ranks_per_node=2 world=N}` keeps the rest of the
    schedule (splits, reorders, elementwise fusion) and leaves out what
    stores into a peer's memory: the lowering for 2 ranks per node takes it
    and the emulation gives the interpreter's results; for one node the
    same option changes nothing."""
    module = example(name)
    passes = f"coco-optimize{{ranks_per_node=2 world={world} machine=h100x16-ib}}"
    nodes = emulate(module, world, passes=passes, seed=1, ranks_per_node=2)
    verdict = compare_runs(cc.interpret(module, world, seed=1), nodes, module)
    assert verdict.ok, verdict
    assert nodes.lowered is not None and not nodes.lowered.symmetric_bytes
    one_node = cc.Pipeline(f"coco-optimize{{ranks_per_node={world} world={world}}}")
    default = cc.Pipeline(f"coco-optimize{{world={world}}}")
    assert cc.to_text(one_node(example(name))) == cc.to_text(default(example(name)))


def test_coco_optimize_for_nodes_still_fuses_elementwise_chains():
    module = cc.Pipeline("coco-optimize{ranks_per_node=2 world=4}")(example("adam"))
    fusions = [op for op in module.walk() if isinstance(op, cc.dialects.coco.FusionOp)]
    assert fusions
    assert not any(
        isinstance(inner, cc.dialects.coco.CollectiveOp)
        for fusion in fusions
        for inner in fusion.walk()
    )


def test_the_cost_model_prefers_the_hierarchical_form_across_nodes():
    """The 2 x 8 preset: a flat ring over 16 GPUs runs at the network's
    per-GPU bandwidth over all of S; the hierarchical form sends S/8 over it."""
    m = machine("h100x16-ib")
    for nbytes in (4096, 1 << 20, 256 << 20):
        assert hierarchical_all_reduce_s(nbytes, 16, 8, m) < flat_all_reduce_s(
            nbytes, 16, 8, m
        )
    nodes = Nodes(8, m)
    assert nodes.hierarchical(1 << 20, 1 << 18, 16)
    assert not nodes.hierarchical(1 << 20, (1 << 18) + 1, 16)  # does not split in 8
    assert not nodes.hierarchical(1 << 20, 1 << 18, 8)  # one node
    assert not Nodes(0, m).hierarchical(1 << 20, 1 << 18, 16)
