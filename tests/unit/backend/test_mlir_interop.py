"""MLIR interop (docs/gpu/mlir.md): the gpu syntax is MLIR's, `upstream_kernels`
keeps the kernels mlir-opt's NVVM pipeline takes, `ptx_of` reads PTX back.
The mlir-opt and ptxas runs themselves are lit tests
(tests/filecheck/mlir-compat/gpu-*.mlir)."""

from __future__ import annotations

import io

from helpers import ROOT
from xdsl.dialects import gpu
from xdsl.printer import Printer

import coconet_ir as cc
from coconet_ir.backend.cuda.mlir_interop import ptx_of, unescape, upstream_kernels
from coconet_ir.dialects.gpu import KERNEL_ATTR, FuncOp, is_kernel

FAMILIES = ROOT / "tests" / "filecheck" / "backend" / "cuda"


def kernel_names(module) -> list[str]:
    return [op.sym_name.data for op in module.walk() if isinstance(op, gpu.FuncOp)]


def test_upstream_kernels_leaves_out_coco_gpu_kernels():
    assert (
        kernel_names(upstream_kernels(cc.parse_file(str(FAMILIES / "peers.mlir"))))
        == []
    )
    kept = upstream_kernels(cc.parse_file(str(FAMILIES / "kernels.mlir")))
    assert kernel_names(kept) == ["scale", "transpose", "inplace"]
    assert "gpu.container_module" in kept.attributes
    assert all(is_kernel(k) for k in kept.walk() if isinstance(k, gpu.FuncOp))


def test_kernels_are_marked_mlirs_way():
    kernel = FuncOp("k", ([], []), kernel=True)
    assert KERNEL_ATTR in kernel.attributes and kernel.kernel is None
    out = io.StringIO()
    Printer(stream=out, print_generic_format=True).print_op(kernel)
    assert "gpu.kernel" in out.getvalue() and "kernel}>" not in out.getvalue()


def test_ptx_is_read_back_from_a_gpu_binary():
    binary = (
        'gpu.binary @kernels  [#gpu.object<#nvvm.target<chip = "sm_90">, '
        'assembly = "//\\0A.version 7.8\\0A\\09// .globl\\09k'
        '\\0A.entry k(\\22x\\22)\\0A">]'
    )
    (ptx,) = ptx_of(binary)
    assert ptx == '//\n.version 7.8\n\t// .globl\tk\n.entry k("x")\n'
    assert unescape("a\\\\b") == "a\\b"
