// DEFINE: %{examples} = %S/../../../../examples
// RUN: coconet-opt %{examples}/gemv_allreduce.mlir -p 'coco-optimize,convert-coco-to-gpu{world=2}' -t triton | filecheck %s
// The GEMV + all_reduce tile kernel from its plan's record: partials for the
// owners r+1, ..., r at row r of the owner's partials, this rank's tiles
// reduced in rank order into every rank's gather, each tile copied once
// DONE; then the bias as a map kernel over blocks of 1024.

// CHECK-LABEL: def gemv_allreduce_proj_fused_0(
// CHECK:       partial_slots = slots + 2  # PARTIAL + source * 2 + tile
// CHECK-NEXT:  done_slots = slots + 6  # DONE + tile
// CHECK:       owner = (rank + pid // 1 + 1) % 2
// CHECK-NEXT:  c = owner + (pid % 1) * 2
// CHECK:       into = rank * 256 + at
// CHECK:       cl.put(buffer_ptrs, owner, partials_offset + into, part, mask=mask)
// CHECK-NEXT:  cl.signal(pad_ptrs, owner, partial_slots + rank * 2 + c, epoch)
// CHECK:       total += tl.load(partials + source * 256 + at, mask=mask).to(tl.float32)
// CHECK:       peer = (rank + k) % 2
// CHECK-NEXT:  cl.put(buffer_ptrs, peer, gather_offset + at, value, mask=mask)
// CHECK:       cl.wait(pad_ptrs, rank, done_slots + c, epoch, errors, max_spins)
// CHECK-LABEL: def gemv_allreduce_out_0(n, sum, bias, result0, BLOCK: tl.constexpr):
// CHECK:       i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
// CHECK-NEXT:  inside = i < n
// CHECK:       tl.store(result0 + i, v{{[0-9]+}}, mask=inside)
// CHECK-LABEL: def coco_gemv_allreduce(world: ct.SymmetricWorld, x, w, bias, result0) -> None:
// CHECK:       sum = torch.empty((1, 1, 256), dtype=torch.float32, device=world.buffer.device)
// CHECK:       gemv_allreduce_proj_fused_0[(5,)](
// CHECK:       gemv_allreduce_out_0[(triton.cdiv(256, 1024),)](
// CHECK:       del sum
