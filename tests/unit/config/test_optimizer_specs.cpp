// The optimizer section read from each registered type's declaration (framework/optim/hparams):
// every type's block round-trips through to_json, with its defaults and with every parameter
// moved off its default; a parameter the type does not take is the one-line error naming the
// type and what it takes; each declaration is well formed (defaults in range, names unique,
// DeepSpeed's extra parameters known to config/deepspeed_keys.cpp).
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <set>
#include <variant>

#include "framework/config/config.hpp"
#include "framework/config/deepspeed_keys.hpp"
#include "tests/unit/config/expect_error.hpp"

namespace strata::config {
namespace {

std::string lowercase_name(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

json with_optimizer(json optimizer) {
  return {{"train_micro_batch_size_per_gpu", 4}, {"optimizer", std::move(optimizer)}};
}

// A value of p's kind inside its range and unlike its default (the rules between fields aside).
json other_value(const optim::HParam& p) {
  const optim::HRange& r = p.range;
  const auto inside = [&](double d) {
    for (double x : {d * 0.5, d + 0.25, r.lo + 0.125, r.lo + 1.0, (r.lo + r.hi) / 2})
      if (std::isfinite(x) && r.contains(x) && x != d) return x;
    return d;
  };
  switch (p.kind) {
    case optim::HKind::number:
      return inside(std::get<double>(p.default_value));
    case optim::HKind::boolean:
      return !std::get<bool>(p.default_value);
    case optim::HKind::integer:
      return std::get<std::int64_t>(p.default_value) + 7;
    case optim::HKind::pair: {
      const optim::HPair d = std::get<optim::HPair>(p.default_value);
      return {inside(d[0]), inside(d[1])};
    }
    case optim::HKind::optional_number:
      return inside(0.5);
  }
  return nullptr;
}

TEST(OptimizerSpecs, EveryTypeRoundTripsThroughToJson) {
  ASSERT_GE(optim::optimizer_specs().size(), 10u);
  for (const optim::OptimizerSpec* spec : optim::optimizer_specs()) {
    SCOPED_TRACE(std::string(spec->name));
    const Config d = parse_config(with_optimizer({{"type", spec->name}}));
    EXPECT_EQ(d.optimizer.type, spec->name);
    EXPECT_EQ(d.optimizer.params, spec->defaults());
    const json once = to_json(d);
    EXPECT_EQ(parse_config(once).optimizer.params, d.optimizer.params);
    EXPECT_EQ(to_json(parse_config(once)), once);

    // Every parameter off its default at once, less those a rule between fields then refuses
    // (Adafactor's warmup_init without relative_step) or that take one value only (1-bit's
    // bias_correction): those go back to their defaults until the block is valid.
    json params = json::object();
    for (const optim::HParam& p : spec->params) params[std::string(p.name)] = other_value(p);
    Config c;
    for (std::size_t tries = 0; tries <= spec->params.size(); ++tries) {
      Problems problems;
      c = check_config(with_optimizer({{"type", spec->name}, {"params", params}}), problems);
      if (problems.empty()) break;
      for (const Problem& pr : problems.list()) {
        ASSERT_TRUE(pr.key.starts_with("optimizer.params.")) << pr.text;
        params.erase(pr.key.substr(std::string_view("optimizer.params.").size()));
      }
    }
    std::size_t moved = 0;
    for (const optim::HParam& p : spec->params)
      moved += c.optimizer.params.at(p.name) != p.default_value;
    EXPECT_GE(moved + 3, spec->params.size()) << "most parameters off their defaults";
    const json j = to_json(c);
    EXPECT_EQ(parse_config(j).optimizer.params, c.optimizer.params) << j.dump();
    EXPECT_EQ(to_json(parse_config(j)), j);
  }
}

TEST(OptimizerSpecs, AParameterOfNoTypeNamesTheTypeAndWhatItTakes) {
  for (const optim::OptimizerSpec* spec : optim::optimizer_specs()) {
    std::string takes;
    for (const optim::HParam& p : spec->params)
      takes += (takes.empty() ? "" : ", ") + std::string(p.name);
    EXPECT_TRUE(testing::fails_with(
        [&] {
          parse_config(with_optimizer({{"type", spec->name}, {"params", {{"qqqq", 1}}}}));
        },
        {fmt::format("unknown key 'optimizer.params.qqqq': not a parameter of {}; {} takes: {}",
                     spec->name, spec->name, takes)}))
        << spec->name;
  }
}

TEST(OptimizerSpecs, DeclarationsAreWellFormed) {
  std::set<std::string> types;
  for (const optim::OptimizerSpec* spec : optim::optimizer_specs()) {
    SCOPED_TRACE(std::string(spec->name));
    EXPECT_TRUE(types.insert(lowercase_name(spec->name)).second) << "two types of one name";
    EXPECT_EQ(optim::find_optimizer_spec(lowercase_name(spec->name)), spec);
    std::set<std::string_view> names;
    for (const optim::HParam& p : spec->params) {
      EXPECT_TRUE(names.insert(p.name).second) << "duplicate " << p.name;
      EXPECT_FALSE(p.doc.empty()) << p.name;
      std::visit(
          [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, double>) {
              EXPECT_TRUE(p.range.contains(v)) << p.name;
            }
            if constexpr (std::is_same_v<T, optim::HPair>) {
              EXPECT_TRUE(p.range.contains(v[0]) && p.range.contains(v[1])) << p.name;
            }
            if constexpr (std::is_same_v<T, std::int64_t>) {
              EXPECT_TRUE(p.range.contains(static_cast<double>(v))) << p.name;
            }
          },
          p.default_value);
    }
    EXPECT_NE(spec->find("lr"), nullptr) << "the schedule scales optimizer.params.lr";
    for (std::string_view d : spec->deepspeed_params) {
      EXPECT_EQ(spec->find(d), nullptr) << d << " is Strata's own parameter too";
      EXPECT_NE(find_optimizer_param(d), nullptr) << d << " is not in config/deepspeed_keys.cpp";
    }
  }
}

}  // namespace
}  // namespace strata::config
