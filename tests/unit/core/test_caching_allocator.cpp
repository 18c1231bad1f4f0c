// The GPU's stream-ordered caching allocator, its policy tested on the CPU against a fake device:
// host memory with a settable capacity, and events that complete when the test says. Reuse on the
// same stream at once, on another stream only after its event; splitting and merging within a
// segment; best fit; reserved vs allocated (and the ledger's reserved row); trim; the device's
// refusal answered by emptying the cache and asking again; a capped ledger; threads. And Storage:
// an allocator that returns nullptr is an OutOfMemory with the ledger's breakdown.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "framework/memory/caching_allocator.hpp"
#include "framework/memory/ledger.hpp"
#include "framework/memory/out_of_memory.hpp"
#include "framework/memory/storage.hpp"

namespace strata {
namespace caching_allocator_test {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * 1024;

// Streams are opaque keys to the allocator.
CachingAllocator::StreamId stream(int i) { return reinterpret_cast<void*>(std::uintptr_t(0x1000 * i)); }

// What the fake device did and does, shared between the test and the DeviceMemory the allocator
// owns.
struct FakeState {
  std::mutex mu;
  std::size_t capacity = std::size_t(1) << 40;  // bytes it hands out at most
  std::size_t used = 0;
  std::map<void*, std::size_t> blocks;
  std::size_t mallocs = 0, frees = 0, refusals = 0, syncs = 0;
  struct Event {
    void* stream = nullptr;
    bool recorded = false, done = true;
  };
  std::vector<std::unique_ptr<Event>> events;
  std::size_t live_events = 0;
  bool complete_on_record = false;  // events complete at once (the threads test)

  // The work queued on `s` so far has run: its events are complete.
  void complete(void* s) {
    std::lock_guard lk(mu);
    for (auto& e : events)
      if (e->recorded && e->stream == s) e->done = true;
  }
  std::size_t pending_events() {
    std::lock_guard lk(mu);
    std::size_t n = 0;
    for (auto& e : events) n += e->recorded && !e->done;
    return n;
  }
};

class FakeDevice final : public DeviceMemory {
 public:
  explicit FakeDevice(std::shared_ptr<FakeState> s) : s_(std::move(s)) {}
  void* malloc(std::size_t bytes) override {
    std::lock_guard lk(s_->mu);
    if (s_->used + bytes > s_->capacity) {
      ++s_->refusals;
      return nullptr;
    }
    void* p = std::aligned_alloc(512, (bytes + 511) / 512 * 512);
    if (!p) return nullptr;
    s_->used += bytes;
    s_->blocks[p] = bytes;
    ++s_->mallocs;
    return p;
  }
  void free(void* p) override {
    std::lock_guard lk(s_->mu);
    auto it = s_->blocks.find(p);
    ASSERT_NE(it, s_->blocks.end()) << "free of a pointer the device did not hand out";
    s_->used -= it->second;
    s_->blocks.erase(it);
    ++s_->frees;
    std::free(p);
  }
  void* event_create() override {
    std::lock_guard lk(s_->mu);
    s_->events.push_back(std::make_unique<FakeState::Event>());
    ++s_->live_events;
    return s_->events.back().get();
  }
  void event_destroy(void*) override {
    std::lock_guard lk(s_->mu);
    --s_->live_events;
  }
  void event_record(void* e, void* stream) override {
    std::lock_guard lk(s_->mu);
    auto* ev = static_cast<FakeState::Event*>(e);
    ev->stream = stream;
    ev->recorded = true;
    ev->done = s_->complete_on_record;
  }
  bool event_query(void* e) override {
    std::lock_guard lk(s_->mu);
    return static_cast<FakeState::Event*>(e)->done;
  }
  void event_synchronize(void* e) override {  // "waits": the stream gets there
    std::lock_guard lk(s_->mu);
    ++s_->syncs;
    static_cast<FakeState::Event*>(e)->done = true;
  }
  std::string name() const override { return "fake:0"; }

 private:
  std::shared_ptr<FakeState> s_;
};

// An allocator over a fresh fake device, reporting to its own ledger.
struct Fixture {
  std::shared_ptr<FakeState> dev = std::make_shared<FakeState>();
  MemoryLedger ledger;
  CachingAllocator alloc{std::make_unique<FakeDevice>(dev), &ledger};
};

TEST(CachingAllocatorPolicy, SizesAreRoundedAndSegmentsSizedByPool) {
  EXPECT_EQ(CachingAllocator::rounded_size(1), 512u);
  EXPECT_EQ(CachingAllocator::rounded_size(512), 512u);
  EXPECT_EQ(CachingAllocator::rounded_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::segment_size(512), 2 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(MiB), 2 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(MiB + 512), 2 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(5 * MiB), 6 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(8 * MiB), 8 * MiB);
}

TEST(CachingAllocatorPolicy, ABlockFreedOnAStreamIsReusedThereAtOnce) {
  Fixture f;
  void* p = f.alloc.allocate(4 * MiB, stream(1));
  ASSERT_NE(p, nullptr);
  f.alloc.release(p);
  void* q = f.alloc.allocate(4 * MiB, stream(1));
  EXPECT_EQ(q, p) << "same stream: no wait, no new segment";
  const auto s = f.alloc.stats();
  EXPECT_EQ(s.device_mallocs, 1u);
  EXPECT_EQ(s.cache_hits, 1u);
  EXPECT_EQ(f.dev->events.size(), 0u) << "no event for a block used on its own stream only";
  // Another stream does not get it: its work is not ordered after the first stream's.
  f.alloc.release(q);
  void* r = f.alloc.allocate(4 * MiB, stream(2));
  EXPECT_NE(r, p);
  EXPECT_EQ(f.alloc.stats().device_mallocs, 2u);
  f.alloc.release(r);
}

TEST(CachingAllocatorPolicy, ABlockUsedOnAnotherStreamWaitsForItsEvent) {
  Fixture f;
  void* p = f.alloc.allocate(4 * MiB, stream(1));
  f.alloc.record_stream(p, stream(2));
  f.alloc.record_stream(p, stream(1));  // its own stream: nothing to wait for
  f.alloc.release(p);
  ASSERT_EQ(f.dev->events.size(), 1u) << "one event, on the other stream";
  EXPECT_EQ(f.dev->events[0]->stream, stream(2));
  EXPECT_EQ(f.alloc.stats().pending_blocks, 1u);
  EXPECT_EQ(f.ledger.reserved(Tier::device), 4 * MiB) << "a pending block is cached memory";
  // Stream 2 has not reached the release: the block is not handed out, nor is it waited for.
  void* q = f.alloc.allocate(4 * MiB, stream(1));
  EXPECT_NE(q, p);
  EXPECT_EQ(f.dev->syncs, 0u) << "events are queried, never waited for, when memory is there";
  EXPECT_EQ(f.alloc.stats().pending_blocks, 1u);
  f.alloc.trim();
  EXPECT_EQ(f.dev->frees, 0u) << "trim does not free a block that waits for an event";
  // Now it has: the next allocation on stream 1 gets the block back.
  f.dev->complete(stream(2));
  void* r = f.alloc.allocate(4 * MiB, stream(1));
  EXPECT_EQ(r, p);
  EXPECT_EQ(f.alloc.stats().pending_blocks, 0u);
  EXPECT_EQ(f.alloc.stats().device_mallocs, 2u);
  // The event is reused for the next release that needs one.
  f.alloc.record_stream(r, stream(3));
  f.alloc.release(r);
  EXPECT_EQ(f.dev->events.size(), 1u);
  EXPECT_EQ(f.dev->events[0]->stream, stream(3));
  f.alloc.release(q);
  f.dev->complete(stream(3));
  f.alloc.trim();
  EXPECT_EQ(f.alloc.stats().reserved_bytes, 0u);
  EXPECT_EQ(f.dev->used, 0u);
}

TEST(CachingAllocatorPolicy, BlocksSplitAndMergeWithinASegment) {
  Fixture f;
  // Small pool: three blocks side by side in one 2 MiB segment.
  char* a = static_cast<char*>(f.alloc.allocate(256 * KiB, stream(1)));
  char* b = static_cast<char*>(f.alloc.allocate(256 * KiB, stream(1)));
  char* c = static_cast<char*>(f.alloc.allocate(256 * KiB, stream(1)));
  EXPECT_EQ(f.alloc.stats().device_mallocs, 1u);
  EXPECT_EQ(b, a + 256 * KiB);
  EXPECT_EQ(c, b + 256 * KiB);
  f.alloc.release(b);
  f.alloc.release(a);  // merged with b: one free 512 KiB block at a
  EXPECT_EQ(f.alloc.allocate(512 * KiB, stream(1)), a) << "served from the merged block";
  EXPECT_EQ(f.alloc.stats().device_mallocs, 1u);
  f.alloc.release(a);
  f.alloc.release(c);  // the whole segment is free again: one block, given back by trim
  f.alloc.trim();
  EXPECT_EQ(f.dev->frees, 1u);
  EXPECT_EQ(f.alloc.stats().segments, 0u);

  // Large pool: an 8 MiB segment split into 2 MiB blocks.
  char* x = static_cast<char*>(f.alloc.allocate(8 * MiB, stream(1)));
  f.alloc.release(x);
  char* p = static_cast<char*>(f.alloc.allocate(2 * MiB, stream(1)));
  char* q = static_cast<char*>(f.alloc.allocate(2 * MiB, stream(1)));
  char* r = static_cast<char*>(f.alloc.allocate(2 * MiB, stream(1)));
  EXPECT_EQ(p, x);
  EXPECT_EQ(q, x + 2 * MiB);
  EXPECT_EQ(r, x + 4 * MiB);
  EXPECT_EQ(f.alloc.stats().device_mallocs, 2u);
  f.alloc.release(q);
  f.alloc.release(p);
  // 4 MiB free at x (merged) and 2 MiB at x + 6 MiB: a 4 MiB request fits only the merged one.
  EXPECT_EQ(f.alloc.allocate(4 * MiB, stream(1)), x);
  EXPECT_EQ(f.alloc.stats().device_mallocs, 2u);
  // A remainder of 1 MiB or less is not split off a large block.
  f.alloc.release(x);
  f.alloc.release(r);
  char* y = static_cast<char*>(f.alloc.allocate(7 * MiB + 512 * KiB, stream(1)));
  EXPECT_EQ(y, x);
  EXPECT_EQ(f.alloc.stats().allocated_bytes, 8 * MiB);
  f.alloc.release(y);
}

TEST(CachingAllocatorPolicy, TheSmallestFreeBlockThatFitsIsChosen) {
  Fixture f;
  void* b6 = f.alloc.allocate(6 * MiB, stream(1));
  void* b3 = f.alloc.allocate(3 * MiB + 512 * KiB, stream(1));  // a 4 MiB segment, not split
  void* b4 = f.alloc.allocate(4 * MiB + 512 * KiB, stream(1));  // a 6 MiB segment: 4.5 + 1.5
  f.alloc.release(b6);
  f.alloc.release(b3);
  f.alloc.release(b4);
  const auto mallocs = f.alloc.stats().device_mallocs;
  void* four = f.alloc.allocate(4 * MiB, stream(1));
  EXPECT_EQ(four, b3) << "4 MiB: the 4 MiB block, not the 6 MiB ones";
  void* five = f.alloc.allocate(5 * MiB, stream(1));
  EXPECT_TRUE(five == b6 || five == b4) << "5 MiB: one of the 6 MiB blocks";
  void* six = f.alloc.allocate(6 * MiB, stream(1));
  EXPECT_EQ(six, five == b6 ? b4 : b6);
  EXPECT_EQ(f.alloc.stats().device_mallocs, mallocs);
  // Small requests never take large blocks.
  void* small = f.alloc.allocate(64 * KiB, stream(1));
  EXPECT_EQ(f.alloc.stats().device_mallocs, mallocs + 1);
  // Blocks in use when an allocator goes are not its to free (AddressSanitizer reported them).
  for (void* p : {four, five, six, small}) f.alloc.release(p);
}

TEST(CachingAllocatorPolicy, ReservedAndAllocatedAreCountedAndTheLedgerShowsTheCache) {
  Fixture f;
  void* p = f.alloc.allocate(100 * KiB, stream(1));
  auto s = f.alloc.stats();
  EXPECT_EQ(s.allocated_bytes, 100 * KiB);
  EXPECT_EQ(s.reserved_bytes, 2 * MiB);
  EXPECT_EQ(s.cached_bytes, 2 * MiB - 100 * KiB);
  EXPECT_EQ(f.ledger.reserved(Tier::device), 2 * MiB - 100 * KiB)
      << "what the segment keeps free is reserved; the block is the storage's to charge";
  EXPECT_EQ(f.ledger.current(Tier::device), 0u) << "the allocator charges nothing";
  void* q = f.alloc.allocate(10 * MiB, stream(1));
  f.alloc.release(p);
  s = f.alloc.stats();
  EXPECT_EQ(s.allocated_bytes, 10 * MiB);
  EXPECT_EQ(s.reserved_bytes, 12 * MiB);
  EXPECT_EQ(s.peak_allocated_bytes, 10 * MiB + 100 * KiB);
  EXPECT_EQ(s.peak_reserved_bytes, 12 * MiB);
  EXPECT_EQ(f.ledger.reserved(Tier::device), 2 * MiB);
  f.alloc.release(q);
  EXPECT_EQ(f.ledger.reserved(Tier::device), 12 * MiB);
  EXPECT_NE(f.ledger.report().find("cached"), std::string::npos) << f.ledger.report();
  f.alloc.reset_peaks();
  EXPECT_EQ(f.alloc.stats().peak_allocated_bytes, 0u);
  EXPECT_EQ(f.alloc.stats().peak_reserved_bytes, 12 * MiB);
}

TEST(CachingAllocatorPolicy, TrimGivesBackWhollyFreeSegmentsOnly) {
  Fixture f;
  void* a = f.alloc.allocate(4 * MiB, stream(1));
  void* b = f.alloc.allocate(6 * MiB, stream(2));
  void* c = f.alloc.allocate(128 * KiB, stream(1));
  void* d = f.alloc.allocate(128 * KiB, stream(1));  // same small segment as c
  f.alloc.release(a);
  f.alloc.release(b);
  f.alloc.release(c);
  EXPECT_EQ(f.dev->used, 12 * MiB);
  f.alloc.trim();
  EXPECT_EQ(f.dev->frees, 2u);
  EXPECT_EQ(f.dev->used, 2 * MiB) << "the small segment still holds d";
  EXPECT_EQ(f.alloc.stats().reserved_bytes, 2 * MiB);
  EXPECT_EQ(f.ledger.reserved(Tier::device), 2 * MiB - 128 * KiB);
  f.alloc.release(d);
  f.alloc.trim();
  EXPECT_EQ(f.dev->used, 0u);
  EXPECT_EQ(f.alloc.stats().reserved_bytes, 0u);
  EXPECT_EQ(f.alloc.stats().device_frees, 3u);
  EXPECT_EQ(f.ledger.reserved(Tier::device), 0u);
}

TEST(CachingAllocatorPolicy, ARefusingDeviceIsAskedAgainAfterTheCacheIsEmptied) {
  Fixture f;
  f.dev->capacity = 10 * MiB;
  void* a = f.alloc.allocate(6 * MiB, stream(1));
  f.alloc.release(a);  // cached: the device has 4 MiB left
  void* b = f.alloc.allocate(8 * MiB, stream(1));
  ASSERT_NE(b, nullptr) << "the cached 6 MiB segment went back and the device said yes";
  EXPECT_EQ(f.dev->refusals, 1u);
  EXPECT_EQ(f.alloc.stats().retries, 1u);
  EXPECT_EQ(f.alloc.stats().device_frees, 1u);
  EXPECT_EQ(f.alloc.stats().reserved_bytes, 8 * MiB);
  // Nothing cached to give back: nullptr, and the allocator is still usable.
  EXPECT_EQ(f.alloc.allocate(4 * MiB, stream(1)), nullptr);
  EXPECT_EQ(f.alloc.stats().ooms, 1u);
  EXPECT_EQ(f.alloc.stats().allocated_bytes, 8 * MiB);
  // A segment split and partly in use cannot go back: still nullptr.
  f.alloc.release(b);
  void* c = f.alloc.allocate(2 * MiB, stream(1));  // from the 8 MiB segment
  EXPECT_EQ(c, b);
  EXPECT_EQ(f.alloc.allocate(6 * MiB + 512 * KiB, stream(2)), nullptr);
  f.alloc.release(c);
  // A block another stream still uses: waited for (the cache must be emptied), then reused.
  void* d = f.alloc.allocate(8 * MiB, stream(1));
  EXPECT_EQ(d, b);
  f.alloc.record_stream(d, stream(2));
  f.alloc.release(d);
  ASSERT_EQ(f.dev->pending_events(), 1u);
  void* e = f.alloc.allocate(8 * MiB, stream(1));
  EXPECT_EQ(e, b) << "after the other stream's event was synchronised";
  EXPECT_EQ(f.dev->syncs, 1u);
  f.alloc.release(e);
  // A request no device could hold (its rounding would overflow): nullptr, the device not asked.
  const auto refusals = f.dev->refusals;
  EXPECT_EQ(f.alloc.allocate(SIZE_MAX - 100, stream(1)), nullptr);
  EXPECT_EQ(f.dev->refusals, refusals);
}

TEST(CachingAllocatorPolicy, ACappedLedgerGetsCachedSegmentsBackBeforeItsCapIsPassed) {
  Fixture f;
  f.ledger.set_cap(Tier::device, 10 * MiB);
  // What Storage does: charge, then allocate; release, then uncharge.
  auto hold = [&](std::size_t n, CachingAllocator::StreamId s) {
    f.ledger.charge(Tier::device, Category::activations, n);
    return f.alloc.allocate(n, s);
  };
  auto drop = [&](void* p, std::size_t n) {
    f.alloc.release(p);
    f.ledger.release(Tier::device, Category::activations, n);
  };
  drop(hold(2 * MiB, stream(1)), 2 * MiB);
  drop(hold(4 * MiB, stream(1)), 4 * MiB);
  EXPECT_EQ(f.ledger.reserved(Tier::device), 6 * MiB);
  // 3 MiB in use + 6 MiB cached = 9 MiB: within the cap, nothing given back (the new 4 MiB
  // segment's last MiB is not split off: it stays in the block).
  void* a = hold(3 * MiB, stream(2));
  EXPECT_EQ(f.alloc.stats().device_frees, 0u);
  EXPECT_EQ(f.alloc.stats().reserved_bytes, 10 * MiB);
  EXPECT_EQ(f.ledger.reserved(Tier::device), 6 * MiB);
  // 6 MiB more: 9 MiB in use + 6 MiB cached would pass 10 MiB by 5 MiB: both cached segments go.
  void* b = hold(6 * MiB, stream(2));
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(f.alloc.stats().device_frees, 2u);
  EXPECT_EQ(f.ledger.reserved(Tier::device), 0u);
  EXPECT_LE(f.ledger.current(Tier::device) + f.ledger.reserved(Tier::device), 10 * MiB);
  drop(b, 6 * MiB);
  drop(a, 3 * MiB);
  // Only as many segments as the cap needs: 6 + 4 MiB cached, 12 MiB asked under a 20 MiB cap
  // (2 MiB over): the 4 MiB segment goes, the 6 MiB one stays.
  f.ledger.set_cap(Tier::device, 20 * MiB);
  EXPECT_EQ(f.alloc.stats().cached_bytes, 10 * MiB);
  void* c = hold(12 * MiB, stream(3));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(f.alloc.stats().device_frees, 3u);
  EXPECT_EQ(f.ledger.reserved(Tier::device), 6 * MiB);
  EXPECT_LE(f.ledger.current(Tier::device) + f.ledger.reserved(Tier::device), 20 * MiB);
  drop(c, 12 * MiB);
}

TEST(CachingAllocatorPolicy, ManyThreadsAllocatingAndReleasing) {
  Fixture f;
  f.dev->complete_on_record = true;
  constexpr int kThreads = 4, kIters = 2000;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<std::pair<char*, std::size_t>> held;
      for (int i = 0; i < kIters; ++i) {
        if (held.size() < 8 && (held.empty() || rng() % 2)) {
          const std::size_t n = rng() % 3 ? 512 + rng() % (600 * KiB) : MiB + rng() % (6 * MiB);
          auto* p = static_cast<char*>(f.alloc.allocate(n, stream(1 + t % 2)));
          if (!p) {
            ++failures;
            continue;
          }
          p[0] = char(t);
          p[n - 1] = char(t);
          if (rng() % 4 == 0) f.alloc.record_stream(p, stream(3 + t));
          held.emplace_back(p, n);
        } else {
          const std::size_t k = rng() % held.size();
          auto [p, n] = held[k];
          if (p[0] != char(t) || p[n - 1] != char(t)) ++failures;  // someone else's block
          f.alloc.release(p);
          held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
        }
        if (i % 500 == 0 && t == 0) f.alloc.trim();
      }
      for (auto [p, n] : held) f.alloc.release(p);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  f.alloc.trim();
  const auto s = f.alloc.stats();
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.reserved_bytes, 0u);
  EXPECT_EQ(s.pending_blocks, 0u);
  EXPECT_EQ(f.dev->used, 0u);
  EXPECT_EQ(f.ledger.reserved(Tier::device), 0u);
  EXPECT_GT(s.cache_hits, 0u);
}

TEST(CachingAllocatorPolicy, DestructionGivesEverythingBack) {
  auto dev = std::make_shared<FakeState>();
  MemoryLedger ledger;
  {
    CachingAllocator a(std::make_unique<FakeDevice>(dev), &ledger);
    void* p = a.allocate(3 * MiB, stream(1));
    a.record_stream(p, stream(2));
    a.release(p);
    a.release(a.allocate(100, stream(1)));
  }
  EXPECT_EQ(dev->used, 0u);
  EXPECT_EQ(dev->live_events, 0u);
  EXPECT_EQ(ledger.reserved(Tier::device), 0u);
}

// A device allocator that always refuses.
class RefusingAllocator final : public Allocator {
 public:
  void* allocate(std::size_t, Tier, const Stream&) override { return nullptr; }
  void release(void*, std::size_t, Tier, const Stream&) override {}
  void trim() override {}
  std::string_view name() const override { return "refusing test allocator"; }
};

// Installs `a` as the CPU's device allocator for a scope (the CPU: Storage reaches a GPU's
// allocator only through its CUDA stream, which a machine without a GPU cannot create).
struct InstalledAllocator {
  explicit InstalledAllocator(Allocator& a) { set_device_allocator_for_testing(Device::cpu(), &a); }
  ~InstalledAllocator() { set_device_allocator_for_testing(Device::cpu(), nullptr); }
};

TEST(CachingAllocatorStorage, ARefusedAllocationIsAnOutOfMemoryWithTheLedgersBreakdown) {
  MemoryLedger ledger;
  RefusingAllocator refusing;
  InstalledAllocator installed(refusing);
  ledger.charge(Tier::device, Category::params, 3 * MiB);
  try {
    Storage::allocate(5 * MiB, Device::cpu(), Tier::device, Category::activations, ledger);
    ADD_FAILURE() << "no OutOfMemory";
  } catch (const OutOfMemory& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("refused 5.00 MiB for activations"), std::string::npos) << m;
    EXPECT_NE(m.find("3.00 MiB is allocated"), std::string::npos) << m;
    EXPECT_NE(m.find("reserved"), std::string::npos) << m;
    EXPECT_NE(m.find("params 3.00 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("to make it fit"), std::string::npos) << m;
    EXPECT_EQ(m.find("capped at"), std::string::npos) << "no cap was passed: " << m;
    EXPECT_FALSE(e.context().refused_by.empty());
    EXPECT_EQ(e.context().requested, 5 * MiB);
    ASSERT_FALSE(e.advice().empty());
    EXPECT_NE(e.advice().back().find("other processes"), std::string::npos) << e.advice().back();
  }
  EXPECT_EQ(ledger.current(Tier::device), 3 * MiB) << "the refused request is not left charged";
}

TEST(CachingAllocatorStorage, StoragesOverTheCachingAllocatorChargeOnceAndRunOutAsOutOfMemory) {
  Fixture f;
  f.dev->capacity = 8 * MiB;
  InstalledAllocator installed(f.alloc);
  auto st = [&](std::size_t n) {
    return Storage::allocate(n, Device::cpu(), Tier::device, Category::activations, f.ledger);
  };
  auto a = st(4 * MiB);
  auto b = st(3 * MiB + 100 * KiB);  // a 4 MiB segment
  EXPECT_EQ(f.ledger.current(Tier::device), 7 * MiB + 100 * KiB) << "charged by Storage only";
  EXPECT_EQ(f.ledger.reserved(Tier::device), 0u);
  EXPECT_THROW(st(MiB), OutOfMemory);
  EXPECT_EQ(f.alloc.stats().ooms, 1u);
  const void* pa = a->data();
  a.reset();
  EXPECT_EQ(f.ledger.reserved(Tier::device), 4 * MiB);
  EXPECT_EQ(f.ledger.current(Tier::device), 3 * MiB + 100 * KiB);
  auto c = st(4 * MiB);
  EXPECT_EQ(c->data(), pa) << "the released block is reused on the same stream";
  EXPECT_EQ(f.ledger.reserved(Tier::device), 0u);
}

}  // namespace caching_allocator_test
}  // namespace strata
