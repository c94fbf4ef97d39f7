"""A rank per process: one rank of an emulated world in this process
(docs/gpu/emulation.md, "Multi-process mode").

Every process of the world loads the same emulated library (`compile_emulated`)
and makes its rank with the same key: `coco_emu_create_rank` maps every other
rank's symmetric workspace and signal pad from shared memory, and NCCL calls
meet other processes' through shared-memory messages. The host entries are
called in this process, on this process's memory: an argument is a numpy
array or a CPU torch tensor (its data is the rank's device memory; the entry
writes results and updated parameters into it), or a scalar passed by value
(`entry_args.scalar_spec`).

The watchdog (a peer that exited, a wait past COCO_EMU_TIMEOUT) ends this
process with exit status 3 after printing what waited for whom on stderr, as
it ends the subprocess of `run_emulated`: a rank whose peers are gone cannot
go on.
"""

from __future__ import annotations

import ctypes
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from coconet_ir.backend.emu._child import harness_library, needed
from coconet_ir.backend.emu.entry_args import c_scalar
from coconet_ir.backend.emu.run import EmulationError, new_key

KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A world's key: it names the world's shared memory (`/dev/shm/coco-emu-KEY-*`)."""


def pointer_of(value: Any) -> ctypes.c_void_p | ctypes._SimpleCData:
    """An entry argument as ctypes passes it: an array's or tensor's data
    address, a scalar by value."""
    if isinstance(value, np.ndarray):
        if not value.flags.c_contiguous:
            raise EmulationError("an entry's array argument must be C-contiguous")
        return ctypes.c_void_p(value.ctypes.data)
    data_ptr = getattr(value, "data_ptr", None)  # a torch tensor (CPU)
    if data_ptr is not None:
        if getattr(value, "device", None) is not None and value.device.type != "cpu":
            raise EmulationError(
                f"the emulation's device memory is this process's: a tensor on "
                f"{value.device} cannot be an argument"
            )
        if not value.is_contiguous():
            raise EmulationError("an entry's tensor argument must be contiguous")
        return ctypes.c_void_p(data_ptr())
    return c_scalar(value)


class EmulatedRank:
    """Global rank `rank` (`stage * world + rank_in_stage`) of an emulated
    world of `num_stages` stages of `world` ranks, every rank a process, all
    made with the same `key` and sizes. Made when every rank has joined (or
    the watchdog ends the process naming the one that did not)."""

    def __init__(
        self,
        library: str | Path,
        key: str,
        rank: int,
        world: int,
        *,
        num_stages: int = 1,
        symmetric_bytes: int = 0,
        signal_slots: int = 1,
    ):
        if not KEY.fullmatch(key):
            raise EmulationError(
                f"a world's key is 1..64 letters, digits, '_' or '-', got {key!r}"
            )
        self.library = Path(library)
        self.rank, self.world, self.num_stages = rank, world, num_stages
        self.failed = False
        lib = self.lib = harness_library(str(library))
        self.handle = lib.coco_emu_create_rank(
            key.encode(),
            rank,
            world,
            num_stages,
            max(symmetric_bytes, needed(lib, "coco_symmetric_bytes")),
            max(signal_slots, needed(lib, "coco_signal_slots"), 1),
        )
        if not self.handle:
            raise EmulationError(
                f"coco_emu_create_rank refused rank {rank} of {world} x {num_stages} "
                "(its reason is on stderr)"
            )
        self.context = lib.coco_emu_context(self.handle, rank // world, rank % world)

    def call(self, entry: str, arguments: Sequence[Any]) -> None:
        """Run the host entry `entry` (`coco_FUNC`) on this rank's
        `arguments` (after the context, in ABI order) and wait for it."""
        if not self.handle or self.failed:
            raise EmulationError(
                f"{entry}: this rank's world is "
                f"{'closed' if not self.handle else 'failed'}"
            )
        function = getattr(self.lib, entry, None)
        if function is None:
            raise EmulationError(f"{self.library.name} has no entry {entry}")
        function.restype = ctypes.c_int
        status = function(
            ctypes.c_void_p(self.context), *(pointer_of(a) for a in arguments)
        )
        self.lib.coco_emu_synchronize(ctypes.c_void_p(self.context))
        if status != 0:
            # The other ranks may wait for this one's part of the call: say
            # it failed (they stop naming it) and take no more calls.
            text = self.lib.coco_last_error(ctypes.c_void_p(self.context))
            self.lib.coco_emu_fail(ctypes.c_void_p(self.handle))
            self.failed = True
            raise EmulationError(
                f"{entry} returned status {status} on rank {self.rank}: "
                f"{(text or b'').decode(errors='replace')}"
            )

    def stats(self) -> dict[str, Any]:
        """What the emulator counted (docs/gpu/emulation.md, "Statistics"):
        this process's rank's rows only."""
        size = self.lib.coco_emu_stats_json(ctypes.c_void_p(self.handle), None, 0)
        text = ctypes.create_string_buffer(size + 1)
        self.lib.coco_emu_stats_json(ctypes.c_void_p(self.handle), text, size + 1)
        return json.loads(text.value)

    def close(self) -> None:
        """Wait for this rank's streams, stop them, unmap the world."""
        if self.handle:
            self.lib.coco_emu_destroy(ctypes.c_void_p(self.handle))
            self.handle = None

    def __enter__(self) -> EmulatedRank:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


__all__ = ["KEY", "EmulatedRank", "new_key", "pointer_of"]
