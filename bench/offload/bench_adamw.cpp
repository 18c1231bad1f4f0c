// CPU AdamW throughput (the optimizer step that offload runs on the host) against (1) the memory
// bandwidth bound for its bytes per parameter, from STREAM-like copy/triad kernels measured in
// the same run on the same threads, and (2) torch.optim.AdamW from /usr/bin/python3 on the same
// threads and size.
//
//   build/release/bench/offload/bench_offload_adamw [--params 33554432] [--threads 2] [--iters 7]
//
// AdamW with the 16-bit copy moves 30 bytes per parameter (reads p, g, m, v: 16; writes p, m, v:
// 12; writes the bf16 copy: 2); without it 28. The bound is the best bandwidth measured by copy,
// triad and a kernel with AdamW's exact access pattern but no math (all vectorised for this CPU,
// same threads), divided by those bytes.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "framework/optim/adamw.hpp"

using namespace strata;
using Clock = std::chrono::steady_clock;

namespace {

struct Free {
  void operator()(void* p) const { std::free(p); }
};
template <typename T>
std::unique_ptr<T[], Free> alloc(std::size_t n) {
  auto* p = static_cast<T*>(std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64));
  return std::unique_ptr<T[], Free>(p);
}

template <typename F>
double median_seconds(int iters, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Runs a Python command and returns its last output line.
std::string run(const std::string& cmd) {
  std::string out, line;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return {};
  char buf[4096];
  while (fgets(buf, sizeof(buf), f)) out += buf;
  pclose(f);
  const auto nl = out.find_last_of('\n', out.size() > 1 ? out.size() - 2 : 0);
  return nl == std::string::npos ? out : out.substr(nl + 1);
}

// Reference kernels, vectorised for the widest ISA this CPU has (chosen at run time).
#define STRATA_BENCH_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

STRATA_BENCH_CLONES void copy_kernel(float* a, const float* b, std::int64_t n) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) a[i] = b[i];
}

STRATA_BENCH_CLONES void triad_kernel(float* a, const float* b, const float* c, std::int64_t n) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) a[i] = b[i] + 3.0f * c[i];
}

// AdamW's traffic with almost no arithmetic: read p, g, m, v; write p, m, v (and a 16-bit copy of
// p when p16 is given): the tightest bound for exactly its bytes.
STRATA_BENCH_CLONES void shape_kernel(float* p, const float* g, float* m, float* v,
                                      std::uint16_t* p16, std::int64_t n) {
  if (p16) {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      const float gi = g[i], pi = p[i] + gi;
      p[i] = pi;
      m[i] += gi;
      v[i] += gi;
      std::uint32_t u;
      std::memcpy(&u, &pi, 4);
      p16[i] = static_cast<std::uint16_t>(u >> 16);
    }
  } else {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      const float gi = g[i];
      p[i] += gi;
      m[i] += gi;
      v[i] += gi;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"CPU AdamW vs memory bandwidth and torch.optim.AdamW"};
  std::size_t n = std::size_t{1} << 25;
  int threads = omp_get_max_threads(), iters = 7;
  std::string python = "/usr/bin/python3";
  bool torch = true;
  app.add_option("--params", n, "parameters per step (default 33554432)");
  app.add_option("--threads", threads, "threads for every side (default: OpenMP's)");
  app.add_option("--iters", iters, "timed repetitions (median)");
  app.add_option("--python", python, "python with torch (default /usr/bin/python3)");
  app.add_flag("!--no-torch", torch, "skip the PyTorch comparison");
  CLI11_PARSE(app, argc, argv);
  omp_set_num_threads(threads);

  auto p = alloc<float>(n), g = alloc<float>(n), m = alloc<float>(n), v = alloc<float>(n);
  auto p16 = alloc<std::uint16_t>(n);
  auto a = alloc<float>(n), b = alloc<float>(n), c = alloc<float>(n);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(n); ++i) {
    p[i] = 0.01f * static_cast<float>(i % 97);
    g[i] = 1e-3f * static_cast<float>(i % 89 - 44);
    m[i] = v[i] = 0;
    p16[i] = 0;
    a[i] = 0;
    b[i] = 1.0f + static_cast<float>(i % 7);
    c[i] = 2.0f;
  }
  const auto N = static_cast<std::int64_t>(n);
  const double t_copy = median_seconds(iters, [&] { copy_kernel(a.get(), b.get(), N); });
  const double t_triad = median_seconds(iters, [&] { triad_kernel(a.get(), b.get(), c.get(), N); });
  const double t_shape16 = median_seconds(iters, [&] { shape_kernel(p.get(), b.get(), m.get(), v.get(), p16.get(), N); });
  const double t_shape32 = median_seconds(iters, [&] { shape_kernel(p.get(), b.get(), m.get(), v.get(), nullptr, N); });
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < N; ++i) m[i] = v[i] = 0;
  const double bw_copy = 8.0 * static_cast<double>(n) / t_copy;    // STREAM counting: 2 × 4 B
  const double bw_triad = 12.0 * static_cast<double>(n) / t_triad;  // 3 × 4 B
  const double bw_shape16 = 30.0 * static_cast<double>(n) / t_shape16;
  const double bw_shape32 = 28.0 * static_cast<double>(n) / t_shape32;
  const double bw16 = std::max({bw_copy, bw_triad, bw_shape16});
  const double bw32 = std::max({bw_copy, bw_triad, bw_shape32});

  optim::AdamWHyper h;
  h.lr = 1e-3;
  h.weight_decay = 0.1;
  std::int64_t step = 0;
  const double t_adamw16 = median_seconds(iters, [&] {
    optim::adamw_step_out16(p.get(), g.get(), m.get(), v.get(), n, h, ++step, 1.0f, p16.get(),
                            DType::bf16);
  });
  const double t_adamw = median_seconds(iters, [&] {
    optim::adamw_step(p.get(), g.get(), m.get(), v.get(), n, h, ++step, 1.0f);
  });
  const double pps16 = static_cast<double>(n) / t_adamw16, pps = static_cast<double>(n) / t_adamw;
  const double bound16 = bw16 / 30.0, bound = bw32 / 28.0;

  std::printf("CPU AdamW, %zu parameters, %d threads, %s path\n", n, threads,
              optim::simd_path_name(optim::best_simd_path()));
  std::printf("  memory bandwidth (same run, same threads): copy %.2f GB/s, triad %.2f GB/s (STREAM "
              "counting); AdamW's access pattern without its math: %.2f GB/s with the 16-bit copy, "
              "%.2f GB/s without\n",
              bw_copy / 1e9, bw_triad / 1e9, bw_shape16 / 1e9, bw_shape32 / 1e9);
  std::printf("  adamw + bf16 copy (30 B/param): %8.1f M params/s = %5.1f%% of the bound %.1f M/s (%.2f GB/s)\n",
              pps16 / 1e6, 100 * pps16 / bound16, bound16 / 1e6, pps16 * 30 / 1e9);
  std::printf("  adamw f32        (28 B/param): %8.1f M params/s = %5.1f%% of the bound %.1f M/s (%.2f GB/s)\n",
              pps / 1e6, 100 * pps / bound, bound / 1e6, pps * 28 / 1e9);
  if (torch) {
    for (bool foreach : {false, true}) {
      const std::string cmd = python + " " + STRATA_BENCH_DIR + "/adamw_torch.py --params " +
                              std::to_string(n) + " --threads " + std::to_string(threads) +
                              " --iters " + std::to_string(iters) + (foreach ? " --foreach" : "") +
                              " 2>&1";
      const std::string line = run(cmd);
      try {
        const auto j = nlohmann::json::parse(line);
        const double tp = j.at("params_per_s").get<double>();
        std::printf("  torch %s AdamW(foreach=%s), %d threads: %8.1f M params/s; Strata (f32 step) is %.2fx\n",
                    j.at("torch").get<std::string>().c_str(), foreach ? "True" : "False",
                    j.at("threads").get<int>(), tp / 1e6, pps / tp);
      } catch (const std::exception&) {
        std::printf("  torch comparison failed: %s\n", line.c_str());
      }
    }
  }
  return 0;
}
