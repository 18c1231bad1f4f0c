#include "parallel/zero/zero_memory.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "framework/memory/size.hpp"
#include "framework/optim/onebit_adam.hpp"

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

OptimizerStateBytes optimizer_state_bytes(const optim::Optimizer& o, bool master,
                                          const std::vector<Shape>& shapes, int ranks) {
  using optim::StateShape;
  OptimizerStateBytes b;
  b.per_element = master ? 4.0 : 0.0;
  for (const optim::StateTensor& t : o.declaration().state) {
    const auto size = static_cast<double>(dtype_size(t.dtype));
    switch (t.shape) {
      case StateShape::elements: b.per_element += size; break;
      case StateShape::blocks: b.per_element += size / static_cast<double>(t.count); break;
      case StateShape::vectors: {
        double total = 0, vec = 0;
        for (const Shape& s : shapes) {
          const auto n = static_cast<double>(s.numel());
          total += n;
          if (!(s.rank() >= 2 && s.numel() > 0)) vec += n;
        }
        if (total > 0) b.per_element += size * vec / total;
        break;
      }
      case StateShape::factored:
        for (const Shape& s : shapes)
          if (s.rank() >= 2 && s.numel() > 0)
            b.replicated += size * static_cast<double>(s.dims()[0] + s.numel() / s.dims()[0]);
        break;
      case StateShape::per_param:
        b.replicated += size * static_cast<double>(t.count * static_cast<std::int64_t>(shapes.size()));
        break;
      case StateShape::rank_errors:
        if (t.count == 1) {  // one tensor of every parameter
          std::size_t total = 0;
          for (const Shape& s : shapes) total += static_cast<std::size_t>(s.numel());
          b.replicated += size * static_cast<double>(optim::onebit_error_size(total, ranks));
        } else {
          for (const Shape& s : shapes)
            b.replicated += size * static_cast<double>(optim::onebit_error_size(
                                       static_cast<std::size_t>(s.numel()), ranks));
        }
        break;
    }
  }
  return b;
}

std::string describe(const optim::Optimizer& o, bool master, const OptimizerStateBytes& b) {
  const optim::Declaration& d = o.declaration();
  const double moments = b.per_element - (master ? 4.0 : 0.0);
  std::string out = fmt::format("{}: {:.2f} bytes per parameter ({}{} {:.2f})", d.name,
                                b.per_element, master ? "fp32 master 4 + " : "", d.state_words,
                                moments);
  if (b.replicated > 0) {
    // What every rank holds whole, named by shape.
    std::vector<std::string> what;
    auto has = [&](optim::StateShape s) {
      return std::any_of(d.state.begin(), d.state.end(),
                         [&](const optim::StateTensor& t) { return t.shape == s; });
    };
    if (has(optim::StateShape::factored)) what.emplace_back("replicated row/column statistics");
    if (has(optim::StateShape::rank_errors)) what.emplace_back("its own compression errors");
    if (has(optim::StateShape::per_param)) what.emplace_back("per-parameter scalars");
    out += fmt::format(" + {} on every rank ({})",
                       format_bytes(static_cast<std::uint64_t>(b.replicated)),
                       fmt::join(what, " and "));
  }
  return out;
}

std::string describe(const ModelStateBytes& b) {
  auto f = [](double v) { return format_bytes(static_cast<std::uint64_t>(v)); };
  return fmt::format("params {}, grads {}, optimizer {}, total {}", f(b.params), f(b.grads),
                     f(b.optimizer), f(b.total()));
}

}  // namespace strata::parallel
