// A step reads its gradient norm's and overflow check's sums from where the gradients are once
// (GradSums), however many units: with the shares noted in backward or taken by step() itself, with
// and without a loss scaler. The overflow check reads the same sums, including the replicated
// parameters a tensor-parallel rank does not count in its norm.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "framework/optim/optimizers/sgd.hpp"
#include "framework/train/trainer.hpp"
#include "tests/unit/train/onebit_fixture.hpp"

namespace strata::train {
namespace {
namespace test_grad_sums {  // file-local names, unique in a unity build

struct Job {
  onebit_test::Params model;  // W [6, 10], b [10] in unit 0; E [13, 4] in unit 1
  std::unique_ptr<nn::ParamStore> store;
  std::unique_ptr<Trainer> trainer;
  Job(Precision precision, ShardReductions red) {
    // Split W and E across two tensor-parallel parts (this process holds part 0); b stays replicated.
    model.owned[0]->placement = nn::Placement{0, 2, 0, 1};
    model.owned[2]->placement = nn::Placement{1, 2, 0, 1};
    const DType params = precision == Precision::fp16 ? DType::f16 : DType::f32;
    store = std::make_unique<nn::ParamStore>(
        model.units, nn::ParamStoreOptions{params, params, 1, {}, 1, 0});
    TrainerOptions o;
    o.precision = precision;
    o.optimizer = std::make_shared<optim::SGD>(optim::SGDHyper{.lr = 0.1});
    o.schedule.type = "constant";
    trainer = std::make_unique<Trainer>(*store, o, std::move(red));
  }
  // Gradient element i of parameter p: (p + 1) * 0.01 * (i % 5 - 2); returns the sum of squares
  // of the parameters `counted` selects, as the values stored in the gradients' dtype.
  double fill(const std::vector<bool>& counted) {
    double ss = 0;
    const std::vector<nn::Parameter*> ps = store->parameters();
    for (std::size_t p = 0; p < ps.size(); ++p) {
      const Tensor host = Tensor::zeros(ps[p]->shape, DType::f32);
      float* x = host.data<float>();
      for (std::int64_t i = 0; i < host.numel(); ++i)
        x[i] = static_cast<float>(p + 1) * 0.01f * static_cast<float>(i % 5 - 2);
      ps[p]->grad.copy_from(host);
      const Tensor back = ps[p]->grad.to(DType::f32, TensorOptions{});
      if (counted[p])
        for (std::int64_t i = 0; i < back.numel(); ++i)
          ss += static_cast<double>(back.data<float>()[i]) * back.data<float>()[i];
    }
    return ss;
  }
  void note_all() {
    for (std::size_t u = 0; u < store->num_units(); ++u)
      trainer->note_final_gradient(u, store->grad_shard(u));
  }
};

TEST(GradSums, OneHostReadPerStepWhetherNotedOrTaken) {
  for (const Precision pr : {Precision::f32, Precision::fp16}) {
    for (const bool noted : {false, true}) {
      Job j(pr, ShardReductions{});
      for (int step = 0; step < 3; ++step) {
        const double ss = j.fill({true, true, true});
        if (noted) j.note_all();
        const std::size_t before = j.trainer->grad_sum_reads();
        const StepResult r = j.trainer->step();
        EXPECT_EQ(j.trainer->grad_sum_reads(), before + 1) << precision_name(pr) << " noted " << noted;
        ASSERT_TRUE(r.applied);
        EXPECT_DOUBLE_EQ(r.grad_norm * r.loss_scale, std::sqrt(ss)) << precision_name(pr);
      }
    }
  }
}

TEST(GradSums, ReplicatedPartsAreCheckedForOverflowButNotCountedWhereAnotherRankCounts) {
  for (const bool noted : {false, true}) {
    ShardReductions red;
    red.count_replicated = false;  // a tensor-parallel rank other than 0
    Job j(Precision::fp16, red);
    // The norm: W's and E's parts only.
    const double ss = j.fill({true, false, true});
    if (noted) j.note_all();
    StepResult r = j.trainer->step();
    ASSERT_TRUE(r.applied);
    EXPECT_DOUBLE_EQ(r.grad_norm * r.loss_scale, std::sqrt(ss));
    // An infinity in b (replicated, not counted here) still skips the step, as a NaN in E does.
    for (const std::size_t bad : {std::size_t{1}, std::size_t{2}}) {
      j.fill({true, false, true});
      nn::Parameter& p = *j.store->parameters()[bad];
      Tensor host = p.grad.to(DType::f32, TensorOptions{});
      host.data<float>()[3] = bad == 1 ? std::numeric_limits<float>::infinity()
                                       : std::numeric_limits<float>::quiet_NaN();
      p.grad.copy_from(host);
      if (noted) j.note_all();
      const std::size_t before = j.trainer->grad_sum_reads();
      r = j.trainer->step();
      EXPECT_FALSE(r.applied) << "bad element in parameter " << bad << ", noted " << noted;
      EXPECT_EQ(j.trainer->grad_sum_reads(), before + 1);
    }
  }
}

}  // namespace test_grad_sums
}  // namespace
}  // namespace strata::train
