#include "offload/nvme_state_store.hpp"

#include <cstring>

namespace strata::offload {

namespace {
SwapperOptions for_optimizer(SwapperOptions o) {
  o.what = "optimizer";
  o.category = Category::optimizer;
  return o;
}
}  // namespace

NvmeStateStore::NvmeStateStore(SwapperOptions opts) : swapper_(for_optimizer(std::move(opts))) {}

void NvmeStateStore::create(std::size_t u, const train::StateLayout& l, const Tensor& values) {
  STRATA_CHECK(u == layouts_.size(), "offload", "optimizer state created out of order (unit {})", u);
  const PackedStateLayout p = pack(l);
  const std::size_t id = swapper_.add_unit(p.bytes());
  layouts_.push_back(p);
  views_.emplace_back();
  // The swap file reads as zeros until written, so only the master copy needs writing; the
  // buffer is zeroed so that it is a faithful copy of the unit while it stays resident.
  std::byte* buf = swapper_.acquire(id, /*fresh=*/true);
  if (buf) std::memset(buf, 0, p.bytes());  // (a meta swapper's buffers hold nothing)
  if (l.master) packed_views(p, buf, device()).master.copy_from(values);
  swapper_.release(id, l.master, p.master_bytes());
}

std::vector<std::size_t> NvmeStateStore::upcoming(std::size_t next) const {
  std::vector<std::size_t> v;
  const std::size_t n = layouts_.size();
  const auto k = std::min<std::size_t>(n, static_cast<std::size_t>(swapper_.buffer_count()));
  for (std::size_t i = 0; i < k; ++i) v.push_back((next + i) % n);
  return v;
}

void NvmeStateStore::begin_step() {
  swapper_.flush();  // the previous step's write-backs: done during this step's forward/backward
  if (!layouts_.empty()) swapper_.prefetch(upcoming(0));
}

train::UnitOptimizerState& NvmeStateStore::acquire(std::size_t u) {
  STRATA_CHECK(u < layouts_.size(), "offload", "unit {} of {}", u, layouts_.size());
  std::byte* buf = swapper_.acquire(u);
  views_[u] = packed_views(layouts_[u], buf, device());
  swapper_.prefetch(upcoming(u + 1));
  return views_[u];
}

void NvmeStateStore::release(std::size_t u, bool dirty) {
  views_.at(u) = {};  // the buffer may be reused from here on
  swapper_.release(u, dirty);
  swapper_.prefetch(upcoming(u + 1));
}

// The last units' write-backs (the optimizer-state write tail) run on into the next forward.
void NvmeStateStore::end_step() { swapper_.reap(); }

}  // namespace strata::offload
