"""The device-level traffic of the NCCL collectives pinned rank by rank
(issue 25's mutation run: which rank of a broadcast's ring sends nothing went
unnoticed, as no example broadcasts). NCCL's ring broadcast from root `K`
passes the buffer along `K -> K+1 -> ...`: every rank sends `S` to its
successor except the root's predecessor."""

from __future__ import annotations

import pytest

import coconet_ir as cc
from coconet_ir.analysis.device_traffic import device_traffic
from coconet_ir.costmodel import machine, predict

T_LOCAL = "!coco.tensor<64xf32, local>"
T_REPLICATED = "!coco.tensor<64xf32, replicated>"
S = 64 * 4


def broadcast(root: int) -> str:
    return f"""func.func @f(%a: {T_LOCAL}) -> {T_REPLICATED} {{
  %r = coco.broadcast %a root = {root} : {T_LOCAL} -> {T_REPLICATED}
  func.return %r : {T_REPLICATED}
}}"""


@pytest.mark.parametrize(("world", "root"), [(4, 0), (4, 2), (8, 5)])
def test_broadcast_ring_skips_the_root_predecessor(world: int, root: int) -> None:
    lowered = cc.Pipeline(f"convert-coco-to-gpu{{world={world}}}")(
        cc.parse(broadcast(root))
    )
    (traffic,) = device_traffic(lowered).values()
    (matrix,) = traffic.sent.values()
    for r in range(world):
        expected = [0] * world
        if r != (root - 1) % world:
            expected[(r + 1) % world] = S
        assert matrix[r].tolist() == expected, r
    assert traffic.library_calls["nccl"] == 1
    (prediction,) = predict(lowered, machine("h100x8")).values()
    assert prediction.bytes_sent == S
