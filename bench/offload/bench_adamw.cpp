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
// same threads), divided by those bytes; bound and AdamW are timed back to back in each round and
// the fraction reported is the median over rounds (the machine's bandwidth drifts).
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
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

// Reference kernels, vectorised for the widest ISA this CPU has (chosen at run time). Not under
// ThreadSanitizer: GCC instruments target_clones' ifunc resolver, which the dynamic loader runs
// before the TSan runtime is set up (SIGSEGV before main; framework/optim/adafactor.cpp).
#if defined(__SANITIZE_THREAD__)
#define STRATA_BENCH_CLONES
#else
#define STRATA_BENCH_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif

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
  app.add_option("--iters", iters, "rounds (each times every kernel 3 times; median)");
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
  optim::AdamWHyper h;
  h.lr = 1e-3;
  h.weight_decay = 0.1;
  std::int64_t step = 0;
  // The machine is shared: its bandwidth drifts between seconds. So every round times the
  // bandwidth kernels and AdamW back to back (median of 3 calls each), and the figure reported
  // is the median over rounds of AdamW's fraction of that round's bound.
  struct Round {
    double bw_copy, bw_triad, bw16, bw32, pps16, pps;
  };
  std::vector<Round> rounds;
  for (int r = 0; r < iters; ++r) {
    Round x{};
    x.bw_copy = 8.0 * double(n) / median_seconds(3, [&] { copy_kernel(a.get(), b.get(), N); });
    x.bw_triad = 12.0 * double(n) / median_seconds(3, [&] { triad_kernel(a.get(), b.get(), c.get(), N); });
    const double shape16 = 30.0 * double(n) / median_seconds(3, [&] { shape_kernel(p.get(), b.get(), m.get(), v.get(), p16.get(), N); });
    const double shape32 = 28.0 * double(n) / median_seconds(3, [&] { shape_kernel(p.get(), b.get(), m.get(), v.get(), nullptr, N); });
    x.bw16 = std::max({x.bw_copy, x.bw_triad, shape16});
    x.bw32 = std::max({x.bw_copy, x.bw_triad, shape32});
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < N; ++i) m[i] = v[i] = 0;
    x.pps16 = double(n) / median_seconds(3, [&] {
      optim::adamw_step_out16(p.get(), g.get(), m.get(), v.get(), n, h, ++step, 1.0f, p16.get(),
                              DType::bf16);
    });
    x.pps = double(n) / median_seconds(3, [&] {
      optim::adamw_step(p.get(), g.get(), m.get(), v.get(), n, h, ++step, 1.0f);
    });
    rounds.push_back(x);
  }
  auto med = [&](auto f) {
    std::vector<double> xs;
    for (const auto& x : rounds) xs.push_back(f(x));
    std::sort(xs.begin(), xs.end());
    return std::array<double, 3>{xs[xs.size() / 2], xs.front(), xs.back()};
  };
  const auto frac16 = med([](const Round& x) { return x.pps16 / (x.bw16 / 30.0); });
  const auto frac32 = med([](const Round& x) { return x.pps / (x.bw32 / 28.0); });
  const double pps16 = med([](const Round& x) { return x.pps16; })[0];
  const double pps = med([](const Round& x) { return x.pps; })[0];

  std::printf("CPU AdamW, %zu parameters, %d threads, %s path, %d rounds (median, min..max)\n", n,
              threads, optim::simd_path_name(optim::best_simd_path()), iters);
  std::printf("  memory bandwidth (same rounds, same threads): copy %.2f GB/s, triad %.2f GB/s (STREAM "
              "counting); bound with AdamW's access pattern: %.2f GB/s with the 16-bit copy, "
              "%.2f GB/s without\n",
              med([](const Round& x) { return x.bw_copy; })[0] / 1e9,
              med([](const Round& x) { return x.bw_triad; })[0] / 1e9,
              med([](const Round& x) { return x.bw16; })[0] / 1e9,
              med([](const Round& x) { return x.bw32; })[0] / 1e9);
  std::printf("  adamw + bf16 copy (30 B/param): %8.1f M params/s = %5.1f%% (%.0f..%.0f%%) of the bound\n",
              pps16 / 1e6, 100 * frac16[0], 100 * frac16[1], 100 * frac16[2]);
  std::printf("  adamw f32        (28 B/param): %8.1f M params/s = %5.1f%% (%.0f..%.0f%%) of the bound\n",
              pps / 1e6, 100 * frac32[0], 100 * frac32[1], 100 * frac32[2]);
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
