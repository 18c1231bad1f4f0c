// CachingAllocator: the stream-ordered caching allocator of a GPU's memory (after PyTorch's
// CUDACachingAllocator). cudaMalloc and cudaFree are slow and cudaFree synchronises the device,
// so freed blocks are kept and handed out again; the policy is written against DeviceMemory (raw
// memory and events), which the CUDA backend implements over the runtime and tests fake on the
// CPU.
//
// Sizes. Every request is rounded up to a multiple of 512 bytes. Requests of at most 1 MiB are
// "small": served from 2 MiB segments, split down to 512 bytes. Larger requests are "large":
// served from segments of the request rounded up to 2 MiB; a cached large block is split when
// more than 1 MiB would remain (a smaller remainder stays inside the block handed out). Small and
// large blocks live in separate pools, so small tensors never fragment the large segments.
//
// Stream order. Every block belongs to the stream it was allocated for, and each pool is searched
// (best fit: the smallest free block that holds the request, per stream) only for blocks of the
// requesting stream. A block released on its stream is free at once: the work queued later on
// that stream runs after the work that used it. A block also used on other streams
// (record_stream) is free again only when an event recorded on each of those streams at release
// has completed; the events are queried (never waited for) on each allocation, except when the
// cache must be emptied for an allocation to succeed: then they are synchronised.
//
// Release merges a free block with its free neighbours in the same segment. A segment goes back
// to the device (cudaFree) only when it is wholly free: by trim(); when a new segment cannot be
// had (every free segment is given back and the device asked once more; nullptr if it still
// refuses: Storage then throws strata::OutOfMemory); and when the ledger caps the device tier and
// what storages hold plus what the cache keeps would pass the cap (only as many segments as the
// cap needs).
//
// Ledger. Storages charge the bytes they hold (Storage::allocate); the allocator reports only
// what it keeps free — its segments' bytes minus the blocks handed out, including blocks still
// waiting for their events — as reserved on Tier::device of the ledger it is bound to.
//
// Thread safe (one mutex; the device is called under it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "framework/memory/allocator.hpp"

namespace strata {

class MemoryLedger;

// A device's raw memory and events, as the caching allocator sees them. Streams and events are
// opaque handles (cudaStream_t and cudaEvent_t on CUDA; whatever a fake device likes in tests).
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // `bytes` of device memory; nullptr when the device has not that much free (any other failure
  // throws).
  virtual void* malloc(std::size_t bytes) = 0;
  virtual void free(void* p) = 0;
  virtual void* event_create() = 0;
  virtual void event_destroy(void* event) = 0;
  // Marks the point the work queued on `stream` so far reaches.
  virtual void event_record(void* event, void* stream) = 0;
  // Whether the point has been reached (never blocks).
  virtual bool event_query(void* event) = 0;
  // Blocks the host until it has.
  virtual void event_synchronize(void* event) = 0;
  // "cuda:0", for messages.
  virtual std::string name() const = 0;
};

// The DeviceMemory of CUDA device `device` (malloc: cuda::malloc_device_nothrow).
std::unique_ptr<DeviceMemory> cuda_device_memory(int device);

struct CachingAllocatorStats {
  std::size_t allocated_bytes = 0;       // in blocks handed out (rounded sizes)
  std::size_t reserved_bytes = 0;        // in segments got from the device
  std::size_t peak_allocated_bytes = 0;  // since construction or reset_peaks()
  std::size_t peak_reserved_bytes = 0;
  std::size_t cached_bytes = 0;          // reserved - allocated: free, or waiting for events
  std::size_t segments = 0;              // segments held now
  std::size_t device_mallocs = 0;        // segments asked of the device (cudaMalloc calls)
  std::size_t device_frees = 0;          // segments given back (cudaFree calls)
  std::size_t cache_hits = 0;            // allocations served from cached blocks
  std::size_t retries = 0;               // device refusals answered by emptying the cache
  std::size_t ooms = 0;                  // allocations that failed even so (nullptr returned)
  std::size_t pending_blocks = 0;        // released blocks waiting for other streams' events
};

class CachingAllocator final : public Allocator {
 public:
  static constexpr std::size_t kMinBlockSize = 512;           // rounding of every request
  static constexpr std::size_t kSmallSize = 1 << 20;          // largest "small" request
  static constexpr std::size_t kSmallSegment = 2 << 20;       // segment of the small pool
  static constexpr std::size_t kLargeRounding = 2 << 20;      // large segments: multiples of this

  // Stream handles as the allocator keys them (Stream::handle()).
  using StreamId = void*;

  // Over `device`; the cached bytes are reported as reserved on Tier::device of `ledger` (none
  // when nullptr), whose device cap the cache also respects.
  explicit CachingAllocator(std::unique_ptr<DeviceMemory> device, MemoryLedger* ledger);
  // Synchronises pending events and gives every wholly free segment back; segments that still
  // hold blocks handed out are left to the device (never freed under a live storage).
  ~CachingAllocator() override;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // `bytes` for use on `stream` (already charged to the ledger by the caller, as Storage does);
  // nullptr when the device refuses even after the cache was emptied.
  void* allocate(std::size_t bytes, StreamId stream);
  // Gives back a block of allocate(): free at once for its own stream, or after the other streams
  // it was used on (record_stream) have reached the point queued at this call.
  void release(void* p);
  // Marks block `p` (as allocate() returned it) as used by `stream` too, so that its release
  // waits for the work queued there.
  void record_stream(void* p, StreamId stream);

  // Allocator: the stream's handle is the key; the tier is Tier::device (a GPU has no other).
  void* allocate(std::size_t bytes, Tier tier, const Stream& stream) override;
  void release(void* p, std::size_t bytes, Tier tier, const Stream& stream) override;
  void record_stream(void* p, const Stream& stream) override;
  // Gives every wholly free segment whose events have completed back to the device (never
  // blocks).
  void trim() override;
  std::string_view name() const override { return name_; }

  CachingAllocatorStats stats() const;
  // Starts new peaks at the current values.
  void reset_peaks();
  // The size a request of `bytes` is served with (a multiple of kMinBlockSize).
  static std::size_t rounded_size(std::size_t bytes);
  // The size of the segment a new block of rounded size `size` comes from.
  static std::size_t segment_size(std::size_t size);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string name_;
};

// The caching allocator of CUDA device `device` (what device_allocator(Device::cuda(device))
// returns unless a test replaced it): for its stats (`strata env`, benchmarks) and trim(). Bound
// to MemoryLedger::global(); never destroyed (storages may be released during static
// destruction).
CachingAllocator& cuda_caching_allocator(int device);

}  // namespace strata
