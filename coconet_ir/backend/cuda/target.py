"""The `cuda` target: `coconet-opt -t cuda` (or `-t 'cuda{main=true}'`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.target import Target

from coconet_ir.backend.cuda.printer import CudaPrinter


@dataclass(frozen=True)
class CudaTarget(Target):
    """Prints a device-level module (docs/gpu/device.md) as one `.cu` file against
    `coco_runtime.h` (docs/gpu/cuda.md)."""

    name = "cuda"

    main: bool = False
    """Also print the standalone benchmark: an `int main(int argc, char
    **argv)` (under nvcc, with the GPU harness; docs/gpu/running.md)."""

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        CudaPrinter(stream=output, main=self.main).print(module)
