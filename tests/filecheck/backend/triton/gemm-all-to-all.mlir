// DEFINE: %{examples} = %S/../../../../examples
// RUN: coconet-opt %{examples}/moe_gemm_a2a.mlir -p 'coco-optimize,convert-coco-to-gpu{world=2}' -t triton | filecheck %s
// RUN: not coconet-opt %{examples}/sgd.mlir -p 'coco-optimize,convert-coco-to-gpu{world=2}' -t triton 2>&1 | filecheck %s --check-prefix=REFUSED
// RUN: not coconet-opt %{examples}/moe_gemm_a2a.mlir -t triton 2>&1 | filecheck %s --check-prefix=LEVEL
// The triton target prints the GEMM + all_to_all tile kernel from its plan's
// record (coco_gpu.tile_plan): the same tiles, destinations r+1, r+2, ..., r,
// READY then TILE slots; and the host function over a SymmetricWorld.

// CHECK-LABEL: def moe_gemm_a2a_experts_fused_0(
// CHECK:      tile_slots = slots + 2  # TILE + source * 1 + tile
// CHECK:      cl.signal(pad_ptrs, (rank + k) % 2, ready + rank, epoch)
// CHECK:      peer = (rank + pid // 1 + 1) % 2
// CHECK:      d1 = d1 + peer * 4
// CHECK:      acc += tl.dot(ag, b, input_precision=PRECISION)
// CHECK:      cl.wait(pad_ptrs, rank, ready + peer, epoch, errors, max_spins)
// CHECK-NEXT: into = recv_offset + rank * 1024 + at
// CHECK-NEXT: cl.put(buffer_ptrs, peer, into, tile, mask=mask)
// CHECK-NEXT: cl.signal(pad_ptrs, peer, tile_slots + rank * 1 + t, epoch)
// CHECK:      def coco_moe_gemm_a2a(world: ct.SymmetricWorld, tokens, w, result0) -> None:
// CHECK:      epoch = world.next_epoch()
// CHECK-NEXT: recv = world.view(0, (2048,), torch.float32)
// CHECK-NEXT: moe_gemm_a2a_experts_fused_0[(3,)](
// CHECK:      world.check_waits()

// REFUSED: error: 'gpu.func' op -t triton: kernel @sgd_sum_rs_fused_0 has no Triton form yet

// LEVEL: error: -t triton: the module is not at the device level
