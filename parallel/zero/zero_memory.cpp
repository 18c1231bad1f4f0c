#include "parallel/zero/zero_memory.hpp"

#include <fmt/format.h>

#include "framework/memory/size.hpp"

namespace strata::parallel {

ModelStateBytes zero_prediction(int stage, int n, double psi, double p, double g, double o) {
  const double N = n;
  ModelStateBytes b;
  b.params = (stage >= 3 ? psi / N : psi) * p;
  b.grads = (stage >= 2 ? psi / N : psi) * g;
  b.optimizer = (stage >= 1 ? psi / N : psi) * o;
  return b;
}

std::string describe(const ModelStateBytes& b) {
  auto f = [](double v) { return format_bytes(static_cast<std::uint64_t>(v)); };
  return fmt::format("params {}, grads {}, optimizer {}, total {}", f(b.params), f(b.grads),
                     f(b.optimizer), f(b.total()));
}

}  // namespace strata::parallel
