"""Tensor-parallel training under torchrun: GPT-2-small-sized MLP blocks
trained once with coconet-ir ops and once with plain PyTorch, losses compared
(docs/frameworks.md, "A training loop under torchrun").

Each block is Megatron-LM's tensor-parallel MLP with a residual,
`y = x + all_reduce(gelu(x @ w1) @ w2) + b2`: `w1` [H, F] is cut along its
columns and `w2` [F, H] along its rows, so each rank's second matmul is a
partial sum and one all_reduce per block completes it. The block is one coco
function (`block` below) registered as a PyTorch op
(`coconet_ir.torch_op.register`) whose autograd formula is its backward as
`coco-grad` derives it: the matmuls transposed and the all_reduce moved to
the input's gradient, Megatron's f and g (docs/passes/coco-grad.md). The
plain model is the same blocks written with `torch.distributed.all_reduce`.
Both start from the same weights, see the same synthetic batches (a fixed
random map to learn) and take the same SGD steps; the script prints both
loss curves, their largest relative difference, and the time per step of
each, and exits 1 if they disagree.

    torchrun --nproc-per-node 4 examples/tp_mlp_train.py --backend emu
    torchrun --nproc-per-node 8 examples/tp_mlp_train.py --backend cuda

`--backend emu` runs the generated CUDA C on the CPU emulation, a rank per
torchrun process (gloo for the plain model; docs/gpu/emulation.md,
"Multi-process mode"), after `coco-optimize` (so each block's all_reduce and
the bias and residual after it are one fused kernel storing into its peers'
shared-memory workspaces, and the backward's all_reduce likewise).
`--backend cuda` runs it on the GPUs (one per process, NCCL), after
`torch_op.DEFAULT_PASSES`: fused kernels across GPU processes have not run
yet (docs/frameworks.md, "Limits"). The defaults are GPT-2 small's widths
(H = 768, F = 3072); `--hidden`, `--ffn`, `--tokens`, `--steps` make it
smaller (CI runs `--hidden 64 --ffn 256 --tokens 8 --steps 4`).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import coconet_ir as cc
from coconet_ir import torch_op


def block(tokens: int, hidden: int, ffn: int) -> cc.Function:
    """The block as a coco function (global shapes; each rank holds the
    slices its layouts say)."""
    T, H, Fw = tokens, hidden, ffn
    f32, replicated, sliced = cc.f32, cc.replicated, cc.sliced

    @cc.function
    def mlp_block(
        x: cc.tensor([T, H], f32, replicated),
        w1: cc.tensor([H, Fw], f32, sliced(1)),
        w2: cc.tensor([Fw, H], f32, sliced(0)),
        b2: cc.tensor([H], f32, replicated),
    ):
        h = cc.matmul(x, w1)  # [T, F/N] on each rank
        partial = cc.matmul(cc.gelu(h), w2)  # local: this rank's partial sum
        return cc.all_reduce(partial, "sum") + b2 + x

    return mlp_block


class _AllReduce(torch.autograd.Function):
    """Megatron's g: all_reduce forward, identity backward."""

    @staticmethod
    def forward(ctx, partial):
        total = partial.clone()
        dist.all_reduce(total)
        return total

    @staticmethod
    def backward(ctx, grad):
        return grad


class _Copy(torch.autograd.Function):
    """Megatron's f: identity forward, all_reduce backward."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        total = grad.clone()
        dist.all_reduce(total)
        return total


def torch_block(x, w1, w2, b2):
    h = _Copy.apply(x) @ w1
    partial = F.gelu(h, approximate="tanh") @ w2
    return _AllReduce.apply(partial) + b2 + x


def coconet_block(x, w1, w2, b2):
    return BLOCK_OP[0](x.contiguous(), w1, w2, b2)


BLOCK_OP: list[torch_op.CocoOp] = []
"""The registered block (its backward registered with it), once made."""


def initial_weights(args, rank: int, world: int, device):
    """Every layer's (w1, w2, b2) shards of this rank, the same global values
    for both models (seeded)."""
    generator = torch.Generator().manual_seed(args.seed)
    cut = args.ffn // world
    layers = []
    for _ in range(args.layers):
        w1 = torch.randn(args.hidden, args.ffn, generator=generator) * 0.02
        w2 = torch.randn(args.ffn, args.hidden, generator=generator) * (
            0.02 / math.sqrt(2 * args.layers)
        )
        b2 = torch.zeros(args.hidden)
        shard = [
            w1[:, rank * cut : (rank + 1) * cut].contiguous(),
            w2[rank * cut : (rank + 1) * cut].contiguous(),
            b2,
        ]
        layers.append([p.to(device).requires_grad_() for p in shard])
    return layers


def batches(args, device):
    """`args.steps` batches (x, target): target = tanh(x @ A), A fixed."""
    generator = torch.Generator().manual_seed(args.seed + 1)
    mapping = torch.randn(args.hidden, args.hidden, generator=generator)
    mapping /= math.sqrt(args.hidden)
    for _ in range(args.steps):
        x = torch.randn(args.tokens, args.hidden, generator=generator)
        yield x.to(device), torch.tanh(x @ mapping).to(device)


def train(block, args, rank: int, world: int, device) -> tuple[list[float], float]:
    """Losses of every step, and the mean time of a step after the first
    (which builds and bootstraps the coconet ops)."""
    layers = initial_weights(args, rank, world, device)
    losses, times = [], []
    for x, target in batches(args, device):
        start = time.perf_counter()
        y = x
        for w1, w2, b2 in layers:
            y = block(y, w1, w2, b2)
        loss = F.mse_loss(y, target)
        loss.backward()
        with torch.no_grad():
            for parameter in (p for layer in layers for p in layer):
                parameter -= args.lr * parameter.grad
                parameter.grad = None
        losses.append(loss.item())
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return losses, sum(times[1:]) / max(len(times) - 1, 1)


def register_op(args, world: int) -> torch_op.CocoOp:
    """The block's op, with its derived backward. The emulator runs the
    fused kernels on one node; on several (torchrun's LOCAL_WORLD_SIZE below
    the world) no rank reaches another node's memory, so `coco-optimize`
    is told the nodes and leaves out what stores into a peer's memory, and
    each all-reduce is hierarchical (docs/gpu/device.md, "Several nodes")."""
    program = block(args.tokens, args.hidden, args.ffn)
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    if args.backend == "cuda":
        options = dict(passes=torch_op.DEFAULT_PASSES)
    elif local >= world:
        options = dict(passes="coco-optimize", cpu="emulator")
    else:
        nodes = f"ranks_per_node={local} world={world} machine=h100x16-ib"
        options = dict(passes=f"coco-optimize{{{nodes}}}", cpu="emulator")
    return torch_op.register(
        program, "coconet_tp::mlp_block", world=world, autograd=True, **options
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("emu", "cuda"), default="emu")
    parser.add_argument("--hidden", type=int, default=768, help="H (GPT-2 small: 768)")
    parser.add_argument("--ffn", type=int, default=3072, help="F (GPT-2 small: 3072)")
    parser.add_argument("--tokens", type=int, default=64, help="tokens per batch")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--lr", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--rtol", type=float, default=1e-5, help="the losses' largest relative gap"
    )
    args = parser.parse_args(argv)

    if args.backend == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl")
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.ffn % world:
        parser.error(f"--ffn {args.ffn} must be a multiple of the {world} ranks")
    torch.manual_seed(args.seed)
    BLOCK_OP.append(register_op(args, world))

    plain, plain_step = train(torch_block, args, rank, world, device)
    fused, fused_step = train(coconet_block, args, rank, world, device)
    BLOCK_OP[0].close()

    gap = max(abs(a - b) / max(abs(a), 1e-30) for a, b in zip(plain, fused))
    agree = gap <= args.rtol
    if rank == 0:
        local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        nodes = f" ({world // local} nodes x {local})" if local < world else ""
        print(
            f"{world} ranks{nodes}, {args.layers} blocks of H={args.hidden} "
            f"F={args.ffn}, {args.tokens} tokens, {args.steps} SGD steps, "
            f"backend {args.backend}"
        )
        print(f"{'step':>6} {'plain PyTorch':>16} {'coconet-ir':>16}")
        every = max(args.steps // 10, 1)
        for step in [*range(0, args.steps, every), args.steps - 1]:
            print(f"{step:>6} {plain[step]:>16.8f} {fused[step]:>16.8f}")
        print(f"largest relative gap between the losses: {gap:.3g} (rtol {args.rtol})")
        print(
            f"time per step: plain PyTorch {plain_step * 1e3:.2f} ms, "
            f"coconet-ir {fused_step * 1e3:.2f} ms ({args.backend})"
        )
        print("losses agree" if agree else "LOSSES DISAGREE")
    dist.destroy_process_group()
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
