#include "offload/value_shard_store.hpp"

#include <algorithm>
#include <cstring>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/memory/size.hpp"
#include "offload/factory.hpp"

namespace strata::offload {

namespace {
// A slice's view; an op's workspace for it (a 16-bit slice widened) goes to the store's ledger.
Tensor view(std::byte* base, std::int64_t n, DType dt, Device device, MemoryLedger& ledger) {
  const std::size_t bytes = static_cast<std::size_t>(n) * dtype_size(dt);
  return Tensor(Storage::wrap(base, bytes, device, {}, &ledger), dt, Shape{n}, {1}, 0);
}
std::uint64_t slice_bytes(std::int64_t n, DType dt) {
  return static_cast<std::uint64_t>(n) * dtype_size(dt);
}
}  // namespace

HostValueShardStore::HostValueShardStore(bool pin_memory, MemoryLedger* ledger, Category category,
                                         bool meta)
    : pin_(pin_memory),
      meta_(meta),
      ledger_(ledger ? *ledger : MemoryLedger::global()),
      category_(category) {}

void HostValueShardStore::create(std::size_t u, std::int64_t elements, DType dtype) {
  STRATA_CHECK(u == units_.size(), "offload", "slice created out of order (unit {})", u);
  Unit un{HostBuffer(slice_bytes(elements, dtype), category_, pin_, ledger_, meta_), elements,
          dtype, /*zero=*/true};
  if (un.buf.data()) std::memset(un.buf.data(), 0, un.buf.size());
  units_.push_back(std::move(un));
}

Tensor HostValueShardStore::acquire(std::size_t u) {
  Unit& un = units_.at(u);
  un.zero = false;  // the caller holds the memory itself: it may write without saying so
  return view(un.buf.data(), un.elements, un.dtype, un.buf.device(), ledger_);
}

void HostValueShardStore::zero(std::size_t u) {
  Unit& un = units_.at(u);
  if (un.buf.data()) std::memset(un.buf.data(), 0, un.buf.size());
  un.zero = true;
}

std::string HostValueShardStore::where() const {
  return pin_ ? (cuda::compiled() ? "host memory (pinned)" : "host memory (pin_memory: no CUDA, plain)")
              : "host memory";
}

namespace {
SwapperOptions for_category(SwapperOptions o, Category c) {
  o.what = c == Category::grads ? "grads" : "params";
  o.category = c;
  return o;
}
}  // namespace

NvmeValueShardStore::NvmeValueShardStore(SwapperOptions opts, Category category)
    : swapper_(for_category(std::move(opts), category)) {}

void NvmeValueShardStore::create(std::size_t u, std::int64_t elements, DType dtype) {
  STRATA_CHECK(u == units_.size(), "offload", "slice created out of order (unit {})", u);
  swapper_.add_unit(slice_bytes(elements, dtype));
  units_.push_back(Unit{elements, dtype, /*zero=*/true});  // zeros until written: never read
}

void NvmeValueShardStore::zero(std::size_t u) {
  STRATA_CHECK(u < units_.size(), "offload", "unit {} of {}", u, units_.size());
  units_[u].zero = true;
}

std::string NvmeValueShardStore::where() const {
  return fmt::format("nvme ({}, {} buffers of {})", swapper_.path(), swapper_.buffer_count(),
                     format_bytes(swapper_.buffer_bytes()));
}

void NvmeValueShardStore::expect(std::vector<std::size_t> upcoming) {
  expected_ = std::move(upcoming);
  next_ = 0;
  overwrites_ = false;
  read_ahead();
}

void NvmeValueShardStore::expect_overwrites(std::vector<std::size_t> upcoming) {
  expected_ = std::move(upcoming);
  next_ = 0;
  overwrites_ = true;
}

void NvmeValueShardStore::read_ahead() {
  if (overwrites_) return;
  std::vector<std::size_t> next;
  const auto limit = static_cast<std::size_t>(swapper_.buffer_count());
  for (std::size_t i = next_; i < expected_.size() && next.size() + 1 + spare_ < limit; ++i)
    if (!units_[expected_[i]].zero && std::find(next.begin(), next.end(), expected_[i]) == next.end())
      next.push_back(expected_[i]);
  if (!next.empty()) swapper_.prefetch(next);
}

Tensor NvmeValueShardStore::acquire(std::size_t u) { return acquire_unit(u, false); }

Tensor NvmeValueShardStore::acquire_to_overwrite(std::size_t u) { return acquire_unit(u, true); }

Tensor NvmeValueShardStore::acquire_unit(std::size_t u, bool overwrite) {
  STRATA_CHECK(u < units_.size(), "offload", "unit {} of {}", u, units_.size());
  // Follow the expectation: the acquire of its next unit moves past it; any other unit means the
  // callers went elsewhere, and nothing more is read ahead until they say what comes next —
  // except an overwrite beside expected reads (the optimizer updating a unit in backward while
  // the gathers read ahead): it reads nothing, so the reads stay expected, and it takes a buffer
  // that holds none of the units still expected; from then on one buffer is kept out of the
  // read-ahead for it (else the read-ahead fills every buffer the gathers do not hold, and the
  // overwrite would evict a slice read ahead, to be read again).
  std::vector<std::size_t> keep;
  if (next_ < expected_.size() && expected_[next_] == u) {
    ++next_;
  } else if (overwrite && !overwrites_ && next_ < expected_.size()) {
    keep.assign(expected_.begin() + static_cast<std::ptrdiff_t>(next_), expected_.end());
    spare_ = 1;
  } else {
    expected_.clear(), next_ = 0, overwrites_ = false;
  }
  Unit& un = units_[u];
  // Neither a zeroed unit nor one the caller overwrites is read.
  std::byte* buf = swapper_.acquire(u, /*fresh=*/un.zero || overwrite, keep);
  if (un.zero && !overwrite && buf) std::memset(buf, 0, slice_bytes(un.elements, un.dtype));
  read_ahead();
  return view(buf, un.elements, un.dtype, swapper_.file().meta() ? Device::meta() : Device::cpu(),
              swapper_.ledger());
}

void NvmeValueShardStore::release(std::size_t u, bool dirty) {
  swapper_.release(u, dirty);
  if (dirty) units_[u].zero = false;  // the file holds what was written
  read_ahead();
}

std::unique_ptr<ValueShardStore> make_value_shard_store(const config::Config& cfg, int rank,
                                                        const TensorOptions& memory) {
  const auto& op = cfg.zero_optimization.offload_param;
  switch (op.device) {
    case config::OffloadDevice::none:
      return nullptr;
    case config::OffloadDevice::cpu:
      return std::make_unique<HostValueShardStore>(op.pin_memory, memory.ledger, Category::params,
                                                   memory.device.is_meta());
    case config::OffloadDevice::nvme:
      return std::make_unique<NvmeValueShardStore>(
          swapper_options(cfg, op.nvme_path, rank, op.buffer_count, op.pin_memory, memory));
  }
  return nullptr;
}

std::unique_ptr<ValueShardStore> make_grad_shard_store(const config::Config& cfg, int rank,
                                                       const TensorOptions& memory) {
  const auto& oo = cfg.zero_optimization.offload_optimizer;
  switch (oo.device) {
    case config::OffloadDevice::none:
      return nullptr;
    case config::OffloadDevice::cpu:
      return std::make_unique<HostValueShardStore>(oo.pin_memory, memory.ledger, Category::grads,
                                                   memory.device.is_meta());
    case config::OffloadDevice::nvme: {
      // Updating in backward without accumulation, a gradient is never written or read: the
      // store only stages each unit's reduction, one unit at a time.
      const bool staging_only = cfg.strata.optimizer_in_backward && cfg.gradient_accumulation_steps <= 1;
      const std::int64_t buffers = staging_only ? std::min<std::int64_t>(2, oo.buffer_count)
                                                : oo.buffer_count;
      return std::make_unique<NvmeValueShardStore>(
          swapper_options(cfg, oo.nvme_path, rank, buffers, oo.pin_memory, memory), Category::grads);
    }
  }
  return nullptr;
}

}  // namespace strata::offload
