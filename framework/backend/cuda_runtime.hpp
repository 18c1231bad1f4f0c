// The few CUDA runtime services the framework needs (device memory, copies, device count).
// Implemented in backend/cuda/ when Strata is built with CUDA, by backend/no_cuda.cpp otherwise,
// so callers never need #ifdef.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace strata::cuda {

// True when this build has CUDA compiled in.
bool compiled();
// Number of visible GPUs (0 when none or not compiled).
int device_count();
// "NVIDIA H100 80GB HBM3, 79.1 GiB" or why none is visible.
std::string describe_devices();
std::string runtime_version();

void* malloc_device(std::size_t bytes, int device);
// As malloc_device, but nullptr when the device has not that much memory free
// (cudaErrorMemoryAllocation, which is cleared); other failures throw. Without CUDA: throws.
void* malloc_device_nothrow(std::size_t bytes, int device);
void free_device(void* p, int device);
// The device's free and total memory (cudaMemGetInfo); {0, 0} without CUDA.
struct DeviceMemoryInfo {
  std::size_t free = 0, total = 0;
};
DeviceMemoryInfo device_memory_info(int device);
// A GPU's name, memory and compute capability (`strata env`); name "" when it cannot be read.
struct DeviceProperties {
  std::string name;
  std::size_t total_bytes = 0;
  int major = 0, minor = 0;
};
DeviceProperties device_properties(int device);
// Pinned (page-locked) host memory; falls back to nothing — callers use plain memory if
// compiled() is false.
void* malloc_pinned(std::size_t bytes);
void free_pinned(void* p);

enum class CopyKind { host_to_device, device_to_host, device_to_device };
void memcpy(void* dst, const void* src, std::size_t bytes, CopyKind kind);

// Streams and events (framework/backend/stream.hpp builds on these). Handles are cudaStream_t /
// cudaEvent_t; streams are non-blocking (never ordered by the legacy default stream), events
// take no timing.
void* stream_create(int device);
void stream_destroy(void* stream);
void stream_synchronize(void* stream);
// Times this process's host has waited for a GPU's stream to run everything queued on it so far:
// stream_synchronize, the blocking memcpy, and the CUDA ops' own reads of a value (note_host_wait).
// Waits for one event (a staging buffer's copy, a communication) are not counted, but for the
// losses' read (nn::LossSums, when its copy has not run yet: note_host_wait). A training step
// is meant to wait a fixed number of times, however many micro-batches (tests/unit/gpu).
std::uint64_t host_waits();
void note_host_wait();
void* event_create(int device);
void event_destroy(void* event);
void event_record(void* event, void* stream);
void stream_wait_event(void* stream, void* event);
void event_synchronize(void* event);
bool event_query(void* event);
void memcpy_async(void* dst, const void* src, std::size_t bytes, CopyKind kind, void* stream);
// Bytes this process has queued or copied between host and GPU memory through memcpy and
// memcpy_async, by their kind, since it started: what offload moves over the link (bench/gpu's
// offload run sets it against the link's measured speed). Device-to-device copies are not counted.
struct CopiedBytes {
  std::uint64_t to_device = 0, to_host = 0;
};
CopiedBytes copied_bytes();
// Sets `bytes` bytes of device memory to `value`, queued on `stream`.
void memset_async(void* dst, int value, std::size_t bytes, void* stream);
// Writes `count` copies of the `pattern_bytes`-byte value at `pattern` (1, 2, 4 or 8 bytes) to
// device memory at dst, queued on `stream` (Tensor::fill of a GPU tensor).
void fill_async(void* dst, const void* pattern, std::size_t pattern_bytes, std::size_t count,
                void* stream);

}  // namespace strata::cuda
