#include "parallel/engine/step_times.hpp"

#include <fmt/format.h>

namespace strata::parallel {

std::string describe(const StepTimes& t) {
  auto ms = [](double s) { return s * 1e3; };
  return fmt::format(
      "time: forward {:.1f} ms, backward {:.1f} ms, comm wait {:.1f} ms, optimizer {:.1f} ms, "
      "offload wait {:.1f} ms, other {:.1f} ms (step {:.1f} ms)",
      ms(t.forward), ms(t.backward), ms(t.comm_wait), ms(t.optimizer), ms(t.offload_wait),
      ms(t.other()), ms(t.total));
}

}  // namespace strata::parallel
