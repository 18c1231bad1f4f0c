#include "framework/memory/storage.hpp"

#include <cstdlib>
#include <new>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/core/error.hpp"
#include "framework/memory/host_block_cache.hpp"
#include "framework/memory/size.hpp"

namespace strata {

std::shared_ptr<Storage> Storage::allocate(std::size_t bytes, Device device, Tier tier,
                                           Category category, MemoryLedger& ledger) {
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
  if (device.is_cuda()) {
    s->data_ = cuda::malloc_device(rounded, device.index);
    const int idx = device.index;
    s->deleter_ = [idx](void* p) { cuda::free_device(p, idx); };
  } else {
    // Large blocks come from (and go back to) the host block cache, so the same buffers each
    // step are not unmapped and page-faulted back in.
    s->data_ = HostBlockCache::instance().allocate(rounded);
    if (!s->data_)
      fail("memory", "the operating system refused {} of {} memory for {}", format_bytes(rounded),
           tier_name(tier), category_name(category));
    s->deleter_ = [rounded](void* p) { HostBlockCache::instance().release(p, rounded); };
  }
  return s;
}

std::shared_ptr<Storage> Storage::wrap(void* data, std::size_t bytes, Device device,
                                       std::function<void(void*)> deleter) {
  std::shared_ptr<Storage> s(new Storage());
  s->data_ = data;
  s->bytes_ = bytes;
  s->device_ = device;
  s->tier_ = Tier::host;
  s->category_ = Category::other;
  s->deleter_ = std::move(deleter);
  return s;
}

Storage::~Storage() {
  if (deleter_ && data_) deleter_(data_);
}

}  // namespace strata
