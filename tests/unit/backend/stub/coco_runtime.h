// A minimal stand-in for coconet_ir/backend/cuda/runtime/coco_runtime.h, for
// compile tests only: the names docs/gpu.md §2 lets the printed code use, with
// just enough of a body that nvcc type-checks every call. Tests prefer the real
// header when the package ships it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cmath>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cublas_v2.h>
#include <nccl.h>
#include <cuda/atomic>

struct coco_peers {
  int rank;
  int world;
  char *const *symmetric;
  uint64_t *const *signals;
};

struct coco_context {
  int rank;
  int world;
  int stage;
  ncclComm_t comm;
  ncclComm_t pipeline_comm;
  cublasHandle_t cublas;
  cudaStream_t streams[8];
  cudaEvent_t events[64];
  coco_peers peers;
  uint64_t epoch;
};

#define COCO_CHECK_CUDA(expr) do { if ((expr) != cudaSuccess) return 1; } while (0)
#define COCO_CHECK_NCCL(expr) do { if ((expr) != ncclSuccess) return 2; } while (0)
#define COCO_CHECK_CUBLAS(expr) do { if ((expr) != CUBLAS_STATUS_SUCCESS) return 3; } while (0)
#define COCO_LAUNCH(kernel, grid, block, shared, stream, ...) \
  do { kernel<<<(grid), (block), (shared), (stream)>>>(__VA_ARGS__); \
       if (cudaGetLastError() != cudaSuccess) return 1; } while (0)
#define COCO_SHARED(T, name, count) __shared__ T name[count]

namespace coco {
inline unsigned grid_blocks(coco_context *, int64_t n, int64_t threads) {
  int64_t b = (n + threads - 1) / threads;
  return (unsigned)(b < 1 ? 1 : (b > 1024 ? 1024 : b));
}
template <typename T> T *symmetric_buffer(coco_context *ctx, size_t offset) {
  return reinterpret_cast<T *>(ctx->peers.symmetric[ctx->rank] + offset);
}
inline coco_peers peers(coco_context *ctx) { return ctx->peers; }
inline uint64_t next_epoch(coco_context *ctx) { return ++ctx->epoch; }
template <typename T> __device__ __forceinline__ T *peer(coco_peers p, T *ptr, int64_t rank) {
  size_t offset = reinterpret_cast<char *>(const_cast<std::remove_const_t<T> *>(ptr)) - p.symmetric[p.rank];
  return reinterpret_cast<T *>(p.symmetric[rank] + offset);
}
__device__ __forceinline__ uint64_t *signal_slot(coco_peers p, int64_t rank, int64_t slot) {
  return p.signals[rank] + slot;
}
__device__ __forceinline__ uint64_t *own_slot(coco_peers p, int64_t slot) {
  return p.signals[p.rank] + slot;
}
__device__ __forceinline__ void signal(uint64_t *slot, uint64_t value) {
  __threadfence_system();
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*slot).store(value, cuda::memory_order_release);
}
__device__ __forceinline__ void wait_signal(uint64_t *slot, uint64_t value) {
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> ref(*slot);
  while (ref.load(cuda::memory_order_acquire) < value) {}
}
}  // namespace coco
