"""Vectorized grid-stride loops (docs/gpu.md §2, "Vectorization")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from xdsl.dialects import gpu

if TYPE_CHECKING:
    from coconet_ir.backend.cuda.printer import CudaPrinter


@dataclass(frozen=True)
class VectorPlan:
    width: int


def vector_plan(op: gpu.FuncOp) -> VectorPlan | None:
    return None


def print_vectorized(printer: CudaPrinter, op: gpu.FuncOp, plan: VectorPlan) -> None:
    printer.print_body(op.body.block)
