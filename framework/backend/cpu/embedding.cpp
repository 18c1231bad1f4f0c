// Token + position embedding forward/backward. The backward groups rows by token bucket (a
// fixed function of the token id) so each dwte row is summed in row order by exactly one task.
#include <algorithm>
#include <cstddef>
#include <vector>

#include "framework/backend/cpu/kernels.hpp"
#include "framework/backend/cpu/parallel.hpp"
#include "framework/core/error.hpp"

namespace strata::cpu {
namespace {

void check_tokens(const std::int32_t* tokens, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    STRATA_CHECK(tokens[i] >= 0, "cpu", "embedding: token {} at position {} is negative", tokens[i],
                 i);
  }
}

}  // namespace

void embedding_forward(const std::int32_t* tokens, const float* wte, const float* wpe, float* out,
                       int B, int T, int C, std::int64_t vocab_start, std::int64_t vocab_rows) {
  STRATA_CHECK(B >= 0 && T >= 0 && C >= 0, "cpu", "embedding: bad size B={} T={} C={}", B, T, C);
  const std::int64_t N = static_cast<std::int64_t>(B) * T;
  check_tokens(tokens, N);
  const std::size_t c = static_cast<std::size_t>(C);
  const std::int64_t chunk = std::max<std::int64_t>(1, 16384 / std::max(1, C));
  detail::parallel_chunks(N, chunk, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t k = tokens[r] - vocab_start;
      const float* e = k >= 0 && k < vocab_rows ? wte + static_cast<std::size_t>(k) * c : nullptr;
      const float* p = wpe ? wpe + static_cast<std::size_t>(r % T) * c : nullptr;
      float* o = out + static_cast<std::size_t>(r) * c;
      for (std::size_t j = 0; j < c; ++j) o[j] = (e ? e[j] : 0.0f) + (p ? p[j] : 0.0f);
    }
  });
}

void embedding_backward(const std::int32_t* tokens, const float* dout, float* dwte, float* dwpe,
                        int B, int T, int C, std::int64_t vocab_start, std::int64_t vocab_rows) {
  STRATA_CHECK(B >= 0 && T >= 0 && C >= 0, "cpu", "embedding: bad size B={} T={} C={}", B, T, C);
  const std::int64_t N = static_cast<std::int64_t>(B) * T;
  check_tokens(tokens, N);
  const std::size_t c = static_cast<std::size_t>(C);

  // Rows bucketed by token % kBuckets, each bucket keeping row order (counting sort).
  constexpr int kBuckets = 64;
  std::vector<std::int64_t> start(kBuckets + 1, 0), rows(static_cast<std::size_t>(N));
  for (std::int64_t r = 0; r < N; ++r) ++start[tokens[r] % kBuckets + 1];
  for (int k = 0; k < kBuckets; ++k) start[k + 1] += start[k];
  {
    std::vector<std::int64_t> fill(start.begin(), start.end() - 1);
    for (std::int64_t r = 0; r < N; ++r)
      rows[static_cast<std::size_t>(fill[tokens[r] % kBuckets]++)] = r;
  }
  // Tasks 0..kBuckets-1: dwte buckets; then dwpe in chunks of positions.
  const std::int64_t pos_chunk = std::max<std::int64_t>(1, 16384 / std::max(1, C));
  const std::int64_t pos_tasks = dwpe ? (T + pos_chunk - 1) / pos_chunk : 0;
  detail::parallel_for(kBuckets + pos_tasks, [&](std::int64_t task) {
    if (task < kBuckets) {
      if (!dwte) return;
      for (std::int64_t i = start[task]; i < start[task + 1]; ++i) {
        const std::int64_t r = rows[static_cast<std::size_t>(i)];
        const std::int64_t k = tokens[r] - vocab_start;
        if (k < 0 || k >= vocab_rows) continue;  // another slice's token
        float* w = dwte + static_cast<std::size_t>(k) * c;
        const float* g = dout + static_cast<std::size_t>(r) * c;
        for (std::size_t j = 0; j < c; ++j) w[j] += g[j];
      }
      return;
    }
    const std::int64_t t0 = (task - kBuckets) * pos_chunk;
    const std::int64_t t1 = std::min<std::int64_t>(T, t0 + pos_chunk);
    for (std::int64_t t = t0; t < t1; ++t) {
      float* w = dwpe + static_cast<std::size_t>(t) * c;
      for (int b = 0; b < B; ++b) {
        const float* g = dout + (static_cast<std::size_t>(b) * T + t) * c;
        for (std::size_t j = 0; j < c; ++j) w[j] += g[j];
      }
    }
  });
}

}  // namespace strata::cpu
