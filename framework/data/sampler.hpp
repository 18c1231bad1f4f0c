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

// What BatchSampler and EvalSampler share: a token file cut into windows, read in micro-batches
// of `micro` rows per rank, rank r holding rows r*micro ... r*micro + micro - 1 of each step's
// dp_size*micro. The constructor checks the arguments and throws UserError("data") when the
// file holds less than one window; `role` names the file there ("token file", "evaluation file").
struct WindowedFile {
  WindowedFile(const TokenFile& file, int seq_len, int micro_batch, int dp_size, int dp_rank,
               const char* role);
  // Window w's tokens into row i of inputs, the tokens after them into row i of targets
  // ([micro, seq_len] each).
  void read_row(std::uint64_t w, int i, std::int32_t* inputs, std::int32_t* targets) const;
  // Global row of this rank's first row in the step that starts at global row `position`.
  std::uint64_t first_row(std::uint64_t position) const {
    return position + static_cast<std::uint64_t>(dp_rank) * micro;
  }
  std::uint64_t rows_per_step() const { return static_cast<std::uint64_t>(dp_size) * micro; }

  const TokenFile* file;
  int seq_len, micro, dp_size, dp_rank;
  std::uint64_t windows;
};

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
    return window_of_row(g) * static_cast<std::uint64_t>(w_.seq_len);
  }

  SamplerState state() const { return {position_, position_ / w_.windows}; }
  // Resumes exactly where `s` was taken. Throws UserError when s.epoch disagrees with
  // s.position / windows() (the state belongs to another dataset or seq_len).
  void set_state(const SamplerState& s);

  std::uint64_t windows() const { return w_.windows; }
  std::uint64_t epoch() const { return position_ / w_.windows; }
  int seq_len() const { return w_.seq_len; }
  int micro_batch() const { return w_.micro; }
  int dp_size() const { return w_.dp_size; }
  int dp_rank() const { return w_.dp_rank; }
  bool shuffle() const { return shuffle_; }
  std::uint64_t seed() const { return seed_; }

 private:
  WindowedFile w_;
  bool shuffle_;
  std::uint64_t seed_;
  std::uint64_t position_ = 0;
  mutable std::optional<KeyedPermutation> perm_;  // the shuffle of epoch perm_epoch_
  mutable std::uint64_t perm_epoch_ = 0;
};

}  // namespace strata::data
