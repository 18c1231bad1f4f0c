// Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3",
// SC 2011) and the stream layouts built on it.
//
// Named streams (parameter initialisation), key = (low32(seed), high32(seed)), h = hash_name(name):
//   normal_fill: element i uses block counter (low32(i/2), high32(i/2), low32(h), high32(h));
//     words w0, w1 give u1 = (w0 + 1) / 2^32 in (0, 1] and u2 = w1 / 2^32 in [0, 1);
//     r = sqrt(-2 ln u1); element 2j = r cos(2π u2), element 2j+1 = r sin(2π u2);
//     out = float(mean + std * z), all in double until the final rounding.
//   uniform_fill: element i uses word i%4 of block (low32(i/4), high32(i/4), low32(h),
//     high32(h) ^ kUniformDomain); u = (w >> 8) / 2^24; out = float(lo + (hi - lo) * u) < hi.
// Philox (sequential): word c is word c%4 of block (low32(c/4), high32(c/4), 0, 0).
#include "framework/core/rng.hpp"

#include <cmath>
#include <limits>
#include <numbers>

#include "framework/core/error.hpp"

namespace strata {

namespace {

constexpr std::uint32_t kM0 = 0xD2511F53u;
constexpr std::uint32_t kM1 = 0xCD9E8D57u;
constexpr std::uint32_t kW0 = 0x9E3779B9u;
constexpr std::uint32_t kW1 = 0xBB67AE85u;
// Separates uniform_fill's blocks from normal_fill's for the same (seed, name).
constexpr std::uint32_t kUniformDomain = 0x756e6966u;  // "unif"

constexpr double k2Pow32Inv = 1.0 / 4294967296.0;

inline std::uint32_t lo32(std::uint64_t x) {
  return static_cast<std::uint32_t>(x);
}
inline std::uint32_t hi32(std::uint64_t x) {
  return static_cast<std::uint32_t>(x >> 32);
}

// Two standard normals from two uniform words (Box–Muller, in double).
inline void box_muller(std::uint32_t w0, std::uint32_t w1, double& z0, double& z1) {
  const double u1 = (static_cast<double>(w0) + 1.0) * k2Pow32Inv;  // (0, 1]
  const double u2 = static_cast<double>(w1) * k2Pow32Inv;          // [0, 1)
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double t = 2.0 * std::numbers::pi * u2;
  z0 = r * std::cos(t);
  z1 = r * std::sin(t);
}

}  // namespace

std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> c,
                                           std::array<std::uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += kW0;
      k[1] += kW1;
    }
    const std::uint64_t p0 = static_cast<std::uint64_t>(kM0) * c[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(kM1) * c[2];
    c = {hi32(p1) ^ c[1] ^ k[0], lo32(p1), hi32(p0) ^ c[3] ^ k[1], lo32(p0)};
  }
  return c;
}

std::uint64_t hash_name(std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64 offset basis
  for (unsigned char ch : name) {
    h ^= ch;
    h *= 0x100000001b3ull;  // FNV-1a 64 prime
  }
  return h;
}

void normal_fill(float* out, std::size_t n, std::uint64_t seed, std::string_view name,
                 std::uint64_t offset, float mean, float std) {
  if (n == 0) return;
  STRATA_CHECK(n - 1 <= std::numeric_limits<std::uint64_t>::max() - offset, "rng",
               "normal_fill of {} elements from offset {} overflows the 64-bit index", n, offset);
  const std::uint64_t h = hash_name(name);
  const std::array<std::uint32_t, 2> key{lo32(seed), hi32(seed)};
  const double m = mean, s = std;
  std::size_t k = 0;
  while (k < n) {
    const std::uint64_t i = offset + k;
    const std::uint64_t j = i / 2;
    const auto w = philox4x32_10({lo32(j), hi32(j), lo32(h), hi32(h)}, key);
    double z[2];
    box_muller(w[0], w[1], z[0], z[1]);
    for (std::uint64_t e = i & 1u; e < 2 && k < n; ++e, ++k)
      out[k] = static_cast<float>(m + s * z[e]);
  }
}

void uniform_fill(float* out, std::size_t n, std::uint64_t seed, std::string_view name,
                  std::uint64_t offset, float lo, float hi) {
  STRATA_CHECK(lo <= hi, "rng", "uniform_fill range [{}, {}) is empty or reversed", lo, hi);
  if (n == 0) return;
  STRATA_CHECK(n - 1 <= std::numeric_limits<std::uint64_t>::max() - offset, "rng",
               "uniform_fill of {} elements from offset {} overflows the 64-bit index", n, offset);
  const std::uint64_t h = hash_name(name);
  const std::array<std::uint32_t, 2> key{lo32(seed), hi32(seed)};
  const double a = lo, width = static_cast<double>(hi) - static_cast<double>(lo);
  // The largest float below hi: rounding in the affine map must not produce hi itself.
  const float below_hi = lo < hi ? std::nextafter(hi, lo) : lo;
  std::size_t k = 0;
  while (k < n) {
    const std::uint64_t i = offset + k;
    const std::uint64_t j = i / 4;
    const auto w = philox4x32_10({lo32(j), hi32(j), lo32(h), hi32(h) ^ kUniformDomain}, key);
    for (std::uint64_t e = i & 3u; e < 4 && k < n; ++e, ++k) {
      const double u = static_cast<double>(w[e] >> 8) * (1.0 / 16777216.0);
      const float v = static_cast<float>(a + width * u);
      out[k] = v < hi ? v : below_hi;
    }
  }
}

std::uint32_t Philox::next_u32() {
  const std::uint64_t block = counter_ / 4;
  const auto w = philox4x32_10({lo32(block), hi32(block), 0u, 0u}, {lo32(seed_), hi32(seed_)});
  return w[counter_++ % 4];
}

std::uint64_t Philox::next_u64() {
  const std::uint64_t lo = next_u32();
  const std::uint64_t hi = next_u32();
  return lo | (hi << 32);
}

float Philox::next_uniform() {
  return static_cast<float>(next_u32() >> 8) * (1.0f / 16777216.0f);
}

float Philox::next_normal() {
  const std::uint32_t w0 = next_u32();
  const std::uint32_t w1 = next_u32();
  double z0, z1;
  box_muller(w0, w1, z0, z1);
  return static_cast<float>(z0);
}

std::uint64_t Philox::next_below(std::uint64_t n) {
  STRATA_CHECK(n > 0, "rng", "next_below(0): the range [0, 0) is empty");
  // Reject the lowest (2^64 mod n) values so every residue is equally likely.
  const std::uint64_t threshold = (0 - n) % n;
  for (;;) {
    const std::uint64_t r = next_u64();
    if (r >= threshold) return r % n;
  }
}

void Philox::set_state(std::uint64_t seed, std::uint64_t counter) {
  seed_ = seed;
  counter_ = counter;
}

}  // namespace strata
