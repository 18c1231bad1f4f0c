// Tensor parallelism as layers see it: which part of each split layer this process holds
// (TpShard, fixed when the model is built) and the collectives over the tensor-parallel group
// that the split layers call (TpComm, supplied by the parallel engine through the Context:
// framework/ knows no ranks). Megatron's conjugate operators are tp_copy's backward and
// tp_reduce's forward.
#pragma once

#include "framework/core/tensor.hpp"

namespace strata::nn {

// Part `index` of `size` (size 1: the whole model).
struct TpShard {
  int index = 0;
  int size = 1;
  bool operator==(const TpShard&) const = default;
};

class TpComm {
 public:
  virtual ~TpComm() = default;
  virtual TpShard shard() const = 0;
  // In place over the tensor-parallel group; every member passes the same shape and dtype.
  virtual void all_reduce_sum(const Tensor& t) = 0;
  virtual void all_reduce_max(const Tensor& t) = 0;
};

struct Context;

// The communicator of ctx for a layer split `size` ways; throws naming `who` when the context
// has none or one of another size (the engine did not set it up).
TpComm& tp_comm(const Context& ctx, int size, const char* who);

// f: identity forward; its backward sums the input gradient over the group (called on the
// partial gradient of a column-parallel layer's input). g: sums the partial outputs of a
// row-parallel layer forward; its backward is the identity. Both are one all-reduce in place.
void tp_all_reduce(const Context& ctx, int size, const Tensor& t, const char* who);

}  // namespace strata::nn
