#include "framework/data/eval_sampler.hpp"

#include <algorithm>
#include <cstring>

namespace strata::data {

EvalSampler::EvalSampler(const TokenFile& file, int seq_len, int micro_batch, int dp_size,
                         int dp_rank, std::uint64_t max_windows)
    : w_(file, seq_len, micro_batch, dp_size, dp_rank, "evaluation file") {
  if (max_windows > 0) w_.windows = std::min(w_.windows, max_windows);
}

std::uint64_t EvalSampler::steps() const {
  return (w_.windows + w_.rows_per_step() - 1) / w_.rows_per_step();
}

int EvalSampler::next(std::int32_t* inputs, std::int32_t* targets) {
  const std::size_t t = static_cast<std::size_t>(w_.seq_len);
  const std::uint64_t base = w_.first_row(position_);
  int real = 0;
  for (int i = 0; i < w_.micro; ++i) {
    const std::uint64_t w = base + static_cast<std::uint64_t>(i);
    if (w < w_.windows) {
      w_.read_row(w, i, inputs, targets);
      ++real;
    } else {
      std::memset(inputs + static_cast<std::size_t>(i) * t, 0, t * sizeof(std::int32_t));
      std::memset(targets + static_cast<std::size_t>(i) * t, 0, t * sizeof(std::int32_t));
    }
  }
  position_ = std::min(w_.windows, position_ + w_.rows_per_step());
  return real;
}

}  // namespace strata::data
