#include "examples/mlp/blobs.hpp"

#include <vector>

#include "framework/core/error.hpp"
#include "framework/core/rng.hpp"

namespace mlp {

using namespace strata;

Blobs::Blobs(int inputs, int classes, std::uint64_t samples, std::uint64_t seed, int micro_batch,
             int dp_size, int dp_rank)
    : inputs_(inputs), classes_(classes), samples_(samples), seed_(seed), micro_(micro_batch),
      dp_size_(dp_size), dp_rank_(dp_rank) {
  if (inputs < 1 || classes < 2 || samples < 1)
    user_fail("mlp", "the data set needs >= 1 input, >= 2 classes and >= 1 sample (got {}, {}, {})",
              inputs, classes, samples);
}

std::int32_t Blobs::sample(std::uint64_t i, float* x) const {
  // Blob centres from the seed; the sample's label and noise from (seed, i).
  thread_local std::vector<float> centres;
  centres.resize(static_cast<std::size_t>(classes_) * inputs_);
  normal_fill(centres.data(), centres.size(), seed_, "centres", 0, 0.0f, 0.6f);
  Philox r(seed_ + 1, i * (4 * static_cast<std::uint64_t>(inputs_) + 64));  // words per sample
  const auto label = static_cast<std::int32_t>(r.next_below(static_cast<std::uint64_t>(classes_)));
  for (int d = 0; d < inputs_; ++d) x[d] = centres[static_cast<std::size_t>(label) * inputs_ + d] + r.next_normal();
  return label;
}

void Blobs::next(nn::Batch& batch) {
  float* x = batch["x"].data<float>();
  std::int32_t* y = batch["labels"].data<std::int32_t>();
  const std::uint64_t base = position_ + static_cast<std::uint64_t>(dp_rank_) * micro_;
  for (int k = 0; k < micro_; ++k)
    y[k] = sample((base + static_cast<std::uint64_t>(k)) % samples_, x + static_cast<std::size_t>(k) * inputs_);
  position_ += static_cast<std::uint64_t>(dp_size_) * micro_;
}

void Blobs::set_state(const data::SamplerState& s) {
  if (s.epoch != s.position / samples_)
    user_fail("mlp", "the checkpoint's data position {} (epoch {}) does not belong to a set of {} "
              "samples", s.position, s.epoch, samples_);
  position_ = s.position;
}

}  // namespace mlp
