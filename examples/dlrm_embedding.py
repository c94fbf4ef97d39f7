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

Run: `python examples/dlrm_embedding.py` prints the IR (`--model`: at a
production model's sizes); `coconet-run examples/dlrm_embedding.mlir --world
4` interprets it.
"""

import argparse

from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc

TEST = dict(T=16, R=64, D=16, B=16, L=4, element=cc.f32)
"""Tables, rows per table, embedding width, batch (bags per table), lookups
per bag: small enough to interpret and emulate on 2, 4 and 8 ranks."""

MODEL = dict(T=64, R=1_000_000, D=128, B=2048, L=32, element=cc.bf16)
"""A production-scale DLRM embedding layer (`--model`): to lower and
inspect, too large to interpret here."""


def layer(T, R, D, B, L, element):
    @cc.function
    def dlrm_embedding(
        tables: cc.tensor([T, R, D], element, cc.sliced(0)),
        indices: cc.tensor([T, B, L], cc.i32, cc.sliced(0)),
    ):
        pooled = cc.embedding(tables, indices, "sum", name="lookup")
        return cc.all_to_all(pooled, dim=1, name="to_batch")

    return dlrm_embedding


def build(sizes: dict = TEST) -> ModuleOp:
    """The table-parallel embedding module."""
    return cc.module(layer(**sizes))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="print the example's module")
    parser.add_argument("--model", action="store_true", help="at MODEL sizes")
    sizes = MODEL if parser.parse_args().model else TEST
    print(cc.to_text(build(sizes)), end="")
