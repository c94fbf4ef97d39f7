"""The emulation's subprocess (run by path, `python -S`; imports ctypes and the
standard library only, so that it starts in a few hundredths of a second).

`python -S _child.py DIR` reads DIR/request.json and DIR/arrays.bin (the
arrays' bytes one after the other: run.py's DeviceMemory), loads the library,
creates the world, runs every rank's calls on a thread per rank,
synchronizes, and writes DIR/outputs.bin (the output arrays' bytes, in the
request's order) and DIR/result.json (the statistics).

`python -S _child.py DIR G` is global rank G of a world of processes (one
such child per rank, docs/gpu/emulation.md, "Multi-process mode"): it makes
its rank with the request's key, runs that rank's calls only, and writes
DIR/outputs-G.bin and DIR/result-G.json (its own rank's statistics).
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import threading
from pathlib import Path

ALIGN = 256
"""Each array's alignment in the child's memory: cudaMalloc's, and more than
any vector access of the emitted code needs."""

LIBC = ctypes.CDLL(None)
LIBC.posix_memalign.argtypes = [
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.c_size_t,
    ctypes.c_size_t,
]


def load_arrays(path: Path, sizes: list[int]) -> list[int]:
    """The arrays whose bytes `path` holds one after the other (`sizes` of
    them), each read into memory of its own (posix_memalign, so a sanitizer
    sees each one's bounds): their addresses, the device memory the entries
    are given. Never freed: the process ends after the run."""
    addresses = []
    with path.open("rb") as file:
        for size in sizes:
            memory = ctypes.c_void_p()
            if LIBC.posix_memalign(ctypes.byref(memory), ALIGN, max(size, 1)) != 0:
                raise MemoryError(f"cannot allocate an array of {size} bytes")
            address = memory.value or 0
            if file.readinto((ctypes.c_char * size).from_address(address)) != size:
                raise ValueError(f"{path}: the arrays' bytes end early")
            addresses.append(address)
    return addresses


def c_argument(spec: list, addresses: list[int]) -> ctypes._SimpleCData:
    """An entry argument as ctypes passes it (docs/gpu/emulation.md): an array
    (`["array", k]`, the request's k-th) as its (host, hence device) address,
    a scalar (`["c_float", 0.5]`, entry_args.scalar_spec) by value."""
    if spec[0] == "array":
        return ctypes.c_void_p(addresses[spec[1]])
    return getattr(ctypes, spec[0])(spec[1])


def needed(lib: ctypes.CDLL, query: str) -> int:
    """What the emitted code says it needs (`coco_symmetric_bytes()`,
    `coco_signal_slots()`; docs/gpu/cuda.md), 0 if the library has no such
    query: a world is never made smaller than its kernels address."""
    function = getattr(lib, query, None)
    if function is None:
        return 0
    function.restype = ctypes.c_size_t
    function.argtypes = []
    return int(function())


def harness_library(path: str) -> ctypes.CDLL:
    """The emulated library at `path` with the harness's functions typed
    (coco_emu_harness.h): this child's and `ranks.EmulatedRank`'s."""
    lib = ctypes.CDLL(path)
    pointer, size = ctypes.c_void_p, ctypes.c_size_t
    lib.coco_emu_create.restype = pointer
    lib.coco_emu_create.argtypes = [ctypes.c_int, ctypes.c_int, size, size]
    lib.coco_emu_create_rank.restype = pointer
    lib.coco_emu_create_rank.argtypes = [
        ctypes.c_char_p,
        *[ctypes.c_int] * 3,
        size,
        size,
    ]
    lib.coco_emu_context.restype = pointer
    lib.coco_emu_context.argtypes = [pointer, ctypes.c_int, ctypes.c_int]
    lib.coco_emu_synchronize.argtypes = [pointer]
    lib.coco_emu_stats_json.restype = size
    lib.coco_emu_stats_json.argtypes = [pointer, ctypes.c_char_p, size]
    lib.coco_emu_destroy.argtypes = [pointer]
    lib.coco_emu_fail.argtypes = [pointer]
    lib.coco_last_error.restype = ctypes.c_char_p
    lib.coco_last_error.argtypes = [pointer]
    return lib


def main(directory: Path, rank_of_process: int | None = None) -> int:
    request = json.loads((directory / "request.json").read_text())
    addresses = load_arrays(directory / "arrays.bin", request["arrays"])
    lib = harness_library(request["library"])

    world, stages = request["world"], request["num_stages"]
    symmetric_bytes = max(
        request["symmetric_bytes"], needed(lib, "coco_symmetric_bytes")
    )
    signal_slots = max(request["signal_slots"], needed(lib, "coco_signal_slots"))
    if rank_of_process is None:
        handle = lib.coco_emu_create(world, stages, symmetric_bytes, signal_slots)
    else:  # one rank of a world of processes (docs/gpu/emulation.md)
        handle = lib.coco_emu_create_rank(
            request["key"].encode(),
            rank_of_process,
            world,
            stages,
            symmetric_bytes,
            signal_slots,
        )
    if not handle:
        print("coco-emu: error: cannot create the world", file=sys.stderr)
        return 2
    calls = request["calls"]
    entries = {name: getattr(lib, name) for name, *_ in calls}
    for function in entries.values():
        function.restype = ctypes.c_int

    def run_rank(stage: int, rank: int) -> None:
        context = lib.coco_emu_context(handle, stage, rank)
        for name, call_stage, args in calls:
            if call_stage != stage:
                continue
            try:
                status = entries[name](
                    ctypes.c_void_p(context),
                    *(c_argument(a, addresses) for a in args[rank]),
                )
            except Exception as error:  # e.g. ctypes' limit of 1024 arguments
                # An exception in a thread would only be printed: fail loudly.
                print(
                    f"coco-emu: error: cannot call {name} on rank {rank} of stage "
                    f"{stage}: {error}",
                    file=sys.stderr,
                    flush=True,
                )
                os._exit(1)
            if status != 0:
                # The other ranks may now wait forever for this one: stop here.
                text = lib.coco_last_error(context).decode(errors="replace")
                print(
                    f"coco-emu: error: {name} on rank {rank} of stage {stage} "
                    f"returned status {status}: {text}",
                    file=sys.stderr,
                    flush=True,
                )
                os._exit(1)
        lib.coco_emu_synchronize(context)

    threads = [
        threading.Thread(target=run_rank, args=(stage, rank))
        for stage in range(stages)
        for rank in range(world)
        if rank_of_process in (None, stage * world + rank)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    size = lib.coco_emu_stats_json(handle, None, 0)
    buffer = ctypes.create_string_buffer(size + 1)
    lib.coco_emu_stats_json(handle, buffer, size + 1)
    stats = json.loads(buffer.value.decode())
    lib.coco_emu_destroy(handle)

    suffix = "" if rank_of_process is None else f"-{rank_of_process}"
    with (directory / f"outputs{suffix}.bin").open("wb") as file:
        for k in request["outputs"]:
            file.write(ctypes.string_at(addresses[k], request["arrays"][k]))
    (directory / f"result{suffix}.json").write_text(json.dumps({"stats": stats}))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else None))
