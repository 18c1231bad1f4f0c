#include "offload/host_state_store.hpp"

#include <cstring>

namespace strata::offload {

HostStateStore::HostStateStore(bool pin_memory, MemoryLedger* ledger, bool meta)
    : pin_(pin_memory), meta_(meta), ledger_(ledger ? *ledger : MemoryLedger::global()) {}

void HostStateStore::create(std::size_t u, const train::StateLayout& l, const Tensor& values) {
  STRATA_CHECK(u == units_.size(), "offload", "optimizer state created out of order (unit {})", u);
  const PackedStateLayout p = pack(l);
  Unit unit;
  unit.buf = HostBuffer(p.bytes(), Category::optimizer, pin_, ledger_, meta_);
  if (unit.buf.data()) std::memset(unit.buf.data(), 0, unit.buf.size());
  unit.views = packed_views(p, unit.buf.data(), unit.buf.device());
  if (l.master) unit.views.master.copy_from(values);
  units_.push_back(std::move(unit));
}

}  // namespace strata::offload
