"""DLRM's table-parallel embedding layer (Naumov et al., 2019; the first fused
computation-collective operator of Punniyamurthy et al., 2023): `T` embedding
tables `[T, R, D]` cut along the tables (each rank owns `T/N` of them), a
pooled lookup (`sum` of `L` rows per bag) of the whole batch in the rank's
tables, then an `all_to_all` to the batch split, so rank `r` ends with its
`B/N` samples' pooled rows of every table (the input of DLRM's feature
interaction). The same module as `dlrm_embedding.mlir`.

The indices `[T, B, L]` (i32, each in `[0, R)`) are cut like the tables.
`coco-optimize` fuses the lookup and the all_to_all into one `coco.fusion`
(`coco-fuse-collective`), which the lowering makes ONE tile-granular kernel
(docs/fused-operators.md).

Run: `python examples/dlrm_embedding.py` prints the IR; `coconet-run
examples/dlrm_embedding.mlir --world 4` interprets it.
"""

from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc

T, R, D = 16, 64, 16  # tables, rows per table, embedding width
B, L = 16, 4  # batch (bags per table), lookups per bag


@cc.function
def dlrm_embedding(
    tables: cc.tensor([T, R, D], cc.f32, cc.sliced(0)),
    indices: cc.tensor([T, B, L], cc.i32, cc.sliced(0)),
):
    pooled = cc.embedding(tables, indices, "sum", name="lookup")
    return cc.all_to_all(pooled, dim=1, name="to_batch")


def build() -> ModuleOp:
    """The table-parallel embedding module."""
    return cc.module(dlrm_embedding)


if __name__ == "__main__":
    print(cc.to_text(build()), end="")
