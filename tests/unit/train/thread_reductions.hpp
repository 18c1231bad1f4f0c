// ThreadReductions: the ShardReductions of N trainer shards run by N threads of one process
// (threads standing in for ranks), so that sharded optimizer updates are testable without MPI.
#pragma once

#include <barrier>
#include <span>
#include <vector>

#include "framework/train/trainer.hpp"

namespace strata::train {

// Element-wise sums, "any" and vector sums across the shards of one process (one thread each):
// every shard deposits, all wait, each adds the deposits in shard order (the same bits on all).
class ThreadReductions {
 public:
  explicit ThreadReductions(int n) : n_(n), sync_(n), slots_(static_cast<std::size_t>(n)) {}
  ShardReductions for_shard(int i) {
    ShardReductions r;
    r.sum = [this, i](double v) {
      std::vector<double> x{v};
      reduce(i, x);
      return x[0];
    };
    r.any = [this, i](bool b) {
      std::vector<double> x{b ? 1.0 : 0.0};
      reduce(i, x);
      return x[0] > 0;
    };
    r.sum_vector = [this, i](std::span<double> v) { reduce(i, v); };
    return r;
  }

 private:
  void reduce(int i, std::span<double> v) {
    slots_[static_cast<std::size_t>(i)].assign(v.begin(), v.end());
    sync_.arrive_and_wait();
    for (std::size_t k = 0; k < v.size(); ++k) {
      double s = 0;
      for (int r = 0; r < n_; ++r) s += slots_[static_cast<std::size_t>(r)][k];
      v[k] = s;
    }
    sync_.arrive_and_wait();
  }
  int n_;
  std::barrier<> sync_;
  std::vector<std::vector<double>> slots_;
};

}  // namespace strata::train
