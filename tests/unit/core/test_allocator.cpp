// Allocators, streams and events: freed large blocks are kept per tier and shown in the global
// ledger as reserved, reused by the same tier only, given back before a capped tier would pass
// its cap; pinned host memory falls back to plain memory (and says so) without a GPU; on the
// CPU a stream runs work at once, so events are complete and copies immediate.
#include <gtest/gtest.h>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/backend/stream.hpp"
#include "framework/core/tensor.hpp"
#include "framework/memory/allocator.hpp"
#include "framework/memory/host_block_cache.hpp"

using namespace strata;

namespace {
constexpr std::size_t kMiB = 1 << 20;
}  // namespace

TEST(CachingAllocator, FreedBlocksAreReservedPerTierAndReused) {
  auto& cache = HostBlockCache::instance();
  cache.trim();
  MemoryLedger& g = MemoryLedger::global();
  ASSERT_EQ(g.reserved(Tier::device), 0u);
  const std::size_t n = 3 * kMiB;
  {
    Tensor t = Tensor::empty({static_cast<std::int64_t>(n / 4)}, DType::f32);
    EXPECT_EQ(g.reserved(Tier::device), 0u);
  }
  EXPECT_EQ(g.reserved(Tier::device), n) << "a freed device-tier block is kept and shown as reserved";
  EXPECT_EQ(g.reserved(Tier::host), 0u);
  {
    // The host tier has its own pool: the device tier's block is not handed to it.
    Tensor h = Tensor::empty({static_cast<std::int64_t>(n / 4)}, DType::f32,
                             TensorOptions{}.with(Tier::host));
    EXPECT_EQ(g.reserved(Tier::device), n);
  }
  EXPECT_EQ(g.reserved(Tier::host), n);
  {
    const auto hits = cache.stats().hits;
    Tensor t = Tensor::empty({static_cast<std::int64_t>(n / 4)}, DType::f32);
    EXPECT_EQ(cache.stats().hits, hits + 1) << "the same size is served from the cache";
    EXPECT_EQ(g.reserved(Tier::device), 0u);
  }
  const std::string report = g.report();
  EXPECT_NE(report.find("cached"), std::string::npos) << report;
  cache.trim();
  EXPECT_EQ(g.reserved(Tier::device), 0u);
  EXPECT_EQ(g.reserved(Tier::host), 0u);
}

TEST(CachingAllocator, ACappedTierGivesItsCacheBackBeforePassingTheCap) {
  auto& cache = HostBlockCache::instance();
  cache.trim();
  MemoryLedger& g = MemoryLedger::global();
  const auto base = g.current(Tier::device);
  const auto old_cap = g.cap(Tier::device);
  g.set_cap(Tier::device, base + 10 * kMiB);
  { Tensor a = Tensor::empty({static_cast<std::int64_t>(6 * kMiB / 4)}, DType::f32); }
  EXPECT_EQ(g.reserved(Tier::device), 6 * kMiB);
  {
    // 6 MiB cached + 8 MiB new would pass the 10 MiB cap: the cached block goes first.
    Tensor b = Tensor::empty({static_cast<std::int64_t>(8 * kMiB / 4)}, DType::f32);
    EXPECT_EQ(g.reserved(Tier::device), 0u);
    EXPECT_LE(g.current(Tier::device) + g.reserved(Tier::device), base + 10 * kMiB);
  }
  g.set_cap(Tier::device, old_cap);
  cache.trim();
}

TEST(HostAllocator, PinnedFallsBackToPlainMemoryWithoutAGpuAndSaysSo) {
  Allocator& a = host_allocator(true);
  const bool gpu = cuda::compiled() && cuda::device_count() > 0;
  EXPECT_EQ(a.pinned(), gpu) << a.name();
  void* p = a.allocate(kMiB, Tier::host, Stream());
  ASSERT_NE(p, nullptr);
  static_cast<char*>(p)[kMiB - 1] = 1;
  a.release(p, kMiB, Tier::host, Stream());
  EXPECT_FALSE(host_allocator(false).pinned());
  Tensor t = Tensor::zeros({16}, DType::f32, TensorOptions{}.with(Tier::host).pinned_if(true));
  EXPECT_EQ(t.data<float>()[15], 0.0f);
}

TEST(Streams, OnTheCpuWorkRunsAtOnce) {
  const Stream s = current_stream(Device::cpu());
  EXPECT_EQ(s.device(), Device::cpu());
  EXPECT_EQ(s.handle(), nullptr);
  Event e;
  EXPECT_TRUE(e.query());
  e.record(s);
  EXPECT_TRUE(e.query());
  e.wait(s);
  e.synchronize();
  Tensor a = Tensor::zeros({4}, DType::f32), b = Tensor::empty({4}, DType::f32);
  a.fill(3.0);
  copy_async(b, a, s);  // immediate on the CPU
  EXPECT_EQ(b.to_vector(), std::vector<float>(4, 3.0f));
  const StreamGuard guard(s);
  EXPECT_EQ(current_stream(Device::cpu()), s);
}

// A plan's tensors are on the meta device: waiting on their stream queues nothing on any GPU
// (it once asked CUDA for a stream, which fails on a machine without a GPU: e2e_train_gpt_tensor).
TEST(Streams, TheMetaDeviceHasTheCpusStream) {
  const Stream s = current_stream(Device::meta());
  EXPECT_EQ(s.device(), Device::cpu());
  EXPECT_EQ(s.handle(), nullptr);
  Event e;
  e.record(s);
  e.wait(s);
  EXPECT_TRUE(e.query());
}

TEST(Streams, CudaStreamsAndCopiesNeedAGpu) {
  if (cuda::compiled() && cuda::device_count() > 0) GTEST_SKIP() << "a GPU is present";
  EXPECT_THROW(Stream::create(Device::cuda(0)), Error);
  Tensor a = Tensor::zeros({4}, DType::f32);
  // A tensor that claims device memory (never dereferenced): a copy to it needs a CUDA stream.
  Tensor d(Storage::wrap(reinterpret_cast<void*>(0x1000), 16, Device::cuda(0)), DType::f32, Shape{4},
           {1});
  EXPECT_THROW(copy_async(d, a, Stream()), Error);
}
