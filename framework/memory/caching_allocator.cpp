#include "framework/memory/caching_allocator.hpp"

#include <algorithm>
#include <deque>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "framework/core/error.hpp"
#include "framework/memory/ledger.hpp"
#include "framework/memory/size.hpp"

namespace strata {

namespace caching_detail {

using StreamId = CachingAllocator::StreamId;

// A piece of a segment: handed out, free in a pool, or waiting for events.
struct Block {
  char* ptr = nullptr;
  std::size_t size = 0;
  StreamId stream = nullptr;  // the stream it was allocated for: its pool
  bool small = false;         // which pool
  bool allocated = false;     // handed out
  bool in_pool = false;       // free and findable
  int pending_events = 0;     // released, waiting for this many events
  Block* prev = nullptr;      // neighbours in the same segment (nullptr at its ends)
  Block* next = nullptr;
  std::vector<StreamId> stream_uses;  // other streams it was used on (record_stream)

  bool whole_segment() const { return !prev && !next; }
};

// Pool order: stream, then size, then address (best fit is the first block not smaller than the
// request among the stream's).
struct BlockLess {
  bool operator()(const Block* a, const Block* b) const {
    const auto sa = reinterpret_cast<std::uintptr_t>(a->stream);
    const auto sb = reinterpret_cast<std::uintptr_t>(b->stream);
    if (sa != sb) return sa < sb;
    if (a->size != b->size) return a->size < b->size;
    return reinterpret_cast<std::uintptr_t>(a->ptr) < reinterpret_cast<std::uintptr_t>(b->ptr);
  }
};
using Pool = std::set<Block*, BlockLess>;

}  // namespace caching_detail

using caching_detail::Block;
using caching_detail::Pool;

struct CachingAllocator::Impl {
  std::unique_ptr<DeviceMemory> dev;
  MemoryLedger* ledger = nullptr;
  mutable std::mutex mu;
  Pool small_pool, large_pool;
  std::unordered_map<void*, Block*> live;           // handed out, by address
  std::deque<std::pair<void*, Block*>> pending;     // (event, released block) in release order
  std::vector<void*> spare_events;                  // created, not in use
  CachingAllocatorStats st;
  std::size_t ledger_reported = 0;  // what the ledger shows as reserved for this cache

  Pool& pool_of(const Block* b) { return b->small ? small_pool : large_pool; }

  // Brings the ledger's reserved row to what the cache keeps now.
  void sync_ledger() {
    const std::size_t cached = st.reserved_bytes - st.allocated_bytes;
    if (ledger && cached != ledger_reported) {
      if (cached > ledger_reported) ledger->reserve(Tier::device, cached - ledger_reported);
      else ledger->unreserve(Tier::device, ledger_reported - cached);
    }
    ledger_reported = cached;
  }

  void* get_event() {
    if (!spare_events.empty()) {
      void* e = spare_events.back();
      spare_events.pop_back();
      return e;
    }
    return dev->event_create();
  }

  // Puts a released block (no events pending) back in its pool, merged with free neighbours.
  void free_block(Block* b) {
    b->allocated = false;
    b->stream_uses.clear();
    Pool& pool = pool_of(b);
    if (Block* p = b->prev; p && p->in_pool) {  // absorb the previous block
      pool.erase(p);
      p->size += b->size;
      p->next = b->next;
      if (p->next) p->next->prev = p;
      delete b;
      b = p;
      b->in_pool = false;
    }
    if (Block* n = b->next; n && n->in_pool) {  // absorb the next block
      pool.erase(n);
      b->size += n->size;
      b->next = n->next;
      if (b->next) b->next->prev = b;
      delete n;
    }
    b->in_pool = true;
    pool.insert(b);
  }

  // One event of a released block has completed.
  void event_done(void* event, Block* b) {
    spare_events.push_back(event);
    if (--b->pending_events == 0) {
      free_block(b);
      --st.pending_blocks;
    }
  }

  // Frees the blocks whose events have all completed (queries only).
  void process_events() {
    for (auto it = pending.begin(); it != pending.end();) {
      if (dev->event_query(it->first)) {
        event_done(it->first, it->second);
        it = pending.erase(it);
      } else {
        ++it;
      }
    }
  }

  // Waits for every pending event (the cache must be emptied).
  void synchronize_events() {
    while (!pending.empty()) {
      auto [event, block] = pending.front();
      pending.pop_front();
      dev->event_synchronize(event);
      event_done(event, block);
    }
  }

  // The best-fitting free block of `stream` in the pool, taken out of it; nullptr if none.
  Block* take_free(bool small, StreamId stream, std::size_t size) {
    Pool& pool = small ? small_pool : large_pool;
    Block key;
    key.stream = stream;
    key.size = size;
    key.ptr = nullptr;
    auto it = pool.lower_bound(&key);
    if (it == pool.end() || (*it)->stream != stream) return nullptr;
    Block* b = *it;
    pool.erase(it);
    b->in_pool = false;
    return b;
  }

  // A new segment of `bytes` from the device as one block (in no pool); nullptr if refused.
  Block* new_segment(std::size_t bytes, bool small, StreamId stream) {
    void* p = dev->malloc(bytes);
    if (!p) return nullptr;
    ++st.device_mallocs;
    ++st.segments;
    st.reserved_bytes += bytes;
    st.peak_reserved_bytes = std::max(st.peak_reserved_bytes, st.reserved_bytes);
    auto* b = new Block;
    b->ptr = static_cast<char*>(p);
    b->size = bytes;
    b->stream = stream;
    b->small = small;
    return b;
  }

  void free_segment(Block* b) {
    pool_of(b).erase(b);
    dev->free(b->ptr);
    ++st.device_frees;
    --st.segments;
    st.reserved_bytes -= b->size;
    delete b;
  }

  // The wholly free segments of both pools.
  std::vector<Block*> free_segments() const {
    std::vector<Block*> out;
    for (const Pool* pool : {&small_pool, &large_pool})
      for (Block* b : *pool)
        if (b->whole_segment()) out.push_back(b);
    return out;
  }

  // Gives every wholly free segment back to the device.
  void release_all_free_segments() {
    for (Block* b : free_segments()) free_segment(b);
  }

  // Gives back free segments worth at least `excess` bytes, as few as possible: the smallest one
  // that covers what is left, else the largest, until covered or none left.
  void release_free_segments(std::size_t excess) {
    std::vector<Block*> segs = free_segments();
    std::sort(segs.begin(), segs.end(), [](const Block* a, const Block* b) { return a->size < b->size; });
    std::size_t freed = 0;
    while (freed < excess && !segs.empty()) {
      const std::size_t need = excess - freed;
      auto it = std::lower_bound(segs.begin(), segs.end(), need,
                                 [](const Block* b, std::size_t n) { return b->size < n; });
      if (it == segs.end()) it = std::prev(segs.end());
      freed += (*it)->size;
      free_segment(*it);
      segs.erase(it);
    }
  }

  // A capped device tier: before a new segment of `segment` bytes, of which `kept` stay cached
  // (the part the request does not use), give back the free segments that would carry storages'
  // bytes plus the cached bytes past the cap.
  void respect_cap(std::size_t kept) {
    if (!ledger) return;
    const auto cap = ledger->cap(Tier::device);
    if (!cap) return;
    // The request itself is already charged (Storage charges before it allocates).
    const std::uint64_t after = ledger->current(Tier::device) + ledger->reserved(Tier::device) + kept;
    if (after > *cap) release_free_segments(static_cast<std::size_t>(after - *cap));
  }

  // Splits block b (out of any pool) so that it holds `size` bytes; the rest goes to the pool
  // when worth keeping apart (small pool: at least 512 bytes; large: more than 1 MiB).
  void split(Block* b, std::size_t size) {
    const std::size_t rest = b->size - size;
    const bool worth = b->small ? rest >= kMinBlockSize : rest > kSmallSize;
    if (!worth) return;
    auto* r = new Block;
    r->ptr = b->ptr + size;
    r->size = rest;
    r->stream = b->stream;
    r->small = b->small;
    r->prev = b;
    r->next = b->next;
    if (r->next) r->next->prev = r;
    b->next = r;
    b->size = size;
    r->in_pool = true;
    pool_of(r).insert(r);
  }
};

CachingAllocator::CachingAllocator(std::unique_ptr<DeviceMemory> device, MemoryLedger* ledger)
    : impl_(std::make_unique<Impl>()) {
  STRATA_CHECK(device != nullptr, "memory", "a caching allocator needs a device");
  name_ = fmt::format("{} (stream-ordered caching allocator)", device->name());
  impl_->dev = std::move(device);
  impl_->ledger = ledger;
}

CachingAllocator::~CachingAllocator() {
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  try {
    m.synchronize_events();
    m.release_all_free_segments();
    for (void* e : m.spare_events) m.dev->event_destroy(e);
  } catch (...) {
    // A device that fails now (a context torn down at exit) keeps what it has.
  }
  m.spare_events.clear();
  // Blocks still handed out: their segments stay with the device; only the bookkeeping goes.
  std::vector<Block*> heads;
  for (auto& [p, b] : m.live) {
    Block* h = b;
    while (h->prev) h = h->prev;
    heads.push_back(h);
  }
  std::sort(heads.begin(), heads.end());
  heads.erase(std::unique(heads.begin(), heads.end()), heads.end());
  for (Block* h : heads)
    while (h) {
      Block* n = h->next;
      delete h;
      h = n;
    }
  m.st.reserved_bytes = m.st.allocated_bytes = 0;
  m.sync_ledger();
}

std::size_t CachingAllocator::rounded_size(std::size_t bytes) {
  if (bytes < kMinBlockSize) return kMinBlockSize;
  return (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

std::size_t CachingAllocator::segment_size(std::size_t size) {
  if (size <= kSmallSize) return kSmallSegment;
  return (size + kLargeRounding - 1) / kLargeRounding * kLargeRounding;
}

void* CachingAllocator::allocate(std::size_t bytes, StreamId stream) {
  Impl& m = *impl_;
  if (bytes > (std::size_t(1) << 62)) {  // no device has that much (and rounding would overflow)
    std::lock_guard lk(m.mu);
    ++m.st.ooms;
    return nullptr;
  }
  const std::size_t size = rounded_size(bytes);
  const bool small = size <= kSmallSize;
  const std::size_t seg = segment_size(size);
  std::lock_guard lk(m.mu);
  m.process_events();
  Block* b = m.take_free(small, stream, size);
  if (b) {
    ++m.st.cache_hits;
  } else {
    // What stays cached of the new segment: the remainder split off (see split()).
    const std::size_t rest = seg - size;
    m.respect_cap((small ? rest >= kMinBlockSize : rest > kSmallSize) ? rest : 0);
    b = m.new_segment(seg, small, stream);
    if (!b) {
      // The device refused: wait for the blocks other streams still use, look again, then give
      // back every free segment and ask once more.
      ++m.st.retries;
      m.synchronize_events();
      b = m.take_free(small, stream, size);
      if (b) {
        ++m.st.cache_hits;
      } else {
        m.release_all_free_segments();
        b = m.new_segment(seg, small, stream);
      }
      if (!b) {
        ++m.st.ooms;
        m.sync_ledger();
        return nullptr;
      }
    }
  }
  m.split(b, size);
  b->allocated = true;
  m.live.emplace(b->ptr, b);
  m.st.allocated_bytes += b->size;
  m.st.peak_allocated_bytes = std::max(m.st.peak_allocated_bytes, m.st.allocated_bytes);
  m.sync_ledger();
  return b->ptr;
}

void CachingAllocator::release(void* p) {
  if (!p) return;
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  auto it = m.live.find(p);
  STRATA_CHECK(it != m.live.end(), "memory",
               "{}: release of {} which it did not hand out (or released twice)", name_, p);
  Block* b = it->second;
  m.live.erase(it);
  m.st.allocated_bytes -= b->size;
  b->allocated = false;
  if (b->stream_uses.empty()) {
    m.free_block(b);
  } else {
    // Free for reuse once every other stream it was used on has reached this point.
    for (StreamId s : b->stream_uses) {
      void* e = m.get_event();
      try {
        m.dev->event_record(e, s);
      } catch (...) {
        m.spare_events.push_back(e);
        throw;
      }
      m.pending.emplace_back(e, b);
      ++b->pending_events;
    }
    b->stream_uses.clear();
    ++m.st.pending_blocks;
  }
  m.sync_ledger();
}

void CachingAllocator::record_stream(void* p, StreamId stream) {
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  auto it = m.live.find(p);
  STRATA_CHECK(it != m.live.end(), "memory",
               "{}: record_stream of {}, which is not a block it handed out", name_, p);
  Block* b = it->second;
  if (stream == b->stream) return;
  if (std::find(b->stream_uses.begin(), b->stream_uses.end(), stream) == b->stream_uses.end())
    b->stream_uses.push_back(stream);
}

void* CachingAllocator::allocate(std::size_t bytes, Tier, const Stream& stream) {
  return allocate(bytes, stream.handle());
}

void CachingAllocator::release(void* p, std::size_t, Tier, const Stream&) { release(p); }

void CachingAllocator::record_stream(void* p, const Stream& stream) {
  record_stream(p, stream.handle());
}

void CachingAllocator::trim() {
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  m.process_events();
  m.release_all_free_segments();
  m.sync_ledger();
}

CachingAllocatorStats CachingAllocator::stats() const {
  const Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  CachingAllocatorStats s = m.st;
  s.cached_bytes = s.reserved_bytes - s.allocated_bytes;
  return s;
}

void CachingAllocator::reset_peaks() {
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  m.st.peak_allocated_bytes = m.st.allocated_bytes;
  m.st.peak_reserved_bytes = m.st.reserved_bytes;
}

}  // namespace strata
