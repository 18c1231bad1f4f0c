// AdamW8bit's and Adafactor's state in the host and NVMe stores: every tensor (u8 codes, block
// absmax, packed vector second moment, factored statistics, master, m) round-trips bitwise
// across steps like a resident store; and the NVMe tier moves a quarter of AdamW's moment bytes
// for 8-bit state (the swapper's byte counters).
#include <gtest/gtest.h>

#include <cstring>

#include "framework/optim/quantize.hpp"
#include "offload/host_state_store.hpp"
#include "offload/nvme_state_store.hpp"
#include "tests/unit/offload/offload_test_util.hpp"

namespace strata::offload {
namespace {
namespace test_optimizer_state_stores {  // file-local names, unique in a unity build

using test::pattern;
using test::ScratchDir;
using S = train::UnitOptimizerState;

const std::vector<std::int64_t> kSizes = {2048, 4096, 6144, 2048, 10240, 2048, 4096};

// AdamW8bit's declared state: u8 codes of m and v per element, f32 absmax of each per block.
train::StateLayout layout_8bit(std::int64_t n, bool master) {
  const auto blocks = static_cast<std::int64_t>(optim::quant_blocks(static_cast<std::size_t>(n)));
  return {n, master, {{DType::u8, n}, {DType::u8, n}, {DType::f32, blocks}, {DType::f32, blocks}}};
}

// Adafactor's: m per element (with beta1), the vectors' packed second moment, the factored
// statistics.
train::StateLayout layout_adafactor(std::int64_t n, bool master, std::size_t u) {
  train::StateLayout l{n, master, {}};
  if (u % 2 == 0) l.tensors.push_back({DType::f32, n});  // beta1 or not
  l.tensors.push_back({DType::f32, static_cast<std::int64_t>(17 * (u + 1))});
  l.tensors.push_back({DType::f32, static_cast<std::int64_t>(301 + u)});
  return l;
}

// The master and every state tensor.
std::vector<Tensor*> all_tensors(S& s) {
  std::vector<Tensor*> out{&s.master};
  for (Tensor& t : s.tensors) out.push_back(&t);
  return out;
}

// Every tensor of the unit changes as a function of its old contents.
void update(S& s, int step, std::size_t u) {
  for (Tensor* t : all_tensors(s)) {
    Tensor& x = *t;
    if (!x.defined()) continue;
    if (x.dtype() == DType::u8) {
      auto* q = static_cast<std::uint8_t*>(x.raw());
      for (std::int64_t i = 0; i < x.numel(); ++i)
        q[i] = static_cast<std::uint8_t>(q[i] * 3 + step + u + static_cast<std::size_t>(i));
    } else {
      float* f = x.data<float>();
      for (std::int64_t i = 0; i < x.numel(); ++i)
        f[i] = 0.5f * f[i] + pattern(step, u, static_cast<std::size_t>(i), 1);
    }
  }
}

bool same(S& a, S& b) {
  if (a.tensors.size() != b.tensors.size()) return false;
  const auto ta = all_tensors(a), tb = all_tensors(b);
  for (std::size_t i = 0; i < ta.size(); ++i) {
    const Tensor &x = *ta[i], &y = *tb[i];
    if (x.defined() != y.defined()) return false;
    if (!x.defined()) continue;
    if (x.numel() != y.numel() || x.dtype() != y.dtype() ||
        std::memcmp(x.raw(), y.raw(), x.nbytes()) != 0)
      return false;
  }
  return true;
}

class NewStateRoundTrip : public ::testing::TestWithParam<bool> {};

TEST_P(NewStateRoundTrip, HostAndNvmeMatchAResidentStore) {
  const bool eight_bit = GetParam();
  ScratchDir dir("newstate");
  MemoryLedger ledger;
  NvmeStateStore nvme(test::small_swapper(dir, 2, &ledger));
  HostStateStore host(false, &ledger);
  auto ref = train::make_memory_state_store(TensorOptions{});
  for (std::size_t u = 0; u < kSizes.size(); ++u) {
    const bool master = u % 3 != 1;
    const auto l = eight_bit ? layout_8bit(kSizes[u], master) : layout_adafactor(kSizes[u], master, u);
    Tensor init = Tensor::empty(Shape{kSizes[u]}, DType::f32, TensorOptions{}.with(Tier::host));
    for (std::int64_t i = 0; i < kSizes[u]; ++i) init.data<float>()[i] = pattern(-1, u, static_cast<std::size_t>(i), 0);
    nvme.create(u, l, init);
    host.create(u, l, init);
    ref->create(u, l, init);
    // A fresh unit is the zero state: a zeroed buffer (byte 0 = code value +0).
    const S& r = ref->acquire(u);
    if (eight_bit) {
      EXPECT_EQ(r[0].numel(), kSizes[u]);
      EXPECT_EQ(r[2].numel(), static_cast<std::int64_t>(optim::quant_blocks(static_cast<std::size_t>(kSizes[u]))));
    }
    ref->release(u, false);
  }
  for (int step = 1; step <= 3; ++step) {
    nvme.begin_step();
    for (std::size_t u = 0; u < kSizes.size(); ++u) {
      S& a = nvme.acquire(u);
      S& h = host.acquire(u);
      S& b = ref->acquire(u);
      ASSERT_TRUE(same(a, b)) << "nvme: unit " << u << " differs at the start of step " << step;
      ASSERT_TRUE(same(h, b)) << "host: unit " << u << " differs at the start of step " << step;
      for (S* s : {&a, &h, &b}) update(*s, step, u);
      nvme.release(u, true);
      host.release(u, true);
      ref->release(u, true);
    }
    nvme.end_step();
  }
  EXPECT_GT(nvme.swapper().stats().bytes_read, 0u);
  std::uint64_t total = 0;
  for (std::size_t u = 0; u < kSizes.size(); ++u)
    total += packed_bytes(eight_bit ? layout_8bit(kSizes[u], u % 3 != 1)
                                    : layout_adafactor(kSizes[u], u % 3 != 1, u));
  EXPECT_EQ(ledger.current(Tier::nvme, Category::optimizer), total);
}

INSTANTIATE_TEST_SUITE_P(Layouts, NewStateRoundTrip, ::testing::Values(true, false),
                         [](const auto& i) { return i.param ? "adamw8bit" : "adafactor"; });

// One optimizer step's I/O over units of 1 Mi elements each (more units than buffers, so every
// unit is read and written once per step): the moments of AdamW8bit move a quarter of AdamW's
// bytes (2 B + 8 B per 2048-element block vs 8 B per parameter); with the fp32 master that is
// half of AdamW's bytes per parameter.
TEST(NvmeOptimizerBytes, EightBitMovesAQuarterOfAdamWsMomentBytes) {
  const std::int64_t n = 1 << 20;
  const int units = 4;
  auto bytes_per_step = [&](const train::StateLayout& l) {
    ScratchDir dir("bytes");
    MemoryLedger ledger;
    SwapperOptions o;
    o.dir = dir.str();
    o.buffer_count = 2;
    o.ledger = &ledger;
    NvmeStateStore nvme(o);
    Tensor init = Tensor::zeros(Shape{n}, DType::f32, TensorOptions{}.with(Tier::host));
    for (int u = 0; u < units; ++u) nvme.create(static_cast<std::size_t>(u), l, init);
    for (int step = 0; step < 2; ++step) {  // the second step is the steady state
      nvme.swapper().reset_stats();
      nvme.begin_step();
      for (int u = 0; u < units; ++u) {
        nvme.acquire(static_cast<std::size_t>(u));
        nvme.release(static_cast<std::size_t>(u), true);
      }
      nvme.end_step();
    }
    const SwapStats s = nvme.swapper().stats();
    return static_cast<double>(s.bytes_read + s.bytes_written) / (static_cast<double>(n) * units);
  };
  for (bool master : {false, true}) {
    const double adamw = bytes_per_step(test::adam_layout(n, master));
    const double q8 = bytes_per_step(layout_8bit(n, master));
    const double m = master ? 8.0 : 0.0;  // the master read and written
    std::printf("NVMe bytes per parameter per step%s: AdamW %.3f, AdamW8bit %.3f (moments %.3f vs "
                "%.3f: %.3f)\n",
                master ? " (with fp32 master)" : "", adamw, q8, q8 - m, adamw - m,
                (q8 - m) / (adamw - m));
    EXPECT_NEAR(adamw - m, 16.0, 0.01);  // m, v: 8 B read + 8 B written
    EXPECT_NEAR((q8 - m) / (adamw - m), 0.25, 0.002);
  }
}

}  // namespace test_optimizer_state_stores
}  // namespace
}  // namespace strata::offload
