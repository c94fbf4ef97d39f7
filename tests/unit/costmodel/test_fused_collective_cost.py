"""The device-level cost of a fused collective kernel, pinned at known world
sizes (issue 25: a mutation making it `N/(N-1)` too large went unnoticed, as
the two levels are only compared within 2x at toy sizes).

A fused kernel over a tensor of `S` bytes stores `S/N` bytes into each of its
`N-1` peers per phase: `(N-1)/N · S` per phase and rank, the ring's count.
Its launch carries the per-peer bytes (`coco_gpu.peer_bytes`); the traffic
analysis, the cost model's kernel time and its bytes sent read that."""

# ruff: noqa: E501  (IR lines)
from __future__ import annotations

import pytest
from helpers import example, ops_of
from xdsl.dialects import gpu

import coconet_ir as cc
from coconet_ir.analysis.device_traffic import device_traffic
from coconet_ir.costmodel import formulas, machine, predict
from coconet_ir.dialects.coco_gpu import PEER_BYTES_ATTR

H100 = machine("h100x8")
S = 1024 * 4
"""The gradient's bytes in both programs (1024 f32)."""

REDUCE_SCATTER = """
func.func @rs(%g: !coco.tensor<1024xf32, local>, %w: !coco.tensor<1024xf32, sliced<0>>, %lr: !coco.tensor<f32, replicated>) {
  %s = coco.reduce_scatter %g reduction = sum dim = 0 {name = "grad"} : !coco.tensor<1024xf32, local> -> !coco.tensor<1024xf32, sliced<0>>
  %step = coco.mul %lr, %s : (!coco.tensor<f32, replicated>, !coco.tensor<1024xf32, sliced<0>>) -> !coco.tensor<1024xf32, sliced<0>>
  %w1 = coco.sub %w, %step : (!coco.tensor<1024xf32, sliced<0>>, !coco.tensor<1024xf32, sliced<0>>) -> !coco.tensor<1024xf32, sliced<0>>
  coco.update %w, %w1 : !coco.tensor<1024xf32, sliced<0>>
  func.return
}
"""
"""ZeRO's SGD step on a sliced weight: one fused kernel, one phase (the
reduce-scatter)."""

# (world, phases) -> bytes one rank sends: (N-1)/N · S per phase
EXPECTED = {(4, 1): 3072, (8, 1): 3584, (4, 2): 6144, (8, 2): 7168}


def programs():
    return {"rs": (cc.parse(REDUCE_SCATTER), 1), "sgd": (example("sgd"), 2)}


@pytest.fixture
def fused_kernel_calls(monkeypatch) -> list[int]:
    """The `sent` bytes of every `formulas.fused_kernel_s` the cost model
    computes (both levels call it through the module)."""
    calls: list[int] = []
    original = formulas.fused_kernel_s

    def spy(flops, element, moved, sent, signals, world, machine):
        calls.append(sent)
        return original(flops, element, moved, sent, signals, world, machine)

    monkeypatch.setattr(formulas, "fused_kernel_s", spy)
    return calls


@pytest.mark.parametrize("world", [4, 8])
@pytest.mark.parametrize("name", ["rs", "sgd"])
def test_fused_kernel_sends_n_minus_1_over_n_of_s_per_phase(
    name: str, world: int, fused_kernel_calls: list[int]
) -> None:
    module, phases = programs()[name]
    expected = EXPECTED[world, phases]
    assert expected == phases * (world - 1) * S // world
    lowered = cc.Pipeline(f"coco-optimize,convert-coco-to-gpu{{world={world}}}")(module)
    (launch,) = [
        op
        for op in ops_of(lowered, gpu.LaunchFuncOp)
        if PEER_BYTES_ATTR in op.attributes
    ]
    assert launch.attributes[PEER_BYTES_ATTR].value.data == phases * S // world
    (traffic,) = device_traffic(lowered).values()
    assert traffic.bytes_per_rank().tolist() == [expected] * world
    assert traffic.sent[0].diagonal().tolist() == [0] * world

    fused_kernel_calls.clear()  # coco-optimize predicts too (never_slower)
    (prediction,) = predict(lowered, H100).values()
    assert fused_kernel_calls == [expected], "the device level's fused kernel"
    assert prediction.bytes_sent == expected
    tensor_level = cc.Pipeline("coco-optimize")(module)
    fused_kernel_calls.clear()
    (before,) = predict(tensor_level, H100, world).values()
    assert fused_kernel_calls == [expected], "the tensor level's fused kernel"
    assert before.bytes_sent == expected


@pytest.mark.parametrize("world", [4, 8])
def test_fused_kernel_time_at_a_known_size(world: int) -> None:
    """The fused SGD kernel's time is `formulas.fused_kernel_s` of its
    memory bytes and `2 (N-1)/N · S` sent: with a 1 GiB gradient the link
    dominates, so sending `N/(N-1)` too much shows in the total."""
    big = example("sgd")
    text = cc.to_text(big).replace("1024xf32", f"{1 << 28}xf32")
    lowered = cc.Pipeline(f"coco-optimize,convert-coco-to-gpu{{world={world}}}")(
        cc.parse(text)
    )
    (prediction,) = predict(lowered, H100).values()
    gradient = (1 << 28) * 4
    sent = 2 * (world - 1) * gradient // world
    link = formulas.link_bytes_per_s(world, H100)
    assert prediction.bytes_sent == sent
    # the kernel overlaps its memory traffic with the link; the link is
    # longer, so the time is at least sent/link and under 1.3x of it
    assert sent / link <= prediction.time_s < 1.3 * sent / link
    assert prediction.time_s < world / (world - 1) * sent / link
