// Blobs: the synthetic data set of the example — K Gaussian blobs in D dimensions, the label is
// the blob. Sample i is a pure function of (seed, i), so every data-parallel split sees the same
// global order: global micro-batch k holds samples k·N·b .. (k+1)·N·b − 1 (modulo the set's size)
// and dp rank r takes b of them, as the GPT's token sampler does.
#pragma once

#include <cstdint>

#include "framework/nn/batch.hpp"

namespace mlp {

class Blobs final : public strata::nn::BatchSource {
 public:
  Blobs(int inputs, int classes, std::uint64_t samples, std::uint64_t seed, int micro_batch,
        int dp_size, int dp_rank);
  void next(strata::nn::Batch& batch) override;
  strata::data::SamplerState state() const override { return {position_, position_ / samples_}; }
  void set_state(const strata::data::SamplerState& s) override;
  // Sample i: features into x[inputs], returns its label.
  std::int32_t sample(std::uint64_t i, float* x) const;
  std::uint64_t size() const { return samples_; }

 private:
  int inputs_, classes_;
  std::uint64_t samples_, seed_;
  int micro_, dp_size_, dp_rank_;
  std::uint64_t position_ = 0;  // samples consumed by all ranks together
};

}  // namespace mlp
