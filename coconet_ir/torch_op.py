"""A compiled coconet-ir program as a PyTorch custom operator (docs/frameworks.md).

`register(program, "coconet::NAME", world=N)` lowers the program for `N`
ranks (`coconet_ir.emulate.lower`: `passes`, then `convert-coco-to-gpu`, then
the `cuda` target) and registers the `torch.library.custom_op` `NAME`, whose
tensors are ONE rank's buffers in the order of the host entry's ABI
(docs/gpu/cuda.md, "The ABI of a host entry"): the lowered function's arguments at
their per-rank shapes, updated parameters mutated in place, results returned.

- CUDA: the process is one rank of a `torch.distributed` group (one process
  per GPU, as torchrun starts them). The first call on a device builds the
  library (`compile_gpu`, or the one given), creates an NCCL communicator over
  the group with the library's NCCL (`ncclCommInitRank`, the unique id
  broadcast through the group), and a `coco_context` whose stream 0 is, at
  every call, torch's current stream; then each call runs `coco_<func>`
  through ctypes on the tensors' data pointers.
- Meta (fake): the results' per-rank shapes and dtypes from the lowered
  function's types, so `torch.compile` traces the op without running it.
- CPU, `cpu="emulator"`: the process is one rank of an emulated world whose
  ranks are the group's processes (docs/gpu/emulation.md, "Multi-process
  mode"): the lowered CUDA C built for the CPU emulation runs in this process
  on the tensors' memory, its collectives and fused kernels meeting the other
  processes' through shared memory, as a GPU's would over NVLink.
- CPU, `cpu="interpreter"`: one rank's tensors cannot give that rank's
  outputs alone. The CPU kernel gathers every rank's tensors through the
  group (with world 1 there is nothing to gather), runs the whole world on
  the reference interpreter (on the original program), and keeps this rank's
  share.

This module imports without torch: what needs torch imports it when called
and, without it, raises an ImportError that says to `pip install torch`.
"""

from __future__ import annotations

import ctypes
import keyword
import os
import re
import socket
import threading
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp

from coconet_ir.backend.cuda import runtime_dir
from coconet_ir.backend.tensors import array_of, tensor_of
from coconet_ir.diagnostics import CocoError
from coconet_ir.dialects import coco
from coconet_ir.dialects.coco.element_types import ElementType, element_info
from coconet_ir.emulate import Lowered, arguments_of, lower, updated_positions
from coconet_ir.interpreter.inputs import argument_key, check_world, result_key
from coconet_ir.interpreter.values import DistValue, local_shape

DEFAULT_PASSES = "coco-optimize{fuse=false fuse_collective=false}"
"""CoCoNet's schedule without the fused collective kernels: those store into
their peers' memory (a symmetric workspace), which one process per GPU
reaches through CUDA IPC handles, a path not yet run on GPUs
(docs/frameworks.md, "Limits"); until it has, the default keeps the
collectives NCCL calls. The CPU emulator runs the fused kernels
(`passes="coco-optimize"`)."""

CPU_BACKENDS = ("interpreter", "emulator")

TORCH_MISSING = (
    "coconet_ir.torch_op needs PyTorch, which is not installed: pip install torch "
    "(docs/frameworks.md)"
)


def _torch() -> Any:
    """torch, or an ImportError saying how to get it."""
    try:
        import torch  # type: ignore[import-not-found]
    except ImportError as err:
        raise ImportError(TORCH_MISSING, name="torch") from err
    return torch


# ---------------------------------------------------------------------------
# The signature: one rank's tensors
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class OpTensor:
    """One tensor of the op: an argument or a result of the lowered coco
    function, as one rank holds it."""

    name: str
    """Its name in the op's schema (the coco argument's name where it is an
    identifier, else `argI`; `resultI` for results)."""
    key: str
    """The interpreter's key, `FUNC.argI` or `FUNC.resultI`."""
    type: coco.TensorType
    """Its type in the lowered program (the layout says how it is sharded)."""
    shape: tuple[int, ...]
    """The per-rank shape (`local_shape` of the type)."""
    element: ElementType
    updated: bool = False
    """An argument the program updates with `coco.update` (mutated in place)."""

    @property
    def dtype(self) -> Any:
        """The torch dtype: the element type's numpy name (`float32`,
        `bfloat16`, ...) is torch's too."""
        return getattr(_torch(), self.element.numpy_name)


def _schema_names(func: FuncOp) -> list[str]:
    """The schema names of `func`'s arguments."""
    names: list[str] = []
    for position, arg in enumerate(func.body.block.args):
        hint = arg.name_hint or ""
        usable = hint.isidentifier() and not keyword.iskeyword(hint)
        if not usable or hint in names or re.fullmatch(r"(arg|result)\d+", hint):
            hint = f"arg{position}"
        names.append(hint)
    return names


def signature(func: FuncOp, world: int) -> tuple[list[OpTensor], list[OpTensor]]:
    """The op's arguments and results for the lowered coco function `func` on
    `world` ranks, in the order of the host entry's ABI."""
    updated = set(updated_positions(func))
    arguments: list[OpTensor] = []
    for position, (arg, name) in enumerate(
        zip(func.body.block.args, _schema_names(func))
    ):
        t = coco.tensor_type(arg)
        arguments.append(
            OpTensor(
                name,
                argument_key(func, position),
                t,
                local_shape(t, world),
                element_info(t.element_type),
                position in updated,
            )
        )
    results: list[OpTensor] = []
    for position, t in enumerate(func.function_type.outputs.data):
        assert isinstance(t, coco.TensorType)
        results.append(
            OpTensor(
                f"result{position}",
                result_key(func, position),
                t,
                local_shape(t, world),
                element_info(t.element_type),
            )
        )
    return arguments, results


def schema(arguments: Sequence[OpTensor], results: Sequence[OpTensor]) -> str:
    """The op's schema: `(Tensor(a0!) w, Tensor g, ...) -> (Tensor, ...)`."""
    params = [
        f"Tensor(a{i}!) {a.name}" if a.updated else f"Tensor {a.name}"
        for i, a in enumerate(arguments)
    ]
    returns = ", ".join("Tensor" for _ in results)
    if len(results) != 1:
        returns = f"({returns})"
    return f"({', '.join(params)}) -> {returns}"


# ---------------------------------------------------------------------------
# The host entry's context, as ctypes sees it
# ---------------------------------------------------------------------------


@cache
def runtime_constant(name: str) -> int:
    """A `#define NAME N` of coco_runtime.h (the header is its one definition)."""
    header = (runtime_dir() / "coco_runtime.h").read_text()
    found = re.search(rf"^#define {name} (\d+)$", header, re.M)
    if found is None:
        raise CocoError(f"coco_runtime.h defines no {name}")
    return int(found.group(1))


@cache
def context_struct() -> type[ctypes.Structure]:
    """`struct coco_context` of coco_runtime.h (docs/gpu/cuda.md, "The ABI of a host
    entry"); tests/unit/frameworks checks its layout against the header."""
    streams = runtime_constant("COCO_MAX_STREAMS")
    events = runtime_constant("COCO_MAX_EVENTS")
    ranks = runtime_constant("COCO_MAX_RANKS")
    text = runtime_constant("COCO_ERROR_TEXT")
    pointer = ctypes.c_void_p

    class CocoContext(ctypes.Structure):
        _fields_ = [
            ("rank", ctypes.c_int),
            ("world", ctypes.c_int),
            ("stage", ctypes.c_int),
            ("num_stages", ctypes.c_int),
            ("comm", pointer),
            ("pipeline_comm", pointer),
            ("node_comm", pointer),
            ("cross_comm", pointer),
            ("ranks_per_node", ctypes.c_int),
            ("cublas", pointer),
            ("streams", pointer * streams),
            ("events", pointer * events),
            ("symmetric", pointer * ranks),
            ("symmetric_bytes", ctypes.c_size_t),
            ("signals", pointer * ranks),
            ("signal_slots", ctypes.c_size_t),
            ("epoch", ctypes.c_uint64),
            ("sm_count", ctypes.c_int),
            ("error", ctypes.c_char * text),
        ]

    return CocoContext


IPC_HANDLES_BYTES = 2 * 64
"""COCO_IPC_HANDLES_BYTES of coco_gpu_harness.h: a rank's workspace and pad
as two `cudaIpcMemHandle_t` (CUDA_IPC_HANDLE_SIZE, 64 bytes each)."""


class NcclUniqueId(ctypes.Structure):
    """`ncclUniqueId`: 128 opaque bytes (NCCL_UNIQUE_ID_BYTES)."""

    _fields_ = [("internal", ctypes.c_char * 128)]


def enqueue(lib: ctypes.CDLL, entry: str, context: int, tensors: Sequence[Any]) -> None:
    """Call the host entry `entry` of `lib` with the context at address
    `context` and the tensors' data pointers (arguments, then results); a
    non-zero status raises `GpuRunError` with `coco_last_error`'s text. The
    entry only enqueues work on the context's streams."""
    from coconet_ir.backend.cuda.gpu_run import GpuRunError

    function = getattr(lib, entry)
    function.restype = ctypes.c_int
    pointers = [ctypes.c_void_p(t.data_ptr()) for t in tensors]
    status = function(ctypes.c_void_p(context), *pointers)
    if status != 0:
        text = last_error(lib, context)
        raise GpuRunError(f"{entry} returned status {status}: {text}")


def last_error(lib: ctypes.CDLL, context: int) -> str:
    """`coco_last_error`'s text for the context at address `context`."""
    lib.coco_last_error.restype = ctypes.c_char_p
    lib.coco_last_error.argtypes = [ctypes.c_void_p]
    return lib.coco_last_error(ctypes.c_void_p(context)).decode(errors="replace")


def _query(lib: ctypes.CDLL, name: str, restype: Any = ctypes.c_int) -> int:
    """A module query of the built library (docs/gpu/cuda.md, "The ABI of a host
    entry"): `coco_world_size`, `coco_event_count` (`int`), ..."""
    function = getattr(lib, name)
    function.restype = restype
    function.argtypes = []
    return int(function())


def new_unique_id(lib: ctypes.CDLL) -> bytes:
    """`ncclGetUniqueId` of `lib`'s NCCL."""
    made = NcclUniqueId()
    _check_nccl(lib, lib.ncclGetUniqueId(ctypes.byref(made)), "ncclGetUniqueId")
    return bytes(made)


def from_rank_zero(make: Any, group: Any, rank: int, group_size: int) -> Any:
    """What `make()` returns on the group's rank 0, broadcast to every rank of
    `group` (a collective; a group of one rank makes its own)."""
    if group_size == 1:
        return make()
    payload: list[Any] = [make() if rank == 0 else None]
    dist = _torch().distributed
    source = dist.get_global_rank(group if group is not None else dist.group.WORLD, 0)
    dist.broadcast_object_list(payload, src=source, group=group)
    return payload[0]


def unique_id(lib: ctypes.CDLL, group: Any, rank: int, group_size: int) -> bytes:
    """An NCCL unique id made by the group's rank 0 with `lib`'s NCCL and
    broadcast to every rank of `group` (a collective; a group of one rank
    makes its own)."""
    return from_rank_zero(lambda: new_unique_id(lib), group, rank, group_size)


def _check_nccl(lib: ctypes.CDLL, status: int, what: str) -> None:
    from coconet_ir.backend.cuda.gpu_run import GpuRunError

    if status != 0:
        lib.ncclGetErrorString.restype = ctypes.c_char_p
        text = lib.ncclGetErrorString(status).decode(errors="replace")
        raise GpuRunError(f"{what} failed: {text}")


class _GpuRank:
    """This process's rank on one device: the built library, an NCCL
    communicator over the group, side streams, events, a cuBLAS handle, and
    the `coco_context` the entry reads."""

    def __init__(self, op: CocoOp, device: Any, rank: int):
        torch = _torch()
        self.name = op.name
        self.lock = threading.Lock()
        self.lib = ctypes.CDLL(str(op.build(device)))
        self.comm = ctypes.c_void_p()
        self.cublas = ctypes.c_void_p()
        self.context = context_struct()()
        self.device = device
        self._check_library(op)
        context = self.context
        context.rank, context.world = rank, op.world
        context.stage, context.num_stages = 0, 1
        context.ranks_per_node = op.world
        properties = torch.cuda.get_device_properties(device)
        context.sm_count = properties.multi_processor_count
        identity = NcclUniqueId.from_buffer_copy(
            unique_id(self.lib, op.group, rank, op.world)
        )
        self.lib.ncclCommInitRank.argtypes = [
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_int,
            NcclUniqueId,
            ctypes.c_int,
        ]
        status = self.lib.ncclCommInitRank(
            ctypes.byref(self.comm), op.world, identity, rank
        )
        _check_nccl(self.lib, status, "ncclCommInitRank")
        context.comm = context.pipeline_comm = self.comm.value
        self.split: list[ctypes.c_void_p] = []
        nodes = (
            _query(self.lib, "coco_ranks_per_node")
            if hasattr(self.lib, "coco_ranks_per_node")
            else op.world
        )
        if 0 < nodes < op.world:
            self._split_nodes(rank, nodes)
        self.symmetric = False
        if op.lowered.symmetric_bytes or op.lowered.signal_slots:
            self._open_symmetric(op, rank)
        if "ctx->cublas" in op.lowered.cuda:
            self._create_cublas()
        # streams[0] is torch's current stream at each call; 1.. are ours.
        streams = runtime_constant("COCO_MAX_STREAMS")
        self.streams = [torch.cuda.Stream(device) for _ in range(1, streams)]
        for s, stream in enumerate(self.streams, start=1):
            context.streams[s] = stream.cuda_stream
        count = _query(self.lib, "coco_event_count")
        self.events = [torch.cuda.Event() for _ in range(count)]
        for k, event in enumerate(self.events):
            event.record()  # torch creates the CUDA event when first recorded
            context.events[k] = event.cuda_event

    def _check_library(self, op: CocoOp) -> None:
        built = _query(self.lib, "coco_world_size")
        if built != op.world:
            raise CocoError(
                f"{op.name}: the library was built for world {built}, the op is "
                f"registered for world {op.world}"
            )
        if not hasattr(self.lib, f"coco_{op.entry}"):
            raise CocoError(f"{op.name}: the library has no entry coco_{op.entry}")

    def _split_nodes(self, rank: int, nodes: int) -> None:
        """The node's and the index's communicators of a program lowered for
        several nodes (docs/gpu/device.md, "Several nodes"), split from the
        op's (`ncclCommSplit`; compiled, not yet run on GPUs)."""
        self.lib.ncclCommSplit.argtypes = [
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_void_p,
        ]
        for color, key, field_name in (
            (rank // nodes, rank % nodes, "node_comm"),
            (rank % nodes, rank // nodes, "cross_comm"),
        ):
            made = ctypes.c_void_p()
            status = self.lib.ncclCommSplit(
                self.comm, color, key, ctypes.byref(made), None
            )
            _check_nccl(self.lib, status, "ncclCommSplit")
            self.split.append(made)
            setattr(self.context, field_name, made.value)
        self.context.ranks_per_node = nodes

    def _open_symmetric(self, op: CocoOp, rank: int) -> None:
        """This rank's symmetric workspace and signal pad, exported as CUDA
        IPC handles, every rank's gathered through the group, the peers'
        opened (docs/gpu/running.md, "Multi-process mode"; compiled, not yet
        run on GPUs)."""
        from coconet_ir.backend.cuda.gpu_run import GpuRunError

        lib, context = self.lib, ctypes.byref(self.context)
        handles = ctypes.create_string_buffer(IPC_HANDLES_BYTES)
        lib.coco_gpu_symmetric_alloc.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_size_t,
            ctypes.c_char_p,
        ]
        status = lib.coco_gpu_symmetric_alloc(
            context,
            op.lowered.symmetric_bytes,
            max(op.lowered.signal_slots, 1),
            handles,
        )
        if status == 0:
            self.symmetric = True
            every: list[Any] = [None] * op.world
            if op.world > 1:
                _torch().distributed.all_gather_object(
                    every, handles.raw, group=op.group
                )
            else:
                every = [handles.raw]
            lib.coco_gpu_symmetric_open.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
            status = lib.coco_gpu_symmetric_open(context, b"".join(every))
        if status != 0:
            text = last_error(lib, ctypes.addressof(self.context))
            raise GpuRunError(f"{op.name}: the symmetric workspace: {text}")

    def _create_cublas(self) -> None:
        from coconet_ir.backend.cuda.gpu_run import GpuRunError

        status = self.lib.cublasCreate_v2(ctypes.byref(self.cublas))
        if status != 0:
            raise GpuRunError(f"cublasCreate failed with status {status}")
        self.context.cublas = self.cublas.value

    def call(self, entry: str, tensors: Sequence[Any]) -> None:
        torch = _torch()
        with self.lock:
            self.context.streams[0] = torch.cuda.current_stream(self.device).cuda_stream
            enqueue(self.lib, entry, ctypes.addressof(self.context), tensors)

    def check_waits(self) -> None:
        """Raise GpuRunError if a signal wait of the library's kernels on
        this device gave up since the last check (the device watchdog,
        docs/gpu/running.md, "Faults"); synchronizes the device."""
        from coconet_ir.backend.cuda.gpu_run import GpuRunError

        torch = _torch()
        with self.lock, torch.cuda.device(self.device):
            torch.cuda.synchronize(self.device)
            context = ctypes.addressof(self.context)
            self.lib.coco_gpu_check_waits.argtypes = [ctypes.c_void_p]
            if self.lib.coco_gpu_check_waits(context) != 0:
                raise GpuRunError(f"{self.name}: {last_error(self.lib, context)}")

    def close(self) -> None:
        torch = _torch()
        with torch.cuda.device(self.device):
            torch.cuda.synchronize(self.device)
            if self.symmetric:
                self.lib.coco_gpu_symmetric_free(ctypes.byref(self.context))
                self.symmetric = False
            for comm in self.split:
                self.lib.ncclCommDestroy(comm)
            self.split = []
            if self.cublas.value:
                self.lib.cublasDestroy_v2(self.cublas)
            if self.comm.value:
                self.lib.ncclCommDestroy(self.comm)
        self.cublas = self.comm = ctypes.c_void_p()


class _EmuRank:
    """This process's rank of an emulated world whose ranks are the group's
    processes (docs/gpu/emulation.md, "Multi-process mode"): the library of
    the lowered CUDA C built for the CPU emulation, loaded here, and its
    rank made with a key the group's rank 0 makes. The entry runs on the
    CPU tensors' own memory."""

    def __init__(self, op: CocoOp, rank: int):
        from coconet_ir.backend.emu import compile_emulated
        from coconet_ir.backend.emu.ranks import EmulatedRank
        from coconet_ir.backend.emu.run import new_key

        self.lock = threading.Lock()
        if op.world > 1:
            self._check_one_machine(op)
        key = from_rank_zero(new_key, op.group, rank, op.world)
        self.rank = EmulatedRank(
            compile_emulated(op.lowered.cuda),
            key,
            rank,
            op.world,
            symmetric_bytes=op.lowered.symmetric_bytes,
            signal_slots=max(op.lowered.signal_slots, 1),
        )

    @staticmethod
    def _check_one_machine(op: CocoOp) -> None:
        """The emulated ranks share memory through /dev/shm: every process of
        the group must run on this machine."""
        hosts: list[Any] = [None] * op.world
        _torch().distributed.all_gather_object(
            hosts, socket.gethostname(), group=op.group
        )
        if len(set(hosts)) > 1:
            raise CocoError(
                f"{op.name}: the CPU emulation's ranks share memory through "
                "/dev/shm, so every process of the group must run on one machine; "
                f"they run on {', '.join(sorted(set(hosts)))}"
            )

    def call(self, entry: str, tensors: Sequence[Any]) -> None:
        with self.lock:
            self.rank.call(entry, tensors)

    def close(self) -> None:
        with self.lock:
            self.rank.close()


# ---------------------------------------------------------------------------
# Tensors and numpy
# ---------------------------------------------------------------------------


def to_numpy(tensor: Any, spec: OpTensor) -> np.ndarray:
    """A tensor's values as the interpreter holds them (bit for bit: bf16 as
    ml_dtypes' bfloat16; `backend.tensors`)."""
    _torch()
    return array_of(tensor, spec.element.storage, spec.shape)


def from_numpy(array: np.ndarray, spec: OpTensor, device: Any = "cpu") -> Any:
    """A tensor of `spec`'s dtype and shape holding `array` (bit for bit)."""
    _torch()
    held = np.asarray(array, dtype=spec.element.storage).reshape(spec.shape)
    return tensor_of(held).to(device)


# ---------------------------------------------------------------------------
# The op
# ---------------------------------------------------------------------------


@dataclass(eq=False, repr=False)
class CocoOp:
    """A coco function registered as a torch custom op (see the module
    docstring and docs/frameworks.md). Call it with one rank's tensors."""

    module: ModuleOp
    name: str
    entry: str
    world: int
    lowered: Lowered
    _: KW_ONLY
    group: Any
    cpu: str
    library: Path | None
    arch: str | None
    arguments: tuple[OpTensor, ...] = field(init=False)
    results: tuple[OpTensor, ...] = field(init=False)
    schema: str = field(init=False)
    op: Any = field(init=False)
    """The registered torch op."""
    backward: CocoOp | None = field(init=False, default=None)
    """The op of the derived backward (`coco-grad`) that autograd calls,
    where the program has one (`with_backward`)."""

    def __post_init__(self) -> None:
        entry, lowered, world = self.entry, self.lowered, self.world
        func = next(
            f
            for f in lowered.coco.ops
            if isinstance(f, FuncOp) and f.sym_name.data == entry
        )
        arguments, results = signature(func, world)
        if not arguments:
            raise CocoError(
                f"register: @{entry} takes no tensor; a torch op needs one (its "
                "device is where the op runs)"
            )
        self.arguments = tuple(arguments)
        self.results = tuple(results)
        self.schema = schema(arguments, results)
        self._ranks: dict[Any, _GpuRank] = {}
        self._emulated: _EmuRank | None = None
        self.op = self._register()

    def __repr__(self) -> str:
        return f"CocoOp({self.name!r}, world={self.world}, schema={self.schema!r})"

    def __call__(self, *tensors: Any) -> Any:
        return self.op(*tensors)

    # -- registration -------------------------------------------------------

    def _register(self) -> Any:
        torch = _torch()
        op = torch.library.custom_op(
            self.name,
            self._run_cpu,
            mutates_args=tuple(a.name for a in self.arguments if a.updated),
            device_types="cpu",
            schema=self.schema,
        )
        op.register_kernel("cuda")(self._run_cuda)
        op.register_fake(self._fake)
        return op

    def _check(self, tensors: Sequence[Any]) -> None:
        if len(tensors) != len(self.arguments):
            raise CocoError(
                f"{self.name} takes {len(self.arguments)} tensors "
                f"({', '.join(a.name for a in self.arguments)}), got {len(tensors)}"
            )
        device = tensors[0].device
        for spec, tensor in zip(self.arguments, tensors):
            shape = tuple(tensor.shape)
            if shape != spec.shape or tensor.dtype != spec.dtype:
                raise CocoError(
                    f"{self.name}: {spec.name} must be {spec.dtype} of shape "
                    f"{spec.shape} (one rank's {spec.type} on {self.world} ranks), "
                    f"got {tensor.dtype} of shape {shape}"
                )
            if tensor.device != device:
                raise CocoError(
                    f"{self.name}: every tensor must be on one device; {spec.name} "
                    f"is on {tensor.device}, {self.arguments[0].name} on {device}"
                )

    def _pack(self, results: list[Any]) -> Any:
        if not results:
            return None
        return results[0] if len(results) == 1 else tuple(results)

    def _fake(self, *tensors: Any) -> Any:
        self._check(tensors)
        torch = _torch()
        device = tensors[0].device
        return self._pack(
            [torch.empty(r.shape, dtype=r.dtype, device=device) for r in self.results]
        )

    # -- CUDA ---------------------------------------------------------------

    def build(self, device: Any = None) -> Path:
        """The shared library of the lowered CUDA C: the one given to
        `register`, else built now with `compile_gpu` for `arch` (default: the
        device's compute capability)."""
        if self.library is not None:
            return self.library
        from coconet_ir.backend.cuda.gpu_run import compile_gpu

        arch = self.arch
        if arch is None and device is not None:
            major, minor = _torch().cuda.get_device_capability(device)
            arch = f"sm_{major}{minor}"
        self.library = compile_gpu(self.lowered.cuda, arch)
        return self.library

    def _rank(self) -> int:
        if self.world == 1:
            return 0
        dist = _torch().distributed
        if not (dist.is_available() and dist.is_initialized()):
            raise CocoError(
                f"{self.name} runs on {self.world} ranks: initialize torch.distributed "
                "(one process per rank, e.g. under torchrun) before calling it"
            )
        size = dist.get_world_size(self.group)
        if size != self.world:
            raise CocoError(
                f"{self.name} was registered for world {self.world}; its process "
                f"group has {size} ranks"
            )
        return dist.get_rank(self.group)

    def _run_cuda(self, *tensors: Any) -> Any:
        self._check(tensors)
        torch = _torch()
        device = tensors[0].device
        for spec, tensor in zip(self.arguments, tensors):
            if spec.updated and not tensor.is_contiguous():
                raise CocoError(
                    f"{self.name}: {spec.name} is updated in place, so it must be "
                    "contiguous"
                )
        with torch.cuda.device(device):
            rank = self._ranks.get(device)
            if rank is None:
                rank = self._ranks[device] = _GpuRank(self, device, self._rank())
            arguments = [t if t.is_contiguous() else t.contiguous() for t in tensors]
            results = [
                torch.empty(r.shape, dtype=r.dtype, device=device) for r in self.results
            ]
            rank.call(f"coco_{self.entry}", [*arguments, *results])
        return self._pack(results)

    # -- autograd -------------------------------------------------------------

    def with_backward(self, backward: CocoOp) -> None:
        """Register `backward` (the op of this program's derived backward:
        its arguments, then the cotangents of the floating-point results;
        it returns the gradients of the floating-point arguments) as this
        op's autograd formula (docs/frameworks.md, "Autograd")."""
        torch = _torch()
        self.backward = backward
        floats = [r.element.is_float for r in self.results]
        wanted = [a.element.is_float for a in self.arguments]

        def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
            ctx.save_for_backward(*inputs)

        def gradients(ctx: Any, *cotangents: Any) -> tuple[Any, ...]:
            inputs = ctx.saved_tensors
            seeds = [
                torch.zeros(r.shape, dtype=r.dtype, device=inputs[0].device)
                if g is None
                else g.contiguous()
                for g, r, f in zip(cotangents, self.results, floats)
                if f
            ]
            found = backward(*inputs, *seeds)
            found = list(found) if isinstance(found, tuple | list) else [found]
            return tuple(found.pop(0) if w else None for w in wanted)

        torch.library.register_autograd(
            self.name, gradients, setup_context=setup_context
        )

    def close(self) -> None:
        """Destroy what the GPU calls created (communicators, cuBLAS handles)
        after waiting for the device, and the emulated rank of the CPU kernel
        (of the backward's op too); the op can be called again after (on
        every rank: making a rank is a collective)."""
        if self.backward is not None:
            self.backward.close()
        try:
            self.check_waits()
        finally:
            self._close_ranks()

    def check_waits(self) -> None:
        """Raise GpuRunError, naming the wait, if a fused kernel's signal wait
        gave up on one of this op's GPUs since the last check (the device
        watchdog: a peer rank died or hangs; docs/gpu/running.md, "Faults").
        It synchronizes the devices: call it every few steps, not every
        call; `close()` calls it."""
        for rank in self._ranks.values():
            rank.check_waits()

    def _close_ranks(self) -> None:
        while self._ranks:
            _, rank = self._ranks.popitem()
            rank.close()
        if self._emulated is not None:
            self._emulated.close()
            self._emulated = None

    # -- CPU ----------------------------------------------------------------

    def _gather(self, tensors: Sequence[Any]) -> tuple[int, list[list[np.ndarray]]]:
        """This rank, and every rank's arrays of every argument."""
        rank = self._rank()
        if self.world == 1:
            return 0, [[to_numpy(t, s)] for t, s in zip(tensors, self.arguments)]
        torch = _torch()
        gathered: list[list[np.ndarray]] = []
        for tensor, spec in zip(tensors, self.arguments):
            raw = tensor.detach().contiguous().reshape(-1).view(torch.uint8)
            parts = [torch.empty_like(raw) for _ in range(self.world)]
            torch.distributed.all_gather(parts, raw, group=self.group)
            gathered.append(
                [
                    p.numpy().view(spec.element.storage).reshape(spec.shape)
                    for p in parts
                ]
            )
        return rank, gathered

    def _run_cpu(self, *tensors: Any) -> Any:
        self._check(tensors)
        if self.cpu == "emulator":
            return self._emulate(tensors)
        rank, gathered = self._gather(tensors)
        values = self._interpret(gathered, rank)
        for spec, tensor in zip(self.arguments, tensors):
            if spec.updated:
                tensor.copy_(from_numpy(values[spec.key], spec))
        return self._pack([from_numpy(values[r.key], r) for r in self.results])

    def _interpret(
        self, gathered: list[list[np.ndarray]], rank: int
    ) -> dict[str, np.ndarray]:
        """This rank's outputs by the reference interpreter on the original
        program, fed the global values of every rank's arguments."""
        from coconet_ir.interpreter import interpret

        inputs = {
            spec.key: DistValue(spec.type, np.stack(arrays), self.world).global_value()
            for spec, arrays in zip(self.arguments, gathered)
        }
        run = interpret(self.module, self.world, inputs=inputs, entry=self.entry)
        return {
            spec.key: DistValue.from_global(spec.type, run[spec.key], self.world).rank(
                rank
            )
            for spec in (*self.arguments, *self.results)
            if spec.key in run.outputs
        }

    def _emulate(self, tensors: Sequence[Any]) -> Any:
        """This rank's call of the lowered CUDA C under the CPU emulation, a
        rank per process (docs/gpu/emulation.md, "Multi-process mode"): the
        entry reads this rank's tensors, writes its results and updates its
        parameters in place, and meets the group's other processes in its
        collectives and fused kernels."""
        torch = _torch()
        for spec, tensor in zip(self.arguments, tensors):
            if spec.updated and not tensor.is_contiguous():
                raise CocoError(
                    f"{self.name}: {spec.name} is updated in place, so it must be "
                    "contiguous"
                )
        if self._emulated is None:
            self._emulated = _EmuRank(self, self._rank())
        arguments = [
            t if s.updated else t.detach().clone(memory_format=torch.contiguous_format)
            for t, s in zip(tensors, self.arguments)
        ]
        results = [torch.empty(r.shape, dtype=r.dtype) for r in self.results]
        self._emulated.call(f"coco_{self.entry}", [*arguments, *results])
        return self._pack(results)

    # -- inputs -------------------------------------------------------------

    def shard(
        self,
        inputs: Mapping[str, np.ndarray] | None = None,
        rank: int = 0,
        *,
        seed: int = 0,
        device: Any = "cpu",
    ) -> list[Any]:
        """Rank `rank`'s argument tensors for global inputs keyed as the
        interpreter's (`FUNC.argI`; those not given are drawn from `seed`, as
        `cc.interpret` draws them), sharded by the lowered types' layouts."""
        from coconet_ir.interpreter.inputs import prepare_inputs
        from coconet_ir.interpreter.stages import select_functions

        functions = select_functions(self.module, self.entry)
        fed = prepare_inputs(functions, self.world, seed, inputs)
        func = next(
            f
            for f in self.lowered.coco.ops
            if isinstance(f, FuncOp) and f.sym_name.data == self.entry
        )
        buffers = arguments_of(func, fed, self.world, rank)
        return [from_numpy(b, s, device) for b, s in zip(buffers, self.arguments)]


# ---------------------------------------------------------------------------
# register
# ---------------------------------------------------------------------------


def _module_of(program: Any) -> ModuleOp:
    from coconet_ir.ir import parse_file

    if isinstance(program, ModuleOp):
        return program
    if isinstance(program, str | os.PathLike):
        return parse_file(str(program))
    module = getattr(program, "module", None)  # a cc.Function
    if isinstance(module, ModuleOp):
        return module
    raise CocoError(
        f"register: expected a module, a @cc.function or a .mlir path, got "
        f"{type(program).__name__}"
    )


def _world_of(module: ModuleOp, world: int | None, group: Any) -> int:
    from coconet_ir.ir import declared_world_size

    if world is not None:
        check_world(world)
        return world
    declared = declared_world_size(module)
    if declared is not None:
        return declared
    dist = _torch().distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(group)
    raise CocoError(
        "register: give world=N (or coco.world_size on the module, or initialize "
        "torch.distributed first)"
    )


def _ranks_per_node(world: int, given: int | None) -> int:
    """Ranks per node to lower for: `given`, else torchrun's
    `LOCAL_WORLD_SIZE` where it is below `world` and divides it; 0 (one
    node) otherwise."""
    if given is not None:
        return given
    local = os.environ.get("LOCAL_WORLD_SIZE", "")
    if local.isdigit() and 0 < int(local) < world and world % int(local) == 0:
        return int(local)
    return 0


def _entry_of(module: ModuleOp, entry: str | None) -> str:
    from coconet_ir.interpreter.stages import select_functions

    functions = select_functions(module, entry)
    if len(functions) > 1:
        names = ", ".join("@" + f.sym_name.data for f in functions)
        raise CocoError(
            f"register: {names} form a pipeline (send/recv between them); a torch "
            "op runs one function on one group of ranks (docs/frameworks.md, "
            "'Limits')"
        )
    return functions[0].sym_name.data


def register(
    program: Any,
    name: str | None = None,
    *,
    world: int | None = None,
    entry: str | None = None,
    passes: str = DEFAULT_PASSES,
    threads: int = 256,
    library: str | os.PathLike | None = None,
    arch: str | None = None,
    group: Any = None,
    cpu: str = "interpreter",
    ranks_per_node: int | None = None,
    autograd: bool | None = None,
) -> CocoOp:
    """Register the coco function `entry` of `program` (a module, a
    `@cc.function`, or a `.mlir` path; `entry` defaults to its only function)
    as the torch custom op `name` (default `coconet::ENTRY`) for `world` ranks
    (default: the module's `coco.world_size`, else the size of `group`, the
    `torch.distributed` process group, default the whole world).

    The program is optimized with `passes`, lowered with `threads` threads per
    block and printed as CUDA C; its library is `library` (built from that CUDA
    C before, e.g. by `compile_gpu`) or built at the first call on a GPU for
    `arch` (default: the device's). `cpu` chooses how the CPU kernel runs the
    whole world: `"interpreter"` or `"emulator"`. `ranks_per_node` (default:
    torchrun's `LOCAL_WORLD_SIZE` when it is below the world) lowers for
    ranks on several nodes (docs/gpu/device.md, "Several nodes").
    `autograd`: register the program's derived backward (`coco-grad`) as
    the op's autograd formula, itself an op `NAME_backward` lowered the same
    way; default: where the program has one (True: it must). See
    docs/frameworks.md."""
    _torch()
    if cpu not in CPU_BACKENDS:
        choices = ", ".join(CPU_BACKENDS)
        raise CocoError(f"register: cpu must be one of {choices}, got {cpu!r}")
    module = _module_of(program)
    entry = _entry_of(module, entry)
    name = name or f"coconet::{entry}"
    if not re.fullmatch(r"[A-Za-z_]\w*::[A-Za-z_]\w*", name):
        raise CocoError(
            f"register: the op name must look like 'namespace::name', got {name!r}"
        )
    world = _world_of(module, world, group)
    backward = _backward_of(module, entry, autograd)
    nodes = _ranks_per_node(world, ranks_per_node)
    lowered = lower(module, world, passes, threads, nodes)
    op = CocoOp(
        module,
        name,
        entry,
        world,
        lowered,
        group=group,
        cpu=cpu,
        library=Path(library) if library is not None else None,
        arch=arch,
    )
    if backward is not None:
        op.with_backward(
            register(
                backward,
                f"{name}_backward",
                world=world,
                passes=passes,
                threads=threads,
                arch=arch,
                group=group,
                cpu=cpu,
                ranks_per_node=ranks_per_node,
                autograd=False,
            )
        )
    return op


def _backward_of(
    module: ModuleOp, entry: str, autograd: bool | None
) -> ModuleOp | None:
    """A module of `@entry`'s derived backward (coco-grad), for `register`'s
    `autograd`: None when not asked, or not asked for explicitly and there
    is none (no floating-point argument or result, or an op without a
    gradient, such as `coco.update`)."""
    from coconet_ir.passes.grad import NotDifferentiable, grad

    if autograd is False:
        return None
    try:
        backward = grad(module, entry)
    except NotDifferentiable:
        if autograd:
            raise
        return None
    func = next(f for f in backward.ops if isinstance(f, FuncOp))
    if func.function_type.outputs.data:
        return backward
    if autograd:
        raise CocoError(
            f"register: autograd=True, but @{entry} has no floating-point "
            "argument to differentiate"
        )
    return None


__all__ = [
    "CPU_BACKENDS",
    "DEFAULT_PASSES",
    "CocoOp",
    "OpTensor",
    "context_struct",
    "register",
    "schema",
    "signature",
]
