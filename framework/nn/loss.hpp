// A micro-batch's loss as a model's forward gives it, and a step's losses read on the host once.
//
// A model that computes its loss on a GPU gives the sum of its terms where it was computed (an
// f64 of one element, not yet read: the host has not waited for the GPU) and what the sum is
// divided by (known on the host: the count of what the model counts, e.g. its valid targets). The
// engine adds a step's micro-batch losses to a LossSums, which reads them all with one host read
// at the end of the step instead of one per micro-batch. A model that computes its loss on the
// host gives a value. On a GPU the engine starts that read (begin_read: a copy to pinned host
// memory, queued) before the step's read of its gradient sums and finishes it (total) after: the
// host waits for the GPU once for both.
#pragma once

#include <cstddef>
#include <vector>

#include "framework/backend/stream.hpp"
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
  // Slots of a buffer when it is first made (it doubles when full).
  static constexpr std::int64_t kFirstSlots = 8;
  LossSums() = default;
  // Waits for the copies of a read begun and not finished (their host buffers go with it); never
  // throws.
  ~LossSums();
  LossSums(const LossSums&) = delete;
  LossSums& operator=(const LossSums&) = delete;
  // Adds one micro-batch's loss: a sum is copied into a slot of this object's f64 buffer on the
  // sum's device (queued there: the host does not wait), a host value kept as it is.
  void add(const Loss& loss);
  // Queues the copy of the sums added so far to host memory (pinned where the GPU can pin it)
  // behind the work that computed them, and returns without waiting; total() then reads them
  // there, waiting only if the GPU has not reached the copy yet. Nothing is added after it until
  // total() or forget(). On the CPU and the meta device it does nothing.
  void begin_read();
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
  // Waits for the copies of a read begun and not finished.
  void wait_copies() const;

  std::vector<Entry> entries_;
  std::vector<Tensor> bufs_;           // f64, one per device the sums were on, kept across steps
  std::vector<std::int64_t> used_;     // slots used in each buffer this step
  // begin_read: per buffer, the host copy of its used slots and the point the copy reaches
  // (undefined for a buffer with nothing to copy); reading: begin_read was called.
  std::vector<Tensor> host_;
  std::vector<Event> copied_;
  bool reading_ = false;
  std::size_t reads_ = 0;
};

}  // namespace strata::nn
