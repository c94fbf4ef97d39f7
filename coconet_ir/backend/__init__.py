"""Backends: printers from the device level to source code (docs/gpu/cuda.md)."""
