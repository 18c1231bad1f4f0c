// Allocators: where a Storage's bytes come from. Each device has one that keeps freed blocks for
// reuse (the CPU's: the host block cache, one pool per tier; a GPU's: a stream-ordered caching
// allocator, which reuses a block freed on the same stream without a device synchronisation),
// and the host has one that can pin memory for asynchronous host↔device copies. What storages
// hold is charged to the ledger as allocated; what a cache keeps free, as reserved.
#pragma once

#include <cstddef>
#include <string_view>

#include "framework/backend/stream.hpp"
#include "framework/core/device.hpp"
#include "framework/memory/tier.hpp"

namespace strata {

class Allocator {
 public:
  virtual ~Allocator() = default;
  // `bytes` for use on `stream`, charged to nothing (Storage charges the ledger); nullptr when
  // the memory cannot be had even after the cache was emptied.
  virtual void* allocate(std::size_t bytes, Tier tier, const Stream& stream) = 0;
  // Gives back a block of allocate(bytes, tier, stream): cached for reuse or freed. A
  // stream-ordered allocator hands it out again only after the work queued on `stream` so far.
  virtual void release(void* p, std::size_t bytes, Tier tier, const Stream& stream) = 0;
  // Marks block `p` (as allocate returned it) as used by work queued on `stream` too, besides
  // the stream it was allocated for: a stream-ordered allocator then hands it out again only
  // after that work (PyTorch's record_stream). Nothing to do where work runs at once (the CPU).
  virtual void record_stream(void* p, const Stream& stream) {}
  // Frees every cached block.
  virtual void trim() = 0;
  virtual std::string_view name() const = 0;
  // Whether its host memory is pinned (page-locked).
  virtual bool pinned() const { return false; }
};

// The allocator of a device's memory (its "device" tier; for the CPU, also its host tier): the
// host block cache for the CPU, the stream-ordered caching allocator (caching_allocator.hpp) for
// a GPU.
Allocator& device_allocator(Device device);
// Test hook: makes device_allocator(device) return `a` until called again with nullptr (which
// restores the built-in one). For tests that need a device whose memory runs out (a fake
// allocator returning nullptr): `a` must outlive the storages allocated from it, and no other
// thread may allocate on `device` meanwhile.
void set_device_allocator_for_testing(Device device, Allocator* a);
// Host memory for the host tier; `pinned` asks for page-locked memory, which a build without CUDA
// (or a machine without a GPU) cannot give: then the plain host allocator (pinned() says so).
Allocator& host_allocator(bool pinned);

}  // namespace strata
