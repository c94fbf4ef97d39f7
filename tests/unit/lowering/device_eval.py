"""A small numpy evaluator of what convert-coco-to-gpu produces, for tests
only: the host functions run on N simulated ranks in lockstep (host code is
the same on every rank), NCCL calls combine the ranks' buffers, and each
kernel runs vectorized — the grid-stride loop's body on every element index
at once (a kernel's threads neither communicate nor race) — except kernels
with shared memory (block reductions) and fused collective kernels, which
run as one block of one thread; there too a loop whose indices the block's
threads share out runs on all its indices at once (`is_thread_loop`).
Integers are kept as their unsigned bit patterns in uint64 arrays;
`index` as int64.

It is not the CPU emulation of the CUDA C (that checks the printed code); it
checks the device-level IR against the reference interpreter.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import arith, cf, func, gpu, memref, scf, vector
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import (
    FloatAttr,
    FunctionType,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    VectorType,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from coconet_ir.dialects import coco_gpu
from coconet_ir.dialects.coco import TensorType, element_info
from coconet_ir.interpreter.values import cut, join

Env = dict[SSAValue, Any]

_KINDS: dict[tuple[type, Any], bool] = {}


def isa(value: object, kinds: Any) -> bool:
    """`isinstance(value, kinds)`, remembered per type of `value`: xDSL's
    op and attribute classes are ABCs, whose `isinstance` is slow, and the
    evaluator asks it about every op it runs (a split-K GEMV runs ~470k)."""
    key = (type(value), kinds)
    known = _KINDS.get(key)
    if known is None:
        known = _KINDS[key] = isinstance(value, kinds)
    return known


POINTER_OFFSET = 0
"""Added to every address a kernel takes (`memref.extract_aligned_pointer_as_
index`): a test sets it to 4 so that the fused kernels find their buffers
misaligned and take their scalar loops."""


def float_dtype(t: Attribute) -> np.dtype:
    return element_info(t).storage


def width(t: Attribute) -> int:
    assert isa(t, IntegerType)
    return t.width.data


def mask(t: Attribute) -> int:
    return (1 << width(t)) - 1


def signed(x: Any, t: Attribute) -> Any:
    """The signed value of a bit pattern of type `t`."""
    w = width(t)
    x = np.asarray(x, dtype=np.uint64).astype(object) if w == 64 else np.asarray(x)
    x = np.asarray(x).astype(np.int64) if w < 64 else x
    return np.where(x >= (1 << (w - 1)), x - (1 << w), x) if w > 1 else x


def pattern(x: Any, t: Attribute) -> np.ndarray:
    """The bit pattern (uint64) of the integer value(s) `x` of type `t`."""
    return (np.asarray(x).astype(np.int64).astype(np.uint64)) & np.uint64(mask(t))


def load(buffer: np.ndarray, index: Any) -> Any:
    value = buffer[()] if index is None else buffer[index]
    if buffer.dtype == np.bool_:
        return np.asarray(value).astype(np.uint64)
    if buffer.dtype == np.int32:
        return (np.asarray(value).astype(np.int64) & 0xFFFFFFFF).astype(np.uint64)
    return value


def store(buffer: np.ndarray, index: Any, value: Any, t: Attribute) -> None:
    if isa(t, IntegerType):
        value = signed(value, t) if width(t) > 1 else np.asarray(value)
    value = np.asarray(value).astype(buffer.dtype)
    if index is None:
        buffer[()] = value.reshape(-1)[0] if value.ndim else value
    else:
        buffer[index] = np.broadcast_to(value, np.shape(index))


def lanes(at: Any, width: int) -> np.ndarray:
    """The element indices of a vector access of `width` lanes at `at` (one
    row per thread when `at` holds every thread's index)."""
    return np.asarray(at, dtype=np.int64)[..., None] + np.arange(width)


def run_block(block: Block, env: Env) -> list[Any]:
    """Run a kernel block's ops; returns the operands of its terminator."""
    for op in block.ops:
        if isa(op, scf.YieldOp | gpu.ReturnOp):
            return [env[v] for v in op.operands]
        run_op(op, env)
    return []


BINARY: dict[type[Operation], Callable[[Any, Any], Any]] = {
    arith.AddfOp: np.add,
    arith.SubfOp: np.subtract,
    arith.MulfOp: np.multiply,
    arith.DivfOp: np.divide,
    arith.MaximumfOp: np.maximum,
    arith.MinimumfOp: np.minimum,
    mathd.PowFOp: np.power,
}
UNARY: dict[type[Operation], Callable[[Any], Any]] = {
    mathd.SqrtOp: np.sqrt,
    mathd.ExpOp: np.exp,
    mathd.LogOp: np.log,
    mathd.TanhOp: np.tanh,
    mathd.AbsFOp: np.abs,
    arith.NegfOp: np.negative,
}
FLOAT_PREDICATES = {
    "oeq": np.equal,
    "une": np.not_equal,
    "olt": np.less,
    "ole": np.less_equal,
    "ogt": np.greater,
    "oge": np.greater_equal,
}


def run_op(op: Operation, env: Env) -> None:
    ins = [env[v] for v in op.operands]
    out = op.results[0].type if op.results else None
    if isa(op, gpu.BlockIdOp | gpu.ThreadIdOp):
        env[op.results[0]] = 0
    elif isa(op, gpu.BlockDimOp | gpu.GridDimOp):
        env[op.results[0]] = 1
    elif isa(op, arith.ConstantOp):
        value = op.value
        if isa(out, IndexType):
            assert isa(value, IntegerAttr)
            env[op.results[0]] = value.value.data
        elif isa(value, IntegerAttr):
            env[op.results[0]] = pattern(value.value.data, out)  # type: ignore[arg-type]
        else:
            assert isa(value, FloatAttr)
            env[op.results[0]] = float_dtype(out).type(value.value.data)  # type: ignore[arg-type]
    elif isa(out, IndexType) and isa(
        op,
        arith.AddiOp
        | arith.MuliOp
        | arith.SubiOp
        | arith.DivUIOp
        | arith.RemUIOp
        | arith.MinUIOp,
    ):
        a, b = (np.asarray(x, dtype=np.int64) for x in ins)
        fn = {
            arith.AddiOp: np.add,
            arith.MuliOp: np.multiply,
            arith.SubiOp: np.subtract,
            arith.DivUIOp: np.floor_divide,
            arith.RemUIOp: np.remainder,
            arith.MinUIOp: np.minimum,  # a short last chunk's end
        }[type(op)]
        env[op.results[0]] = fn(a, b)
    elif type(op) in BINARY:
        env[op.results[0]] = BINARY[type(op)](*ins)
    elif type(op) in UNARY:
        env[op.results[0]] = UNARY[type(op)](*ins)
    # the most frequent next (a split-K GEMV runs ~470k ops)
    elif isa(op, vector.LoadOp):
        buffer, at = ins
        width = op.result.type.get_shape()[0]
        env[op.results[0]] = np.array(load(buffer, lanes(at, width)))
    elif isa(op, vector.StoreOp):
        value, buffer, at = ins
        t = op.vector.type
        assert isa(t, VectorType)
        store(buffer, lanes(at, t.get_shape()[0]), value, t.element_type)
    elif isa(op, vector.ExtractOp):
        (position,) = op.static_position.get_values()
        env[op.results[0]] = np.asarray(ins[0])[..., position]
    elif isa(op, memref.LoadOp):
        buffer, *index = ins
        env[op.results[0]] = load(buffer, index[0] if index else None)
    elif isa(op, memref.StoreOp):
        value, buffer, *index = ins
        store(buffer, index[0] if index else None, value, op.value.type)
    elif isa(op, arith.AddiOp | arith.SubiOp | arith.MuliOp):
        fn = {
            arith.AddiOp: np.add,
            arith.SubiOp: np.subtract,
            arith.MuliOp: np.multiply,
        }
        with np.errstate(over="ignore"):
            env[op.results[0]] = fn[type(op)](*ins) & np.uint64(mask(out))  # type: ignore[arg-type]
    elif isa(op, arith.DivSIOp):
        a, b = (signed(x, out) for x in ins)  # type: ignore[arg-type]
        q = np.abs(a) // np.abs(b)
        env[op.results[0]] = pattern(np.where((a < 0) != (b < 0), -q, q), out)  # type: ignore[arg-type]
    elif isa(op, arith.MaxSIOp | arith.MinSIOp):
        a, b = (signed(x, out) for x in ins)  # type: ignore[arg-type]
        fn = np.maximum if isa(op, arith.MaxSIOp) else np.minimum
        env[op.results[0]] = pattern(fn(a, b), out)  # type: ignore[arg-type]
    elif isa(op, mathd.AbsIOp):
        env[op.results[0]] = pattern(np.abs(signed(ins[0], out)), out)  # type: ignore[arg-type]
    elif isa(op, arith.XOrIOp):
        env[op.results[0]] = np.asarray(ins[0]) ^ np.asarray(ins[1])
    elif isa(op, arith.AndIOp):
        env[op.results[0]] = np.asarray(ins[0]) & np.asarray(ins[1])
    elif isa(op, arith.ShRUIOp):
        env[op.results[0]] = np.asarray(ins[0]) >> np.asarray(ins[1])
    elif isa(op, arith.TruncIOp | arith.ExtUIOp):
        env[op.results[0]] = np.asarray(ins[0]) & np.uint64(mask(out))  # type: ignore[arg-type]
    elif isa(op, arith.MulUIExtendedOp):
        product = np.asarray(ins[0], dtype=np.uint64) * np.asarray(ins[1], np.uint64)
        env[op.results[0]] = product & np.uint64(0xFFFFFFFF)
        env[op.results[1]] = product >> np.uint64(32)
    elif isa(op, arith.IndexCastOp) and isa(out, IndexType):
        value = signed(ins[0], op.input.type)  # index_cast sign-extends
        env[op.results[0]] = np.asarray(value, dtype=np.int64)
    elif isa(op, arith.IndexCastOp):
        env[op.results[0]] = pattern(ins[0], out)  # type: ignore[arg-type]
    elif isa(op, arith.CmpfOp):
        a, b = ins
        predicate = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
        result = (
            np.isnan(a) | np.isnan(b)
            if predicate == "uno"
            else FLOAT_PREDICATES[predicate](a, b)
        )
        env[op.results[0]] = np.asarray(result).astype(np.uint64)
    elif isa(op, arith.CmpiOp):
        t = op.lhs.type
        name = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
        a, b = ins
        if name.startswith("s") and not isa(t, IndexType):
            a, b = signed(a, t), signed(b, t)
        fn = {
            "eq": np.equal,
            "ne": np.not_equal,
            "lt": np.less,
            "le": np.less_equal,
            "gt": np.greater,
            "ge": np.greater_equal,
        }[name[-2:] if name not in ("eq", "ne") else name]
        env[op.results[0]] = np.asarray(fn(a, b)).astype(np.uint64)
    elif isa(op, arith.SelectOp):
        c, x, y = ins
        if isa(out, VectorType) and not isa(op.cond.type, VectorType):
            c = np.asarray(c)[..., None]  # one condition per thread, every lane
        env[op.results[0]] = np.where(np.asarray(c) != 0, x, y)
    elif isa(op, arith.ExtFOp | arith.TruncFOp):
        env[op.results[0]] = np.asarray(ins[0]).astype(float_dtype(out))  # type: ignore[arg-type]
    elif isa(op, arith.SIToFPOp):
        env[op.results[0]] = signed(ins[0], op.input.type).astype(float_dtype(out))  # type: ignore[arg-type]
    elif isa(op, arith.UIToFPOp):
        env[op.results[0]] = np.asarray(ins[0]).astype(float_dtype(out))  # type: ignore[arg-type]
    elif isa(op, arith.FPToSIOp):
        env[op.results[0]] = pattern(np.trunc(np.asarray(ins[0], np.float64)), out)  # type: ignore[arg-type]
    elif isa(op, memref.ExtractAlignedPointerAsIndexOp):
        env[op.results[0]] = int(ins[0].ctypes.data) + POINTER_OFFSET
    elif isa(op, vector.BroadcastOp):
        width = op.vector.type.get_shape()[0]
        env[op.results[0]] = np.repeat(np.asarray(ins[0])[..., None], width, axis=-1)
    elif isa(op, vector.InsertOp):
        value, dest = ins
        (position,) = op.static_position.get_values()
        shape = np.broadcast_shapes(np.shape(value), np.shape(dest)[:-1])
        result = np.array(np.broadcast_to(dest, (*shape, np.shape(dest)[-1])))
        result[..., position] = value
        env[op.results[0]] = result
    elif isa(op, cf.AssertOp):
        if not np.all(np.asarray(ins[0]) != 0):
            raise AssertionError(f"device assertion failed: {op.msg.data}")
    elif isa(op, memref.AllocaOp):  # a thread's register
        t = op.memref.type
        shape = tuple(t.get_shape())
        env[op.results[0]] = np.zeros(shape, element_info(t.element_type).storage)
    elif isa(op, scf.ForOp):
        lb, ub, step, *carried = ins
        body = op.body.block
        if not carried:  # the grid-stride loop: every index at once
            env[body.args[0]] = np.arange(lb, ub, step, dtype=np.int64)
            run_block(body, env)
            return
        for j in range(int(lb), int(ub), int(step)):
            env[body.args[0]] = j
            for arg, value in zip(body.args[1:], carried):
                env[arg] = value
            carried = run_block(body, env)
        for result, value in zip(op.results, carried):
            env[result] = value
    else:
        raise AssertionError(f"the device evaluator has no case for {op.name}")


# ============================================================================
# Host code on N ranks
# ============================================================================


def buffer(t: Attribute) -> np.ndarray:
    assert isa(t, MemRefType)
    return np.zeros(tuple(t.get_shape()), dtype=element_info(t.element_type).storage)


REDUCTIONS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}


def combine(arrays: Sequence[np.ndarray], kind: str) -> np.ndarray:
    """Every rank's array combined in rank order (halves in f32)."""
    half = arrays[0].dtype.itemsize == 2
    total = arrays[0].astype(np.float32) if half else arrays[0].copy()
    for a in arrays[1:]:
        total = REDUCTIONS[kind](total, a.astype(np.float32) if half else a)
    return total.astype(arrays[0].dtype)


# ============================================================================
# Fused collective kernels: the ranks in lockstep, one thread each
# ============================================================================


@dataclass
class PeerWorld:
    """Every rank's symmetric workspace (bytes) and signal pad, the epoch
    counters, and the bytes each rank stored into each other rank."""

    world: int
    symmetric_bytes: int
    signal_slots: int
    workspaces: list[np.ndarray] = field(default_factory=list[np.ndarray])
    pads: list[np.ndarray] = field(default_factory=list[np.ndarray])
    epochs: list[int] = field(default_factory=list[int])
    peer_bytes: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int64))

    def __post_init__(self) -> None:
        self.workspaces = [
            np.zeros(max(self.symmetric_bytes, 1), np.uint8) for _ in range(self.world)
        ]
        self.pads = [
            np.zeros(max(self.signal_slots, 1), np.uint64) for _ in range(self.world)
        ]
        self.epochs = [0] * self.world
        self.peer_bytes = np.zeros((self.world, self.world), np.int64)

    @staticmethod
    def of(module: ModuleOp, world: int) -> PeerWorld:
        def get(name: str) -> int:
            attr = module.attributes.get(name)
            return attr.value.data if isa(attr, IntegerAttr) else 0

        return PeerWorld(
            world, get("coco_gpu.symmetric_bytes"), get("coco_gpu.signal_slots")
        )

    def symmetric(self, rank: int, offset: int, t: Attribute) -> np.ndarray:
        assert isa(t, MemRefType)
        dtype = element_info(t.element_type).storage
        count = int(np.prod(t.get_shape()))
        raw = self.workspaces[rank][offset : offset + count * dtype.itemsize]
        return raw.view(dtype)

    def peer(self, rank: int, view: np.ndarray, p: int) -> np.ndarray:
        """Rank `p`'s copy of the symmetric buffer `view` of rank `rank`."""
        base = self.workspaces[rank]
        offset = view.ctypes.data - base.ctypes.data
        assert 0 <= offset < base.nbytes, "not a symmetric buffer"
        return self.workspaces[p][offset : offset + view.nbytes].view(view.dtype)


def run_loop(
    op: scf.ForOp, ins: Sequence[Any], env: Env, run_body: Callable[[Block], list[Any]]
) -> None:
    """An `scf.for` index by index (its bounds `ins[:3]`, its carried values
    after), each iteration's body run by `run_body`: a thread's
    (`run_scalar_block`) or every thread's at once (`run_threads_block`)."""
    lb, ub, step, *carried = ins
    body = op.body.block
    for j in range(int(lb), int(ub), int(step)):
        env[body.args[0]] = np.int64(j)
        for arg, value in zip(body.args[1:], carried):
            env[arg] = value
        carried = run_body(body)
    for result, value in zip(op.results, carried):
        env[result] = value


def run_branch(
    op: scf.IfOp, taken: bool, env: Env, run_body: Callable[[Block], list[Any]]
) -> None:
    """The side of an `scf.if` whose condition is `taken` (the same for every
    thread it runs for), run by `run_body` as in `run_loop`."""
    region = op.true_region if taken else op.false_region
    values = run_body(region.block) if region.blocks else []
    for result, value in zip(op.results, values):
        env[result] = value


def run_scalar_block(block: Block, env: Env, rank: int, world: PeerWorld) -> list[Any]:
    """A fused kernel's block, one thread (thread 0 of block 0 of a grid of
    one): loops run index by index; a wait must already be satisfied (the
    ranks run each phase in lockstep, so a wait that is not is a missing
    signal)."""
    for op in block.ops:
        if isa(op, scf.YieldOp | gpu.ReturnOp):
            return [env[v] for v in op.operands]
        run_scalar_op(op, env, rank, world)
    return []


def run_scalar_op(op: Operation, env: Env, rank: int, world: PeerWorld) -> None:
    ins = [env[v] for v in op.operands]
    if isa(op, scf.ForOp) and is_thread_loop(op):
        lb, ub, step = (int(x) for x in ins)
        if lb < ub:  # every index at once, as the block's threads run them
            env[op.body.block.args[0]] = np.arange(lb, ub, step, dtype=np.int64)
            run_threads_block(op.body.block, env, rank, world)
    elif isa(op, scf.ForOp):
        run_loop(op, ins, env, lambda b: run_scalar_block(b, env, rank, world))
    elif isa(op, scf.IfOp):
        run_branch(
            op, bool(int(ins[0])), env, lambda b: run_scalar_block(b, env, rank, world)
        )
    elif isa(op, gpu.BarrierOp):
        pass
    elif isa(op, coco_gpu.PeerViewOp):
        _, view, p = ins
        env[op.results[0]] = world.peer(rank, view, int(p))
    elif isa(op, coco_gpu.SignalOp):
        _, p, slot, value = ins
        world.pads[int(p)][int(slot)] = np.uint64(value)
    elif isa(op, coco_gpu.WaitSignalOp):
        _, slot, value = ins
        held = world.pads[rank][int(slot)]
        assert held >= np.uint64(value), (
            f"rank {rank} would wait forever for slot {int(slot)} to reach "
            f"{int(value)} (it holds {int(held)})"
        )
    elif isa(op, coco_gpu.CountPeerBytesOp):
        _, p, count = ins
        world.peer_bytes[rank, int(p)] += int(count)
    elif isa(op, coco_gpu.TileComputedOp):
        pass  # the emulator's timeline only
    else:
        run_op(op, env)


# ============================================================================
# Thread loops: the block's threads at once
# ============================================================================

NOT_PER_THREAD = (
    gpu.BarrierOp,
    memref.AllocaOp,
    coco_gpu.SignalOp,
    coco_gpu.WaitSignalOp,
    coco_gpu.CountPeerBytesOp,
    coco_gpu.TileComputedOp,
)
"""Ops that a thread loop's iterations cannot run all at once: the block's
synchronisation, a thread's own register, and what one thread does for the
block."""

_THREAD_LOOPS: weakref.WeakKeyDictionary[scf.ForOp, bool] = weakref.WeakKeyDictionary()


def is_thread_loop(op: scf.ForOp) -> bool:
    """A loop that strides by the block's size with no values carried from one
    index to the next, whose indices the block's threads share out: they run
    concurrently on the device, so the evaluator runs them all at once (each
    value then holds one row per index) unless the body synchronises, uses a
    register (a thread's sum over its indices), or has loop bounds that depend
    on the index."""
    if op not in _THREAD_LOOPS:
        body = op.body.block
        inside = {r for o in op.body.walk() for r in o.results} | set(body.args)
        inside |= {
            a
            for o in op.body.walk()
            for r in o.regions
            for b in r.blocks
            for a in b.args
        }
        _THREAD_LOOPS[op] = (
            isa(op.step.owner, gpu.BlockDimOp)
            and not op.iter_args
            and not any(isa(o, NOT_PER_THREAD) for o in op.body.walk())
            and not any(
                isa(o.memref.owner, memref.AllocaOp)
                for o in op.body.walk()
                if isa(o, memref.LoadOp | memref.StoreOp)
            )
            and not any(
                v in inside and not isa(v.owner, arith.ConstantOp)
                for o in op.body.walk()
                if isa(o, scf.ForOp)
                for v in (o.lb, o.ub, o.step)
            )
        )
    return _THREAD_LOOPS[op]


def per_thread(value: SSAValue, x: Any) -> bool:
    """Whether `x`, the value of `value` in a thread loop, has one row per
    thread (a uniform value has the shape of its type)."""
    if isa(value.type, MemRefType | coco_gpu.PeersType):
        return False
    return np.ndim(x) > (1 if isa(value.type, VectorType) else 0)


def run_threads_block(block: Block, env: Env, rank: int, world: PeerWorld) -> list[Any]:
    for op in block.ops:
        if isa(op, scf.YieldOp):
            return [env[v] for v in op.operands]
        run_threads_op(op, env, rank, world)
    return []


def run_threads_op(op: Operation, env: Env, rank: int, world: PeerWorld) -> None:
    """One op of a thread loop's body, for every thread at once."""
    ins = [env[v] for v in op.operands]
    if isa(op, scf.ForOp):  # bounds uniform (is_thread_loop)
        run_loop(op, ins, env, lambda b: run_threads_block(b, env, rank, world))
    elif isa(op, scf.IfOp) and not per_thread(op.cond, ins[0]):
        run_branch(
            op, bool(int(ins[0])), env, lambda b: run_threads_block(b, env, rank, world)
        )
    elif isa(op, scf.IfOp):
        run_divergent_if(op, np.asarray(ins[0]) != 0, env, rank, world)
    elif isa(op, coco_gpu.PeerViewOp):
        _, view, p = ins
        assert not per_thread(op.operands[2], p), "a peer per thread"
        env[op.results[0]] = world.peer(rank, view, int(p))
    else:
        run_op(op, env)


def run_divergent_if(
    op: scf.IfOp, taken: np.ndarray, env: Env, rank: int, world: PeerWorld
) -> None:
    """Each branch runs on the threads that take it alone (its loads and
    stores at their indices only); the results are merged back by thread."""
    merged: dict[SSAValue, np.ndarray] = {}
    for region, threads in ((op.true_region, taken), (op.false_region, ~taken)):
        if not region.blocks or not threads.any():
            continue
        sub = {v: x[threads] if per_thread(v, x) else x for v, x in env.items()}
        values = run_threads_block(region.block, sub, rank, world)
        for result, value in zip(op.results, values):
            t = result.type
            shape = tuple(t.get_shape()) if isa(t, VectorType) else ()
            if result not in merged:
                merged[result] = np.zeros((len(taken), *shape), np.asarray(value).dtype)
            merged[result][threads] = np.broadcast_to(value, (threads.sum(), *shape))
    env.update(merged)


def run_fused(
    kernel: gpu.FuncOp, envs: list[Env], launch: gpu.LaunchFuncOp, world: PeerWorld
) -> None:
    """Every rank runs each top-level op of the kernel (its phases, and the
    steps of each stage boundary) before any rank runs the next."""
    kernel_envs: list[Env] = []
    inputs = len(kernel.function_type.inputs.data)
    for rank, env in enumerate(envs):
        values = [env[v] for v in launch.kernelOperands]
        kernel_env: Env = dict(zip(kernel.body.block.args, values))
        for argument in kernel.body.block.args[inputs:]:  # workgroup buffers
            kernel_env[argument] = buffer(argument.type)
        kernel_envs.append(kernel_env)
    for op in kernel.body.block.ops:
        if isa(op, gpu.ReturnOp):
            return
        for rank, kernel_env in enumerate(kernel_envs):
            run_scalar_op(op, kernel_env, rank, world)


def is_fused(kernel: gpu.FuncOp) -> bool:
    return any(isa(t, coco_gpu.PeersType) for t in kernel.function_type.inputs.data)


def run_host(
    function: func.FuncOp,
    kernels: dict[str, gpu.FuncOp],
    world: int,
    args: list[list[np.ndarray]],
    mailbox: dict[tuple[str, str, int], list[np.ndarray]],
    peers: PeerWorld | None = None,
) -> None:
    """Run `function` on every rank; `args[r]` are rank r's buffers."""
    if peers is None:
        peers = PeerWorld(world, 0, 0)
    envs: list[Env] = [dict(zip(function.body.block.args, a)) for a in args]
    me = function.sym_name.data
    for op in function.body.block.ops:
        ins = [[env[v] for v in op.operands] for env in envs]
        if isa(op, func.ReturnOp):
            return
        if isa(op, arith.ConstantOp | arith.MuliOp | coco_gpu.GridBlocksOp):
            for env in envs:
                if isa(op, coco_gpu.GridBlocksOp):
                    env[op.results[0]] = 1
                else:
                    run_op(op, env)
        elif isa(op, coco_gpu.RankOp):
            for r, env in enumerate(envs):
                env[op.results[0]] = r
        elif isa(op, coco_gpu.PeersOp):
            for r, env in enumerate(envs):
                env[op.results[0]] = r
        elif isa(op, coco_gpu.NextEpochOp):
            for r, env in enumerate(envs):
                peers.epochs[r] += 1
                env[op.results[0]] = np.uint64(peers.epochs[r])
        elif isa(op, coco_gpu.SymmetricBufferOp):
            for r, env in enumerate(envs):
                env[op.results[0]] = peers.symmetric(
                    r, op.offset.value.data, op.result.type
                )
        elif isa(op, memref.AllocOp):
            for env in envs:
                env[op.results[0]] = buffer(op.memref.type)
        elif isa(op, memref.DeallocOp | coco_gpu.WaitEventOp):
            pass  # host order is one schedule the streams' events allow
        elif isa(op, coco_gpu.RecordEventOp):
            for env in envs:
                env[op.results[0]] = None
        elif isa(op, coco_gpu.ViewOp):
            shape = op.result.type.get_shape()  # type: ignore[attr-defined]
            start = op.offset.value.data
            for env, (source,) in zip(envs, ins):
                flat = source.reshape(-1)[start : start + math.prod(shape)]
                view = flat.reshape(shape)
                assert np.shares_memory(view, source)
                env[op.results[0]] = view
        elif isa(op, memref.CollapseShapeOp):
            for env, (source,) in zip(envs, ins):
                flat = source.reshape(-1)
                assert np.shares_memory(flat, source)
                env[op.results[0]] = flat
        elif isa(op, memref.CopyOp):
            for source, dest in ins:
                dest[...] = source
        elif isa(op, coco_gpu.GemmOp):
            for a, b, c in ins:
                compute = np.float32 if a.dtype.itemsize == 2 else a.dtype
                if b.ndim > 2:  # batched, as the printer's strided-batched GEMM
                    k, n = b.shape[-2:]
                    b = b.reshape(-1, k, n)
                    a = a.reshape(len(b), -1, k)
                product = np.matmul(a.astype(compute), b.astype(compute))
                c[...] = product.reshape(c.shape).astype(c.dtype)
        elif isa(op, coco_gpu.NcclAllReduceOp):
            total = combine([i[0] for i in ins], op.reduction.data)
            for _, out in ins:
                out[...] = total
        elif isa(op, coco_gpu.NcclReduceScatterOp):
            total = combine([i[0] for i in ins], op.reduction.data).reshape(world, -1)
            for r, (_, out) in enumerate(ins):
                out.reshape(-1)[...] = total[r]
        elif isa(op, coco_gpu.NcclAllGatherOp):
            gathered = np.concatenate([i[0].reshape(-1) for i in ins])
            for _, out in ins:
                out.reshape(-1)[...] = gathered
        elif isa(op, coco_gpu.NcclBroadcastOp):
            root = ins[op.root.value.data][0]
            for _, out in ins:
                out[...] = root
        elif isa(op, coco_gpu.NcclAllToAllOp):
            blocks = [i[0].reshape(world, -1) for i in ins]
            for r, (_, out) in enumerate(ins):
                out.reshape(world, -1)[...] = np.stack(
                    [blocks[p][r] for p in range(world)]
                )
        elif isa(op, coco_gpu.NcclSendOp):
            key = (me, op.stage.root_reference.data, op.channel.value.data)
            mailbox[key] = [i[0].copy() for i in ins]
        elif isa(op, coco_gpu.NcclRecvOp):
            key = (op.stage.root_reference.data, me, op.channel.value.data)
            for (out,), sent in zip(ins, mailbox.pop(key)):
                out[...] = sent
        elif isa(op, gpu.LaunchFuncOp):
            kernel = kernels[op.kernel.nested_references.data[-1].data]
            if is_fused(kernel):
                run_fused(kernel, envs, op, peers)
                continue
            inputs = len(kernel.function_type.inputs.data)
            for rank, env in enumerate(envs):
                values = [env[v] for v in op.kernelOperands]
                kernel_env: Env = dict(zip(kernel.body.block.args, values))
                shared = kernel.body.block.args[inputs:]
                if not shared:
                    run_block(kernel.body.block, kernel_env)
                    continue
                # A kernel whose threads cooperate through shared memory
                # runs as a block of one thread, index by index.
                for argument in shared:
                    kernel_env[argument] = buffer(argument.type)
                run_scalar_block(kernel.body.block, kernel_env, rank, peers)
        else:
            raise AssertionError(f"the device evaluator has no case for {op.name}")


def distribute(t: TensorType, value: np.ndarray, world: int) -> list[np.ndarray]:
    value = np.asarray(value, dtype=element_info(t.element_type).storage)
    if t.layout.is_local:
        return [np.array(value[r]) for r in range(world)]
    if t.layout.is_sliced:
        return [np.array(b) for b in cut(value, t.layout.sliced_dim, world)]
    return [np.array(value) for _ in range(world)]


def gather(t: TensorType, ranks: Sequence[np.ndarray]) -> np.ndarray:
    stacked = np.stack(ranks)
    if t.layout.is_local:
        return stacked
    if t.layout.is_sliced:
        return join(stacked, t.layout.sliced_dim)
    return stacked[0]


def run_device(
    module: ModuleOp,
    world: int,
    inputs: dict[str, np.ndarray],
    only: set[str] | None = None,
) -> dict[str, np.ndarray]:
    """Run every function (or those named in `only`; stages in module order)
    on `world` ranks from the
    interpreter's inputs (`FUNC.argI` → global value); returns every argument
    after the run (`FUNC.argI`) and every result (`FUNC.resultI`)."""
    kernels = {k.sym_name.data: k for k in module.walk() if isa(k, gpu.FuncOp)}
    mailbox: dict[tuple[str, str, int], list[np.ndarray]] = {}
    peers = PeerWorld.of(module, world)
    outputs: dict[str, np.ndarray] = {}
    for function in (f for f in module.ops if isa(f, func.FuncOp)):
        if only is not None and function.sym_name.data not in only:
            continue
        entry = function.attributes[coco_gpu.ENTRY_ATTR]
        assert isa(entry, FunctionType)
        name = function.sym_name.data
        arg_types = [t for t in entry.inputs.data if isa(t, TensorType)]
        result_types = [t for t in entry.outputs.data if isa(t, TensorType)]
        per_rank: list[list[np.ndarray]] = [[] for _ in range(world)]
        for k, t in enumerate(arg_types):
            for r, value in enumerate(distribute(t, inputs[f"{name}.arg{k}"], world)):
                per_rank[r].append(value)
        outs = function.body.block.args[len(arg_types) :]
        for r in range(world):
            per_rank[r] += [buffer(o.type) for o in outs]
        run_host(function, kernels, world, per_rank, mailbox, peers)
        for k, t in enumerate(arg_types):
            outputs[f"{name}.arg{k}"] = gather(t, [p[k] for p in per_rank])
        for k, t in enumerate(result_types):
            ranks = [p[len(arg_types) + k] for p in per_rank]
            outputs[f"{name}.result{k}"] = gather(t, ranks)
    return outputs
