#include "framework/nn/generate.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace strata::nn {

std::int32_t sample_token(const float* logits, int V, const SampleOptions& opts, Philox& rng) {
  std::vector<int> idx(static_cast<std::size_t>(V));
  std::iota(idx.begin(), idx.end(), 0);
  if (opts.temperature <= 0.0f)
    return static_cast<std::int32_t>(std::max_element(logits, logits + V) - logits);
  int k = opts.top_k > 0 ? std::min(opts.top_k, V) : V;
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::vector<double> p(static_cast<std::size_t>(k));
  const double mx = logits[idx[0]];
  double sum = 0;
  for (int i = 0; i < k; ++i) sum += p[i] = std::exp((logits[idx[i]] - mx) / opts.temperature);
  double u = static_cast<double>(rng.next_uniform()) * sum;
  for (int i = 0; i < k; ++i) {
    u -= p[i];
    if (u < 0) return idx[i];
  }
  return idx[k - 1];
}

std::vector<std::int32_t> generate(Gpt& model, Context& ctx, std::vector<std::int32_t> seq,
                                   const SampleOptions& opts, Philox& rng) {
  STRATA_CHECK(!seq.empty(), "nn", "generation needs a prompt of at least one token");
  const int V = model.config().vocab_size, W = model.config().block_size;
  std::vector<std::int32_t> out;
  for (int i = 0; i < opts.max_new_tokens; ++i) {
    const int T = static_cast<int>(std::min<std::size_t>(seq.size(), W));
    const std::int32_t* window = seq.data() + (seq.size() - T);
    // The last position's logits as f32 (activations may be 16-bit).
    const std::vector<float> last = model.logits(ctx, window, 1, T).slice(0, T - 1, T).to_vector();
    const std::int32_t t = sample_token(last.data(), V, opts, rng);
    seq.push_back(t);
    out.push_back(t);
  }
  return out;
}

}  // namespace strata::nn
