// device_support.hpp over the CUDA runtime (built with CUDA).
#include "parallel/comm/device_support.hpp"

#include <cuda_runtime.h>

#include "framework/core/error.hpp"

#define STRATA_COMM_CHECK_CUDA(call)                                                           \
  do {                                                                                         \
    const cudaError_t e_ = (call);                                                             \
    if (e_ != cudaSuccess)                                                                     \
      ::strata::fail("cuda", "{} failed: {} ({}:{})", #call, cudaGetErrorString(e_), __FILE__, \
                     __LINE__);                                                                \
  } while (0)

namespace strata::parallel::device_support {

namespace {
// Makes `device` current on this thread for a scope, and the previous one again after.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    STRATA_COMM_CHECK_CUDA(cudaGetDevice(&previous_));
    if (previous_ != device) STRATA_COMM_CHECK_CUDA(cudaSetDevice(device));
    restore_ = previous_ != device;
  }
  ~DeviceScope() {
    if (restore_) cudaSetDevice(previous_);  // (a destructor cannot throw; it set fine before)
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
  bool restore_ = false;
};
}  // namespace

DeviceIdentity identify(int device) {
  DeviceIdentity id;
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it
    return id;
  }
  static_assert(sizeof(p.uuid.bytes) == 16, "cudaUUID_t is 16 bytes");
  for (std::size_t i = 0; i < 16; ++i) id.uuid[i] = static_cast<std::uint8_t>(p.uuid.bytes[i]);
  id.valid = true;
  return id;
}

std::string describe(const DeviceIdentity& id) {
  if (!id.valid) return "an unknown GPU";
  std::string hex;
  for (std::size_t i = 0; i < 4; ++i) hex += fmt::format("{:02x}", id.uuid[i]);
  return "GPU-" + hex + "…";
}

void copy_and_wait(void* dst, const void* src, std::size_t bytes, bool to_device, int device,
                   void* stream) {
  if (bytes == 0) return;
  const DeviceScope scope(device);
  const auto s = static_cast<cudaStream_t>(stream);
  STRATA_COMM_CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes,
                                         to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                                         s));
  STRATA_COMM_CHECK_CUDA(cudaStreamSynchronize(s));
}

}  // namespace strata::parallel::device_support
