// Autoregressive sampling from a GPT with temperature and top-k, driven by a seeded Philox
// stream so a sample is reproducible.
#pragma once

#include <cstdint>
#include <vector>

#include "framework/core/rng.hpp"
#include "framework/nn/gpt.hpp"

namespace strata::nn {

struct SampleOptions {
  int max_new_tokens = 200;
  float temperature = 0.8f;  // <= 0: greedy
  int top_k = 40;            // <= 0: no truncation
};

// Continues `prompt` (at least one token) and returns only the new tokens.
std::vector<std::int32_t> generate(Gpt& model, Context& ctx, std::vector<std::int32_t> prompt,
                                   const SampleOptions& opts, Philox& rng);

// Picks a token from logits[V] with temperature and top-k (exposed for tests).
std::int32_t sample_token(const float* logits, int V, const SampleOptions& opts, Philox& rng);

}  // namespace strata::nn
