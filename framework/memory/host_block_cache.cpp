#include "framework/memory/host_block_cache.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "framework/core/error.hpp"
#include "framework/memory/ledger.hpp"
#include "framework/memory/size.hpp"

namespace strata {

namespace {

constexpr std::size_t kPage = 4096;

std::size_t default_capacity() {
  if (const char* env = std::getenv("STRATA_HOST_CACHE"); env && *env) {
    try {
      return static_cast<std::size_t>(parse_bytes(env));
    } catch (const std::exception& e) {
      user_fail("memory", "STRATA_HOST_CACHE='{}' is not a size ({}): give bytes such as 512MiB, "
                "or 0 to turn the host block cache off", env, e.what());
    }
  }
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  const std::size_t phys = pages > 0 && page > 0 ? std::size_t(pages) * std::size_t(page) : 0;
  // Every rank on this node has its own cache: share the budget between them.
  long local = 1;
  if (const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) local = std::max(1L, std::atol(v));
  return std::min<std::size_t>(phys / 8, std::size_t(2) << 30) / static_cast<std::size_t>(local);
}

}  // namespace

struct HostBlockCache::Impl {
  std::size_t capacity = 0;
  bool account = false;  // charge cached bytes to the global ledger as reserved (the process-wide cache)
  mutable std::mutex mu;
  // Free blocks, most recently returned at the front; by (tier, size) for lookup.
  struct Block {
    void* p;
    std::size_t bytes;
    Tier tier;
  };
  std::list<Block> lru;
  std::unordered_multimap<std::size_t, std::list<Block>::iterator> by_key;
  std::size_t cached = 0, hits = 0, misses = 0;

  static std::size_t key(Tier t, std::size_t bytes) { return bytes * kNumTiers + std::size_t(t); }

  void reserve(Tier t, std::size_t n) {
    if (account) MemoryLedger::global().reserve(t, n);
  }
  void unreserve(Tier t, std::size_t n) {
    if (account) MemoryLedger::global().unreserve(t, n);
  }

  // Unlinks block `it`; the caller frees it after dropping the lock (free may unmap, which
  // should not hold up other threads' allocations).
  void* unlink(std::list<Block>::iterator it) {
    auto [lo, hi] = by_key.equal_range(key(it->tier, it->bytes));
    for (auto k = lo; k != hi; ++k)
      if (k->second == it) {
        by_key.erase(k);
        break;
      }
    const Block b = *it;
    lru.erase(it);
    cached -= b.bytes;
    unreserve(b.tier, b.bytes);
    return b.p;
  }
  void* drop_oldest() { return unlink(std::prev(lru.end())); }
};

HostBlockCache& HostBlockCache::instance() {
  static HostBlockCache* cache = [] {  // never destroyed: storages may be released during
    auto* c = new HostBlockCache(default_capacity());  // static destruction
    c->impl_->account = true;
    return c;
  }();
  return *cache;
}

HostBlockCache::HostBlockCache(std::size_t capacity)
    : impl_(new Impl) {
  impl_->capacity = capacity;
}

HostBlockCache::~HostBlockCache() {
  trim();
  delete impl_;
}

std::size_t HostBlockCache::rounded_size(std::size_t bytes) {
  if (bytes < kMinBlock) return bytes;
  return (bytes + kPage - 1) / kPage * kPage;
}

void* HostBlockCache::allocate(std::size_t bytes, Tier tier) {
  const std::size_t n = rounded_size(std::max<std::size_t>(bytes, 1));
  if (n >= kMinBlock && impl_->capacity > 0) {
    std::lock_guard lk(impl_->mu);
    if (auto it = impl_->by_key.find(Impl::key(tier, n)); it != impl_->by_key.end()) {
      ++impl_->hits;
      return impl_->unlink(it->second);
    }
    ++impl_->misses;
  }
  if (impl_->account) {
    // A capped tier: what storages hold plus what the cache keeps stays within the cap.
    const MemoryLedger& l = MemoryLedger::global();
    if (const auto cap = l.cap(tier); cap && l.current(tier) + l.reserved(tier) + n > *cap) {
      // Only as many of the tier's blocks as the cap needs, least recently returned first (an
      // emptied cache would page-fault every block of the next step back in).
      const std::size_t excess = l.current(tier) + l.reserved(tier) + n - *cap;
      std::vector<void*> evicted;
      {
        std::lock_guard lk(impl_->mu);
        std::size_t freed = 0;
        std::vector<decltype(impl_->lru)::iterator> victims;  // unlinking keeps the others valid
        for (auto it = impl_->lru.rbegin(); it != impl_->lru.rend() && freed < excess; ++it)
          if (it->tier == tier) {
            freed += it->bytes;
            victims.push_back(std::prev(it.base()));
          }
        for (auto v : victims) evicted.push_back(impl_->unlink(v));
      }
      for (void* q : evicted) std::free(q);
    }
  }
  const std::size_t align = n >= kMinBlock ? kPage : 64;
  const std::size_t size = (n + align - 1) / align * align;
  void* p = std::aligned_alloc(align, size);
  if (!p && stats().cached_bytes > 0) {
    trim();  // the OS may accept once cached blocks are given back
    p = std::aligned_alloc(align, size);
  }
  return p;
}

void HostBlockCache::release(void* p, std::size_t bytes, Tier tier) {
  if (!p) return;
  const std::size_t n = rounded_size(std::max<std::size_t>(bytes, 1));
  if (n < kMinBlock || n > impl_->capacity) {
    std::free(p);
    return;
  }
  std::vector<void*> evicted;
  {
    std::lock_guard lk(impl_->mu);
    while (impl_->cached + n > impl_->capacity && !impl_->lru.empty())
      evicted.push_back(impl_->drop_oldest());
    impl_->lru.push_front({p, n, tier});
    impl_->by_key.emplace(Impl::key(tier, n), impl_->lru.begin());
    impl_->cached += n;
    impl_->reserve(tier, n);
  }
  for (void* q : evicted) std::free(q);
}

void HostBlockCache::trim() {
  std::vector<void*> evicted;
  {
    std::lock_guard lk(impl_->mu);
    while (!impl_->lru.empty()) evicted.push_back(impl_->drop_oldest());
  }
  for (void* q : evicted) std::free(q);
}

void HostBlockCache::trim(Tier tier) {
  std::vector<void*> evicted;
  {
    std::lock_guard lk(impl_->mu);
    for (auto it = impl_->lru.begin(); it != impl_->lru.end();) {
      auto next = std::next(it);
      if (it->tier == tier) evicted.push_back(impl_->unlink(it));
      it = next;
    }
  }
  for (void* q : evicted) std::free(q);
}

HostBlockCacheStats HostBlockCache::stats() const {
  std::lock_guard lk(impl_->mu);
  return {impl_->cached, impl_->capacity, impl_->hits, impl_->misses};
}

}  // namespace strata
