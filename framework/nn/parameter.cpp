#include "framework/nn/parameter.hpp"

#include <algorithm>

#include "framework/core/rng.hpp"

namespace strata::nn {

const Tensor& value_of(const Parameter& p) {
  STRATA_CHECK(p.value.defined(), "nn", "parameter {} used before it was materialised", p.name);
  return p.value;
}

const Tensor& grad_of(const Parameter& p) {
  STRATA_CHECK(p.grad.defined(), "nn", "parameter {} has no gradient buffer", p.name);
  return p.grad;
}

Shape Placement::global_shape(const Shape& local) const {
  if (!split()) return local;
  Shape g = local;
  g[static_cast<std::size_t>(dim)] *= parts;
  return g;
}

void init_values(const Parameter& p, std::uint64_t seed, std::uint64_t offset, float* dst,
                 std::size_t n) {
  switch (p.init.kind) {
    case Init::Kind::normal: {
      // Each run of the part that is consecutive in the whole parameter draws the whole
      // parameter's numbers at its global indices.
      const auto lo = static_cast<std::int64_t>(offset), hi = lo + static_cast<std::int64_t>(n);
      p.placement.for_each_run(p.shape, [&](std::int64_t local, std::int64_t global, std::int64_t len) {
        const std::int64_t a = std::max(lo, local), b = std::min(hi, local + len);
        if (a < b)
          normal_fill(dst + (a - lo), static_cast<std::size_t>(b - a), seed, p.name,
                      static_cast<std::uint64_t>(global + (a - local)), 0.0f, p.init.std);
      });
      return;
    }
    case Init::Kind::zeros:
      std::fill_n(dst, n, 0.0f);
      return;
    case Init::Kind::ones:
      std::fill_n(dst, n, 1.0f);
      return;
  }
}

}  // namespace strata::nn
