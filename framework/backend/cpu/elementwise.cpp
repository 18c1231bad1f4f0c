// Elementwise helpers (add, scale) and the fixed-order sum of squares.
#include <cstddef>
#include <vector>

#include "framework/backend/cpu/kernels.hpp"
#include "framework/backend/cpu/parallel.hpp"
#include "framework/core/convert.hpp"

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
namespace {
// One chunk's sum of squares: 8 interleaved double accumulators combined in a fixed tree.
double chunk_sum_squares(const float* a, std::int64_t n) {
  double acc[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) {
      const double v = a[i + l];
      acc[l] += v * v;
    }
  }
  for (int l = 0; i < n; ++i, ++l) {
    const double v = a[i];
    acc[l] += v * v;
  }
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

// Runs chunk_sum(k, i0, i1) for every kChunk-element chunk in parallel and adds the chunk sums
// in order.
template <class F>
double ordered_chunk_sum(std::size_t n, F&& chunk_sum) {
  const std::int64_t chunks = (static_cast<std::int64_t>(n) + kChunk - 1) / kChunk;
  std::vector<double> part(static_cast<std::size_t>(chunks), 0.0);
  detail::parallel_for(chunks, [&](std::int64_t k) {
    const std::int64_t i0 = k * kChunk;
    const std::int64_t i1 = std::min<std::int64_t>(static_cast<std::int64_t>(n), i0 + kChunk);
    part[static_cast<std::size_t>(k)] = chunk_sum(i0, i1);
  });
  double total = 0.0;
  for (double p : part) total += p;
  return total;
}
}  // namespace

double sum_squares(const float* a, std::size_t n) {
  return ordered_chunk_sum(n, [&](std::int64_t i0, std::int64_t i1) {
    return chunk_sum_squares(a + i0, i1 - i0);
  });
}

double sum_squares(const std::uint16_t* a, DType dtype, std::size_t n) {
  return ordered_chunk_sum(n, [&](std::int64_t i0, std::int64_t i1) {
    thread_local std::vector<float> wide;
    wide.resize(static_cast<std::size_t>(kChunk));
    convert(a + i0, dtype, wide.data(), DType::f32, static_cast<std::size_t>(i1 - i0));
    return chunk_sum_squares(wide.data(), i1 - i0);
  });
}

}  // namespace strata::cpu
