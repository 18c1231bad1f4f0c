// How the trainer combines per-shard numbers when each process owns only a slice of every unit
// (ZeRO). framework/ knows nothing of ranks: the parallel engine supplies the collectives here; the
// defaults are for a trainer that owns everything. Which of them an optimizer needs is part of its
// declaration (optim::Declaration: shard_sums, compressed_exchange).
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "framework/optim/onebit_adam.hpp"

namespace strata::train {

struct ShardReductions {
  // The sum of squares for the global gradient norm, and "did any shard overflow".
  std::function<double(double)> sum = [](double v) { return v; };
  std::function<bool(bool)> any = [](bool b) { return b; };
  // Element-wise sum over shards, in place (an optimizer's partial sums over the shards of a
  // parameter: Adafactor's row/column statistics, LAMB's norms); every shard must end with bitwise
  // the same values.
  std::function<void(std::span<double>)> sum_vector = [](std::span<double>) {};
  // Units whose parameters another process also holds and counts (the copy of a tied embedding
  // on a pipeline's last stage): left out of the gradient norm so that they count once.
  std::vector<std::size_t> counted_elsewhere;
  // False on tensor-parallel parts other than the first: the parameters that are not split
  // (placement replicated, equal on every part) are left out of this part's gradient norm.
  bool count_replicated = true;
  // The compressed exchange (optimizers declaring compressed_exchange: 1-bit Adam, 1-bit LAMB):
  // the data-parallel ranks whose momenta compressed_average averages in place
  // (optim::ErrorFeedbackTensor; the error buffers are sized for `ranks`). ranks 1: not called.
  int ranks = 1;
  std::function<void(std::span<const optim::ErrorFeedbackTensor>)> compressed_average;
};

}  // namespace strata::train
