// The CUDA op table in a build without CUDA kernels: none (op_table() then names what is missing).
#include "framework/backend/ops/op_table.hpp"

#ifndef STRATA_HAVE_CUDA_KERNELS
namespace strata::ops {
const OpTable* cuda_op_table() { return nullptr; }
const MetaCudaQueries* cuda_meta_queries() { return nullptr; }
}  // namespace strata::ops
#endif
