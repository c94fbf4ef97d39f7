"""The host side of `coconet_ir.triton` (docs/triton.md): every rank's
symmetric buffer and signal pad, and the pointer tables a Triton kernel takes.

Two kinds of world, one interface (`SymmetricWorld`):

- on GPUs, one process per GPU (torchrun): the buffer and the pad are one
  allocation of PyTorch's symmetric memory (`torch.distributed._symmetric_memory`,
  rendezvous over the process group), whose `buffer_ptrs` are the peers'
  addresses of it; the pad is its last `slots` int64s;
- on a CPU, one process per rank, every rank's buffer and pad one file of
  shared memory (`/dev/shm/coco-triton-KEY-RANK`) that every rank maps, so a
  store through a peer's address lands in that peer's memory, as over NVLink;
  the kernels run under Triton's interpreter (`TRITON_INTERPRET=1`, set by
  `coconet_ir.triton` where there is no GPU). `spawn` starts such a world
  (tests, examples); `open_world` joins one from torch.distributed (gloo).

Waits time out (the watchdog in `language.wait`); `check_waits` turns the
record into an error naming the rank, the slot and the values.
"""

from __future__ import annotations

import mmap
import multiprocessing
import os
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from math import prod
from queue import Empty
from typing import Any

import torch

from coconet_ir.diagnostics import CocoError

SLOT_BYTES = 8
"""A signal slot is an int64 (the CUDA C runtime's are uint64)."""
PAD_ALIGN = 256
"""The buffer after a pad starts on this boundary (vector loads of 16 bytes
and more stay aligned)."""

SHM_DIR = "/dev/shm"

INTERPRETER_MAX_SPINS = 50_000
"""Polls before a wait gives up under the interpreter (each poll is an
interpreted atomic, about 0.13 ms on the 2-core CI machine: ~7 s)."""
GPU_MAX_SPINS = 1 << 30
"""Polls before a wait gives up on a GPU (a system-scope atomic is around a
microsecond: minutes, past any honest wait)."""

ERROR_SLOTS = 8
"""int64s of a world's `errors`: the watchdog's 4, the index faults, spare."""
INDEX_FAULTS = 4
"""The slot of `errors` where kernels count indices out of range."""

ARRIVE_TIMEOUT_S = 60.0
"""How long a rank waits for its peers' shared memory to appear."""


class WaitTimeout(CocoError):
    """A rank's wait gave up (`language.wait`'s watchdog) or a peer never
    came."""


class RanksFailed(CocoError):
    """Ranks of `spawn` failed: each one's error, exit status or hang."""


@dataclass
class SymmetricWorld:
    """One rank's view of the symmetric memory of `world` ranks."""

    rank: int
    world: int
    buffer: torch.Tensor
    """This rank's symmetric buffer, bytes (uint8)."""
    pad: torch.Tensor
    """This rank's signal pad, int64 slots."""
    buffer_ptrs: torch.Tensor
    """int64[world]: every rank's buffer as this rank addresses it (on the
    kernels' device)."""
    pad_ptrs: torch.Tensor
    """int64[world]: every rank's signal pad, likewise."""
    errors: torch.Tensor = field(repr=False)
    """int64[ERROR_SLOTS]: the watchdog's record (`language.wait`: slots 0
    to 3), then the faults kernels count (slot `INDEX_FAULTS`: indices out
    of range, `check_indices`)."""
    max_spins: int = INTERPRETER_MAX_SPINS
    key: str = ""
    """The name of a CPU world's shared-memory segments (`SHM_DIR`/
    coco-triton-KEY-RANK); empty on GPUs."""
    epoch: int = 0
    """The last epoch `next_epoch` gave out."""
    _keep: tuple = field(default=(), repr=False)
    """What the tensors' memory belongs to (the mappings), kept alive."""

    def next_epoch(self) -> int:
        """The value this launch signals and waits for: one more than the
        last (pads are monotonic, never reset)."""
        self.epoch += 1
        return self.epoch

    def view(
        self, offset: int, shape: Sequence[int], dtype: torch.dtype
    ) -> torch.Tensor:
        """`shape` elements of `dtype` of this rank's buffer from byte `offset`."""
        element = size_of(dtype)
        size = prod(shape) * element
        if offset % element or offset + size > self.buffer.numel():
            raise CocoError(
                f"symmetric buffer of {self.buffer.numel()} bytes: a view of "
                f"{tuple(shape)} {dtype} at byte {offset} does not fit or is not "
                "aligned"
            )
        return self.buffer[offset : offset + size].view(dtype).view(*shape)

    def check_indices(self, message: str) -> None:
        """Raise CocoError(`message`) if a kernel counted indices out of
        range (and clear the count): a kernel reads row 0 instead and goes
        on, as a wait that gives up does."""
        count = int(self.errors[INDEX_FAULTS].item())
        if count:
            self.errors[INDEX_FAULTS] = 0
            raise CocoError(
                f"rank {self.rank} of {self.world}: {message} ({count} indices)"
            )

    def check_waits(self) -> None:
        """Raise WaitTimeout if a wait of this rank's kernels gave up (and
        clear the record: until then every wait of this rank gives up at
        once)."""
        waits, slot, value, seen = (int(x) for x in self.errors[:4].cpu())
        self.errors[:4] = 0
        if waits:
            raise WaitTimeout(
                f"rank {self.rank} of {self.world}: {waits} wait(s) gave up after "
                f"{self.max_spins} polls; the first waited for slot {slot} of its "
                f"signal pad to reach {value}, it holds {seen} (a peer that died, "
                "never launched, or signals a different slot)"
            )


def pad_size(slots: int) -> int:
    """Bytes a pad of `slots` takes before the buffer."""
    return -(-slots * SLOT_BYTES // PAD_ALIGN) * PAD_ALIGN


def size_of(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


# ============================================================================
# CPU: shared memory between processes
# ============================================================================


def _segment(key: str, rank: int) -> str:
    return os.path.join(SHM_DIR, f"coco-triton-{key}-{rank}")


def unlink_segment(key: str, rank: int) -> None:
    """Remove rank `rank`'s segment's name (mappings stay valid)."""
    if os.path.exists(_segment(key, rank)):
        os.unlink(_segment(key, rank))


def shared_memory_world(
    key: str, rank: int, world: int, nbytes: int, slots: int
) -> SymmetricWorld:
    """Rank `rank`'s world of shared-memory segments named by `key`: create its
    own (pad first, then the buffer), map every peer's once it exists. The
    names stay until `unlink_segment` (once every rank has mapped them)."""
    pad_bytes = pad_size(slots)
    size = pad_bytes + nbytes
    own = _segment(key, rank)
    fd = os.open(own, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, size)
    finally:
        os.close(fd)
    maps: list[mmap.mmap] = []
    deadline = time.monotonic() + ARRIVE_TIMEOUT_S
    for peer in range(world):
        path = _segment(key, peer)
        while not (os.path.exists(path) and os.path.getsize(path) == size):
            if time.monotonic() > deadline:
                raise WaitTimeout(
                    f"rank {rank} of {world}: rank {peer}'s shared memory ({path}) "
                    f"did not appear within {ARRIVE_TIMEOUT_S:g} s"
                )
            time.sleep(0.01)
        with open(path, "r+b") as file:
            maps.append(mmap.mmap(file.fileno(), size))
    memory = [torch.frombuffer(m, dtype=torch.uint8) for m in maps]
    pads = [m[: slots * SLOT_BYTES] for m in memory]
    buffers = [m[pad_bytes:] for m in memory]

    return SymmetricWorld(
        rank=rank,
        world=world,
        buffer=buffers[rank],
        pad=pads[rank].view(torch.int64),
        buffer_ptrs=torch.tensor([b.data_ptr() for b in buffers], dtype=torch.int64),
        pad_ptrs=torch.tensor([p.data_ptr() for p in pads], dtype=torch.int64),
        errors=torch.zeros(ERROR_SLOTS, dtype=torch.int64),
        max_spins=INTERPRETER_MAX_SPINS,
        key=key,
        _keep=tuple(maps),
    )


def _run_rank(
    queue: Any,
    fn: Callable[..., Any],
    key: str,
    rank: int,
    world: int,
    nbytes: int,
    slots: int,
    args: tuple,
) -> None:
    try:
        ranks = shared_memory_world(key, rank, world, nbytes, slots)
        result = fn(ranks, *args)
        ranks.check_waits()
        queue.put((rank, True, result))
    except CocoError as error:
        queue.put((rank, False, str(error)))
    except Exception:
        queue.put((rank, False, traceback.format_exc()))


def spawn(
    fn: Callable[..., Any],
    world: int,
    *,
    nbytes: int,
    slots: int,
    args: tuple = (),
    timeout_s: float = 120.0,
) -> list[Any]:
    """Run `fn(SymmetricWorld, *args)` on `world` ranks, a forked process
    each, over shared memory; their results by rank. Raises RanksFailed
    naming every rank that failed (what it raised; a rank that died, its
    exit status), and the ranks still running after `timeout_s`."""
    key = uuid.uuid4().hex[:12]
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    processes = [
        context.Process(
            target=_run_rank,
            args=(queue, fn, key, rank, world, nbytes, slots, args),
            daemon=True,
        )
        for rank in range(world)
    ]
    for process in processes:
        process.start()
    results: dict[int, Any] = {}
    failures: dict[int, str] = {}
    deadline = time.monotonic() + timeout_s
    try:
        while len(results) + len(failures) < world:
            _collect(queue, results, failures)
            for rank, process in enumerate(processes):
                if rank in results or rank in failures or process.is_alive():
                    continue
                _collect(queue, results, failures)  # it may have just reported
                if rank not in results and rank not in failures:
                    failures[rank] = f"exited with status {process.exitcode}"
            if time.monotonic() > deadline:
                for rank in range(world):
                    if rank not in results and rank not in failures:
                        failures[rank] = f"still running after {timeout_s:g} s"
                break
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
            process.join()
        for rank in range(world):
            unlink_segment(key, rank)
    if failures:
        lines = [f"rank {rank}: {failures[rank].strip()}" for rank in sorted(failures)]
        raise RanksFailed(
            f"{len(failures)} of {world} ranks failed:\n" + "\n".join(lines)
        )
    return [results[rank] for rank in range(world)]


def _collect(queue: Any, results: dict[int, Any], failures: dict[int, str]) -> None:
    try:
        rank, ok, value = queue.get(timeout=0.05)
    except Empty:
        return
    (results if ok else failures)[rank] = value


# ============================================================================
# torch.distributed
# ============================================================================


def open_world(nbytes: int, slots: int, group: Any = None) -> SymmetricWorld:
    """This process's rank of the torch.distributed group `group` (default:
    the world): on CUDA, PyTorch's symmetric memory; else shared memory named
    by a key rank 0 broadcasts over the group (gloo). Collective: every rank
    of the group calls it."""
    import torch.distributed as dist

    if not dist.is_initialized():
        raise CocoError(
            "coconet_ir.triton.open_world: torch.distributed is not initialized"
        )
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    if torch.cuda.is_available() and dist.get_backend(group) == "nccl":
        return _symmetric_memory_world(rank, world, nbytes, slots, group)
    key = [uuid.uuid4().hex[:12] if rank == 0 else None]
    dist.broadcast_object_list(
        key, src=dist.get_global_rank(group, 0) if group else 0, group=group
    )
    ranks = shared_memory_world(str(key[0]), rank, world, nbytes, slots)
    dist.barrier(group)  # every rank has mapped every segment: names may go
    unlink_segment(str(key[0]), rank)
    return ranks


def _symmetric_memory_world(
    rank: int, world: int, nbytes: int, slots: int, group: Any
) -> SymmetricWorld:
    """One allocation of PyTorch's symmetric memory: the buffer, then the pad.
    (Written against torch.distributed._symmetric_memory's documented
    `empty`/`rendezvous`/`buffer_ptrs`; not yet run on a GPU.)"""
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    device = torch.device("cuda", torch.cuda.current_device())
    memory = symm_mem.empty(
        nbytes + slots * SLOT_BYTES, dtype=torch.uint8, device=device
    )
    memory.zero_()
    handle = symm_mem.rendezvous(memory, group or dist.group.WORLD)  # type: ignore[arg-type]
    ptrs = list(handle.buffer_ptrs)
    dist.barrier(group)  # every pad is zero before anyone signals
    return SymmetricWorld(
        rank=rank,
        world=world,
        buffer=memory[:nbytes],
        pad=memory[nbytes:].view(torch.int64),
        buffer_ptrs=torch.tensor(ptrs, dtype=torch.int64, device=device),
        pad_ptrs=torch.tensor(
            [p + nbytes for p in ptrs], dtype=torch.int64, device=device
        ),
        errors=torch.zeros(ERROR_SLOTS, dtype=torch.int64, device=device),
        max_spins=GPU_MAX_SPINS,
        _keep=(memory, handle),
    )
