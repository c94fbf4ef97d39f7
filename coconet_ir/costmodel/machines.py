"""Machine descriptions the cost model predicts for (docs/performance.md,
"Machines"): per-GPU compute and memory, the links between GPUs, and the
efficiencies that turn peaks into what kernels reach. Every constant carries
its source; `Efficiency` says which were fitted to which measurement, so the
calibration tests (tests/unit/costmodel/test_calibration.py) can tell a
held-out check from a fit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from coconet_ir.diagnostics import CocoError


@dataclass(frozen=True)
class Link:
    """One GPU's connection to the others of its ring."""

    bytes_per_s: float
    """Peak, one direction, per GPU."""
    hop_s: float
    """NCCL's latency of one ring step over this link (tuning.cc `hwLat`,
    ring, Simple protocol)."""


@dataclass(frozen=True)
class Efficiency:
    """What fraction of a peak real kernels reach. The same for every preset:
    these are properties of cuBLAS, NCCL and a streaming kernel, measured on
    one GPU generation each and assumed to carry over."""

    gemm: float = 0.80
    """A large, tile-aligned dense matmul: cuBLAS bf16 8192³ at 795 TFLOP/s on
    H100 SXM = 0.80 of 989 (github.com/pranjalssh/fast.cu README). Fitted."""
    hbm: float = 0.90
    """A streaming elementwise kernel: ~90% of the HBM peak (copy/triad
    kernels; an assumption, not fitted to a measurement here)."""
    link: float = 0.80
    """NCCL's large-message bus bandwidth over NVLink: 8xA100 SXM all-reduce
    busbw 230-250 GB/s of 300 GB/s = 0.80 (nccl-tests reference table,
    docs.alayanew.com/en/docs/tech-blog/2026-05-06-nccl-tests). Fitted on
    A100; the H100 all-reduce is the held-out check."""
    overlap_interference: float = 0.25
    """A matmul overlapped with communication in one fused kernel hides the
    shorter of the two only up to this fraction: memory bandwidth shared with
    the transfers, tile-arrival waits. Fitted to FLUX's all_gather + GEMM on
    8xH800 (0.957 ms; Chang et al. 2024, FLUX, arXiv:2406.06858); its GEMM +
    reduce_scatter (0.932 ms) is the held-out check."""


@dataclass(frozen=True)
class Machine:
    """A cluster of identical GPUs: `nodes` x `gpus_per_node`."""

    name: str
    description: str
    gpus_per_node: int
    nodes: int
    sm_count: int
    dense_flops: Mapping[str, float]
    """Dense peak by element type, FLOP/s (no sparsity)."""
    hbm_bytes_per_s: float
    nvlink: Link
    network: Link | None
    """Between nodes, per GPU (one NIC each); None for one node."""
    launch_s: float = 3.8e-6
    """The host issues one kernel, library call or copy every `launch_s`:
    short kernels launched back to back take ~3.8 µs each (NVIDIA developer
    blog, "Getting Started with CUDA Graphs", 2019)."""
    collective_base_s: float = 8.4e-6
    """NCCL's base latency of a ring collective (tuning.cc `baseLat`, ring,
    Simple)."""
    comm_sms: int = 16
    """SMs an NCCL collective kernel occupies while it runs (one per channel;
    NCCL uses 16 channels over NVLink on 8-GPU H100/A100 nodes by default,
    NCCL_MIN_NCHANNELS/NCCL_MAX_NCHANNELS in NCCL's environment docs)."""
    tiles: tuple[tuple[int, int, float], ...] = (
        (128, 256, 1.0),
        (128, 128, 0.9),
        (64, 128, 0.75),
    )
    """The output tiles a matmul library picks from, with the rate of each
    relative to the largest: 128x256 is the CUTLASS/cuBLAS sm80/sm90 bf16
    default; smaller tiles fill the SMs of small outputs but reuse less of
    each load (the 0.9 and 0.75 are assumptions, not fitted). A matmul runs
    with the tile that finishes first (wave quantization)."""
    efficiency: Efficiency = field(default_factory=Efficiency)
    rails: bool = False
    """A rail-optimized network (docs/performance.md, "Many nodes"): GPU `g`
    of every node is cabled to rail `g`'s leaf switch, so a transfer between
    GPUs of different rails first crosses NVLink inside its node (NCCL's
    PXN) and then its rail: it costs NVLink bytes as well as network bytes."""

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    def with_nodes(self, nodes: int) -> Machine:
        """The same cluster cut to its first `nodes` nodes, named
        `NAME/nodes` (a scale-out sweep's points): the per-GPU links stay,
        the fabric being non-blocking."""
        if not 1 <= nodes <= self.nodes:
            raise CocoError(
                f"machine '{self.name}' has {self.nodes} nodes; cannot take {nodes}"
            )
        return replace(
            self,
            name=f"{self.name}/{nodes}",
            description=f"the first {nodes} node(s) of {self.name}",
            nodes=nodes,
            network=self.network if nodes > 1 else None,
        )

    def link(self, world: int) -> Link:
        """The slowest link of a ring over `world` GPUs (filled node by node)."""
        if world <= self.gpus_per_node or self.network is None:
            return self.nvlink
        return self.network

    def peak_flops(self, element_type: str) -> float:
        return self.dense_flops.get(element_type, self.dense_flops["f32"])


NVLINK_HOP_S = 3.4e-6
"""NCCL tuning.cc, `hwLat[NVLINK]`, ring, Simple: 3.4 µs per hop."""
NET_HOP_S = 9.6e-6
"""NCCL tuning.cc, `hwLat[NET]`, ring, Simple: 9.6 µs per hop."""

# NVIDIA H100 Tensor Core GPU datasheet (SXM5): 989 TFLOP/s dense BF16/FP16
# tensor, 67 TFLOP/s FP32 and FP64 (tensor, non-TF32 FP32 is 67 vector),
# 3.35 TB/s HBM3, NVLink 900 GB/s per GPU (both directions), 132 SMs
# (H100 architecture whitepaper).
_HOPPER_FLOPS = {"f16": 989e12, "bf16": 989e12, "f32": 67e12, "f64": 67e12}


def single_node(
    name: str,
    description: str,
    *,
    sm_count: int = 132,
    dense_flops: Mapping[str, float] = _HOPPER_FLOPS,
    hbm_bytes_per_s: float = 3.35e12,
    nvlink_bytes_per_s: float = 450e9,
) -> Machine:
    """One node of 8 GPUs on NVSwitch; by default H100 SXM5s (the datasheet
    above: 132 SMs, 3.35 TB/s, 900 GB/s NVLink both ways)."""
    return Machine(
        name=name,
        description=description,
        gpus_per_node=8,
        nodes=1,
        sm_count=sm_count,
        dense_flops=dense_flops,
        hbm_bytes_per_s=hbm_bytes_per_s,
        nvlink=Link(nvlink_bytes_per_s, NVLINK_HOP_S),
        network=None,
    )


def rail_cluster(nodes: int, what: str) -> Machine:
    """`nodes` DGX H100 nodes on a rail-optimized 400 Gb/s InfiniBand fat
    tree (the SuperPOD reference below)."""
    return replace(
        H100X8,
        name=f"h100x{8 * nodes}-ib",
        description=f"{nodes} nodes x 8 H100 SXM5, rail-optimized 400 Gb/s "
        f"InfiniBand fat tree, one NIC per GPU: {what}",
        nodes=nodes,
        network=Link(50e9, NET_HOP_S),
        rails=True,
    )


H100X8 = single_node("h100x8", "8x H100 SXM5 80GB, NVSwitch (one DGX/HGX H100 node)")

PRESETS: dict[str, Machine] = {
    m.name: m
    for m in (
        H100X8,
        # NVIDIA H200 datasheet: the H100's compute, 4.8 TB/s HBM3e,
        # NVLink 900 GB/s; 132 SMs.
        single_node(
            "h200x8",
            "8x H200 SXM 141GB, NVSwitch (one HGX H200 node)",
            hbm_bytes_per_s=4.8e12,
        ),
        # NVIDIA A100 datasheet (SXM4 80GB): 312 TFLOP/s dense BF16/FP16,
        # 19.5 TFLOP/s FP32 and FP64 tensor, 2,039 GB/s HBM2e, NVLink
        # 600 GB/s per GPU; 108 SMs (A100 whitepaper).
        single_node(
            "a100x8",
            "8x A100 SXM4 80GB, NVSwitch (one DGX A100 node)",
            sm_count=108,
            dense_flops={"f16": 312e12, "bf16": 312e12, "f32": 19.5e12, "f64": 19.5e12},
            hbm_bytes_per_s=2.039e12,
            nvlink_bytes_per_s=300e9,
        ),
        # The H100's SXM5 die with NVLink cut to 400 GB/s per GPU (200 GB/s
        # one way): the machine of FLUX's measurements (calibration).
        single_node(
            "h800x8",
            "8x H800 SXM5 80GB, NVSwitch, 400 GB/s NVLink",
            nvlink_bytes_per_s=200e9,
        ),
        # Two H100 nodes, one 400 Gb/s ConnectX-7 InfiniBand NIC per GPU
        # (DGX H100 user guide: 8 x 400 Gb/s compute ports): 50 GB/s one
        # way per GPU. A ring over both nodes crosses the network, whose
        # per-GPU bandwidth bounds it (no NVLS/SHARP, no tree).
        replace(
            H100X8,
            name="h100x16-ib",
            description="2 nodes x 8 H100 SXM5, 400 Gb/s InfiniBand per GPU",
            nodes=2,
            network=Link(50e9, NET_HOP_S),
        ),
        # NVIDIA DGX SuperPOD reference architecture (DGX H100): a scalable
        # unit is 32 DGX H100 nodes; the compute fabric is a rail-optimized,
        # non-blocking fat tree of 400 Gb/s NDR InfiniBand, one ConnectX-7
        # NIC per GPU (8 rails), leaf switches per rail inside a unit, spine
        # switches between units. Per GPU: 50 GB/s one way into the fabric,
        # whatever the node count (full bisection).
        rail_cluster(32, "one DGX SuperPOD H100 scalable unit (rail leaf switches)"),
        rail_cluster(128, "4 DGX SuperPOD H100 scalable units (leaf and spine)"),
    )
}
"""The machines by the name `machine=` options take."""

DEFAULT_MACHINE = "h100x8"


def machine(name: str) -> Machine:
    """The preset called `name`, or a CocoError listing the presets."""
    if name not in PRESETS:
        raise CocoError(
            f"unknown machine '{name}'; the presets are {', '.join(sorted(PRESETS))}"
        )
    return PRESETS[name]
