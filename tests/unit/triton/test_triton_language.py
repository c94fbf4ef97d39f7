"""coconet_ir.triton: the device functions and the world of ranks, under
Triton's interpreter, a process per rank over shared memory (docs/triton.md).

The user-written fused GEMM + all_to_all (examples/triton_gemm_all_to_all.py)
matches torch on 1/2/4 ranks over several launches (8 by hand: `--world
8`); a ring of puts checks the primitives themselves, and fails when the
put goes to the wrong peer; a rank that never launches, or dies mid-step,
ends its peers' waits with an error naming the rank and the slot.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("triton")

import torch
import triton
import triton.language as tl

import coconet_ir.triton as ct
from coconet_ir.diagnostics import CocoError
from coconet_ir.triton import language as cl

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "triton_gemm_all_to_all.py"


def load_example():
    spec = importlib.util.spec_from_file_location("triton_gemm_all_to_all", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = example
    spec.loader.exec_module(example)
    return example


ex = load_example()


@triton.jit
def ring_shift(
    src, dst_offset, buffer_ptrs, pad_ptrs, errors, rank, world, epoch, max_spins,
    SHIFT: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """Rank r puts its block into rank r+SHIFT's buffer at `dst_offset`,
    signals its slot 0, and waits for its own."""
    offs = tl.arange(0, BLOCK)
    peer = (rank + SHIFT) % world
    cl.put(buffer_ptrs, peer, dst_offset + offs, tl.load(src + offs))
    cl.signal(pad_ptrs, peer, 0, epoch)
    cl.wait(pad_ptrs, rank, 0, epoch, errors, max_spins)


def shifted(ranks: ct.SymmetricWorld, shift: int) -> list[float]:
    """What arrived in this rank's buffer over two launches (each into a
    place of its own: nothing here tells a peer that this rank has read the
    first before it sends the second)."""
    arrived = []
    for launch in range(2):
        epoch = ranks.next_epoch()
        src = torch.full((16,), float(100 * epoch + ranks.rank))
        ring_shift[(1,)](
            src, 16 * launch, ranks.buffer_ptrs, ranks.pad_ptrs, ranks.errors,
            ranks.rank, ranks.world, epoch, ranks.max_spins, SHIFT=shift, BLOCK=16,
        )  # fmt: skip
        ranks.check_waits()
        arrived.append(ranks.view(64 * launch, (16,), torch.float32).clone().tolist())
    return arrived


@pytest.mark.parametrize("world", [2, 4])
def test_a_put_lands_in_the_peer_it_names(world: int) -> None:
    results = ct.spawn(shifted, world, nbytes=128, slots=1, args=(1,))
    for rank, arrived in enumerate(results):
        source = (rank - 1) % world
        assert arrived == [[100.0 + source] * 16, [200.0 + source] * 16]


def test_a_put_to_the_wrong_peer_is_caught() -> None:
    """The oracle is not blind: shifting by 2 on 4 ranks delivers other
    sources' blocks than the ring's."""
    results = ct.spawn(shifted, 4, nbytes=128, slots=1, args=(2,))
    assert any(
        arrived[0] != [100.0 + (rank - 1) % 4] * 16
        for rank, arrived in enumerate(results)
    )


@pytest.mark.parametrize("world", [1, 2, 4])
def test_the_fused_gemm_all_to_all_matches_torch(world: int) -> None:
    errors = ct.spawn(
        ex.check,
        world,
        nbytes=4 * ex.SIZES["M"] * ex.SIZES["H"],
        slots=ex.slots(world, **ex.SIZES),
        args=(ex.SIZES, 3),
    )
    assert max(errors) < 1e-4


def slow_peer(ranks: ct.SymmetricWorld, sizes: dict) -> float:
    """Rank 1 raises its READY on rank 0 from the host, then sleeps before it
    launches: rank 0's producer does not wait, its consumer must."""
    error = 0.0
    for _ in range(2):
        if ranks.rank == 1:
            ready = int(ranks.pad_ptrs[0]) + 8 * ranks.rank  # slot READY + 1 of rank 0
            ctypes.c_int64.from_address(ready).value = ranks.epoch + 1
            time.sleep(0.5)
        error = max(error, ex.check(ranks, sizes, 1))
    return error


def test_the_consumer_waits_for_a_slow_peer() -> None:
    """Catches a consumer that copies without waiting (or waits on the
    wrong slot): its peer's tiles arrive half a second late each step."""
    errors = ct.spawn(
        slow_peer,
        2,
        nbytes=4 * 128 * 32,
        slots=ex.slots(2, **ex.SIZES),
        args=(ex.SIZES,),
    )
    assert max(errors) < 1e-4


def test_the_example_main_runs_and_refuses_partial_tiles(capsys) -> None:
    assert ex.main(["--world", "2", "--steps", "1"]) == 0
    assert "max error" in capsys.readouterr().out
    assert ex.main(["--world", "3"]) == 2
    assert "multiple of world*BM" in capsys.readouterr().err


def absent_peer(ranks: ct.SymmetricWorld, sizes: dict) -> float:
    ranks.max_spins = 500
    if ranks.rank == 1:
        return 0.0  # never launches: rank 0's waits for it give up
    return ex.check(ranks, sizes, 1)


def test_a_peer_that_never_launches_times_out_with_the_slot() -> None:
    with pytest.raises(ct.RanksFailed) as raised:
        ct.spawn(
            absent_peer, 2, nbytes=4 * 128 * 32, slots=ex.slots(2, **ex.SIZES),
            args=(ex.SIZES,), timeout_s=60,
        )  # fmt: skip
    message = str(raised.value)
    assert "1 of 2 ranks failed" in message
    assert "rank 0 of 2:" in message
    assert "waited for slot 1 of its signal pad to reach 1, it holds 0" in message


def killed_mid_step(ranks: ct.SymmetricWorld, sizes: dict) -> float:
    ex.check(ranks, sizes, 1)  # one whole step with every peer, at full patience
    ranks.max_spins = 500  # then the second step's waits give up soon
    if ranks.rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return ex.check(ranks, sizes, 1)


def test_a_rank_killed_mid_step_is_named_and_its_peers_time_out() -> None:
    with pytest.raises(ct.RanksFailed) as raised:
        ct.spawn(
            killed_mid_step, 2, nbytes=4 * 128 * 32, slots=ex.slots(2, **ex.SIZES),
            args=(ex.SIZES,), timeout_s=60,
        )  # fmt: skip
    message = str(raised.value)
    assert "2 of 2 ranks failed" in message
    assert f"rank 1: exited with status -{int(signal.SIGKILL)}" in message
    assert "rank 0 of 2:" in message and "to reach 2, it holds 1" in message


def gloo_rank(rank: int, world: int, store: str, queue) -> None:
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=f"file://{store}", rank=rank, world_size=world
    )
    try:
        ranks = ct.open_world(4 * 128 * 32, ex.slots(world, **ex.SIZES))
        named = os.path.exists(f"/dev/shm/coco-triton-{ranks.key}-{rank}")
        queue.put((rank, (ex.check(ranks, ex.SIZES, 2), named)))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def test_open_world_joins_a_gloo_process_group() -> None:
    """torchrun's way on a CPU: the key from rank 0 over the group, every
    segment's name gone once every rank has mapped it."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    with tempfile.TemporaryDirectory() as directory:
        store = os.path.join(directory, "store")
        processes = [
            context.Process(target=gloo_rank, args=(rank, 2, store, queue))
            for rank in range(2)
        ]
        for process in processes:
            process.start()
        for process in processes:
            process.join(60)
        assert [process.exitcode for process in processes] == [0, 0]
    results = dict(queue.get(timeout=5) for _ in range(2))
    assert max(error for error, _ in results.values()) < 1e-4
    assert not any(named for _, named in results.values())


def test_a_view_that_does_not_fit_is_refused() -> None:
    def view(ranks: ct.SymmetricWorld) -> str:
        try:
            ranks.view(8, (32,), torch.float32)
        except CocoError as error:
            return str(error)
        return ""

    [message] = ct.spawn(view, 1, nbytes=64, slots=1)
    assert "symmetric buffer of 64 bytes" in message and "does not fit" in message


def test_triton_imported_first_without_a_gpu_is_a_clear_error() -> None:
    from coconet_ir.triton import choose_interpreter

    environ: dict[str, str] = {}
    choose_interpreter(environ, set(), has_gpu=False)
    assert environ == {"TRITON_INTERPRET": "1"}
    environ = {}
    choose_interpreter(environ, set(), has_gpu=True)
    assert environ == {}  # kernels compile for the GPU
    with pytest.raises(CocoError, match=r"import coconet_ir\.triton first"):
        choose_interpreter({}, {"triton"}, has_gpu=False)
    choose_interpreter({"TRITON_INTERPRET": "0"}, {"triton"}, has_gpu=False)  # as set
