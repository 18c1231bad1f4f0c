// nn::Loss and nn::LossSums: a step's micro-batch losses, their sums left where they were
// computed, are read once (one read per device, however many losses) and add up bitwise to the
// sum of their values in order; the GPT gives its loss that way, equal to its forward's value.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "framework/core/meta_device.hpp"
#include "framework/nn/gpt.hpp"
#include "framework/nn/loss.hpp"
#include "framework/nn/param_store.hpp"

namespace strata::nn {
namespace {
namespace test_loss {  // file-local names, unique in a unity build

Loss device_loss(double sum, double divisor, const TensorOptions& on = {}) {
  Tensor s = Tensor::empty(Shape{1}, DType::f64, on);
  if (!s.device().is_meta()) s.data<double>()[0] = sum;
  return Loss(std::move(s), divisor);
}

TEST(LossSums, OneReadPerTotalAndTheValuesAddedInOrder) {
  LossSums sums;
  // 21 losses: more than the first buffer's 8 slots (it grows twice), sums and host values
  // interleaved, a divisor 0 (nothing counted: 0) among them.
  std::vector<Loss> losses;
  for (int i = 0; i < 21; ++i) {
    if (i % 5 == 3) losses.emplace_back(0.1 * i + 1.0 / 3);
    else losses.push_back(device_loss(1.0 / (i + 7) + i, i == 4 ? 0 : i % 3 + 1.5));
  }
  for (int step = 1; step <= 3; ++step) {
    double want = 0;
    for (const Loss& l : losses) {
      sums.add(l);
      want += l.value();
    }
    const double got = sums.total();
    EXPECT_EQ(got, want) << "step " << step;  // bitwise: the same additions in the same order
    EXPECT_EQ(sums.reads(), static_cast<std::size_t>(step));
  }
  EXPECT_EQ(losses[4].value(), 0.0);
  // Only host values: nothing to read.
  sums.add(Loss(2.5));
  sums.add(Loss(0.5));
  EXPECT_EQ(sums.total(), 3.0);
  EXPECT_EQ(sums.reads(), 3u);
  // Nothing added: 0, no read; forget() drops what was added.
  EXPECT_EQ(sums.total(), 0.0);
  sums.add(device_loss(4.0, 2.0));
  sums.forget();
  sums.add(device_loss(9.0, 3.0));
  EXPECT_EQ(sums.total(), 3.0);
  EXPECT_EQ(sums.reads(), 4u);
}

TEST(LossSums, APlansMetaSumsAreZerosAndChargedLikeTheRealOnes) {
  MemoryLedger ledger;
  const TensorOptions meta{Device::meta(), Tier::device, Category::workspace, &ledger};
  LossSums sums;
  sums.add(device_loss(0, 4.0, meta));
  sums.add(Loss(1.5));
  EXPECT_EQ(sums.total(), 1.5);
  EXPECT_EQ(sums.reads(), 1u);
  // The buffer of 8 slots stays charged to the device tier (as a real device's would).
  EXPECT_EQ(ledger.snapshot().tier_current[static_cast<std::size_t>(Tier::device)], 8u * 8u);
}

// begin_read starts the read (on a GPU: a copy queued to pinned host memory) and total()
// finishes it: the same bits, one read; nothing may be added in between; a read begun and then
// forgotten (a step that failed) leaves the next step as it would be.
TEST(LossSums, AReadBegunThenFinishedGivesTheSameTotal) {
  LossSums sums;
  for (int step = 1; step <= 2; ++step) {
    double want = 0;
    for (int i = 0; i < 11; ++i) {
      const Loss l = device_loss(1.0 / (i + 3) + step, i % 4 + 0.5);
      sums.add(l);
      want += l.value();
    }
    sums.begin_read();
    EXPECT_THROW(sums.add(device_loss(1.0, 1.0)), Error);
    EXPECT_THROW(sums.begin_read(), Error);
    EXPECT_EQ(sums.total(), want) << "step " << step;
    EXPECT_EQ(sums.reads(), static_cast<std::size_t>(step));
  }
  sums.add(device_loss(5.0, 1.0));
  sums.begin_read();
  sums.forget();
  sums.add(device_loss(6.0, 2.0));  // accepted again
  EXPECT_EQ(sums.total(), 3.0);
}

// A GPU job's plan (meta_cuda) is charged the host buffer a GPU's begun read keeps (as many
// slots as the device buffer), a CPU job's plan nothing on the host.
TEST(LossSums, AGpuPlansBegunReadIsChargedItsHostBuffer) {
  for (const bool gpu : {true, false}) {
    MemoryLedger ledger;
    const TensorOptions meta{gpu ? meta_cuda() : Device::meta(), Tier::device, Category::workspace,
                             &ledger};
    LossSums sums;
    sums.add(device_loss(0, 4.0, meta));
    sums.begin_read();
    EXPECT_EQ(sums.total(), 0.0);
    const auto snap = ledger.snapshot();
    EXPECT_EQ(snap.tier_current[static_cast<std::size_t>(Tier::device)], 8u * 8u);
    EXPECT_EQ(snap.tier_current[static_cast<std::size_t>(Tier::host)], gpu ? 8u * 8u : 0u)
        << (gpu ? "meta_cuda" : "meta");
  }
}

TEST(LossSums, ASumMustBeOneF64) {
  EXPECT_THROW(Loss(Tensor::zeros(Shape{2}, DType::f64), 1.0), Error);
  EXPECT_THROW(Loss(Tensor::zeros(Shape{1}, DType::f32), 1.0), Error);
  EXPECT_THROW(Loss(Tensor(), 1.0), Error);
}

TEST(GptLoss, ForwardLossIsASumWhereTheLogitsAreAndEqualsForward) {
  GptConfig c;
  c.n_layer = 1;
  c.n_head = 2;
  c.n_embd = 16;
  c.block_size = 8;
  c.vocab_size = 11;
  Gpt model(c);
  ParamStore store(model.units(), {});
  store.initialize(5);
  Batch batch(model.batch_fields(2));
  std::int32_t* tok = batch["tokens"].data<std::int32_t>();
  std::int32_t* tgt = batch["targets"].data<std::int32_t>();
  for (int i = 0; i < 16; ++i) {
    tok[i] = (i * 7 + 3) % 11;
    tgt[i] = i % 6 == 5 ? -1 : (i * 5 + 1) % 11;  // some ignored
  }
  Context ctx;
  ctx.grad_enabled = false;
  const Loss l = model.forward_loss(ctx, batch);
  ASSERT_FALSE(l.on_host());
  EXPECT_EQ(l.sum().device(), ctx.activations.device);
  EXPECT_EQ(l.divisor(), 14.0);  // 16 targets, 2 ignored (5 and 11)
  EXPECT_EQ(l.value(), model.forward(ctx, batch));
  EXPECT_TRUE(std::isfinite(l.value()));
  // A target outside the vocabulary is refused before any kernel, on every device.
  tgt[9] = 11;
  try {
    model.forward_loss(ctx, batch);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("target 11 at position 9 is outside the vocabulary [0, 11)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace test_loss
}  // namespace
}  // namespace strata::nn
