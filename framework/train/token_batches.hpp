// TokenBatches: a language model's micro-batches from a token file — data::BatchSampler's windows
// as the "tokens" and "targets" fields of an nn::Batch (the GPT's batch_fields).
#pragma once

#include "framework/data/sampler.hpp"
#include "framework/nn/batch.hpp"

namespace strata::train {

class TokenBatches final : public nn::BatchSource {
 public:
  // `file` must outlive this; see data::BatchSampler for the order and the dp split.
  TokenBatches(const data::TokenFile& file, int seq_len, int micro_batch, int dp_size, int dp_rank,
               bool shuffle, std::uint64_t seed)
      : sampler_(file, seq_len, micro_batch, dp_size, dp_rank, shuffle, seed) {}
  void next(nn::Batch& batch) override { sampler_.next(batch["tokens"], batch["targets"]); }
  data::SamplerState state() const override { return sampler_.state(); }
  void set_state(const data::SamplerState& s) override { sampler_.set_state(s); }
  const data::BatchSampler& sampler() const { return sampler_; }

 private:
  data::BatchSampler sampler_;
};

}  // namespace strata::train
