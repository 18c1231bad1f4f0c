// Block-wise dynamic 8-bit quantization: the codes are bitsandbytes' dynamic maps, every SIMD
// path equals the exact-search reference bitwise (around every threshold too), and the error
// stays within the documented bound for random and adversarial blocks (all zero, one huge
// outlier, denormals, alternating signs, the absmax on a negative value).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "framework/backend/cpu/kernels.hpp"
#include "framework/optim/quantize.hpp"

namespace strata::optim {
namespace {
namespace test_quantize {  // file-local names, unique in a unity build

constexpr QuantMap kMaps[] = {QuantMap::signed_dynamic, QuantMap::unsigned_dynamic};

std::vector<SimdPath> supported_paths() {
  std::vector<SimdPath> out;
  for (SimdPath p : {SimdPath::scalar, SimdPath::avx2, SimdPath::avx512})
    if (simd_path_supported(p)) out.push_back(p);
  return out;
}

const char* name(QuantMap m) { return m == QuantMap::signed_dynamic ? "signed" : "unsigned"; }

// Distance from y to the nearest code value (the unsigned code quantizes |y|), in double.
double nearest_distance(QuantMap map, float y) {
  const double v = map == QuantMap::signed_dynamic ? y : std::fabs(static_cast<double>(y));
  double best = std::numeric_limits<double>::infinity();
  for (float c : quant_sorted_values(map)) best = std::min(best, std::fabs(v - c));
  return best;
}

// The documented worst case of nearest_distance over [-1, 1] (signed) / [0, 1] (unsigned), up to
// the f32 rounding of the code values.
double max_distance(QuantMap map) {
  return (map == QuantMap::signed_dynamic ? 0.9 / 128 : 0.9 / 256) + std::ldexp(1.0, -24);
}

TEST(DynamicCode, IsBitsandbytesCreateDynamicMap) {
  // create_dynamic_map(signed, max_exponent_bits=7, total_bits=8): decade i holds 2^i (signed,
  // each sign) or 2^(i+1) (unsigned) midpoints of equal parts of [0.1, 1], times 10^(i-6).
  for (QuantMap map : kMaps) {
    const bool sgn = map == QuantMap::signed_dynamic;
    std::vector<double> want{0.0, 1.0};
    for (int i = 0; i < 7; ++i) {
      const int n = sgn ? 1 << i : 1 << (i + 1);
      for (int k = 0; k < n; ++k) {
        const double v = std::pow(10.0, i - 6) * (0.1 + (k + 0.5) * 0.9 / n);
        want.push_back(v);
        if (sgn) want.push_back(-v);
      }
    }
    std::sort(want.begin(), want.end());
    const std::vector<float> got = quant_sorted_values(map);
    ASSERT_EQ(got.size(), 256u) << name(map);
    ASSERT_EQ(want.size(), 256u) << name(map);
    for (std::size_t i = 0; i < 256; ++i) EXPECT_EQ(got[i], static_cast<float>(want[i])) << name(map) << " " << i;
    // Byte 0 is exactly +0: a zeroed buffer is the zero state.
    EXPECT_EQ(std::bit_cast<std::uint32_t>(quant_values(map)[0]), 0u) << name(map);
    // Every byte stands for one distinct value.
    std::vector<float> by_byte(quant_values(map).begin(), quant_values(map).end());
    std::sort(by_byte.begin(), by_byte.end());
    EXPECT_EQ(by_byte, got) << name(map);
  }
  EXPECT_FLOAT_EQ(quant_sorted_values(QuantMap::signed_dynamic)[128], 5.5e-7f);
  EXPECT_FLOAT_EQ(quant_sorted_values(QuantMap::signed_dynamic)[0], -(1.0f - 0.9f / 128));
  EXPECT_FLOAT_EQ(quant_sorted_values(QuantMap::unsigned_dynamic)[1], 3.25e-7f);
  EXPECT_FLOAT_EQ(quant_sorted_values(QuantMap::unsigned_dynamic)[254], 1.0f - 0.9f / 256);
}

// Normalized values that probe every decision: random, log-uniform magnitudes, each code value,
// each midpoint between neighbours and the floats just around it, zeros, ±1, denormals.
std::vector<float> probes() {
  std::vector<float> ys;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::uniform_real_distribution<double> expo(-45.0, 0.0);
  for (int i = 0; i < 20000; ++i) ys.push_back(uni(rng));
  for (int i = 0; i < 20000; ++i) {
    const float a = static_cast<float>(std::pow(10.0, expo(rng)));
    ys.push_back(i % 2 ? a : -a);
  }
  for (QuantMap map : kMaps) {
    const std::vector<float> v = quant_sorted_values(map);
    for (std::size_t i = 0; i < v.size(); ++i) {
      ys.push_back(v[i]);
      ys.push_back(-v[i]);
      if (i + 1 == v.size()) continue;
      const float mid = static_cast<float>((static_cast<double>(v[i]) + v[i + 1]) / 2);
      float lo = mid, hi = mid;
      for (int k = 0; k < 3; ++k) {
        lo = std::nextafter(lo, -2.0f);
        hi = std::nextafter(hi, 2.0f);
        for (float y : {lo, hi, mid}) {
          ys.push_back(y);
          ys.push_back(-y);
        }
      }
    }
  }
  for (float y : {0.0f, -0.0f, 1.0f, -1.0f, std::numeric_limits<float>::denorm_min(),
                  -std::numeric_limits<float>::denorm_min(), 1e-39f, -1e-39f,
                  std::nextafter(1.0f, 0.0f), std::nextafter(-1.0f, 0.0f)})
    ys.push_back(y);
  return ys;
}

TEST(DynamicCode, EveryPathEqualsTheExactSearch) {
  const std::vector<float> ys = probes();
  for (QuantMap map : kMaps) {
    std::vector<std::uint8_t> want(ys.size());
    for (std::size_t i = 0; i < ys.size(); ++i) want[i] = quantize_reference(map, ys[i]);
    for (SimdPath path : supported_paths()) {
      // Blocks whose absmax is exactly 1 (one element is ±1), so each block sees y itself.
      for (std::size_t b = 0; b < ys.size(); b += kQuantBlock - 1) {
        const std::size_t n = std::min(kQuantBlock - 1, ys.size() - b);
        std::vector<float> x(ys.begin() + static_cast<std::ptrdiff_t>(b),
                             ys.begin() + static_cast<std::ptrdiff_t>(b + n));
        x.push_back((b / kQuantBlock) % 2 ? -1.0f : 1.0f);
        std::vector<std::uint8_t> q(x.size());
        const float a = quantize_block_on(path, map, x.data(), x.size(), q.data());
        ASSERT_EQ(a, 1.0f);
        for (std::size_t i = 0; i < n; ++i)
          ASSERT_EQ(q[i], want[b + i]) << name(map) << " path " << simd_path_name(path) << " y="
                                       << ys[b + i] << " (" << std::hexfloat << ys[b + i] << ")";
      }
    }
  }
}

// Checks quantize -> dequantize of one block on every path: identical results across paths and
// each element within absmax × (distance to the nearest code + 2^-23) + the smallest denormal
// (the rounding of x / absmax and of code × absmax), the distance at most the documented worst
// case.
void check_block(QuantMap map, const std::vector<float>& x, const char* what) {
  std::vector<std::uint8_t> q0;
  std::vector<float> d0;
  float a0 = 0;
  for (SimdPath path : supported_paths()) {
    std::vector<std::uint8_t> q(x.size());
    std::vector<float> d(x.size());
    const float a = quantize_block_on(path, map, x.data(), x.size(), q.data());
    dequantize_block_on(path, map, q.data(), q.size(), a, d.data());
    if (q0.empty()) {
      q0 = q;
      d0 = d;
      a0 = a;
    } else {
      EXPECT_EQ(q, q0) << what << " " << name(map) << ": codes differ on " << simd_path_name(path);
      EXPECT_EQ(a, a0) << what;
      for (std::size_t i = 0; i < d.size(); ++i)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(d[i]), std::bit_cast<std::uint32_t>(d0[i])) << what;
    }
  }
  float want_a = 0;
  for (float v : x) want_a = std::max(want_a, std::fabs(v));
  ASSERT_EQ(a0, want_a) << what;
  const double slack = std::ldexp(1.0, -23);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double target = map == QuantMap::signed_dynamic ? x[i] : std::fabs(x[i]);
    const double err = std::fabs(target - d0[i]);
    if (a0 == 0) {
      ASSERT_EQ(d0[i], 0.0f) << what;
      continue;
    }
    const double local = nearest_distance(map, x[i] / a0);
    ASSERT_LE(local, max_distance(map)) << what;
    ASSERT_LE(err, static_cast<double>(a0) * (local + slack) +
                       std::numeric_limits<float>::denorm_min())
        << what << " " << name(map) << " element " << i << ": x=" << x[i] << " got " << d0[i]
        << " absmax " << a0;
  }
}

TEST(DynamicCode, ErrorWithinTheBoundForRandomAndAdversarialBlocks) {
  std::mt19937 rng(11);
  for (QuantMap map : kMaps) {
    for (double scale : {1e-12, 1e-3, 1.0, 1e6}) {
      std::normal_distribution<float> normal(0.0f, static_cast<float>(scale));
      std::vector<float> x(kQuantBlock);
      for (auto& v : x) v = normal(rng);
      if (map == QuantMap::unsigned_dynamic)
        for (auto& v : x) v = v * v;  // a second moment
      check_block(map, x, "random");
    }
    check_block(map, std::vector<float>(kQuantBlock, 0.0f), "all zero");
    std::vector<float> outlier(kQuantBlock, 1e-3f);
    outlier[1234] = 3e38f;
    check_block(map, outlier, "one huge outlier");
    std::vector<float> denormal(kQuantBlock);
    for (std::size_t i = 0; i < denormal.size(); ++i)
      denormal[i] = std::numeric_limits<float>::denorm_min() * static_cast<float>(i % 1000);
    check_block(map, denormal, "denormals");
    std::vector<float> flips(kQuantBlock);
    for (std::size_t i = 0; i < flips.size(); ++i)
      flips[i] = (i % 2 ? -1.0f : 1.0f) * (0.5f + 0.001f * static_cast<float>(i % 17));
    check_block(map, flips, "sign flips");
    std::vector<float> neg_max(777, 0.25f);
    neg_max[5] = -2.0f;  // absmax on a negative value: -1 has no signed code
    check_block(map, neg_max, "negative absmax");
    check_block(map, std::vector<float>(13, 0.1f), "short constant block");
  }
}

TEST(DynamicCode, BlockwiseBuffersEqualBlockByBlockWhateverTheThreads) {
  const std::size_t n = 70 * kQuantBlock + 123;  // several chunks: the threaded path runs
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = normal(rng) * static_cast<float>(1 + i / kQuantBlock);
  const int saved = cpu::num_threads();
  for (QuantMap map : kMaps) {
    std::vector<std::uint8_t> want(n);
    std::vector<float> want_a(quant_blocks(n));
    for (std::size_t b = 0; b < n; b += kQuantBlock)
      want_a[b / kQuantBlock] = quantize_block_on(SimdPath::scalar, map, x.data() + b,
                                                  std::min(kQuantBlock, n - b), want.data() + b);
    for (int threads : {1, 2, 3}) {
      cpu::set_num_threads(threads);
      std::vector<std::uint8_t> q(n);
      std::vector<float> a(quant_blocks(n)), back(n);
      quantize_blockwise(map, x.data(), n, q.data(), a.data());
      EXPECT_EQ(q, want) << name(map) << ", " << threads << " threads";
      EXPECT_EQ(a, want_a) << name(map) << ", " << threads << " threads";
      dequantize_blockwise(map, q.data(), a.data(), n, back.data());
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(back[i], quant_values(map)[q[i]] * a[i / kQuantBlock]);
    }
  }
  cpu::set_num_threads(saved);
}

TEST(DynamicCode, ZeroedStateDequantizesToPositiveZero) {
  std::vector<std::uint8_t> q(kQuantBlock, 0);
  std::vector<float> out(kQuantBlock, 1.0f);
  for (QuantMap map : kMaps)
    for (SimdPath path : supported_paths()) {
      dequantize_block_on(path, map, q.data(), q.size(), 0.0f, out.data());
      for (float v : out) ASSERT_EQ(std::bit_cast<std::uint32_t>(v), 0u);
    }
}

}  // namespace test_quantize
}  // namespace
}  // namespace strata::optim
