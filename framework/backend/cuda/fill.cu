// Tensor::fill of GPU memory: count copies of a 1-, 2-, 4- or 8-byte value (cuda_runtime.hpp).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace strata::cuda {
namespace {

template <typename T>
__global__ void fill_kernel(T* dst, T value, std::size_t n) {
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(blockDim.x) * gridDim.x)
    dst[i] = value;
}

template <typename T>
cudaError_t launch(void* dst, const void* pattern, std::size_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;  // nothing to fill (an empty grid is an invalid launch)
  T v;
  std::memcpy(&v, pattern, sizeof(T));
  const std::size_t blocks = (n + 255) / 256;
  fill_kernel<T><<<static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16), 256, 0, s>>>(
      static_cast<T*>(dst), v, n);
  return cudaGetLastError();
}

}  // namespace

// Declared in framework/backend/cuda_runtime.hpp (this file cannot include it with fmt's headers:
// nvcc does not compile fmt 9 in C++20); errors are raised by fill_async's caller-facing wrapper.
cudaError_t fill_async_impl(void* dst, const void* pattern, std::size_t pattern_bytes,
                            std::size_t count, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  switch (pattern_bytes) {
    case 1: return launch<std::uint8_t>(dst, pattern, count, s);
    case 2: return launch<std::uint16_t>(dst, pattern, count, s);
    case 4: return launch<std::uint32_t>(dst, pattern, count, s);
    case 8: return launch<std::uint64_t>(dst, pattern, count, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace strata::cuda
