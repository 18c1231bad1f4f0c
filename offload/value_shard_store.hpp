// ValueShardStore: where ZeRO-3's owned parameter slices live when offload_param moves them off
// the device — the host tier ("cpu") or a per-rank NVMe swap file ("nvme"). The parameter store
// asks for a unit's slice around each use (the all-gather before forward/backward, the optimizer
// update, checkpoints): acquire(u) ... release(u, dirty).
//
// The interface belongs in framework/nn (nn::ParamStore calls it); it is declared here until that
// seam lands (docs/offload.md, "Parameter offload"), after which this header only re-exports it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "framework/config/config.hpp"
#include "framework/core/tensor.hpp"
#include "offload/host_buffer.hpp"
#include "offload/swapper.hpp"

namespace strata::offload {

class ValueShardStore {
 public:
  virtual ~ValueShardStore() = default;
  // Unit u's owned slice: `elements` of `dtype`, zero until written. Created in order 0..n-1.
  virtual void create(std::size_t u, std::int64_t elements, DType dtype) = 0;
  // Unit u's slice, resident and writable until release(u).
  virtual Tensor acquire(std::size_t u) = 0;
  // Done with unit u; `dirty` when it was written (an NVMe store writes it back).
  virtual void release(std::size_t u, bool dirty) = 0;
  virtual std::size_t num_units() const = 0;
};

// offload_param.device = "cpu": every slice in host memory (pinned when asked and possible),
// charged to the host tier under params.
class HostValueShardStore final : public ValueShardStore {
 public:
  HostValueShardStore(bool pin_memory, MemoryLedger* ledger);
  void create(std::size_t u, std::int64_t elements, DType dtype) override;
  Tensor acquire(std::size_t u) override;
  void release(std::size_t, bool) override {}
  std::size_t num_units() const override { return units_.size(); }

 private:
  struct Unit {
    HostBuffer buf;
    std::int64_t elements;
    DType dtype;
  };
  bool pin_;
  MemoryLedger& ledger_;
  std::vector<Unit> units_;
};

// offload_param.device = "nvme": slices in this rank's "params" swap file, buffer_count host
// buffers. Reads ahead in the direction the units are being visited (forward 0..n-1, backward
// n-1..0, the optimizer 0..n-1), so the gather of the next unit finds its slice resident.
class NvmeValueShardStore final : public ValueShardStore {
 public:
  explicit NvmeValueShardStore(SwapperOptions opts);
  void create(std::size_t u, std::int64_t elements, DType dtype) override;
  Tensor acquire(std::size_t u) override;
  void release(std::size_t u, bool dirty) override;
  std::size_t num_units() const override { return units_.size(); }
  // Waits for every write-back; throws the first I/O error.
  void flush() { swapper_.flush(); }
  const Swapper& swapper() const { return swapper_; }
  Swapper& swapper() { return swapper_; }

 private:
  void read_ahead(std::size_t u);
  struct Unit {
    std::int64_t elements;
    DType dtype;
  };
  Swapper swapper_;
  std::vector<Unit> units_;
  std::int64_t last_ = -1;  // previous unit acquired
  int direction_ = 1;
};

// The store offload_param asks for: nullptr for "none". Bytes are charged to memory.ledger.
std::unique_ptr<ValueShardStore> make_value_shard_store(const config::Config& cfg, int rank,
                                                        const TensorOptions& memory);

}  // namespace strata::offload
