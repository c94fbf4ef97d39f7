"""The fused kernels through nvcc (`-Werror all-warnings`, sm_80 and sm_90):
they compile, use libcu++'s system-scope atomics, spill nothing, and need few
enough registers that the capped grid (COCO_BLOCKS_PER_SM = 4 blocks of 256
threads per SM) is resident, which the kernel's spin-waits require
(docs/gpu/fused.md, "Limits")."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from fused_emulation import cuda_source
from helpers import example, for_every_arch

import coconet_ir as cc
from coconet_ir.backend.cuda.toolchain import nvcc, nvcc_command

pytestmark = pytest.mark.skipif(nvcc() is None, reason="needs nvcc")

REGISTERS_PER_SM = 65536
BLOCKS_PER_SM = 4
THREADS = 256


ARCHS = ("sm_80", "sm_90")


@pytest.mark.parametrize("name", ["adam", "megatron", "pipeline", "lamb"])
def test_fused_kernels_compile_resident(name: str, tmp_path: Path):
    """For sm_80 and sm_90 in one nvcc call (the host code compiled once);
    ptxas reports every fused kernel for each."""
    module = cc.Pipeline(
        f"coco-optimize,convert-coco-to-gpu{{world=8 threads={THREADS}}}"
    )(example(name))
    source = tmp_path / f"{name}.cu"
    source.write_text(cuda_source(module))
    command = nvcc_command(source, "sm_90", tmp_path / f"{name}.o")
    command = [*for_every_arch(command, ARCHS), "-Xptxas", "-v"]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    report = done.stderr
    fused = re.findall(
        r"Compiling entry function '(\w*fused\w*)' for '(sm_\d+)'"
        r".*?Used (\d+) registers",
        report,
        re.DOTALL,
    )
    assert fused, report
    by_arch = {arch: sorted(k for k, a, _ in fused if a == arch) for arch in ARCHS}
    assert by_arch["sm_80"] and by_arch["sm_80"] == by_arch["sm_90"], by_arch
    fused = [(kernel, registers) for kernel, _, registers in fused]
    for kernel, registers in fused:
        assert int(registers) * THREADS * BLOCKS_PER_SM <= REGISTERS_PER_SM, kernel
    spills = re.findall(r"(\d+) bytes spill stores", report)
    assert all(s == "0" for s in spills), report


HALF_STEP = """
func.func @half(%g: !coco.tensor<4096xf16, local>, %w: !coco.tensor<4096xf16, replicated>) {
  %s = coco.all_reduce %g reduction = sum : !coco.tensor<4096xf16, local> -> !coco.tensor<4096xf16, replicated>
  %w1 = coco.sub %w, %s : (!coco.tensor<4096xf16, replicated>, !coco.tensor<4096xf16, replicated>) -> !coco.tensor<4096xf16, replicated>
  coco.update %w, %w1 : !coco.tensor<4096xf16, replicated>
  func.return
}
"""  # noqa: E501


@pytest.mark.parametrize("name", ["sgd", "megatron", "adam", "lamb", "half"])
def test_fused_kernels_move_16_bytes_per_access(name: str, tmp_path: Path):
    """The fused kernels' element loops load and store 16 bytes at a time
    (docs/gpu/fused.md, "Vector accesses"): nvcc emits ld/st.global.v4 (4
    floats, or 8 halves as 4 words) for the pushes into peers' scratch, the
    reduction's reads, the stores of results to every peer and the gather
    copies."""
    program = cc.parse(HALF_STEP) if name == "half" else example(name)
    module = cc.Pipeline("coco-optimize,convert-coco-to-gpu{world=4}")(program)
    source = tmp_path / f"{name}.cu"
    source.write_text(cuda_source(module))
    ptx = tmp_path / f"{name}.ptx"
    command = nvcc_command(source, "sm_90", ptx)
    command[command.index("-c")] = "-ptx"
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    fused = re.findall(r"\.entry (\w*fused\w*)\((.*?)\n}\n", ptx.read_text(), re.DOTALL)
    assert fused
    element = "u32" if name == "half" else "f32"
    for kernel, body in fused:
        assert re.search(rf"ld\.global(\.nc)?\.v4\.{element}", body), kernel
        assert re.search(rf"st\.global\.v4\.{element}", body), kernel
