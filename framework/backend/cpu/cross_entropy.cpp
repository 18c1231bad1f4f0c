// Softmax cross-entropy over rows of logits, with ignored rows (target < 0).
#include <algorithm>
#include <cstddef>
#include <vector>

#include "framework/backend/cpu/isa.hpp"
#include "framework/backend/cpu/kernels.hpp"
#include "framework/backend/cpu/parallel.hpp"
#include "framework/core/error.hpp"

namespace strata::cpu {
namespace {

void check_targets(const std::int32_t* targets, int N, int V) {
  for (int i = 0; i < N; ++i) {
    STRATA_CHECK(targets[i] < V, "cpu",
                 "cross_entropy: target {} of row {} is outside the vocabulary of {}", targets[i],
                 i, V);
  }
}

std::int64_t row_chunk(int V) {
  return std::max<std::int64_t>(1, 16384 / std::max(1, V));
}

}  // namespace

double cross_entropy_forward(const float* logits, const std::int32_t* targets, float* lse, int N,
                             int V) {
  STRATA_CHECK(N >= 0 && V > 0, "cpu", "cross_entropy: bad size N={} V={}", N, V);
  check_targets(targets, N, V);
  const auto& rk = detail::row_kernels();
  const std::size_t v = static_cast<std::size_t>(V);
  std::vector<double> loss(static_cast<std::size_t>(N), 0.0);
  detail::parallel_chunks(N, row_chunk(V), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* row = logits + static_cast<std::size_t>(r) * v;
      const float l = rk.logsumexp(row, V);
      lse[r] = l;
      const std::int32_t t = targets[r];
      if (t >= 0) loss[static_cast<std::size_t>(r)] = static_cast<double>(l) - row[t];
    }
  });
  double total = 0.0;
  for (double x : loss) total += x;
  return total;
}

void cross_entropy_backward(const float* logits, const float* lse, const std::int32_t* targets,
                            float* dlogits, int N, int V, float scale) {
  STRATA_CHECK(N >= 0 && V > 0, "cpu", "cross_entropy: bad size N={} V={}", N, V);
  check_targets(targets, N, V);
  const auto& rk = detail::row_kernels();
  const std::size_t v = static_cast<std::size_t>(V);
  detail::parallel_chunks(N, row_chunk(V), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      float* d = dlogits + static_cast<std::size_t>(r) * v;
      const std::int32_t t = targets[r];
      if (t < 0) {
        std::fill(d, d + v, 0.0f);
        continue;
      }
      rk.softmax_scaled(logits + static_cast<std::size_t>(r) * v, lse[r], scale, d, V);
      d[t] -= scale;
    }
  });
}

}  // namespace strata::cpu
