// The trust ratio's parameters Lamb and OneBitLamb share (DeepSpeed's FusedLamb and OnebitLamb
// names and defaults), and their rule.
#pragma once

#include <fmt/format.h>

#include "framework/optim/hparams/common.hpp"

namespace strata::optim::hparams {

constexpr std::string_view kLambDecay =
    "Adds weight_decay × p to the update whose norm the trust ratio takes; parameters with >= 2 "
    "dims only.";

inline HParam max_coeff() {
  return number("max_coeff", 10.0, HRange::non_negative(),
                "Upper bound of the trust ratio ||p|| / ||update|| (per parameter).");
}
inline HParam min_coeff() {
  return number("min_coeff", 0.01, HRange::non_negative(),
                "Lower bound of the trust ratio; <= max_coeff.");
}

inline void check_trust_ratio_bounds(const HValues& v, HReport& r) {
  if (v.number("min_coeff") > v.number("max_coeff"))
    r.mistake("min_coeff",
              fmt::format("{} {} is above max_coeff {}: the trust ratio is clamped to [min_coeff, "
                          "max_coeff]; make min_coeff <= max_coeff",
                          r.path("min_coeff"), v.number("min_coeff"), v.number("max_coeff")));
}

}  // namespace strata::optim::hparams
