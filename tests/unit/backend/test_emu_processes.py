"""A rank per process (docs/gpu/emulation.md, "Multi-process mode"): the
emulated CUDA C run with every rank a process of its own (shared-memory
workspaces and signal pads, NCCL calls meeting through shared-memory messages)
gives, bit for bit, what the same library gives with every rank a thread, and
the same counts; a rank that dies or never comes makes every other rank fail
with its name, within seconds, leaving nothing in /dev/shm."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from helpers import example
from xdsl.dialects.func import FuncOp

import coconet_ir as cc
from coconet_ir.backend.emu import EmulationError, compile_emulated
from coconet_ir.backend.emu.run import new_key
from coconet_ir.emulate import arguments_of, emulate, lower
from coconet_ir.interpreter.inputs import prepare_inputs
from coconet_ir.interpreter.stages import select_functions

COUNTS = ("launches", "nccl_calls", "gemms", "bytes", "kernels")


def shared_memory_of(key: str) -> list[str]:
    return [n for n in os.listdir("/dev/shm") if n.startswith(f"coco-emu-{key}")]


@pytest.mark.parametrize(
    ("name", "world", "passes"),
    [
        ("adam", 2, "coco-optimize"),  # the fused all-reduce: peer stores, signals
        ("megatron", 8, "coco-optimize"),
        ("pipeline", 4, "coco-optimize"),  # two stages, fused send
        ("moe_gemm_a2a", 4, "coco-optimize"),  # tiles stored into peers
        ("sequence_parallel_norm", 4, "coco-optimize"),  # cooperative stages
        ("adam", 4, ""),  # NCCL all-reduce between processes
        ("pipeline", 2, ""),  # NCCL send/recv between stages
        ("sequence_parallel", 4, ""),  # all_gather, reduce_scatter
        ("dlrm_embedding", 4, ""),  # grouped all-to-all (sends and receives)
        ("megatron", 4, "coco-overlap{per_peer=true}"),  # peer copies
    ],
)
def test_processes_give_what_threads_give(name, world, passes):
    module = example(name)
    threads = emulate(module, world, passes=passes, seed=3, calls=2)
    processes = emulate(module, world, passes=passes, seed=3, calls=2, processes=True)
    assert threads.stats is not None and processes.stats is not None
    for key, output in threads.outputs.items():
        np.testing.assert_array_equal(processes.outputs[key].value, output.value, key)
    for count in COUNTS:
        assert processes.stats.raw[count] == threads.stats.raw[count], count


# ---------------------------------------------------------------------------
# Faults: processes started here, one of which dies or never comes
# ---------------------------------------------------------------------------

RANK = textwrap.dedent(
    """
    import os, pickle, signal, sys
    from coconet_ir.backend.emu.ranks import EmulatedRank

    library, key, rank, world, symmetric, slots, entry, die = sys.argv[1:9]
    rank, world, die = int(rank), int(world), int(die)
    with open(sys.argv[9], "rb") as file:
        arguments = pickle.load(file)[rank]
    with EmulatedRank(library, key, rank, world, symmetric_bytes=int(symmetric),
                      signal_slots=int(slots)) as me:
        for step in range(3):
            if rank == die and step == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            me.call(entry, arguments)
    print("done")
    """
)


@cache
def built(name: str, world: int, passes: str) -> tuple[Path, int, int, str]:
    """The library of the example lowered for `world` ranks, its workspace
    and slots, and its entry."""
    module = example(name)
    lowered = lower(module, world, passes, 256)
    func = next(f for f in lowered.coco.ops if isinstance(f, FuncOp))
    return (
        compile_emulated(lowered.cuda),
        lowered.symmetric_bytes,
        max(lowered.signal_slots, 1),
        f"coco_{func.sym_name.data}",
    )


def start_ranks(
    tmp_path: Path, name: str, world: int, passes: str, *, ranks: int, die: int = -1
) -> tuple[str, list[subprocess.Popen]]:
    """Processes for ranks 0..ranks-1 of a world of `world`, each running the
    example's entry three times; rank `die` kills itself before its second."""
    library, symmetric, slots, entry = built(name, world, passes)
    module = example(name)
    lowered = lower(module, world, passes, 256)
    func = next(f for f in lowered.coco.ops if isinstance(f, FuncOp))
    fed = prepare_inputs(select_functions(module, None), world, 0, None)
    arguments = tmp_path / "arguments.pkl"
    arguments.write_bytes(
        pickle.dumps([arguments_of(func, fed, world, r) for r in range(world)])
    )
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    key = new_key()
    env = {**os.environ, "COCO_EMU_TIMEOUT": "2"}
    command = [sys.executable, str(script), str(library), key]
    sizes = [str(world), str(symmetric), str(slots), entry, str(die), str(arguments)]
    return key, [
        subprocess.Popen(
            [*command, str(r), *sizes], stderr=subprocess.PIPE, text=True, env=env
        )
        for r in range(ranks)
    ]


def finish(processes: list[subprocess.Popen]) -> list[tuple[int, str]]:
    return [(p.wait(60), p.communicate()[1]) for p in processes]


@pytest.mark.parametrize(
    ("passes", "waits_in"),
    [
        ("coco-optimize", "kernel 'megatron_sum_rs_fused_0'"),  # a peer's signal
        ("", "ncclAllReduce call #1 on the stage communicator waits for rank 2's part"),
    ],
)
def test_a_rank_that_dies_stops_the_others_with_its_name(tmp_path, passes, waits_in):
    start = time.monotonic()
    key, processes = start_ranks(tmp_path, "megatron", 4, passes, ranks=4, die=2)
    ended = finish(processes)
    assert time.monotonic() - start < 30  # the 2 s timeout is not what ends them
    assert ended[2][0] == -signal.SIGKILL
    for rank in (0, 1, 3):
        status, stderr = ended[rank]
        assert status == 3, stderr
        assert f"coco-emu: error: rank {rank} of stage 0" in stderr
        assert waits_in in stderr
        assert "rank 2 of stage 0 (pid" in stderr and ") has exited" in stderr
    assert not shared_memory_of(key)


def test_a_rank_that_never_comes_is_named_at_the_timeout(tmp_path):
    key, processes = start_ranks(tmp_path, "adam", 4, "coco-optimize", ranks=3)
    ended = finish(processes)
    # The first to time out says so; it marks itself failed, and the others
    # stop at once naming it.
    assert any("watchdog" in e and "waited more than 2 s" in e for _, e in ended)
    for status, stderr in ended:
        assert status == 3, stderr
        assert "waits for rank 3 of stage 0 to join the world" in stderr
        assert "waited more than 2 s" in stderr or "has stopped on an error" in stderr
    assert not shared_memory_of(key)


def test_ranks_of_different_worlds_under_one_key_are_refused(tmp_path):
    """Two ranks made with one key but different sizes: a clear error, not
    a misread workspace."""
    library, *_ = built("adam", 2, "coco-optimize")
    key = new_key()
    script = textwrap.dedent(
        f"""
        import sys
        from coconet_ir.backend.emu.ranks import EmulatedRank
        EmulatedRank({str(library)!r}, {key!r}, int(sys.argv[1]), 2,
                     symmetric_bytes=int(sys.argv[2]))
        """
    )
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(rank), str(size)],
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "COCO_EMU_TIMEOUT": "2"},
        )
        for rank, size in ((0, 1 << 20), (1, 1 << 21))  # above the library's
    ]
    ended = finish(processes)
    # The rank that finds the other's segment unlike its own says so; the
    # other may find it first, or find nothing (the failed rank removed the
    # world's shared memory) and end at the timeout.
    assert any(s == 4 and "(one program, one key)" in e for s, e in ended), ended
    for status, stderr in ended:
        assert status == 4 or "it failed before; see its messages" in stderr, stderr
    assert not shared_memory_of(key)


def test_a_bad_key_is_refused(tmp_path):
    from coconet_ir.backend.emu.ranks import EmulatedRank

    library, *_ = built("adam", 2, "coco-optimize")
    with pytest.raises(EmulationError, match="letters, digits"):
        EmulatedRank(library, "../etc", 0, 2)


def test_an_array_shared_by_two_ranks_is_refused_with_processes():
    """With threads one array given to two ranks is one buffer; a process per
    rank cannot share it, so the run says so rather than differ."""
    from coconet_ir.backend.emu import EntryCall, run_emulated

    library, *_ = built("adam", 2, "coco-optimize")
    shared = np.zeros(4, np.float32)
    call = EntryCall("coco_adam", [[shared], [shared]])
    with pytest.raises(cc.CocoError, match="global ranks 0 and 1; with a process"):
        run_emulated(library, 2, [call], processes=True)
