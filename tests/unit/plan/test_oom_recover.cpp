// strata.memory.on_oom = "recover": a device cap lowered before step 3 so that the configured
// micro-batch no longer fits; the step is redone with the micro-batch split in two (accumulation
// doubled, same samples), the run finishes, and its losses and weights match a run that used the
// smaller micro-batch from the start: losses and gradient norms within the accumulation-equivalence
// test's 1e-6 relative, weights within 1e-5 of the largest weight (AdamW's normalised update
// carries the summation-order differences of the first steps' micro-batch 4 into the weights).
#include <gtest/gtest.h>

#include <cmath>

#include "framework/memory/out_of_memory.hpp"
#include "tests/unit/plan/plan_test_util.hpp"

namespace strata {
namespace {

// Deterministic token rows; its state is the number of rows consumed.
class Rows final : public nn::BatchSource {
 public:
  void next(nn::Batch& b) override {
    const auto n = b["tokens"].dim(0), T = b["tokens"].dim(1);
    auto* in = b["tokens"].data<std::int32_t>();
    auto* tgt = b["targets"].data<std::int32_t>();
    for (std::int64_t r = 0; r < n; ++r, ++pos_)
      for (std::int64_t i = 0; i < T; ++i) {
        const auto v = [&](std::int64_t j) {
          return static_cast<std::int32_t>((pos_ * 131 + j * (pos_ % 7 + 1)) % 64);
        };
        in[r * T + i] = v(i);
        tgt[r * T + i] = v(i + 1);
      }
  }
  data::SamplerState state() const override { return {pos_, 0}; }
  void set_state(const data::SamplerState& s) override { pos_ = s.position; }

 private:
  std::uint64_t pos_ = 0;
};

struct Trained {
  std::vector<double> losses, grad_norms;
  std::vector<std::vector<float>> weights;
  std::vector<parallel::MicroBatchChange> changes;
};

// Trains `steps` steps; before step `cap_at` (1-based) the device tier is capped at `cap`.
Trained train(const config::Config& cfg, int steps, int cap_at = 0, std::uint64_t cap = 0) {
  MemoryLedger ledger;
  nn::Gpt model(train::gpt_config(cfg));
  parallel::Training job(cfg, plan_test::one_rank(), model, parallel::TrainingExtras::on(&ledger));
  Rows data;
  Trained out;
  for (int s = 1; s <= steps; ++s) {
    if (s == cap_at) ledger.set_cap(Tier::device, cap);
    parallel::EngineStep es = job.step(data);
    out.losses.push_back(es.loss);
    out.grad_norms.push_back(es.result.grad_norm);
    for (auto& c : es.micro_batch_changes) out.changes.push_back(c);
  }
  for (std::size_t u = 0; u < job.store().num_units(); ++u) {
    const Tensor& v = job.store().values(u);
    const float* p = v.data<float>();
    out.weights.emplace_back(p, p + v.numel());
  }
  return out;
}

TEST(OomRecover, SplitsTheMicroBatchAndMatchesARunThatStartedWithIt) {
  const std::vector<std::string> base = {"strata.activation_dtype=f32", "train_micro_batch_size_per_gpu=4",
                                         "gradient_accumulation_steps=1", "gradient_clipping=1.0"};
  auto with = [&](std::vector<std::string> more) {
    auto s = base;
    s.insert(s.end(), more.begin(), more.end());
    return plan_test::gpt_config(s);
  };
  const config::Config recover = with({"strata.memory.on_oom=recover"});
  const config::Config small = with({"train_micro_batch_size_per_gpu=2", "gradient_accumulation_steps=2"});
  // A cap between the two micro-batches' needs (the planner's, checked against measurement by the
  // accuracy test).
  const auto need4 = parallel::plan::plan_memory(recover, parallel::plan::gpt_model()).peak(Tier::device);
  const auto need2 = parallel::plan::plan_memory(small, parallel::plan::gpt_model()).peak(Tier::device);
  ASSERT_LT(need2, need4);
  const std::uint64_t cap = (need2 + need4) / 2;

  // Without recovery the capped step fails.
  EXPECT_THROW(train(with({}), 4, 3, cap), OutOfMemory);

  const Trained got = train(recover, 5, 3, cap);
  ASSERT_EQ(got.changes.size(), 1u);
  EXPECT_EQ(got.changes[0].from, 4);
  EXPECT_EQ(got.changes[0].to, 2);
  EXPECT_EQ(got.changes[0].accumulation, 2);
  EXPECT_NE(got.changes[0].why.find("out of device memory"), std::string::npos) << got.changes[0].why;

  const Trained ref = train(small, 5);
  ASSERT_EQ(got.losses.size(), ref.losses.size());
  for (std::size_t s = 0; s < ref.losses.size(); ++s)
  {
    EXPECT_NEAR(got.losses[s], ref.losses[s], 1e-6 * std::abs(ref.losses[s])) << "step " << s + 1;
    EXPECT_NEAR(got.grad_norms[s], ref.grad_norms[s], 1e-6 * ref.grad_norms[s]) << "step " << s + 1;
  }
  ASSERT_EQ(got.weights.size(), ref.weights.size());
  double worst = 0, scale = 0;
  for (std::size_t u = 0; u < ref.weights.size(); ++u)
    for (std::size_t i = 0; i < ref.weights[u].size(); ++i) {
      worst = std::max(worst, std::abs(double(got.weights[u][i]) - ref.weights[u][i]));
      scale = std::max(scale, std::abs(double(ref.weights[u][i])));
    }
  EXPECT_LE(worst, 1e-5 * scale) << "largest weight difference " << worst;
}

TEST(OomRecover, StopsAtMicroBatchOne) {
  const config::Config cfg = plan_test::gpt_config(
      {"train_micro_batch_size_per_gpu=2", "strata.memory.on_oom=recover"});
  // Below what micro-batch 1 needs: recovery splits once, then gives up with the error.
  const config::Config one = plan_test::gpt_config({"train_micro_batch_size_per_gpu=1"});
  const auto need1 = parallel::plan::plan_memory(one, parallel::plan::gpt_model()).peak(Tier::device);
  MemoryLedger ledger;
  nn::Gpt model(train::gpt_config(cfg));
  parallel::Training job(cfg, plan_test::one_rank(), model, parallel::TrainingExtras::on(&ledger));
  Rows data;
  job.step(data);
  ledger.set_cap(Tier::device, need1 - 1024);
  EXPECT_THROW(job.step(data), OutOfMemory);
  EXPECT_EQ(job.engine().micro_batch(), 1);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// Recovery splits one rank's micro-batch; the ranks of a tensor- or pipeline-parallel group would
// have to split theirs together, which is not implemented: refused at start-up, naming the keys.
TEST(OomRecover, RefusedWithTensorOrPipelineParallelism) {
  for (const char* axis : {"strata.tensor_parallel_size=2", "strata.pipeline_parallel_size=2"}) {
    const config::Config cfg =
        plan_test::gpt_config({axis, "strata.memory.on_oom=recover"}, 1);
    MemoryLedger ledger;
    nn::Gpt model(train::gpt_config(cfg), parallel::tensor_shard(cfg, parallel::planning_world(2)));
    parallel::TrainingExtras extras = parallel::TrainingExtras::on(&ledger);
    extras.device = Device::meta();
    try {
      parallel::Training job(cfg, parallel::planning_world(2), model, std::move(extras));
      ADD_FAILURE() << axis << ": on_oom recover was accepted";
    } catch (const UserError& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find("strata.memory.on_oom \"recover\" with strata.tensor_parallel_size"),
                std::string::npos) << w;
      EXPECT_NE(w.find("set strata.memory.on_oom to \"fail\", or both sizes to 1"),
                std::string::npos) << w;
    }
  }
}

}  // namespace
}  // namespace strata
