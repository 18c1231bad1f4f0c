#include "framework/memory/allocator.hpp"

#include <map>
#include <memory>
#include <mutex>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/core/error.hpp"
#include "framework/memory/caching_allocator.hpp"
#include "framework/memory/host_block_cache.hpp"
#include "framework/memory/ledger.hpp"

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

// A GPU's raw memory and events through the CUDA runtime, for its caching allocator.
class CudaDeviceMemory final : public DeviceMemory {
 public:
  explicit CudaDeviceMemory(int device) : device_(device) {}
  void* malloc(std::size_t bytes) override { return cuda::malloc_device_nothrow(bytes, device_); }
  void free(void* p) override { cuda::free_device(p, device_); }
  void* event_create() override { return cuda::event_create(device_); }
  void event_destroy(void* event) override { cuda::event_destroy(event); }
  void event_record(void* event, void* stream) override { cuda::event_record(event, stream); }
  bool event_query(void* event) override { return cuda::event_query(event); }
  void event_synchronize(void* event) override { cuda::event_synchronize(event); }
  std::string name() const override { return Device::cuda(device_).str(); }

 private:
  int device_;
};

bool can_pin() { return cuda::compiled() && cuda::device_count() > 0; }

}  // namespace

std::unique_ptr<DeviceMemory> cuda_device_memory(int device) {
  return std::make_unique<CudaDeviceMemory>(device);
}

namespace {
std::mutex allocators_mu;
std::map<int, Allocator*>& test_allocators() {  // set_device_allocator_for_testing; -1: the CPU
  static std::map<int, Allocator*> m;
  return m;
}
int test_key(Device device) { return device.is_cuda() ? device.index : -1; }
}  // namespace

CachingAllocator& cuda_caching_allocator(int device) {
  STRATA_CHECK(device >= 0, "memory", "no CUDA device {}", device);
  // Never destroyed: storages may be released during static destruction.
  static auto* gpus = new std::map<int, CachingAllocator*>();
  std::lock_guard lk(allocators_mu);
  CachingAllocator*& a = (*gpus)[device];
  if (!a) a = new CachingAllocator(cuda_device_memory(device), &MemoryLedger::global());
  return *a;
}

Allocator& device_allocator(Device device) {
  static CpuAllocator cpu;
  {
    std::lock_guard lk(allocators_mu);
    const auto& t = test_allocators();
    if (!t.empty())
      if (auto it = t.find(test_key(device)); it != t.end()) return *it->second;
  }
  if (device.is_cpu()) return cpu;
  return cuda_caching_allocator(device.index);
}

void set_device_allocator_for_testing(Device device, Allocator* a) {
  std::lock_guard lk(allocators_mu);
  if (a) test_allocators()[test_key(device)] = a;
  else test_allocators().erase(test_key(device));
}

Allocator& host_allocator(bool pinned) {
  static CpuAllocator plain;
  if (!pinned) return plain;
  static const bool pinning = can_pin();
  static PinnedAllocator pinned_alloc;
  return pinning ? static_cast<Allocator&>(pinned_alloc) : plain;
}

}  // namespace strata
