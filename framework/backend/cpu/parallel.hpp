// How the CPU kernels spread work over threads: OpenMP loops over tasks whose partition depends
// only on the problem shape (never on the thread count), so every result is bitwise the same
// whatever num_threads() is.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "framework/backend/cpu/kernels.hpp"

namespace strata::cpu::detail {

// Number of threads parallel_for will use for n tasks.
inline int team_size(std::int64_t n) {
  return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(num_threads(), n)));
}

// Index of the calling thread inside parallel_for (0 outside), for per-thread scratch.
inline int thread_index() {
  return omp_get_thread_num();
}

// Calls fn(i) once for every i in [0, n), spread over team_size(n) threads, any order. fn must
// not throw (allocate and validate before calling this).
template <class F>
void parallel_for(std::int64_t n, F&& fn) {
  const int nt = team_size(n);
  if (nt <= 1) {
    for (std::int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
  for (std::int64_t i = 0; i < n; ++i) fn(i);
}

// Splits [0, n) into ceil(n / chunk) chunks and calls fn(begin, end) for each, in parallel.
template <class F>
void parallel_chunks(std::int64_t n, std::int64_t chunk, F&& fn) {
  if (n <= 0) return;
  const std::int64_t chunks = (n + chunk - 1) / chunk;
  parallel_for(chunks, [&](std::int64_t c) { fn(c * chunk, std::min(n, (c + 1) * chunk)); });
}

// Keeps the BLAS library single-threaded: the kernels call it from their own threads.
void use_single_threaded_blas();

}  // namespace strata::cpu::detail
