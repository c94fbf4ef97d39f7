"""Run the entries of an emulated build on a world of ranks, in a subprocess
(or a subprocess per rank: a world of processes).

The library is loaded by `_child.py` in a fresh Python process, so that the
watchdog's `_exit(3)` or a sanitizer's abort ends that process only; a failure
of any kind becomes an `EmulationError` carrying the children's stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from coconet_ir.backend.emu.build import compiler
from coconet_ir.backend.emu.entry_args import scalar_spec
from coconet_ir.diagnostics import CocoError

if TYPE_CHECKING:
    from typing_extensions import Unpack

CHILD = Path(__file__).with_name("_child.py")
TSAN_SUPPRESSIONS = Path(__file__).with_name("tsan.supp")
"""Known false positives of the loader (not of the emulated program)."""

Argument = np.ndarray | np.generic | int | float
"""An entry argument: an array is passed as a device pointer (the emulation's
device memory is host memory); a numpy scalar by value with its C type
(`np.int32` → `int`, `np.int64` → `long long`, `np.float32` → `float`, ...);
a Python int as `long long`, a Python float as `double`."""


class EmulationError(CocoError):
    """A failed emulated run: the watchdog fired, a sanitizer reported, an
    entry returned a non-zero status, or the process died. `stderr` has the
    child's messages and `returncode` its exit status."""

    def __init__(self, message: str, stderr: str = "", returncode: int | None = None):
        self.stderr = stderr
        self.returncode = returncode
        super().__init__(message)


@dataclass
class EntryCall:
    """One call of the `extern "C"` entry `entry` on every rank of `stage`.

    `args[r]` holds rank `r`'s arguments in ABI order (docs/gpu/cuda.md: the
    function's arguments, then its out-parameters), without the context.
    `outputs` names the arguments to read back after the run: name → index
    into `args[r]`. The same array object passed to several calls is the same
    buffer in all of them."""

    entry: str
    args: Sequence[Sequence[Argument]]
    stage: int = 0
    outputs: Mapping[str, int] = field(default_factory=dict)


class WorldOptions(TypedDict, total=False):
    """The keywords `run_emulated` and `run_gpu` take for the world they
    create (`World`'s fields but its size, with its defaults)."""

    num_stages: int
    symmetric_bytes: int
    signal_slots: int


@dataclass(frozen=True)
class World:
    """The world a run creates: `num_stages` stages of `world` ranks, each
    rank with `symmetric_bytes` of symmetric workspace and `signal_slots`
    signal slots (raised to what the library's kernels say they need). The
    emulation and the GPU runner share it."""

    world: int
    num_stages: int = 1
    symmetric_bytes: int = 0
    signal_slots: int = 64

    @property
    def ranks(self) -> int:
        return self.world * self.num_stages

    def check(
        self, calls: Sequence[EntryCall]
    ) -> dict[str, tuple[int, int, list[np.ndarray]]]:
        """The outputs `calls` name, checked against the world (a stage in
        range, arguments for every rank, each output an array named once):
        output name → (call index, argument index, each rank's array)."""
        world, num_stages = self.world, self.num_stages
        names: dict[str, tuple[int, int, list[np.ndarray]]] = {}
        for k, call in enumerate(calls):
            if not 0 <= call.stage < num_stages:
                raise CocoError(
                    f"{call.entry}: stage {call.stage} out of range "
                    f"(0..{num_stages - 1})"
                )
            if len(call.args) != world:
                raise CocoError(
                    f"{call.entry}: arguments for {len(call.args)} ranks, "
                    f"world has {world}"
                )
            for name, index in call.outputs.items():
                if name in names:
                    raise CocoError(f"output '{name}' named twice")
                arrays = [
                    a for args in call.args if isinstance(a := args[index], np.ndarray)
                ]
                if len(arrays) != world:
                    raise CocoError(f"output '{name}' of {call.entry} is not an array")
                names[name] = (k, index, arrays)
        return names


def _sanitizer_of(library: Path) -> str | None:
    data = library.read_bytes()
    if b"libtsan.so" in data:
        return "thread"
    if b"libasan.so" in data:
        return "address"
    return None


def _sanitizer_env(sanitize: str | None) -> dict[str, str]:
    if sanitize is None:
        return {}
    name = {"thread": "libtsan.so", "address": "libasan.so"}[sanitize]
    runtime = subprocess.run(
        [compiler(), f"-print-file-name={name}"], capture_output=True, text=True
    ).stdout.strip()
    env = {"LD_PRELOAD": runtime}
    if sanitize == "thread":
        # Data races only: ThreadSanitizer's lock-order (deadlock) detector
        # made a run of the emulator, whose streams and communicators take
        # many mutexes, four times slower (a hang is the watchdog's).
        env["TSAN_OPTIONS"] = (
            "halt_on_error=1 exitcode=66 report_signal_unsafe=0 detect_deadlocks=0 "
            f"suppressions={TSAN_SUPPRESSIONS}"
        )
    else:
        env["ASAN_OPTIONS"] = "detect_leaks=0 halt_on_error=1 exitcode=67"
    return env


class DeviceMemory:
    """The arrays of a run as the child (`_child.py`) is given them: each
    distinct array once (the same object passed twice is one buffer), in the
    order first met, its bytes in C order."""

    def __init__(self) -> None:
        self.index: dict[int, int] = {}
        self.arrays: list[np.ndarray] = []

    def place(self, array: np.ndarray) -> int:
        """`array`'s number, numbering it the first time."""
        if id(array) not in self.index:
            self.index[id(array)] = len(self.arrays)
            self.arrays.append(array)
        return self.index[id(array)]

    def spec(self, argument: Argument) -> list:
        """How the request names `argument` (`_child.c_argument`): an array
        by its number, a scalar by its C type and value."""
        if isinstance(argument, np.ndarray):
            return ["array", self.place(argument)]
        return list(scalar_spec(argument))

    def write(self, path: Path) -> None:
        with path.open("wb") as file:
            for array in self.arrays:
                file.write(np.ascontiguousarray(array).reshape(-1).view(np.uint8).data)


def new_key() -> str:
    """A key for a new world of processes: it names the world's shared memory
    (`/dev/shm/coco-emu-KEY-*`; docs/gpu/emulation.md, "Multi-process mode")."""
    return uuid.uuid4().hex[:20]


def run_emulated(
    library: Path | str,
    world: int,
    calls: Sequence[EntryCall],
    *,
    timeout: float = 120.0,
    watchdog: float | None = None,
    processes: bool = False,
    **options: Unpack[WorldOptions],
) -> tuple[dict[str, list[np.ndarray]], dict]:
    """Run `calls` on a fresh `World(world, **options)` (`num_stages`,
    `symmetric_bytes`, `signal_slots`).

    Every rank runs, on its own thread, the calls of its stage in order
    (entries only enqueue work), then synchronizes its streams. Returns the
    outputs (name → one array per rank of the call's stage) and the
    statistics (docs/gpu/emulation.md). `watchdog` sets COCO_EMU_TIMEOUT (seconds)
    in the child; `timeout` bounds the whole run. With `processes`, every rank
    is a process of its own (docs/gpu/emulation.md, "Multi-process mode"):
    the same outputs, the statistics summed over the processes."""
    library = Path(library)
    shape = World(world, **options)
    checked = shape.check(calls)
    if processes:
        _check_own_memory(calls, shape)
    names = {name: arrays for name, (_, _, arrays) in checked.items()}
    owners = [
        calls[k].stage * world + j
        for k, _, arrays in checked.values()
        for j in range(len(arrays))
    ]
    memory = DeviceMemory()
    request = {
        **asdict(shape),
        "library": str(library),
        "calls": [
            (
                call.entry,
                call.stage,
                [[memory.spec(a) for a in args] for args in call.args],
            )
            for call in calls
        ],
        "outputs": [memory.place(a) for arrays in names.values() for a in arrays],
        "key": new_key(),
    }
    request["arrays"] = [a.nbytes for a in memory.arrays]
    env = dict(os.environ)
    env.update(_sanitizer_env(_sanitizer_of(library)))
    if watchdog is not None:
        env["COCO_EMU_TIMEOUT"] = str(watchdog)
    with tempfile.TemporaryDirectory(prefix="coco-emu-") as scratch:
        work = Path(scratch)
        (work / "request.json").write_text(json.dumps(request))
        memory.write(work / "arrays.bin")
        ranks = list(range(shape.ranks)) if processes else [None]
        try:
            stderr = _run_children(work, ranks, env, timeout, library)
        finally:
            if processes:  # what killed children left (the watchdog removes its own)
                for name in Path("/dev/shm").glob(f"coco-emu-{request['key']}-*"):
                    name.unlink(missing_ok=True)
        reports = {
            g: json.loads((work / _suffixed("result", g, "json")).read_text())
            for g in ranks
        }
        returned = {
            g: (work / _suffixed("outputs", g, "bin")).read_bytes() for g in ranks
        }
    if "WARNING: ThreadSanitizer" in stderr or "ERROR: AddressSanitizer" in stderr:
        raise EmulationError(
            f"sanitizer report in the emulated run of {library.name}:\n"
            f"{stderr.strip()}",
            stderr,
            0,
        )
    outputs: dict[str, list[np.ndarray]] = {}
    at = 0
    slots = iter(owners)
    for name, arrays in names.items():
        outputs[name] = []
        for a in arrays:
            owner = next(slots)
            raw = np.frombuffer(
                returned[owner if processes else None], np.uint8, a.nbytes, at
            )
            outputs[name].append(raw.view(a.dtype).reshape(a.shape).copy())
            at += a.nbytes
    return outputs, merge_stats([r["stats"] for r in reports.values()])


def _check_own_memory(calls: Sequence[EntryCall], shape: World) -> None:
    """With a process per rank each rank has only its own memory: an array
    given to two ranks would be two buffers, unlike with threads."""
    owner: dict[int, int] = {}
    for call in calls:
        for rank, args in enumerate(call.args):
            where = call.stage * shape.world + rank
            for a in args:
                if isinstance(a, np.ndarray):
                    if owner.setdefault(id(a), where) != where:
                        raise CocoError(
                            f"{call.entry}: one array is an argument of global ranks "
                            f"{owner[id(a)]} and {where}; with a process per rank "
                            "each rank has its own memory: give each its own array"
                        )


def _suffixed(stem: str, rank: int | None, extension: str) -> str:
    return f"{stem}.{extension}" if rank is None else f"{stem}-{rank}.{extension}"


def _run_children(
    work: Path,
    ranks: Sequence[int | None],
    env: dict[str, str],
    timeout: float,
    library: Path,
) -> str:
    """Run the child (`_child.py`) once, or once per global rank of a world of
    processes, all at once; their stderr, each rank's after a heading. A child
    that fails, or the timeout, raises EmulationError naming the rank and
    holding every child's messages."""
    # stderr into files, not pipes: a child writing more than a pipe holds
    # (a sanitizer's report) would block while this waits for another.
    logs = [(work / _suffixed("stderr", g, "txt")).open("w+") for g in ranks]
    children = [
        subprocess.Popen(
            [sys.executable, "-S", str(CHILD), str(work)]
            + ([] if g is None else [str(g)]),
            stdout=subprocess.DEVNULL,
            stderr=log,
            text=True,
            env=env,
        )
        for g, log in zip(ranks, logs)
    ]
    deadline = time.monotonic() + timeout
    errors: list[str] = []
    timed_out = False
    for child in children:
        try:
            child.wait(max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            timed_out = True
            break
    if timed_out:
        for child in children:
            child.kill()
    texts = []
    for g, child, log in zip(ranks, children, logs):
        child.wait()
        log.seek(0)
        text = log.read()
        log.close()
        texts.append(
            text if g is None else f"[rank process {g}]\n{text}" if text else ""
        )
        if child.returncode not in (0, None) and not timed_out:
            who = "" if g is None else f" (the process of global rank {g})"
            errors.append(f"exit status {child.returncode}{who}")
    stderr = "".join(texts)
    if timed_out:
        raise EmulationError(
            f"emulated run of {library.name} timed out after {timeout} s\n{stderr}",
            stderr,
        )
    if errors:
        status = children[0].returncode
        for child in children:
            if child.returncode:
                status = child.returncode
                break
        raise EmulationError(
            f"emulated run of {library.name} failed ({'; '.join(errors)}):\n"
            f"{stderr.strip()}",
            stderr,
            status,
        )
    return stderr


def merge_stats(reports: Sequence[dict]) -> dict:
    """The statistics of a world from its processes' (each counts its own
    rank's rows; docs/gpu/emulation.md): counters summed, kernel launches
    summed by name, timelines and stream events concatenated (their event
    numbers come from one clock the processes share). One report is
    returned as it is."""
    if len(reports) == 1:
        return reports[0]
    merged = dict(reports[0])
    for key in ("launches", "nccl_calls", "gemms", "bytes"):
        merged[key] = np.sum([np.array(r[key]) for r in reports], axis=0).tolist()
    kernels: dict[str, int] = {}
    for r in reports:
        for name, count in r["kernels"].items():
            kernels[name] = kernels.get(name, 0) + count
    merged["kernels"] = kernels
    merged["timeline"] = [t for r in reports for t in r["timeline"]]
    merged["stream_events"] = [e for r in reports for e in r["stream_events"]]
    return merged
