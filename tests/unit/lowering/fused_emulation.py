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

from dataclasses import dataclass
from io import StringIO

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp

import coconet_ir as cc
from coconet_ir.backend.cuda.printer import print_cuda, signal_slots, symmetric_bytes
from coconet_ir.backend.emu import EntryCall, compile_emulated, run_emulated
from coconet_ir.dialects.coco import TensorType
from coconet_ir.emulate import arguments_of, global_of, output_buffers
from coconet_ir.interpreter.inputs import draw_inputs


def cuda_source(lowered: ModuleOp) -> str:
    out = StringIO()
    print_cuda(lowered, out)
    return out.getvalue()


@dataclass
class Emulated:
    expected: list[dict[str, np.ndarray]]
    """Per seed: the interpreter's global outputs by key."""
    actual: list[dict[str, np.ndarray]]
    """Per seed: the emulation's global outputs by key."""
    stats: dict
    lowered: ModuleOp


def emulate(
    module: ModuleOp,
    world: int,
    seeds: tuple[int, ...] = (0, 1, 2),
    *,
    sanitize: str | None = None,
    fused_chunk: int | None = None,
    threads: int = 32,
) -> Emulated:
    """`coconet_ir.emulate.emulate`'s steps (its per-rank buffers, outputs and
    global values), with fresh inputs for every call: the stage functions are
    called in order once per seed, each call with the interpreter's inputs
    for that seed."""
    options = f"world={world} threads={threads}"
    if fused_chunk is not None:
        options += f" fused_chunk={fused_chunk}"
    lowered = cc.Pipeline(f"convert-coco-to-gpu{{{options}}}")(module)
    library = compile_emulated(cuda_source(lowered), sanitize)
    functions = [f for f in module.ops if isinstance(f, FuncOp)]
    calls: list[EntryCall] = []
    expected: list[dict[str, np.ndarray]] = []
    outputs: list[dict[str, TensorType]] = []
    for seed in seeds:
        run = cc.interpret(module, world, seed=seed)
        expected.append({k: run[k] for k in run.outputs})
        fed = draw_inputs(module, world, seed)
        named: dict[str, TensorType] = {}
        for stage, func in enumerate(functions):
            buffers = [arguments_of(func, fed, world, r) for r in range(world)]
            found = output_buffers(func)
            keys = {f"{seed}:{key}": index for key, _, index in found}
            named |= {f"{seed}:{key}": t for key, t, _ in found}
            calls.append(EntryCall(f"coco_{func.sym_name.data}", buffers, stage, keys))
        outputs.append(named)
    raw, stats = run_emulated(
        library,
        world,
        calls,
        num_stages=len(functions),
        symmetric_bytes=max(symmetric_bytes(lowered), 256),
        signal_slots=max(signal_slots(lowered), 1),
        watchdog=60,
        timeout=600,
    )
    actual = [
        {
            name.split(":", 1)[1]: global_of(t, np.stack(raw[name]), world)
            for name, t in named.items()
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
