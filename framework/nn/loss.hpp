// A micro-batch's loss as a model's forward gives it, and a step's losses read on the host once.
//
// A model that computes its loss on a GPU gives the sum of its terms where it was computed (an
// f64 of one element, not yet read: the host has not waited for the GPU) and what the sum is
// divided by (known on the host: the count of what the model counts, e.g. its valid targets). The
// engine adds a step's micro-batch losses to a LossSums, which reads them all with one host read
// at the end of the step instead of one per micro-batch. A model that computes its loss on the
// host gives a value.
#pragma once

#include <cstddef>
#include <vector>

#include "framework/core/tensor.hpp"

namespace strata::nn {

class Loss {
 public:
  Loss() = default;
  Loss(double value) : value_(value) {}  // NOLINT(google-explicit-constructor): a host value
  // sum: f64 of one element, on any device; divisor 0 makes the loss 0 (nothing counted).
  Loss(Tensor sum, double divisor);

  bool on_host() const { return !sum_.defined(); }
  const Tensor& sum() const { return sum_; }
  double divisor() const { return divisor_; }
  // sum / divisor (0 when the divisor is 0: nothing counted).
  static double mean(double sum, double divisor) { return divisor > 0 ? sum / divisor : 0.0; }
  // The loss, its sum read (on a GPU the host waits for it; on the meta device the sum is 0).
  double value() const;

 private:
  Tensor sum_;
  double divisor_ = 0;
  double value_ = 0;
};

class LossSums {
 public:
  // Adds one micro-batch's loss: a sum is copied into a slot of this object's f64 buffer on the
  // sum's device (queued there: the host does not wait), a host value kept as it is.
  void add(const Loss& loss);
  // The sum of the added losses' values in the order added (bitwise the sum of their value()s
  // from 0), with one host read per device they were on; then they are forgotten.
  double total();
  void forget();
  // Buffers read on the host so far.
  std::size_t reads() const { return reads_; }

 private:
  struct Entry {
    double value = 0;       // a host value
    double divisor = 0;     // a sum's divisor
    int buf = -1;           // the sum's buffer (index into bufs_), -1: a host value
    std::int64_t slot = 0;  // the sum's slot in that buffer
  };
  std::vector<Entry> entries_;
  std::vector<Tensor> bufs_;           // f64, one per device the sums were on, kept across steps
  std::vector<std::int64_t> used_;     // slots used in each buffer this step
  std::size_t reads_ = 0;
};

}  // namespace strata::nn
