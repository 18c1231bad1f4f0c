#include "framework/memory/allocator.hpp"

#include <map>
#include <memory>
#include <mutex>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/core/error.hpp"
#include "framework/memory/host_block_cache.hpp"

namespace strata {

namespace {

// The CPU: host memory from the host block cache, a pool per tier.
class CpuAllocator final : public Allocator {
 public:
  void* allocate(std::size_t bytes, Tier tier, const Stream&) override {
    return HostBlockCache::instance().allocate(bytes, tier);
  }
  void release(void* p, std::size_t bytes, Tier tier, const Stream&) override {
    HostBlockCache::instance().release(p, bytes, tier);
  }
  void trim() override { HostBlockCache::instance().trim(); }
  std::string_view name() const override { return "cpu (host block cache)"; }
};

// Page-locked host memory through the CUDA runtime, not cached (pinning is slow: callers keep
// their pinned buffers, as the offload tier's HostBuffers do).
class PinnedAllocator final : public Allocator {
 public:
  void* allocate(std::size_t bytes, Tier, const Stream&) override {
    return cuda::malloc_pinned(std::max<std::size_t>(bytes, 1));
  }
  void release(void* p, std::size_t, Tier, const Stream&) override { cuda::free_pinned(p); }
  void trim() override {}
  std::string_view name() const override { return "pinned host memory (CUDA)"; }
  bool pinned() const override { return true; }
};

// A GPU's memory through cudaMalloc, not cached yet: the stream-ordered caching allocator is
// the CUDA backend's (issue #13); this keeps device storages working meanwhile.
class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int device) : device_(device) {}
  void* allocate(std::size_t bytes, Tier, const Stream&) override {
    return cuda::malloc_device(std::max<std::size_t>(bytes, 1), device_);
  }
  void release(void* p, std::size_t, Tier, const Stream&) override { cuda::free_device(p, device_); }
  void trim() override {}
  std::string_view name() const override { return "cuda (cudaMalloc, uncached)"; }

 private:
  int device_;
};

bool can_pin() { return cuda::compiled() && cuda::device_count() > 0; }

}  // namespace

Allocator& device_allocator(Device device) {
  static CpuAllocator cpu;
  if (device.is_cpu()) return cpu;
  static std::mutex mu;
  static std::map<int, std::unique_ptr<CudaAllocator>> gpus;
  std::lock_guard lk(mu);
  auto& a = gpus[device.index];
  if (!a) a = std::make_unique<CudaAllocator>(device.index);
  return *a;
}

Allocator& host_allocator(bool pinned) {
  static CpuAllocator plain;
  if (!pinned) return plain;
  static const bool pinning = can_pin();
  static PinnedAllocator pinned_alloc;
  return pinning ? static_cast<Allocator&>(pinned_alloc) : plain;
}

}  // namespace strata
