// AdamW: bitwise equal to PyTorch on known values, every SIMD path and thread split equal to the
// scalar reference, close to a double-precision evaluation, and the bf16/f16 copies RNE-exact.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "framework/core/error.hpp"
#include "framework/core/half.hpp"
#include "framework/optim/adamw.hpp"

namespace strata::optim {
namespace {

constexpr std::size_t kN = 19;  // > 16 so AVX-512 and AVX2 both run a vector body and a tail

// The inputs of the PyTorch script below, from integer formulas (exact in float32).
std::vector<float> init_params() {
  std::vector<float> p(kN);
  for (std::size_t i = 0; i < kN; ++i) p[i] = static_cast<float>((static_cast<int>(i * 37 % 19) - 9) / 8.0);
  return p;
}
std::vector<float> grads(int k) {  // gradient of step k+1
  const double scale[] = {1.0, 1.0 / 64, 4.0};
  std::vector<float> g(kN);
  for (std::size_t i = 0; i < kN; ++i)
    g[i] = static_cast<float>((static_cast<int>(i * (k + 3) * 13 % 23) - 11) / 16.0 * scale[k]);
  return g;
}

// Generated with Debian's python3-torch 1.13 (AVX2 kernels) by /usr/bin/python3:
//   N = 19
//   def inputs(k):  # k = -1: params; k = 0,1,2: gradient of step k+1
//       if k < 0: return torch.tensor([((i*37 % 19) - 9) / 8.0 for i in range(N)])
//       scale = [1.0, 1.0/64, 4.0][k]
//       return torch.tensor([((i*(k+3)*13 % 23) - 11) / 16.0 * scale for i in range(N)])
//   def adamw(lr, b1, b2, eps, wd):  # torch 2.x _single_tensor_adamw (1.13's uses mul_.add_)
//       p = inputs(-1); m = torch.zeros(N); v = torch.zeros(N)
//       for step in (1, 2, 3):
//           g = inputs(step - 1)
//           p.mul_(1 - lr * wd)
//           m.lerp_(g, 1 - b1)
//           v.mul_(b2).addcmul_(g, g, value=1 - b2)
//           bc1 = 1 - b1 ** step; bc2 = 1 - b2 ** step
//           denom = (v.sqrt() / math.sqrt(bc2)).add_(eps)
//           p.addcdiv_(m, denom, value=-(lr / bc1))
//       return p, m, v          # printed as float32 bit patterns
// kAdamW*: adamw(1e-2, 0.9, 0.999, 1e-8, 0.1)
const std::uint32_t kAdamW_p[kN] = {0xbf8c7672, 0x3f8c8a71, 0x3f810365, 0x3f64e1c4, 0x3f3c2df9, 0x3f230fd1, 0x3f0277e8, 0x3eb2e5ca, 0x3e677461, 0x3e19088c, 0xbc5f0882, 0xbe0b0f72, 0xbe73f4c3, 0xbeb8df62, 0xbf060484, 0xbf19ceeb, 0xbf392741, 0xbf623fc1, 0xbf82a8d9};
const std::uint32_t kAdamW_m[kN] = {0xbea9ce98, 0x3e66451f, 0x3db83e78, 0xbd381aa0, 0xbd860624, 0xbe4d28f6, 0x3e757df5, 0x3e629375, 0x3dacb74c, 0xbd4f28f6, 0xbd8d697a, 0xbe50daa0, 0x3e6fba5f, 0x3dcb28f7, 0x3da553f8, 0xbd5def9e, 0xbe43b3b6, 0xbe569e35, 0x3e6c08b4};
const std::uint32_t kAdamW_v[kN] = {0x3c03a269, 0x3b864432, 0x3a851db5, 0x39a594b6, 0x3a9c1f52, 0x3b831290, 0x3bfe114f, 0x3b5d670e, 0x3a179065, 0x3927bd85, 0x3b05508d, 0x3ba7ef38, 0x3bcdf3a3, 0x3b2d014d, 0x39cca91e, 0x39852a76, 0x3b23cf70, 0x3bd4f9c6, 0x3ba6043c};
// kAdamWHalfBeta*: adamw(0.05, 0.3, 0.95, 1e-6, 0.0) — 1 - b1 >= 0.5: lerp's other form.
const std::uint32_t kAdamWHalfBeta_p[kN] = {0xbf7f421c, 0x3f7f998c, 0x3f80d2bf, 0x3f724618, 0x3f3d1f28, 0x3f3d4e6c, 0x3f01cec6, 0x3e7dca80, 0x3e01b9fa, 0x3e71603a, 0xbc7ff86c, 0xbe08ec5e, 0xbe771d8e, 0xbeb9ac99, 0xbf1ebac1, 0xbf01ac5e, 0xbf1f7bcc, 0xbf61ff8a, 0xbf90db44};
const std::uint32_t kAdamWHalfBeta_m[kN] = {0xbffc3b95, 0x3fb596b8, 0x3f313c8b, 0xbd0b45a2, 0xbf2cab44, 0xbfb34e14, 0x3ff2ecac, 0x3fa18bc7, 0x3f07f189, 0xbe47fd71, 0xbf54c127, 0xbfc75906, 0x3fde472b, 0x3f814eb8, 0x3ebfb74c, 0xbeb42a7f, 0xbf8a9da2, 0xbfdbfe87, 0x3fca3c39};
const std::uint32_t kAdamWHalfBeta_v[kN] = {0x3ecc85e7, 0x3e51504c, 0x3d4fb02d, 0x3c69f6e1, 0x3d703252, 0x3e4cccfe, 0x3ec605b9, 0x3e2b6c68, 0x3cec34c1, 0x3bf6d038, 0x3dcbae8c, 0x3e830bbf, 0x3ea0d051, 0x3e05400c, 0x3c9a63d3, 0x3c4fc321, 0x3dfd8231, 0x3ea5c6a9, 0x3e81b0db};

std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }

std::vector<SimdPath> supported_paths() {
  std::vector<SimdPath> out;
  for (SimdPath p : {SimdPath::scalar, SimdPath::avx2, SimdPath::avx512})
    if (simd_path_supported(p)) out.push_back(p);
  return out;
}

void expect_bits(const std::vector<float>& got, const std::uint32_t* want, const char* what,
                 const char* path) {
  for (std::size_t i = 0; i < kN; ++i)
    EXPECT_EQ(bits(got[i]), want[i]) << what << "[" << i << "] on path " << path;
}

void check_known(const AdamWHyper& h, const std::uint32_t* want_p, const std::uint32_t* want_m,
                 const std::uint32_t* want_v, float grad_multiplier) {
  for (SimdPath path : supported_paths()) {
    std::vector<float> p = init_params(), m(kN, 0.0f), v(kN, 0.0f);
    for (int step = 1; step <= 3; ++step) {
      std::vector<float> g = grads(step - 1);
      for (float& x : g) x *= grad_multiplier;  // power of two: exact
      adamw_step_on(path, p.data(), g.data(), m.data(), v.data(), kN, h, step,
                    1.0f / grad_multiplier);
    }
    expect_bits(p, want_p, "param", simd_path_name(path));
    expect_bits(m, want_m, "exp_avg", simd_path_name(path));
    expect_bits(v, want_v, "exp_avg_sq", simd_path_name(path));
  }
  std::vector<float> p = init_params(), m(kN, 0.0f), v(kN, 0.0f);
  for (int step = 1; step <= 3; ++step) {
    std::vector<float> g = grads(step - 1);
    adamw_step_reference(p.data(), g.data(), m.data(), v.data(), kN, h, step);
  }
  expect_bits(p, want_p, "param", "reference");
}

TEST(AdamW, MatchesPyTorchBitwiseOnKnownValues) {
  check_known(AdamWHyper{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1},
              kAdamW_p, kAdamW_m, kAdamW_v, 1.0f);
}

TEST(AdamW, MatchesPyTorchWhenOneMinusBeta1IsAtLeastHalf) {
  check_known(AdamWHyper{.lr = 0.05, .beta1 = 0.3, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.0},
              kAdamWHalfBeta_p, kAdamWHalfBeta_m, kAdamWHalfBeta_v, 1.0f);
}

TEST(AdamW, GradScaleUnscalesBeforeTheUpdate) {
  // Gradients scaled by a loss scale of 1024, unscaled by grad_scale = 1/1024: same bits.
  check_known(AdamWHyper{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1},
              kAdamW_p, kAdamW_m, kAdamW_v, 1024.0f);
}

struct RandomState {
  std::vector<float> p, m, v;
  std::vector<std::vector<float>> g;
};

RandomState random_state(std::size_t n, int steps, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-20, 6);
  RandomState s;
  s.p.resize(n);
  s.m.resize(n);
  s.v.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    s.p[i] = normal(rng);
    s.m[i] = normal(rng) * 0.1f;
    s.v[i] = std::fabs(normal(rng)) * 0.01f;
  }
  s.g.resize(steps);
  for (auto& g : s.g) {
    g.resize(n);
    for (std::size_t i = 0; i < n; ++i) g[i] = std::ldexp(normal(rng), expo(rng));  // wide range
    if (n > 3) g[n / 2] = 0.0f;
  }
  return s;
}

const AdamWHyper kHypers[] = {
    {.lr = 3e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1},
    {.lr = 1e-2, .beta1 = 0.2, .beta2 = 0.999, .eps = 1e-6, .weight_decay = 0.0},
    {.lr = 0.5, .beta1 = 0.0, .beta2 = 0.0, .eps = 0.0, .weight_decay = 0.5},
    {.lr = 1e-3,
     .beta1 = 0.9,
     .beta2 = 0.95,
     .eps = 1e-8,
     .weight_decay = 0.1,
     .bias_correction = false},
};

TEST(AdamW, EveryPathAndThreadSplitEqualsScalarReferenceBitwise) {
  const std::size_t lengths[] = {1, 7, 8, 15, 16, 17, 31, 33, 1001, 16385, 300007};
  for (std::size_t n : lengths) {
    for (const AdamWHyper& h : kHypers) {
      const RandomState init = random_state(n, 3, static_cast<unsigned>(n));
      RandomState ref = init;
      for (int t = 0; t < 3; ++t)
        adamw_step_reference(ref.p.data(), ref.g[t].data(), ref.m.data(), ref.v.data(), n, h,
                             t + 5, 0.75f);
      for (SimdPath path : supported_paths()) {
        RandomState s = init;
        for (int t = 0; t < 3; ++t)
          adamw_step_on(path, s.p.data(), s.g[t].data(), s.m.data(), s.v.data(), n, h, t + 5,
                        0.75f);
        std::size_t bad = 0;
        for (std::size_t i = 0; i < n; ++i)
          bad += bits(s.p[i]) != bits(ref.p[i]) || bits(s.m[i]) != bits(ref.m[i]) ||
                 bits(s.v[i]) != bits(ref.v[i]);
        EXPECT_EQ(bad, 0u) << "n=" << n << " path=" << simd_path_name(path) << " lr=" << h.lr;
      }
      RandomState s = init;  // the public entry point (best path, threads for large n)
      for (int t = 0; t < 3; ++t)
        adamw_step(s.p.data(), s.g[t].data(), s.m.data(), s.v.data(), n, h, t + 5, 0.75f);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(bits(s.p[i]), bits(ref.p[i])) << n << " " << i;
    }
  }
}

// Ten steps of adamw_step against the same recurrence evaluated in double.
void expect_close_to_double_precision(const AdamWHyper& h) {
  const std::size_t n = 257;
  RandomState s = random_state(n, 10, 7);
  std::vector<double> p(s.p.begin(), s.p.end()), m(s.m.begin(), s.m.end()),
      v(s.v.begin(), s.v.end());
  std::vector<double> m_scale(n);  // the same recurrence on |terms|: the size of m's rounding error
  for (std::size_t i = 0; i < n; ++i) m_scale[i] = std::fabs(m[i]);
  for (int t = 1; t <= 10; ++t) {
    adamw_step(s.p.data(), s.g[t - 1].data(), s.m.data(), s.v.data(), n, h, t);
    const double bc1 = h.bias_correction ? 1 - std::pow(h.beta1, t) : 1.0;
    const double bc2 = h.bias_correction ? 1 - std::pow(h.beta2, t) : 1.0;
    for (std::size_t i = 0; i < n; ++i) {
      const double g = s.g[t - 1][i];
      p[i] *= 1 - h.lr * h.weight_decay;
      m[i] = h.beta1 * m[i] + (1 - h.beta1) * g;
      m_scale[i] = h.beta1 * m_scale[i] + (1 - h.beta1) * std::fabs(g);
      v[i] = h.beta2 * v[i] + (1 - h.beta2) * g * g;
      p[i] -= h.lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + h.eps);
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_NEAR(s.p[i], p[i], 1e-5 * (1 + std::fabs(p[i]))) << i;
    EXPECT_NEAR(s.m[i], m[i], 1e-5 * m_scale[i]) << i;
    EXPECT_NEAR(s.v[i], v[i], 1e-5 * (1e-30 + std::fabs(v[i]))) << i;
  }
}

TEST(AdamW, CloseToDoublePrecisionEvaluationOverTenSteps) {
  expect_close_to_double_precision(
      {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.05});
}

// DeepSpeed's bias_correction=false (FusedAdam, CPUAdam): the step is lr * m / (sqrt(v) + eps).
// lr 1e-2 makes the missing 1/(1 - b1^t) ~ 10x on the first steps visible above the tolerance.
TEST(AdamW, WithoutBiasCorrectionCloseToDoublePrecisionEvaluation) {
  expect_close_to_double_precision({.lr = 1e-2,
                                    .beta1 = 0.9,
                                    .beta2 = 0.999,
                                    .eps = 1e-8,
                                    .weight_decay = 0.05,
                                    .bias_correction = false});
}

TEST(AdamW, Out16WritesTheRoundedParameterAndTheSameMaster) {
  for (DType dt : {DType::bf16, DType::f16}) {
    for (std::size_t n : {std::size_t{1}, std::size_t{37}, std::size_t{140001}}) {
      const RandomState init = random_state(n, 1, 11);
      RandomState ref = init;
      adamw_step_reference(ref.p.data(), ref.g[0].data(), ref.m.data(), ref.v.data(), n,
                           kHypers[0], 3);
      RandomState s = init;
      std::vector<std::uint16_t> p16(n, 0xdead);
      adamw_step_out16(s.p.data(), s.g[0].data(), s.m.data(), s.v.data(), n, kHypers[0], 3, 1.0f,
                       p16.data(), dt);
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(bits(s.p[i]), bits(ref.p[i])) << i;
        const std::uint16_t want = dt == DType::bf16 ? f32_to_bf16(ref.p[i]) : f32_to_f16(ref.p[i]);
        ASSERT_EQ(p16[i], want) << dtype_name(dt) << " n=" << n << " i=" << i;
      }
    }
  }
}

TEST(AdamW, RejectsBadArguments) {
  std::vector<float> p(4, 1.0f), g(4, 1.0f), m(4, 0.0f), v(4, 0.0f);
  const AdamWHyper ok{.lr = 1e-3};
  EXPECT_THROW(adamw_step(p.data(), g.data(), m.data(), v.data(), 4, ok, 0), Error);
  EXPECT_THROW(adamw_step(p.data(), g.data(), m.data(), v.data(), 4, AdamWHyper{.lr = -1.0}, 1),
               UserError);
  EXPECT_THROW(
      adamw_step(p.data(), g.data(), m.data(), v.data(), 4, AdamWHyper{.lr = 1e-3, .beta1 = 1.0}, 1),
      UserError);
  EXPECT_THROW(adamw_step(p.data(), g.data(), m.data(), v.data(), 4,
                          AdamWHyper{.lr = 1e-3, .eps = std::nan("")}, 1),
               UserError);
  EXPECT_THROW(adamw_step(p.data(), nullptr, m.data(), v.data(), 4, ok, 1), Error);
  std::vector<std::uint16_t> p16(4);
  EXPECT_THROW(adamw_step_out16(p.data(), g.data(), m.data(), v.data(), 4, ok, 1, 1.0f,
                                p16.data(), DType::f32),
               Error);
  EXPECT_NO_THROW(adamw_step(nullptr, nullptr, nullptr, nullptr, 0, ok, 1));
  EXPECT_EQ(bits(p[0]), bits(1.0f)) << "a rejected call must not touch the buffers";
}

TEST(AdamW, WeightDecayOnlyWhereTheCallerAsksForIt) {
  // Zero gradient, zero state: the only change is the decoupled decay p * (1 - lr*wd).
  std::vector<float> p(5, 2.0f), g(5, 0.0f), m(5, 0.0f), v(5, 0.0f);
  adamw_step(p.data(), g.data(), m.data(), v.data(), 5, AdamWHyper{.lr = 0.1, .weight_decay = 0.5},
             1);
  for (float x : p) EXPECT_EQ(x, 2.0f * static_cast<float>(1.0 - 0.1 * 0.5));
  std::vector<float> q(5, 2.0f);
  adamw_step(q.data(), g.data(), m.data(), v.data(), 5, AdamWHyper{.lr = 0.1, .weight_decay = 0.0},
             1);
  for (float x : q) EXPECT_EQ(x, 2.0f);
}

}  // namespace
}  // namespace strata::optim
