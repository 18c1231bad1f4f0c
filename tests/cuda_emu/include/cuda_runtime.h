// A stand-in for the CUDA runtime header under which the CUDA kernels of framework/backend/cuda
// compile with a host C++ compiler and run on the CPU emulator of cuda_emu/emu.hpp (README.md).
// It declares what those files use, and a little more: the vector types, dim3, the error codes,
// streams, device memory (host memory the emulator tracks, so it can check that kernels and copies
// get device pointers), the device intrinsics (each correctly rounded, never fused), warp
// shuffles and __syncthreads (scheduling points of the emulator), integer atomics. Anything not
// here fails to compile: nothing is silently skipped.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

// ---- the CUDA C++ keywords ----------------------------------------------------------------------
// __shared__ declarations are rewritten by cuda_emu_rewrite (they become per-block storage the
// emulator allocates); one that was not is a compile error.
#define __host__
#define __device__
#define __global__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __shared__ CUDA_EMU_UNREWRITTEN_SHARED_DECLARATION
#define __constant__ CUDA_EMU_UNSUPPORTED_CONSTANT_DECLARATION
#define __managed__ CUDA_EMU_UNSUPPORTED_MANAGED_DECLARATION

// ---- vector types (the sizes and alignments of vector_types.h) ---------------------------------
struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(8) int2 {
  int x, y;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
struct alignas(16) double2 {
  double x, y;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }

// ---- errors, streams, memcpy kinds, attributes -------------------------------------------------
enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorLaunchFailure = 719,
};
typedef enum cudaError cudaError_t;

struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;
struct CUevent_st;
typedef struct CUevent_st* cudaEvent_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributePreferredSharedMemoryCarveout = 9,
};

enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};

#define cudaHostAllocDefault 0x00
#define cudaHostAllocPortable 0x01
#define cudaHostAllocMapped 0x02
#define cudaStreamNonBlocking 0x01

// The built-in variables of the thread the emulator runs at the moment.
inline uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
constexpr int warpSize = 32;

// The emulator: launches, threads, shared memory, device memory (after the types above).
#include "cuda_emu/emu.hpp"

// ---- runtime API (host) -------------------------------------------------------------------------
inline const char* cudaGetErrorString(cudaError_t e) { return emu::error_string(e); }
inline const char* cudaGetErrorName(cudaError_t e) { return emu::error_name(e); }
inline cudaError_t cudaGetLastError() { return emu::take_last_error(); }
inline cudaError_t cudaPeekAtLastError() { return emu::peek_last_error(); }
inline cudaError_t cudaGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
inline cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int device) {
  return emu::device_attribute(v, a, device);
}
inline cudaError_t cudaMalloc(void** p, std::size_t bytes) { return emu::device_malloc(p, bytes); }
template <typename T>
cudaError_t cudaMalloc(T** p, std::size_t bytes) {
  void* v = nullptr;
  const cudaError_t e = emu::device_malloc(&v, bytes);
  *p = static_cast<T*>(v);
  return e;
}
inline cudaError_t cudaMallocAsync(void** p, std::size_t bytes, cudaStream_t) {
  return emu::device_malloc(p, bytes);
}
inline cudaError_t cudaFree(void* p) { return emu::device_free(p); }
inline cudaError_t cudaFreeAsync(void* p, cudaStream_t) { return emu::device_free(p); }
inline cudaError_t cudaHostAlloc(void** p, std::size_t bytes, unsigned flags) {
  return emu::host_alloc(p, bytes, flags);
}
inline cudaError_t cudaMallocHost(void** p, std::size_t bytes) { return emu::host_alloc(p, bytes, 0); }
inline cudaError_t cudaFreeHost(void* p) { return emu::host_free(p); }
inline cudaError_t cudaMemset(void* p, int v, std::size_t n) { return emu::memset_d(p, v, n); }
inline cudaError_t cudaMemsetAsync(void* p, int v, std::size_t n, cudaStream_t = nullptr) {
  return emu::memset_d(p, v, n);
}
inline cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t n, cudaMemcpyKind k) {
  return emu::memcpy_k(dst, src, n, k);
}
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t n, cudaMemcpyKind k,
                                   cudaStream_t = nullptr) {
  return emu::memcpy_k(dst, src, n, k);
}
// A __device__ variable is one host object here (one device): the copy is a memcpy into it,
// bounds-checked against the symbol's size.
template <typename T>
cudaError_t cudaMemcpyToSymbol(T& symbol, const void* src, std::size_t count, std::size_t offset = 0,
                               cudaMemcpyKind kind = cudaMemcpyHostToDevice) {
  if (kind != cudaMemcpyHostToDevice || offset > sizeof(T) || count > sizeof(T) - offset)
    return cudaErrorInvalidValue;
  std::memcpy(reinterpret_cast<unsigned char*>(&symbol) + offset, src, count);
  return cudaSuccess;
}
// Every stream runs its work at once, in order (the emulator has one queue): nothing to wait for.
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return emu::sync_point(); }
inline cudaError_t cudaDeviceSynchronize() { return emu::sync_point(); }
template <typename T>
cudaError_t cudaFuncSetAttribute(T* func, cudaFuncAttribute attr, int value) {
  return emu::func_set_attribute(reinterpret_cast<const void*>(func), attr, value);
}
// The versions of a kernel's code for the device (the other fields of CUDA's struct are left out:
// code that reads them does not compile here).
struct cudaFuncAttributes {
  int ptxVersion = 0;     // the virtual architecture it was compiled from, 10 major + minor
  int binaryVersion = 0;  // the architecture of the code that runs (the device's)
};
template <typename T>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, T* func) {
  if (attr == nullptr || func == nullptr) return cudaErrorInvalidValue;
  attr->ptxVersion = emu::device().ptx_version;
  attr->binaryVersion = emu::device().cc_major * 10 + emu::device().cc_minor;
  return cudaSuccess;
}

// ---- device intrinsics --------------------------------------------------------------------------
// Each _rn operation is one IEEE operation rounded to nearest even: the value goes through a
// volatile, so that no host compiler fuses a product into a following sum (nvcc never fuses the
// _rn intrinsics either). Plain arithmetic in a kernel is compiled by the host compiler as it is
// (see README.md: nvcc may contract a * b + c into an fma where g++ with -ffp-contract=off does
// not).
namespace emu::detail {
inline float rounded(float x) {
  volatile float r = x;
  return r;
}
inline double rounded(double x) {
  volatile double r = x;
  return r;
}
}  // namespace emu::detail
inline float __fadd_rn(float a, float b) { return emu::detail::rounded(a + b); }
inline float __fsub_rn(float a, float b) { return emu::detail::rounded(a - b); }
inline float __fmul_rn(float a, float b) { return emu::detail::rounded(a * b); }
inline float __fdiv_rn(float a, float b) { return emu::detail::rounded(a / b); }
inline float __frcp_rn(float a) { return emu::detail::rounded(1.0f / a); }
inline float __fsqrt_rn(float a) { return emu::detail::rounded(std::sqrt(a)); }
inline float __fmaf_rn(float a, float b, float c) { return emu::detail::rounded(std::fma(a, b, c)); }
inline double __dadd_rn(double a, double b) { return emu::detail::rounded(a + b); }
inline double __dmul_rn(double a, double b) { return emu::detail::rounded(a * b); }
inline double __fma_rn(double a, double b, double c) { return emu::detail::rounded(std::fma(a, b, c)); }
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline int __float_as_int(float f) {
  int u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __int_as_float(int u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
template <typename T>
inline T __ldg(const T* p) {
  return *p;
}

// CUDA's ::min / ::max for device code (integers and floats).
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a < b ? b : a; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a < b ? b : a; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a < b ? b : a; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a < b ? b : a; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a < b ? b : a; }
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }

// Integer atomics: emulated threads switch only at __syncthreads and warp collectives, so a plain
// read-modify-write is atomic here. Float atomicAdd is deliberately absent (its order on a GPU is
// not reproducible; the kernels here use none).
template <typename T>
inline T cuda_emu_atomic_min(T* p, T v) {
  const T o = *p;
  if (v < o) *p = v;
  return o;
}
template <typename T>
inline T cuda_emu_atomic_max(T* p, T v) {
  const T o = *p;
  if (o < v) *p = v;
  return o;
}
inline int atomicMin(int* p, int v) { return cuda_emu_atomic_min(p, v); }
inline unsigned atomicMin(unsigned* p, unsigned v) { return cuda_emu_atomic_min(p, v); }
inline long long atomicMin(long long* p, long long v) { return cuda_emu_atomic_min(p, v); }
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
  return cuda_emu_atomic_min(p, v);
}
inline int atomicMax(int* p, int v) { return cuda_emu_atomic_max(p, v); }
inline unsigned atomicMax(unsigned* p, unsigned v) { return cuda_emu_atomic_max(p, v); }
inline long long atomicMax(long long* p, long long v) { return cuda_emu_atomic_max(p, v); }
inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v) {
  return cuda_emu_atomic_max(p, v);
}
inline int atomicAdd(int* p, int v) {
  const int o = *p;
  *p = o + v;
  return o;
}
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  const unsigned o = *p;
  *p = o + v;
  return o;
}
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  const unsigned long long o = *p;
  *p = o + v;
  return o;
}
inline int atomicExch(int* p, int v) {
  const int o = *p;
  *p = v;
  return o;
}
inline unsigned atomicExch(unsigned* p, unsigned v) {
  const unsigned o = *p;
  *p = v;
  return o;
}
inline int atomicCAS(int* p, int cmp, int v) {
  const int o = *p;
  if (o == cmp) *p = v;
  return o;
}
inline unsigned atomicCAS(unsigned* p, unsigned cmp, unsigned v) {
  const unsigned o = *p;
  if (o == cmp) *p = v;
  return o;
}
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long cmp,
                                    unsigned long long v) {
  const unsigned long long o = *p;
  if (o == cmp) *p = v;
  return o;
}

// ---- barriers, warp collectives ---------------------------------------------------------------
// The caller's location (the emulator checks that a block's threads meet at one barrier and a
// warp's lanes at one collective).
#define CUDA_EMU_SITE_PARAMS const char *file = __builtin_FILE(), unsigned line = __builtin_LINE()

inline void __syncthreads(CUDA_EMU_SITE_PARAMS) {
  emu::syncthreads({file, line});
}
inline void __syncwarp(unsigned mask = 0xffffffffu,
                       CUDA_EMU_SITE_PARAMS) {
  emu::warp_collective<int>(mask, 0, {file, line});
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32,
                  CUDA_EMU_SITE_PARAMS) {
  const int lane = emu::lane_id();
  const int src = ((lane & ~(width - 1)) | ((lane ^ lane_mask) & (width - 1)));
  return emu::warp_collective<T>(mask, v, {file, line})[src];
}
template <typename T>
T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32,
              CUDA_EMU_SITE_PARAMS) {
  const int lane = emu::lane_id();
  const int src = (lane & ~(width - 1)) | (src_lane & (width - 1));
  return emu::warp_collective<T>(mask, v, {file, line})[src];
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32,
                   CUDA_EMU_SITE_PARAMS) {
  const int lane = emu::lane_id();
  const int seg = lane & ~(width - 1), in = lane & (width - 1);
  const int src = in + static_cast<int>(delta) < width ? lane + static_cast<int>(delta) : lane;
  (void)seg;
  return emu::warp_collective<T>(mask, v, {file, line})[src];
}
template <typename T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32,
                 CUDA_EMU_SITE_PARAMS) {
  const int lane = emu::lane_id();
  const int in = lane & (width - 1);
  const int src = in >= static_cast<int>(delta) ? lane - static_cast<int>(delta) : lane;
  return emu::warp_collective<T>(mask, v, {file, line})[src];
}
inline unsigned __ballot_sync(unsigned mask, int pred,
                              CUDA_EMU_SITE_PARAMS) {
  const auto all = emu::warp_collective<int>(mask, pred != 0, {file, line});
  unsigned r = 0;
  for (int l = 0; l < 32; ++l)
    if (all[l]) r |= 1u << l;
  return r;
}
inline int __any_sync(unsigned mask, int pred,
                      CUDA_EMU_SITE_PARAMS) {
  return __ballot_sync(mask, pred, file, line) != 0;
}
inline int __all_sync(unsigned mask, int pred,
                      CUDA_EMU_SITE_PARAMS) {
  return __ballot_sync(mask, pred, file, line) == mask;
}
