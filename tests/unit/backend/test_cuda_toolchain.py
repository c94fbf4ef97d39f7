"""The hand-written runtime test kernels compile with nvcc for sm_80 and sm_90
with `-std=c++17 -Werror all-warnings` against the NCCL and cuBLAS wheels'
headers (compile only: there is no GPU here)."""

from __future__ import annotations

import subprocess

import pytest
from emu_helpers import KERNELS
from helpers import for_every_arch

from coconet_ir.backend.cuda.toolchain import (
    ARCHS,
    cuda_include_dirs,
    nccl_include_dirs,
    nvcc,
    nvcc_command,
)

needs_nvcc = pytest.mark.skipif(nvcc() is None, reason="nvcc is not installed")


def test_command_has_the_contract_flags(tmp_path):
    command = nvcc_command(KERNELS, "sm_90", tmp_path / "k.o")
    assert "-arch=sm_90" in command
    assert command[command.index("-Werror") + 1] == "all-warnings"
    assert "-std=c++17" in command and "-c" in command
    assert any(c.endswith("runtime") for c in command if c.startswith("-I"))


@needs_nvcc
@pytest.mark.skipif(
    not nccl_include_dirs(), reason="the nvidia-nccl wheel is not installed"
)
def test_runtime_kernels_compile_with_nvcc(tmp_path):
    """For sm_80 and sm_90 in one nvcc call (the host code compiled once)."""
    out = tmp_path / "kernels.o"
    command = [
        *for_every_arch(nvcc_command(KERNELS, "sm_90", out), ARCHS),
        "-Xptxas",
        "-v",
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    for arch in ARCHS:
        assert f"for '{arch}'" in result.stderr, result.stderr
    assert out.stat().st_size > 0
    assert len(cuda_include_dirs()) >= 3
