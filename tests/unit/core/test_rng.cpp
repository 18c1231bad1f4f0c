// Philox4x32-10 known answers, the stream layout of normal_fill/uniform_fill (split-invariant,
// pinned element by element), the sequential generator's resumable state, and statistics.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include "framework/core/error.hpp"
#include "framework/core/rng.hpp"

using namespace strata;

using Words = std::array<std::uint32_t, 4>;

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i])) return false;
  return true;
}

// Independent statement of normal_fill's layout (see rng.cpp), for element i.
float reference_normal(std::uint64_t seed, std::uint64_t h, std::uint64_t i, float mean, float sd) {
  const std::uint64_t j = i / 2;
  const Words w = philox4x32_10(
      {std::uint32_t(j), std::uint32_t(j >> 32), std::uint32_t(h), std::uint32_t(h >> 32)},
      {std::uint32_t(seed), std::uint32_t(seed >> 32)});
  const double u1 = (w[0] + 1.0) / 4294967296.0;
  const double u2 = w[1] / 4294967296.0;
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double z = i % 2 == 0 ? r * std::cos(2.0 * std::numbers::pi * u2)
                              : r * std::sin(2.0 * std::numbers::pi * u2);
  return static_cast<float>(static_cast<double>(mean) + static_cast<double>(sd) * z);
}

}  // namespace

TEST(Philox, KnownAnswerVectors) {
  // Random123's kat_vectors for philox4x32_10.
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (Words{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                          {0xffffffffu, 0xffffffffu}),
            (Words{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                          {0xa4093822u, 0x299f31d0u}),
            (Words{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, HashNameIsFnv1a64) {
  EXPECT_EQ(hash_name(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(hash_name("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(hash_name("foobar"), 0x85944171f73967e8ull);
  EXPECT_EQ(hash_name("blocks.0.attn.qkv.weight"), 0xb8eed840ed199670ull);
}

TEST(NormalFill, MatchesTheDocumentedLayout) {
  const std::uint64_t seed = 0x0123456789abcdefull;
  const std::uint64_t h = hash_name("wte");
  // Includes offsets beyond 2^33 so the counter's high word is exercised.
  for (std::uint64_t off : {std::uint64_t{0}, std::uint64_t{7}, (std::uint64_t{1} << 33) + 3}) {
    std::vector<float> out(9);
    normal_fill(out.data(), out.size(), seed, "wte", off, 0.5f, 0.02f);
    for (std::size_t k = 0; k < out.size(); ++k)
      EXPECT_EQ(std::bit_cast<std::uint32_t>(out[k]),
                std::bit_cast<std::uint32_t>(reference_normal(seed, h, off + k, 0.5f, 0.02f)))
          << "offset " << off << " element " << k;
  }
}

TEST(NormalFill, AnySplitGivesIdenticalValues) {
  const std::size_t n = 1000;
  std::vector<float> whole(n);
  normal_fill(whole.data(), n, 42, "blocks.3.mlp.fc.weight", 0, 0.0f, 0.02f);
  for (std::size_t first : {1u, 2u, 3u, 7u}) {
    std::vector<float> pieces(n);
    std::size_t pos = 0, len = first;
    while (pos < n) {  // odd and even piece sizes, starting at odd and even offsets
      const std::size_t m = std::min(len, n - pos);
      normal_fill(pieces.data() + pos, m, 42, "blocks.3.mlp.fc.weight", pos, 0.0f, 0.02f);
      pos += m;
      len = len * 2 + 1;
    }
    EXPECT_TRUE(same_bits(whole, pieces)) << "first piece " << first;
  }
  // Element by element, backwards.
  std::vector<float> single(n);
  for (std::size_t i = n; i-- > 0;)
    normal_fill(&single[i], 1, 42, "blocks.3.mlp.fc.weight", i, 0.0f, 0.02f);
  EXPECT_TRUE(same_bits(whole, single));
  // An offset window equals the matching slice of a larger fill.
  std::vector<float> window(333);
  normal_fill(window.data(), window.size(), 42, "blocks.3.mlp.fc.weight", 501, 0.0f, 0.02f);
  EXPECT_TRUE(same_bits(window, std::vector<float>(whole.begin() + 501, whole.begin() + 834)));
}

TEST(NormalFill, StreamsDependOnSeedAndName) {
  std::vector<float> a(64), b(64), c(64), d(64);
  normal_fill(a.data(), 64, 1, "w", 0, 0.0f, 1.0f);
  normal_fill(b.data(), 64, 1, "w", 0, 0.0f, 1.0f);
  normal_fill(c.data(), 64, 2, "w", 0, 0.0f, 1.0f);
  normal_fill(d.data(), 64, 1, "v", 0, 0.0f, 1.0f);
  EXPECT_TRUE(same_bits(a, b));
  int differ_seed = 0, differ_name = 0;
  for (int i = 0; i < 64; ++i) {
    differ_seed += a[i] != c[i];
    differ_name += a[i] != d[i];
  }
  EXPECT_EQ(differ_seed, 64);
  EXPECT_EQ(differ_name, 64);
  // A seed differing only in its high 32 bits is a different stream too.
  normal_fill(c.data(), 64, 1 + (std::uint64_t{1} << 32), "w", 0, 0.0f, 1.0f);
  EXPECT_FALSE(same_bits(a, c));
}

TEST(NormalFill, MeanAndStdApplied) {
  std::vector<float> z(100), y(100);
  normal_fill(z.data(), 100, 9, "x", 0, 0.0f, 1.0f);
  normal_fill(y.data(), 100, 9, "x", 0, 3.0f, 0.5f);
  for (int i = 0; i < 100; ++i) EXPECT_NEAR(y[i], 3.0f + 0.5f * z[i], 1e-6f);
}

TEST(NormalFill, StatisticsOfAMillionSamples) {
  const std::size_t n = 1000000;
  std::vector<float> x(n);
  normal_fill(x.data(), n, 2024, "stats", 0, 0.0f, 1.0f);
  double sum = 0, sq = 0, inside1 = 0, m3 = 0, m4 = 0;
  for (float v : x) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sq += static_cast<double>(v) * v;
    m3 += std::pow(static_cast<double>(v), 3);
    m4 += std::pow(static_cast<double>(v), 4);
    inside1 += std::fabs(v) < 1.0f;
  }
  const double mean = sum / n;
  const double sd = std::sqrt(sq / n - mean * mean);
  // Standard errors: mean 0.001, std 0.0007, P(|z|<1) 0.0005, skew 0.0025, kurtosis 0.005.
  EXPECT_NEAR(mean, 0.0, 0.005);
  EXPECT_NEAR(sd, 1.0, 0.004);
  EXPECT_NEAR(inside1 / n, 0.682689, 0.003);
  EXPECT_NEAR(m3 / n, 0.0, 0.015);
  EXPECT_NEAR(m4 / n, 3.0, 0.03);
  // Shifted and scaled.
  normal_fill(x.data(), n, 2024, "stats2", 0, -2.0f, 0.1f);
  sum = sq = 0;
  for (float v : x) {
    sum += v;
    sq += static_cast<double>(v) * v;
  }
  EXPECT_NEAR(sum / n, -2.0, 0.0005);
  EXPECT_NEAR(std::sqrt(sq / n - (sum / n) * (sum / n)), 0.1, 0.0004);
}

TEST(UniformFill, InRangeSplitInvariantAndUniform) {
  const std::size_t n = 1000000;
  std::vector<float> x(n);
  uniform_fill(x.data(), n, 77, "u", 0, -0.5f, 1.5f);
  std::array<std::size_t, 10> bins{};
  double sum = 0;
  for (float v : x) {
    ASSERT_GE(v, -0.5f);
    ASSERT_LT(v, 1.5f);
    sum += v;
    ++bins[std::min<std::size_t>(9, static_cast<std::size_t>((v + 0.5f) / 0.2f))];
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);  // standard error 0.0006
  for (std::size_t b : bins) EXPECT_NEAR(static_cast<double>(b), n / 10.0, 1500.0);  // σ ≈ 300

  std::vector<float> pieces(1000);
  for (std::size_t pos = 0, len = 1; pos < 1000; pos += len, len += 2)
    uniform_fill(pieces.data() + pos, std::min<std::size_t>(len, 1000 - pos), 77, "u", pos, -0.5f,
                 1.5f);
  EXPECT_TRUE(same_bits(pieces, std::vector<float>(x.begin(), x.begin() + 1000)));

  // A differently keyed stream than normal_fill's for the same (seed, name).
  std::vector<float> u(8), z(8);
  uniform_fill(u.data(), 8, 5, "same", 0, 0.0f, 1.0f);
  normal_fill(z.data(), 8, 5, "same", 0, 0.0f, 1.0f);
  EXPECT_FALSE(same_bits(u, z));
}

TEST(UniformFill, NeverReturnsTheUpperBound) {
  // One float wide: every affine result rounds to lo or hi, and hi must not appear.
  const float lo = 1.0f, hi = std::nextafter(1.0f, 2.0f);
  std::vector<float> x(10000);
  uniform_fill(x.data(), x.size(), 3, "narrow", 0, lo, hi);
  for (float v : x) ASSERT_EQ(v, lo);
  // Huge range near the top of float: no inf, nothing at or above hi.
  uniform_fill(x.data(), x.size(), 3, "wide", 0, -3e38f, 3e38f);
  for (float v : x) {
    ASSERT_TRUE(std::isfinite(v));
    ASSERT_LT(v, 3e38f);
  }
  uniform_fill(x.data(), 4, 3, "point", 0, 2.0f, 2.0f);
  EXPECT_EQ(x[0], 2.0f);
  EXPECT_THROW(uniform_fill(x.data(), 4, 3, "bad", 0, 1.0f, 0.0f), Error);
}

TEST(PhiloxGenerator, WordsFollowTheBlockLayout) {
  const std::uint64_t seed = 0xfeedface12345678ull;
  Philox g(seed);
  for (std::uint64_t block = 0; block < 3; ++block) {
    const Words w = philox4x32_10({std::uint32_t(block), 0, 0, 0},
                                  {std::uint32_t(seed), std::uint32_t(seed >> 32)});
    for (int k = 0; k < 4; ++k) EXPECT_EQ(g.next_u32(), w[k]);
  }
  EXPECT_EQ(g.counter(), 12u);
  EXPECT_EQ(g.seed(), seed);
  // A counter past 2^34 words uses the block's high word.
  Philox far(seed, (std::uint64_t{5} << 34) + 2);
  const std::uint64_t block = ((std::uint64_t{5} << 34) + 2) / 4;
  const Words wf = philox4x32_10({std::uint32_t(block), std::uint32_t(block >> 32), 0, 0},
                                 {std::uint32_t(seed), std::uint32_t(seed >> 32)});
  EXPECT_EQ(far.next_u32(), wf[2]);
  EXPECT_EQ(far.next_u32(), wf[3]);
}

TEST(PhiloxGenerator, StateResumesTheExactSequence) {
  Philox a(99);
  for (int i = 0; i < 13; ++i) a.next_u32();
  a.next_normal();
  a.next_u64();
  const std::uint64_t s = a.seed(), c = a.counter();
  std::vector<std::uint64_t> rest;
  for (int i = 0; i < 50; ++i) rest.push_back(a.next_below(1000003));
  Philox b;
  b.set_state(s, c);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(b.next_below(1000003), rest[i]) << i;
  EXPECT_EQ(a.counter(), b.counter());
  Philox d(s, c);
  EXPECT_EQ(d.next_below(1000003), rest[0]);
}

TEST(PhiloxGenerator, U64AndUniformAndNormal) {
  Philox a(7), b(7);
  const std::uint64_t lo = b.next_u32(), hi = b.next_u32();
  EXPECT_EQ(a.next_u64(), lo | (hi << 32));
  EXPECT_EQ(a.counter(), 2u);

  Philox g(11);
  double sum = 0, sq = 0, usum = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const float u = g.next_uniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    usum += u;
    const float z = g.next_normal();
    ASSERT_TRUE(std::isfinite(z));
    sum += z;
    sq += static_cast<double>(z) * z;
  }
  EXPECT_NEAR(usum / n, 0.5, 0.003);  // σ ≈ 0.00065
  EXPECT_NEAR(sum / n, 0.0, 0.012);   // σ ≈ 0.0022
  EXPECT_NEAR(std::sqrt(sq / n), 1.0, 0.008);
}

TEST(PhiloxGenerator, NextBelowIsInRangeAndUnbiased) {
  Philox g(5);
  EXPECT_EQ(g.next_below(1), 0u);
  EXPECT_THROW(g.next_below(0), Error);
  std::array<int, 6> counts{};
  const int n = 600000;
  for (int i = 0; i < n; ++i) {
    const std::uint64_t v = g.next_below(6);
    ASSERT_LT(v, 6u);
    ++counts[v];
  }
  for (int c : counts) EXPECT_NEAR(c, n / 6.0, 1500.0);  // σ ≈ 290
  // A bound near 2^64 still returns values in range (rejection, not modulo).
  const std::uint64_t big = (std::uint64_t{1} << 63) + 12345;
  for (int i = 0; i < 100; ++i) ASSERT_LT(g.next_below(big), big);
}
