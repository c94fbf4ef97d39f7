// RUN: coconet-opt %s -t cuda | filecheck %s
// Streams and events: work on stream 1 waits for stream 0's event and stream 0
// joins stream 1 before the entry returns; buffers allocated, copied and freed
// stream-ordered on stream 0. `done` is recorded into the slot `ready` had:
// its only wait was issued before (a wait takes the record made before it).

builtin.module {
  func.func @overlap(%x: memref<64xf32>, %y: memref<64xf32>) {
    %tmp = memref.alloc() : memref<64xf32>
    "memref.copy"(%x, %tmp) : (memref<64xf32>, memref<64xf32>) -> ()
    %ready = coco_gpu.record_event
    coco_gpu.wait_event %ready {coco_gpu.stream = 1 : i64}
    coco_gpu.nccl_all_reduce %tmp, %y reduction = sum {coco_gpu.stream = 1 : i64} : memref<64xf32>, memref<64xf32>
    %done = coco_gpu.record_event {coco_gpu.stream = 1 : i64}
    coco_gpu.wait_event %done
    memref.dealloc %tmp : memref<64xf32>
    func.return
  }
}

// CHECK-LABEL: extern "C" int coco_overlap(coco_context *ctx, float *x, float *y) {
// CHECK-NEXT:    float *tmp = nullptr;
// CHECK-NEXT:    COCO_CHECK_CUDA(cudaMallocAsync(reinterpret_cast<void **>(&tmp), 256, ctx->streams[0]));
// CHECK-NEXT:    COCO_CHECK_CUDA(cudaMemcpyAsync(tmp, x, 256, cudaMemcpyDeviceToDevice, ctx->streams[0]));
// CHECK-NEXT:    cudaEvent_t ready = ctx->events[0];
// CHECK-NEXT:    COCO_CHECK_CUDA(cudaEventRecord(ready, ctx->streams[0]));
// CHECK-NEXT:    COCO_CHECK_CUDA(cudaStreamWaitEvent(ctx->streams[1], ready, 0));
// CHECK-NEXT:    COCO_CHECK_NCCL(ncclAllReduce(tmp, y, 64, ncclFloat, ncclSum, ctx->comm, ctx->streams[1]));
// CHECK-NEXT:    cudaEvent_t done = ctx->events[0];
// CHECK-NEXT:    COCO_CHECK_CUDA(cudaEventRecord(done, ctx->streams[1]));
// CHECK-NEXT:    COCO_CHECK_CUDA(cudaStreamWaitEvent(ctx->streams[0], done, 0));
// CHECK-NEXT:    COCO_CHECK_CUDA(cudaFreeAsync(tmp, ctx->streams[0]));
// CHECK-NEXT:    return 0;
// CHECK-NEXT:  }
// CHECK:       extern "C" int coco_event_count(void) { return 1; }
