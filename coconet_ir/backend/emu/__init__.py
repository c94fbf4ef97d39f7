"""The CPU emulation of the emitted CUDA C (docs/gpu/emulation.md): build a `.cu`
with g++ against `coco_emu.h`, run its entries on a world of ranks in a
subprocess, read back outputs and statistics."""

from coconet_ir.backend.emu.build import EmulatorCompileError, compile_emulated
from coconet_ir.backend.emu.run import EmulationError, EntryCall, run_emulated

__all__ = [
    "EmulationError",
    "EmulatorCompileError",
    "EntryCall",
    "compile_emulated",
    "run_emulated",
]
