#include "framework/nn/tensor_parallel.hpp"

#include "framework/nn/context.hpp"

namespace strata::nn {

TpComm& tp_comm(const Context& ctx, int size, const char* who) {
  STRATA_CHECK(ctx.tp && ctx.tp->shard().size == size, "nn",
               "{} is split over {} tensor-parallel ranks but the context has {} (the engine sets "
               "Context::tp)", who, size, ctx.tp ? ctx.tp->shard().size : 1);
  return *ctx.tp;
}

void tp_all_reduce(const Context& ctx, int size, const Tensor& t, const char* who) {
  if (size > 1) tp_comm(ctx, size, who).all_reduce_sum(t);
}

std::int64_t sp_rows(TpShard tp, std::int64_t tokens, const char* who) {
  if (tokens % tp.size != 0)
    user_fail("nn", "{}: {} tokens do not split over tensor_parallel_size {} with "
              "strata.sequence_parallel (each part holds 1/{} of them); use a sequence length "
              "that is a multiple of {}", who, tokens, tp.size, tp.size, tp.size);
  return tokens / tp.size;
}

Tensor sp_gather(const Context& ctx, TpShard tp, const Tensor& part, const char* who) {
  STRATA_CHECK(tp.splits_tokens() && part.rank() == 2 && part.is_contiguous(), "nn",
               "{}: sequence-parallel gather of {}", who, part.shape().str());
  Tensor whole = ctx.act(Shape{part.dim(0) * tp.size, part.dim(1)}, part.dtype());
  tp_comm(ctx, tp.size, who).all_gather(part, whole);
  return whole;
}

Tensor sp_scatter(const Context& ctx, TpShard tp, const Tensor& whole, const char* who) {
  STRATA_CHECK(tp.splits_tokens() && whole.rank() == 2 && whole.is_contiguous(), "nn",
               "{}: sequence-parallel reduce-scatter of {}", who, whole.shape().str());
  Tensor part = ctx.act(Shape{sp_rows(tp, whole.dim(0), who), whole.dim(1)}, whole.dtype());
  tp_comm(ctx, tp.size, who).reduce_scatter_sum(whole, part);
  return part;
}

}  // namespace strata::nn
