#include "framework/data/permutation.hpp"

#include "framework/core/error.hpp"

namespace strata::data {

std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

std::uint64_t epoch_key(std::uint64_t seed, std::uint64_t epoch) {
  return mix64(mix64(seed ^ 0x5354524154414450ull) + epoch * 0x9e3779b97f4a7c15ull);
}

KeyedPermutation::KeyedPermutation(std::uint64_t n, std::uint64_t key) : n_(n) {
  STRATA_CHECK(n >= 1, "data", "permutation of an empty range");
  half_bits_ = 1;
  while (half_bits_ < 32 && (std::uint64_t{1} << (2 * half_bits_)) < n) ++half_bits_;
  half_mask_ = (std::uint64_t{1} << half_bits_) - 1;
  for (int r = 0; r < kRounds; ++r) round_keys_[r] = mix64(key + 0x9e3779b97f4a7c15ull * (r + 1));
}

std::uint64_t KeyedPermutation::feistel(std::uint64_t x) const {
  std::uint64_t left = x >> half_bits_;
  std::uint64_t right = x & half_mask_;
  for (int r = 0; r < kRounds; ++r) {
    const std::uint64_t f = mix64(right ^ round_keys_[r]) & half_mask_;
    const std::uint64_t next_right = left ^ f;
    left = right;
    right = next_right;
  }
  return (left << half_bits_) | right;
}

std::uint64_t KeyedPermutation::operator()(std::uint64_t i) const {
  STRATA_CHECK(i < n_, "data", "permutation index {} out of range [0, {})", i, n_);
  // Cycle walking: the network permutes [0, 4^h) with 4^h < 4n, so values >= n are mapped
  // again until one lands in [0, n); that restricts the bijection to [0, n).
  std::uint64_t x = i;
  do {
    x = feistel(x);
  } while (x >= n_);
  return x;
}

}  // namespace strata::data
