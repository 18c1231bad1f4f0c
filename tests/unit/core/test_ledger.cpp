#include <gtest/gtest.h>

#include "framework/core/tensor.hpp"
#include "framework/memory/ledger.hpp"
#include "framework/memory/out_of_memory.hpp"
#include "framework/memory/size.hpp"

using namespace strata;

TEST(Ledger, ChargesAndReleasesPerTierAndCategory) {
  MemoryLedger l;
  l.charge(Tier::device, Category::params, 100);
  l.charge(Tier::device, Category::grads, 50);
  l.charge(Tier::host, Category::optimizer, 7);
  EXPECT_EQ(l.current(Tier::device, Category::params), 100u);
  EXPECT_EQ(l.current(Tier::device), 150u);
  EXPECT_EQ(l.current(Tier::host), 7u);
  l.release(Tier::device, Category::params, 100);
  EXPECT_EQ(l.current(Tier::device), 50u);
  EXPECT_EQ(l.peak(Tier::device), 150u);
  EXPECT_EQ(l.peak(Tier::device, Category::params), 100u);
  l.reset_peaks();
  EXPECT_EQ(l.peak(Tier::device), 50u);
  EXPECT_EQ(l.peak(Tier::device, Category::params), 0u);
}

TEST(Ledger, TierPeakIsPeakOfTotalNotSumOfCategoryPeaks) {
  MemoryLedger l;
  l.charge(Tier::device, Category::activations, 100);
  l.release(Tier::device, Category::activations, 100);
  l.charge(Tier::device, Category::workspace, 60);
  EXPECT_EQ(l.peak(Tier::device), 100u);
  EXPECT_EQ(l.peak(Tier::device, Category::activations), 100u);
  EXPECT_EQ(l.peak(Tier::device, Category::workspace), 60u);
}

TEST(Ledger, CapThrowsOutOfMemoryWithBreakdownAndAdvice) {
  MemoryLedger l;
  l.set_cap(Tier::device, parse_bytes("1MiB"));
  l.charge(Tier::device, Category::optimizer, 700 * 1024);
  l.charge(Tier::device, Category::params, 200 * 1024);
  try {
    l.charge(Tier::device, Category::activations, 300 * 1024);
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[memory]"), std::string::npos) << m;
    EXPECT_NE(m.find("tried to allocate 300.00 KiB for activations"), std::string::npos) << m;
    EXPECT_NE(m.find("capped at 1.00 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("optimizer 700.00 KiB"), std::string::npos) << m;
    EXPECT_NE(m.find("params 200.00 KiB"), std::string::npos) << m;
    EXPECT_NE(m.find("zero_optimization.stage >= 1"), std::string::npos) << m;
    EXPECT_NE(m.find("train_micro_batch_size_per_gpu"), std::string::npos) << m;
    EXPECT_EQ(e.context().requested, 300u * 1024);
  }
  // A failed charge charges nothing.
  EXPECT_EQ(l.current(Tier::device), 900u * 1024);
  EXPECT_EQ(l.current(Tier::device, Category::activations), 0u);
}

TEST(Ledger, TensorsAreChargedToTheirTierAndCategory) {
  MemoryLedger l;
  {
    TensorOptions o{Device::cpu(), Tier::device, Category::grads, &l};
    Tensor a = Tensor::empty({10, 10}, DType::f32, o);
    Tensor b = Tensor::empty({8}, DType::bf16, o.with(Tier::host).with(Category::optimizer));
    EXPECT_EQ(l.current(Tier::device, Category::grads), 400u);
    EXPECT_EQ(l.current(Tier::host, Category::optimizer), 16u);
    Tensor v = a.slice(0, 2, 5);  // a view charges nothing
    EXPECT_EQ(l.current(Tier::device), 400u);
  }
  EXPECT_EQ(l.current(Tier::device), 0u);
  EXPECT_EQ(l.current(Tier::host), 0u);
  EXPECT_EQ(l.peak(Tier::device, Category::grads), 400u);
}

TEST(Ledger, DeviceCapSimulatesASmallGpu) {
  MemoryLedger l;
  l.set_cap(Tier::device, 1000);
  TensorOptions o{Device::cpu(), Tier::device, Category::activations, &l};
  Tensor a = Tensor::empty({200}, DType::f32, o);  // 800 bytes
  EXPECT_THROW(Tensor::empty({100}, DType::f32, o), OutOfMemory);
  EXPECT_NO_THROW(Tensor::empty({50}, DType::f32, o));
  // host tier is not capped
  EXPECT_NO_THROW(Tensor::empty({1000}, DType::f32, o.with(Tier::host)));
}

TEST(Ledger, ReportListsTiersCategoriesAndCaps) {
  MemoryLedger l;
  l.set_cap(Tier::device, parse_bytes("2GiB"));
  l.charge(Tier::device, Category::params, 3 * 1024 * 1024);
  l.charge(Tier::host, Category::optimizer, 5ull * 1024 * 1024 * 1024);
  const std::string r = l.report();
  EXPECT_NE(r.find("params"), std::string::npos) << r;
  EXPECT_NE(r.find("3.00 MiB"), std::string::npos) << r;
  EXPECT_NE(r.find("5.00 GiB"), std::string::npos) << r;
  EXPECT_NE(r.find("cap 2.00 GiB"), std::string::npos) << r;
}

TEST(Size, ParsesUnits) {
  EXPECT_EQ(parse_bytes("2GiB"), 2ull << 30);
  EXPECT_EQ(parse_bytes("2 gib"), 2ull << 30);
  EXPECT_EQ(parse_bytes("1.5GB"), 1500000000ull);
  EXPECT_EQ(parse_bytes("512MiB"), 512ull << 20);
  EXPECT_EQ(parse_bytes("64KB"), 64000ull);
  EXPECT_EQ(parse_bytes("3KiB"), 3072ull);
  EXPECT_EQ(parse_bytes("4096"), 4096ull);
  EXPECT_EQ(parse_bytes("1MB"), 1000000ull);
  EXPECT_EQ(parse_bytes("8G"), 8ull << 30);
  EXPECT_THROW(parse_bytes("two GiB"), UserError);
  EXPECT_THROW(parse_bytes("2XB"), UserError);
  EXPECT_THROW(parse_bytes(""), UserError);
  EXPECT_THROW(parse_bytes("1.5"), UserError);
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
}
