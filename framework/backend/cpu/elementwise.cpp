// Elementwise helpers (add, scale) and the fixed-order sum of squares.
#include <cstddef>
#include <vector>

#include "framework/backend/cpu/kernels.hpp"
#include "framework/backend/cpu/parallel.hpp"

namespace strata::cpu {
namespace {
constexpr std::int64_t kChunk = 32768;  // elements per task
}  // namespace

void add(const float* a, const float* b, float* out, std::size_t n) {
  detail::parallel_chunks(static_cast<std::int64_t>(n), kChunk,
                          [&](std::int64_t i0, std::int64_t i1) {
                            for (std::int64_t i = i0; i < i1; ++i) out[i] = a[i] + b[i];
                          });
}

void add_inplace(float* a, const float* b, std::size_t n) {
  detail::parallel_chunks(static_cast<std::int64_t>(n), kChunk,
                          [&](std::int64_t i0, std::int64_t i1) {
                            for (std::int64_t i = i0; i < i1; ++i) a[i] += b[i];
                          });
}

void scale_inplace(float* a, float s, std::size_t n) {
  detail::parallel_chunks(static_cast<std::int64_t>(n), kChunk,
                          [&](std::int64_t i0, std::int64_t i1) {
                            for (std::int64_t i = i0; i < i1; ++i) a[i] *= s;
                          });
}

// Each chunk of kChunk elements is summed with 8 interleaved double accumulators combined in a
// fixed tree, then the chunk sums are added in order: the same bits for any thread count.
double sum_squares(const float* a, std::size_t n) {
  const std::int64_t chunks = (static_cast<std::int64_t>(n) + kChunk - 1) / kChunk;
  std::vector<double> part(static_cast<std::size_t>(chunks), 0.0);
  detail::parallel_for(chunks, [&](std::int64_t k) {
    const std::int64_t i0 = k * kChunk;
    const std::int64_t i1 = std::min<std::int64_t>(static_cast<std::int64_t>(n), i0 + kChunk);
    double acc[8] = {};
    std::int64_t i = i0;
    for (; i + 8 <= i1; i += 8) {
      for (int l = 0; l < 8; ++l) {
        const double v = a[i + l];
        acc[l] += v * v;
      }
    }
    for (int l = 0; i < i1; ++i, ++l) {
      const double v = a[i];
      acc[l] += v * v;
    }
    part[static_cast<std::size_t>(k)] =
        ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
  });
  double total = 0.0;
  for (double p : part) total += p;
  return total;
}

}  // namespace strata::cpu
