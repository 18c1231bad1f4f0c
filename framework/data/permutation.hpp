// KeyedPermutation: a pseudo-random bijection of [0, n) computed element by element in O(1)
// memory (a keyed Feistel network with cycle walking), used to shuffle windows per epoch.
#pragma once

#include <cstdint>

namespace strata::data {

class KeyedPermutation {
 public:
  // A permutation of [0, n) chosen by `key`; n >= 1.
  KeyedPermutation(std::uint64_t n, std::uint64_t key);

  // The image of i (i < n). Distinct i give distinct results.
  std::uint64_t operator()(std::uint64_t i) const;
  std::uint64_t size() const { return n_; }

  static constexpr int kRounds = 8;

 private:
  std::uint64_t feistel(std::uint64_t x) const;

  std::uint64_t n_;
  int half_bits_;  // the network permutes [0, 4^half_bits_) >= n
  std::uint64_t half_mask_;
  std::uint64_t round_keys_[kRounds];
};

// The splitmix64 finaliser: a fixed bijective 64-bit mixer.
std::uint64_t mix64(std::uint64_t x);

// Key of the shuffle of epoch `epoch` for sampler seed `seed`.
std::uint64_t epoch_key(std::uint64_t seed, std::uint64_t epoch);

}  // namespace strata::data
