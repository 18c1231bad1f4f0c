// The parameter-slice stores of offload_param (ZeRO-3): the host tier ("cpu") or a per-rank NVMe
// swap file ("nvme"), behind nn::ValueShardStore, which nn::ParamStore asks for a unit's slice
// around each use (the all-gather before forward/backward, the optimizer update, checkpoints).
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

// offload_param.device = "cpu": every slice in host memory (pinned when asked and possible),
// charged to the host tier under params (meta: the planner's store, charged, holding nothing).
class HostValueShardStore final : public ValueShardStore {
 public:
  HostValueShardStore(bool pin_memory, MemoryLedger* ledger, bool meta = false);
  void create(std::size_t u, std::int64_t elements, DType dtype) override;
  Tensor acquire(std::size_t u) override;
  void release(std::size_t, bool) override {}
  std::size_t num_units() const override { return units_.size(); }
  std::string where() const override;

 private:
  struct Unit {
    HostBuffer buf;
    std::int64_t elements;
    DType dtype;
  };
  bool pin_;
  bool meta_;
  MemoryLedger& ledger_;
  std::vector<Unit> units_;
};

// offload_param.device = "nvme": slices in this rank's "params" swap file, buffer_count host
// buffers. Reads ahead the units its callers say come next (expect(): the engine's unit schedule,
// the optimizer's and checkpoints' 0..n-1), so the gather of the next unit finds its slice
// resident or in flight; without an expectation it reads nothing ahead.
class NvmeValueShardStore final : public ValueShardStore {
 public:
  explicit NvmeValueShardStore(SwapperOptions opts);
  void create(std::size_t u, std::int64_t elements, DType dtype) override;
  void expect(std::vector<std::size_t> upcoming) override;
  Tensor acquire(std::size_t u) override;
  void release(std::size_t u, bool dirty) override;
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
  };
  Swapper swapper_;
  std::vector<Unit> units_;
  std::vector<std::size_t> expected_;  // units the callers will acquire next, in order
  std::size_t next_ = 0;               // position in expected_ of the next acquire
};

// The store offload_param asks for: nullptr for "none". Bytes are charged to memory.ledger.
std::unique_ptr<ValueShardStore> make_value_shard_store(const config::Config& cfg, int rank,
                                                        const TensorOptions& memory);

}  // namespace strata::offload
