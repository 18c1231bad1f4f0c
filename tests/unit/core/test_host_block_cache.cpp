#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "framework/memory/host_block_cache.hpp"
#include "framework/memory/ledger.hpp"
#include "framework/memory/storage.hpp"

namespace strata {
namespace {

constexpr std::size_t kMiB = 1 << 20;

TEST(HostBlockCache, AFreedLargeBlockIsReusedForTheSameSize) {
  HostBlockCache cache(64 * kMiB);
  void* a = cache.allocate(8 * kMiB);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % 4096, 0u);
  std::memset(a, 1, 8 * kMiB);
  cache.release(a, 8 * kMiB);
  EXPECT_EQ(cache.stats().cached_bytes, 8 * kMiB);
  void* b = cache.allocate(8 * kMiB);
  EXPECT_EQ(a, b);
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().cached_bytes, 0u);
  // A different size does not take it.
  cache.release(b, 8 * kMiB);
  void* c = cache.allocate(4 * kMiB);
  EXPECT_NE(c, b);
  EXPECT_EQ(cache.stats().cached_bytes, 8 * kMiB);
  cache.release(c, 4 * kMiB);
}

TEST(HostBlockCache, NearlyEqualSizesShareBlocksThroughPageRounding) {
  EXPECT_EQ(HostBlockCache::rounded_size(kMiB + 1), kMiB + 4096);
  EXPECT_EQ(HostBlockCache::rounded_size(1000), 1000u);  // small: malloc's business
  HostBlockCache cache(16 * kMiB);
  void* a = cache.allocate(HostBlockCache::rounded_size(kMiB + 1));
  cache.release(a, HostBlockCache::rounded_size(kMiB + 1));
  EXPECT_EQ(cache.allocate(HostBlockCache::rounded_size(kMiB + 100)), a);
  cache.release(a, kMiB + 4096);
}

TEST(HostBlockCache, StaysUnderItsCapacityByEvictingTheOldest) {
  HostBlockCache cache(2 * kMiB);
  void* a = cache.allocate(kMiB);
  void* b = cache.allocate(kMiB);
  void* c = cache.allocate(kMiB);
  cache.release(a, kMiB);
  cache.release(b, kMiB);
  cache.release(c, kMiB);  // evicts a
  EXPECT_EQ(cache.stats().cached_bytes, 2 * kMiB);
  void* x = cache.allocate(kMiB);
  void* y = cache.allocate(kMiB);
  EXPECT_TRUE((x == b && y == c) || (x == c && y == b));
  EXPECT_EQ(cache.stats().cached_bytes, 0u);
  // A block larger than the capacity is never kept.
  void* big = cache.allocate(4 * kMiB);
  cache.release(big, 4 * kMiB);
  EXPECT_EQ(cache.stats().cached_bytes, 0u);
  cache.release(x, kMiB);
  cache.release(y, kMiB);
  cache.trim();
  EXPECT_EQ(cache.stats().cached_bytes, 0u);
}

TEST(HostBlockCache, SmallBlocksAndAZeroCapacityCacheNothing) {
  HostBlockCache cache(64 * kMiB);
  void* s = cache.allocate(1024);
  cache.release(s, 1024);
  EXPECT_EQ(cache.stats().cached_bytes, 0u);
  HostBlockCache off(0);
  void* a = off.allocate(8 * kMiB);
  off.release(a, 8 * kMiB);
  EXPECT_EQ(off.stats().cached_bytes, 0u);
  EXPECT_EQ(off.stats().hits, 0u);
}

TEST(HostBlockCache, StorageReusesBlocksButTheLedgerCountsOnlyLiveBytes) {
  if (HostBlockCache::instance().stats().capacity < 16 * kMiB) GTEST_SKIP() << "cache turned off";
  MemoryLedger ledger;
  void* first = nullptr;
  {
    auto s = Storage::allocate(8 * kMiB, Device::cpu(), Tier::host, Category::activations, ledger);
    first = s->data();
    EXPECT_EQ(ledger.current(Tier::host, Category::activations), 8 * kMiB);
  }
  EXPECT_EQ(ledger.current(Tier::host, Category::activations), 0u);
  auto again = Storage::allocate(8 * kMiB, Device::cpu(), Tier::host, Category::activations, ledger);
  EXPECT_EQ(again->data(), first);
  EXPECT_EQ(ledger.peak(Tier::host, Category::activations), 8 * kMiB);
}

// Under a capped tier a miss frees only as many cached blocks (oldest first) as the cap needs,
// not the whole cache: the next step's buffers stay cached.
TEST(HostBlockCache, ACappedTierEvictsOnlyWhatTheCapNeeds) {
  HostBlockCache& cache = HostBlockCache::instance();
  if (cache.stats().capacity < 64 * kMiB) GTEST_SKIP() << "cache turned off or too small";
  MemoryLedger& g = MemoryLedger::global();
  cache.trim();
  const auto saved = g.cap(Tier::device);
  g.set_cap(Tier::device, g.current(Tier::device) + 20 * kMiB);
  void* b[4];
  for (void*& p : b) p = cache.allocate(4 * kMiB, Tier::device);
  for (void* p : b) cache.release(p, 4 * kMiB, Tier::device);
  ASSERT_EQ(cache.stats().cached_bytes, 16 * kMiB);
  // 16 MiB cached + 8 MiB asked = 4 MiB over the cap: one 4 MiB block goes, three stay.
  void* c = cache.allocate(8 * kMiB, Tier::device);
  EXPECT_EQ(cache.stats().cached_bytes, 12 * kMiB);
  EXPECT_EQ(g.reserved(Tier::device), 12 * kMiB);
  cache.release(c, 8 * kMiB, Tier::device);
  cache.trim();
  g.set_cap(Tier::device, saved);
}

}  // namespace
}  // namespace strata
