// optimizer.type "AdamW8bit" and "Adafactor": their params parse (transformers' Adafactor names
// and defaults), round-trip through to_json, reach the Trainer's options, and every misuse is a
// one-line error naming the key.
#include <gtest/gtest.h>

#include "framework/config/config.hpp"
#include "framework/train/from_config.hpp"
#include "tests/unit/config/expect_error.hpp"

namespace strata::config {
namespace {

json with_optimizer(json optimizer) {
  return {{"train_micro_batch_size_per_gpu", 4}, {"optimizer", std::move(optimizer)}};
}

TEST(OptimizerConfig, AdamW8bitTakesAdamWsParams) {
  const Config c = parse_config(with_optimizer(
      {{"type", "adamw8bit"}, {"params", {{"lr", 2e-3}, {"betas", {0.9, 0.95}}, {"eps", 1e-6}}}}));
  EXPECT_EQ(c.optimizer.type, OptimizerType::adamw8bit);
  EXPECT_EQ(c.optimizer.weight_decay, 0.01);  // bitsandbytes' AdamW8bit default, as AdamW
  const train::TrainerOptions o = train::trainer_options(c);
  EXPECT_EQ(o.optimizer, train::OptimizerKind::adamw8bit);
  EXPECT_EQ(o.adamw.lr, 2e-3);
  EXPECT_EQ(o.adamw.beta2, 0.95);
  EXPECT_EQ(o.adamw.eps, 1e-6);
  EXPECT_EQ(to_json(c)["optimizer"]["type"], "AdamW8bit");
  EXPECT_EQ(to_json(parse_config(to_json(c))), to_json(c));
}

// DeepSpeed's bias_correction (Adam, AdamW, AdamW8bit): parsed, round-tripped, and in the
// trainer's AdamW hyperparameters (the kernels' scalars, tests/unit/optim/test_adamw.cpp).
TEST(OptimizerConfig, BiasCorrectionReachesTheTrainer) {
  for (const char* type : {"Adam", "AdamW", "AdamW8bit"}) {
    const Config on = parse_config(with_optimizer({{"type", type}}));
    EXPECT_TRUE(on.optimizer.bias_correction) << type;
    EXPECT_TRUE(train::trainer_options(on).adamw.bias_correction) << type;
    const Config off =
        parse_config(with_optimizer({{"type", type}, {"params", {{"bias_correction", false}}}}));
    EXPECT_FALSE(off.optimizer.bias_correction) << type;
    EXPECT_FALSE(train::trainer_options(off).adamw.bias_correction) << type;
    EXPECT_EQ(to_json(off)["optimizer"]["params"]["bias_correction"], false) << type;
    EXPECT_EQ(to_json(parse_config(to_json(off))), to_json(off)) << type;
  }
}

TEST(OptimizerConfig, AdafactorDefaultsAreTransformers) {
  const Config c = parse_config(with_optimizer({{"type", "Adafactor"}}));
  const Optimizer& o = c.optimizer;
  EXPECT_EQ(o.type, OptimizerType::adafactor);
  EXPECT_EQ(o.adafactor_eps[0], 1e-30);
  EXPECT_EQ(o.adafactor_eps[1], 1e-3);
  EXPECT_EQ(o.clip_threshold, 1.0);
  EXPECT_EQ(o.decay_rate, -0.8);
  EXPECT_FALSE(o.beta1.has_value());
  EXPECT_EQ(o.weight_decay, 0.0);
  EXPECT_TRUE(o.scale_parameter);
  EXPECT_TRUE(o.relative_step);
  EXPECT_FALSE(o.warmup_init);
  const json j = to_json(c);
  EXPECT_FALSE(j["optimizer"]["params"].contains("lr")) << "relative_step: lr is not a setting";
  EXPECT_TRUE(j["optimizer"]["params"]["beta1"].is_null());
  EXPECT_EQ(to_json(parse_config(j)), j);
  const train::TrainerOptions t = train::trainer_options(c);
  EXPECT_EQ(t.optimizer, train::OptimizerKind::adafactor);
  EXPECT_FALSE(t.adafactor.has_beta1());
  EXPECT_TRUE(t.adafactor.relative_step);
}

TEST(OptimizerConfig, AdafactorParamsReachTheTrainer) {
  const Config c = parse_config(with_optimizer(
      {{"type", "Adafactor"},
       {"params",
        {{"lr", 1e-2}, {"relative_step", false}, {"scale_parameter", false}, {"beta1", 0.9},
         {"weight_decay", 0.1}, {"eps", {1e-29, 1e-2}}, {"clip_threshold", 0.5},
         {"decay_rate", -0.5}}}}));
  const train::TrainerOptions t = train::trainer_options(c);
  EXPECT_EQ(t.adafactor.lr, 1e-2);
  EXPECT_FALSE(t.adafactor.relative_step);
  EXPECT_FALSE(t.adafactor.scale_parameter);
  EXPECT_EQ(t.adafactor.beta1, 0.9);
  EXPECT_EQ(t.adafactor.weight_decay, 0.1);
  EXPECT_EQ(t.adafactor.eps1, 1e-29);
  EXPECT_EQ(t.adafactor.eps2, 1e-2);
  EXPECT_EQ(t.adafactor.clip_threshold, 0.5);
  EXPECT_EQ(t.adafactor.decay_rate, -0.5);
  EXPECT_EQ(to_json(parse_config(to_json(c))), to_json(c));
  // With a schedule (relative_step off).
  json doc = with_optimizer({{"type", "Adafactor"}, {"params", {{"lr", 1e-2}, {"relative_step", false}}}});
  doc["scheduler"] = {{"type", "WarmupLR"}, {"params", {{"warmup_num_steps", 10}}}};
  EXPECT_NO_THROW(parse_config(doc));
}

struct Bad {
  const char* name;
  json doc;
  std::vector<std::string> fragments;
};

TEST(OptimizerConfig, MisuseIsAOneLineError) {
  const Bad bad[] = {
      {"lr with relative_step", with_optimizer({{"type", "Adafactor"}, {"params", {{"lr", 1e-3}}}}),
       {"optimizer.params.lr is given but Adafactor's relative_step is true",
        "set optimizer.params.relative_step to false"}},
      {"warmup_init without relative_step",
       with_optimizer({{"type", "Adafactor"},
                       {"params", {{"relative_step", false}, {"warmup_init", true}}}}),
       {"optimizer.params.warmup_init is true but relative_step is false"}},
      {"scalar eps", with_optimizer({{"type", "Adafactor"}, {"params", {{"eps", 1e-3}}}}),
       {"optimizer.params.eps is 0.001; Adafactor takes a pair [eps1, eps2]"}},
      {"pair eps for AdamW8bit",
       with_optimizer({{"type", "AdamW8bit"}, {"params", {{"eps", {1e-30, 1e-3}}}}}),
       {"optimizer.params.eps is [1e-30,0.001]; AdamW8bit takes one number"}},
      {"betas for Adafactor", with_optimizer({{"type", "Adafactor"}, {"params", {{"betas", {0.9, 0.99}}}}}),
       {"optimizer.params.betas is not a parameter of Adafactor", "beta1"}},
      {"momentum for AdamW8bit", with_optimizer({{"type", "AdamW8bit"}, {"params", {{"momentum", 0.9}}}}),
       {"optimizer.params.momentum is not a parameter of AdamW8bit"}},
      {"beta1 out of range", with_optimizer({{"type", "Adafactor"}, {"params", {{"beta1", 1.0}}}}),
       {"optimizer.params.beta1 is 1.0; allowed: a number in [0, 1)"}},
      {"decay_rate out of range",
       with_optimizer({{"type", "Adafactor"}, {"params", {{"decay_rate", 0.5}}}}),
       {"optimizer.params.decay_rate is 0.5; allowed: a number in [-1, 0)"}},
      {"clip_threshold zero",
       with_optimizer({{"type", "Adafactor"}, {"params", {{"clip_threshold", 0}}}}),
       {"optimizer.params.clip_threshold is 0"}},
  };
  for (const Bad& b : bad)
    EXPECT_TRUE(testing::fails_with([&] { parse_config(b.doc); }, b.fragments)) << b.name;
  json doc = with_optimizer({{"type", "Adafactor"}});
  doc["scheduler"] = {{"type", "WarmupCosineLR"}, {"params", {{"total_num_steps", 100}}}};
  EXPECT_TRUE(testing::fails_with([&] { parse_config(doc); },
                                  {"scheduler.type is WarmupCosineLR but Adafactor's relative_step is "
                                   "true", "remove the scheduler"}));
}

}  // namespace
}  // namespace strata::config
