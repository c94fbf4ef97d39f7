"""The device level through real MLIR (docs/gpu/mlir.md).

`upstream_kernels(module)` keeps, of a device-level module, the kernels whose
bodies use only upstream ops and types (gpu, arith, scf, memref, math, cf):
the ones mlir-opt 22's own NVVM pipeline compiles to PTX. It is the target
`-t upstream-kernels` (printed in the generic form, which mlir-opt reads
without knowing coco_gpu):

    coconet-opt FILE -p 'convert-coco-to-gpu{world=4}' -t upstream-kernels \\
      | mlir-opt --pass-pipeline='builtin.module(nvvm-attach-target{chip=sm_90},
          gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm),
          reconcile-unrealized-casts,gpu-module-to-binary{format=isa})' \\
      | python -m coconet_ir.backend.cuda.mlir_interop ptx > kernels.ptx
    ptxas -arch=sm_90 kernels.ptx -o kernels.cubin

`ptx_of(text)` reads the PTX back out of the `gpu.binary` mlir-opt prints
(`python -m coconet_ir.backend.cuda.mlir_interop ptx`).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects import gpu
from xdsl.dialects.builtin import MemRefType, ModuleOp, UnitAttr
from xdsl.ir import Attribute, Block, Region
from xdsl.printer import Printer
from xdsl.utils.target import Target

from coconet_ir.dialects.gpu import FuncOp, is_kernel
from coconet_ir.dialects.gpu import ModuleOp as GpuModuleOp

UPSTREAM_DIALECTS = frozenset({"gpu", "arith", "scf", "memref", "math", "cf"})
"""The dialects whose ops MLIR's NVVM pipeline lowers in a kernel."""


def is_upstream_type(t: Attribute) -> bool:
    if isinstance(t, MemRefType):
        return is_upstream_type(t.element_type)
    return not t.name.startswith(("coco", "coco_gpu"))


def is_upstream_kernel(kernel: gpu.FuncOp) -> bool:
    """Whether every op and type of `kernel` is upstream MLIR's."""
    if not all(is_upstream_type(t) for t in kernel.function_type.inputs.data):
        return False
    for op in kernel.body.walk():
        if op.name.split(".")[0] not in UPSTREAM_DIALECTS:
            return False
        if not all(is_upstream_type(r.type) for r in op.results):
            return False
    return True


def upstream_kernels(module: ModuleOp) -> ModuleOp:
    """A new module (`gpu.container_module`) holding a copy of each
    `gpu.module` of `module` with only its upstream-only kernels."""
    copies: list[GpuModuleOp] = []
    for kernels in module.ops:
        if not isinstance(kernels, gpu.ModuleOp):
            continue
        body = Block()
        for op in kernels.body.ops:
            if isinstance(op, gpu.FuncOp) and is_kernel(op) and is_upstream_kernel(op):
                body.add_op(as_mlir_kernel(op))
        copies.append(
            GpuModuleOp.create(
                properties={"sym_name": kernels.sym_name}, regions=[Region(body)]
            )
        )
    result = ModuleOp(copies)
    result.attributes["gpu.container_module"] = UnitAttr()
    return result


def as_mlir_kernel(kernel: gpu.FuncOp) -> FuncOp:
    """A copy of `kernel` marked MLIR's way (`gpu.kernel`), not xDSL's."""
    clone = kernel.clone()
    copy = FuncOp(
        kernel.sym_name.data,
        clone.function_type,
        clone.body.clone(),
        kernel=True,
    )
    copy.attributes |= {
        k: v for k, v in kernel.attributes.items() if k not in ("sym_name",)
    }
    return copy


@dataclass(frozen=True)
class UpstreamKernelsTarget(Target):
    """`-t upstream-kernels`: the kernels mlir-opt's NVVM pipeline can take,
    in the generic form."""

    name = "upstream-kernels"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        Printer(stream=output, print_generic_format=True).print_op(
            upstream_kernels(module)
        )
        output.write("\n")


ASSEMBLY = re.compile(r'assembly = "((?:[^"\\]|\\.)*)"')


def unescape(text: str) -> str:
    """MLIR's string escapes: `\\XX` (hex), `\\\\`, `\\"`, `\\n`, `\\t`."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1 : i + 3]
        if re.fullmatch(r"[0-9A-Fa-f]{2}", nxt):
            out.append(chr(int(nxt, 16)))
            i += 3
        else:
            out.append({"n": "\n", "t": "\t"}.get(text[i + 1], text[i + 1]))
            i += 2
    return "".join(out)


def ptx_of(binary_text: str) -> list[str]:
    """The PTX of every `#gpu.object` in mlir-opt's output of
    `gpu-module-to-binary{format=isa}`."""
    return [unescape(m.group(1)) for m in ASSEMBLY.finditer(binary_text)]


def main(argv: list[str] | None = None) -> int:
    """`ptx [FILE]`: the PTX in a gpu.binary (stdin by default)."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] != "ptx":
        print("usage: python -m coconet_ir.backend.cuda.mlir_interop ptx [FILE]")
        return 2
    text = open(args[1]).read() if len(args) > 1 else sys.stdin.read()
    found = ptx_of(text)
    if not found:
        print("error: no gpu.object assembly in the input", file=sys.stderr)
        return 1
    sys.stdout.write("\n".join(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
