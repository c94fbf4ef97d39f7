// coco_emu_api.h — what a program built for the CPU emulation sees of it
// (docs/gpu/emulation.md): the CUDA language (qualifiers, dim3, vector types,
// thread indices, fences, atomics, __half and __nv_bfloat16), the types of the
// CUDA runtime, NCCL and cuBLAS, and the declarations of their functions and
// of the emulator's few entry points that coco_runtime.h's kernels call.
//
// The emulator itself (coco_emu.h, which defines all of these) is compiled
// once per flag set into the harness object that every emulated library links
// (coconet_ir.backend.emu.build.harness_object); a program's own build
// compiles its kernels and a small launch template per kernel, not the
// emulator again.
//
// `cuda::atomic_ref` and `cuda::thread_scope_system` are a shim over the
// compiler's `__atomic` builtins here (libcu++ is not needed to build the
// emulation). Not over std::atomic_ref: under C++20, <atomic> (with its
// wait/notify machinery) and <chrono> cost every emulated build about 0.25 s
// of template instantiation, more than most programs' own code.
#pragma once

#ifdef __CUDACC__
#error "coco_emu_api.h is the CPU emulation; nvcc uses the real CUDA headers"
#endif

#include <math.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>

// ===========================================================================
// CUDA language
// ===========================================================================

#define __global__
#define __launch_bounds__(...)
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
// A `__shared__` variable would be per thread here: use COCO_SHARED.
#define __shared__ [[deprecated("the emulation has no __shared__ storage: use COCO_SHARED")]]

#ifndef COCO_EMU_MAX_BLOCKS
#define COCO_EMU_MAX_BLOCKS 2
#endif

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1)
      : x(x_), y(y_), z(z_) {}
};
typedef dim3 uint3;

// CUDA's vector types (their alignment is what makes vector loads legal).
struct __attribute__((aligned(8))) float2 { float x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(8))) int2 { int x, y; };
struct __attribute__((aligned(16))) int4 { int x, y, z, w; };
struct __attribute__((aligned(8))) uint2 { unsigned int x, y; };
struct __attribute__((aligned(16))) uint4 { unsigned int x, y, z, w; };
struct __attribute__((aligned(16))) double2 { double x, y; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned int x, unsigned int y) { return {x, y}; }
inline uint4 make_uint4(unsigned int x, unsigned int y, unsigned int z, unsigned int w) {
  return {x, y, z, w};
}

inline thread_local uint3 threadIdx{0, 0, 0};
inline thread_local uint3 blockIdx{0, 0, 0};
inline thread_local dim3 blockDim{1, 1, 1};
inline thread_local dim3 gridDim{1, 1, 1};

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer ignores fences: model one as an RMW on a shared atomic,
// which orders (for tsan) what every fenced thread did before and after.
inline unsigned coco_emu_fence_ = 0;
inline void __threadfence() { __atomic_fetch_add(&coco_emu_fence_, 1u, __ATOMIC_ACQ_REL); }
#else
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
#endif
inline void __threadfence_block() { __threadfence(); }
inline void __threadfence_system() { __threadfence(); }

inline unsigned int __umulhi(unsigned int a, unsigned int b) {
  return (unsigned int)(((unsigned long long)a * b) >> 32);
}
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}

inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
inline long long __mul64hi(long long a, long long b) {
  return (long long)(((__int128)a * b) >> 64);
}

template <class To, class From> inline To coco_emu_bit_cast(From from) {
  static_assert(sizeof(To) == sizeof(From), "same size");
  To to;
  std::memcpy(&to, &from, sizeof to);
  return to;
}
inline float __int_as_float(int x) { return coco_emu_bit_cast<float>(x); }
inline int __float_as_int(float x) { return coco_emu_bit_cast<int>(x); }
inline float __uint_as_float(unsigned int x) { return coco_emu_bit_cast<float>(x); }
inline unsigned int __float_as_uint(float x) { return coco_emu_bit_cast<unsigned int>(x); }
inline double __longlong_as_double(long long x) { return coco_emu_bit_cast<double>(x); }
inline long long __double_as_longlong(double x) { return coco_emu_bit_cast<long long>(x); }

// `*address` combined with `value` by `op`, atomically, as one
// compare-and-swap loop (what std::atomic_ref does for floats); the old value.
template <class T, class Op>
inline T coco_emu_atomic_update(T *address, T value, int order, Op op) {
  T old, desired;
  __atomic_load(address, &old, __ATOMIC_RELAXED);
  do {
    desired = op(old, value);
  } while (!__atomic_compare_exchange(address, &old, &desired, true, order, __ATOMIC_RELAXED));
  return old;
}

template <class T> inline T coco_emu_atomic_add(T *address, T value) {
  // CUDA's atomicAdd is relaxed; seq_cst here lets ThreadSanitizer see the
  // "__threadfence(), then atomicAdd a counter" pattern as synchronization.
  if constexpr (std::is_integral_v<T>) {
    return __atomic_fetch_add(address, value, __ATOMIC_SEQ_CST);
  } else {
    return coco_emu_atomic_update(address, value, __ATOMIC_SEQ_CST,
                                  [](T a, T b) { return a + b; });
  }
}
inline float atomicAdd(float *a, float v) { return coco_emu_atomic_add(a, v); }
inline double atomicAdd(double *a, double v) { return coco_emu_atomic_add(a, v); }
inline int atomicAdd(int *a, int v) { return coco_emu_atomic_add(a, v); }
inline unsigned int atomicAdd(unsigned int *a, unsigned int v) { return coco_emu_atomic_add(a, v); }
inline unsigned long long atomicAdd(unsigned long long *a, unsigned long long v) {
  return coco_emu_atomic_add(a, v);
}

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }

// ---------------------------------------------------------------------------
// __half and __nv_bfloat16: storage types, round-to-nearest-even conversions
// ---------------------------------------------------------------------------

namespace coco_emu {

inline uint32_t float_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return x;
}
inline float bits_float(uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

inline uint16_t float_to_half_bits(float f) {
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // inf, nan (quiet, keeping the top payload bits)
    return (uint16_t)(ax > 0x7f800000u ? sign | 0x7e00u | ((ax >> 13) & 0x3ffu)
                                       : sign | 0x7c00u);
  }
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // rounds to inf
  if (ax < 0x38800000u) {                                    // half subnormal or zero
    if (ax <= 0x33000000u) return (uint16_t)sign;            // <= 2^-25: ties to 0
    uint32_t e = ax >> 23;
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;  // 14..24
    uint32_t r = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return (uint16_t)(sign | r);
  }
  uint32_t r = ax - 0x38000000u;  // rebias the exponent
  uint32_t h = r >> 13;
  uint32_t rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return (uint16_t)(sign | h);
}

inline float half_bits_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu;
  uint32_t m = h & 0x3ffu;
  if (e == 0x1fu) return bits_float(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    if (m == 0) return bits_float(sign);
    float v = (float)m * 5.9604644775390625e-08f;  // m * 2^-24
    return sign ? -v : v;
  }
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

inline uint16_t float_to_bfloat16_bits(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

inline float bfloat16_bits_to_float(uint16_t b) { return bits_float((uint32_t)b << 16); }

// A 16-bit float held as its bits (`__x`, as CUDA's types hold them), made
// from float, double and int by `ToBits` (round to nearest even) and read as
// float by `FromBits`: __half and __nv_bfloat16.
template <uint16_t (*ToBits)(float), float (*FromBits)(uint16_t)> struct float16_bits {
  unsigned short __x;
  float16_bits() = default;
  float16_bits(float f) : __x(ToBits(f)) {}
  float16_bits(double f) : __x(ToBits((float)f)) {}
  float16_bits(int i) : __x(ToBits((float)i)) {}
  operator float() const { return FromBits(__x); }
};

}  // namespace coco_emu

struct __half : coco_emu::float16_bits<coco_emu::float_to_half_bits, coco_emu::half_bits_to_float> {
  using float16_bits::float16_bits;
};

struct __nv_bfloat16
    : coco_emu::float16_bits<coco_emu::float_to_bfloat16_bits, coco_emu::bfloat16_bits_to_float> {
  using float16_bits::float16_bits;
};

inline __half __float2half(float f) { return f; }
inline __half __float2half_rn(float f) { return f; }
inline float __half2float(__half h) { return h; }
inline __nv_bfloat16 __float2bfloat16(float f) { return f; }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return f; }
inline float __bfloat162float(__nv_bfloat16 b) { return b; }

// ---------------------------------------------------------------------------
// libcu++'s cuda::atomic_ref, as a shim over the __atomic builtins
// ---------------------------------------------------------------------------

namespace cuda {
enum thread_scope {
  thread_scope_system = 0,
  thread_scope_device = 1,
  thread_scope_block = 2,
  thread_scope_thread = 3,
};
namespace std {
// The builtins' orders, as libstdc++'s std::memory_order numbers them.
enum memory_order : int {
  memory_order_relaxed = __ATOMIC_RELAXED,
  memory_order_consume = __ATOMIC_CONSUME,
  memory_order_acquire = __ATOMIC_ACQUIRE,
  memory_order_release = __ATOMIC_RELEASE,
  memory_order_acq_rel = __ATOMIC_ACQ_REL,
  memory_order_seq_cst = __ATOMIC_SEQ_CST,
};
}  // namespace std
using namespace cuda::std;  // cuda::memory_order_* too, as libcu++ has them

// The operations of libcu++'s atomic_ref on an object of integer, float or
// pointer type (fetch_min/fetch_max as libcu++ has them).
template <class T, thread_scope Scope = thread_scope_system>
class atomic_ref {
 public:
  explicit atomic_ref(T &object) : p(&object) {}
  atomic_ref(const atomic_ref &) = default;

  T load(memory_order order = memory_order_seq_cst) const {
    T value;
    __atomic_load(p, &value, order);
    return value;
  }
  void store(T value, memory_order order = memory_order_seq_cst) const {
    __atomic_store(p, &value, order);
  }
  operator T() const { return load(); }
  T operator=(T value) const {
    store(value);
    return value;
  }
  T exchange(T value, memory_order order = memory_order_seq_cst) const {
    T old;
    __atomic_exchange(p, &value, &old, order);
    return old;
  }
  bool compare_exchange_weak(T &expected, T desired,
                             memory_order order = memory_order_seq_cst) const {
    return __atomic_compare_exchange(p, &expected, &desired, true, order, failure(order));
  }
  bool compare_exchange_strong(T &expected, T desired,
                               memory_order order = memory_order_seq_cst) const {
    return __atomic_compare_exchange(p, &expected, &desired, false, order, failure(order));
  }
  T fetch_add(T value, memory_order order = memory_order_seq_cst) const {
    if constexpr (::std::is_integral_v<T>) return __atomic_fetch_add(p, value, order);
    else return coco_emu_atomic_update(p, value, order, [](T a, T b) { return a + b; });
  }
  T fetch_sub(T value, memory_order order = memory_order_seq_cst) const {
    if constexpr (::std::is_integral_v<T>) return __atomic_fetch_sub(p, value, order);
    else return coco_emu_atomic_update(p, value, order, [](T a, T b) { return a - b; });
  }
  T fetch_and(T value, memory_order order = memory_order_seq_cst) const {
    return __atomic_fetch_and(p, value, order);
  }
  T fetch_or(T value, memory_order order = memory_order_seq_cst) const {
    return __atomic_fetch_or(p, value, order);
  }
  T fetch_xor(T value, memory_order order = memory_order_seq_cst) const {
    return __atomic_fetch_xor(p, value, order);
  }
  T fetch_min(T value, memory_order order = memory_order_seq_cst) const {
    return coco_emu_atomic_update(p, value, order, [](T a, T b) { return b < a ? b : a; });
  }
  T fetch_max(T value, memory_order order = memory_order_seq_cst) const {
    return coco_emu_atomic_update(p, value, order, [](T a, T b) { return a < b ? b : a; });
  }

 private:
  // A failed compare-exchange only loads: no release in its order.
  static int failure(memory_order order) {
    return order == memory_order_acq_rel   ? __ATOMIC_ACQUIRE
           : order == memory_order_release ? __ATOMIC_RELAXED
                                           : int(order);
  }
  T *p;
};
}  // namespace cuda

// ===========================================================================
// CUDA runtime, NCCL and cuBLAS types
// ===========================================================================

typedef enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorLaunchFailure = 719,
  cudaErrorUnknown = 999,
} cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaEventFlags_ { cudaEventDefault = 0, cudaEventBlockingSync = 1, cudaEventDisableTiming = 2 };

typedef enum cudaDataType_t {
  CUDA_R_32F = 0,
  CUDA_R_64F = 1,
  CUDA_R_16F = 2,
  CUDA_R_8I = 3,
  CUDA_R_8U = 8,
  CUDA_R_32I = 10,
  CUDA_R_16BF = 14,
} cudaDataType_t;
typedef cudaDataType_t cudaDataType;

struct CUstream_st;
struct CUevent_st;
struct ncclComm;
struct cublasContext;
typedef CUstream_st *cudaStream_t;
typedef CUevent_st *cudaEvent_t;
typedef ncclComm *ncclComm_t;
typedef cublasContext *cublasHandle_t;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
} ncclResult_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
} ncclDataType_t;

typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;

typedef enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;
typedef enum {
  CUBLAS_COMPUTE_16F = 64,
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_32F_FAST_16F = 74,
  CUBLAS_COMPUTE_32F_FAST_16BF = 75,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
  CUBLAS_COMPUTE_64F = 70,
} cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1, CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99 } cublasGemmAlgo_t;

// ===========================================================================
// The emulator's entry points (defined in coco_emu.h)
// ===========================================================================

struct coco_emu_world;

namespace coco_emu {

// A launch of `grid` x `block` threads on `stream`, each running
// `invoke(body)`; `release(body)` after the last of them (or at once where
// the launch is refused: a bad configuration sets the error that
// cudaGetLastError returns). `launch` below makes `body`.
void launch_body(const char *name, dim3 grid, dim3 block, size_t shared_bytes,
                 cudaStream_t stream, void *body, void (*invoke)(void *),
                 void (*release)(void *));

// COCO_LAUNCH_RAW: `kernel(args...)` in every thread of the launch, on copies
// of the arguments converted to the kernel's parameter types when it is
// launched (as CUDA copies them).
template <class... P, class... A>
void launch(const char *name, void (*kernel)(P...), dim3 grid, dim3 block, size_t shared_bytes,
            cudaStream_t stream, A &&...args) {
  static_assert(sizeof...(P) == sizeof...(A), "COCO_LAUNCH: wrong number of kernel arguments");
  auto call = [kernel, ... copies = std::decay_t<P>(static_cast<A &&>(args))] {
    kernel(copies...);
  };
  using Call = decltype(call);
  launch_body(
      name, grid, block, shared_bytes, stream, new Call(std::move(call)),
      [](void *c) { (*static_cast<Call *>(c))(); }, [](void *c) { delete static_cast<Call *>(c); });
}

// COCO_SHARED / COCO_SHARED_DYNAMIC: the calling block's shared memory.
void *block_shared(const void *tag, size_t bytes, size_t align);
void *dynamic_shared();

// A signal was raised (the watchdog's "progress anywhere").
void note_progress();

// Statistics: `n` bytes stored from rank `rank` into rank `p` (a fused
// kernel's peer stores); one tile computed by the calling block.
void count_peer_bytes(int rank, int p, unsigned long long n);
void tile_computed();

// coco::peer_copy: `bytes` from `src` into peer memory `dst` (global rank
// `peer`) on `stream`, counted as traffic.
void peer_copy(void *dst, const void *src, size_t bytes, cudaStream_t stream, int peer);

// A poll loop's pause: `while (*slot < expected) poll.pause(seen)` lets the
// block's other threads run, backs off, and ends the run with the watchdog's
// message when no progress was made anywhere for COCO_EMU_TIMEOUT seconds.
class poller {
 public:
  poller(const uint64_t *slot, uint64_t expected);
  void pause(uint64_t seen);

 private:
  // `gone`: the peers that ended (a world of processes), or null: the timeout.
  [[noreturn]] void watchdog(uint64_t seen, const char *gone) const;

  const uint64_t *slot;
  uint64_t expected;
  double start;  // seconds on the steady clock (coco_emu.h's now_seconds)
  uint64_t seen_progress;
  unsigned spins = 0;
};

}  // namespace coco_emu

void __syncthreads();

// ===========================================================================
// The CUDA runtime, NCCL and cuBLAS functions the emitted code calls
// ===========================================================================

cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaMallocAsync(void **ptr, size_t bytes, cudaStream_t stream);
template <class T> cudaError_t cudaMallocAsync(T **ptr, size_t bytes, cudaStream_t stream) {
  return cudaMallocAsync(reinterpret_cast<void **>(ptr), bytes, stream);
}
cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream);
cudaError_t cudaMalloc(void **ptr, size_t bytes);
template <class T> cudaError_t cudaMalloc(T **ptr, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void **>(ptr), bytes);
}
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream);
cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t event);

const char *ncclGetErrorString(ncclResult_t r);
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount,
                               ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type,
                           int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();
ncclResult_t ncclCommCount(ncclComm_t comm, int *count);
ncclResult_t ncclCommUserRank(ncclComm_t comm, int *rank);

cublasStatus_t cublasCreate(cublasHandle_t *handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t *stream);
const char *cublasGetStatusString(cublasStatus_t s);
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void *alpha,
                            const void *A, cudaDataType_t Atype, int lda, const void *B,
                            cudaDataType_t Btype, int ldb, const void *beta, void *C,
                            cudaDataType_t Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo);
cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const void *alpha, const void *A, cudaDataType_t Atype, int lda, long long strideA,
    const void *B, cudaDataType_t Btype, int ldb, long long strideB, const void *beta, void *C,
    cudaDataType_t Ctype, int ldc, long long strideC, int batchCount,
    cublasComputeType_t computeType, cublasGemmAlgo_t algo);
