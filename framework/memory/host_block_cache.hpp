// HostBlockCache: keeps freed large host blocks for reuse by Storage, so that a training step's
// activation and workspace buffers (the same sizes every step) are not returned to the OS and
// page-faulted back in each time (glibc unmaps large blocks on free). Bounded; off with
// STRATA_HOST_CACHE=0. A block is cached for the tier it was freed from (the CPU backend's device
// tier and the host tier are separate pools, as a GPU's and its host's would be), and the global
// ledger shows the cached bytes per tier as reserved (MemoryLedger::reserve).
#pragma once

#include <cstddef>

#include "framework/memory/tier.hpp"

namespace strata {

struct HostBlockCacheStats {
  std::size_t cached_bytes = 0;  // held for reuse now
  std::size_t capacity = 0;      // most it will hold
  std::size_t hits = 0, misses = 0;
};

class HostBlockCache {
 public:
  // Blocks smaller than this go straight to malloc, which already reuses them.
  static constexpr std::size_t kMinBlock = 256 * 1024;

  // The process-wide cache. Its capacity: STRATA_HOST_CACHE (bytes, size suffixes allowed; 0
  // turns caching off), else 1/8 of physical memory, at most 2 GiB, divided by the ranks
  // mpirun started on this node (OMPI_COMM_WORLD_LOCAL_SIZE).
  static HostBlockCache& instance();

  explicit HostBlockCache(std::size_t capacity);
  ~HostBlockCache();
  HostBlockCache(const HostBlockCache&) = delete;
  HostBlockCache& operator=(const HostBlockCache&) = delete;

  // A block of exactly `bytes` (a multiple of 4096 for cached sizes; see rounded_size), aligned
  // to 4096, for `tier`: a cached one of that tier if there is one, else a new one; nullptr if
  // the OS refuses even after the cache has been emptied. Contents are unspecified (never assume
  // zeros). When the global ledger caps the tier and what its storages hold plus what the cache
  // keeps would pass the cap, the tier's cached blocks are freed first (as a GPU's caching
  // allocator empties its cache before cudaMalloc would fail).
  void* allocate(std::size_t bytes, Tier tier = Tier::device);
  // Returns a block from allocate(bytes, tier): kept if it fits under the capacity (evicting the
  // least recently returned blocks), else freed.
  void release(void* p, std::size_t bytes, Tier tier = Tier::device);
  // Frees every cached block (of every tier, or of one).
  void trim();
  void trim(Tier tier);
  HostBlockCacheStats stats() const;

  // The size a request of `bytes` is served with: small requests unchanged, large ones rounded
  // up to 4096 so that near-identical sizes share blocks.
  static std::size_t rounded_size(std::size_t bytes);

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace strata
