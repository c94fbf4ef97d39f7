// RUN: coconet-opt %s -t cuda | filecheck %s
// A fused collective kernel's machinery: symmetric buffers (the module's
// coco_symmetric_bytes), the peer table passed by value, peer views, signals
// and waits on epochs, this rank's index; host views of buffers (subview,
// collapse_shape, reinterpret_cast) as pointer offsets.

builtin.module attributes {gpu.container_module, coco.world_size = 2 : i64} {
  gpu.module @kernels {
    gpu.func @push(%peers: !coco_gpu.peers, %buf: memref<256xf32>, %src: memref<256xf32>, %rank: index, %epoch: i64) kernel {
      %tid = gpu.thread_id x
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %next = arith.addi %rank, %c1 : index
      %peer = arith.remui %next, %c2 : index
      %remote = coco_gpu.peer_view %peers, %buf, %peer : memref<256xf32>
      %v = memref.load %src[%tid] : memref<256xf32>
      memref.store %v, %remote[%tid] : memref<256xf32>
      gpu.barrier
      %c0 = arith.constant 0 : index
      %first = arith.cmpi eq, %tid, %c0 : index
      scf.if %first {
        coco_gpu.signal %peers, %peer, %c0, %epoch
        coco_gpu.wait_signal %peers, %c0, %epoch
      }
      gpu.barrier
      gpu.return
    }
  }
  func.func @fused(%x: memref<4x64xf32>) {
    %sym = coco_gpu.symmetric_buffer offset = 1024 : memref<256xf32>
    %flat = memref.collapse_shape %x [[0, 1]] : memref<4x64xf32> into memref<256xf32>
    %peers = coco_gpu.peers
    %rank = coco_gpu.rank
    %epoch = coco_gpu.next_epoch
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    gpu.launch_func @kernels::@push blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%peers : !coco_gpu.peers, %sym : memref<256xf32>, %flat : memref<256xf32>, %rank : index, %epoch : i64)
    %half = memref.subview %x[2, 0] [2, 64] [1, 1] : memref<4x64xf32> to memref<2x64xf32, strided<[64, 1], offset: 128>>
    %cast = memref.reinterpret_cast %x to offset: [64], sizes: [64], strides: [1] : memref<4x64xf32> to memref<64xf32, strided<[1], offset: 64>>
    coco_gpu.nccl_all_reduce %half, %half reduction = sum : memref<2x64xf32, strided<[64, 1], offset: 128>>, memref<2x64xf32, strided<[64, 1], offset: 128>>
    coco_gpu.nccl_broadcast %cast, %cast root = 0 : memref<64xf32, strided<[1], offset: 64>>, memref<64xf32, strided<[1], offset: 64>>
    func.return
  }
}

// A symmetric buffer (it reaches coco::peer) is written by peers during the
// kernel: neither const nor __restrict__, so no non-coherent loads of it.
// CHECK-LABEL: extern "C" __global__ void __launch_bounds__(256, 4) push(coco_peers peers, float *buf, const float *__restrict__ src, int64_t rank, int64_t epoch) {
// CHECK-NEXT:    const int64_t tid = (int64_t)threadIdx.x;
// CHECK-NEXT:    const int64_t peer = (int64_t)((uint64_t)(rank + 1) % (uint64_t)2);
// CHECK-NEXT:    coco::peer(peers, buf, peer)[tid] = src[tid];
// CHECK-NEXT:    __syncthreads();
// CHECK-NEXT:    if (tid == 0) {
// CHECK-NEXT:      coco::signal(coco::signal_slot(peers, peer, 0), (uint64_t)epoch);
// CHECK-NEXT:      coco::wait_signal(coco::own_slot(peers, 0), (uint64_t)epoch);
// CHECK-NEXT:    }
// CHECK-NEXT:    __syncthreads();
// CHECK-NEXT:  }
// CHECK:       extern "C" size_t coco_symmetric_bytes(void) { return 2048; }
// CHECK-LABEL: extern "C" int coco_fused(coco_context *ctx, float *x) {
// CHECK-NEXT:    const int64_t epoch = (int64_t)coco::next_epoch(ctx);
// CHECK-NEXT:    COCO_LAUNCH(push, dim3(1u, 1u, 1u), dim3(256u, 1u, 1u), 0, ctx->streams[0], coco::peers_of(ctx), coco::symmetric_buffer<float>(ctx, 1024), x, (int64_t)ctx->rank, epoch);
// CHECK-NEXT:    auto *const half_ = x + 2 * 64;
// CHECK-NEXT:    auto *const cast = x + 64;
// CHECK-NEXT:    COCO_CHECK_NCCL(ncclAllReduce(half_, half_, 128, ncclFloat, ncclSum, ctx->comm, ctx->streams[0]));
// CHECK-NEXT:    COCO_CHECK_NCCL(ncclBroadcast(cast, cast, 64, ncclFloat, 0, ctx->comm, ctx->streams[0]));
