#include "framework/nn/vocab_parallel.hpp"

#include "framework/backend/ops/ops.hpp"

namespace strata::nn {

void vocab_parallel_cross_entropy(const Context& ctx, int tp_size, const Tensor& logits,
                                  const Tensor& targets, std::int64_t vocab_start,
                                  const Tensor& lse, const Tensor& sum) {
  TpComm& comm = tp_comm(ctx, tp_size, "the vocabulary-parallel cross-entropy");
  const std::int64_t N = logits.dim(0);
  Tensor max = ctx.scratch(Shape{N});
  ops::row_max(logits, max);
  comm.all_reduce_max(max);
  // The sums of exponentials and the target logits travel in one all-reduce.
  Tensor sums = ctx.scratch(Shape{2, N});
  const Tensor sum_exp = sums.slice(0, 0, 1).view(Shape{N});
  const Tensor target = sums.slice(0, 1, 2).view(Shape{N});
  ops::row_sum_exp(logits, max, sum_exp);
  ops::target_logit(logits, targets, vocab_start, target);
  comm.all_reduce_sum(sums);
  // lse and the loss's sum from the reduced pieces (on a GPU a kernel; the sum stays there).
  ops::combine_cross_entropy(max, sum_exp, target, targets, lse, sum);
}

}  // namespace strata::nn
