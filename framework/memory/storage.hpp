// Storage: one owned, aligned allocation charged to the ledger under a tier and category;
// tensors are views into it.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "framework/core/device.hpp"
#include "framework/memory/ledger.hpp"

namespace strata {

inline constexpr std::size_t kStorageAlignment = 64;

class Storage {
 public:
  // Allocates bytes on device, charged to ledger under (tier, category), from the device's
  // allocator (or the host allocator, pinned when asked and possible, for the host tier).
  // Throws OutOfMemory when the tier's cap would be passed, or when the memory itself is full
  // (cudaMalloc fails even after the GPU's caching allocator gave back its cache).
  // On the meta device only the charge is made (data() is nullptr).
  static std::shared_ptr<Storage> allocate(std::size_t bytes, Device device, Tier tier,
                                           Category category,
                                           MemoryLedger& ledger = MemoryLedger::global(),
                                           bool pinned = false);
  // Wraps memory someone else owns (e.g. an mmap); deleter runs on destruction. Not charged;
  // `owner_ledger` is the ledger the owner charges the memory to, if any (see ledger()).
  static std::shared_ptr<Storage> wrap(void* data, std::size_t bytes, Device device,
                                       std::function<void(void*)> deleter = {},
                                       MemoryLedger* owner_ledger = nullptr);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  Tier tier() const { return tier_; }
  Category category() const { return category_; }
  // The ledger this storage is charged to, or for wrapped memory its owner's (nullptr when not
  // known): where memory derived from it (an op's workspace) is charged.
  MemoryLedger* ledger() const { return charge_.ledger() ? charge_.ledger() : owner_ledger_; }

 private:
  Storage() = default;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  MemoryLedger* owner_ledger_ = nullptr;
  Device device_;
  Tier tier_ = Tier::device;
  Category category_ = Category::other;
  LedgerCharge charge_;
  std::function<void(void*)> deleter_;
};

}  // namespace strata
