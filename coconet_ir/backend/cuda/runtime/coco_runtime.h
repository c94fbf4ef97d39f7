// coco_runtime.h — what the CUDA C printed by coconet-ir may use (docs/gpu/cuda.md).
//
// Included first by every emitted .cu. Under nvcc (__CUDACC__) it includes the
// CUDA runtime, fp16/bf16, NCCL, cuBLAS and libcu++'s <cuda/atomic>; under any
// other C++20 compiler it includes coco_emu_api.h, the declarations of the CPU
// emulation that runs the ranks of a world as threads of one process
// (docs/gpu/emulation.md). The names below are the same in both modes.
//
// The runtime headers, each including what it uses (an arrow: "includes"):
//
//   coco_emu_api.h      the CUDA language, CUDA/NCCL/cuBLAS declarations (g++ only)
//      ^         ^
//      |     coco_emu.h           the CPU emulation itself (g++ only)
//      |         ^
//   coco_runtime.h  |   the context, the helpers, the macros (this file)
//      ^   ^        |
//      |   +--- coco_emu_harness.h   world creation in the emulation (g++ only)
//      |
//   coco_gpu_harness.h   world creation on real GPUs (nvcc only)
//      ^
//   coco_gpu_bench.h     the standalone benchmark main (nvcc only)
//
//   coco_tile_mma.h      a bf16 GEMM tile on the tensor cores (nvcc only; on
//                        its own: the tile kernels' building block to come)
//
// A harness is added by the build that drives the program, not by this file:
// the emulation build (coconet_ir.backend.emu.build) links coco_emu_harness.h
// and the emulator it includes compiled once into an object file and
// force-includes this file (`-include`, precompiled), nvcc_command(harness=True) (coconet_ir.backend.cuda.toolchain)
// force-includes coco_gpu_harness.h, and a file printed with
// `-t 'cuda{main=true}'` includes coco_gpu_bench.h under nvcc. What is forced
// comes before the program's own text, so the knobs below
// (COCO_BLOCKS_PER_SM, COCO_EMU_MAX_BLOCKS) are set with -D, not #define.
#pragma once

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __CUDACC__
#include <cuda/atomic>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <nccl.h>
#else
#include "coco_emu_api.h"
#endif

#define COCO_MAX_STREAMS 4
#define COCO_MAX_EVENTS 64
#define COCO_MAX_RANKS 16
#define COCO_ERROR_TEXT 512
#ifndef COCO_BLOCKS_PER_SM
#define COCO_BLOCKS_PER_SM 4
#endif

// ---------------------------------------------------------------------------
// The context of one rank, and the status an entry returns
// ---------------------------------------------------------------------------

enum coco_status_code {
  COCO_OK = 0,
  COCO_ERR_CUDA = 1,
  COCO_ERR_NCCL = 2,
  COCO_ERR_CUBLAS = 3,
};
typedef int coco_status;

struct coco_context {
  int rank;        // this rank's index within its stage
  int world;       // ranks per stage
  int stage;       // this rank's stage
  int num_stages;  // stages of the pipeline (1 for plain SPMD)
  ncclComm_t comm;           // the stage's communicator (`world` ranks)
  ncclComm_t pipeline_comm;  // every rank of every stage: stage s rank r is s*world+r
  // Several nodes (docs/gpu/device.md, "Several nodes"): the ranks of this
  // rank's node, and the ranks of every node with this rank's index in its
  // node (rank = node * ranks_per_node + index). NULL on one node.
  ncclComm_t node_comm;
  ncclComm_t cross_comm;
  int ranks_per_node;  // world when one node holds the stage
  cublasHandle_t cublas;
  cudaStream_t streams[COCO_MAX_STREAMS];
  cudaEvent_t events[COCO_MAX_EVENTS];  // created with the context, for cross-stream joins
  char *symmetric[COCO_MAX_RANKS];  // each rank's symmetric workspace (this stage)
  size_t symmetric_bytes;           // per rank
  uint64_t *signals[COCO_MAX_RANKS];  // each rank's signal pad (this stage)
  size_t signal_slots;                // per rank
  uint64_t epoch;                     // last value coco::next_epoch returned
  int sm_count;                       // multiprocessors (0: ask the device)
  char error[COCO_ERROR_TEXT];        // what the last failed call was
};

// Passed to fused kernels by value: everything a kernel needs to reach its peers.
struct coco_peers {
  int rank;
  int world;
  char *base[COCO_MAX_RANKS];
  uint64_t *signals[COCO_MAX_RANKS];
};

extern "C" __attribute__((weak)) const char *coco_last_error(const coco_context *ctx) {
  return ctx->error;
}

namespace coco {

// ---------------------------------------------------------------------------
// Host helpers
// ---------------------------------------------------------------------------

// printf into `out` (`size` bytes, always terminated): a message longer than
// its buffer is cut. Every message of the runtime and the GPU harness and
// benchmark goes through here rather than snprintf, whose truncation a host
// compiler may diagnose (g++ with _FORTIFY_SOURCE: -Wformat-truncation), so that
// nvcc's -Werror does not depend on the host compiler's version.
__attribute__((format(printf, 3, 4))) inline void format(char *out, size_t size,
                                                          const char *spec, ...) {
  va_list args;
  va_start(args, spec);
  vsnprintf(out, size, spec, args);
  va_end(args);
}

inline coco_status fail(coco_context *ctx, coco_status status, const char *expr,
                        const char *what, const char *file, int line) {
  format(ctx->error, sizeof ctx->error, "%s:%d: %s failed: %s", file, line, expr,
         what ? what : "unknown error");
  return status;
}

inline coco_peers peers_of(const coco_context *ctx) {
  coco_peers peers;
  peers.rank = ctx->rank;
  peers.world = ctx->world;
  for (int p = 0; p < COCO_MAX_RANKS; ++p) {
    peers.base[p] = p < ctx->world ? ctx->symmetric[p] : nullptr;
    peers.signals[p] = p < ctx->world ? ctx->signals[p] : nullptr;
  }
  return peers;
}

// This rank's view of the symmetric workspace at byte `offset`.
template <class T> inline T *symmetric_buffer(coco_context *ctx, size_t offset) {
  return reinterpret_cast<T *>(ctx->symmetric[ctx->rank] + offset);
}

// The next value of the rank's monotonic epoch counter: a launch that signals
// with it and waits for `slot >= epoch` never needs the pad reset.
inline uint64_t next_epoch(coco_context *ctx) { return ++ctx->epoch; }

// Store `bytes` of this rank's `source` into rank (rank + to) mod world's
// copy of the symmetric buffer `target` points into: on a GPU a copy-engine
// copy over the peer's mapped memory (peer access is enabled between the
// GPUs of a stage), in the emulation a stream task counted as bytes sent to
// that rank (docs/gpu/overlap.md, "Per-peer overlap").
template <class T>
inline cudaError_t peer_copy(coco_context *ctx, T *target, const T *source, int to,
                             size_t bytes, cudaStream_t stream) {
  const int p = ((ctx->rank + to) % ctx->world + ctx->world) % ctx->world;
  char *dst = ctx->symmetric[p] + (reinterpret_cast<char *>(target) - ctx->symmetric[ctx->rank]);
#ifdef __CUDACC__
  return cudaMemcpyAsync(dst, source, bytes, cudaMemcpyDefault, stream);
#else
  coco_emu::peer_copy(dst, source, bytes, stream, ctx->stage * ctx->world + p);
  return cudaSuccess;
#endif
}

// Blocks of a grid-stride launch over `n` items: enough to cover them, capped
// to a few per SM on a GPU (COCO_EMU_MAX_BLOCKS in the emulation). At least 1.
inline int grid_blocks(coco_context *ctx, long long n, int threads) {
  long long need = threads > 0 ? (n + threads - 1) / threads : 1;
#ifdef __CUDACC__
  if (ctx->sm_count <= 0) {
    int device = 0;
    int sms = 0;
    if (cudaGetDevice(&device) == cudaSuccess &&
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) ==
            cudaSuccess && sms > 0) {
      ctx->sm_count = sms;
    } else {
      ctx->sm_count = 1;
    }
  }
  long long cap = (long long)ctx->sm_count * COCO_BLOCKS_PER_SM;
#else
  (void)ctx;
  long long cap = COCO_EMU_MAX_BLOCKS;
#endif
  if (need > cap) need = cap;
  return need < 1 ? 1 : (int)need;
}

// Blocks of a cooperative launch of `kernel` over `n` items: grid_blocks,
// capped to the blocks of `kernel` that are resident on the device at once
// (its occupancy at `threads` threads and no dynamic shared memory), so a
// kernel whose blocks wait for each other cannot deadlock. In the emulation
// every block is resident (its threads are OS threads).
template <class Kernel>
inline int resident_blocks(coco_context *ctx, Kernel kernel, long long n, int threads) {
  int blocks = grid_blocks(ctx, n, threads);
#ifdef __CUDACC__
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0) ==
          cudaSuccess &&
      per_sm > 0) {
    long long cap = (long long)per_sm * ctx->sm_count;
    if (blocks > cap) blocks = (int)cap;
  }
#else
  (void)kernel;
#endif
  return blocks;
}

// A kernel's failed run-time check (`cf.assert`: an embedding index out of
// range): on a GPU the message through the device printf, then a trap, as
// CUDA's assert does (the launch fails, the entry's next CUDA call returns
// COCO_ERR_CUDA); in the emulation the message on stderr, then abort().
#ifdef __CUDACC__
#define COCO_DEVICE_FAIL(message) \
  do {                            \
    printf("%s\n", message);      \
    __trap();                     \
  } while (0)
#else
#define COCO_DEVICE_FAIL(message)           \
  do {                                      \
    fprintf(stderr, "%s\n", message);       \
    abort();                                \
  } while (0)
#endif

// ---------------------------------------------------------------------------
// Peers and signals (kernels)
// ---------------------------------------------------------------------------

// The address on rank `p` of the symmetric buffer `ptr` points into.
template <class T>
__host__ __device__ __forceinline__ T *peer(const coco_peers &peers, T *ptr, int p) {
  const char *own = peers.base[peers.rank];
  return reinterpret_cast<T *>(peers.base[p] + ((const char *)ptr - own));
}

__host__ __device__ __forceinline__ uint64_t *signal_slot(const coco_peers &peers, int p,
                                                          long long slot) {
  return peers.signals[p] + slot;
}

__host__ __device__ __forceinline__ uint64_t *own_slot(const coco_peers &peers,
                                                       long long slot) {
  return peers.signals[peers.rank] + slot;
}

// Make this thread's (and, after a barrier, its block's) writes visible
// system-wide, then store `value` into `slot` (release, system scope).
__device__ __forceinline__ void signal(uint64_t *slot, uint64_t value) {
#ifdef __CUDACC__
  __threadfence_system();
#else
  // The release store orders what this thread (and, through the block's
  // barrier, its block) wrote before it. Not __threadfence_system(): under
  // ThreadSanitizer the emulation models that as an RMW on one process-wide
  // atomic, which would order every signalling thread of every rank and hide
  // races between ranks (a fused kernel without its closing sync).
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  coco_emu::note_progress();
#endif
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> ref(*slot);
  ref.store(value, cuda::std::memory_order_release);
}

#ifdef __CUDACC__
// The device's watchdog (docs/gpu/running.md, "Faults"): a signal wait that
// spins longer than COCO_WAIT_TIMEOUT_NS nanoseconds (the global timer;
// default 20 s) gives up: it records the first such wait here and returns,
// so the kernel ends (with wrong values) instead of hanging the GPU, and the
// host reports it (coco_gpu_check_waits, which coco_gpu_synchronize calls).
#ifndef COCO_WAIT_TIMEOUT_NS
#define COCO_WAIT_TIMEOUT_NS 20000000000ULL
#endif
struct wait_failure {
  unsigned long long waits;  // how many waits gave up
  unsigned long long slot;   // the first one's: the address it polled,
  unsigned long long value;  // the value it waited for,
  unsigned long long seen;   // what the slot held,
  unsigned long long block;  // its block (x)
};
__device__ wait_failure wait_failed;

__device__ __forceinline__ unsigned long long global_nanoseconds() {
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}
#endif

// Poll `slot` until it holds at least `value` (acquire, system scope). The
// emulation's watchdog ends a wait that sees no progress anywhere (no signal,
// no block barrier passed) for COCO_EMU_TIMEOUT seconds; the device's gives
// up after COCO_WAIT_TIMEOUT_NS (above).
__device__ __forceinline__ void wait_signal(const uint64_t *slot, uint64_t value) {
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> ref(*const_cast<uint64_t *>(slot));
#ifdef __CUDACC__
  unsigned long long start = 0;
  uint64_t seen;
  for (unsigned spins = 1; (seen = ref.load(cuda::std::memory_order_acquire)) < value; ++spins) {
    if ((spins & 4095) != 0) continue;
    const unsigned long long now = global_nanoseconds();
    if (start == 0) {
      start = now;
    } else if (now - start > COCO_WAIT_TIMEOUT_NS) {
      if (atomicAdd(&wait_failed.waits, 1ULL) == 0) {
        wait_failed.slot = (unsigned long long)slot;
        wait_failed.value = value;
        wait_failed.seen = seen;
        wait_failed.block = blockIdx.x;
      }
      return;
    }
  }
#else
  coco_emu::poller poll(slot, value);
  uint64_t seen;
  while ((seen = ref.load(cuda::std::memory_order_acquire)) < value) poll.pause(seen);
#endif
}

// Statistics: a kernel that stores `bytes` into rank `p`'s memory says so
// (the emulation counts it as traffic from this rank to `p`; no-op on a GPU).
__device__ __forceinline__ void count_peer_bytes(const coco_peers &peers, int p,
                                                 unsigned long long bytes) {
#ifdef __CUDACC__
  (void)peers;
  (void)p;
  (void)bytes;
#else
  coco_emu::count_peer_bytes(peers.rank, p, bytes);
#endif
}

// Statistics: this block has computed one tile of a fused
// computation-collective operator (the emulation stamps it on the launch's
// timeline, beside the peer stores; no-op on a GPU).
__device__ __forceinline__ void tile_computed() {
#ifndef __CUDACC__
  coco_emu::tile_computed();
#endif
}

// ---------------------------------------------------------------------------
// Vectors (MLIR's vector<W x T>): W elements moved by one access of W *
// sizeof(T) bytes (16 in the fused kernels: ld/st.global.v4), lanes read and
// set one at a time. `p` must be aligned to the vector's size.
// ---------------------------------------------------------------------------

template <class T, int W> struct alignas(sizeof(T) * W) vec {
  T lane[W];
};

template <class T, int W>
__host__ __device__ __forceinline__ vec<T, W> load_vec(const T *p) {
#ifdef __CUDACC__
  return *reinterpret_cast<const vec<T, W> *>(p);
#else
  vec<T, W> v;  // memcpy: no aliasing of T through vec<T, W> on the CPU
  memcpy(&v, p, sizeof v);
  return v;
#endif
}

template <class T, int W>
__host__ __device__ __forceinline__ void store_vec(T *p, const vec<T, W> &v) {
#ifdef __CUDACC__
  if constexpr (sizeof(vec<T, W>) == 16) {  // one st.global.v4 (a struct of bf16
    *reinterpret_cast<uint4 *>(p) = *reinterpret_cast<const uint4 *>(&v);  // splits)
  } else {
    *reinterpret_cast<vec<T, W> *>(p) = v;
  }
#else
  memcpy(p, &v, sizeof v);
#endif
}

template <class T, int W> __host__ __device__ __forceinline__ vec<T, W> splat(T x) {
  vec<T, W> v;
  for (int i = 0; i < W; ++i) v.lane[i] = x;
  return v;
}

template <class T, int W>
__host__ __device__ __forceinline__ vec<T, W> with_lane(vec<T, W> v, T x, int i) {
  v.lane[i] = x;
  return v;
}

// ---------------------------------------------------------------------------
// NaN-propagating max and min (MLIR's arith.maximumf/minimumf; fmax and fmin
// would drop the NaN)
// ---------------------------------------------------------------------------

template <class T>
__host__ __device__ __forceinline__ T maximum(T a, T b) {
  return a != a ? a : (b != b ? b : (a > b ? a : b));
}

template <class T>
__host__ __device__ __forceinline__ T minimum(T a, T b) {
  return a != a ? a : (b != b ? b : (a < b ? a : b));
}

// ---------------------------------------------------------------------------
// Philox4x32-10 and the dropout uniform (docs/interpreter.md, "Dropout")
// ---------------------------------------------------------------------------

__host__ __device__ __forceinline__ void philox4x32_10(const uint32_t counter[4],
                                                       const uint32_t key[2],
                                                       uint32_t out[4]) {
  uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    if (round) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    uint64_t p0 = (uint64_t)0xD2511F53u * c0;
    uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

// u(seed, i) = (out[0] >> 8) * 2^-24 with counter (i mod 2^32, i div 2^32, 0, 0)
// and key (seed mod 2^32, seed div 2^32); exact in float.
__host__ __device__ __forceinline__ float philox_uniform(uint64_t seed, uint64_t index) {
  uint32_t counter[4] = {(uint32_t)index, (uint32_t)(index >> 32), 0u, 0u};
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  uint32_t out[4];
  philox4x32_10(counter, key, out);
  return (float)(out[0] >> 8) * 5.9604644775390625e-08f;
}

// ---------------------------------------------------------------------------
// Element types
// ---------------------------------------------------------------------------

template <class T> struct dtype_of;
#define COCO_DTYPE(T, NCCL, CUDA)                       \
  template <> struct dtype_of<T> {                      \
    static constexpr ncclDataType_t nccl = NCCL;        \
    static constexpr cudaDataType_t cuda = CUDA;        \
  };
COCO_DTYPE(float, ncclFloat, CUDA_R_32F)
COCO_DTYPE(double, ncclDouble, CUDA_R_64F)
COCO_DTYPE(__half, ncclHalf, CUDA_R_16F)
COCO_DTYPE(__nv_bfloat16, ncclBfloat16, CUDA_R_16BF)
COCO_DTYPE(int32_t, ncclInt32, CUDA_R_32I)
COCO_DTYPE(bool, ncclUint8, CUDA_R_8U)
#undef COCO_DTYPE

template <class T> constexpr ncclDataType_t nccl_type() { return dtype_of<T>::nccl; }
template <class T> constexpr cudaDataType_t cuda_type() { return dtype_of<T>::cuda; }

}  // namespace coco

// ---------------------------------------------------------------------------
// Launches, shared memory, error checks
// ---------------------------------------------------------------------------

// A kernel launch; a bad launch returns COCO_ERR_CUDA from the entry (whose
// context is `ctx`), recording "COCO_LAUNCH(kernel) failed: reason".
#ifdef __CUDACC__
#define COCO_LAUNCH_RAW(kernel, grid, block, shared_bytes, stream, ...) \
  kernel<<<(grid), (block), (shared_bytes), (stream)>>>(__VA_ARGS__)
#else
#define COCO_LAUNCH_RAW(kernel, grid, block, shared_bytes, stream, ...)          \
  coco_emu::launch(#kernel, kernel, (grid), (block), (shared_bytes), (stream) \
                   __VA_OPT__(, ) __VA_ARGS__)
#endif
// A cooperative launch (every block resident at once; the grid must come from
// coco::resident_blocks). On a GPU, cudaLaunchKernelEx with
// cudaLaunchAttributeCooperative; in the emulation every launch is one.
#ifdef __CUDACC__
namespace coco {
template <class... Params, class... Args>
inline cudaError_t launch_cooperative(void (*kernel)(Params...), dim3 grid, dim3 block,
                                      size_t shared_bytes, cudaStream_t stream,
                                      Args &&...args) {
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeCooperative;
  attribute[0].val.cooperative = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, static_cast<Args &&>(args)...);
}
}  // namespace coco
#define COCO_LAUNCH_COOPERATIVE(kernel, grid, block, shared_bytes, stream, ...) \
  COCO_CHECK_CUDA(coco::launch_cooperative(kernel, grid, block, shared_bytes,  \
                                           stream __VA_OPT__(, ) __VA_ARGS__))
#else
#define COCO_LAUNCH_COOPERATIVE(kernel, grid, block, shared_bytes, stream, ...) \
  COCO_LAUNCH(kernel, grid, block, shared_bytes, stream, __VA_ARGS__)
#endif
#define COCO_LAUNCH(kernel, grid, block, shared_bytes, stream, ...)                              \
  do {                                                                                           \
    COCO_LAUNCH_RAW(kernel, grid, block, shared_bytes, stream, __VA_ARGS__);                     \
    cudaError_t coco_launch_err_ = cudaGetLastError();                                           \
    if (coco_launch_err_ != cudaSuccess)                                                         \
      return coco::fail(ctx, COCO_ERR_CUDA, "COCO_LAUNCH(" #kernel ")",                          \
                        cudaGetErrorString(coco_launch_err_), __FILE__, __LINE__);               \
  } while (0)

#ifdef __CUDACC__
#define COCO_SHARED(T, name, count) __shared__ T name[count]
#define COCO_SHARED_DYNAMIC(T, name)                                  \
  extern __shared__ __align__(16) unsigned char coco_dynamic_shared_[]; \
  T *name = reinterpret_cast<T *>(coco_dynamic_shared_)
#else
#define COCO_SHARED(T, name, count)                                                 \
  static char coco_shared_tag_##name;                                              \
  T *name = static_cast<T *>(coco_emu::block_shared(&coco_shared_tag_##name,       \
                                                    sizeof(T) * (size_t)(count), \
                                                    alignof(T)))
#define COCO_SHARED_DYNAMIC(T, name) T *name = reinterpret_cast<T *>(coco_emu::dynamic_shared())
#endif

// Evaluate `expr`, which returns a status of type `T`; unless the status is
// `ok`, return `failure`, an expression of the status `coco_err_`. Behind the
// checks below and the GPU harness's.
#define COCO_RETURN_UNLESS(T, ok, expr, failure) \
  do {                                           \
    T coco_err_ = (expr);                        \
    if (coco_err_ != (ok)) return failure;       \
  } while (0)

// Return the failure from the entry (whose context is `ctx`), recording it.
#define COCO_CHECK_CUDA(expr)                                                  \
  COCO_RETURN_UNLESS(cudaError_t, cudaSuccess, expr,                           \
                     coco::fail(ctx, COCO_ERR_CUDA, #expr,                     \
                                cudaGetErrorString(coco_err_), __FILE__, __LINE__))
// A context without a communicator (ranks sharing a GPU: coco_gpu_create)
// fails its NCCL calls with COCO_NO_NCCL instead of handing NCCL a null one.
#define COCO_CHECK_NCCL(expr)                                                  \
  do {                                                                         \
    if (!ctx->comm)                                                            \
      return coco::fail(ctx, COCO_ERR_NCCL, #expr, COCO_NO_NCCL, __FILE__, __LINE__); \
    COCO_RETURN_UNLESS(ncclResult_t, ncclSuccess, expr,                        \
                       coco::fail(ctx, COCO_ERR_NCCL, #expr,                   \
                                  ncclGetErrorString(coco_err_), __FILE__, __LINE__)); \
  } while (0)
#define COCO_NO_NCCL                                                           \
  "no NCCL communicator: ranks of this world share a GPU, and NCCL runs one "  \
  "rank per GPU; on a shared GPU only programs whose collectives are all "     \
  "coconet-ir's own kernels run (fused collectives, tile operators, per-peer " \
  "copies)"
#define COCO_CHECK_CUBLAS(expr)                                                \
  COCO_RETURN_UNLESS(cublasStatus_t, CUBLAS_STATUS_SUCCESS, expr,              \
                     coco::fail(ctx, COCO_ERR_CUBLAS, #expr,                   \
                                cublasGetStatusString(coco_err_), __FILE__, __LINE__))
