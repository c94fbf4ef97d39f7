"""The pictures of docs/fused-operators.md: which work item of each rank's
tile-granular kernel sends what to whom, for the three examples at N = 4.

The sizes come from the plans the lowering itself builds
(`EmbeddingAllToAll`, `GemvAllReduce` and `GemmAllToAll` in
coconet_ir/lowering/tile_collectives.py, made from the `coco.fusion` that
`coco-fuse-collective` builds out of examples/dlrm_embedding.mlir,
gemv_allreduce.mlir and moe_gemm_a2a.mlir); the order of the items is the
kernels' (docs/gpu/tile-kernels.md): item `i` of a rank is taken by
block `i mod G` of a grid of `G` blocks, so a grid of one block takes them
top to bottom.

    python docs/images/fused_operators.py           # writes the three PNGs
    python docs/images/fused_operators.py --ascii   # prints the ASCII version

Writing the PNGs needs matplotlib (not a dependency of the project:
`pip install matplotlib`); `--ascii` needs only the project.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import coconet_ir as cc
from coconet_ir.dialects.coco import FusionOp
from coconet_ir.lowering.tile_collectives import (
    EmbeddingAllToAll,
    GemmAllToAll,
    GemvAllReduce,
)

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parents[1] / "examples"
WORLD = 4


@dataclass(frozen=True)
class Item:
    """One work item of a rank: what it computes (`label`), the ranks it
    stores into (`to`: one for a tile, every peer for a reduced GEMV tile),
    and its phase (`push`: computed and sent; `reduce`: summed, sent to all)."""

    label: str
    to: tuple[int, ...]
    phase: str = "push"


def the_fusion(name: str) -> FusionOp:
    module = cc.Pipeline("coco-fuse-collective")(
        cc.parse_file(str(EXAMPLES / f"{name}.mlir"))
    )
    (fusion,) = [op for op in module.walk() if isinstance(op, FusionOp)]
    return fusion


def embedding_items(plan: EmbeddingAllToAll, rank: int) -> list[Item]:
    """Step 2 of the embedding + all_to_all kernel: items `(k, t)`, `k` major,
    destination `(rank + k + 1) mod N`: the rank's own part last."""
    items = []
    for item in range(plan.computed):
        k, t = divmod(item, plan.tables)
        peer = (rank + k + 1) % plan.world
        table = rank * plan.tables + t
        first = peer * plan.bags
        label = f"table {table}, bags {first}-{first + plan.bags - 1}"
        items.append(Item(label, (peer,)))
    return items


def gemv_items(plan: GemvAllReduce, rank: int) -> list[Item]:
    """Step 1 of the GEMV + all_reduce kernel: destinations `r+1, r+2, ...,
    r` (its own tiles last), each owner's `C/N` tiles (tile `c` belongs to
    rank `c mod N`); then step 2: the rank's own tiles, reduced and stored
    into every peer."""
    items = []
    for item in range(plan.computed):
        step, j = divmod(item, plan.per_rank)
        owner = (rank + step + 1) % plan.world
        c = owner + j * plan.world
        items.append(Item(f"tile {c}: partial", (owner,)))
    for j in range(plan.per_rank):
        c = rank + j * plan.world
        peers = tuple((rank + k) % plan.world for k in range(1, plan.world))
        items.append(Item(f"tile {c}: sum", peers, "reduce"))
    return items


def gemm_items(plan: GemmAllToAll, rank: int) -> list[Item]:
    """Step 2 of the GEMM + all_to_all kernel: destinations `r+1, r+2, ...,
    r` (own last), each destination's tiles of its tokens' rows."""
    items = []
    for item in range(plan.computed):
        step, t = divmod(item, plan.tiles)
        peer = (rank + step + 1) % plan.world
        items.append(Item(f"tokens of rank {peer}, tile {t}", (peer,)))
    return items


def gemm_plan() -> GemmAllToAll:
    plan = GemmAllToAll.of(the_fusion("moe_gemm_a2a"), WORLD)
    assert plan is not None
    return plan


def embedding_plan() -> EmbeddingAllToAll:
    plan = EmbeddingAllToAll.of(the_fusion("dlrm_embedding"), WORLD)
    assert plan is not None
    return plan


def gemv_plan() -> GemvAllReduce:
    plan = GemvAllReduce.of(the_fusion("gemv_allreduce"), WORLD)
    assert plan is not None
    return plan


def check_bytes(items: list[Item], rank: int, tile_bytes: int, expected: int):
    """What the items store into each peer adds up to the plan's
    `peer_bytes()`, the static prediction the emulator is checked against."""
    for peer in range(WORLD):
        if peer == rank:
            continue
        sent = sum(tile_bytes for item in items if peer in item.to)
        assert sent == expected, (rank, peer, sent, expected)


def operators() -> list[tuple[str, str, list[list[Item]]]]:
    """(file stem, title, items of each rank) of the three operators."""
    emb, gemv, gemm = embedding_plan(), gemv_plan(), gemm_plan()
    emb_items = [embedding_items(emb, r) for r in range(WORLD)]
    gemv_all = [gemv_items(gemv, r) for r in range(WORLD)]
    gemm_all = [gemm_items(gemm, r) for r in range(WORLD)]
    for r in range(WORLD):
        check_bytes(emb_items[r], r, emb.tile * emb.element_bytes, emb.peer_bytes())
        tile_bytes = gemv.tile * gemv.element_bytes
        check_bytes(gemv_all[r], r, tile_bytes, gemv.peer_bytes())
        check_bytes(gemm_all[r], r, gemm.tile * gemm.element_bytes, gemm.peer_bytes())
    return [
        (
            "fused_embedding_all_to_all",
            f"embedding + all_to_all, N = {WORLD}: {emb.tables} tables per rank, "
            f"tiles of {emb.bags} bags x {emb.width}",
            emb_items,
        ),
        (
            "fused_gemv_all_reduce",
            f"GEMV + all_reduce, N = {WORLD}: {gemv.tiles} tiles of "
            f"{gemv.rows} x {gemv.tile_columns}",
            gemv_all,
        ),
        (
            "fused_gemm_all_to_all",
            f"GEMM + all_to_all, N = {WORLD}: {gemm.tiles} tiles of "
            f"{gemm.tile_rows} x {gemm.tile_columns} per destination",
            gemm_all,
        ),
    ]


def ascii_picture(per_rank: list[list[Item]]) -> str:
    """One line per rank: the destination of each item in order (`*` marks
    a reduced tile stored into every peer; parentheses the rank's own)."""
    lines = []
    for rank, items in enumerate(per_rank):
        cells = []
        for item in items:
            if item.phase == "reduce":
                cells.append("*")
            elif item.to == (rank,):
                cells.append(f"({rank})")
            else:
                cells.append(f" {item.to[0]} ")
        lines.append(f"rank {rank}: " + "".join(f"{c:>4}" for c in cells))
    return "\n".join(lines)


def draw(stem: str, title: str, per_rank: list[list[Item]]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    colours = plt.get_cmap("tab10").colors[:WORLD]
    rows = max(len(items) for items in per_rank)
    fig, ax = plt.subplots(figsize=(1.45 * WORLD + 1.6, 0.26 * rows + 1.3))
    for rank, items in enumerate(per_rank):
        for row, item in enumerate(items):
            y = rows - 1 - row
            width = 1 / len(item.to)
            for n, peer in enumerate(item.to):
                own = peer == rank
                ax.add_patch(
                    Rectangle(
                        (rank + n * width, y),
                        width,
                        1,
                        facecolor=colours[peer],
                        edgecolor="white",
                        hatch="///" if own else None,
                        alpha=0.55 if own else 1.0,
                    )
                )
            ax.text(
                rank + 0.5,
                y + 0.5,
                item.label,
                ha="center",
                va="center",
                fontsize=6.5,
                color="black",
            )
    ax.set_xlim(0, WORLD)
    ax.set_ylim(0, rows)
    ax.set_xticks([r + 0.5 for r in range(WORLD)])
    ax.set_xticklabels([f"rank {r}" for r in range(WORLD)])
    ax.xaxis.tick_top()
    ax.set_yticks([rows - 0.5 - i for i in range(rows)])
    phases = [item.phase for item in per_rank[0]]
    ax.set_yticklabels(
        [f"{p} {phases[:i].count(p)}" for i, p in enumerate(phases)], fontsize=7
    )
    if "reduce" in phases:  # the GEMV's step 2 starts after its step 1
        ax.axhline(rows - phases.index("reduce"), color="black", linewidth=1.5)
    ax.set_ylabel("work items, in order")
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    handles = [Patch(facecolor=colours[p], label=f"to rank {p}") for p in range(WORLD)]
    handles.append(
        Patch(facecolor="white", edgecolor="grey", hatch="///", label="own part")
    )
    ax.legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(1.01, 1),
        fontsize=7,
        frameon=False,
    )
    ax.set_title(title, fontsize=8.5, pad=20)
    fig.tight_layout()
    path = HERE / f"{stem}.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ascii", action="store_true", help="print, draw nothing")
    args = parser.parse_args()
    for stem, title, per_rank in operators():
        if args.ascii:
            print(f"{title}\n{ascii_picture(per_rank)}\n")
        else:
            print(draw(stem, title, per_rank).relative_to(HERE.parents[1]))


if __name__ == "__main__":
    main()
