// Bytes of a ParamStore's gradient buffers for the tests that bound the device's gradient bytes
// with offloaded gradients (test_grad_offload.cpp, test_offload_staging.cpp): the largest unit's
// full buffer, unit 0's (open through all of backward: the tied head) and every unit's.
#pragma once

#include <algorithm>
#include <cstddef>

#include "framework/nn/param_store.hpp"

namespace strata::test_util {

struct GradSizes {
  double biggest = 0, first = 0, all = 0;
  explicit GradSizes(const nn::ParamStore& s) {
    const double e = static_cast<double>(dtype_size(s.options().grad_dtype));
    for (std::size_t u = 0; u < s.num_units(); ++u) {
      const double b = static_cast<double>(s.layout(u).padded) * e;
      biggest = std::max(biggest, b);
      all += b;
    }
    first = static_cast<double>(s.layout(0).padded) * e;
  }
  // `units` of the largest unit's buffers, and unit 0's.
  double window(int units) const { return units * biggest + first; }
};

}  // namespace strata::test_util
