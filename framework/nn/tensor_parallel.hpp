// Tensor parallelism as layers see it: which part of each split layer this process holds
// (TpShard, fixed when the model is built) and the collectives over the tensor-parallel group
// that the split layers call (TpComm, supplied by the parallel engine through the Context:
// framework/ knows no ranks). Megatron's conjugate operators are tp_copy's backward and
// tp_reduce's forward; with sequence parallelism they become an all-gather of the tokens before a
// column-parallel layer (backward: reduce-scatter) and a reduce-scatter after a row-parallel one
// (backward: all-gather).
#pragma once

#include "framework/core/tensor.hpp"

namespace strata::nn {

// Part `index` of `size` (size 1: the whole model). sequence_parallel (Megatron's sequence
// parallelism, size > 1 only): outside the split layers — LayerNorms, residual adds, the
// embedding's output — each part holds a contiguous 1/size of the micro-batch's B·T tokens
// (rows of the [B·T, C] activations) instead of all of them.
struct TpShard {
  int index = 0;
  int size = 1;
  bool sequence_parallel = false;
  bool operator==(const TpShard&) const = default;
  // Whether activations between the split layers hold 1/size of the tokens.
  bool splits_tokens() const { return sequence_parallel && size > 1; }
};

// Bytes a part hands to the tensor-parallel collectives, by kind: each call's whole tensor once
// (an all-reduce's tensor, an all-gather's output, a reduce-scatter's input).
struct TpTraffic {
  std::int64_t all_reduce = 0, all_gather = 0, reduce_scatter = 0;
  std::int64_t total() const { return all_reduce + all_gather + reduce_scatter; }
  TpTraffic operator*(std::int64_t k) const { return {all_reduce * k, all_gather * k, reduce_scatter * k}; }
  TpTraffic operator-(const TpTraffic& o) const {
    return {all_reduce - o.all_reduce, all_gather - o.all_gather, reduce_scatter - o.reduce_scatter};
  }
  bool operator==(const TpTraffic&) const = default;
};

class TpComm {
 public:
  virtual ~TpComm() = default;
  virtual TpShard shard() const = 0;
  // In place over the tensor-parallel group; every member passes the same shape and dtype.
  virtual void all_reduce_sum(const Tensor& t) = 0;
  virtual void all_reduce_max(const Tensor& t) = 0;
  // Sequence parallelism. all_gather: `in` [n, ...] from every part, `out` [size·n, ...] their
  // concatenation by part. reduce_scatter_sum: `in` [size·n, ...] on every part, `out` [n, ...]
  // the sum over the parts of block `index`. Contiguous, the same dtype.
  virtual void all_gather(const Tensor& in, const Tensor& out) = 0;
  virtual void reduce_scatter_sum(const Tensor& in, const Tensor& out) = 0;
};

struct Context;

// The communicator of ctx for a layer split `size` ways; throws naming `who` when the context
// has none or one of another size (the engine did not set it up).
TpComm& tp_comm(const Context& ctx, int size, const char* who);

// f: identity forward; its backward sums the input gradient over the group (called on the
// partial gradient of a column-parallel layer's input). g: sums the partial outputs of a
// row-parallel layer forward; its backward is the identity. Both are one all-reduce in place.
void tp_all_reduce(const Context& ctx, int size, const Tensor& t, const char* who);

// Sequence parallelism's f and g. sp_gather: this part's tokens [N/size, C] → every part's
// [N, C] (a new activation of ctx); sp_scatter: partial sums [N, C] → this part's tokens of their
// sum [N/size, C] (a new activation). Both need tp.splits_tokens().
Tensor sp_gather(const Context& ctx, TpShard tp, const Tensor& part, const char* who);
Tensor sp_scatter(const Context& ctx, TpShard tp, const Tensor& whole, const char* who);

// The rows of this part out of `tokens` rows: tokens / size; a one-line UserError naming `who`
// when they do not divide.
std::int64_t sp_rows(TpShard tp, std::int64_t tokens, const char* who);

}  // namespace strata::nn
