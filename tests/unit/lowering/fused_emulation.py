"""Run a lowered single-stage (or pipeline) program under the CPU emulation and
compare with the interpreter: what the fused-kernel tests share.

`emulate(module, world, seeds)` lowers `module` (convert-coco-to-gpu), prints
it as CUDA C, builds it for the emulation (optionally under a sanitizer) and
calls every stage's entry once per seed, back to back on the same world
(epochs carry over), each call with the inputs the interpreter draws for that
seed; it returns, per seed, the interpreter's outputs and the emulation's,
and the emulator's statistics.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from io import StringIO

import numpy as np
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.dialects.func import FuncOp

import coconet_ir as cc
from coconet_ir.backend.cuda.printer import print_cuda
from coconet_ir.backend.emu import EntryCall, compile_emulated, run_emulated
from coconet_ir.backend.emu import run as emu_run
from coconet_ir.dialects.coco import TensorType
from coconet_ir.interpreter.inputs import argument_key, draw_inputs, result_key
from coconet_ir.interpreter.values import DistValue, join, storage_dtype
from coconet_ir.lowering.bufferize import local_shape


def cuda_source(lowered: ModuleOp) -> str:
    out = StringIO()
    print_cuda(lowered, out)
    return out.getvalue()


TSAN_SUPPRESSIONS = "race:_dl_deallocate_tls\n"
"""glibc frees an exiting thread's dynamic TLS (the emulation's kernel threads
use `thread_local` in a dlopen'ed library) in a way ThreadSanitizer does not
see as synchronized: a known false positive in the loader, not in the
emulated program."""


@contextmanager
def tsan_suppressions() -> Iterator[None]:
    """The emulation's sanitizer environment plus `TSAN_SUPPRESSIONS`."""
    original = emu_run._sanitizer_env
    with tempfile.NamedTemporaryFile("w", suffix=".supp", delete=False) as file:
        file.write(TSAN_SUPPRESSIONS)

    def patched(sanitize: str | None) -> dict[str, str]:
        env = original(sanitize)
        if sanitize == "thread":
            env["TSAN_OPTIONS"] += f" suppressions={file.name}"
        return env

    emu_run._sanitizer_env = patched
    try:
        yield
    finally:
        emu_run._sanitizer_env = original
        os.unlink(file.name)


def module_int(module: ModuleOp, name: str) -> int:
    attr = module.attributes.get(name)
    return attr.value.data if isinstance(attr, IntegerAttr) else 0


@dataclass
class Emulated:
    expected: list[dict[str, np.ndarray]]
    """Per seed: the interpreter's global outputs by key."""
    actual: list[dict[str, np.ndarray]]
    """Per seed: the emulation's global outputs by key."""
    stats: dict
    lowered: ModuleOp


def per_rank(t: TensorType, value: np.ndarray, world: int) -> list[np.ndarray]:
    """Rank `r`'s buffer contents of an input (contiguous, storage dtype)."""
    dist = DistValue.from_global(t, value, world)
    return [np.array(a, copy=True, order="C") for a in dist.ranks()]


def to_global(t: TensorType, arrays: list[np.ndarray]) -> np.ndarray:
    if t.layout.is_sliced:
        return join(np.stack(arrays), t.layout.sliced_dim)
    if t.layout.is_local:
        return np.stack(arrays)
    for rank, array in enumerate(arrays[1:], 1):
        assert np.array_equal(array, arrays[0], equal_nan=True), (
            f"replicated output differs on rank {rank}"
        )
    return arrays[0]


def emulate(
    module: ModuleOp,
    world: int,
    seeds: tuple[int, ...] = (0, 1, 2),
    *,
    sanitize: str | None = None,
    fused_chunk: int | None = None,
    threads: int = 32,
) -> Emulated:
    options = f"world={world} threads={threads}"
    if fused_chunk is not None:
        options += f" fused_chunk={fused_chunk}"
    lowered = cc.Pipeline(f"convert-coco-to-gpu{{{options}}}")(module)
    library = compile_emulated(cuda_source(lowered), sanitize)
    functions = [f for f in module.ops if isinstance(f, FuncOp)]
    calls: list[EntryCall] = []
    expected: list[dict[str, np.ndarray]] = []
    outputs: list[dict[str, tuple[int, TensorType]]] = []
    for seed in seeds:
        run = cc.interpret(module, world, seed=seed)
        expected.append({k: run[k] for k in run.outputs})
        inputs = draw_inputs(module, world, seed)
        named: dict[str, tuple[int, TensorType]] = {}
        for stage, func in enumerate(functions):
            args: list[list[np.ndarray]] = [[] for _ in range(world)]
            out_names: dict[str, int] = {}
            for position, arg in enumerate(func.body.block.args):
                t = arg.type
                assert isinstance(t, TensorType)
                for r, array in enumerate(
                    per_rank(t, inputs[argument_key(func, position)], world)
                ):
                    args[r].append(array)
                key = argument_key(func, position)
                if key in run.outputs:
                    out_names[f"{seed}:{key}"] = position
                    named[f"{seed}:{key}"] = (position, t)
            for position, t in enumerate(func.function_type.outputs.data):
                assert isinstance(t, TensorType)
                index = len(func.body.block.args) + position
                for r in range(world):
                    args[r].append(
                        np.zeros(local_shape(t, world), storage_dtype(t.element_type))
                    )
                key = result_key(func, position)
                out_names[f"{seed}:{key}"] = index
                named[f"{seed}:{key}"] = (index, t)
            calls.append(
                EntryCall(f"coco_{func.sym_name.data}", args, stage, out_names)
            )
        outputs.append(named)
    with tsan_suppressions():
        raw, stats = run_emulated(
            library,
            world,
            calls,
            num_stages=len(functions),
            symmetric_bytes=max(module_int(lowered, "coco_gpu.symmetric_bytes"), 256),
            signal_slots=max(module_int(lowered, "coco_gpu.signal_slots"), 1),
            watchdog=60,
            timeout=600,
        )
    actual = [
        {
            name.split(":", 1)[1]: to_global(t, raw[name])
            for name, (_, t) in named.items()
        }
        for named in outputs
    ]
    return Emulated(expected, actual, stats, lowered)


def peer_bytes(stats: dict, world: int, stage: int = 0) -> np.ndarray:
    """Bytes each rank of `stage` stored into each other rank of it, all
    streams together: `[src][dst]`."""
    matrix = np.array(stats["bytes"]).sum(axis=-1)
    lo = stage * world
    return matrix[lo : lo + world, lo : lo + world]
