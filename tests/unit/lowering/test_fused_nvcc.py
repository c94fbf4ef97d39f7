"""The fused kernels through nvcc (`-Werror all-warnings`, sm_80 and sm_90):
they compile, use libcu++'s system-scope atomics, spill nothing, and need few
enough registers that the capped grid (COCO_BLOCKS_PER_SM = 4 blocks of 256
threads per SM) is resident, which the kernel's spin-waits require
(docs/gpu/fused.md, "Limits")."""

from __future__ import annotations

import re
import subprocess

import pytest
from fused_emulation import cuda_source
from helpers import (
    PTXAS_KERNEL,
    device_only,
    example,
    for_every_arch,
    load_example,
    of_source,
    once_per_run,
    one_unit_command,
)

import coconet_ir as cc
from coconet_ir.backend.cuda.toolchain import nvcc

pytestmark = pytest.mark.skipif(nvcc() is None, reason="needs nvcc")

REGISTERS_PER_SM = 65536
BLOCKS_PER_SM = 4
THREADS = 256


ARCHS = ("sm_80", "sm_90")


RESIDENT = (
    "adam",
    "megatron",
    "pipeline",
    "lamb",
    "megatron_norm",
    "sequence_parallel_norm",
    "sequence_parallel_rmsnorm",
)


@pytest.fixture(scope="module")
def resident_report(tmp_path_factory: pytest.TempPathFactory) -> str:
    """ptxas's report (sm_80 and sm_90, `for_every_arch`, the device code
    only: `device_only`) on every RESIDENT example, lowered at world 8, in
    one nvcc call, once per run (`once_per_run`)."""

    def compute() -> str:
        sources = {
            name: cuda_source(
                cc.Pipeline(
                    f"coco-optimize,convert-coco-to-gpu{{world=8 threads={THREADS}}}"
                )(example(name))
            )
            for name in RESIDENT
        }
        command = device_only(
            one_unit_command(sources, tmp_path_factory.mktemp("resident"))
        )
        done = subprocess.run(
            [*for_every_arch(command, ARCHS), "-Xptxas", "-v"],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        return done.stderr

    return once_per_run(tmp_path_factory, "resident_report", compute)


KNOWN_SPILLS = {("megatron_norm", "sm_90"): 4}
"""Spill stores (bytes) ptxas reports at the 64-register cap, measured
2026-12-02 with nvcc 13: the Megatron layer with its LayerNorm (dropout's
Philox on four lanes, the reduction over 8 ranks, two gathers and the row
statistics in one kernel) at sm_90 (docs/gpu/fused.md, "Limits"). More fails."""


@pytest.mark.parametrize("name", RESIDENT)
def test_fused_kernels_compile_resident(name: str, resident_report: str):
    """ptxas reports every fused kernel for sm_80 and sm_90; none of the
    example's kernels spills (but KNOWN_SPILLS)."""
    kernels = [
        k
        for k in PTXAS_KERNEL.finditer(resident_report)
        if of_source(k["kernel"], name)
    ]
    fused = [k for k in kernels if "fused" in k["kernel"]]
    assert fused, resident_report
    by_arch = {
        arch: sorted(k["kernel"] for k in fused if k["arch"] == arch) for arch in ARCHS
    }
    assert by_arch["sm_80"] and by_arch["sm_80"] == by_arch["sm_90"], by_arch
    for k in fused:
        assert int(k["registers"]) * THREADS * BLOCKS_PER_SM <= REGISTERS_PER_SM, k[0]
    for k in kernels:
        allowed = KNOWN_SPILLS.get((name, k["arch"]), 0) if k in fused else 0
        assert int(k["spills"]) <= allowed, resident_report


HALF_STEP = """
func.func @half(%g: !coco.tensor<4096xf16, local>, %w: !coco.tensor<4096xf16, replicated>) {
  %s = coco.all_reduce %g reduction = sum : !coco.tensor<4096xf16, local> -> !coco.tensor<4096xf16, replicated>
  %w1 = coco.sub %w, %s : (!coco.tensor<4096xf16, replicated>, !coco.tensor<4096xf16, replicated>) -> !coco.tensor<4096xf16, replicated>
  coco.update %w, %w1 : !coco.tensor<4096xf16, replicated>
  func.return
}
"""  # noqa: E501


VECTORIZED = ("sgd", "megatron", "adam", "lamb", "half", "sequence_parallel_norm")


@pytest.fixture(scope="module")
def vectorized_ptx(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The PTX (sm_90) of every VECTORIZED program lowered at world 4, from
    one nvcc call, once per run (`once_per_run`)."""

    def compute() -> str:
        sources = {
            name: cuda_source(
                cc.Pipeline("coco-optimize,convert-coco-to-gpu{world=4}")(
                    cc.parse(HALF_STEP) if name == "half" else example(name)
                )
            )
            for name in VECTORIZED
        }
        directory = tmp_path_factory.mktemp("vectorized")
        command = one_unit_command(sources, directory)
        command[command.index("-c")] = "-ptx"
        command[command.index("-o") + 1] = str(directory / "all.ptx")
        done = subprocess.run(command, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return (directory / "all.ptx").read_text()

    return once_per_run(tmp_path_factory, "vectorized_ptx", compute)


@pytest.mark.parametrize("name", VECTORIZED)
def test_fused_kernels_move_16_bytes_per_access(name: str, vectorized_ptx: str):
    """The fused kernels' element loops load and store 16 bytes at a time
    (docs/gpu/fused.md, "Vector accesses"): nvcc emits ld/st.global.v4 (4
    floats, or 8 halves as 4 words) for the pushes into peers' scratch, the
    reduction's reads, the stores of results to every peer and the gather
    copies."""
    entries = re.findall(
        r"\.entry (\w*fused\w*)\((.*?)\n}\n", vectorized_ptx, re.DOTALL
    )
    fused = [(kernel, body) for kernel, body in entries if of_source(kernel, name)]
    assert fused
    element = "u32" if name == "half" else "f32"
    for kernel, body in fused:
        assert re.search(rf"ld\.global(\.nc)?\.v4\.{element}", body), kernel
        assert re.search(rf"st\.global\.v4\.{element}", body), kernel


def test_megatron_at_model_size_is_vectorized_without_spills(tmp_path):
    """`examples/megatron.py --model` after coco-optimize, at world 1 (a gemm
    and the fused bias -> dropout -> residual kernel) and at world 8 (the
    per-peer form): ptxas spills nothing on sm_90, and the fused kernel loads
    and stores 16 bytes at a time (docs/gpu/cuda.md, "Vectorization")."""
    megatron = load_example("megatron")
    sources = {
        f"world{world}": cuda_source(
            cc.Pipeline(f"coco-optimize,convert-coco-to-gpu{{world={world}}}")(
                megatron.build(megatron.MODEL)
            )
        )
        for world in (1, 8)
    }
    command = one_unit_command(sources, tmp_path)
    done = subprocess.run(
        [*device_only(command), "-Xptxas", "-v"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    kernels = list(PTXAS_KERNEL.finditer(done.stderr))
    assert len(kernels) > 2 and all(k["spills"] == "0" for k in kernels), done.stderr
    command[command.index("-c")] = "-ptx"
    command[command.index("-o") + 1] = str(tmp_path / "all.ptx")
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    entries = re.findall(
        r"\.entry (\w*dropout_fused\w*)\((.*?)\n}\n",
        (tmp_path / "all.ptx").read_text(),
        re.DOTALL,
    )
    assert len(entries) == 2
    for kernel, body in entries:
        assert len(re.findall(r"ld\.global(\.nc)?\.v4\.u32", body)) == 2, kernel
        assert len(re.findall(r"st\.global\.v4\.u32", body)) == 1, kernel
