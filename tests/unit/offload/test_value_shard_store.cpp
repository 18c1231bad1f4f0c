// Parameter-slice stores for offload_param: slices round-trip through host memory and the NVMe
// swap file bitwise, the NVMe store reads ahead in the direction units are visited (forward,
// backward, optimizer) so those acquires find their slice resident, and bytes are charged to the
// right tier under params.
#include <gtest/gtest.h>

#include <cstring>

#include "offload/value_shard_store.hpp"
#include "tests/unit/offload/offload_test_util.hpp"

namespace strata::offload {
namespace {
namespace test_value_shard_store {  // file-local names, unique in a unity build

using test::pattern;
using test::ScratchDir;

const std::vector<std::int64_t> kSizes = {1000, 3, 70001, 4097, 2048, 12345, 1};

void fill(Tensor t, int step, std::size_t u) {
  std::vector<float> v(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = pattern(step, u, i, 5);
  Tensor src = Tensor::empty(t.shape(), DType::f32, TensorOptions{}.with(Tier::host));
  std::memcpy(src.raw(), v.data(), v.size() * 4);
  t.copy_from(src);
}

std::vector<float> expected(const Tensor& like, int step, std::size_t u) {
  Tensor t = Tensor::empty(like.shape(), like.dtype(), TensorOptions{}.with(Tier::host));
  fill(t, step, u);
  return t.to_vector();
}

TEST(ValueShardStores, RoundTripBitwiseAndChargeTheirTier) {
  ScratchDir dir("params");
  for (DType dt : {DType::bf16, DType::f32}) {
    MemoryLedger ledger;
    HostValueShardStore host(false, &ledger);
    NvmeValueShardStore nvme(test::small_swapper(dir, 3, &ledger));
    for (std::size_t u = 0; u < kSizes.size(); ++u) {
      host.create(u, kSizes[u], dt);
      nvme.create(u, kSizes[u], dt);
    }
    for (ValueShardStore* s : std::initializer_list<ValueShardStore*>{&host, &nvme}) {
      for (std::size_t u = 0; u < kSizes.size(); ++u) {  // fresh slices are zero
        Tensor t = s->acquire(u);
        ASSERT_EQ(t.numel(), kSizes[u]);
        ASSERT_EQ(t.dtype(), dt);
        for (float x : t.to_vector()) ASSERT_EQ(x, 0.0f);
        s->release(u, false);
      }
      for (int step = 1; step <= 3; ++step) {
        for (std::size_t u = 0; u < kSizes.size(); ++u) {
          fill(s->acquire(u), step, u);
          s->release(u, true);
        }
        for (std::size_t k = kSizes.size(); k-- > 0;) {
          Tensor t = s->acquire(k);
          EXPECT_EQ(t.to_vector(), expected(t, step, k)) << "unit " << k << " step " << step;
          s->release(k, false);
        }
      }
    }
    nvme.flush();
    EXPECT_GT(nvme.swapper().stats().bytes_read, 0u);
    EXPECT_GT(ledger.current(Tier::host, Category::params), 0u);
    EXPECT_GT(ledger.current(Tier::nvme, Category::params), 0u);
    EXPECT_EQ(ledger.current(Tier::device), 0u);
  }
}

// A caller that overwrites whole slices (the optimizer's 16-bit copy of its masters) acquires
// them without a read and has nothing read ahead for it; what it writes reads back bitwise.
TEST(ValueShardStores, OverwritesAreNeitherReadNorReadAhead) {
  ScratchDir dir("params");
  MemoryLedger ledger;
  NvmeValueShardStore nvme(test::small_swapper(dir, 3, &ledger));
  for (std::size_t u = 0; u < kSizes.size(); ++u) nvme.create(u, kSizes[u], DType::bf16);
  for (std::size_t u = 0; u < kSizes.size(); ++u) {  // step 1 written: the file holds slices
    fill(nvme.acquire(u), 1, u);
    nvme.release(u, true);
  }
  nvme.flush();
  std::vector<std::size_t> order(kSizes.size());
  for (std::size_t u = 0; u < order.size(); ++u) order[u] = u;
  nvme.swapper().reset_stats();
  nvme.expect_overwrites(order);
  for (std::size_t u = 0; u < kSizes.size(); ++u) {
    fill(nvme.acquire_to_overwrite(u), 2, u);
    nvme.release(u, true);
  }
  nvme.flush();
  EXPECT_EQ(nvme.swapper().stats().bytes_read, 0u);
  EXPECT_GT(nvme.swapper().stats().bytes_written, 0u);
  nvme.expect(order);  // a reader again: read ahead, and the overwritten values come back
  for (std::size_t u = 0; u < kSizes.size(); ++u) {
    Tensor t = nvme.acquire(u);
    EXPECT_EQ(t.to_vector(), expected(t, 2, u)) << "unit " << u;
    nvme.release(u, false);
  }
  EXPECT_GT(nvme.swapper().stats().bytes_read, 0u);
}

// An op's workspace for an acquired slice (a 16-bit slice widened to f32 by the CPU backend) is
// charged to the store's ledger — the job's, which the memory planner reads — not the global one.
TEST(ValueShardStores, WorkspaceForASliceGoesToTheStoresLedger) {
  ScratchDir dir("params");
  MemoryLedger ledger;
  HostValueShardStore host(false, &ledger, Category::grads);
  NvmeValueShardStore nvme(test::small_swapper(dir, 3, &ledger), Category::grads);
  for (ValueShardStore* s : std::initializer_list<ValueShardStore*>{&host, &nvme}) {
    s->create(0, 4096, DType::bf16);
    const Tensor t = s->acquire(0);
    EXPECT_EQ(t.storage()->ledger(), &ledger);
    const std::uint64_t global0 = MemoryLedger::global().peak(Tier::host);
    {
      // What AdamW's CPU step does with a bf16 gradient: widen it into a workspace.
      const Tensor wide = t.to(DType::f32, TensorOptions{t.device(), t.tier(), Category::workspace,
                                                         t.storage()->ledger()});
      EXPECT_EQ(ledger.current(Tier::host, Category::workspace), 4096u * 4);
    }
    EXPECT_EQ(MemoryLedger::global().peak(Tier::host), global0);
    s->release(0, false);
  }
}

// The store reads ahead exactly the units its caller says come next (expect()), so every acquire
// of a forward, backward and optimizer pass finds its unit resident or in flight; without an
// expectation, or once the caller goes elsewhere, it reads nothing ahead.
// n units of 5000 bf16 elements, each written with step 1's values, the writes complete.
void write_units(NvmeValueShardStore& s, std::size_t n) {
  for (std::size_t u = 0; u < n; ++u) s.create(u, 5000, DType::bf16);
  for (std::size_t u = 0; u < n; ++u) {
    fill(s.acquire(u), 1, u);
    s.release(u, true);
  }
  s.flush();
}

TEST(NvmeValueShardStore, ReadsAheadWhatTheCallerExpects) {
  ScratchDir dir("paramsdir");
  MemoryLedger ledger;
  SwapperOptions o;
  o.dir = dir.str();
  o.buffer_count = 3;
  o.ledger = &ledger;
  NvmeValueShardStore s(o);
  const std::size_t n = 8;
  write_units(s, n);
  // Forward 0..n-1, backward n-1..0, optimizer 0..n-1, as the engine's schedule says.
  std::vector<std::size_t> order;
  for (std::size_t u = 0; u < n; ++u) order.push_back(u);
  for (std::size_t u = n; u-- > 0;) order.push_back(u);
  for (std::size_t u = 0; u < n; ++u) order.push_back(u);
  auto run = [&](const std::vector<std::size_t>& units) {
    for (std::size_t u : units) {
      Tensor t = s.acquire(u);
      EXPECT_EQ(t.to_vector(), expected(t, 1, u));
      s.release(u, false);
    }
  };
  // Told: every acquire finds its unit read ahead (resident or in flight).
  s.swapper().reset_stats();
  s.expect(order);
  run(order);
  EXPECT_EQ(s.swapper().stats().hits, order.size());
  // Not told: nothing is read ahead (a direction-guessing store would read unit 2 after 0, 1).
  run({0, 1});
  EXPECT_FALSE(s.swapper().resident(2));
  // Told one order, then going elsewhere: the expectation is dropped, not followed further.
  s.swapper().reset_stats();
  s.expect({2, 3, 4});  // reads 2 and 3 ahead (two idle buffers)
  run({7, 6, 5});
  EXPECT_FALSE(s.swapper().resident(4));
  EXPECT_LE(s.swapper().stats().reads, 5u);
}

// The optimizer updating units in backward (strata.optimizer_in_backward) overwrites unit u+1's
// slice after u's backward, as ZeRO-3's hooks do it: the slice of the next use (u-1) is held by
// its gather in flight, u's was released when its gather completed, and the read-ahead has filled
// what buffers it may. The overwrite keeps the gathers' expectation and takes a buffer holding
// none of the slices read ahead, so every gather still finds its slice read ahead and (after the
// first overwrite) no slice is read twice.
TEST(NvmeValueShardStore, AnOverwriteBesideExpectedReadsKeepsThem) {
  ScratchDir dir("beside");
  MemoryLedger ledger;
  NvmeValueShardStore s(test::small_swapper(dir, 4, &ledger));
  const std::size_t n = 12;
  write_units(s, n);
  std::vector<std::size_t> backward;
  for (std::size_t u = n; u-- > 0;) backward.push_back(u);
  std::uint64_t unread = 0;  // the units the writes above did not leave in a buffer
  for (std::size_t u = 0; u < n; ++u) unread += s.swapper().resident(u) ? 0 : 1;
  ASSERT_GT(unread, 4u);
  s.swapper().reset_stats();
  auto gather = [&](std::size_t u) {  // finds its slice read ahead (resident or in flight)
    const std::uint64_t hits = s.swapper().stats().hits;
    const Tensor t = s.acquire(u);
    EXPECT_EQ(s.swapper().stats().hits, hits + 1) << "unit " << u << " was not read ahead";
    EXPECT_EQ(t.to_vector(), expected(t, 1, u)) << "unit " << u;
  };
  s.expect(backward);
  gather(backward[0]);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t u = backward[i];
    if (i + 1 < n) gather(backward[i + 1]);  // the next use's gather, in flight during u's
    s.release(u, false);                                                  // u's gather done
    if (u + 1 < n) {  // after u's backward: the update of u + 1
      fill(s.acquire_to_overwrite(u + 1), 2, u + 1);
      s.release(u + 1, true);
    }
  }
  fill(s.acquire_to_overwrite(0), 2, 0);
  s.release(0, true);
  // The first overwrite finds every idle buffer read ahead and takes the one needed last (read
  // again later, once); from then on a buffer is kept free for the overwrites.
  EXPECT_LE(s.swapper().stats().reads, unread + 1) << "slices read ahead were evicted and read again";
  s.flush();
  for (std::size_t u = 0; u < n; ++u) {
    Tensor t = s.acquire(u);
    EXPECT_EQ(t.to_vector(), expected(t, 2, u)) << "unit " << u;
    s.release(u, false);
  }
}

TEST(ValueShardStores, ConfigPicksTheStore) {
  ScratchDir dir("paramcfg");
  config::Config c;
  c.zero_optimization.stage = 3;
  TensorOptions mem;
  EXPECT_EQ(make_value_shard_store(c, 0, mem), nullptr);
  c.zero_optimization.offload_param.device = config::OffloadDevice::cpu;
  EXPECT_NE(dynamic_cast<HostValueShardStore*>(make_value_shard_store(c, 0, mem).get()), nullptr);
  c.zero_optimization.offload_param.device = config::OffloadDevice::nvme;
  c.zero_optimization.offload_param.nvme_path = dir.str();
  auto s = make_value_shard_store(c, 2, mem);
  auto* n = dynamic_cast<NvmeValueShardStore*>(s.get());
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->swapper().buffer_count(), 5);  // DeepSpeed's offload_param.buffer_count
  EXPECT_NE(n->swapper().path().find("rank2-params"), std::string::npos);
}

// The gradient store (Category::grads): a "grads" swap file charged under grads; new units and
// zero(u) hand out zeros at the next acquire without reading the file, and a dirty release makes
// the file's contents count again.
TEST(NvmeValueShardStore, ZeroedUnitsReadAsZerosWithoutIo) {
  ScratchDir dir("grads");
  MemoryLedger ledger;
  NvmeValueShardStore s(test::small_swapper(dir, 2, &ledger), Category::grads);
  for (std::size_t u = 0; u < kSizes.size(); ++u) s.create(u, kSizes[u], DType::f32);
  EXPECT_NE(s.swapper().path().find("grads"), std::string::npos) << s.swapper().path();
  EXPECT_GT(ledger.current(Tier::nvme, Category::grads), 0u);
  EXPECT_EQ(ledger.current(Tier::nvme, Category::params), 0u);
  for (std::size_t u = 0; u < kSizes.size(); ++u) {  // new units: zeros, not read
    Tensor t = s.acquire(u);
    for (float x : t.to_vector()) ASSERT_EQ(x, 0.0f) << "unit " << u;
    fill(t, 1, u);
    s.release(u, true);
  }
  EXPECT_EQ(s.swapper().stats().bytes_read, 0u);
  s.flush();
  for (std::size_t u = 0; u < kSizes.size(); ++u) s.zero(u);
  s.swapper().reset_stats();
  std::vector<std::size_t> all(kSizes.size());
  for (std::size_t u = 0; u < all.size(); ++u) all[u] = u;
  s.expect(all);  // nothing is read ahead for zeroed units either
  for (std::size_t u = 0; u < kSizes.size(); ++u) {
    Tensor t = s.acquire(u);
    for (float x : t.to_vector()) ASSERT_EQ(x, 0.0f) << "unit " << u;
    if (u % 2 == 0) fill(t, 2, u);  // written: the file counts again
    s.release(u, u % 2 == 0);
  }
  s.flush();
  EXPECT_EQ(s.swapper().stats().bytes_read, 0u);
  for (std::size_t u = 0; u < kSizes.size(); ++u) {
    Tensor t = s.acquire(u);
    if (u % 2 == 0) EXPECT_EQ(t.to_vector(), expected(t, 2, u)) << "unit " << u;
    else for (float x : t.to_vector()) ASSERT_EQ(x, 0.0f) << "unit " << u;  // still zero
    s.release(u, false);
  }
  EXPECT_GT(s.swapper().stats().bytes_read, 0u);
}

// is_zero: what ZeroHooks asks before adding a reduced gradient into a slice (a zero slice is
// copied into, or not stored at all). True for new and zeroed units; false once a unit is written
// (NVMe: released dirty; host: acquired at all, since the caller holds the memory itself).
TEST(ValueShardStores, KnowWhichUnitsAreZero) {
  ScratchDir dir("zeroes");
  MemoryLedger ledger;
  HostValueShardStore host(false, &ledger, Category::grads);
  NvmeValueShardStore nvme(test::small_swapper(dir, 2, &ledger), Category::grads);
  for (ValueShardStore* s : std::initializer_list<ValueShardStore*>{&host, &nvme}) {
    for (std::size_t u = 0; u < 3; ++u) s->create(u, kSizes[u], DType::f32);
    for (std::size_t u = 0; u < 3; ++u) EXPECT_TRUE(s->is_zero(u)) << s->where() << " unit " << u;
    fill(s->acquire_to_overwrite(0), 1, 0);
    s->release(0, true);
    EXPECT_FALSE(s->is_zero(0)) << s->where();
    EXPECT_TRUE(s->is_zero(1)) << s->where();
    s->zero(0);
    EXPECT_TRUE(s->is_zero(0)) << s->where();
    Tensor t = s->acquire(0);
    for (float x : t.to_vector()) ASSERT_EQ(x, 0.0f) << s->where();
    s->release(0, false);
    s->flush();
  }
  EXPECT_FALSE(host.is_zero(0));  // acquired: it may have been written
  EXPECT_TRUE(nvme.is_zero(0));   // released clean: still zeros
  fill(nvme.acquire(1), 2, 1);
  nvme.release(1, true);
  EXPECT_FALSE(nvme.is_zero(1));
}

}  // namespace test_value_shard_store
}  // namespace
}  // namespace strata::offload
