"""coco.concat and coco.split through convert-coco-to-gpu, the CUDA target and
the emulator: one copy kernel per op, outputs equal to the interpreter's, and
a 247-tensor Adam (BERT's layers cut to 15, so that the entry's 991 arguments
stay within ctypes' 1024) in 9 launches."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import coconet_ir as cc
from coconet_ir.analysis.channels import PipelineChannels
from coconet_ir.analysis.device_traffic import device_traffic
from coconet_ir.emulate import compare_runs, emulate

sys.path.insert(0, str(Path(__file__).parents[1] / "passes"))
from test_pass_bucket import SHAPES, adam_bert, step_program


def check(module, world: int, passes: str):
    reference = cc.interpret(module, world, seed=world)
    emulated = emulate(module, world, passes=passes, seed=world)
    verdict = compare_runs(reference, emulated, module)
    assert verdict, f"N={world} after {passes!r}: {verdict.first_difference}"
    assert emulated.stats is not None and emulated.lowered is not None
    stages = PipelineChannels.of(emulated.lowered.coco).stage_indices()
    for name, traffic in device_traffic(emulated.lowered.device).items():
        problems = emulated.stats.disagreements(traffic, stages[name])
        assert not problems, f"@{name}: {problems}"
    return emulated


@pytest.mark.parametrize("world", [2, 4, 8])
@pytest.mark.parametrize("kind", ["sgd", "adam", "lamb"])
def test_bucketed_steps_match_the_interpreter(kind: str, world: int) -> None:
    """coco-bucket alone (replicated and local buckets; LAMB's all_reduces
    bucketed alone), then coco-optimize (Adam's sliced buckets)."""
    module = cc.parse(step_program(kind, SHAPES))
    check(module, world, "coco-bucket")
    if kind == "adam":
        check(module, world, "coco-optimize")


def test_adam_over_247_tensors_is_nine_launches() -> None:
    example = adam_bert()
    shapes = example.Shapes(layers=15, hidden=16, ffn=32, vocab=40, positions=16)
    module = example.build(shapes)
    assert len(example.parameters(shapes)) == 247
    emulated = check(module, 4, "coco-optimize")
    assert emulated.stats is not None
    launches = [
        op for op in emulated.lowered.device.walk() if op.name == "gpu.launch_func"
    ]
    assert len(launches) == 9


def test_a_bucket_of_adam_is_three_launches() -> None:
    """coco-optimize's Adam over six tensors, one bucket: the gradients',
    weights' and moments' concats are ONE launch (consecutive, together at
    most 256 buffers), the fused reduce-scatter + Adam + all-gather one, the
    weights' and moments' splits back one. Emulated = interpreter."""
    module = cc.parse(step_program("adam", SHAPES))
    emulated = check(module, 4, "coco-optimize")
    assert emulated.lowered is not None
    launches = [
        op.kernel.nested_references.data[-1].data
        for op in emulated.lowered.device.walk()
        if op.name == "gpu.launch_func"
    ]
    assert launches == ["step_concat_0", "step_bucket0_rs_fused_0", "step_split_0"]


def test_a_bucket_of_300_tensors_is_copied_in_launches_of_256_buffers() -> None:
    """SGD over 300 tensors, one bucket: each concat (301 buffers) and each
    split is copied by launches of at most 256 buffers (MAX_COPY_ARGS), the
    later ones starting at the column the earlier ones ended. Emulated =
    interpreter on 4 ranks."""
    module = cc.parse(step_program("sgd", [[8]] * 300))
    emulated = check(module, 4, "coco-optimize")
    assert emulated.lowered is not None
    copies = [
        op
        for op in emulated.lowered.device.walk()
        if op.name == "gpu.launch_func"
        and "_rs_fused" not in op.kernel.nested_references.data[-1].data
    ]
    assert len(copies) == 6
    assert max(len(op.operands) for op in copies) <= 256 + 7
