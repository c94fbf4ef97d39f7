"""The emulation's subprocess (run by path; imports numpy and ctypes only).

`python _child.py DIR` reads DIR/request.pkl (run.py), loads the library,
creates the world, runs every rank's calls on a thread per rank, synchronizes,
and writes DIR/outputs.npz and DIR/result.json (the statistics).
"""

from __future__ import annotations

import ctypes
import json
import os
import pickle
import sys
import threading
from pathlib import Path

import numpy as np
from entry_args import c_scalar  # a sibling: this script runs by path


def c_argument(value: object) -> ctypes._SimpleCData:
    """An entry argument as ctypes passes it (docs/gpu/emulation.md): an array as
    its (host, hence device) pointer, a scalar by value."""
    if isinstance(value, np.ndarray):
        if not value.flags.c_contiguous or not value.flags.writeable:
            raise ValueError("entry arrays must be C-contiguous and writable")
        return ctypes.c_void_p(value.ctypes.data)
    return c_scalar(value)


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


def main(directory: Path) -> int:
    request = pickle.loads((directory / "request.pkl").read_bytes())
    lib = ctypes.CDLL(request["library"])
    lib.coco_emu_create.restype = ctypes.c_void_p
    lib.coco_emu_create.argtypes = [
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_size_t,
        ctypes.c_size_t,
    ]
    lib.coco_emu_context.restype = ctypes.c_void_p
    lib.coco_emu_context.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib.coco_emu_synchronize.argtypes = [ctypes.c_void_p]
    lib.coco_emu_stats_json.restype = ctypes.c_size_t
    lib.coco_emu_stats_json.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    lib.coco_emu_destroy.argtypes = [ctypes.c_void_p]
    lib.coco_last_error.restype = ctypes.c_char_p
    lib.coco_last_error.argtypes = [ctypes.c_void_p]

    world, stages = request["world"], request["num_stages"]
    handle = lib.coco_emu_create(
        world,
        stages,
        max(request["symmetric_bytes"], needed(lib, "coco_symmetric_bytes")),
        max(request["signal_slots"], needed(lib, "coco_signal_slots")),
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
        for name, call_stage, args, _ in calls:
            if call_stage != stage:
                continue
            try:
                status = entries[name](
                    ctypes.c_void_p(context), *(c_argument(a) for a in args[rank])
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

    saved = {}
    for _, _, args, outputs in calls:
        for output, index in outputs.items():
            for rank in range(world):
                # raw bytes: npz would lose extension dtypes (bfloat16)
                saved[f"{output}/{rank}"] = args[rank][index].reshape(-1).view(np.uint8)
    np.savez(directory / "outputs.npz", **saved)
    (directory / "result.json").write_text(json.dumps({"stats": stats}))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
