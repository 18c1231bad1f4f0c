// Where the optimizer state of each unit's owned slice lives between steps. The default keeps
// it in memory (device tier, or host tier for offload_optimizer.device = "cpu"); the offload
// layer implements NVMe swapping behind the same interface. Stores know tensors (dtype, length),
// not optimizers. The Trainer touches units in
// order 0..n-1 each step (or the order expect_order gives): acquire(u), update, release(u).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "framework/core/tensor.hpp"

namespace strata::train {

// The state of one unit's owned slice: the f32 master copy of 16-bit parameters (the Trainer's)
// and the tensors the optimizer declares (optim::Declaration::state), in its order. They are zero
// until the first step, except the master.
struct UnitOptimizerState {
  Tensor master;                // f32 master weights when parameters are 16-bit (else undefined)
  std::vector<Tensor> tensors;  // the optimizer's state tensors, in declaration order
  Tensor& operator[](std::size_t i) { return tensors.at(i); }
  const Tensor& operator[](std::size_t i) const { return tensors.at(i); }
};

// What a store allocates for one unit: the master copy (f32, `elements` long) and one tensor per
// declared state tensor (its dtype and its length in this unit: optim::unit_state_layout).
struct StateTensorSize {
  DType dtype = DType::f32;
  std::int64_t length = 0;
};
struct StateLayout {
  std::int64_t elements = 0;  // length of the owned slice
  bool master = false;        // keep an f32 master copy
  std::vector<StateTensorSize> tensors;
};

class OptimizerStateStore {
 public:
  virtual ~OptimizerStateStore() = default;
  // Creates unit u's state: master initialised from `values` (the owned parameter slice, any
  // dtype) when layout.master, every other tensor zero. Units are created in order 0..n-1.
  virtual void create(std::size_t u, const StateLayout& layout, const Tensor& values) = 0;
  // A step is about to touch every unit in order (a swapper may start reading ahead). A swapper
  // first waits for the previous step's write-backs (long complete by then) and raises their
  // errors.
  virtual void begin_step() {}
  // The order in which each step will touch the units (default 0..n-1; the Trainer updating
  // units in backward: backward's order). A swapper reads ahead in it, wrapping to the next step.
  virtual void expect_order(std::vector<std::size_t> /*order*/) {}
  // Unit u's state, resident and writable until release(u).
  virtual UnitOptimizerState& acquire(std::size_t u) = 0;
  // Done with unit u; `dirty` when it was modified (a swapper writes it back).
  virtual void release(std::size_t u, bool dirty) = 0;
  // The step has released every unit. A swapper raises the errors of the write-backs complete by
  // now and leaves the rest running into the next step's forward and backward (their errors
  // surface at the next begin_step, or at the first acquire of that unit: a checkpoint's).
  virtual void end_step() {}
  virtual std::size_t num_units() const = 0;
  // Where the state's memory is (the tensors acquire returns): Tier::device beside the parameters,
  // Tier::host for host memory and the host buffers of an NVMe store. The update runs there.
  virtual Tier tier() const = 0;
  // Seconds callers have spent blocked on this store's I/O so far (0 for memory).
  virtual double io_wait_seconds() const { return 0; }
};

// Keeps every unit's state resident in `memory` (its tier), charged to Category::optimizer.
std::unique_ptr<OptimizerStateStore> make_memory_state_store(const TensorOptions& memory);

}  // namespace strata::train
