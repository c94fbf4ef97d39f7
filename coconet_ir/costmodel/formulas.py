"""The cost model's formulas (docs/performance.md, "The cost model"): the
time of one collective, matmul, memory-bound kernel or overlapped pipeline on
a `Machine`. Sizes are bytes and FLOPs per rank; times are seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from coconet_ir.analysis.costs import TRANSFERS
from coconet_ir.costmodel.machines import Machine


def ring_latency(world: int, machine: Machine, steps: int) -> float:
    """NCCL's latency of a ring collective of `steps` ring steps."""
    return machine.collective_base_s + steps * machine.link(world).hop_s


def link_bytes_per_s(world: int, machine: Machine) -> float:
    """What a large transfer reaches over the ring's slowest link."""
    return machine.link(world).bytes_per_s * machine.efficiency.link


def network_share(world: int, machine: Machine) -> float:
    """Of what a rank spreads evenly over its `world - 1` peers, the part for
    peers on other nodes: (N-G)/(N-1) with `G` ranks to a node (0 inside one
    node)."""
    g = machine.gpus_per_node
    return (world - g) / (world - 1) if world > g else 0.0


def exchange_s(sent: float, world: int, machine: Machine) -> float:
    """`sent` bytes a rank spreads evenly over its `world - 1` peers (an
    all_to_all, a fused kernel's peer stores) at the links' speed. Inside a
    node all of it crosses NVLink. On several nodes the share for peers of
    its own node, (G-1)/(N-1), crosses NVLink and the rest its NIC, both at
    once; on a rail-optimized network (`Machine.rails`) the part for other
    rails, (G-1)/G of the network's, crosses NVLink first (NCCL's PXN): the
    slower of the two links sets the time (docs/performance.md, "Many
    nodes")."""
    g = machine.gpus_per_node
    if world <= g or machine.network is None:
        return sent / link_bytes_per_s(world, machine)
    efficiency = machine.efficiency.link
    network = sent * network_share(world, machine)
    nvlink = sent - network
    if machine.rails:
        nvlink += network * (g - 1) / g
    return max(
        nvlink / (machine.nvlink.bytes_per_s * efficiency),
        network / (machine.network.bytes_per_s * efficiency),
    )


def transfer_s(kind: str, nbytes: float, world: int, machine: Machine) -> float:
    """A transfer of `analysis.costs.TRANSFERS` of a buffer of `nbytes`: a
    ring's bytes sent per rank / β + its steps of latency (nothing on one
    rank), or a point-to-point one's S/β + a hop. An all_to_all is not a
    ring: its bytes go to every peer at once (`exchange_s`)."""
    moves = TRANSFERS[kind]
    if moves.ring_steps is not None and world == 1:
        return 0.0
    if kind == "all_to_all" and moves.ring_steps is not None:
        seconds = exchange_s(moves.sent(nbytes, world), world, machine)
        return seconds + ring_latency(world, machine, moves.ring_steps(world))
    seconds = moves.sent(nbytes, world) / link_bytes_per_s(world, machine)
    if moves.ring_steps is None:
        return seconds + machine.link(world).hop_s
    return seconds + ring_latency(world, machine, moves.ring_steps(world))


def all_reduce_s(nbytes: float, world: int, machine: Machine) -> float:
    """Ring all-reduce of a tensor of `nbytes`: 2(N-1)/N · S/β + 2(N-1) hops."""
    return transfer_s("all_reduce", nbytes, world, machine)


def gather_scatter_s(nbytes: float, world: int, machine: Machine) -> float:
    """Ring reduce-scatter or all-gather of a tensor of `nbytes` (its full,
    unsliced size): (N-1)/N · S/β + (N-1) hops."""
    return transfer_s("all_gather", nbytes, world, machine)


def peer_s(nbytes: float, world: int, machine: Machine) -> float:
    """A point-to-point transfer (a send, a shift, a peer copy): S/β + a hop."""
    return transfer_s("send", nbytes, world, machine)


def memory_s(nbytes: float, machine: Machine) -> float:
    """A memory-bound kernel reading and writing `nbytes` in all."""
    return nbytes / (machine.hbm_bytes_per_s * machine.efficiency.hbm)


@dataclass(frozen=True)
class MatmulShape:
    """`batch` independent products of an `mxk` and a `kxn` matrix."""

    m: int
    n: int
    k: int
    """The contraction: `k` products summed per output element."""
    batch: int = 1
    element_bytes: int = 4
    element_type: str = "f32"
    """The operands' element type (its peak rate: `Machine.peak_flops`)."""

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.n * self.k

    @property
    def bytes(self) -> int:
        """Operands read once and the result written once."""
        elements = self.m * self.k + self.k * self.n + self.m * self.n
        return self.batch * elements * self.element_bytes


def waves(shape: MatmulShape, tile: tuple[int, int], sms: int) -> tuple[int, int]:
    """The output tiles of a matmul and the waves they take on `sms` SMs."""
    tile_m, tile_n = tile
    tiles = shape.batch * ceil(shape.m / tile_m) * ceil(shape.n / tile_n)
    return tiles, ceil(tiles / sms)


def matmul_s(shape: MatmulShape, machine: Machine, sms: int | None = None) -> float:
    """A roofline matmul with wave quantization: its FLOPs at the tuned peak,
    stretched by the idle SMs of its last wave (`tiles / (waves · SMs)` of the
    GPU works), with the best of the machine's tiles, or its operands' bytes
    at HBM speed, whichever is longer. `sms` is how many SMs it may use
    (fewer while a collective kernel runs)."""
    available = sms or machine.sm_count
    rate = machine.peak_flops(shape.element_type) * machine.efficiency.gemm

    def busy(tile_m: int, tile_n: int, relative: float) -> float:
        tiles, wave_count = waves(shape, (tile_m, tile_n), available)
        return relative * tiles / (wave_count * machine.sm_count)

    best = max(busy(*tile) for tile in machine.tiles)
    return max(shape.flops / (rate * best), memory_s(shape.bytes, machine))


def pipeline_s(compute: list[float], communication: list[float]) -> float:
    """Steps whose compute runs in order on one stream and whose
    communication runs in order on another, step `i`'s communication after
    its compute: the classic two-stage pipeline (fill with the first compute,
    drain with the last communication)."""
    compute_done = communication_done = 0.0
    for c, m in zip(compute, communication, strict=True):
        compute_done += c
        communication_done = max(communication_done, compute_done) + m
    return max(compute_done, communication_done)


def gathered_pipeline_s(compute: list[float], communication: list[float]) -> float:
    """Steps whose compute needs the step's communication first (an
    all_gather fed matmul): step 0 needs nothing (the rank's own block),
    step `i`'s block arrives after `communication[i-1]` more."""
    arrived = done = 0.0
    for i, c in enumerate(compute):
        if i:
            arrived += communication[i - 1]
        done = max(done, arrived) + c
    return done


def fused_kernel_s(
    flops: int,
    element_type: str,
    moved: int,
    sent: int,
    signals: int,
    world: int,
    machine: Machine,
) -> float:
    """One fused kernel: its `flops` at the tuned matmul rate or its `moved`
    memory bytes at HBM speed, whichever is longer, overlapped with the `sent`
    bytes it stores into peers (plus a hop per signal phase)."""
    rate = machine.peak_flops(element_type) * machine.efficiency.gemm
    compute = max(flops / rate, memory_s(moved, machine))
    if not sent:
        return compute
    communication = exchange_s(sent, world, machine)
    hops = max(signals, 1) * machine.link(world).hop_s
    return fused_overlap_s(compute, communication, machine) + hops


def fused_overlap_s(compute: float, communication: float, machine: Machine) -> float:
    """A matmul and its collective in one tile-granular kernel (FLUX's
    kernels, the workgroup-granular fused operators): the longer of the two,
    plus the part of the shorter that is not hidden."""
    longer, shorter = max(compute, communication), min(compute, communication)
    return longer + machine.efficiency.overlap_interference * shorter


# ---------------------------------------------------------------------------
# Several nodes (docs/gpu/device.md, "Several nodes")
# ---------------------------------------------------------------------------


def _ring_s(
    sent: float, steps: int, link_bytes_per_s: float, hop_s: float, machine: Machine
) -> float:
    return (
        sent / (link_bytes_per_s * machine.efficiency.link)
        + machine.collective_base_s
        + steps * hop_s
    )


def flat_all_reduce_s(
    nbytes: float, world: int, ranks_per_node: int, machine: Machine
) -> float:
    """One ring all-reduce over `world` ranks, `ranks_per_node` to a node:
    2(N-1)/N · S over the ring's slowest link, the network's once the ring
    leaves a node."""
    if world == 1:
        return 0.0
    link = (
        machine.network
        if world > ranks_per_node and machine.network
        else machine.nvlink
    )
    return _ring_s(
        2 * (world - 1) / world * nbytes,
        2 * (world - 1),
        link.bytes_per_s,
        link.hop_s,
        machine,
    )


def hierarchical_all_reduce_s(
    nbytes: float, world: int, ranks_per_node: int, machine: Machine
) -> float:
    """The all-reduce as a reduce-scatter inside each node (NVLink), an
    all-reduce of each rank's 1/G across the nodes (G rings side by side, one
    network link each: a NIC per GPU), and an all-gather inside the node."""
    g, nodes = ranks_per_node, world // ranks_per_node
    nvlink = machine.nvlink
    inside = (
        0.0
        if g == 1
        else 2
        * _ring_s(
            (g - 1) / g * nbytes, g - 1, nvlink.bytes_per_s, nvlink.hop_s, machine
        )
    )
    if nodes == 1:
        return inside
    network = machine.network or nvlink
    return inside + _ring_s(
        2 * (nodes - 1) / nodes * nbytes / g,
        2 * (nodes - 1),
        network.bytes_per_s,
        network.hop_s,
        machine,
    )
