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

void init_values(const Parameter& p, std::uint64_t seed, std::uint64_t offset, float* dst,
                 std::size_t n) {
  switch (p.init.kind) {
    case Init::Kind::normal:
      normal_fill(dst, n, seed, p.name, offset, 0.0f, p.init.std);
      return;
    case Init::Kind::zeros:
      std::fill_n(dst, n, 0.0f);
      return;
    case Init::Kind::ones:
      std::fill_n(dst, n, 1.0f);
      return;
  }
}

}  // namespace strata::nn
