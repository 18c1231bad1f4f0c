#include "framework/optim/hparams/hparams.hpp"

#include <cctype>

#include <fmt/format.h>

#include "framework/core/error.hpp"

namespace strata::optim {

namespace {

std::string number_text(double v) {
  // JSON's spelling of a double (0.0, 1e-08, 0.001), as the config prints it.
  if (std::isfinite(v) && v == std::trunc(v) && std::fabs(v) < 1e15)
    return fmt::format("{:.1f}", v);
  return fmt::format("{}", v);
}

bool same_letters(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

const char* kind_word(const HValue& v) {
  switch (v.index()) {
    case 0:
      return "a number";
    case 1:
      return "true or false";
    case 2:
      return "an integer";
    case 3:
      return "a pair";
    default:
      return "a number or null";
  }
}

}  // namespace

std::string HRange::describe(HKind k) const {
  if (k == HKind::integer) {
    if (std::isinf(hi)) return fmt::format("an integer >= {}", static_cast<std::int64_t>(lo));
    return fmt::format("an integer from {} to {}", static_cast<std::int64_t>(lo),
                       static_cast<std::int64_t>(hi));
  }
  if (std::isinf(hi)) return fmt::format("a number {} {}", lo_open ? ">" : ">=", lo);
  return fmt::format("a number in {}{}, {}{}", lo_open ? "(" : "[", lo, hi, hi_open ? ")" : "]");
}

std::string value_text(const HValue& v) {
  switch (v.index()) {
    case 0:
      return number_text(std::get<double>(v));
    case 1:
      return std::get<bool>(v) ? "true" : "false";
    case 2:
      return fmt::format("{}", std::get<std::int64_t>(v));
    case 3: {
      const HPair& p = std::get<HPair>(v);
      return fmt::format("[{}, {}]", number_text(p[0]), number_text(p[1]));
    }
    default: {
      const auto& o = std::get<std::optional<double>>(v);
      return o ? number_text(*o) : "null";
    }
  }
}

const HValue* HValues::find(std::string_view name) const {
  for (const auto& [n, v] : items_)
    if (n == name) return &v;
  return nullptr;
}

const HValue& HValues::at(std::string_view name) const {
  const HValue* v = find(name);
  if (!v) fail("optim", "the optimizer's hyperparameters have no '{}'", name);
  return *v;
}

namespace {
template <typename T>
const T& get_as(const HValues& vs, std::string_view name) {
  const HValue& v = vs.at(name);
  if (!std::holds_alternative<T>(v))
    fail("optim", "hyperparameter '{}' is {}, read as another kind", name, kind_word(v));
  return std::get<T>(v);
}
}  // namespace

double HValues::number(std::string_view name) const {
  return get_as<double>(*this, name);
}
bool HValues::flag(std::string_view name) const {
  return get_as<bool>(*this, name);
}
std::int64_t HValues::integer(std::string_view name) const {
  return get_as<std::int64_t>(*this, name);
}
HPair HValues::pair(std::string_view name) const {
  return get_as<HPair>(*this, name);
}
std::optional<double> HValues::optional_number(std::string_view name) const {
  return get_as<std::optional<double>>(*this, name);
}

void HValues::set(std::string_view name, HValue v) {
  for (auto& [n, old] : items_) {
    if (n != name) continue;
    if (old.index() != v.index())
      user_fail("config", "optimizer.params.{} takes {}, not {}", name, kind_word(old),
                kind_word(v));
    old = std::move(v);
    return;
  }
  std::vector<std::string> names;
  for (const auto& [n, _] : items_) names.push_back(n);
  user_fail("config", "optimizer.params.{} is not a parameter of this optimizer; it takes: {}",
            name, fmt::join(names, ", "));
}

const HParam* OptimizerSpec::find(std::string_view param) const {
  for (const HParam& p : params)
    if (p.name == param) return &p;
  return nullptr;
}

HValues OptimizerSpec::defaults() const {
  HValues v;
  for (const HParam& p : params) v.items_.emplace_back(std::string(p.name), p.default_value);
  return v;
}

const OptimizerSpec* find_optimizer_spec(std::string_view type) {
  for (const OptimizerSpec* s : optimizer_specs())
    if (same_letters(s->name, type)) return s;
  return nullptr;
}

const OptimizerSpec& optimizer_spec(std::string_view type) {
  for (const OptimizerSpec* s : optimizer_specs())
    if (s->name == type) return *s;
  std::vector<std::string_view> names;
  for (const OptimizerSpec* s : optimizer_specs()) names.push_back(s->name);
  user_fail("config", "optimizer.type \"{}\" is not an optimizer Strata has; its types are {}",
            type, fmt::join(names, ", "));
}

}  // namespace strata::optim
