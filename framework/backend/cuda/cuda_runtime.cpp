// CUDA runtime services over the CUDA runtime API (built only with CUDA).
#include "framework/backend/cuda_runtime.hpp"

#include <atomic>
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

DeviceProperties device_properties(int device) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) {
    cudaGetLastError();
    return {};
  }
  return {p.name, p.totalGlobalMem, p.major, p.minor};
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
void* malloc_device_nothrow(std::size_t bytes, int device) {
  STRATA_CHECK_CUDA(cudaSetDevice(device));
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it so the next call does not report it
    return nullptr;
  }
  STRATA_CHECK_CUDA(e);
  return p;
}
DeviceMemoryInfo device_memory_info(int device) {
  STRATA_CHECK_CUDA(cudaSetDevice(device));
  DeviceMemoryInfo info;
  STRATA_CHECK_CUDA(cudaMemGetInfo(&info.free, &info.total));
  return info;
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
namespace {
cudaMemcpyKind kind_of(CopyKind kind) {
  return kind == CopyKind::host_to_device   ? cudaMemcpyHostToDevice
         : kind == CopyKind::device_to_host ? cudaMemcpyDeviceToHost
                                            : cudaMemcpyDeviceToDevice;
}
}  // namespace

void* stream_create(int device) {
  STRATA_CHECK_CUDA(cudaSetDevice(device));
  cudaStream_t s = nullptr;
  STRATA_CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}
void stream_destroy(void* stream) {
  if (stream) cudaStreamDestroy(static_cast<cudaStream_t>(stream));
}
namespace {
std::atomic<std::uint64_t> g_host_waits{0};
std::atomic<std::uint64_t> g_to_device{0}, g_to_host{0};
void count_copy(std::size_t bytes, CopyKind kind) {
  if (kind == CopyKind::host_to_device) g_to_device.fetch_add(bytes, std::memory_order_relaxed);
  if (kind == CopyKind::device_to_host) g_to_host.fetch_add(bytes, std::memory_order_relaxed);
}
}  // namespace

CopiedBytes copied_bytes() {
  return {g_to_device.load(std::memory_order_relaxed), g_to_host.load(std::memory_order_relaxed)};
}

std::uint64_t host_waits() { return g_host_waits.load(std::memory_order_relaxed); }
void note_host_wait() { g_host_waits.fetch_add(1, std::memory_order_relaxed); }

void stream_synchronize(void* stream) {
  note_host_wait();
  STRATA_CHECK_CUDA(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}
void* event_create(int device) {
  STRATA_CHECK_CUDA(cudaSetDevice(device));
  cudaEvent_t e = nullptr;
  STRATA_CHECK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}
void event_destroy(void* event) {
  if (event) cudaEventDestroy(static_cast<cudaEvent_t>(event));
}
void event_record(void* event, void* stream) {
  STRATA_CHECK_CUDA(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
}
void stream_wait_event(void* stream, void* event) {
  STRATA_CHECK_CUDA(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream),
                                        static_cast<cudaEvent_t>(event), 0));
}
void event_synchronize(void* event) {
  STRATA_CHECK_CUDA(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
}
bool event_query(void* event) {
  const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (e == cudaSuccess) return true;
  if (e == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  STRATA_CHECK_CUDA(e);
  return false;
}
void memcpy_async(void* dst, const void* src, std::size_t bytes, CopyKind kind, void* stream) {
  count_copy(bytes, kind);
  STRATA_CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, kind_of(kind), static_cast<cudaStream_t>(stream)));
}

cudaError_t fill_async_impl(void* dst, const void* pattern, std::size_t pattern_bytes,
                            std::size_t count, void* stream);  // fill.cu

void fill_async(void* dst, const void* pattern, std::size_t pattern_bytes, std::size_t count,
                void* stream) {
  STRATA_CHECK_CUDA(fill_async_impl(dst, pattern, pattern_bytes, count, stream));
}

void memset_async(void* dst, int value, std::size_t bytes, void* stream) {
  STRATA_CHECK_CUDA(cudaMemsetAsync(dst, value, bytes, static_cast<cudaStream_t>(stream)));
}

void memcpy(void* dst, const void* src, std::size_t bytes, CopyKind kind) {
  const cudaMemcpyKind k = kind == CopyKind::host_to_device   ? cudaMemcpyHostToDevice
                           : kind == CopyKind::device_to_host ? cudaMemcpyDeviceToHost
                                                              : cudaMemcpyDeviceToDevice;
  note_host_wait();
  count_copy(bytes, kind);
  STRATA_CHECK_CUDA(cudaMemcpy(dst, src, bytes, k));
}

}  // namespace strata::cuda
