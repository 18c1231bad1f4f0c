// The parameters several optimizer types share, each with the same name, kind and range (their
// defaults and meanings may differ per type).
#pragma once

#include "framework/optim/hparams/hparams.hpp"

namespace strata::optim::hparams {

inline HParam lr(std::string_view doc = "Learning rate (the peak rate when a scheduler runs).") {
  return {"lr", HKind::number, 1e-3, HRange::non_negative(), doc, ""};
}
inline HParam betas(std::string_view doc, HPair d = {0.9, 0.999}) {
  return {"betas", HKind::pair, d, HRange::unit_open(), doc, ""};
}
// Adam-style denominator term: one number.
inline HParam eps(std::string_view doc = "Denominator term.") {
  return {"eps", HKind::number, 1e-8, HRange::positive(), doc, "one number"};
}
inline HParam weight_decay(double d, std::string_view doc) {
  return {"weight_decay", HKind::number, d, HRange::non_negative(), doc, ""};
}
inline HParam flag(std::string_view name, bool d, std::string_view doc) {
  return {name, HKind::boolean, d, {}, doc, ""};
}
inline HParam number(std::string_view name, double d, HRange r, std::string_view doc) {
  return {name, HKind::number, d, r, doc, ""};
}
inline HParam integer(std::string_view name, std::int64_t d, HRange r, std::string_view doc) {
  return {name, HKind::integer, d, r, doc, ""};
}

constexpr std::string_view kDecoupledDecay =
    "Decoupled weight decay, on parameters with >= 2 dims only.";
constexpr std::string_view kAdamBetas = "Moment decay rates [beta1, beta2], each in [0, 1).";

// A flag DeepSpeed's version accepts but never applies: `true` asks for what it does not compute.
inline void never_applied(const HValues& v, HReport& r, std::string_view param,
                          std::string_view what, std::string_view deepspeed_name) {
  if (r.given(param) && r.ok(param) && v.flag(param))
    r.not_implemented(param, "true",
                      std::string(what) + ", which DeepSpeed's " + std::string(deepspeed_name) +
                          " accepts but never applies",
                      "remove the key or set it to false (what DeepSpeed does)");
}

}  // namespace strata::optim::hparams
