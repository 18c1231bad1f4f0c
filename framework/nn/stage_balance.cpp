#include "framework/nn/stage_balance.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "framework/core/error.hpp"

namespace strata::nn {

namespace {

struct Costs {
  int layers, stages;
  double first_extra, last_extra;
  double of(int stage, int k) const {
    double c = k;
    if (stage == 0) c += first_extra;
    if (stage == stages - 1) c += last_extra;
    return c;
  }
};

// Whether some cut keeps every stage at or below `limit`: taking as many layers as fit on each
// stage from the first on leaves the fewest for the rest, so it finds one if any exists.
bool fits(const Costs& c, double limit) {
  int next = 0;
  for (int s = 0; s < c.stages; ++s) {
    const int left_for_later = c.stages - 1 - s;
    const int most = s == c.stages - 1 ? c.layers - next : c.layers - next - left_for_later;
    int take = 0;
    while (take < most && c.of(s, take + 1) <= limit + 1e-9) ++take;
    if (take < 1 || (s == c.stages - 1 && take < most)) return false;
    next += take;
  }
  return true;
}

}  // namespace

std::vector<int> balance_stages(int layers, int stages, double first_extra, double last_extra) {
  if (stages < 1 || stages > layers)
    user_fail("nn", "{} layers cannot be cut into {} pipeline stages: every stage needs at least "
              "one layer; use between 1 and {} stages", layers, stages, layers);
  STRATA_CHECK(first_extra >= 0 && last_extra >= 0, "nn",
               "stage costs must be >= 0 (first {}, last {})", first_extra, last_extra);
  const Costs c{layers, stages, first_extra, last_extra};
  // 1. The smallest largest-stage cost: it is the cost of some stage.
  std::vector<double> limits;
  for (int k = 1; k <= layers; ++k)
    for (double e : {0.0, first_extra, last_extra, first_extra + last_extra}) limits.push_back(k + e);
  std::sort(limits.begin(), limits.end());
  double limit = limits.back();
  for (double l : limits)
    if (fits(c, l)) {
      limit = l;
      break;
    }
  // 2. Among the cuts within it, the most even (least sum of squared stage costs), found from the
  // last stage back: rest[s][j] is the best for stages s.. over layers [j, layers).
  const double inf = std::numeric_limits<double>::infinity();
  const auto L = static_cast<std::size_t>(layers);
  std::vector<std::vector<double>> rest(static_cast<std::size_t>(stages) + 1, std::vector<double>(L + 1, inf));
  rest[static_cast<std::size_t>(stages)][L] = 0;
  auto each_choice = [&](int s, int j, auto&& f) {
    for (int k = 1; j + k <= layers && c.of(s, k) <= limit + 1e-9; ++k) {
      const double after = rest[static_cast<std::size_t>(s) + 1][static_cast<std::size_t>(j + k)];
      if (after < inf && f(k, c.of(s, k) * c.of(s, k) + after)) return;
    }
  };
  for (int s = stages - 1; s >= 0; --s)
    for (int j = 0; j < layers; ++j) {
      double& best = rest[static_cast<std::size_t>(s)][static_cast<std::size_t>(j)];
      each_choice(s, j, [&](int, double v) {
        best = std::min(best, v);
        return false;
      });
    }
  // 3. Front to back, the fewest layers that keep the optimum (earlier stages hold more
  // micro-batches in flight under 1F1B, so their activation memory is the larger).
  std::vector<int> first{0};
  int j = 0;
  for (int s = 0; s < stages; ++s) {
    const double best = rest[static_cast<std::size_t>(s)][static_cast<std::size_t>(j)];
    int pick = 0;
    each_choice(s, j, [&](int k, double v) {
      if (std::abs(v - best) > 1e-9 * std::max(1.0, best)) return false;
      pick = k;
      return true;
    });
    STRATA_CHECK(pick > 0, "nn", "no cut of {} layers into {} stages (unreachable)", layers, stages);
    j += pick;
    first.push_back(j);
  }
  return first;
}

}  // namespace strata::nn
