#include "parallel/zero/zero_memory.hpp"

#include <fmt/format.h>

#include "framework/memory/size.hpp"
#include "framework/optim/quantize.hpp"

namespace strata::parallel {

ModelStateBytes zero_prediction(int stage, int n, double psi, double p, double g, double o,
                                double o_replicated) {
  const double N = n;
  ModelStateBytes b;
  b.params = (stage >= 3 ? psi / N : psi) * p;
  b.grads = (stage >= 2 ? psi / N : psi) * g;
  b.optimizer = (stage >= 1 ? psi / N : psi) * o + o_replicated;
  return b;
}

OptimizerStateBytes optimizer_state_bytes(const train::TrainerOptions& o, bool master,
                                          const std::vector<Shape>& shapes, int ranks) {
  OptimizerStateBytes b;
  b.per_element = master ? 4.0 : 0.0;
  switch (o.optimizer) {
    case train::OptimizerKind::adamw:
    case train::OptimizerKind::lamb: b.per_element += 8.0; break;
    case train::OptimizerKind::onebit_adam:  // + worker and server errors: (1 + 1/N) × padded
      b.per_element += 8.0;
      for (const Shape& s : shapes)
        b.replicated += 4.0 * static_cast<double>(optim::onebit_error_size(
                                  static_cast<std::size_t>(s.numel()), ranks));
      break;
    case train::OptimizerKind::onebit_lamb: {
      // m, v, v_fresh; 3 scalars per parameter; the errors of one fused tensor of all of them.
      b.per_element += 12.0;
      std::size_t total = 0;
      for (const Shape& s : shapes) total += static_cast<std::size_t>(s.numel());
      b.replicated += 4.0 * static_cast<double>(optim::onebit_error_size(total, ranks)) +
                      4.0 * static_cast<double>(optim::kOneBitLambScalars * shapes.size());
      break;
    }
    case train::OptimizerKind::sgd: b.per_element += 4.0; break;
    case train::OptimizerKind::adamw8bit:
      b.per_element += 2.0 + 8.0 / static_cast<double>(optim::kQuantBlock);
      break;
    case train::OptimizerKind::adafactor: {
      double total = 0, vec = 0;
      for (const Shape& s : shapes) {
        const auto n = static_cast<double>(s.numel());
        total += n;
        if (s.rank() >= 2 && s.numel() > 0)
          b.replicated += 4.0 * static_cast<double>(s.dims()[0] + s.numel() / s.dims()[0]);
        else
          vec += n;
      }
      if (o.adafactor.has_beta1()) b.per_element += 4.0;
      if (total > 0) b.per_element += 4.0 * vec / total;
      break;
    }
  }
  return b;
}

std::string describe(const train::TrainerOptions& o, bool master, const OptimizerStateBytes& b) {
  const double moments = b.per_element - (master ? 4.0 : 0.0);
  std::string out = fmt::format("{}: {:.2f} bytes per parameter ({}{} {:.2f})",
                                train::optimizer_name(o.optimizer), b.per_element,
                                master ? "fp32 master 4 + " : "",
                                o.optimizer == train::OptimizerKind::adamw8bit ? "8-bit m, v"
                                                                                : "moments",
                                moments);
  if (b.replicated > 0)
    out += fmt::format(" + {} on every rank ({})",
                       format_bytes(static_cast<std::uint64_t>(b.replicated)),
                       o.optimizer == train::OptimizerKind::onebit_adam
                           ? "its own compression errors"
                       : o.optimizer == train::OptimizerKind::onebit_lamb
                           ? "its own compression errors and per-parameter scalars"
                           : "replicated row/column statistics");
  return out;
}

std::string describe(const ModelStateBytes& b) {
  auto f = [](double v) { return format_bytes(static_cast<std::uint64_t>(v)); };
  return fmt::format("params {}, grads {}, optimizer {}, total {}", f(b.params), f(b.grads),
                     f(b.optimizer), f(b.total()));
}

}  // namespace strata::parallel
