"""`coco.embedding` test programs shared by the interpreter's and the
lowering's tests: a lookup with its tables and indices laid out as asked,
finished by the collective that makes its result replicated."""

from __future__ import annotations

import numpy as np

import coconet_ir as cc

PROGRAM = """
func.func @lookup(%t: {tables}, %i: {indices}) -> {out} {{
  %e = coco.embedding %t, %i pooling = {pooling} : ({tables}, {indices}) -> {pooled}
  {finish}
  func.return {returned} : {out}
}}
"""


def tensor(dims, element: str, layout: str) -> str:
    return f"!coco.tensor<{'x'.join(map(str, dims))}x{element}, {layout}>"


def program(
    shape: tuple[int, ...], pooling: str, tables: str, indices: str, element="f32"
):
    """The lookup with tables laid out `tables` and indices `indices`,
    finished by the collective that makes its result replicated."""
    t, r, d, b, length = shape
    pooled_layout = {
        ("replicated", "replicated"): "replicated",
        ("sliced<0>", "sliced<0>"): "sliced<0>",
        ("sliced<0>", "replicated"): "sliced<0>",
        ("sliced<1>", "replicated"): "local",
        ("sliced<2>", "replicated"): "sliced<2>",
        ("replicated", "sliced<1>"): "sliced<1>",
    }[tables, indices]
    pooled = tensor((t, b, d), element, pooled_layout)
    out = tensor((t, b, d), element, "replicated")
    if pooled_layout == "replicated":
        finish, returned = "", "%e"
    elif pooled_layout == "local":
        reduction = "max" if pooling == "max" else "sum"
        finish = f"%o = coco.all_reduce %e reduction = {reduction} : {pooled} -> {out}"
        returned = "%o"
    else:
        finish, returned = f"%o = coco.all_gather %e : {pooled} -> {out}", "%o"
    return cc.parse(
        PROGRAM.format(
            tables=tensor((t, r, d), element, tables),
            indices=tensor((t, b, length), "i32", indices),
            pooling=pooling,
            pooled=pooled,
            out=out,
            finish=finish,
            returned=returned,
        )
    )


def embedding_bag(tables: np.ndarray, indices: np.ndarray, pooling: str) -> np.ndarray:
    """PyTorch's EmbeddingBag, table by table, in f64."""
    rows = tables.astype(np.float64)[np.arange(len(tables))[:, None, None], indices]
    if pooling == "max":
        return rows.max(axis=2)
    total = rows.sum(axis=2)
    return total / indices.shape[2] if pooling == "mean" else total


POOLINGS = ["sum", "mean", "max"]
LAYOUTS = [
    ("sliced<0>", "sliced<0>"),
    ("sliced<0>", "replicated"),
    ("sliced<1>", "replicated"),
    ("sliced<2>", "replicated"),
    ("replicated", "sliced<1>"),
]
