// Sequences: the example's synthetic data — each sample is P tokens of C channels, a class's
// template plus noise, with the class as its label. Sample i is a pure function of (seed, i), so
// every data-parallel split sees the same global order: global micro-batch k holds samples
// k·N·b .. (k+1)·N·b − 1 and dp rank r takes b of them. state()/set_state() let a checkpoint
// resume at exactly the next sample.
#pragma once

#include <cstdint>
#include <vector>

#include <strata/model.hpp>

namespace mixer {

class Sequences final : public strata::nn::BatchSource {
 public:
  Sequences(int tokens, int channels, int classes, std::uint64_t samples, std::uint64_t seed,
            int micro_batch, int dp_size, int dp_rank);
  void next(strata::nn::Batch& batch) override;
  strata::data::SamplerState state() const override { return {position_, position_ / samples_}; }
  void set_state(const strata::data::SamplerState& s) override;

 private:
  std::int32_t sample(std::uint64_t i, float* x) const;  // x[tokens * channels]; the label

  int size_, classes_;  // size_: tokens * channels
  std::uint64_t samples_, seed_;
  int micro_, dp_size_, dp_rank_;
  std::vector<float> templates_;  // [classes, tokens * channels]
  std::uint64_t position_ = 0;    // samples consumed by all ranks together
};

}  // namespace mixer
