#include "sequences.hpp"

namespace mixer {

using namespace strata;

Sequences::Sequences(int tokens, int channels, int classes, std::uint64_t samples,
                     std::uint64_t seed, int micro_batch, int dp_size, int dp_rank)
    : size_(tokens * channels), classes_(classes), samples_(samples), seed_(seed),
      micro_(micro_batch), dp_size_(dp_size), dp_rank_(dp_rank) {
  if (tokens < 1 || channels < 1 || classes < 2 || samples < 1)
    user_fail("mixer", "the data needs >= 1 token, >= 1 channel, >= 2 classes and >= 1 sample "
              "(got {}, {}, {}, {})", tokens, channels, classes, samples);
  templates_.resize(static_cast<std::size_t>(classes) * size_);
  normal_fill(templates_.data(), templates_.size(), seed, "templates", 0, 0.0f, 0.5f);
}

std::int32_t Sequences::sample(std::uint64_t i, float* x) const {
  Philox r(seed_ + 1, i * (4 * static_cast<std::uint64_t>(size_) + 64));  // words per sample
  const auto label = static_cast<std::int32_t>(r.next_below(static_cast<std::uint64_t>(classes_)));
  const float* t = templates_.data() + static_cast<std::size_t>(label) * size_;
  for (int k = 0; k < size_; ++k) x[k] = t[k] + r.next_normal();
  return label;
}

void Sequences::next(nn::Batch& batch) {
  float* x = batch["x"].data<float>();
  std::int32_t* y = batch["labels"].data<std::int32_t>();
  const std::uint64_t base = position_ + static_cast<std::uint64_t>(dp_rank_) * micro_;
  for (int k = 0; k < micro_; ++k)
    y[k] = sample((base + static_cast<std::uint64_t>(k)) % samples_, x + static_cast<std::size_t>(k) * size_);
  position_ += static_cast<std::uint64_t>(dp_size_) * micro_;
}

void Sequences::set_state(const data::SamplerState& s) {
  if (s.epoch != s.position / samples_)
    user_fail("mixer", "the checkpoint's data position {} (epoch {}) does not belong to a set of {} "
              "samples: resume with the same --samples", s.position, s.epoch, samples_);
  position_ = s.position;
}

}  // namespace mixer
