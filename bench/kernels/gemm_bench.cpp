// Ad-hoc GFLOPS of strata::cpu::matmul on the GPT block's shapes (set STRATA_CPU_GEMM=blas to
// time the OpenBLAS path instead). Process CPU time, so it is meaningful on a busy machine.
//   gemm_bench [threads reps]
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "framework/backend/cpu/kernels.hpp"

namespace {
double cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) strata::cpu::set_num_threads(std::atoi(argv[1]));
  const int reps = argc > 2 ? std::atoi(argv[2]) : 10;
  struct S {
    const char* what;
    int M, N, K;
    bool ta, tb;
  };
  const S shapes[] = {
      {"fwd qkv", 2048, 768, 256, false, true}, {"fwd proj", 2048, 256, 256, false, true},
      {"fwd fc", 2048, 1024, 256, false, true}, {"fwd fc2", 2048, 256, 1024, false, true},
      {"dx qkv", 2048, 256, 768, false, false}, {"dx fc2", 2048, 1024, 256, false, false},
      {"dW qkv", 768, 256, 2048, true, false},  {"dW fc", 1024, 256, 2048, true, false},
      {"dW fc2", 256, 1024, 2048, true, false}, {"dW proj", 256, 256, 2048, true, false},
  };
  std::mt19937 g(1);
  std::normal_distribution<float> d;
  double total_flops = 0, total_s = 0;
  for (const S& s : shapes) {
    std::vector<float> A(static_cast<std::size_t>(s.M) * s.K),
        B(static_cast<std::size_t>(s.K) * s.N), C(static_cast<std::size_t>(s.M) * s.N);
    for (auto& x : A) x = d(g);
    for (auto& x : B) x = d(g);
    strata::cpu::matmul(A.data(), B.data(), C.data(), s.M, s.N, s.K, s.ta, s.tb);
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      const double t0 = cpu_s();
      strata::cpu::matmul(A.data(), B.data(), C.data(), s.M, s.N, s.K, s.ta, s.tb, 1.0f, 1.0f);
      best = std::min(best, cpu_s() - t0);
    }
    const double flops = 2.0 * s.M * s.N * s.K;
    total_flops += flops;
    total_s += best;
    std::printf("%-9s M=%4d N=%4d K=%4d ta=%d tb=%d: %6.3f ms cpu  %6.1f GFLOPS/cpu\n", s.what, s.M,
                s.N, s.K, s.ta, s.tb, best * 1e3, flops / best * 1e-9);
  }
  std::printf("all: %.1f GFLOPS per cpu-second\n", total_flops / total_s * 1e-9);
}
