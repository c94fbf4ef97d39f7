"""coconet-ir: CoCoNet's distributed programs as an MLIR-style IR on xDSL."""
