// An optimizer's hyperparameters declared as data (docs/optimizers.md): its config type name, each
// parameter's name, kind, range, default (DeepSpeed's, or the reference implementation's) and
// meaning, the DeepSpeed parameters its DeepSpeed version takes beyond these, and a check for the
// rules between fields. framework/config reads, checks, prints and documents optimizer.params from
// these specs without knowing any optimizer; the optimizer object (optim/optimizers) makes its own
// typed hyperparameters from the checked values. Below both: this library knows neither.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace strata::optim {

enum class HKind {
  number,
  boolean,
  integer,
  pair,             // [a, b]
  optional_number,  // a number, or null = unset
};

// Where a number (each element of a pair, an integer) may lie.
struct HRange {
  double lo = 0, hi = INFINITY;
  bool lo_open = false, hi_open = false;
  static constexpr HRange non_negative() { return {0, INFINITY, false, false}; }
  static constexpr HRange positive() { return {0, INFINITY, true, false}; }
  static constexpr HRange unit_open() { return {0, 1, false, true}; }  // [0, 1)
  static constexpr HRange at_least(double lo) { return {lo, INFINITY, false, false}; }
  bool contains(double v) const {
    return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  }
  // "a number >= 0", "a number in [0, 1)", "an integer >= 1".
  std::string describe(HKind k) const;
};

using HPair = std::array<double, 2>;
using HValue = std::variant<double, bool, std::int64_t, HPair, std::optional<double>>;

// JSON text of a value: 0.001, true, [0.9, 0.999], null.
std::string value_text(const HValue& v);

struct HParam {
  std::string_view name;
  HKind kind = HKind::number;
  HValue default_value = 0.0;
  HRange range;
  std::string_view doc;    // one line: what it does (docs/config.md, strata config keys)
  std::string_view shape;  // how a message names the kind it takes ("" = from the kind)
};

// One optimizer type's values, every parameter of its spec (defaults filled in).
class HValues {
 public:
  HValues() = default;
  double number(std::string_view name) const;
  bool flag(std::string_view name) const;
  std::int64_t integer(std::string_view name) const;
  HPair pair(std::string_view name) const;
  std::optional<double> optional_number(std::string_view name) const;
  const HValue& at(std::string_view name) const;
  bool has(std::string_view name) const { return find(name) != nullptr; }
  // Sets a parameter the values hold (the kind must match): a UserError otherwise.
  void set(std::string_view name, HValue v);
  const std::vector<std::pair<std::string, HValue>>& items() const { return items_; }
  bool operator==(const HValues&) const = default;

 private:
  friend struct OptimizerSpec;
  const HValue* find(std::string_view name) const;
  std::vector<std::pair<std::string, HValue>> items_;
};

// What a spec's check says about the values (framework/config collects it with the config's
// other problems). Messages name the key by path(param): "optimizer.params.lr".
class HReport {
 public:
  virtual ~HReport() = default;
  virtual std::string path(std::string_view param) const = 0;
  // The parameter was given in the document (not null).
  virtual bool given(std::string_view param) const = 0;
  // No problem has been found with it so far.
  virtual bool ok(std::string_view param) const = 0;
  virtual void mistake(std::string_view param, std::string message) = 0;
  // A value asking for a DeepSpeed feature Strata does not implement: the value as JSON, what it
  // asks for, what to do.
  virtual void not_implemented(std::string_view param, std::string_view value, std::string what,
                               std::string fix) = 0;
};

struct OptimizerSpec {
  std::string_view name;       // optimizer.type as written ("AdamW"; matched in any letter case)
  std::string_view summary;    // "" or what it is, in the optimizer.type line of the docs
  std::vector<HParam> params;  // in the order messages list them
  // Parameters DeepSpeed's version takes beyond `params` (config/deepspeed_keys.cpp says what
  // each changes): a no-op value is noted, another is refused.
  std::vector<std::string_view> deepspeed_params;
  // The update of a unit needs only that unit (optimizers' Declaration::unit_steps): it may run
  // in backward (strata.optimizer_in_backward).
  bool unit_steps = false;
  // Rules between fields, and values DeepSpeed accepts but never applies.
  void (*check)(const HValues& v, HReport& r) = nullptr;
  // "" or why no scheduler may run with these values (the optimizer sets its own step size).
  std::string (*own_step_size)(const HValues& v) = nullptr;
  // Whether to_json prints the parameter with these values (nullptr: every one).
  bool (*printed)(std::string_view param, const HValues& v) = nullptr;

  const HParam* find(std::string_view param) const;
  HValues defaults() const;
};

// The registered optimizer types (framework/optim/registry.def), in the order messages list them.
std::span<const OptimizerSpec* const> optimizer_specs();
// The spec of a type name in any letter case, or nullptr.
const OptimizerSpec* find_optimizer_spec(std::string_view type);
// The spec of a registered type name (exact): a UserError otherwise.
const OptimizerSpec& optimizer_spec(std::string_view type);

}  // namespace strata::optim
