#include "framework/data/sampler.hpp"

#include "framework/core/error.hpp"

namespace strata::data {

std::uint64_t window_count(std::uint64_t tokens, int seq_len) {
  if (tokens == 0 || seq_len <= 0) return 0;
  return (tokens - 1) / static_cast<std::uint64_t>(seq_len);
}

WindowedFile::WindowedFile(const TokenFile& f, int len, int micro_batch, int ranks, int rank,
                           const char* role)
    : file(&f), seq_len(len), micro(micro_batch), dp_size(ranks), dp_rank(rank) {
  if (seq_len < 1) user_fail("data", "sequence length must be >= 1, got {}", seq_len);
  if (micro < 1) user_fail("data", "micro-batch size must be >= 1, got {}", micro);
  if (dp_size < 1 || dp_rank < 0 || dp_rank >= dp_size) {
    user_fail("data", "data-parallel rank {} is not in [0, {})", dp_rank, dp_size);
  }
  windows = window_count(f.size(), seq_len);
  if (windows == 0) {
    user_fail("data",
              "{} '{}' holds {} tokens, too few for one window: sequence length {} needs at "
              "least {} tokens",
              role, f.path(), f.size(), seq_len, static_cast<std::uint64_t>(seq_len) + 1);
  }
}

void WindowedFile::read_row(std::uint64_t w, int i, std::int32_t* inputs,
                            std::int32_t* targets) const {
  const std::uint64_t t = static_cast<std::uint64_t>(seq_len);
  const std::size_t row = static_cast<std::size_t>(i) * static_cast<std::size_t>(t);
  file->read(w * t, t, inputs + row);
  file->read(w * t + 1, t, targets + row);
}

BatchSampler::BatchSampler(const TokenFile& file, int seq_len, int micro_batch, int dp_size,
                           int dp_rank, bool shuffle, std::uint64_t seed)
    : w_(file, seq_len, micro_batch, dp_size, dp_rank, "token file"),
      shuffle_(shuffle),
      seed_(seed) {}

std::uint64_t BatchSampler::window_of_row(std::uint64_t g) const {
  const std::uint64_t e = g / w_.windows;
  const std::uint64_t j = g % w_.windows;
  if (!shuffle_) return j;
  if (!perm_ || perm_epoch_ != e) {
    perm_.emplace(w_.windows, epoch_key(seed_, e));
    perm_epoch_ = e;
  }
  return (*perm_)(j);
}

void BatchSampler::next(std::int32_t* inputs, std::int32_t* targets) {
  const std::uint64_t base = w_.first_row(position_);
  for (int i = 0; i < w_.micro; ++i)
    w_.read_row(window_of_row(base + static_cast<std::uint64_t>(i)), i, inputs, targets);
  position_ += w_.rows_per_step();
}

void BatchSampler::next(const Tensor& inputs, const Tensor& targets) {
  for (const Tensor* x : {&inputs, &targets}) {
    STRATA_CHECK(x->defined() && x->dtype() == DType::i32 && x->is_contiguous() &&
                     x->device().is_cpu() && x->rank() == 2 && x->dim(0) == w_.micro &&
                     x->dim(1) == w_.seq_len,
                 "data", "sampler output must be a contiguous CPU i32 tensor [{}, {}], got {} {}",
                 w_.micro, w_.seq_len, dtype_name(x->dtype()), x->shape().str());
  }
  next(inputs.data<std::int32_t>(), targets.data<std::int32_t>());
}

void BatchSampler::set_state(const SamplerState& s) {
  if (s.epoch != s.position / w_.windows) {
    user_fail("data",
              "sampler state (position {}, epoch {}) does not match '{}': with {} windows of "
              "{} tokens, position {} is in epoch {} (was the state saved for another dataset or "
              "sequence length?)",
              s.position, s.epoch, w_.file->path(), w_.windows, w_.seq_len, s.position,
              s.position / w_.windows);
  }
  position_ = s.position;
}

}  // namespace strata::data
