// NvmeStateStore: optimizer state round-trips through the swap file across steps exactly as a
// resident store keeps it (odd sizes, many units, buffer_count 2..4, with and without master/v,
// random access between steps), reads ahead and writes behind, keeps host memory within
// buffer_count × the largest unit, and reports I/O errors with the file's name.
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "offload/host_state_store.hpp"
#include "offload/nvme_state_store.hpp"
#include "tests/unit/offload/offload_test_util.hpp"

namespace strata::offload {
namespace {

using test::pattern;
using test::ScratchDir;

// Odd unit sizes: empty-ish, sub-page, page-crossing, larger than a 8 KiB I/O block.
const std::vector<std::int64_t> kSizes = {1, 1000, 1023, 4097, 70001, 3, 2048, 12345, 1, 50000, 7, 4096, 999};

Tensor initial_values(std::int64_t n, std::size_t u, DType dt) {
  Tensor t = Tensor::empty(Shape{n}, DType::f32, TensorOptions{}.with(Tier::host));
  for (std::int64_t i = 0; i < n; ++i) t.data<float>()[i] = pattern(-1, u, static_cast<std::size_t>(i), 0);
  return dt == DType::f32 ? t : t.to(dt, TensorOptions{}.with(Tier::host));
}

// One "optimizer step" on a unit: every tensor changes as a function of the old values.
void update(train::UnitOptimizerState& s, int step, std::size_t u) {  // AdamW's m, v (SGD's m)
  const auto n = static_cast<std::size_t>(s[0].numel());
  float* m = s[0].data<float>();
  float* v = s.tensors.size() > 1 ? s[1].data<float>() : nullptr;
  float* p = s.master.defined() ? s.master.data<float>() : nullptr;
  for (std::size_t i = 0; i < n; ++i) {
    m[i] = 0.5f * m[i] + pattern(step, u, i, 1);
    if (v) v[i] = 0.25f * v[i] + m[i] * m[i];
    if (p) p[i] -= 0.01f * m[i];
  }
}

bool same(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  return a.numel() == b.numel() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// The master and every state tensor.
bool same_state(const train::UnitOptimizerState& a, const train::UnitOptimizerState& b) {
  if (!same(a.master, b.master) || a.tensors.size() != b.tensors.size()) return false;
  for (std::size_t i = 0; i < a.tensors.size(); ++i)
    if (!same(a[i], b[i])) return false;
  return true;
}

struct Case {
  int buffer_count;
  bool master;
  bool second_moment;
};

class NvmeRoundTrip : public ::testing::TestWithParam<Case> {};

TEST_P(NvmeRoundTrip, MatchesAResidentStoreAcrossSteps) {
  const Case c = GetParam();
  ScratchDir dir("store");
  MemoryLedger ledger;
  SwapperOptions o;
  o.dir = dir.str();
  o.buffer_count = c.buffer_count;
  o.aio.block_size = 8192;  // several requests per unit
  o.aio.queue_depth = 4;
  o.ledger = &ledger;
  NvmeStateStore nvme(o);
  auto ref = train::make_memory_state_store(TensorOptions{});  // global ledger: not counted here
  for (std::size_t u = 0; u < kSizes.size(); ++u) {
    const train::StateLayout l = test::adam_layout(kSizes[u], c.master, c.second_moment);
    const Tensor init = initial_values(kSizes[u], u, c.master ? DType::bf16 : DType::f32);
    nvme.create(u, l, init);
    ref->create(u, l, init);
  }
  ASSERT_EQ(nvme.num_units(), kSizes.size());
  for (int step = 1; step <= 4; ++step) {
    nvme.begin_step();
    for (std::size_t u = 0; u < kSizes.size(); ++u) {
      auto& a = nvme.acquire(u);
      auto& b = ref->acquire(u);
      ASSERT_TRUE(same_state(a, b))
          << "unit " << u << " differs at the start of step " << step;
      update(a, step, u);
      update(b, step, u);
      nvme.release(u, true);
      ref->release(u, true);
    }
    nvme.end_step();
    // Between steps, read in another order without modifying (what a checkpoint save does).
    for (std::size_t k = kSizes.size(); k-- > 0;) {
      auto& a = nvme.acquire(k);
      auto& b = ref->acquire(k);
      ASSERT_TRUE(same_state(a, b)) << "unit " << k;
      nvme.release(k, false);
      ref->release(k, false);
    }
  }
  const SwapStats s = nvme.swapper().stats();
  // More units than buffers: state really went to disk and came back.
  EXPECT_GT(s.bytes_written, 0u);
  EXPECT_GT(s.bytes_read, 0u);
  EXPECT_GE(s.reads, 4 * (kSizes.size() - static_cast<std::size_t>(c.buffer_count)));
  // Host memory: at most buffer_count buffers of the largest unit.
  std::uint64_t largest = 0, total = 0;
  for (auto n : kSizes) {
    largest = std::max(largest, packed_bytes(test::adam_layout(n, c.master, c.second_moment)));
    total += packed_bytes(test::adam_layout(n, c.master, c.second_moment));
  }
  EXPECT_LE(ledger.peak(Tier::host, Category::optimizer),
            static_cast<std::uint64_t>(c.buffer_count) * largest);
  EXPECT_EQ(ledger.current(Tier::nvme, Category::optimizer), total);
  EXPECT_EQ(ledger.current(Tier::device), 0u);
}

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
  return "buffers" + std::to_string(i.param.buffer_count) + (i.param.master ? "_master" : "") +
         (i.param.second_moment ? "_adamw" : "_sgd");
}

INSTANTIATE_TEST_SUITE_P(Buffers, NvmeRoundTrip,
                         ::testing::Values(Case{2, true, true}, Case{3, true, true},
                                           Case{4, true, true}, Case{2, false, true},
                                           Case{3, false, false}, Case{4, true, false}),
                         case_name);

// Steps 1..steps of updates touching the units in `order`, as the Trainer does; `ref`, when given,
// is updated alike.
void run_steps(NvmeStateStore& nvme, const std::vector<std::size_t>& order, int steps,
               HostStateStore* ref = nullptr) {
  for (int step = 1; step <= steps; ++step) {
    nvme.begin_step();
    for (std::size_t u : order) {
      update(nvme.acquire(u), step, u);
      nvme.release(u, true);
      if (ref) update(ref->acquire(u), step, u);
    }
    nvme.end_step();
  }
}

TEST(NvmeStateStore, ReadsAheadSoTheUpdateOfAUnitRarelyWaits) {
  // With enough buffers for the next units, every acquire after the first of a step finds its
  // unit already read (or being read): hits count acquires that found the unit attached.
  ScratchDir dir("ahead");
  MemoryLedger ledger;
  SwapperOptions o;
  o.dir = dir.str();
  o.buffer_count = 3;
  o.ledger = &ledger;
  NvmeStateStore nvme(o);
  const std::size_t n = 8;
  for (std::size_t u = 0; u < n; ++u)
    nvme.create(u, test::adam_layout(5000, true, true), initial_values(5000, u, DType::bf16));
  nvme.swapper().reset_stats();
  std::vector<std::size_t> order;
  for (std::size_t u = 0; u < n; ++u) order.push_back(u);
  run_steps(nvme, order, 3);
  const SwapStats s = nvme.swapper().stats();
  EXPECT_EQ(s.hits, 3 * n);  // every unit was read ahead
  EXPECT_EQ(s.writes, 3 * n);
  EXPECT_EQ(s.bytes_written, 3 * n * packed_bytes(test::adam_layout(5000, true, true)));
}

TEST(NvmeStateStore, ReadsAheadInTheExpectedOrder) {
  // The Trainer updating units in backward touches them n-1..0: expect_order makes the store read
  // ahead in that order (wrapping into the next step), so every acquire is a hit again; without
  // it the store reads ahead 0..n-1 and the reversed acquires mostly miss. Contents round-trip.
  const std::size_t n = 8;
  std::vector<std::size_t> backward;
  for (std::size_t u = n; u-- > 0;) backward.push_back(u);
  for (const bool expect : {true, false}) {
    ScratchDir dir(expect ? "order" : "noorder");
    MemoryLedger ledger;
    NvmeStateStore nvme(test::small_swapper(dir, 3, &ledger));
    HostStateStore ref(false, &ledger);
    for (std::size_t u = 0; u < n; ++u) {
      nvme.create(u, test::adam_layout(5000, true, true), initial_values(5000, u, DType::bf16));
      ref.create(u, test::adam_layout(5000, true, true), initial_values(5000, u, DType::bf16));
    }
    if (expect) nvme.expect_order(backward);
    nvme.swapper().reset_stats();
    run_steps(nvme, backward, 3, &ref);
    const SwapStats s = nvme.swapper().stats();
    if (expect) EXPECT_EQ(s.hits, 3 * n);
    else EXPECT_LT(s.hits, 2 * n) << "reversed acquires found read ahead without expect_order";
    for (std::size_t u = 0; u < n; ++u) {
      const train::UnitOptimizerState& a = nvme.acquire(u);
      const train::UnitOptimizerState& b = ref.acquire(u);
      EXPECT_TRUE(same_state(a, b)) << "unit " << u;
      nvme.release(u, false);
    }
  }
  ScratchDir dir("badorder");
  MemoryLedger ledger;
  NvmeStateStore nvme(test::small_swapper(dir, 2, &ledger));
  for (std::size_t u = 0; u < 3; ++u) nvme.create(u, test::adam_layout(100, false, true), initial_values(100, u, DType::f32));
  EXPECT_THROW(nvme.expect_order({0, 1}), Error);
  EXPECT_THROW(nvme.expect_order({0, 1, 1}), Error);
}

TEST(NvmeStateStore, ReadOfAUnitWaitsForItsOwnWriteBackOnASlowDisk) {
  // Writes are slowed down (the hook sleeps) so that a unit evicted right after its release is
  // re-read while its write-back is still in flight: the read must come after that write.
  ScratchDir dir("slow");
  MemoryLedger ledger;
  SwapperOptions o;
  o.dir = dir.str();
  o.buffer_count = 2;
  o.aio.thread_count = 2;
  o.ledger = &ledger;
  o.aio.fault = [](const IoRequestInfo& r) {
    if (r.op == IoOp::write) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return 0;
  };
  NvmeStateStore nvme(o);
  auto ref = train::make_memory_state_store(TensorOptions{});
  const std::size_t n = 5;
  for (std::size_t u = 0; u < n; ++u) {
    nvme.create(u, test::adam_layout(3000, true, true), initial_values(3000, u, DType::f32));
    ref->create(u, test::adam_layout(3000, true, true), initial_values(3000, u, DType::f32));
  }
  // An access pattern that is not the step order: modify, evict, come back at once.
  const std::size_t order[] = {0, 0, 1, 1, 2, 0, 0, 3, 1, 0, 0, 4, 2, 4, 4, 0, 3};
  int k = 0;
  for (std::size_t u : order) {
    auto& a = nvme.acquire(u);
    auto& b = ref->acquire(u);
    ASSERT_TRUE(same_state(a, b)) << "access " << k << " unit " << u;
    update(a, ++k, u);
    update(b, k, u);
    nvme.release(u, true);
    ref->release(u, true);
  }
  nvme.end_step();
}

TEST(NvmeStateStore, InjectedWriteErrorIsReportedWithTheFileNameNotSwallowed) {
  ScratchDir dir("enospc");
  MemoryLedger ledger;
  SwapperOptions o;
  o.dir = dir.str();
  o.buffer_count = 2;
  o.ledger = &ledger;
  std::atomic<int> writes{0};
  std::atomic<bool> armed{false};
  o.aio.fault = [&](const IoRequestInfo& r) {
    if (r.op == IoOp::write && armed && ++writes == 3) return ENOSPC;  // the disk fills mid-step
    return 0;
  };
  NvmeStateStore nvme(o);
  for (std::size_t u = 0; u < 6; ++u) nvme.create(u, test::adam_layout(3000, true, true), initial_values(3000, u, DType::f32));
  armed = true;
  std::string message;
  try {
    nvme.begin_step();
    for (std::size_t u = 0; u < 6; ++u) {
      update(nvme.acquire(u), 1, u);
      nvme.release(u, true);
    }
    nvme.end_step();
    nvme.begin_step();  // the last write-backs are waited for here at the latest
  } catch (const Error& e) {
    message = e.what();
  }
  ASSERT_FALSE(message.empty()) << "the write error was swallowed";
  EXPECT_NE(message.find(nvme.swapper().path()), std::string::npos) << message;
  EXPECT_NE(message.find(std::strerror(ENOSPC)), std::string::npos) << message;
  EXPECT_NE(message.find("full"), std::string::npos) << message;
  // The store stays failed: its file no longer holds a consistent state.
  EXPECT_THROW(nvme.acquire(0), Error);
}

TEST(NvmeStateStore, InjectedReadErrorIsReportedWithTheFileName) {
  ScratchDir dir("eio");
  MemoryLedger ledger;
  SwapperOptions o;
  o.dir = dir.str();
  o.buffer_count = 2;
  o.ledger = &ledger;
  o.aio.fault = [](const IoRequestInfo& r) { return r.op == IoOp::read ? EIO : 0; };
  NvmeStateStore nvme(o);
  for (std::size_t u = 0; u < 4; ++u) nvme.create(u, test::adam_layout(3000, false, true), initial_values(3000, u, DType::f32));
  // After creation only the last two units are resident (2 buffers): unit 0 must be read.
  ASSERT_FALSE(nvme.swapper().resident(0));
  try {
    nvme.acquire(0);
    FAIL() << "the read error was swallowed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(nvme.swapper().path()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::strerror(EIO)), std::string::npos) << e.what();
  }
}

TEST(NvmeStateStore, SwapFileIsRemovedWithTheStore) {
  ScratchDir dir("cleanup");
  MemoryLedger ledger;
  SwapperOptions o;
  o.dir = dir.str();
  o.ledger = &ledger;
  {
    NvmeStateStore nvme(o);
    nvme.create(0, test::adam_layout(100, true, true), initial_values(100, 0, DType::f32));
    EXPECT_EQ(dir.files(), 1u);
    EXPECT_GT(ledger.current(Tier::nvme), 0u);
  }
  EXPECT_EQ(dir.files(), 0u);
  EXPECT_EQ(ledger.current(Tier::nvme), 0u);
  EXPECT_EQ(ledger.current(Tier::host), 0u);
}

TEST(NvmeStateStore, BufferCountBelowTwoIsAUserError) {
  ScratchDir dir("bc");
  SwapperOptions o;
  o.dir = dir.str();
  o.buffer_count = 1;
  EXPECT_THROW(NvmeStateStore{o}, UserError);
  EXPECT_EQ(dir.files(), 0u);  // rejected before any file was made
}

TEST(HostStateStore, KeepsStateOnTheHostTier) {
  MemoryLedger ledger;
  HostStateStore host(false, &ledger);
  auto ref = train::make_memory_state_store(TensorOptions{});
  for (std::size_t u = 0; u < 3; ++u) {
    const Tensor init = initial_values(kSizes[u], u, DType::bf16);
    host.create(u, test::adam_layout(kSizes[u], true), init);
    ref->create(u, test::adam_layout(kSizes[u], true), init);
  }
  for (std::size_t u = 0; u < 3; ++u) {
    auto& a = host.acquire(u);
    auto& b = ref->acquire(u);
    EXPECT_TRUE(same_state(a, b));
  }
  std::uint64_t want = 0;
  for (std::size_t u = 0; u < 3; ++u) want += packed_bytes(test::adam_layout(kSizes[u], true, true));
  EXPECT_EQ(ledger.current(Tier::host, Category::optimizer), want);
  EXPECT_EQ(ledger.current(Tier::device), 0u);
}

}  // namespace
}  // namespace strata::offload
