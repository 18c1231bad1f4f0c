#include "launcher/run/attempt.hpp"

#include <fmt/format.h>
#include <sys/wait.h>

#include "launcher/run/process.hpp"

namespace strata::launcher::run {

bool AttemptResult::ok() const {
  return !hung && WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
}

std::string AttemptResult::failure() const {
  if (hung) return *hung;
  // The first rank that failed on its own; ranks that mpirun stopped afterwards are collateral.
  const ExitRecord* first = nullptr;
  std::vector<const ExitRecord*> others;
  for (const ExitRecord& r : records) {
    if (r.collateral) continue;
    if (first)
      others.push_back(&r);
    else
      first = &r;
  }
  if (!first && !records.empty()) first = &records.front();
  if (!first) {
    const std::string who = direct ? "the rank wrapper" : "mpirun";
    return fmt::format("{} {} and no rank reported a failure (see the messages above)", who,
                       describe_wait_status(wait_status));
  }
  std::string s = first->describe();
  const auto p = progress.find(first->rank);
  s += p == progress.end() ? " before reporting any step"
                           : fmt::format(" after step {}", p->second.step);
  for (std::size_t i = 0; i < others.size() && i < 2; ++i) s += "; then " + others[i]->describe();
  if (others.size() > 2) s += fmt::format("; and {} more ranks", others.size() - 2);
  return s;
}

std::string AttemptResult::outcome() const {
  if (ok()) return fmt::format("completed in {:.1f} s", seconds);
  return fmt::format("failed after {:.1f} s: {}", seconds, failure());
}

std::string summary(const std::vector<AttemptResult>& attempts) {
  std::string s;
  for (const AttemptResult& a : attempts)
    s += fmt::format("  attempt {}: {}\n", a.number, a.outcome());
  return s;
}

}  // namespace strata::launcher::run
