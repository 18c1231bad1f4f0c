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

std::vector<std::size_t> NvmeStateStore::upcoming(std::size_t pos) const {
  std::vector<std::size_t> v;
  const std::size_t n = layouts_.size();
  const auto k = std::min<std::size_t>(n, static_cast<std::size_t>(swapper_.buffer_count()));
  for (std::size_t i = 0; i < k; ++i) {
    const std::size_t p = (pos + i) % n;
    v.push_back(order_.empty() ? p : order_[p]);
  }
  return v;
}

std::size_t NvmeStateStore::position(std::size_t u) const { return order_.empty() ? u : pos_.at(u); }

void NvmeStateStore::expect_order(std::vector<std::size_t> order) {
  const std::size_t n = layouts_.size();
  STRATA_CHECK(order.size() == n, "offload", "expected order names {} of {} units", order.size(), n);
  std::vector<std::size_t> pos(n, n);
  for (std::size_t i = 0; i < n; ++i) {
    STRATA_CHECK(order[i] < n && pos[order[i]] == n, "offload",
                 "expected order names unit {} twice or out of range ({} units)", order[i], n);
    pos[order[i]] = i;
  }
  order_ = std::move(order);
  pos_ = std::move(pos);
  if (n > 0) swapper_.prefetch(upcoming(0));
}

void NvmeStateStore::begin_step() {
  swapper_.flush();  // the previous step's write-backs: done during this step's forward/backward
  if (!layouts_.empty()) swapper_.prefetch(upcoming(0));
}

train::UnitOptimizerState& NvmeStateStore::acquire(std::size_t u) {
  STRATA_CHECK(u < layouts_.size(), "offload", "unit {} of {}", u, layouts_.size());
  std::byte* buf = swapper_.acquire(u);
  views_[u] = packed_views(layouts_[u], buf, device());
  swapper_.prefetch(upcoming(position(u) + 1));
  return views_[u];
}

void NvmeStateStore::release(std::size_t u, bool dirty) {
  views_.at(u) = {};  // the buffer may be reused from here on
  swapper_.release(u, dirty);
  swapper_.prefetch(upcoming(position(u) + 1));
}

// The last units' write-backs (the optimizer-state write tail) run on into the next forward.
void NvmeStateStore::end_step() { swapper_.reap(); }

}  // namespace strata::offload
