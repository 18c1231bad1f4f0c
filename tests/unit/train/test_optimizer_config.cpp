// optimizer.type "AdamW8bit", "Adafactor", "Lion" and "Lion8bit": their params parse
// (transformers' Adafactor names and defaults, DeepSpeed's Lion's), round-trip through to_json,
// reach the Trainer's options, and every misuse is a one-line error naming the key.
#include <gtest/gtest.h>

#include "framework/config/config.hpp"
#include "framework/optim/optimizers/adafactor.hpp"
#include "framework/optim/optimizers/adamw8bit.hpp"
#include "framework/optim/optimizers/lion.hpp"
#include "framework/optim/optimizers/lion8bit.hpp"
#include "framework/optim/optimizers/registry.hpp"
#include "framework/train/from_config.hpp"
#include "tests/unit/config/expect_error.hpp"

namespace strata::config {
namespace {

// The AdamW-family hyperparameters of AdamW (and Adam) or AdamW8bit, and Adafactor's.
const optim::AdamWHyper& adamw_hyper(const train::TrainerOptions& o) {
  if (const auto* q = dynamic_cast<const optim::AdamW8bit*>(o.optimizer.get())) return q->hyper();
  return dynamic_cast<const optim::AdamW&>(*o.optimizer).hyper();
}
const optim::AdafactorHyper& adafactor_hyper(const train::TrainerOptions& o) {
  return dynamic_cast<const optim::Adafactor&>(*o.optimizer).hyper();
}

json with_optimizer(json optimizer) {
  return {{"train_micro_batch_size_per_gpu", 4}, {"optimizer", std::move(optimizer)}};
}

TEST(OptimizerConfig, AdamW8bitTakesAdamWsParams) {
  const Config c = parse_config(with_optimizer(
      {{"type", "adamw8bit"}, {"params", {{"lr", 2e-3}, {"betas", {0.9, 0.95}}, {"eps", 1e-6}}}}));
  EXPECT_EQ(c.optimizer.type, "AdamW8bit");
  EXPECT_EQ(c.optimizer.params.number("weight_decay"), 0.01);  // bitsandbytes' AdamW8bit default, as AdamW
  const train::TrainerOptions o = train::trainer_options(c);
  EXPECT_EQ(o.optimizer->name(), "AdamW8bit");
  const optim::AdamWHyper& h = dynamic_cast<const optim::AdamW8bit&>(*o.optimizer).hyper();
  EXPECT_EQ(h.lr, 2e-3);
  EXPECT_EQ(h.beta2, 0.95);
  EXPECT_EQ(h.eps, 1e-6);
  EXPECT_EQ(to_json(c)["optimizer"]["type"], "AdamW8bit");
  EXPECT_EQ(to_json(parse_config(to_json(c))), to_json(c));
}

// DeepSpeed's bias_correction (Adam, AdamW, AdamW8bit): parsed, round-tripped, and in the
// trainer's AdamW hyperparameters (the kernels' scalars, tests/unit/optim/test_adamw.cpp).
TEST(OptimizerConfig, BiasCorrectionReachesTheTrainer) {
  for (const char* type : {"Adam", "AdamW", "AdamW8bit"}) {
    const Config on = parse_config(with_optimizer({{"type", type}}));
    EXPECT_TRUE(on.optimizer.params.flag("bias_correction")) << type;
    EXPECT_TRUE(adamw_hyper(train::trainer_options(on)).bias_correction) << type;
    const Config off =
        parse_config(with_optimizer({{"type", type}, {"params", {{"bias_correction", false}}}}));
    EXPECT_FALSE(off.optimizer.params.flag("bias_correction")) << type;
    EXPECT_FALSE(adamw_hyper(train::trainer_options(off)).bias_correction) << type;
    EXPECT_EQ(to_json(off)["optimizer"]["params"]["bias_correction"], false) << type;
    EXPECT_EQ(to_json(parse_config(to_json(off))), to_json(off)) << type;
  }
}

TEST(OptimizerConfig, AdafactorDefaultsAreTransformers) {
  const Config c = parse_config(with_optimizer({{"type", "Adafactor"}}));
  const Optimizer& o = c.optimizer;
  EXPECT_EQ(o.type, "Adafactor");
  EXPECT_EQ(o.params.pair("eps")[0], 1e-30);
  EXPECT_EQ(o.params.pair("eps")[1], 1e-3);
  EXPECT_EQ(o.params.number("clip_threshold"), 1.0);
  EXPECT_EQ(o.params.number("decay_rate"), -0.8);
  EXPECT_FALSE(o.params.optional_number("beta1").has_value());
  EXPECT_EQ(o.params.number("weight_decay"), 0.0);
  EXPECT_TRUE(o.params.flag("scale_parameter"));
  EXPECT_TRUE(o.params.flag("relative_step"));
  EXPECT_FALSE(o.params.flag("warmup_init"));
  const json j = to_json(c);
  EXPECT_FALSE(j["optimizer"]["params"].contains("lr")) << "relative_step: lr is not a setting";
  EXPECT_TRUE(j["optimizer"]["params"]["beta1"].is_null());
  EXPECT_EQ(to_json(parse_config(j)), j);
  const train::TrainerOptions t = train::trainer_options(c);
  EXPECT_EQ(t.optimizer->name(), "Adafactor");
  EXPECT_FALSE(adafactor_hyper(t).has_beta1());
  EXPECT_TRUE(adafactor_hyper(t).relative_step);
}

TEST(OptimizerConfig, AdafactorParamsReachTheTrainer) {
  const Config c = parse_config(with_optimizer(
      {{"type", "Adafactor"},
       {"params",
        {{"lr", 1e-2}, {"relative_step", false}, {"scale_parameter", false}, {"beta1", 0.9},
         {"weight_decay", 0.1}, {"eps", {1e-29, 1e-2}}, {"clip_threshold", 0.5},
         {"decay_rate", -0.5}}}}));
  const optim::AdafactorHyper a = adafactor_hyper(train::trainer_options(c));
  EXPECT_EQ(a.lr, 1e-2);
  EXPECT_FALSE(a.relative_step);
  EXPECT_FALSE(a.scale_parameter);
  EXPECT_EQ(a.beta1, 0.9);
  EXPECT_EQ(a.weight_decay, 0.1);
  EXPECT_EQ(a.eps1, 1e-29);
  EXPECT_EQ(a.eps2, 1e-2);
  EXPECT_EQ(a.clip_threshold, 0.5);
  EXPECT_EQ(a.decay_rate, -0.5);
  EXPECT_EQ(to_json(parse_config(to_json(c))), to_json(c));
  // With a schedule (relative_step off).
  json doc = with_optimizer({{"type", "Adafactor"}, {"params", {{"lr", 1e-2}, {"relative_step", false}}}});
  doc["scheduler"] = {{"type", "WarmupLR"}, {"params", {{"warmup_num_steps", 10}}}};
  EXPECT_NO_THROW(parse_config(doc));
}

// DeepSpeed's Lion block: its three params parse, DeepSpeed's defaults (lr 1e-3, betas (0.9,
// 0.999), weight decay 0), round-trip through to_json, and reach the optimizer the registry makes
// (Lion8bit: the same params, its own object).
TEST(OptimizerConfig, LionTakesDeepSpeedsParams) {
  for (const char* type : {"Lion", "lion8bit"}) {
    const Config d = parse_config(with_optimizer({{"type", type}}));
    EXPECT_EQ(d.optimizer.lr(), 1e-3) << type;
    EXPECT_EQ(d.optimizer.params.number("weight_decay"), 0.0) << type;
    const Config c = parse_config(with_optimizer(
        {{"type", type}, {"params", {{"lr", 3e-4}, {"betas", {0.95, 0.98}}, {"weight_decay", 0.1}}}}));
    const train::TrainerOptions o = train::trainer_options(c);
    const bool eight = std::string(type) == "lion8bit";
    EXPECT_EQ(c.optimizer.type, eight ? "Lion8bit" : "Lion");
    EXPECT_EQ(o.optimizer->name(), eight ? "Lion8bit" : "Lion");
    const optim::LionHyper& h = eight ? dynamic_cast<const optim::Lion8bit&>(*o.optimizer).hyper()
                                      : dynamic_cast<const optim::Lion&>(*o.optimizer).hyper();
    EXPECT_EQ(h.lr, 3e-4);
    EXPECT_EQ(h.beta1, 0.95);
    EXPECT_EQ(h.beta2, 0.98);
    EXPECT_EQ(h.weight_decay, 0.1);
    const json j = to_json(c);
    EXPECT_EQ(j["optimizer"]["type"], eight ? "Lion8bit" : "Lion");
    EXPECT_FALSE(j["optimizer"]["params"].contains("eps")) << "Lion has no eps";
    EXPECT_EQ(to_json(parse_config(j)), j);
    // The optimizer's own config block makes the same optimizer.
    config::Optimizer back;
    o.optimizer->to_config(back);
    EXPECT_EQ(back.type, c.optimizer.type);
    EXPECT_EQ(back.params.pair("betas"), c.optimizer.params.pair("betas"));
  }
}

// The two lists agree: every declared type (optim/hparams/registry.cpp) has an object
// (optim/optimizers/registry.cpp) and every object a declaration; the object made from a type's
// defaults writes back the same values (its from_config and to_config read and write the
// declared names), and its Declaration's unit_steps is the one the config checks in-backward
// updates with.
TEST(OptimizerConfig, EveryDeclaredTypeHasItsObject) {
  std::size_t objects = 0;
  for (const optim::OptimizerEntry& e : optim::registered_optimizers()) {
    EXPECT_NE(optim::find_optimizer_spec(e.type), nullptr) << e.type << " has no declaration";
    ++objects;
  }
  EXPECT_EQ(objects, optim::optimizer_specs().size());
  for (const optim::OptimizerSpec* spec : optim::optimizer_specs()) {
    SCOPED_TRACE(std::string(spec->name));
    const Config c = parse_config(with_optimizer({{"type", spec->name}}));
    const auto made = optim::make_optimizer(c.optimizer);
    EXPECT_EQ(made->declaration().unit_steps, spec->unit_steps);
    Optimizer back;
    made->to_config(back);
    // Adam is the AdamW object (its adam_w_mode is the only value it takes): written as AdamW.
    if (spec->name == "Adam") {
      EXPECT_EQ(back.type, "AdamW");
      for (const auto& [name, value] : back.params.items())
        EXPECT_EQ(value, c.optimizer.params.at(name)) << name;
      continue;
    }
    EXPECT_EQ(back.type, spec->name);
    EXPECT_EQ(back.params, c.optimizer.params);
  }
}

// optimizer_names reads each registered optimizer's declaration through an object it makes: the
// object must outlive the reads (it once did not: a heap-use-after-free that ThreadSanitizer
// reported in tensor_dist_np2; under --sanitize thread or address this test reports it too).
TEST(OptimizerConfig, OptimizerNamesListsWhatTheFilterKeeps) {
  const std::string all = optim::optimizer_names([](const optim::Declaration&) { return true; }, "or");
  for (const optim::OptimizerEntry& e : optim::registered_optimizers()) {
    const auto made = e.make(Optimizer(e.type));
    EXPECT_NE(all.find(made->declaration().name), std::string::npos)
        << made->declaration().name << " missing from '" << all << "'";
  }
  EXPECT_NE(all.find(" or "), std::string::npos) << all;
  EXPECT_EQ(optim::optimizer_names([](const optim::Declaration&) { return false; }), "");
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
      {"eps for Lion", with_optimizer({{"type", "Lion"}, {"params", {{"eps", 1e-8}}}}),
       {"optimizer.params.eps is not a parameter of Lion", "lr, betas, weight_decay"}},
      {"momentum for Lion8bit", with_optimizer({{"type", "Lion8bit"}, {"params", {{"momentum", 0.9}}}}),
       {"optimizer.params.momentum is not a parameter of Lion8bit"}},
      {"Lion beta out of range", with_optimizer({{"type", "Lion"}, {"params", {{"betas", {0.9, 1.0}}}}}),
       {"optimizer.params.betas"}},
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
