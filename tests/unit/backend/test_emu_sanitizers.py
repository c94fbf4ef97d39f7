"""The emulation under ThreadSanitizer and AddressSanitizer: flag ping-pong
between blocks, streams and ranks, and every NCCL call, run after run with no
report (docs/gpu/emulation.md). Kept small: tsan slows threads down a lot."""

from __future__ import annotations

import numpy as np
import pytest
from emu_helpers import NCCL_OPS, SYMMETRIC_BYTES, kernels_source

from coconet_ir.backend.emu import (
    EmulationError,
    EntryCall,
    compile_emulated,
    run_emulated,
)


def calls_for(n: int) -> list[EntryCall]:
    def ranks(make):
        return [make(r) for r in range(n)]

    rounds, count = 8, 40
    xs = [np.arange(count, dtype=np.float32) + r for r in range(n)]
    halves = [np.linspace(0, 1, count * n).astype(np.float16) for _ in range(n)]
    return [
        EntryCall(
            "coco_pingpong_blocks",
            ranks(lambda r: [np.zeros(2 * rounds, np.int32), np.int32(rounds)]),
        ),
        EntryCall(
            "coco_pingpong_streams",
            ranks(lambda r: [np.zeros(2 * rounds, np.int32), np.int32(rounds)]),
        ),
        EntryCall(
            "coco_ring_exchange",
            ranks(lambda r: [xs[r], np.zeros(count, np.float32), np.int64(count)]),
        ),
        EntryCall(
            "coco_nccl_all_reduce",
            ranks(
                lambda r: [
                    halves[r],
                    np.zeros(count * n, np.float16),
                    np.int64(count * n),
                    np.int32(6),
                    np.int32(NCCL_OPS["sum"]),
                ]
            ),
            outputs={"all_reduce": 1},
        ),
        EntryCall(
            "coco_nccl_reduce_scatter",
            ranks(
                lambda r: [
                    halves[r],
                    np.zeros(count, np.float16),
                    np.int64(count),
                    np.int32(6),
                    np.int32(NCCL_OPS["max"]),
                ]
            ),
        ),
        EntryCall(
            "coco_nccl_all_gather",
            ranks(
                lambda r: [
                    xs[r],
                    np.zeros(count * n, np.float32),
                    np.int64(count),
                    np.int32(7),
                ]
            ),
        ),
        EntryCall(
            "coco_nccl_broadcast",
            ranks(
                lambda r: [
                    xs[r],
                    np.zeros(count, np.float32),
                    np.int64(count),
                    np.int32(7),
                    np.int32(0),
                ]
            ),
        ),
        EntryCall(
            "coco_nccl_all_to_all",
            ranks(
                lambda r: [
                    np.ones(4 * n, np.float32),
                    np.zeros(4 * n, np.float32),
                    np.int64(4),
                ]
            ),
        ),
        EntryCall(
            "coco_send_to",
            ranks(lambda r: [xs[r], np.int64(count), np.int32(1)]),
            stage=0,
        ),
        EntryCall(
            "coco_recv_from",
            ranks(
                lambda r: [np.zeros(count, np.float32), np.int64(count), np.int32(0)]
            ),
            stage=1,
            outputs={"received": 0},
        ),
    ]


@pytest.mark.parametrize("sanitize", ["thread", "address"])
def test_sanitizer_clean_run_after_run(sanitize):
    """Three runs under ThreadSanitizer, each its own interleaving of the
    threads; one under AddressSanitizer, whose findings (bounds, lifetimes)
    do not depend on the interleaving."""
    lib = compile_emulated(kernels_source(), sanitize=sanitize)
    n = 2
    for _ in range(3 if sanitize == "thread" else 1):
        outputs, _ = run_emulated(
            lib,
            n,
            calls_for(n),
            num_stages=2,
            symmetric_bytes=SYMMETRIC_BYTES,
            watchdog=30,
        )
        want = (np.linspace(0, 1, 40 * n).astype(np.float32) * n).astype(np.float16)
        np.testing.assert_array_equal(outputs["all_reduce"][0], want)
        np.testing.assert_array_equal(
            outputs["received"][1], np.arange(40, dtype=np.float32) + 1
        )


def test_thread_sanitizer_reports_a_race():
    lib = compile_emulated(kernels_source(), sanitize="thread")
    with pytest.raises(EmulationError, match="ThreadSanitizer: data race"):
        run_emulated(lib, 1, [EntryCall("coco_racy", [[np.zeros(1, np.int32)]])])


@pytest.mark.parametrize("sync", [1, 0])
def test_thread_sanitizer_sees_a_block_missing_its_barrier(sync: int):
    """A block's threads run as fibers, one after another, so a read of a
    neighbour's shared-memory slot with no `__syncthreads()` before it gets
    the value in order anyway (thread 31 reads slot 0, written long before):
    ThreadSanitizer, told of each fiber and each switch, still reports the
    race, and is quiet with the barrier."""
    lib = compile_emulated(kernels_source(), sanitize="thread")
    calls = [EntryCall("coco_rotate", [[np.zeros(32, np.int32), np.int32(sync)]])]
    if not sync:
        with pytest.raises(EmulationError, match="ThreadSanitizer: data race"):
            run_emulated(lib, 1, calls)
        return
    outputs, _ = run_emulated(
        lib, 1, [EntryCall("coco_rotate", calls[0].args, outputs={"out": 0})]
    )
    np.testing.assert_array_equal(outputs["out"][0], (np.arange(32) + 1) % 32)


OVERFLOW = """
__global__ void write_one_past(float *out, long long n) {
  if (threadIdx.x == 0) out[n] = 1.0f;
}

extern "C" int coco_write_one_past(coco_context *ctx, float *out, long long n) {
  COCO_LAUNCH(write_one_past, 1, 32, 0, ctx->streams[0], out, n);
  return 0;
}
"""


def test_address_sanitizer_sees_the_bounds_of_every_entry_array():
    """Each array an entry is given is memory of its own in the child, so a
    kernel writing one element past an array's end (here the first of two
    arrays, whose next neighbour would otherwise absorb the store) is a
    heap-buffer-overflow report, not a silent write."""
    lib = compile_emulated('#include "coco_runtime.h"\n' + OVERFLOW, "address")
    arrays = [np.zeros(64, np.float32), np.zeros(64, np.float32)]
    ok = EntryCall("coco_write_one_past", [[arrays[1], np.int64(63)]])
    run_emulated(lib, 1, [ok])
    past = EntryCall("coco_write_one_past", [[arrays[0], np.int64(64)]])
    with pytest.raises(EmulationError, match="heap-buffer-overflow"):
        run_emulated(lib, 1, [past, ok])
