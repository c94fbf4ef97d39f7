"""The converted examples compute what the reference interpreter computes:
the device-level IR is run by a numpy evaluator (device_eval.py) on the
interpreter's inputs, and every result and updated parameter is compared."""

from __future__ import annotations

import device_eval
import numpy as np
import pytest
from device_eval import run_device
from helpers import EXAMPLES_DIR
from xdsl.dialects import gpu, scf

import coconet_ir as cc
from coconet_ir.dialects.coco import element_info

EXAMPLES = sorted(p.stem for p in EXAMPLES_DIR.glob("*.mlir"))


CASES = [
    pytest.param(name, optimize, world, id=f"{name}-{kind}-{world}")
    for name in EXAMPLES
    for optimize, kind in ((False, "original"), (True, "optimized"))
    for world in (2, 4)
    # The optimized GEMV is one tile kernel whose every thread the evaluator
    # runs in Python (10 s a world): at world 2 here; at 2, 4 and 8 on small
    # shapes in test_tile_collectives, and at this size under the emulator.
    # The same for the clipped AdamW's fused kernel (20,544 elements, 8 s a
    # world): at world 2 here, on 2, 4 and 8 ranks under the emulator
    # (test_fused_reductions_emulated).
    if not (name in ("gemv_allreduce", "adamw_clip") and optimize and world == 4)
]


@pytest.mark.parametrize(("name", "optimize", "world"), CASES)
def test_lowered_example_matches_the_interpreter(name: str, optimize: bool, world: int):
    check_example(name, optimize, world)


@pytest.mark.parametrize("name", ["sgd", "adam", "megatron", "pipeline"])
def test_fused_kernels_scalar_loops(name: str, monkeypatch: pytest.MonkeyPatch):
    """With buffers that do not start at a multiple of 16 bytes, the fused
    kernels run their scalar loops instead of the vector ones, with the same
    results (docs/gpu/fused.md, "Vector accesses")."""
    monkeypatch.setattr(device_eval, "POINTER_OFFSET", 4)
    check_example(name, True, 4)


def check_example(name: str, optimize: bool, world: int) -> None:
    module = cc.parse_file(str(EXAMPLES_DIR / f"{name}.mlir"))
    if optimize:
        module = cc.Pipeline("coco-optimize")(module)
    expected = cc.interpret(module, world, seed=world)
    lowered = cc.Pipeline(f"convert-coco-to-gpu{{world={world}}}")(module)
    got = run_device(lowered, world, expected.inputs)
    assert expected.outputs
    for key, output in expected.outputs.items():
        rtol, atol = element_info(output.type.element_type).tolerance
        actual = got[key].astype(np.float64)
        np.testing.assert_allclose(
            actual, output.value.astype(np.float64), rtol=rtol, atol=atol, err_msg=key
        )


SUITE = EXAMPLES_DIR.parent / "tests" / "filecheck" / "lowering" / "convert-coco-to-gpu"
PROGRAMS = ["bufferize", "elementwise", "compute", "collectives", "regions"]


def function_groups(module) -> list[list[str]]:
    """The functions of a module, by pipeline (one group per entry)."""
    from coconet_ir.analysis.channels import PipelineChannels

    graph = PipelineChannels.of(module).stages()
    import networkx as nx

    return [sorted(group) for group in nx.connected_components(graph)]


@pytest.mark.parametrize("name", PROGRAMS)
def test_lowering_tests_match_the_interpreter(name: str):
    """Every function of the FileCheck suite's programs (every op, layouts,
    halves, i32, in-place updates, parallel updates) on its world size."""
    text = (SUITE / f"{name}.mlir").read_text()
    module = cc.parse(text)
    world_attr = module.attributes["coco.world_size"]
    world = world_attr.value.data  # type: ignore[attr-defined]
    lowered = cc.Pipeline("convert-coco-to-gpu")(cc.parse(text))
    for group in function_groups(module):
        expected = cc.interpret(module, world, seed=1, entry=group[0])
        got = run_device(lowered, world, expected.inputs, only=set(group))
        for key, output in expected.outputs.items():
            rtol, atol = element_info(output.type.element_type).tolerance
            np.testing.assert_allclose(
                got[key].astype(np.float64),
                output.value.astype(np.float64),
                rtol=rtol,
                atol=atol,
                err_msg=f"{name}: {key}",
            )


GUARDED_KERNEL = """
builtin.module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @guarded(%x: memref<10xf32>, %y: memref<10xf32>, %w: memref<16xf32>,
                      %n: index) kernel {
      %tid = gpu.thread_id x
      %threads = gpu.block_dim x
      %c16 = arith.constant 16 : index
      scf.for %e = %tid to %c16 step %threads {
        %in = arith.cmpi ult, %e, %n : index
        %v = scf.if %in -> (f32) {
          %a = memref.load %x[%e] : memref<10xf32>
          scf.yield %a : f32
        } else {
          %z = arith.constant -1.0 : f32
          scf.yield %z : f32
        }
        memref.store %v, %w[%e] : memref<16xf32>
        scf.if %in {
          %twice = arith.addf %v, %v : f32
          memref.store %twice, %y[%e] : memref<10xf32>
        }
      }
      gpu.return
    }
  }
}
"""


@pytest.mark.parametrize("at_once", [True, False], ids=["threads", "index-by-index"])
def test_guarded_thread_loop(at_once: bool, monkeypatch: pytest.MonkeyPatch):
    """A thread loop whose guard differs by thread: run at once, each branch
    loads and stores at its own threads' indices only (the unguarded load of
    x[10..15] would raise), as it does index by index."""
    kernel = next(
        k for k in cc.parse(GUARDED_KERNEL).walk() if isinstance(k, gpu.FuncOp)
    )
    loop = next(o for o in kernel.walk() if isinstance(o, scf.ForOp))
    assert device_eval.is_thread_loop(loop)
    if not at_once:
        monkeypatch.setattr(device_eval, "is_thread_loop", lambda _: False)
    x = np.arange(10, dtype=np.float32) + 1
    y, w = np.zeros(10, np.float32), np.zeros(16, np.float32)
    env: device_eval.Env = dict(zip(kernel.body.block.args, [x, y, w, 10]))
    device_eval.run_scalar_block(
        kernel.body.block, env, 0, device_eval.PeerWorld(1, 0, 0)
    )
    np.testing.assert_array_equal(y, 2 * x)
    np.testing.assert_array_equal(w, np.concatenate([x, np.full(6, -1, np.float32)]))
