"""The `cuda` target: the device level printed as CUDA C (docs/gpu.md §2)."""

from coconet_ir.backend.cuda.printer import CudaPrinter, print_cuda
from coconet_ir.backend.cuda.target import CudaTarget

__all__ = ["CudaPrinter", "CudaTarget", "print_cuda"]
