"""`coco.embedding` lowered op by op (coconet_ir/lowering/embedding.py): the
device-level IR against the interpreter for every layout and pooling on 2, 4
and 8 ranks (the numpy device evaluator), DLRM's lookup + all_to_all under
the CPU emulation (f32 and bf16, counts against the static prediction), an
index out of range stopping the kernel with the op's message, and nvcc."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from device_eval import run_device
from embedding_programs import LAYOUTS, POOLINGS, program
from helpers import device_only

import coconet_ir as cc
from coconet_ir.backend.cuda.printer import print_cuda
from coconet_ir.backend.cuda.toolchain import nvcc, nvcc_command
from coconet_ir.emulate import compare_runs, emulate
from coconet_ir.interpreter.inputs import draw_inputs

SHAPE = (8, 16, 8, 8, 3)  # T, R, D, B, L: every dim cuts in 8


@pytest.mark.parametrize("world", [2, 4, 8])
@pytest.mark.parametrize("layout", [*LAYOUTS, ("replicated", "replicated")])
@pytest.mark.parametrize("pooling", POOLINGS)
def test_device_ir_matches_the_interpreter(pooling: str, layout, world: int):
    module = program(SHAPE, pooling, *layout)
    lowered = cc.Pipeline(f"convert-coco-to-gpu{{world={world}}}")(module)
    inputs = draw_inputs(module, world, seed=1)
    expected = cc.interpret(module, world, seed=1)["lookup.result0"]
    got = run_device(lowered, world, inputs)["lookup.result0"]
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("element", ["f32", "bf16"])
def test_dlrm_lookup_and_all_to_all_under_the_emulator(element: str):
    """Table parallelism then the all_to_all to the batch split: two kernels
    (the lookup, the all_to_all's packing) and one NCCL all_to_all per call;
    each rank sends (N-1)/N of its pooled block."""
    module = cc.parse(
        """
func.func @dlrm(%t: !coco.tensor<8x16x8xELT, sliced<0>>, %i: !coco.tensor<8x8x3xi32, sliced<0>>) -> !coco.tensor<8x8x8xELT, sliced<1>> {
  %e = coco.embedding %t, %i pooling = sum : (!coco.tensor<8x16x8xELT, sliced<0>>, !coco.tensor<8x8x3xi32, sliced<0>>) -> !coco.tensor<8x8x8xELT, sliced<0>>
  %a = coco.all_to_all %e dim = 1 : !coco.tensor<8x8x8xELT, sliced<0>> -> !coco.tensor<8x8x8xELT, sliced<1>>
  func.return %a : !coco.tensor<8x8x8xELT, sliced<1>>
}""".replace("ELT", element)  # noqa: E501
    )
    reference = cc.interpret(module, 4, seed=2)
    run = emulate(module, 4, passes="", seed=2, threads=32)
    verdict = compare_runs(reference, run, module)
    assert verdict, verdict.first_difference
    assert run.stats is not None
    block = 2 * 8 * 8 * (2 if element == "bf16" else 4)  # T/N x B x D per rank
    assert (run.stats.launches_per_call(0).sum(axis=-1) == 2).all()
    assert (run.stats.bytes_per_rank(0) == 3 * block // 4).all()


def test_an_index_out_of_range_stops_the_kernel():
    module = program((2, 4, 2, 2, 2), "sum", "replicated", "replicated")
    inputs = {
        "lookup.arg0": np.ones((2, 4, 2), np.float32),
        "lookup.arg1": np.array([[[0, 1], [2, 3]], [[3, 0], [1, 9]]], np.int32),
    }
    with pytest.raises(cc.CocoError, match=r"an index is out of range \[0, 4\)"):
        emulate(module, 2, passes="", inputs=inputs, threads=4)


@pytest.mark.skipif(nvcc() is None, reason="needs nvcc")
def test_the_lookup_compiles_with_nvcc(tmp_path: Path):
    module = program(SHAPE, "mean", "sliced<1>", "replicated", "bf16")
    lowered = cc.Pipeline("convert-coco-to-gpu{world=8}")(module)
    source = tmp_path / "lookup.cu"
    with source.open("w") as out:
        print_cuda(lowered, out)
    command = [
        *device_only(nvcc_command(source, "sm_90", tmp_path / "lookup.o")),
        "-Xptxas",
        "-v",
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "0 bytes spill stores" in done.stderr
