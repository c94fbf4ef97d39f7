"""A Triton author's own fused operator: a GEMM whose tiles go straight to
their all_to_all destinations (docs/triton.md), written with
`coconet_ir.triton`'s device functions, no compiler involved.

Each of `N` ranks multiplies its tokens `x` [M, K] by a weight `w` [K, H]
(replicated). Rows are cut into `N` parts of `M/N`: part `p` of every rank's
product belongs to rank `p`, which stacks them by source, `out` [N, M/N, H]
(`out[q] = (x_q @ w)[p·M/N ..]` on rank `p`): the all_to_all of the product
cut along its rows, as `coco.all_to_all` of a `sliced<0>` result.

`gemm_send` is the producer, one program per tile: tile `t` of destination
`(r + 1 + k) mod N` for `k = 0 .. N-1` (each rank starts on a different
peer; its own part last, stored straight into `out`). It computes the tile
with `tl.dot`, waits until the destination has started this launch (its
`READY` slot: it has copied the previous launch's tiles out), `put`s the tile
at row `r` of the destination's receive buffer and `signal`s the
destination's slot `TILE + r·T + t`. `copy_received`, the consumer, waits
for each peer's tile and copies it into `out`. Slots hold epochs, so pads are
never reset.

    python examples/triton_gemm_all_to_all.py --world 4   # CPU: processes
    torchrun --nproc-per-node 8 examples/triton_gemm_all_to_all.py  # GPUs

Each rank checks its `out` against `x_q @ w` computed from the same seeds.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

# First: without a GPU it sets TRITON_INTERPRET before triton is imported.
import coconet_ir.triton as ct

# isort: split
import triton
import triton.language as tl

from coconet_ir.triton import language as cl

SIZES = dict(M=128, K=64, H=32, BM=16, BN=16, BK=32)
"""Small enough for Triton's interpreter on 1 to 8 ranks."""


def check_sizes(world: int, M: int, K: int, H: int, BM: int, BN: int, BK: int) -> None:
    """The kernels take whole tiles: each rank's part of `M` rows cut in
    `BM`-row tiles, `H` in `BN` columns, `K` in `BK` steps."""
    if M % (world * BM) or H % BN or K % BK:
        raise ValueError(
            f"M={M} must be a multiple of world*BM={world * BM}, "
            f"H={H} of BN={BN}, K={K} of BK={BK}"
        )


@triton.jit
def gemm_send(
    x, w, out, recv_offset, buffer_ptrs, pad_ptrs, errors,
    rank, world, epoch, max_spins,
    M, K, H,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):  # fmt: skip
    rows_per_rank = M // world
    tiles_m = rows_per_rank // BM
    tiles = tiles_m * (H // BN)  # T: tiles per destination
    pid = tl.program_id(0)
    k = pid // tiles
    t = pid % tiles
    dest = (rank + 1 + k) % world
    if pid == 0:  # READY: this rank has started launch `epoch`
        for p in range(world):
            cl.signal(pad_ptrs, p, rank, epoch)

    # (BM,) rows of x, (BN,) columns of w
    rm = dest * rows_per_rank + (t // (H // BN)) * BM + tl.arange(0, BM)
    rn = (t % (H // BN)) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)  # (BM, BN)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(x + rm[:, None] * K + rk[None, :])  # (BM, BK)
        b = tl.load(w + rk[:, None] * H + rn[None, :])  # (BK, BN)
        acc += tl.dot(a, b, input_precision="ieee")
    tile = acc.to(out.dtype.element_ty)

    # The tile's place in part `rank` of the destination: [source, row, column].
    local = (rm - dest * rows_per_rank)[:, None] * H + rn[None, :]
    if dest == rank:
        tl.store(out + rank * rows_per_rank * H + local, tile)
    else:
        cl.wait(pad_ptrs, rank, dest, epoch, errors, max_spins)
        cl.put(buffer_ptrs, dest, recv_offset + rank * rows_per_rank * H + local, tile)
        cl.signal(pad_ptrs, dest, world + rank * tiles + t, epoch)


@triton.jit
def copy_received(
    out, recv, pad_ptrs, errors, rank, world, epoch, max_spins,
    M, H, BM: tl.constexpr, BN: tl.constexpr,
):  # fmt: skip
    rows_per_rank = M // world
    tiles = (rows_per_rank // BM) * (H // BN)
    pid = tl.program_id(0)
    source = (rank + 1 + pid // tiles) % world  # never `rank`: N-1 peers
    t = pid % tiles
    rm = (t // (H // BN)) * BM + tl.arange(0, BM)
    rn = (t % (H // BN)) * BN + tl.arange(0, BN)
    at = source * rows_per_rank * H + rm[:, None] * H + rn[None, :]
    cl.wait(pad_ptrs, rank, world + source * tiles + t, epoch, errors, max_spins)
    tl.store(out + at, tl.load(recv + at))


def slots(world: int, M: int, H: int, BM: int, BN: int, **_: int) -> int:
    """READY (one per rank), then TILE (one per source and tile)."""
    return world + world * (M // world // BM) * (H // BN)


def inputs(
    rank: int, M: int, K: int, H: int, device: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank `rank`'s tokens and the (replicated) weight, from fixed seeds."""
    x = torch.randn(M, K, generator=torch.Generator().manual_seed(rank))
    w = torch.randn(K, H, generator=torch.Generator().manual_seed(1000))
    return x.to(device), w.to(device)


def step(
    ranks: ct.SymmetricWorld, M: int, K: int, H: int, BM: int, BN: int, BK: int
) -> torch.Tensor:
    """One fused GEMM + all_to_all on this rank: its `out` [N, M/N, H]."""
    world, rank = ranks.world, ranks.rank
    check_sizes(world, M, K, H, BM, BN, BK)
    device = ranks.buffer.device.type
    x, w = inputs(rank, M, K, H, device)
    out = torch.empty(world, M // world, H, device=device)
    recv = ranks.view(0, (world, M // world, H), torch.float32)
    epoch = ranks.next_epoch()
    tiles = (M // world // BM) * (H // BN)
    common = (ranks.pad_ptrs, ranks.errors, rank, world, epoch, ranks.max_spins)
    gemm_send[(world * tiles,)](
        x, w, out, 0, ranks.buffer_ptrs, *common, M, K, H, BM=BM, BN=BN, BK=BK
    )
    if world > 1:
        copy_received[((world - 1) * tiles,)](out, recv, *common, M, H, BM=BM, BN=BN)
    ranks.check_waits()
    return out


def expected(rank: int, world: int, M: int, K: int, H: int, **_: int) -> torch.Tensor:
    """`out` on rank `rank`: part `rank` of every source's product."""
    rows = M // world
    parts = []
    for source in range(world):
        x, w = inputs(source, M, K, H, "cpu")
        parts.append((x @ w)[rank * rows : (rank + 1) * rows])
    return torch.stack(parts)


def check(ranks: ct.SymmetricWorld, sizes: dict, steps: int) -> float:
    """`steps` launches (epochs 1..steps); the largest error against `expected`."""
    error = 0.0
    for _ in range(steps):
        out = step(ranks, **sizes).cpu()
        error = max(
            error, (out - expected(ranks.rank, ranks.world, **sizes)).abs().max().item()
        )
    return error


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--world", type=int, default=2, help="ranks on a CPU (not torchrun)"
    )
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args(argv)
    sizes = dict(SIZES)
    world = int(os.environ.get("WORLD_SIZE", args.world))
    try:
        check_sizes(world, **sizes)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    nbytes = 4 * sizes["M"] * sizes["H"]
    if "RANK" in os.environ:  # torchrun: one process per rank
        import torch.distributed as dist

        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend)
        world = dist.get_world_size()
        ranks = ct.open_world(nbytes, slots(world, **sizes))
        errors = [check(ranks, sizes, args.steps)]
        dist.barrier()
        dist.destroy_process_group()
    else:
        errors = ct.spawn(
            check,
            world,
            nbytes=nbytes,
            slots=slots(world, **sizes),
            args=(sizes, args.steps),
        )
    worst = max(errors)
    print(
        f"gemm + all_to_all on {world} ranks, {args.steps} steps: max error {worst:.3g}"
    )
    return 0 if worst < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
