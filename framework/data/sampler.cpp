#include "framework/data/sampler.hpp"

#include "framework/core/error.hpp"

namespace strata::data {

std::uint64_t window_count(std::uint64_t tokens, int seq_len) {
  if (tokens == 0 || seq_len <= 0) return 0;
  return (tokens - 1) / static_cast<std::uint64_t>(seq_len);
}

BatchSampler::BatchSampler(const TokenFile& file, int seq_len, int micro_batch, int dp_size,
                           int dp_rank, bool shuffle, std::uint64_t seed)
    : file_(&file),
      seq_len_(seq_len),
      micro_(micro_batch),
      dp_size_(dp_size),
      dp_rank_(dp_rank),
      shuffle_(shuffle),
      seed_(seed) {
  if (seq_len < 1) user_fail("data", "sequence length must be >= 1, got {}", seq_len);
  if (micro_batch < 1) user_fail("data", "micro-batch size must be >= 1, got {}", micro_batch);
  if (dp_size < 1 || dp_rank < 0 || dp_rank >= dp_size) {
    user_fail("data", "data-parallel rank {} is not in [0, {})", dp_rank, dp_size);
  }
  windows_ = window_count(file.size(), seq_len);
  if (windows_ == 0) {
    user_fail("data",
              "token file '{}' holds {} tokens, too few for one training window: sequence "
              "length {} needs at least {} tokens",
              file.path(), file.size(), seq_len, static_cast<std::uint64_t>(seq_len) + 1);
  }
}

std::uint64_t BatchSampler::window_of_row(std::uint64_t g) const {
  const std::uint64_t e = g / windows_;
  const std::uint64_t j = g % windows_;
  if (!shuffle_) return j;
  if (!perm_ || perm_epoch_ != e) {
    perm_.emplace(windows_, epoch_key(seed_, e));
    perm_epoch_ = e;
  }
  return (*perm_)(j);
}

void BatchSampler::next(std::int32_t* inputs, std::int32_t* targets) {
  const std::uint64_t t = static_cast<std::uint64_t>(seq_len_);
  const std::uint64_t base = position_ + static_cast<std::uint64_t>(dp_rank_) * micro_;
  for (int i = 0; i < micro_; ++i) {
    const std::uint64_t start = first_token_of_row(base + static_cast<std::uint64_t>(i));
    file_->read(start, t, inputs + static_cast<std::size_t>(i) * t);
    file_->read(start + 1, t, targets + static_cast<std::size_t>(i) * t);
  }
  position_ += static_cast<std::uint64_t>(dp_size_) * micro_;
}

void BatchSampler::next(const Tensor& inputs, const Tensor& targets) {
  for (const Tensor* x : {&inputs, &targets}) {
    STRATA_CHECK(x->defined() && x->dtype() == DType::i32 && x->is_contiguous() &&
                     x->device().is_cpu() && x->rank() == 2 && x->dim(0) == micro_ &&
                     x->dim(1) == seq_len_,
                 "data", "sampler output must be a contiguous CPU i32 tensor [{}, {}], got {} {}",
                 micro_, seq_len_, dtype_name(x->dtype()), x->shape().str());
  }
  next(inputs.data<std::int32_t>(), targets.data<std::int32_t>());
}

void BatchSampler::set_state(const SamplerState& s) {
  if (s.epoch != s.position / windows_) {
    user_fail("data",
              "sampler state (position {}, epoch {}) does not match '{}': with {} windows of "
              "{} tokens, position {} is in epoch {} (was the state saved for another dataset or "
              "sequence length?)",
              s.position, s.epoch, file_->path(), windows_, seq_len_, s.position,
              s.position / windows_);
  }
  position_ = s.position;
}

}  // namespace strata::data
