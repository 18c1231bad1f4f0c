// Counter-based random numbers (Philox4x32-10). A value is a pure function of
// (seed, stream key, element index), so any sharding of a tensor draws bit-identical values.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace strata {

// One Philox4x32-10 block: 4 random 32-bit words for (counter, key).
std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> counter,
                                           std::array<std::uint32_t, 2> key);

// Stable 64-bit hash of a name (FNV-1a), used to key a parameter's stream.
std::uint64_t hash_name(std::string_view name);

// out[i] = mean + std * N(0,1) sample number (offset + i) of the stream keyed by (seed, name).
// Deterministic and independent of how [offset, offset+n) is split across calls.
void normal_fill(float* out, std::size_t n, std::uint64_t seed, std::string_view name,
                 std::uint64_t offset, float mean, float std);
// out[i] = U[lo, hi) sample number (offset + i) of the stream keyed by (seed, name).
void uniform_fill(float* out, std::size_t n, std::uint64_t seed, std::string_view name,
                  std::uint64_t offset, float lo, float hi);

// A sequential generator (sampling, shuffles) whose whole state is (seed, counter): saving and
// restoring those two numbers resumes the exact sequence.
class Philox {
 public:
  explicit Philox(std::uint64_t seed = 0, std::uint64_t counter = 0) : seed_(seed), counter_(counter) {}
  std::uint32_t next_u32();
  std::uint64_t next_u64();
  float next_uniform();  // [0, 1)
  float next_normal();   // N(0, 1)
  // Uniform integer in [0, n) without modulo bias.
  std::uint64_t next_below(std::uint64_t n);
  std::uint64_t seed() const { return seed_; }
  std::uint64_t counter() const { return counter_; }
  void set_state(std::uint64_t seed, std::uint64_t counter);

 private:
  std::uint64_t seed_;
  std::uint64_t counter_;  // number of 32-bit words drawn so far
};

}  // namespace strata
