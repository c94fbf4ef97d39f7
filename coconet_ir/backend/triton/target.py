"""The `triton` target: `coconet-opt -t triton`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.target import Target

from coconet_ir.backend.triton.printer import emit_triton


@dataclass(frozen=True)
class TritonTarget(Target):
    """Prints a device-level module as a Python module of Triton kernels and
    host functions (docs/triton.md)."""

    name = "triton"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        output.write(emit_triton(module))
