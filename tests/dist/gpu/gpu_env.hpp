// Shared helpers of the multi-rank GPU tests (tests/dist/gpu): why they cannot run here, this
// rank's GPU (the training engine's rule: local rank modulo the visible GPUs), copies between host
// and GPU tensors.
#pragma once

#include <cstdlib>
#include <string>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/backend/ops/op_table.hpp"
#include "framework/core/tensor.hpp"

namespace strata::test {

// Empty when a GPU can run the tests; else why not.
inline std::string why_no_gpu() {
  if (!cuda::compiled()) return "this build has no CUDA support";
  if (!ops::cuda_op_table()) return "this build has no CUDA kernels";
  if (cuda::device_count() == 0) return "no GPU is visible: " + cuda::describe_devices();
  return "";
}

// The GPU a rank trains on (parallel/engine/training.cpp's local_rank % visible GPUs).
inline int rank_device(int world_rank) {
  int local = world_rank;
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK"})
    if (const char* s = std::getenv(v); s && *s) {
      local = std::atoi(s);
      break;
    }
  const int n = cuda::device_count();
  return n > 0 ? local % n : 0;
}

inline Tensor on_device(const Tensor& host, int device) {
  Tensor d = Tensor::empty(host.shape(), host.dtype(),
                           TensorOptions{Device::cuda(device), Tier::device, Category::other});
  d.copy_from(host);  // ordered on the device's current stream, waited for
  return d;
}

inline Tensor to_host(const Tensor& dev) {
  Tensor h = Tensor::empty(dev.shape(), dev.dtype());
  h.copy_from(dev);  // ordered on the device's current stream, waited for
  return h;
}

}  // namespace strata::test
