// Runs an element-wise update over [0, n) in fixed-size chunks, spread over OpenMP threads when
// n is large. Elements are independent, so the result does not depend on the thread count.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::optim::detail {

// Elements per chunk: a multiple of every vector width, small enough to stay in L2.
inline constexpr std::size_t kChunk = 16384;
// Below this many elements the update runs on the calling thread only.
inline constexpr std::size_t kParallelMin = std::size_t{1} << 17;

// Calls f(begin, count) for consecutive chunks covering [0, n). f must not throw.
template <typename F>
void for_each_chunk(std::size_t n, F&& f) {
  const std::int64_t chunks = static_cast<std::int64_t>((n + kChunk - 1) / kChunk);
  auto run = [&](std::int64_t c) {
    const std::size_t begin = static_cast<std::size_t>(c) * kChunk;
    const std::size_t count = n - begin < kChunk ? n - begin : kChunk;
    f(begin, count);
  };
  if (n < kParallelMin) {
    for (std::int64_t c = 0; c < chunks; ++c) run(c);
    return;
  }
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
  for (std::int64_t c = 0; c < chunks; ++c) run(c);
}

}  // namespace strata::optim::detail
