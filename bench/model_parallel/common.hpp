// What the model-parallel benchmarks share: the median of a rank's step times, and micro-batches
// of random tokens for a GPT.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "framework/core/rng.hpp"
#include "framework/nn/batch.hpp"

namespace strata::bench {

inline double median_of(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Fills a GPT micro-batch ("tokens", "targets") with random token ids below `vocab`.
inline void random_tokens(Philox& rng, int vocab, nn::Batch& b) {
  std::int32_t* in = b["tokens"].data<std::int32_t>();
  std::int32_t* tgt = b["targets"].data<std::int32_t>();
  for (std::int64_t i = 0; i < b["tokens"].numel(); ++i) {
    in[i] = static_cast<std::int32_t>(rng.next_below(vocab));
    tgt[i] = static_cast<std::int32_t>(rng.next_below(vocab));
  }
}

}  // namespace strata::bench
