#include "framework/memory/storage.hpp"

#include <cstdlib>
#include <new>

#include "framework/core/error.hpp"
#include "framework/memory/allocator.hpp"
#include "framework/memory/size.hpp"

namespace strata {

std::shared_ptr<Storage> Storage::allocate(std::size_t bytes, Device device, Tier tier,
                                           Category category, MemoryLedger& ledger, bool pinned) {
  STRATA_CHECK(tier != Tier::nvme, "memory", "the nvme tier holds files, not memory: use the "
               "offload swapper to place {} on NVMe", category_name(category));
  std::shared_ptr<Storage> s(new Storage());
  s->bytes_ = bytes;
  s->device_ = device;
  s->tier_ = tier;
  s->category_ = category;
  s->charge_ = LedgerCharge(ledger, tier, category, bytes);  // throws OutOfMemory first
  if (device.is_meta()) return s;  // charged, nothing allocated: data() is nullptr
  const std::size_t rounded = (std::max<std::size_t>(bytes, 1) + kStorageAlignment - 1) /
                              kStorageAlignment * kStorageAlignment;
  // Large host blocks come from (and go back to) the host block cache, so the same buffers each
  // step are not unmapped and page-faulted back in; a GPU's memory from its allocator.
  Allocator& a = device.is_cuda() || tier == Tier::device ? device_allocator(device)
                                                          : host_allocator(pinned);
  const Stream stream = current_stream(device);
  s->data_ = a.allocate(rounded, tier, stream);
  if (!s->data_) {
    // Below the cap but the memory itself is full (a GPU's allocator has already given back its
    // cache and asked again): an OutOfMemory, with the ledger's breakdown and the advice, as for
    // a cap. The message shows the ledger without this request.
    s->charge_.reset();
    ledger.throw_refused(
        tier, category, bytes,
        device.is_cuda()
            ? fmt::format("the GPU {} itself (cudaMalloc failed even after its caching allocator "
                          "gave back the free segments it kept)", device.str())
            : fmt::format("the operating system ({}, after its cache was emptied)", a.name()));
  }
  s->deleter_ = [&a, rounded, tier, stream](void* p) { a.release(p, rounded, tier, stream); };
  return s;
}

std::shared_ptr<Storage> Storage::wrap(void* data, std::size_t bytes, Device device,
                                       std::function<void(void*)> deleter,
                                       MemoryLedger* owner_ledger) {
  std::shared_ptr<Storage> s(new Storage());
  s->data_ = data;
  s->bytes_ = bytes;
  s->device_ = device;
  s->tier_ = Tier::host;
  s->category_ = Category::other;
  s->deleter_ = std::move(deleter);
  s->owner_ledger_ = owner_ledger;
  return s;
}

Storage::~Storage() {
  if (deleter_ && data_) deleter_(data_);
}

}  // namespace strata
