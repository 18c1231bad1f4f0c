// Reductions over shards are declared (optim::Declaration::shard_sums): the Trainer hands the
// engine's ShardReductions::sum_vector to an optimizer that declares it, and to one that does not a
// sum_vector that fails naming the missing declaration — so a new optimizer that sums over shards
// without saying so fails at its first step, on one shard as on many.
#include <gtest/gtest.h>

#include <memory>
#include <span>
#include <string>

#include "framework/optim/optimizers/optimizer.hpp"
#include "framework/train/trainer.hpp"
#include "tests/unit/train/onebit_fixture.hpp"

namespace strata::train {
namespace {
namespace test_declared_reductions {  // file-local names, unique in a unity build

// An optimizer whose step only sums a vector over the shards (and changes no parameter).
class Summing final : public optim::Optimizer {
 public:
  explicit Summing(bool declared) : Optimizer(decl(declared)) {}
  double lr() const override { return 0.1; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<Summing>(*this); }
  void to_config(config::Optimizer&) const override {}
  void bind(const nn::ParamStore&, int) override {}
  double step(optim::StepContext& ctx, const optim::StepArgs& a) override {
    double v[2] = {1.0, 2.0};
    ctx.red.sum_vector(std::span<double>(v, 2));
    summed = v[0] + v[1];
    return a.lr;
  }
  double summed = 0;

 private:
  static optim::Declaration decl(bool declared) {
    optim::Declaration d;
    d.name = declared ? "Declaring" : "Forgetful";
    d.checkpoint_name = "summing";
    d.shard_sums = declared;
    return d;
  }
};

TEST(DeclaredReductions, SumsOverShardsReachOnlyAnOptimizerThatDeclaresThem) {
  for (const bool declared : {true, false}) {
    onebit_test::Params model;
    nn::ParamStore store(model.units, nn::ParamStoreOptions{DType::f32, DType::f32, 1, {}});
    TrainerOptions o;
    o.optimizer = std::make_shared<Summing>(declared);
    ShardReductions red;
    int calls = 0;
    red.sum_vector = [&calls](std::span<double> v) {  // the engine's: two shards holding the same
      ++calls;
      for (double& x : v) x *= 2;
    };
    Trainer t(store, o, red);
    if (declared) {
      t.step();
      EXPECT_EQ(calls, 1);
      EXPECT_EQ(dynamic_cast<const Summing&>(t.optimizer()).summed, 6.0);
    } else {
      try {
        t.step();
        FAIL() << "a sum over shards without the declaration did not fail";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("Forgetful sums over shards"), std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("shard_sums"), std::string::npos) << e.what();
      }
      EXPECT_EQ(calls, 0);
    }
  }
}

}  // namespace test_declared_reductions
}  // namespace
}  // namespace strata::train
