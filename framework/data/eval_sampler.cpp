#include "framework/data/eval_sampler.hpp"

#include <algorithm>
#include <cstring>

#include "framework/core/error.hpp"
#include "framework/data/sampler.hpp"

namespace strata::data {

EvalSampler::EvalSampler(const TokenFile& file, int seq_len, int micro_batch, int dp_size,
                         int dp_rank, std::uint64_t max_windows)
    : file_(&file), seq_len_(seq_len), micro_(micro_batch), dp_size_(dp_size), dp_rank_(dp_rank) {
  if (seq_len < 1) user_fail("data", "sequence length must be >= 1, got {}", seq_len);
  if (micro_batch < 1) user_fail("data", "micro-batch size must be >= 1, got {}", micro_batch);
  if (dp_size < 1 || dp_rank < 0 || dp_rank >= dp_size) {
    user_fail("data", "data-parallel rank {} is not in [0, {})", dp_rank, dp_size);
  }
  windows_ = window_count(file.size(), seq_len);
  if (windows_ == 0) {
    user_fail("data",
              "evaluation file '{}' holds {} tokens, too few for one window: sequence length "
              "{} needs at least {} tokens",
              file.path(), file.size(), seq_len, static_cast<std::uint64_t>(seq_len) + 1);
  }
  if (max_windows > 0) windows_ = std::min(windows_, max_windows);
}

std::uint64_t EvalSampler::steps() const {
  const std::uint64_t per_call = static_cast<std::uint64_t>(dp_size_) * micro_;
  return (windows_ + per_call - 1) / per_call;
}

int EvalSampler::next(std::int32_t* inputs, std::int32_t* targets) {
  const std::size_t t = static_cast<std::size_t>(seq_len_);
  const std::uint64_t base = position_ + static_cast<std::uint64_t>(dp_rank_) * micro_;
  int real = 0;
  for (int i = 0; i < micro_; ++i) {
    const std::uint64_t w = base + static_cast<std::uint64_t>(i);
    std::int32_t* in = inputs + static_cast<std::size_t>(i) * t;
    std::int32_t* tg = targets + static_cast<std::size_t>(i) * t;
    if (w < windows_) {
      file_->read(w * t, t, in);
      file_->read(w * t + 1, t, tg);
      ++real;
    } else {
      std::memset(in, 0, t * sizeof(std::int32_t));
      std::memset(tg, 0, t * sizeof(std::int32_t));
    }
  }
  position_ = std::min(windows_, position_ + static_cast<std::uint64_t>(dp_size_) * micro_);
  return real;
}

}  // namespace strata::data
