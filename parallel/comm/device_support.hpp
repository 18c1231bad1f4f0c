// What the communication layer needs from the CUDA runtime beyond framework/backend: a GPU's
// identity across processes (to tell whether two ranks share one GPU) and a host↔device copy on a
// given stream that is waited for, with that GPU current for the call. Built from cuda/ with CUDA,
// from no_cuda/ (stubs) without, so no caller needs an #ifdef.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace strata::parallel::device_support {

// A GPU's UUID (cudaDeviceProp::uuid): the same in every process that sees that GPU, whatever its
// index there (CUDA_VISIBLE_DEVICES), different for every other GPU of any host.
struct DeviceIdentity {
  bool valid = false;  // false without CUDA, or when the GPU cannot be asked
  std::array<std::uint8_t, 16> uuid{};
};
DeviceIdentity identify(int device);
// "GPU-8f3c2a1b-…" (nvidia-smi's spelling, shortened) for messages.
std::string describe(const DeviceIdentity& id);

// Copies `bytes` from src to dst (host to device when `to_device`, else device to host), queued
// on `stream` (a cudaStream_t of GPU `device`), and blocks until the stream has run everything
// queued on it so far, this copy included. Every CUDA call is checked (strata::Error "cuda").
void copy_and_wait(void* dst, const void* src, std::size_t bytes, bool to_device, int device,
                   void* stream);

}  // namespace strata::parallel::device_support
