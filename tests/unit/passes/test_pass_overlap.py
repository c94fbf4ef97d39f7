"""coco-overlap on the examples where a matmul feeds (or is fed by) a
collective: equivalent on 2, 4 and 8 ranks, with the expected region."""

from __future__ import annotations

import pytest
from helpers import assert_equivalent, example
from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc
from coconet_ir.dialects import coco

OVERLAPPED = ["megatron", "sequence_parallel", "matmul_reduce_scatter"]
SPLIT = "coco-split-all-reduce{dim=1}"


def overlaps(module: ModuleOp) -> list[coco.OverlapOp]:
    return [op for op in module.walk() if isinstance(op, coco.OverlapOp)]


@pytest.mark.parametrize("chunks", [2, 4])
@pytest.mark.parametrize("name", OVERLAPPED)
def test_split_fuse_overlap_is_equivalent(name: str, chunks: int) -> None:
    module = assert_equivalent(
        name, f"{SPLIT},coco-fuse,coco-overlap{{chunks={chunks}}}"
    )
    (region,) = overlaps(module)
    assert region.chunk_count == chunks


@pytest.mark.parametrize("chunks", [2, 4])
@pytest.mark.parametrize("name", OVERLAPPED)
def test_split_reorder_fuse_overlap_is_equivalent(name: str, chunks: int) -> None:
    pipeline = f"{SPLIT},coco-reorder,coco-fuse,coco-overlap{{chunks={chunks}}}"
    assert len(overlaps(assert_equivalent(name, pipeline))) == 1


def test_megatron_overlap_holds_matmul_and_fused_layer_with_dropout() -> None:
    pipeline = f"{SPLIT},coco-reorder,coco-fuse,coco-overlap{{chunks=2}}"
    (region,) = overlaps(assert_equivalent("megatron", pipeline))
    matmul, fusion, _ = region.block.ops
    assert isinstance(matmul, coco.MatmulOp) and isinstance(fusion, coco.FusionOp)
    inside = [op.name for op in fusion.block.ops]
    assert inside[0] == "coco.reduce_scatter" and "coco.dropout" in inside
    assert region.input_dims.get_values() == (0, -1, -1, 0)


def test_megatron_without_split_overlaps_the_all_reduce() -> None:
    (region,) = overlaps(assert_equivalent("megatron", "coco-overlap"))
    assert [op.name for op in region.block.ops] == [
        "coco.matmul",
        "coco.all_reduce",
        "coco.yield",
    ]
    assert region.output_dims.get_values() == (0,)


def test_sequence_parallel_chunks_the_batch_dim() -> None:
    (region,) = overlaps(assert_equivalent("sequence_parallel", "coco-overlap"))
    assert region.input_dims.get_values() == (1, -1)


def test_matmul_reduce_scatter_chunks_the_columns() -> None:
    (region,) = overlaps(assert_equivalent("matmul_reduce_scatter", "coco-overlap"))
    assert region.input_dims.get_values() == (-1, 1)
    assert region.output_dims.get_values() == (1,)


def test_sequence_parallel_mlp_overlaps_each_layer_with_its_collective() -> None:
    """The gather with fc1, fc2 with the scatter: two regions, both chunked
    along the batch dim (S is sliced, H and F are contracted)."""
    fc1, fc2 = overlaps(assert_equivalent("sequence_parallel_mlp", "coco-overlap"))
    assert [op.name for op in fc1.block.ops] == [
        "coco.all_gather",
        "coco.matmul",
        "coco.yield",
    ]
    assert [op.name for op in fc2.block.ops] == [
        "coco.matmul",
        "coco.reduce_scatter",
        "coco.yield",
    ]
    assert fc1.input_dims.get_values() == fc2.input_dims.get_values() == (1, -1)
    assert fc1.output_dims.get_values() == fc2.output_dims.get_values() == (1,)


@pytest.mark.parametrize("chunks", [2, 4])
def test_sequence_parallel_mlp_fused_bias_and_gelu_join_the_first_region(
    chunks: int,
) -> None:
    pipeline = f"{SPLIT},coco-reorder,coco-fuse,coco-overlap{{chunks={chunks}}}"
    fc1, fc2 = overlaps(assert_equivalent("sequence_parallel_mlp", pipeline))
    assert fc1.chunk_count == fc2.chunk_count == chunks
    (fusion,) = [op for op in fc1.block.ops if isinstance(op, coco.FusionOp)]
    assert [op.name for op in fusion.block.ops] == [
        "coco.add",
        "coco.gelu",
        "coco.yield",
    ]


def test_refusal_says_why_and_changes_nothing() -> None:
    module = example("megatron")
    before = cc.to_text(module)
    with pytest.raises(cc.CocoError, match="3 chunks do not divide"):
        cc.Pipeline("coco-overlap{chunks=3 op=layer}").apply(module)
    assert cc.to_text(module) == before


def test_pipeline_layer_overlaps_and_lonely_mlp_is_refused() -> None:
    module = cc.Pipeline("coco-overlap{op=layer}")(example("pipeline"))
    assert len(overlaps(module)) == 1
    with pytest.raises(cc.CocoError, match="no collective feeds or consumes"):
        cc.Pipeline("coco-overlap{op=mlp}")(example("pipeline"))
