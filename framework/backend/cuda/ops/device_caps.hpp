// The compute capability of a CUDA device, for host code that picks kernels by it (cuBLASLt's TF32
// and 16-bit paths in gemm_op.cpp, attention's tensor-core kernels in attention.cu). Not cached:
// cudaDeviceGetAttribute is a cheap query, and the CUDA emulator's tests switch device models.
#pragma once

#include <cuda_runtime.h>

namespace strata::cuda_ops {

// The major version of `device`'s compute capability into *major (0 on error).
inline cudaError_t device_cc_major(int device, int* major) {
  *major = 0;
  return cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, device);
}

// The same for the current device.
inline cudaError_t current_device_cc_major(int* major) {
  *major = 0;
  int dev = 0;
  if (const cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  return device_cc_major(dev, major);
}

}  // namespace strata::cuda_ops
