// The caching allocator on a real GPU (tests named cuda_*: labelled cuda, each skips saying why
// without one): storages reuse blocks on their stream, the cache shows as reserved, a block used
// on another stream waits for it, asking for more than the GPU has is an OutOfMemory with the
// ledger's breakdown, and a cap on the device tier is honoured.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#ifdef STRATA_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "framework/backend/cuda_runtime.hpp"
#include "framework/backend/stream.hpp"
#include "framework/memory/caching_allocator.hpp"
#include "framework/memory/host_block_cache.hpp"
#include "framework/memory/ledger.hpp"
#include "framework/memory/out_of_memory.hpp"
#include "framework/memory/storage.hpp"

namespace strata {
namespace caching_allocator_cuda_test {

constexpr std::size_t MiB = 1024 * 1024;

#define STRATA_NEED_GPU()                                                                       \
  do {                                                                                        \
    if (cuda::device_count() == 0)                                                            \
      GTEST_SKIP() << "no GPU: " << cuda::describe_devices();                                 \
  } while (0)

// A clean start: the GPU's cache emptied, and the CPU's device-tier cache too (the global
// ledger's reserved row counts both).
CachingAllocator& fresh() {
  HostBlockCache::instance().trim();
  CachingAllocator& a = cuda_caching_allocator(0);
  a.trim();
  return a;
}

std::shared_ptr<Storage> on_gpu(std::size_t bytes, Category c = Category::activations) {
  return Storage::allocate(bytes, Device::cuda(0), Tier::device, c);
}

// Writes and reads back the first and last bytes of a device block.
bool round_trip(void* p, std::size_t bytes) {
  std::vector<unsigned char> in(4096), out(4096);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<unsigned char>(i * 7 + 1);
  const std::size_t n = std::min(bytes, in.size());
  char* d = static_cast<char*>(p);
  cuda::memcpy(d, in.data(), n, cuda::CopyKind::host_to_device);
  cuda::memcpy(d + bytes - n, in.data(), n, cuda::CopyKind::host_to_device);
  cuda::memcpy(out.data(), d + bytes - n, n, cuda::CopyKind::device_to_host);
  return std::memcmp(in.data(), out.data(), n) == 0;
}

TEST(CachingAllocatorCuda, cuda_StoragesReuseBlocksOnTheirStreamAndTheCacheIsReserved) {
  STRATA_NEED_GPU();
  CachingAllocator& a = fresh();
  EXPECT_EQ(&device_allocator(Device::cuda(0)), static_cast<Allocator*>(&a));
  MemoryLedger& g = MemoryLedger::global();
  const auto before = a.stats();
  void* first = nullptr;
  {
    auto s = on_gpu(8 * MiB);
    first = s->data();
    ASSERT_NE(first, nullptr);
    EXPECT_TRUE(round_trip(first, 8 * MiB));
    EXPECT_EQ(a.stats().device_mallocs, before.device_mallocs + 1);
    EXPECT_GE(a.stats().reserved_bytes, a.stats().allocated_bytes);
    EXPECT_GE(a.stats().allocated_bytes, 8 * MiB);
  }
  EXPECT_GE(g.reserved(Tier::device), 8 * MiB) << "the freed block is cached, shown as reserved";
  EXPECT_GE(a.stats().cached_bytes, 8 * MiB);
  {
    auto s = on_gpu(8 * MiB);
    EXPECT_EQ(s->data(), first) << "the same stream gets the block back";
    EXPECT_EQ(a.stats().device_mallocs, before.device_mallocs + 1) << "no cudaMalloc";
    EXPECT_EQ(a.stats().cache_hits, before.cache_hits + 1);
    EXPECT_TRUE(round_trip(s->data(), 8 * MiB));
    // Small storages share one 2 MiB segment.
    auto x = on_gpu(1000), y = on_gpu(1000);
    EXPECT_EQ(static_cast<char*>(y->data()) - static_cast<char*>(x->data()), 1024);
  }
  a.trim();
  EXPECT_EQ(a.stats().reserved_bytes, 0u);
  EXPECT_EQ(g.reserved(Tier::device), 0u);
  EXPECT_NE(std::string(a.name()).find("cuda:0"), std::string::npos) << a.name();
}

TEST(CachingAllocatorCuda, cuda_ABlockUsedOnAnotherStreamWaitsForThatStream) {
  STRATA_NEED_GPU();
#ifdef STRATA_HAVE_CUDA
  CachingAllocator& a = fresh();
  const Stream s1 = Stream::create(Device::cuda(0)), s2 = Stream::create(Device::cuda(0));
  // Everything that may call cudaMalloc, cudaFree or cudaEventCreate (which may wait for the
  // device) happens before stream 2 is held back: two blocks, and an event made and freed.
  void* p = a.allocate(4 * MiB, s1.handle());
  void* q0 = a.allocate(4 * MiB, s1.handle());
  ASSERT_NE(p, nullptr);
  ASSERT_NE(q0, nullptr);
  a.record_stream(q0, s2);
  a.release(q0);
  s2.synchronize();
  ASSERT_EQ(a.allocate(4 * MiB, s1.handle()), q0) << "its event complete: q0 is free again";
  a.release(q0);
  // Stream 2 is held back by a host function until the test lets it go.
  static std::atomic<bool> go{false};
  go = false;
  struct Release {
    ~Release() { go = true; }
  } release_on_exit;
  ASSERT_EQ(cudaLaunchHostFunc(static_cast<cudaStream_t>(s2.handle()),
                               [](void*) {
                                 while (!go.load()) std::this_thread::yield();
                               },
                               nullptr),
            cudaSuccess);
  a.record_stream(p, s2);
  a.release(p);
  EXPECT_EQ(a.stats().pending_blocks, 1u);
  void* q = a.allocate(4 * MiB, s1.handle());  // q0 again: no cudaMalloc
  EXPECT_NE(q, p) << "stream 2 has not reached the release: the block must not be reused";
  EXPECT_EQ(q, q0);
  go = true;
  s2.synchronize();
  void* r = a.allocate(4 * MiB, s1.handle());
  EXPECT_EQ(r, p) << "stream 2 got there: the block is free again";
  EXPECT_EQ(a.stats().pending_blocks, 0u);
  a.release(q);
  a.release(r);
  a.trim();
  EXPECT_EQ(a.stats().reserved_bytes, 0u);
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

TEST(CachingAllocatorCuda, cuda_AskingForMoreThanTheGpuHasIsAnOutOfMemoryWithTheBreakdown) {
  STRATA_NEED_GPU();
  CachingAllocator& a = fresh();
  const auto info = cuda::device_memory_info(0);
  ASSERT_GT(info.total, 0u);
  auto params = on_gpu(64 * MiB, Category::params);
  { auto cached = on_gpu(32 * MiB); }  // cached: given back before the device is asked again
  const auto frees = a.stats().device_frees;
  try {
    on_gpu(4 * info.total);
    ADD_FAILURE() << "no OutOfMemory for " << 4 * info.total << " bytes";
  } catch (const OutOfMemory& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("the GPU cuda:0 itself"), std::string::npos) << m;
    EXPECT_NE(m.find("refused"), std::string::npos) << m;
    EXPECT_NE(m.find("is allocated"), std::string::npos) << m;
    EXPECT_NE(m.find("reserved"), std::string::npos) << m;
    EXPECT_NE(m.find("params 64.00 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("to make it fit"), std::string::npos) << m;
    EXPECT_EQ(e.context().tier, Tier::device);
    EXPECT_EQ(e.context().requested, 4 * info.total);
  }
  EXPECT_GT(a.stats().device_frees, frees) << "the cached 32 MiB went back before giving up";
  EXPECT_GE(a.stats().ooms, 1u);
  // The error was cleared: the GPU still works.
  auto after = on_gpu(16 * MiB);
  EXPECT_TRUE(round_trip(after->data(), 16 * MiB));
}

TEST(CachingAllocatorCuda, cuda_ACapOnTheDeviceTierIsHonoured) {
  STRATA_NEED_GPU();
  CachingAllocator& a = fresh();
  MemoryLedger& g = MemoryLedger::global();
  const auto saved = g.cap(Tier::device);
  const std::uint64_t cap = g.current(Tier::device) + 64 * MiB;
  g.set_cap(Tier::device, cap);
  try {
    { auto s = on_gpu(32 * MiB); }
    EXPECT_EQ(g.reserved(Tier::device), 32 * MiB);
    EXPECT_THROW(on_gpu(80 * MiB), OutOfMemory) << "past the cap: the ledger refuses";
    // 48 MiB in use + 32 MiB cached would pass the cap: the cached segment goes first.
    auto s = on_gpu(48 * MiB);
    EXPECT_TRUE(round_trip(s->data(), 48 * MiB));
    EXPECT_LE(g.current(Tier::device) + g.reserved(Tier::device), cap);
    EXPECT_EQ(a.stats().reserved_bytes, 48 * MiB);
  } catch (...) {
    g.set_cap(Tier::device, saved);
    throw;
  }
  g.set_cap(Tier::device, saved);
  a.trim();
}

}  // namespace caching_allocator_cuda_test
}  // namespace strata
