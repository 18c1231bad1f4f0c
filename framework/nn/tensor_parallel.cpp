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

}  // namespace strata::nn
