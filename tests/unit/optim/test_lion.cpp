// Lion and Lion8bit kernels (framework/optim/lion.hpp): Lion against its definition computed in
// double over many steps (the update's sign agrees wherever the interpolation is not within
// round-off of 0, so parameters and momentum agree to f32 round-off), independent of the thread
// count, its 16-bit copy the rounded master; Lion8bit equal to its definition (dequantize, Lion's
// float arithmetic per decay run, requantize with the exact-search quantizer) bitwise on every
// SIMD path, its first step from the zero state equal to Lion's, and tracking f32 Lion over many
// steps; bad hyperparameters refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "framework/backend/cpu/kernels.hpp"
#include "framework/core/error.hpp"
#include "framework/core/half.hpp"
#include "framework/optim/lion.hpp"
#include "framework/optim/quantize.hpp"

namespace strata::optim {
namespace {
namespace test_lion {  // file-local names, unique in a unity build

std::vector<float> normal_values(std::size_t n, unsigned seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng) * scale;
  return x;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](float x, float y) {
           return std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y);
         });
}

// One step of the definition in double: c = b1 m + (1 - b1) g; p = p (1 - lr wd) - lr sign(c);
// m = b2 m + (1 - b2) g. Marks the elements whose c came within f32 round-off (2^-24 of |m| and
// |g| ~ 1) of 0, where float may take the other sign.
void reference_step(std::vector<double>& p, std::vector<double>& m, const std::vector<float>& grad,
                    const LionHyper& h, float grad_scale, std::vector<bool>& near_zero) {
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double g = static_cast<double>(grad[i]) * grad_scale;
    const double c = h.beta1 * m[i] + (1 - h.beta1) * g;
    if (std::fabs(c) < 1e-6) near_zero[i] = true;
    p[i] = p[i] * (1 - h.lr * h.weight_decay) - h.lr * (c > 0 ? 1.0 : c < 0 ? -1.0 : 0.0);
    m[i] = h.beta2 * m[i] + (1 - h.beta2) * g;
  }
}

TEST(Lion, MatchesTheDoublePrecisionDefinitionOverManySteps) {
  const std::size_t n = 5000;
  const LionHyper h{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.99, .weight_decay = 0.1};
  const float grad_scale = 0.5f;
  std::vector<float> p = normal_values(n, 1, 0.02f), m(n, 0.0f);
  std::vector<double> rp(p.begin(), p.end()), rm(n, 0.0);
  double worst_p = 0, worst_m = 0, m_scale = 0;
  std::vector<bool> near_zero(n, false);  // left out: their sign is round-off's to choose
  for (int step = 1; step <= 30; ++step) {
    // Gradients away from 0, so that few interpolations come near a sign flip.
    std::vector<float> g = normal_values(n, 100 + step, 1.0f);
    for (float& x : g) x = x < 0 ? x - 0.5f : x + 0.5f;
    reference_step(rp, rm, g, h, grad_scale, near_zero);
    lion_step(p.data(), g.data(), m.data(), n, h, step, grad_scale);
    for (std::size_t i = 0; i < n; ++i) {
      if (near_zero[i]) continue;
      worst_p = std::max(worst_p, std::fabs(p[i] - rp[i]));
      worst_m = std::max(worst_m, std::fabs(m[i] - rm[i]));
      m_scale = std::max(m_scale, std::fabs(rm[i]));
    }
  }
  worst_m /= m_scale;
  std::printf("Lion vs double over 30 steps: parameters %.2e abs, momentum %.2e of its largest\n",
              worst_p, worst_m);
  // Almost every element is compared (measured: 1 of 5000 came within 1e-6 of a flip).
  EXPECT_LT(std::count(near_zero.begin(), near_zero.end(), true), 10);
  // Parameters of ~0.02 moved by 30 steps of 1e-3: f32 round-off of the values (2^-24 × 0.05 per
  // step; measured 6.5e-8); the momentum's round-off after 30 steps relative to its scale.
  EXPECT_LT(worst_p, 2e-7);
  EXPECT_LT(worst_m, 1e-6);
}

// The definition in float, one element after another (what every thread count must give).
void float_definition(std::vector<float>& p, std::vector<float>& m, const std::vector<float>& g,
                      const LionHyper& h, float gs) {
  const float b1 = static_cast<float>(h.beta1), c1 = static_cast<float>(1 - h.beta1);
  const float b2 = static_cast<float>(h.beta2), c2 = static_cast<float>(1 - h.beta2);
  const float decay = static_cast<float>(1 - h.lr * h.weight_decay), lr = static_cast<float>(h.lr);
  for (std::size_t i = 0; i < p.size(); ++i) {
    const float gg = g[i] * gs;
    const float c = b1 * m[i] + c1 * gg;
    const float decayed = p[i] * decay;
    p[i] = decayed - lr * (c > 0 ? 1.0f : c < 0 ? -1.0f : c);
    m[i] = b2 * m[i] + c2 * gg;
  }
}

TEST(Lion, ThreadedEqualsTheElementwiseDefinitionAndWritesTheRounded16BitCopy) {
  const std::size_t n = (std::size_t{1} << 17) * 3 + 13;  // the threaded path, a ragged tail
  const LionHyper h{.lr = 3e-4, .beta1 = 0.9, .beta2 = 0.99, .weight_decay = 0.05};
  std::vector<float> p = normal_values(n, 2, 0.02f), m = normal_values(n, 3, 1e-3f);
  const std::vector<float> g = normal_values(n, 4, 1e-2f);
  std::vector<float> rp = p, rm = m;
  float_definition(rp, rm, g, h, 0.25f);
  std::vector<std::uint16_t> p16(n);
  lion_step(p.data(), g.data(), m.data(), n, h, 3, 0.25f, p16.data(), DType::bf16);
  EXPECT_TRUE(same_bits(p, rp));
  EXPECT_TRUE(same_bits(m, rm));
  std::size_t bad16 = 0;
  for (std::size_t i = 0; i < n; ++i) bad16 += p16[i] != f32_to_bf16(rp[i]);
  EXPECT_EQ(bad16, 0u);
}

TEST(Lion, BadHyperparametersAreRefused) {
  for (LionHyper h : {LionHyper{.lr = -1}, LionHyper{.beta1 = 1.0}, LionHyper{.beta2 = -0.1},
                      LionHyper{.weight_decay = NAN}}) {
    EXPECT_THROW(validate(h), UserError);
    float p = 0, g = 0, m = 0;
    EXPECT_THROW(lion_step(&p, &g, &m, 1, h, 1), UserError);
  }
  float p = 0, g = 0, m = 0;
  EXPECT_THROW(lion_step(&p, &g, &m, 1, LionHyper{}, 0), Error);  // steps are 1-based
}

// ---- Lion8bit ----

std::vector<SimdPath> supported_paths() {
  std::vector<SimdPath> out;
  for (SimdPath p : {SimdPath::scalar, SimdPath::avx2, SimdPath::avx512})
    if (simd_path_supported(p)) out.push_back(p);
  return out;
}

// Runs with mixed decay, boundaries inside blocks.
std::vector<DecayRun> lion_runs(std::size_t n) {
  return {{0, 1000, true}, {1000, 1100, false}, {1100, 5000, true}, {5000, n, false}};
}

// The definition: per block, dequantize with the scalar path, Lion's float arithmetic per run
// (weight decay 0 where !decay), requantize with the exact-search quantizer.
void lion8bit_definition(std::vector<float>& p, std::vector<std::uint8_t>& codes,
                         std::vector<float>& absmax, const std::vector<float>& g,
                         const std::vector<DecayRun>& runs, const LionHyper& h, float gs) {
  const std::size_t n = p.size();
  for (std::size_t b0 = 0; b0 < n; b0 += kQuantBlock) {
    const std::size_t len = std::min(kQuantBlock, n - b0), blk = b0 / kQuantBlock;
    std::vector<float> m(len);
    dequantize_block_on(SimdPath::scalar, QuantMap::signed_dynamic, codes.data() + b0, len,
                        absmax[blk], m.data());
    for (const DecayRun& r : runs) {
      const std::size_t a = std::max(r.begin, b0), e = std::min(r.end, b0 + len);
      if (a >= e) continue;
      LionHyper hh = h;
      if (!r.decay) hh.weight_decay = 0;
      std::vector<float> pp(p.begin() + static_cast<std::ptrdiff_t>(a), p.begin() + static_cast<std::ptrdiff_t>(e));
      std::vector<float> mm(m.begin() + static_cast<std::ptrdiff_t>(a - b0), m.begin() + static_cast<std::ptrdiff_t>(e - b0));
      const std::vector<float> gg(g.begin() + static_cast<std::ptrdiff_t>(a), g.begin() + static_cast<std::ptrdiff_t>(e));
      float_definition(pp, mm, gg, hh, gs);
      std::copy(pp.begin(), pp.end(), p.begin() + static_cast<std::ptrdiff_t>(a));
      std::copy(mm.begin(), mm.end(), m.begin() + static_cast<std::ptrdiff_t>(a - b0));
    }
    float amax = 0;
    for (float x : m) amax = std::max(amax, std::fabs(x));
    absmax[blk] = amax;
    for (std::size_t i = 0; i < len; ++i)
      codes[b0 + i] = amax == 0 ? 0 : quantize_reference(QuantMap::signed_dynamic, m[i] / amax);
  }
}

// Steps of Lion8bit on a path with a thread count, from p0 and the zero state.
struct Run8 {
  std::vector<float> p;
  std::vector<std::uint8_t> codes;
  std::vector<float> absmax;
  std::vector<std::uint16_t> p16;
};
Run8 run8(const std::vector<float>& p0, SimdPath path, int threads, int steps, const LionHyper& h) {
  const std::size_t n = p0.size();
  const auto runs = lion_runs(n);
  Run8 r{p0, std::vector<std::uint8_t>(n, 0), std::vector<float>(quant_blocks(n), 0),
         std::vector<std::uint16_t>(n)};
  const int saved = cpu::num_threads();
  cpu::set_num_threads(threads);
  for (int step = 1; step <= steps; ++step) {
    const std::vector<float> g = normal_values(n, 200 + step, 1e-2f);
    lion8bit_step(r.p.data(), g.data(), r.codes.data(), r.absmax.data(), n, runs, h, step, 0.5f,
                  r.p16.data(), DType::bf16, DType::f32, path);
  }
  cpu::set_num_threads(saved);
  return r;
}

TEST(Lion8bit, EqualsItsDefinitionBitwise) {
  const std::size_t n = 3 * kQuantBlock + 777;  // a partial last block
  const LionHyper h{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.99, .weight_decay = 0.1};
  const std::vector<float> p0 = normal_values(n, 5, 0.02f);
  std::vector<float> rp = p0;
  std::vector<std::uint8_t> rcodes(n, 0);
  std::vector<float> rabsmax(quant_blocks(n), 0);
  for (int step = 1; step <= 4; ++step)
    lion8bit_definition(rp, rcodes, rabsmax, normal_values(n, 200 + step, 1e-2f), lion_runs(n), h,
                        0.5f);
  for (SimdPath path : supported_paths()) {
    const Run8 r = run8(p0, path, 1, 4, h);
    EXPECT_TRUE(same_bits(r.p, rp)) << simd_path_name(path);
    EXPECT_EQ(r.codes, rcodes) << simd_path_name(path);
    EXPECT_TRUE(same_bits(r.absmax, rabsmax)) << simd_path_name(path);
    std::size_t bad16 = 0;
    for (std::size_t i = 0; i < n; ++i) bad16 += r.p16[i] != f32_to_bf16(rp[i]);
    EXPECT_EQ(bad16, 0u) << simd_path_name(path);
  }
}

TEST(Lion8bit, EveryPathAndThreadCountGiveTheScalarResult) {
  const std::size_t n = 70 * kQuantBlock + 5;  // the threaded path, a partial last block
  const LionHyper h{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.99, .weight_decay = 0.1};
  const std::vector<float> p0 = normal_values(n, 6, 0.02f);
  const Run8 want = run8(p0, SimdPath::scalar, 1, 3, h);
  for (SimdPath path : supported_paths())
    for (int threads : {1, 2}) {
      const Run8 r = run8(p0, path, threads, 3, h);
      EXPECT_TRUE(same_bits(r.p, want.p) && r.codes == want.codes &&
                  same_bits(r.absmax, want.absmax) && r.p16 == want.p16)
          << simd_path_name(path) << ", " << threads << " threads";
    }
}

TEST(Lion8bit, SixteenBitGradientsAreWidenedExactly) {
  const std::size_t n = 2 * kQuantBlock + 100;
  const LionHyper h{.lr = 1e-3};
  const std::vector<DecayRun> runs{{0, n, true}};
  std::vector<float> g = normal_values(n, 7, 1e-2f);
  std::vector<std::uint16_t> g16(n);
  for (std::size_t i = 0; i < n; ++i) {
    g16[i] = f32_to_bf16(g[i]);
    g[i] = bf16_to_f32(g16[i]);  // the values the 16-bit gradient holds, as f32
  }
  std::vector<float> p = normal_values(n, 8, 0.02f), q = p;
  std::vector<std::uint8_t> c1(n, 0), c2(n, 0);
  std::vector<float> a1(quant_blocks(n), 0), a2(quant_blocks(n), 0);
  lion8bit_step(p.data(), g.data(), c1.data(), a1.data(), n, runs, h, 1, 1.0f);
  lion8bit_step(q.data(), g16.data(), c2.data(), a2.data(), n, runs, h, 1, 1.0f, nullptr,
                DType::bf16, DType::bf16);
  EXPECT_TRUE(same_bits(p, q));
  EXPECT_EQ(c1, c2);
}

TEST(Lion8bit, FirstStepEqualsLionAndManyStepsTrackIt) {
  const std::size_t n = 4 * kQuantBlock;
  const LionHyper h{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.99, .weight_decay = 0.1};
  const std::vector<DecayRun> runs{{0, n, true}};
  std::vector<float> p = normal_values(n, 9, 0.02f), q = p, m(n, 0.0f);
  std::vector<std::uint8_t> codes(n, 0);
  std::vector<float> absmax(quant_blocks(n), 0);
  double worst_m = 0;
  std::size_t differ = 0;
  for (int step = 1; step <= 50; ++step) {
    std::vector<float> g = normal_values(n, 300 + step, 1.0f);
    for (float& x : g) x = x < 0 ? x - 0.5f : x + 0.5f;
    lion_step(p.data(), g.data(), m.data(), n, h, step, 1.0f);
    lion8bit_step(q.data(), g.data(), codes.data(), absmax.data(), n, runs, h, step, 1.0f);
    // From the zero state the first update reads m = 0 exactly in both: bitwise the same.
    if (step == 1) {
      ASSERT_TRUE(same_bits(p, q));
    }
    if (step == 50) {
      std::vector<float> mq(n);
      dequantize_blockwise(QuantMap::signed_dynamic, codes.data(), absmax.data(), n, mq.data());
      for (std::size_t i = 0; i < n; ++i) {
        worst_m = std::max(worst_m, static_cast<double>(std::fabs(mq[i] - m[i]) / absmax[i / kQuantBlock]));
        differ += p[i] != q[i];
      }
    }
  }
  std::printf("Lion8bit vs Lion after 50 steps: momentum %.2e of its block's absmax, %zu of %zu "
              "parameters apart\n",
              worst_m, differ, n);
  // Each requantization errs by up to the signed code's half gap (0.7 % of a block's absmax near its
  // top, quantize.hpp's bound) and beta2 = 0.99 keeps 99 % of it a step: over 50 steps the errors
  // add up (measured 7.5 % of the absmax at worst); a parameter differs where some step's sign
  // came out otherwise (measured 12 % of them, each by a few lr).
  EXPECT_LT(worst_m, 0.15);
  EXPECT_LT(static_cast<double>(differ), 0.25 * static_cast<double>(n));
}

}  // namespace test_lion
}  // namespace
}  // namespace strata::optim
