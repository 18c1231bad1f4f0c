// The sums of squares a step's gradient norm and overflow check are made of, kept where the
// gradients are (a GPU's memory for a GPU job) until the step reads them all at once: one host
// read per step for the norm and the check together, however many units, instead of one per unit
// (a GPU job's host then never waits for the GPU in backward, where the shares are taken).
//
// Per unit two f64 slots: the share counted in this process's norm (ShardReductions's rules), and
// what only the overflow check reads (replicated parameters on a tensor-parallel rank that does not
// count them). A sum of squares in double is finite exactly when every element is (a 16- or 32-bit
// value squared stays far inside double's range), so the check needs no pass of its own.
#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include "framework/core/tensor.hpp"

namespace strata::train {

class GradSums {
 public:
  explicit GradSums(std::size_t units = 0);

  // Unit u's two slots, zeroed, on the device (and tier and ledger) of `like`, replacing what u
  // had: a [2] f64 view the caller adds sums into (ops::sum_squares_add).
  Tensor take(std::size_t u, const Tensor& like);
  // Unit u has nothing here (no owned elements): its sums are zeros, and no buffer is touched.
  void skip(std::size_t u) { where_.at(u) = kNone; }
  bool complete() const;  // every unit taken since the last forget()
  void forget();

  // Every unit's {counted, check-only} sums (units not taken: zeros), each buffer copied to the
  // host once: one host read for the usual single device.
  std::vector<std::array<double, 2>> read();
  // Host reads so far (a read of a buffer with no unit taken is none).
  std::size_t reads() const { return reads_; }

 private:
  static constexpr int kUnset = -1, kNone = -2;
  std::vector<int> where_;    // per unit: index into bufs_, kNone (skipped) or kUnset
  std::vector<Tensor> bufs_;  // [2 * units] f64, one per device the gradients were on
  std::size_t reads_ = 0;
};

}  // namespace strata::train
