// The slice stores of offload_param (ZeRO-3 parameter slices) and of gradient offload (implied by
// offload_optimizer): the host tier ("cpu") or a per-rank NVMe swap file ("nvme"), behind
// nn::ValueShardStore, which nn::ParamStore asks for a unit's slice around each use (the
// all-gather before forward/backward, a reduction's accumulation, the optimizer, checkpoints).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "framework/config/config.hpp"
#include "framework/core/tensor.hpp"
#include "framework/nn/value_shard_store.hpp"
#include "offload/host_buffer.hpp"
#include "offload/swapper.hpp"

namespace strata::offload {

using ValueShardStore = nn::ValueShardStore;

// "cpu": every slice in host memory (pinned when asked and possible), charged to the host tier
// under `category` (params, or grads for the gradient store); meta: the planner's store, charged,
// holding nothing.
class HostValueShardStore final : public ValueShardStore {
 public:
  HostValueShardStore(bool pin_memory, MemoryLedger* ledger, Category category = Category::params,
                      bool meta = false);
  void create(std::size_t u, std::int64_t elements, DType dtype) override;
  Tensor acquire(std::size_t u) override;
  void release(std::size_t, bool) override {}
  void zero(std::size_t u) override;
  bool is_zero(std::size_t u) const override { return units_.at(u).zero; }
  std::size_t num_units() const override { return units_.size(); }
  std::string where() const override;

 private:
  struct Unit {
    HostBuffer buf;
    std::int64_t elements;
    DType dtype;
    bool zero = true;  // holds zeros: created or zeroed, and not acquired since
  };
  bool pin_;
  bool meta_;
  MemoryLedger& ledger_;
  Category category_;
  std::vector<Unit> units_;
};

// "nvme": slices in this rank's "params" (or, with Category::grads, "grads") swap file,
// buffer_count host buffers. Reads ahead the units its callers say come next (expect(): the
// engine's unit schedule, the optimizer's and checkpoints' 0..n-1), so the gather of the next
// unit finds its slice resident or in flight; without an expectation it reads nothing ahead.
// zero(u) only marks the unit: its next acquire hands out zeros without reading (and nothing is
// read ahead for it), so gradients zeroed after a step cost no I/O; a new unit starts marked.
class NvmeValueShardStore final : public ValueShardStore {
 public:
  explicit NvmeValueShardStore(SwapperOptions opts, Category category = Category::params);
  void create(std::size_t u, std::int64_t elements, DType dtype) override;
  void expect(std::vector<std::size_t> upcoming) override;
  void expect_overwrites(std::vector<std::size_t> upcoming) override;
  Tensor acquire(std::size_t u) override;
  Tensor acquire_to_overwrite(std::size_t u) override;
  void release(std::size_t u, bool dirty) override;
  void zero(std::size_t u) override;
  bool is_zero(std::size_t u) const override { return units_.at(u).zero; }
  std::size_t num_units() const override { return units_.size(); }
  std::string where() const override;
  // Waits for every write-back; throws the first I/O error (naming the swap file).
  void flush() override { swapper_.flush(); }
  double io_wait_seconds() const override {
    return swapper_.stats().read_wait_s + swapper_.stats().write_wait_s;
  }
  const Swapper& swapper() const { return swapper_; }
  Swapper& swapper() { return swapper_; }

 private:
  void read_ahead();
  struct Unit {
    std::int64_t elements;
    DType dtype;
    bool zero = false;  // reads as zeros whatever the file holds, until written
  };
  Swapper swapper_;
  std::vector<Unit> units_;
  std::vector<std::size_t> expected_;  // units the callers will acquire next, in order
  std::size_t next_ = 0;               // position in expected_ of the next acquire
  bool overwrites_ = false;            // expected_ will be overwritten: nothing to read ahead
  std::size_t spare_ = 0;              // buffers kept out of the read-ahead (for overwrites)
  Tensor acquire_unit(std::size_t u, bool overwrite);
};

// The store offload_param asks for: nullptr for "none". Bytes are charged to memory.ledger.
std::unique_ptr<ValueShardStore> make_value_shard_store(const config::Config& cfg, int rank,
                                                        const TensorOptions& memory);
// The gradient store that offload_optimizer implies (gradient offload): nullptr for "none",
// host memory for "cpu", a "grads" swap file under offload_optimizer.nvme_path for "nvme" (with
// offload_optimizer's buffer_count and pin_memory; 2 buffers when strata.optimizer_in_backward
// without accumulation consumes every gradient where it is reduced).
std::unique_ptr<ValueShardStore> make_grad_shard_store(const config::Config& cfg, int rank,
                                                       const TensorOptions& memory);

}  // namespace strata::offload
