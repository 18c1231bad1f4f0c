// Progress: a collective completes while the main thread computes and never calls into MPI.
// Memory: collectives allocate nothing except ledgered comm-buffer staging when they must.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "framework/memory/ledger.hpp"
#include "tests/dist/comm/dist_env.hpp"

using namespace strata;
using namespace strata::test;

namespace {
volatile double g_sink = 0;  // where the busy computation's result goes, so that it is kept
}  // namespace

TEST(Overlap, AllReduceCompletesWhileTheMainThreadComputes) {
  const auto& g = world();
  const int n = g.size();
  const std::size_t count = std::size_t{4} << 20;  // 16 MiB of f32
  Tensor x = make(DType::f32, count, [&](std::size_t i) { return value(DType::f32, g.rank(), i); });
  parallel::Work w = g.all_reduce(x);
  // Compute without calling MPI; is_completed() only reads a flag the progress thread sets.
  std::vector<double> a(1 << 14, 1.0);
  double acc = 0;
  std::size_t rounds = 0;
  bool done = false;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!(done = w.is_completed()) && std::chrono::steady_clock::now() < give_up) {
    for (double& v : a) acc += std::sqrt(v += 1e-9);
    ++rounds;
  }
  g_sink = acc;
  EXPECT_TRUE(done) << "the all_reduce made no progress while this thread computed";
  w.wait();
  EXPECT_EQ(mismatch(read(x),
                     [&](std::size_t i) {
                       double s = 0;
                       for (int r = 0; r < n; ++r) s += value(DType::f32, r, i);
                       return s;
                     }),
            "");
  if (g.rank() == 0) RecordProperty("compute_rounds_during_all_reduce", static_cast<int>(rounds));
}

TEST(Ledger, OrdinaryCollectivesAllocateNothing) {
  const auto& g = world();
  auto& ledger = MemoryLedger::global();
  Tensor x = make(DType::bf16, 100003, [&](std::size_t i) { return value(DType::bf16, 0, i); });
  Tensor big = Tensor::zeros(Shape{100003 * g.size()}, DType::bf16);
  Tensor block = Tensor::zeros(Shape{100003}, DType::bf16);
  ledger.reset_peaks();
  g.all_reduce(x, parallel::ReduceOp::avg).wait();
  g.all_gather(x, big).wait();
  g.reduce_scatter(big, block).wait();
  g.broadcast(x, 0).wait();
  for (Tier t : {Tier::device, Tier::host}) EXPECT_EQ(ledger.peak(t, Category::comm), 0u);
}

TEST(Ledger, StagingForAnAliasedReduceScatterIsChargedAsCommBuffers) {
  const auto& g = world();
  auto& ledger = MemoryLedger::global();
  const std::int64_t block = 50001;
  Tensor flat = make(DType::f32, static_cast<std::size_t>(block * g.size()),
                     [&](std::size_t i) { return value(DType::f32, g.rank(), i); });
  Tensor mine = flat.slice(0, block * g.rank(), block * (g.rank() + 1));
  ledger.reset_peaks();
  const Tier tier = flat.tier();
  g.reduce_scatter(flat, mine).wait();
  // One block of staging (not the whole buffer), released by the time the wait returns.
  EXPECT_EQ(ledger.peak(tier, Category::comm), static_cast<std::uint64_t>(block) * 4);
  EXPECT_EQ(ledger.current(tier, Category::comm), 0u);
}

TEST(Ledger, ValidationBuffersAreChargedAsCommBuffers) {
  const auto& g = world();
  parallel::Group v = g.split(0, g.rank(), "validated_ledger");
  v.set_validate(true);
  auto& ledger = MemoryLedger::global();
  ledger.reset_peaks();
  v.barrier().wait();
  EXPECT_EQ(ledger.peak(Tier::host, Category::comm), 32u * static_cast<std::uint64_t>(g.size()));
  EXPECT_EQ(ledger.current(Tier::host, Category::comm), 0u);
}
