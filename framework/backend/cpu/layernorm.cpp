// LayerNorm forward/backward: rows in parallel; dw/db reduced over fixed row chunks, then over
// the chunks in order, so the sums do not depend on the thread count.
#include <algorithm>
#include <cstddef>
#include <vector>

#include "framework/backend/cpu/isa.hpp"
#include "framework/backend/cpu/kernels.hpp"
#include "framework/backend/cpu/parallel.hpp"
#include "framework/core/error.hpp"

namespace strata::cpu {
namespace {

// Rows per task: about 64 KiB of input each.
std::int64_t ln_row_chunk(int C) {
  return std::max<std::int64_t>(1, 16384 / std::max(1, C));
}

}  // namespace

void layernorm_forward(const float* x, const float* w, const float* b, float* y, float* mean,
                       float* rstd, int N, int C, float eps) {
  STRATA_CHECK(N >= 0 && C > 0, "cpu", "layernorm: bad size N={} C={}", N, C);
  const auto& rk = detail::row_kernels();
  const std::size_t c = static_cast<std::size_t>(C);
  detail::parallel_chunks(N, ln_row_chunk(C), [&](std::int64_t r0, std::int64_t r1) {
    rk.layernorm_forward(x + r0 * c, w, b, y + r0 * c, mean + r0, rstd + r0,
                         static_cast<int>(r1 - r0), C, eps);
  });
}

void layernorm_backward(const float* dy, const float* x, const float* w, const float* mean,
                        const float* rstd, float* dx, float* dw, float* db, int N, int C) {
  STRATA_CHECK(N >= 0 && C > 0, "cpu", "layernorm: bad size N={} C={}", N, C);
  const auto& rk = detail::row_kernels();
  const std::size_t c = static_cast<std::size_t>(C);
  // Fixed chunking of the rows: a function of N only (at most ~256 partial sums per column).
  const std::int64_t chunk = std::max<std::int64_t>(32, (static_cast<std::int64_t>(N) + 255) / 256);
  const std::int64_t chunks = (N + chunk - 1) / chunk;
  std::vector<float> part(static_cast<std::size_t>(chunks) * 2 * c, 0.0f);  // [chunk][dw|db][C]
  detail::parallel_for(chunks, [&](std::int64_t k) {
    const std::int64_t r0 = k * chunk, r1 = std::min<std::int64_t>(N, r0 + chunk);
    float* pw = part.data() + static_cast<std::size_t>(k) * 2 * c;
    rk.layernorm_backward(dy + r0 * c, x + r0 * c, w, mean + r0, rstd + r0, dx + r0 * c,
                          dw ? pw : nullptr, db ? pw + c : nullptr, static_cast<int>(r1 - r0), C);
  });
  if (!dw && !db) return;
  // Column blocks in parallel; inside a column, the chunks in order.
  constexpr std::int64_t kCols = 256;
  detail::parallel_chunks(C, kCols, [&](std::int64_t c0, std::int64_t c1) {
    float sw[kCols] = {}, sb[kCols] = {};
    const std::int64_t n = c1 - c0;
    for (std::int64_t k = 0; k < chunks; ++k) {
      const float* pw = part.data() + static_cast<std::size_t>(k) * 2 * c + c0;
      const float* pb = pw + c;
      for (std::int64_t j = 0; j < n; ++j) {
        sw[j] += pw[j];
        sb[j] += pb[j];
      }
    }
    for (std::int64_t j = 0; j < n; ++j) {
      if (dw) dw[c0 + j] += sw[j];
      if (db) db[c0 + j] += sb[j];
    }
  });
}

}  // namespace strata::cpu
