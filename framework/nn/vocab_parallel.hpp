// Vocabulary-parallel softmax cross-entropy: each tensor-parallel rank holds the logits of its
// slice of the vocabulary; the row maxima are reduced (max), then the sums of exponentials and
// the target logits (sum) over the group, so the full logits never exist on one rank.
#pragma once

#include <cstdint>

#include "framework/nn/context.hpp"

namespace strata::nn {

// logits [N, V/tp] of the vocabulary slice starting at vocab_start; targets i32 [N] (< 0:
// ignored). Writes lse [N] f32 (the whole row's log-sum-exp, equal on every rank) and the sum of
// the valid rows' losses (equal on every rank) into sum (f64 [1] on the logits' device, not read).
void vocab_parallel_cross_entropy(const Context& ctx, int tp_size, const Tensor& logits,
                                  const Tensor& targets, std::int64_t vocab_start,
                                  const Tensor& lse, const Tensor& sum);

}  // namespace strata::nn
