// Ad-hoc timing of one GPT transformer block (forward + backward) built from the CPU kernels, with
// a per-kernel breakdown. Not a test: prints milliseconds.
//   block_bench [B T C NH threads reps]   (defaults 8 256 256 4 <num_threads()> 20)
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "framework/backend/cpu/kernels.hpp"

using namespace strata::cpu;
using Clock = std::chrono::steady_clock;

namespace {

std::map<std::string, double> g_ms, g_cpu;  // kernel -> accumulated wall / process-CPU ms

double cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

template <class F>
void timed(const char* name, F&& f) {
  const auto t0 = Clock::now();
  const double c0 = cpu_ms();
  f();
  g_cpu[name] += cpu_ms() - c0;
  g_ms[name] += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::vector<float> rnd(std::size_t n, float s, unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, s);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const int B = argc > 1 ? std::atoi(argv[1]) : 8, T = argc > 2 ? std::atoi(argv[2]) : 256;
  const int C = argc > 3 ? std::atoi(argv[3]) : 256, NH = argc > 4 ? std::atoi(argv[4]) : 4;
  if (argc > 5) set_num_threads(std::atoi(argv[5]));
  const int reps = argc > 6 ? std::atoi(argv[6]) : 20;
  const int N = B * T;
  const std::size_t nc = static_cast<std::size_t>(N) * C;
  auto x = rnd(nc, 1.0f, 1);
  auto w1 = rnd(C, 0.1f, 2), b1 = rnd(C, 0.1f, 3), w2 = rnd(C, 0.1f, 4), b2 = rnd(C, 0.1f, 5);
  for (auto& v : w1) v += 1.0f;
  for (auto& v : w2) v += 1.0f;
  auto Wqkv = rnd(3 * C * C, 0.02f, 6), bqkv = rnd(3 * C, 0.02f, 7);
  auto Wp = rnd(C * C, 0.02f, 8), bp = rnd(C, 0.02f, 9);
  auto Wfc = rnd(4 * C * C, 0.02f, 10), bfc = rnd(4 * C, 0.02f, 11);
  auto Wfc2 = rnd(4 * C * C, 0.02f, 12), bfc2 = rnd(C, 0.02f, 13);
  std::vector<float> h1(nc), m1(N), r1(N), qkv(3 * nc), att(nc),
      lse(static_cast<std::size_t>(B) * NH * T), proj(nc), x1(nc), h2(nc), m2(N), r2(N), fc(4 * nc),
      g(4 * nc), y(nc);
  auto dy = rnd(nc, 1.0f, 14);
  std::vector<float> dg(4 * nc), dh2(nc), dx1(nc), datt(nc), dqkv(3 * nc), dh1(nc), dx(nc);
  std::vector<float> dWqkv(Wqkv.size()), dbqkv(bqkv.size()), dWp(Wp.size()), dbp(bp.size()),
      dWfc(Wfc.size()), dbfc(bfc.size()), dWfc2(Wfc2.size()), dbfc2(bfc2.size()), dw1(C), db1(C),
      dw2(C), db2(C);

  double best = 1e30, total = 0.0;
  for (int it = 0; it < reps + 3; ++it) {
    if (it == 3) g_ms.clear(), g_cpu.clear();
    const auto t0 = Clock::now();
    // forward
    timed("layernorm_fwd", [&] {
      layernorm_forward(x.data(), w1.data(), b1.data(), h1.data(), m1.data(), r1.data(), N, C,
                        1e-5f);
    });
    timed("linear_fwd",
          [&] { linear_forward(h1.data(), Wqkv.data(), bqkv.data(), qkv.data(), N, C, 3 * C); });
    timed("attention_fwd",
          [&] { attention_forward(qkv.data(), att.data(), lse.data(), B, T, C, NH); });
    timed("linear_fwd",
          [&] { linear_forward(att.data(), Wp.data(), bp.data(), proj.data(), N, C, C); });
    timed("add", [&] { add(x.data(), proj.data(), x1.data(), nc); });
    timed("layernorm_fwd", [&] {
      layernorm_forward(x1.data(), w2.data(), b2.data(), h2.data(), m2.data(), r2.data(), N, C,
                        1e-5f);
    });
    timed("linear_fwd",
          [&] { linear_forward(h2.data(), Wfc.data(), bfc.data(), fc.data(), N, C, 4 * C); });
    timed("gelu_fwd", [&] { gelu_forward(fc.data(), g.data(), 4 * nc); });
    timed("linear_fwd",
          [&] { linear_forward(g.data(), Wfc2.data(), bfc2.data(), y.data(), N, 4 * C, C); });
    timed("add", [&] { add_inplace(y.data(), x1.data(), nc); });
    // backward
    timed("linear_bwd", [&] {
      linear_backward(g.data(), Wfc2.data(), dy.data(), dg.data(), dWfc2.data(), dbfc2.data(), N,
                      4 * C, C);
    });
    timed("gelu_bwd", [&] { gelu_backward(fc.data(), dg.data(), dg.data(), 4 * nc); });
    timed("linear_bwd", [&] {
      linear_backward(h2.data(), Wfc.data(), dg.data(), dh2.data(), dWfc.data(), dbfc.data(), N, C,
                      4 * C);
    });
    timed("layernorm_bwd", [&] {
      layernorm_backward(dh2.data(), x1.data(), w2.data(), m2.data(), r2.data(), dx1.data(),
                         dw2.data(), db2.data(), N, C);
    });
    timed("add", [&] { add_inplace(dx1.data(), dy.data(), nc); });
    timed("linear_bwd", [&] {
      linear_backward(att.data(), Wp.data(), dx1.data(), datt.data(), dWp.data(), dbp.data(), N, C,
                      C);
    });
    timed("attention_bwd", [&] {
      attention_backward(qkv.data(), att.data(), lse.data(), datt.data(), dqkv.data(), B, T, C, NH);
    });
    timed("linear_bwd", [&] {
      linear_backward(h1.data(), Wqkv.data(), dqkv.data(), dh1.data(), dWqkv.data(), dbqkv.data(),
                      N, C, 3 * C);
    });
    timed("layernorm_bwd", [&] {
      layernorm_backward(dh1.data(), x.data(), w1.data(), m1.data(), r1.data(), dx.data(),
                         dw1.data(), db1.data(), N, C);
    });
    timed("add", [&] { add_inplace(dx.data(), dx1.data(), nc); });
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (it >= 3) {
      best = std::min(best, ms);
      total += ms;
    }
  }
  std::printf("block B=%d T=%d C=%d NH=%d threads=%d: best %.2f ms, mean %.2f ms\n", B, T, C, NH,
              num_threads(), best, total / reps);
  double cpu_total = 0.0;
  for (const auto& [k, v] : g_ms) {
    std::printf("  %-14s %7.2f ms/iter wall %7.2f ms/iter cpu\n", k.c_str(), v / reps,
                g_cpu[k] / reps);
    cpu_total += g_cpu[k] / reps;
  }
  std::printf("  total cpu %.2f ms/iter (all threads)\n", cpu_total);
  return 0;
}
