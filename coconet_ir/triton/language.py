"""Device functions for Triton authors: workgroup-granular communication over
symmetric memory (docs/triton.md). Call them from your own `@triton.jit`
kernel; the host side (`coconet_ir.triton.world`) gives every rank the same
arguments:

- `buffer_ptrs`: an int64 tensor of the `world` base addresses of the ranks'
  symmetric buffers (entry `p`: rank `p`'s buffer, as this rank addresses it);
- `pad_ptrs`: the same for the ranks' signal pads, int64 slots;
- `errors`: this rank's fault record (int64: waits that gave up, and the
  first one's slot, awaited value and seen value; then indices out of range,
  which the compiler's embedding kernels count).

The protocol is the CUDA C kernels' (docs/gpu/tile-kernels.md): a signal
stores a launch's epoch into a peer's slot with a release at system scope
after the block's barrier; a wait polls its own slot until it holds at least
the epoch (acquire, system scope), so pads are never reset. Slots, epochs and
their meaning are the caller's; these functions only move bytes and flags.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def peer_ptr(buffer_ptrs, peer, offset, dtype: tl.constexpr):
    """The address, on rank `peer`, of element `offset` (a scalar or a
    block of offsets, in elements of `dtype`) of the symmetric buffer."""
    base = tl.load(buffer_ptrs + peer).to(tl.pointer_type(dtype))  # pyright: ignore[reportArgumentType]
    return base + offset


@triton.jit
def put(buffer_ptrs, peer, offsets, values, mask=None):
    """Store the block `values` at element `offsets` of rank `peer`'s
    symmetric buffer (typed as `values`); `mask` as `tl.store`'s. A plain
    store: the peer may read it once a `signal` after it has arrived."""
    tl.store(peer_ptr(buffer_ptrs, peer, offsets, values.dtype), values, mask=mask)


@triton.jit
def signal(pad_ptrs, peer, slot, value):
    """Publish this block's stores: barrier, then store `value` into slot
    `slot` of rank `peer`'s signal pad (release, system scope). Everything
    the block wrote before it, anywhere, is visible to whoever acquires the
    slot's new value."""
    tl.debug_barrier()
    pad = tl.load(pad_ptrs + peer).to(tl.pointer_type(tl.int64))
    tl.atomic_xchg(pad + slot, tl.cast(value, tl.int64), sem="release", scope="sys")


@triton.jit
def wait(pad_ptrs, rank, slot, value, errors, max_spins):
    """Poll slot `slot` of this rank's (`rank`) signal pad until it holds at
    least `value` (acquire, system scope), then barrier, so the whole block
    may read what the signaller published. The watchdog: after `max_spins`
    polls it gives up, records the first such wait in `errors` and returns
    False (the kernel goes on with wrong values instead of hanging; the host's
    `check_waits` raises); once one has given up, the rank's later waits give
    up at once. True when the slot arrived."""
    pad = tl.load(pad_ptrs + rank).to(tl.pointer_type(tl.int64))
    target = tl.cast(value, tl.int64)
    seen = tl.atomic_add(pad + slot, 0, sem="acquire", scope="sys")
    # Once a wait of this rank has given up, the others do not spin: the
    # launch is wrong already, and N waits must not take N timeouts.
    spins = tl.where(tl.load(errors) == 0, 1, max_spins)
    while (seen < target) & (spins < max_spins):
        seen = tl.atomic_add(pad + slot, 0, sem="acquire", scope="sys")
        spins += 1
    arrived = seen >= target
    if not arrived:
        first = tl.atomic_add(errors, 1)
        if first == 0:
            tl.store(errors + 1, tl.cast(slot, tl.int64))
            tl.store(errors + 2, target)
            tl.store(errors + 3, seen)
    tl.debug_barrier()
    return arrived
