// ValueShardStore: where a ParamStore's per-unit slices live when they are offloaded — ZeRO-3's
// owned parameter slices (zero_optimization.offload_param) and the gradients (offloaded with
// offload_optimizer): the ParamStore asks for a unit's slice around each use — the all-gather
// before forward/backward, a gradient reduction's accumulation, the optimizer update,
// checkpoints. Implemented by offload/ (host memory, NVMe swap files).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "framework/core/tensor.hpp"

namespace strata::nn {

class ValueShardStore {
 public:
  virtual ~ValueShardStore() = default;
  // Unit u's owned slice: `elements` of `dtype`, zero until written. Created in order 0..n-1.
  virtual void create(std::size_t u, std::int64_t elements, DType dtype) = 0;
  // The units the next acquires will ask for, in order (replacing any earlier expectation): the
  // caller knows its order (the engine's unit schedule, the optimizer's 0..n-1), so a store that
  // reads slow media reads ahead exactly what comes next instead of guessing.
  virtual void expect(std::vector<std::size_t> upcoming) {}
  // The same for callers that overwrite every element of each unit they acquire
  // (acquire_to_overwrite): nothing needs reading ahead for them.
  virtual void expect_overwrites(std::vector<std::size_t> upcoming) { expect(std::move(upcoming)); }
  // Unit u's slice, resident and writable until release(u).
  virtual Tensor acquire(std::size_t u) = 0;
  // Unit u's slice for a caller that writes every element of it before releasing it dirty (the
  // optimizer's 16-bit copy of its f32 masters): a store on slow media need not read it, and its
  // contents are unspecified until written.
  virtual Tensor acquire_to_overwrite(std::size_t u) { return acquire(u); }
  // Done with unit u; `dirty` when it was written.
  virtual void release(std::size_t u, bool dirty) = 0;
  // Sets unit u to zeros (gradients between steps). A store on slow media may only remember it
  // and hand out zeros at the next acquire without reading.
  virtual void zero(std::size_t u) {
    Tensor t = acquire(u);
    t.zero();
    release(u, true);
  }
  // True when unit u is known to hold only zeros (zeroed, and not released dirty since): a caller
  // about to add into it may copy instead, or use what it would add without storing it. A store
  // that does not track it says false.
  virtual bool is_zero(std::size_t u) const { return false; }
  // Every write-back so far is complete; throws the first error (the Trainer calls it at the end
  // of each step, so a failed write fails that step). Nothing to do for a store in memory.
  virtual void flush() {}
  virtual std::size_t num_units() const = 0;
  // Seconds callers have spent blocked on this store's I/O so far (0 for memory).
  virtual double io_wait_seconds() const { return 0; }
  // Where the slices live, for logs: "host memory", "nvme (/path/file.swp, 4 buffers)".
  virtual std::string where() const = 0;
};

}  // namespace strata::nn
