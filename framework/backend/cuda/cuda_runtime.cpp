// CUDA runtime services over the CUDA runtime API (built only with CUDA).
#include "framework/backend/cuda_runtime.hpp"

#include <cuda_runtime.h>

#include "framework/core/error.hpp"
#include "framework/memory/size.hpp"

#define STRATA_CHECK_CUDA(call)                                                               \
  do {                                                                                        \
    cudaError_t e_ = (call);                                                                  \
    if (e_ != cudaSuccess)                                                                    \
      ::strata::fail("cuda", "{} failed: {} ({}:{})", #call, cudaGetErrorString(e_), __FILE__, \
                     __LINE__);                                                               \
  } while (0)

namespace strata::cuda {

bool compiled() { return true; }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::string describe_devices() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return fmt::format("none visible ({})", cudaGetErrorString(e));
  }
  std::string out;
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    out += fmt::format("{}cuda:{} {} ({}, sm_{}{})", out.empty() ? "" : "; ", i, p.name,
                       format_bytes(p.totalGlobalMem), p.major, p.minor);
  }
  return out.empty() ? "none visible" : out;
}

std::string runtime_version() {
  int v = 0;
  cudaRuntimeGetVersion(&v);
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

void* malloc_device(std::size_t bytes, int device) {
  STRATA_CHECK_CUDA(cudaSetDevice(device));
  void* p = nullptr;
  STRATA_CHECK_CUDA(cudaMalloc(&p, bytes));
  return p;
}
void free_device(void* p, int device) {
  if (!p) return;
  cudaSetDevice(device);
  cudaFree(p);
}
void* malloc_pinned(std::size_t bytes) {
  void* p = nullptr;
  if (cudaMallocHost(&p, bytes) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return p;
}
void free_pinned(void* p) {
  if (p) cudaFreeHost(p);
}
void memcpy(void* dst, const void* src, std::size_t bytes, CopyKind kind) {
  const cudaMemcpyKind k = kind == CopyKind::host_to_device   ? cudaMemcpyHostToDevice
                           : kind == CopyKind::device_to_host ? cudaMemcpyDeviceToHost
                                                              : cudaMemcpyDeviceToDevice;
  STRATA_CHECK_CUDA(cudaMemcpy(dst, src, bytes, k));
}

}  // namespace strata::cuda
