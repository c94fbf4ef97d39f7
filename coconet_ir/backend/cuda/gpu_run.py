"""Build an emitted `.cu` for real GPUs and run its entries (docs/gpu/running.md).

The GPU twin of `coconet_ir.backend.emu`: `compile_gpu` builds the source
with nvcc into a shared library with the GPU harness (coco_gpu_harness.h,
force-included), cached by content hash under `$COCONET_CACHE/gpu`;
`run_gpu` takes the same `EntryCall`s as `run_emulated` and returns the same
`(outputs, stats)` pair, so a driver switches backends with one argument.

One process drives every GPU: `run_gpu` creates a world (one rank per device,
`num_stages` stages of `world` ranks), copies each rank's arrays to its device
with cupy, runs every rank's calls on a thread of its own (ctypes releases the
GIL during an entry), synchronizes and copies the outputs back. With `iters`,
it then times warm-up plus timed iterations with CUDA events on each rank's
stream 0.

This module imports without cupy or a GPU; cupy is imported when a run needs
it, and a run without one is a `CocoError` starting "no GPU:".
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from coconet_ir.backend.cuda.toolchain import nvcc, nvcc_command
from coconet_ir.backend.emu.build import build_cached
from coconet_ir.backend.emu.entry_args import c_scalar
from coconet_ir.backend.emu.run import EntryCall, World, WorldOptions
from coconet_ir.diagnostics import CocoError

if TYPE_CHECKING:
    from typing_extensions import Unpack

DEFAULT_ARCH = "sm_90"
"""The architecture `compile_gpu` builds for when no device says otherwise."""


class GpuCompileError(CocoError):
    """nvcc refused the emitted source; `stderr` holds its messages."""

    def __init__(self, message: str, stderr: str = ""):
        self.stderr = stderr
        super().__init__(message)


class GpuRunError(CocoError):
    """A failed GPU run: no GPU, too few GPUs, the world could not be created
    (NCCL, P2P), an entry returned a non-zero status, or a rank hung."""


# ---------------------------------------------------------------- the device


def _cupy() -> Any:
    """cupy, or a CocoError saying why there is no GPU to run on."""
    try:
        import cupy  # type: ignore[import-not-found]
    except ImportError as err:
        raise GpuRunError(
            f"no GPU: cupy is not installed ({err}); pip install -e '.[cuda,gpu]'"
        ) from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as err:  # cupy's CUDARuntimeError, a missing driver
        raise GpuRunError(f"no GPU: the CUDA runtime reports none ({err})") from None
    if count < 1:
        raise GpuRunError("no GPU: the CUDA runtime reports 0 devices")
    return cupy


def _cudart_device_count() -> int | None:
    """`cudaGetDeviceCount` through a libcudart on the system, if any."""
    candidates = ["libcudart.so", "libcudart.so.13", "libcudart.so.12"]
    for directory in (
        "/usr/local/cuda/lib64",
        "/usr/local/cuda/targets/x86_64-linux/lib",
    ):
        candidates += [str(p) for p in sorted(Path(directory).glob("libcudart.so*"))]
    for name in candidates:
        try:
            cudart = ctypes.CDLL(name)
        except OSError:
            continue
        count = ctypes.c_int(0)
        if cudart.cudaGetDeviceCount(ctypes.byref(count)) != 0:
            return 0
        return count.value
    return None


def gpu_count() -> int:
    """How many CUDA devices this process sees (0 without a GPU, a driver or
    a CUDA runtime): cupy if installed, else libcudart, else `nvidia-smi -L`."""
    try:
        import cupy  # type: ignore[import-not-found]

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:
        pass
    count = _cudart_device_count()
    if count is not None:
        return count
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    if listed.returncode != 0:
        return 0
    return sum(1 for line in listed.stdout.splitlines() if line.startswith("GPU "))


def device_arch(device: int = 0) -> str | None:
    """`sm_XY` of a visible device (through cupy), None without one."""
    try:
        import cupy  # type: ignore[import-not-found]

        return f"sm_{cupy.cuda.Device(device).compute_capability}"
    except Exception:
        return None


# ------------------------------------------------------------------ building


def cache_dir() -> Path:
    root = os.environ.get("COCONET_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "coconet-ir"
    return base / "gpu"


def compile_gpu(cu_source: str, arch: str | None = None) -> Path:
    """The shared library built from `cu_source` with nvcc for `arch` (default:
    the first visible device's, else `DEFAULT_ARCH`), with the GPU harness,
    linked against NCCL and cuBLAS; built once per content."""
    if nvcc() is None:
        raise GpuCompileError("no nvcc: install the CUDA toolkit or set COCONET_NVCC")
    arch = arch or device_arch() or DEFAULT_ARCH
    # The command with placeholder paths is the key (the paths depend on it).
    template = nvcc_command(
        "SOURCE", arch, "OUT", shared=True, harness=True, optimize=True
    )
    return build_cached(
        cu_source,
        cache_dir(),
        template,
        f".{arch}",
        lambda source, out: nvcc_command(
            source, arch, out, shared=True, harness=True, optimize=True
        ),
        GpuCompileError,
        "nvcc build",
    )


# ------------------------------------------------------------------- running


def load_library(library: Path | str) -> ctypes.CDLL:
    """The built library with the harness's signatures declared."""
    lib = ctypes.CDLL(str(library))
    vp, c_int, c_size = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    lib.coco_gpu_create.restype = vp
    lib.coco_gpu_create.argtypes = [c_int, c_int, ctypes.POINTER(c_int), c_size, c_size]
    lib.coco_gpu_create_error.restype = ctypes.c_char_p
    lib.coco_gpu_create_error.argtypes = []
    lib.coco_gpu_context.restype = vp
    lib.coco_gpu_context.argtypes = [vp, c_int, c_int]
    lib.coco_gpu_bind.argtypes = [vp, c_int, c_int]
    lib.coco_gpu_synchronize.argtypes = [vp]
    lib.coco_gpu_timer_start.argtypes = [vp, c_int, c_int]
    lib.coco_gpu_timer_stop.argtypes = [
        vp,
        c_int,
        c_int,
        ctypes.POINTER(ctypes.c_float),
    ]
    lib.coco_gpu_destroy.argtypes = [vp]
    lib.coco_gpu_destroy.restype = None
    lib.coco_last_error.restype = ctypes.c_char_p
    lib.coco_last_error.argtypes = [vp]
    return lib


class _Rank:
    """One rank's device copies of its arrays (the same host array is the
    same device buffer in every call) and its ctypes arguments per call."""

    def __init__(self, cupy: Any, device: int):
        self.cupy = cupy
        self.device = device
        self.buffers: dict[int, Any] = {}
        self.calls: list[list[Any] | None] = []

    def buffer(self, array: np.ndarray) -> Any:
        found = self.buffers.get(id(array))
        if found is None:
            raw = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
            with self.cupy.cuda.Device(self.device):
                found = (
                    self.cupy.asarray(raw) if raw.size else self.cupy.empty(1, np.uint8)
                )
            self.buffers[id(array)] = found
        return found

    def arguments(self, args: Sequence[Any]) -> list[Any]:
        return [
            ctypes.c_void_p(self.buffer(a).data.ptr)
            if isinstance(a, np.ndarray)
            else c_scalar(a)
            for a in args
        ]


def run_gpu(
    library: Path | str,
    world: int,
    calls: Sequence[EntryCall],
    *,
    devices: Sequence[int] | None = None,
    warmup: int = 0,
    iters: int = 0,
    timeout: float = 300.0,
    **options: Unpack[WorldOptions],
) -> tuple[dict[str, list[np.ndarray]], dict]:
    """Run `calls` on a fresh `World(world, **options)` (`num_stages`
    stages of `world` ranks, `symmetric_bytes`, `signal_slots`), rank `r` of
    stage `s` on `devices[s * world + r]` (default 0, 1, ...).

    Every rank runs, on its own thread, the calls of its stage in order, then
    synchronizes its streams; the outputs (name → one array per rank of the
    call's stage) are read back after that single run. With `iters` > 0 the
    calls then run `warmup` more times and `iters` times between CUDA events
    on each rank's stream 0 (on the same buffers; the outputs returned are the
    first run's). The second result is the run's report: `world`,
    `num_stages`, `devices`, and with `iters` `timing` = {`warmup`, `iters`,
    `ms_per_iteration`: one per rank (stage-major), `ms`: the slowest}."""
    shape = World(world, **options)
    names = shape.check(calls)
    if warmup < 0 or iters < 0:
        raise CocoError("warmup and iters must be >= 0")
    cupy = _cupy()
    ranks = shape.ranks
    visible = cupy.cuda.runtime.getDeviceCount()
    chosen = list(devices) if devices is not None else list(range(ranks))
    if len(chosen) != ranks:
        raise GpuRunError(f"{len(chosen)} devices for {ranks} ranks")
    if ranks > visible and devices is None:
        raise GpuRunError(
            f"no GPU for every rank: {ranks} ranks (world {world} x "
            f"{shape.num_stages} stages) need {ranks} GPUs, {visible} visible"
        )
    lib = load_library(library)
    c_devices = (ctypes.c_int * ranks)(*chosen)
    handle = lib.coco_gpu_create(
        world, shape.num_stages, c_devices, shape.symmetric_bytes, shape.signal_slots
    )
    if not handle:
        text = lib.coco_gpu_create_error().decode(errors="replace")
        raise GpuRunError(
            f"cannot create a world of {ranks} ranks on GPUs {chosen}: {text}"
        )
    try:
        return _run(
            lib,
            handle,
            cupy,
            shape,
            chosen,
            calls,
            names,
            warmup,
            iters,
            timeout,
        )
    finally:
        lib.coco_gpu_destroy(handle)


def _run(
    lib: ctypes.CDLL,
    handle: int,
    cupy: Any,
    shape: World,
    devices: list[int],
    calls: Sequence[EntryCall],
    names: dict[str, tuple[int, int, list[np.ndarray]]],
    warmup: int,
    iters: int,
    timeout: float,
) -> tuple[dict[str, list[np.ndarray]], dict]:
    world, ranks = shape.world, shape.ranks
    entries = {call.entry: getattr(lib, call.entry) for call in calls}
    for function in entries.values():
        function.restype = ctypes.c_int
    state = [_Rank(cupy, devices[g]) for g in range(ranks)]
    for g, rank in enumerate(state):
        stage, r = divmod(g, world)
        rank.calls = [
            rank.arguments(c.args[r]) if c.stage == stage else None for c in calls
        ]
        cupy.cuda.Device(rank.device).synchronize()  # the copies are on cupy's stream
    errors: list[str] = []
    read: dict[tuple[str, int], np.ndarray] = {}
    elapsed = [0.0] * ranks
    start = threading.Barrier(ranks)

    def step(g: int, context: int) -> bool:
        stage, r = divmod(g, world)
        for call, args in zip(calls, state[g].calls):
            if args is None:
                continue
            status = entries[call.entry](ctypes.c_void_p(context), *args)
            if status != 0:
                text = lib.coco_last_error(context).decode(errors="replace")
                errors.append(
                    f"{call.entry} on rank {r} of stage {stage} (GPU {devices[g]}) "
                    f"returned status {status}: {text}"
                )
                return False
        return True

    def synchronize(g: int, context: int, what: str) -> bool:
        status = lib.coco_gpu_synchronize(context)
        if status != 0:
            text = lib.coco_last_error(context).decode(errors="replace")
            errors.append(f"rank {g} (GPU {devices[g]}) failed in {what}: {text}")
        return status == 0

    def rank_main(g: int) -> None:
        stage, r = divmod(g, world)
        cupy.cuda.Device(devices[g]).use()
        if lib.coco_gpu_bind(handle, stage, r) != 0:
            errors.append(f"cannot make GPU {devices[g]} current for rank {g}")
            return
        context = lib.coco_gpu_context(handle, stage, r)
        if not (step(g, context) and synchronize(g, context, "the run")):
            return
        for name, (k, index, arrays) in names.items():
            if calls[k].stage == stage:
                host = arrays[r]
                raw = cupy.asnumpy(state[g].buffers[id(host)])[: host.nbytes]
                read[name, r] = raw.view(host.dtype).reshape(host.shape).copy()
        if not iters:
            return
        for _ in range(warmup):
            if not step(g, context):
                return
        if not synchronize(g, context, "the warm-up"):
            return
        try:
            start.wait(timeout)
        except threading.BrokenBarrierError:
            return
        if lib.coco_gpu_timer_start(handle, stage, r) != 0:
            errors.append(f"rank {g}: cannot record the start event")
            return
        for _ in range(iters):
            if not step(g, context):
                return
        ms = ctypes.c_float(0.0)
        if lib.coco_gpu_timer_stop(handle, stage, r, ctypes.byref(ms)) != 0:
            errors.append(f"rank {g}: cannot time the run")
            return
        elapsed[g] = ms.value / iters

    threads = [
        threading.Thread(target=rank_main, args=(g,), daemon=True) for g in range(ranks)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    if errors:
        start.abort()
        raise GpuRunError("GPU run failed:\n" + "\n".join(errors))
    if any(thread.is_alive() for thread in threads):
        start.abort()
        raise GpuRunError(
            f"GPU run did not finish in {timeout} s (a rank waits for a collective "
            "or a signal that never comes)"
        )
    outputs = {name: [read[name, r] for r in range(world)] for name in names}
    report: dict[str, Any] = {
        "world": world,
        "num_stages": shape.num_stages,
        "devices": devices,
    }
    if iters:
        report["timing"] = {
            "warmup": warmup,
            "iters": iters,
            "ms_per_iteration": elapsed,
            "ms": max(elapsed),
        }
    return outputs, report


__all__ = [
    "DEFAULT_ARCH",
    "EntryCall",
    "GpuCompileError",
    "GpuRunError",
    "compile_gpu",
    "gpu_count",
    "load_library",
    "run_gpu",
]
