// Copies beside the compute (framework/backend/transfer.hpp) and copies between devices with a
// dtype conversion (Tensor::copy_from): on the CPU and the meta device a CopyStream copies at once
// and its events are complete, StagingBuffers take their host buffers in turn, charged to the host
// tier once; on a GPU (tests named cuda_*, skipped without one) copies run on the copy stream
// after the compute stream's work and the compute stream waits for them.
#include <gtest/gtest.h>

#include <vector>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/backend/transfer.hpp"
#include "framework/core/tensor.hpp"
#include "framework/memory/ledger.hpp"

using namespace strata;

namespace {
namespace test_transfer {  // file-local names, unique in a unity build

std::vector<float> iota(std::size_t n, float start = 1.0f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = start + 0.25f * static_cast<float>(i);
  return v;
}

Tensor host_of(const std::vector<float>& v, DType dt = DType::f32) {
  Tensor f = Tensor::empty({static_cast<std::int64_t>(v.size())}, DType::f32);
  std::copy(v.begin(), v.end(), f.data<float>());
  return dt == DType::f32 ? f : f.to(dt, TensorOptions{});
}

std::string why_no_gpu() {
  if (!cuda::compiled()) return "this build has no CUDA support";
  if (cuda::device_count() == 0) return "no GPU is visible: " + cuda::describe_devices();
  return "";
}

}  // namespace test_transfer
}  // namespace

using namespace test_transfer;

TEST(Transfer, OnTheCpuACopyStreamCopiesAtOnce) {
  CopyStream cs;  // the CPU's
  const Tensor src = host_of(iota(8));
  Tensor dst = Tensor::zeros({8}, DType::f32);
  const Event e = cs.copy(dst, src);
  EXPECT_TRUE(e.query());
  EXPECT_EQ(dst.to_vector(), iota(8));
  EXPECT_TRUE(cs.mark().query());
  cs.order_before_current();
  cs.synchronize();
  // The meta device (a plan): nothing moves, nothing fails.
  CopyStream meta(Device::meta());
  const TensorOptions m{Device::meta(), Tier::device, Category::other};
  EXPECT_TRUE(meta.copy(Tensor::empty({8}, DType::f32, m), Tensor::empty({8}, DType::f32, m)).query());
  // A copy must keep shape and dtype (the copy of a GPU job does not convert).
  EXPECT_THROW(cs.copy(Tensor::zeros({4}, DType::f32), src), Error);
}

TEST(Transfer, StagingBuffersAreTakenInTurnAndChargedOnce) {
  MemoryLedger ledger;
  TensorOptions host{Device::cpu(), Tier::host, Category::params, &ledger};
  host.pinned = true;  // plain memory where no GPU can pin it
  StagingBuffers bufs(2, 64, host);
  EXPECT_EQ(ledger.current(Tier::host, Category::params), 0u);  // allocated at the first take
  Tensor a = bufs.take(16, DType::f32);
  Tensor b = bufs.take(32, DType::bf16);
  EXPECT_NE(a.raw(), b.raw());
  EXPECT_EQ(ledger.current(Tier::host, Category::params), 128u);
  EXPECT_EQ(a.tier(), Tier::host);
  bufs.used_until(Event());
  Tensor c = bufs.take(4, DType::f32);  // the first buffer again
  EXPECT_EQ(c.raw(), a.raw());
  EXPECT_EQ(ledger.current(Tier::host, Category::params), 128u);
  EXPECT_THROW(bufs.take(17, DType::f32), Error);  // 68 bytes do not fit 64
  bufs.synchronize();
  // On the meta device the buffers are charged and hold nothing.
  MemoryLedger ml;
  StagingBuffers meta(1, 1000, TensorOptions{Device::meta(), Tier::host, Category::grads, &ml});
  EXPECT_EQ(meta.take(10, DType::f32).raw(), nullptr);
  EXPECT_EQ(ml.current(Tier::host, Category::grads), 1000u);
}

TEST(Transfer, AGpuCopyStreamNeedsAGpu) {
  if (cuda::compiled() && cuda::device_count() > 0) GTEST_SKIP() << "a GPU is present";
  EXPECT_THROW(CopyStream(Device::cuda(0)), Error);
}

// ---- on a GPU ----

// Up, work on the compute stream that waits for the upload (a fill of the first values), down
// after that work: every value through, and the host buffer of a copy reused once its event has
// happened.
TEST(Transfer, cuda_CopiesRunOnTheCopyStreamOrderedByEvents) {
  if (const std::string why = why_no_gpu(); !why.empty()) GTEST_SKIP() << why;
  const Device gpu = Device::cuda(0);
  MemoryLedger ledger;
  TensorOptions pinned{Device::cpu(), Tier::host, Category::other, &ledger};
  pinned.pinned = true;
  const std::size_t n = 1 << 20;
  StagingBuffers bufs(2, n * 4, pinned);
  CopyStream up(gpu), down(gpu);
  const TensorOptions dev{gpu, Tier::device, Category::other, &ledger};
  const cuda::CopiedBytes before = cuda::copied_bytes();
  for (int round = 0; round < 4; ++round) {
    Tensor h = bufs.take(static_cast<std::int64_t>(n), DType::f32);
    const std::vector<float> v = iota(n, static_cast<float>(round));
    std::copy(v.begin(), v.end(), h.data<float>());
    Tensor d = Tensor::empty({static_cast<std::int64_t>(n)}, DType::f32, dev);
    bufs.used_until(up.copy(d, h));
    up.order_before_current();
    d.slice(0, 0, 100).fill(-1.0);  // queued on the compute stream, after the upload
    Tensor back = Tensor::empty({static_cast<std::int64_t>(n)}, DType::f32, pinned);
    down.copy(back, d).synchronize();  // after the fill, queued before it on the compute stream
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(back.data<float>()[i], i < 100 ? -1.0f : v[i]) << "round " << round << ", " << i;
  }
  bufs.synchronize();
  // Each round moved n floats up and n down (the fill is on the GPU): what offload's figures count.
  const cuda::CopiedBytes after = cuda::copied_bytes();
  EXPECT_EQ(after.to_device - before.to_device, 4 * n * 4);
  EXPECT_EQ(after.to_host - before.to_host, 4 * n * 4);
}

// Tensor::copy_from between a GPU and the host with a dtype conversion converts on the host (the
// optimizer state's f32 master made from 16-bit parameters on the GPU), both ways and on the GPU.
TEST(Transfer, cuda_CopiesBetweenDevicesConvertDtypes) {
  if (const std::string why = why_no_gpu(); !why.empty()) GTEST_SKIP() << why;
  const Device gpu = Device::cuda(0);
  const TensorOptions dev{gpu, Tier::device, Category::other};
  const std::vector<float> v = iota(1000);
  const Tensor h16 = host_of(v, DType::bf16);
  Tensor d16 = Tensor::empty({1000}, DType::bf16, dev);
  d16.copy_from(host_of(v));  // f32 host -> bf16 GPU
  Tensor back = Tensor::empty({1000}, DType::f32);
  back.copy_from(d16);  // bf16 GPU -> f32 host
  EXPECT_EQ(back.to_vector(), h16.to_vector());
  Tensor d32 = Tensor::empty({1000}, DType::f32, dev);
  d32.copy_from(d16);  // bf16 GPU -> f32 GPU
  EXPECT_EQ(d32.to_vector(), h16.to_vector());
}
