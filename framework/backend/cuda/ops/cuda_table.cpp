// The CUDA backend's op table: the kernels of kernels.hpp under the names OpTable gives them; and
// its answers to the meta-CUDA table's questions (op_table.hpp's MetaCudaQueries), with which the
// memory plan of a GPU job is exact on a machine with a GPU.
#include <cuda_runtime.h>

#include "framework/backend/cuda/ops/embedding.hpp"
#include "framework/backend/cuda/ops/kernels.hpp"
#include "framework/backend/ops/op_table.hpp"

namespace strata::ops {

const OpTable* cuda_op_table() {
  static const OpTable t = [] {
    using namespace strata::cuda_ops;
    return STRATA_OP_TABLE("cuda");
  }();
  return &t;
}

namespace {

// The current device, or -1 without a usable one (the failed call's error cleared).
int current_device() {
  int n = 0, d = -1;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1 || cudaGetDevice(&d) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    return -1;
  }
  return d;
}

int compute_capability_major() {
  const int d = current_device();
  int major = -1;
  if (d < 0 || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    return -1;
  }
  return major;
}

// CUB's own figure (embedding_dwte_scratch_bytes asks it, queuing nothing).
bool dwte_scratch_bytes(std::int64_t n, std::int64_t vocab_rows, std::size_t* bytes) {
  if (current_device() < 0) return false;
  if (cuda_ops::embedding_dwte_scratch_bytes(n, vocab_rows, bytes, nullptr) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    return false;
  }
  return true;
}

}  // namespace

const MetaCudaQueries* cuda_meta_queries() {
  static const MetaCudaQueries q{compute_capability_major, dwte_scratch_bytes};
  return &q;
}

}  // namespace strata::ops
