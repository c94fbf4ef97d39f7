"""The `triton` target (docs/triton.md, "The triton target"): a device-level
module's tile-granular fused operators as Triton kernels over
`coconet_ir.triton`, and their host functions."""

from coconet_ir.backend.triton.printer import emit_triton

__all__ = ["emit_triton"]
