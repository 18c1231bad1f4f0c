// Where the optimizer state of each unit's owned slice lives between steps. The default keeps
// it in memory (device tier, or host tier for offload_optimizer.device = "cpu"); the offload
// layer implements NVMe swapping behind the same interface. The Trainer touches units in
// order 0..n-1 each step: acquire(u), update, release(u).
#pragma once

#include <cstdint>
#include <memory>

#include "framework/core/tensor.hpp"

namespace strata::train {

// The state of one unit's owned slice, all f32 and of the same length.
struct UnitOptimizerState {
  Tensor master;  // f32 master weights when parameters are 16-bit (else undefined)
  Tensor m;       // AdamW first moment, or SGD momentum
  Tensor v;       // AdamW second moment (undefined for SGD)
};

struct StateLayout {
  std::int64_t elements = 0;  // length of the owned slice
  bool master = false;        // keep an f32 master copy
  bool second_moment = true;  // AdamW's v
};

class OptimizerStateStore {
 public:
  virtual ~OptimizerStateStore() = default;
  // Creates unit u's state: master initialised from `values` (the owned parameter slice, any
  // dtype) when layout.master, moments zero. Units are created in order 0..n-1.
  virtual void create(std::size_t u, const StateLayout& layout, const Tensor& values) = 0;
  // A step is about to touch every unit in order (a swapper may start reading ahead).
  virtual void begin_step() {}
  // Unit u's state, resident and writable until release(u).
  virtual UnitOptimizerState& acquire(std::size_t u) = 0;
  // Done with unit u; `dirty` when it was modified (a swapper writes it back).
  virtual void release(std::size_t u, bool dirty) = 0;
  // Every write-back of this step is complete; errors surface here.
  virtual void end_step() {}
  virtual std::size_t num_units() const = 0;
  // Seconds callers have spent blocked on this store's I/O so far (0 for memory).
  virtual double io_wait_seconds() const { return 0; }
};

// Keeps every unit's state resident in `memory` (its tier), charged to Category::optimizer.
std::unique_ptr<OptimizerStateStore> make_memory_state_store(const TensorOptions& memory);

}  // namespace strata::train
