// The CUDA backend's op table: the kernels of kernels.hpp under the names OpTable gives them.
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

}  // namespace strata::ops
