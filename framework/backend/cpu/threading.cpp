// Thread count of the CPU kernels, and keeping OpenBLAS from starting threads of its own.
#include <omp.h>

#include <algorithm>
#include <atomic>

#include "framework/backend/cpu/kernels.hpp"
#include "framework/backend/cpu/parallel.hpp"
#include "framework/core/error.hpp"

// OpenBLAS's thread controls, weak so that another BLAS (without them) still links.
extern "C" {
void openblas_set_num_threads(int n) __attribute__((weak));
int openblas_get_num_threads(void) __attribute__((weak));
}

namespace strata::cpu {
namespace {
std::atomic<int> g_threads{0};  // 0 = not chosen yet
}  // namespace

int num_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    n = std::max(1, omp_get_max_threads());  // OMP_NUM_THREADS, else the hardware concurrency
    g_threads.store(n, std::memory_order_relaxed);
  }
  return n;
}

void set_num_threads(int n) {
  STRATA_CHECK(n >= 1, "cpu", "thread count must be at least 1, got {}", n);
  g_threads.store(n, std::memory_order_relaxed);
  // Other OpenMP loops in the process (the optimizer's chunked updates) use the default team
  // size: keep it equal, so --threads 1 does not still run them on every core.
  omp_set_num_threads(n);
}

namespace detail {

void use_single_threaded_blas() {
  if (openblas_set_num_threads != nullptr && openblas_get_num_threads != nullptr &&
      openblas_get_num_threads() != 1) {
    openblas_set_num_threads(1);
  }
}

}  // namespace detail
}  // namespace strata::cpu
