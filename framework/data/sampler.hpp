// BatchSampler: the training-data order. The token file is cut into non-overlapping windows of
// seq_len+1 tokens; rows are drawn in a documented global order (sequential or shuffled per
// epoch) and each data-parallel rank takes a fixed slice of every micro-batch (docs/data.md).
#pragma once

#include <cstdint>
#include <optional>

#include "framework/core/tensor.hpp"
#include "framework/data/permutation.hpp"
#include "framework/data/sampler_state.hpp"
#include "framework/data/token_file.hpp"

namespace strata::data {

// Number of windows of seq_len+1 tokens (stride seq_len) in a file of `tokens` tokens:
// (tokens - 1) / seq_len, or 0 when tokens == 0.
std::uint64_t window_count(std::uint64_t tokens, int seq_len);

class BatchSampler {
 public:
  // `file` must outlive the sampler. Throws UserError("data") when the file holds less than
  // one window (seq_len + 1 tokens) or the arguments are invalid.
  BatchSampler(const TokenFile& file, int seq_len, int micro_batch, int dp_size = 1,
               int dp_rank = 0, bool shuffle = false, std::uint64_t seed = 0);

  // Fills this rank's next micro-batch: inputs and targets are [micro_batch, seq_len] row-major.
  // Row i holds global row g = position + dp_rank*micro_batch + i; then position advances by
  // dp_size*micro_batch (every rank's rows).
  void next(std::int32_t* inputs, std::int32_t* targets);
  // Same, into contiguous CPU i32 tensors of shape [micro_batch, seq_len].
  void next(const Tensor& inputs, const Tensor& targets);

  // Window (index into the file's windows) read by global row g, and its first token.
  std::uint64_t window_of_row(std::uint64_t g) const;
  std::uint64_t first_token_of_row(std::uint64_t g) const {
    return window_of_row(g) * static_cast<std::uint64_t>(seq_len_);
  }

  SamplerState state() const { return {position_, position_ / windows_}; }
  // Resumes exactly where `s` was taken. Throws UserError when s.epoch disagrees with
  // s.position / windows() (the state belongs to another dataset or seq_len).
  void set_state(const SamplerState& s);

  std::uint64_t windows() const { return windows_; }
  std::uint64_t epoch() const { return position_ / windows_; }
  int seq_len() const { return seq_len_; }
  int micro_batch() const { return micro_; }
  int dp_size() const { return dp_size_; }
  int dp_rank() const { return dp_rank_; }
  bool shuffle() const { return shuffle_; }
  std::uint64_t seed() const { return seed_; }

 private:
  const TokenFile* file_;
  int seq_len_, micro_, dp_size_, dp_rank_;
  bool shuffle_;
  std::uint64_t seed_;
  std::uint64_t windows_;
  std::uint64_t position_ = 0;
  mutable std::optional<KeyedPermutation> perm_;  // the shuffle of epoch perm_epoch_
  mutable std::uint64_t perm_epoch_ = 0;
};

}  // namespace strata::data
