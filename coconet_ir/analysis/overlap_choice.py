"""How coco-optimize overlaps a matmul with its collectives: not at all, in
row chunks (`coco.overlap chunks = K`) or one chunk per peer
(`coco.per_peer`), by a first-order estimate of each schedule's time on one
reference machine (docs/passes/coco-overlap.md, "Choosing the overlap").

The estimate, per rank, for a group of ops on N ranks:

- compute `C` = matmul FLOPs / the dense peak of the matmul's element type
  + elementwise bytes (read and write each element) / HBM bandwidth;
- communication `M` = bytes sent / link bandwidth (`coconet_ir.analysis.costs`);
- latency: a ring collective costs `base + (N-1) hop`, a peer copy one `hop`;
- launches: the host issues one kernel or collective every `L`; kernels run
  asynchronously, so issuing overlaps the GPU's work and only bounds the
  time from below: `time = max(device time, launches L)`. A per-peer block
  transfer is `TRANSFER_LAUNCHES` flag kernels.

| schedule | device time | launches | with |
| --- | --- | --- | --- |
| none | `C + M + latency` | `n` | |
| K chunks | `c + m + (K-1) max(c, m)` | `K n` | `c = C/K, m = M/K + latency` |
| per peer | `c + (N-1) max(c, m)` | `N k + 4 (N-1) g` | `c = C/N, m = M/(N-1) + hop` |

(`n`: the group's kernels and collectives; `k`: the compute launches of one
step; `g`: the gathered inputs and scattered outputs, each moved by `N-1`
transfers.) A chunked pipeline fills with one chunk's compute and drains
with one chunk's communication; the per-peer one starts on the rank's own
block (no wait) and each later step waits only for its block. Overlap pays
when `C` and `M` are comparable and large against the latencies and
launches; the issue-12 cost model replaces this estimate with a calibrated
one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from xdsl.ir import Operation

from coconet_ir.analysis.costs import Costs, per_rank_elements
from coconet_ir.dialects import coco
from coconet_ir.dialects.coco import ELEMENTWISE_OPS, element_info


@dataclass(frozen=True)
class Machine:
    """What the estimate knows of a GPU and its links."""

    dense_flops: dict[str, float]
    """Dense matmul peak by element type, FLOP/s."""
    hbm_bytes_per_s: float
    link_bytes_per_s: float
    """Per GPU, one direction."""
    collective_base_s: float
    hop_s: float
    launch_s: float


A100_NVLINK = Machine(
    # NVIDIA A100 Tensor Core GPU datasheet (SXM4): 312 TFLOP/s dense
    # FP16/BF16 tensor cores, 19.5 TFLOP/s FP32 (no TF32) and FP64 tensor.
    dense_flops={"f16": 312e12, "bf16": 312e12, "f32": 19.5e12, "f64": 19.5e12},
    # Same datasheet, A100 80GB SXM: 2,039 GB/s HBM2e.
    hbm_bytes_per_s=2.039e12,
    # Same datasheet: NVLink 600 GB/s per GPU, both directions together.
    link_bytes_per_s=300e9,
    # NCCL src/graph/tuning.cc: ring, Simple protocol, base latency 8.4 us
    # and 3.4 us per NVLink hop.
    collective_base_s=8.4e-6,
    hop_s=3.4e-6,
    # NVIDIA developer blog "Getting Started with CUDA Graphs" (2019): short
    # kernels launched back to back take about 3.8 us each, launch included
    # (the rate at which a host issues them).
    launch_s=3.8e-6,
)


TRANSFER_LAUNCHES = 4
"""Launches of one per-peer block transfer: the receiver's credit, the
sender's wait and arrival signal, the receiver's arrival wait (one-thread
flag kernels; the copy itself runs on a copy engine; docs/gpu.md, "Per-peer
overlap")."""


class OverlapMode(Enum):
    NONE = "none"
    CHUNKS = "chunks"
    PER_PEER = "per peer"


@dataclass(frozen=True)
class Work:
    """The compute and communication of a group of ops, per rank."""

    compute_s: float
    communication_s: float
    collectives: int
    launches: int
    compute_launches: int

    @staticmethod
    def of(ops: Iterable[Operation], world: int, machine: Machine) -> Work:
        ops = list(ops)
        costs = Costs(world)
        costs.add_ops(ops)
        flops_per_s = max(
            (
                machine.dense_flops.get(str(coco.tensor_type(op.lhs).element_type), 0)
                for op in ops
                if isinstance(op, coco.MatmulOp)
            ),
            default=machine.dense_flops["f32"],
        )
        elementwise_bytes = sum(
            2 * element_bytes(op, world)
            for op in ops
            if isinstance(op, ELEMENTWISE_OPS)
        )
        compute_launches = sum(
            1 for op in ops if isinstance(op, (coco.MatmulOp, *ELEMENTWISE_OPS))
        )
        collectives = sum(costs.collectives.values())
        return Work(
            compute_s=costs.matmul_flops / flops_per_s
            + elementwise_bytes / machine.hbm_bytes_per_s,
            communication_s=costs.bytes_sent / machine.link_bytes_per_s,
            collectives=collectives,
            launches=compute_launches + collectives,
            compute_launches=compute_launches,
        )


def element_bytes(op: Operation, world: int) -> int:
    """The bytes of the result one rank computes for an elementwise op."""
    t = coco.tensor_type(op.results[0])
    return per_rank_elements(t, world) * element_info(t.element_type).bytes


def estimate(
    work: Work, mode: OverlapMode, world: int, chunks: int, machine: Machine
) -> float:
    """The estimated seconds of `work` under `mode` (module docstring)."""
    latency = work.collectives * (
        machine.collective_base_s + (world - 1) * machine.hop_s
    )
    if mode is OverlapMode.NONE:
        device = work.compute_s + work.communication_s + latency
        launches = work.launches
    elif mode is OverlapMode.CHUNKS:
        c = work.compute_s / chunks
        m = work.communication_s / chunks + latency
        device = c + m + (chunks - 1) * max(c, m)
        launches = chunks * work.launches
    else:
        c = work.compute_s / world
        m = work.communication_s / max(world - 1, 1) + machine.hop_s
        device = c + (world - 1) * max(c, m)
        transfers = (world - 1) * work.collectives
        launches = world * work.compute_launches + TRANSFER_LAUNCHES * transfers
    return max(device, launches * machine.launch_s)
