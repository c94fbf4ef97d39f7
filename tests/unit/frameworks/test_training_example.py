"""The training example under torchrun (examples/tp_mlp_train.py;
docs/frameworks.md, "A training loop under torchrun"): tensor-parallel MLP
blocks trained with the coconet-ir ops on the CPU emulation, a rank per
torchrun process, give plain PyTorch's losses on 2 and 4 ranks; the ops it
registers run fused collective kernels (peer stores between the processes),
and the backward coco-grad derives for its block is torch's autograd (a
wrong one is not)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from helpers import EXAMPLES_DIR
from xdsl.dialects.builtin import ModuleOp

import coconet_ir as cc
from coconet_ir.dialects import coco
from coconet_ir.emulate import lower
from coconet_ir.passes import grad
from coconet_ir.passes.grad import backward_function
from coconet_ir.torch_op import DEFAULT_PASSES

pytest.importorskip("torch", reason="PyTorch is not installed (docs/frameworks.md)")

EXAMPLE = EXAMPLES_DIR / "tp_mlp_train.py"
SMALL = ["--hidden", "64", "--ffn", "256", "--tokens", "8", "--steps", "4"]
"""Small enough for CI; the defaults are GPT-2 small's widths."""


def torchrun(ranks: int, *options: str, env: dict | None = None):
    command = shutil.which("torchrun") or ""
    prefix = [command] if command else [sys.executable, "-m", "torch.distributed.run"]
    return subprocess.run(
        [*prefix, "--nproc-per-node", str(ranks), str(EXAMPLE), *SMALL, *options],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {}), "OMP_NUM_THREADS": "1"},
    )


@pytest.mark.parametrize("ranks", [2, 4])
def test_the_fused_ops_train_like_plain_pytorch(ranks):
    run = torchrun(ranks, "--backend", "emu")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "losses agree" in run.stdout
    gap = float(
        re.search(r"largest relative gap between the losses: (\S+)", run.stdout)[1]
    )
    assert gap < 1e-5, run.stdout  # f32 sums in other orders, nothing more
    assert re.search(
        r"time per step: plain PyTorch [\d.]+ ms, coconet-ir [\d.]+ ms", run.stdout
    )


def test_torchruns_local_world_size_says_how_many_ranks_share_a_node(monkeypatch):
    """Under `torchrun --nnodes 2 --nproc-per-node 2` LOCAL_WORLD_SIZE is 2 of
    4 ranks: the ops are lowered for 2 nodes (docs/frameworks.md; that run of
    the example, both "nodes" on one machine, agrees with plain PyTorch, and
    the lowering for 2 nodes x 2 ranks is emulated in
    tests/unit/lowering/test_nodes.py)."""
    from coconet_ir.torch_op import _ranks_per_node

    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert _ranks_per_node(4, None) == 2
    assert _ranks_per_node(4, 4) == 4  # given wins
    assert _ranks_per_node(2, None) == 0  # one node: all its ranks
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "3")
    assert _ranks_per_node(4, None) == 0  # does not divide: one node
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    assert _ranks_per_node(4, None) == 0


def load_example(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def block_and_backward(T: int, H: int, F: int):
    """The example's block and the backward coco-grad derives for it, each
    a module of one function."""
    forward = load_example(EXAMPLE).block(T, H, F)
    return forward.module, ModuleOp([backward_function(forward.func_op)])


def test_the_registered_programs_have_fused_collective_kernels():
    for module in block_and_backward(8, 64, 256):
        lowered = lower(module, 4, "coco-optimize", 256)
        assert lowered.symmetric_bytes > 0 and lowered.signal_slots > 0
        assert "ncclAllReduce" not in lowered.cuda
        # On 2 nodes of 2 (what the example registers there): no fused kernel,
        # each all-reduce reduce-scatter / all-reduce across / all-gather.
        nodes = lower(module, 4, DEFAULT_PASSES, 256, ranks_per_node=2)
        assert not nodes.symmetric_bytes
        assert "ctx->cross_comm" in nodes.cuda and "ctx->node_comm" in nodes.cuda


def backward_against_autograd(world: int = 2) -> float:
    """The largest relative difference between the derived backward of the
    example's block (run by the interpreter on `world` ranks) and torch's
    autograd of the same block on the global tensors."""
    import torch

    T, H, F = 8, 16, 32
    _, backward = block_and_backward(T, H, F)
    generator = torch.Generator().manual_seed(3)
    x, dy = (torch.randn(T, H, generator=generator) for _ in range(2))
    w1 = torch.randn(H, F, generator=generator) * 0.3
    w2 = torch.randn(F, H, generator=generator) * 0.3
    b2 = torch.randn(H, generator=generator)
    fed = [x, w1, w2, b2, dy]
    grads = cc.interpret(
        backward,
        world,
        inputs={f"mlp_block_grad.arg{i}": t.numpy() for i, t in enumerate(fed)},
    )
    leaves = [t.clone().requires_grad_() for t in (x, w1, w2, b2)]
    xs, w1s, w2s, b2s = leaves
    y = xs + gelu_tanh(xs @ w1s) @ w2s + b2s
    y.backward(dy)
    return max(
        float(
            np.abs(grads[f"mlp_block_grad.result{i}"] - leaf.grad.numpy()).max()
            / np.abs(leaf.grad.numpy()).max()
        )
        for i, leaf in enumerate(leaves)
    )


def gelu_tanh(h):
    import torch.nn.functional as functional

    return functional.gelu(h, approximate="tanh")


def test_the_derived_backward_is_autograds_and_a_wrong_one_is_not(monkeypatch):
    """The block's derived backward (the interpreter, 2 ranks) equals torch's
    autograd of the block; with the residual's gradient dropped (an add
    passing its cotangent to one operand only) it does not. The losses'
    comparison inside the example is the torchrun tests' (above)."""
    assert backward_against_autograd() < 1e-5

    def left_only(b, op, g):
        b.elementwise(op, g, lambda x: x, None)

    monkeypatch.setitem(grad.TRANSPOSES, coco.AddOp, left_only)
    assert backward_against_autograd() > 1e-2
