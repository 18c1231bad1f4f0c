#include "launcher/run/attempt.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/wait.h>

#include <algorithm>
#include <utility>

#include "framework/memory/exit_report.hpp"

#include "launcher/run/process.hpp"

namespace strata::launcher::run {

bool AttemptResult::ok() const {
  return !hung && WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
}

namespace {

// "0", "0-3", "0,2,5-7".
std::string rank_list(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (j > i + 1)
      parts.push_back(fmt::format("{}-{}", ranks[i], ranks[j]));
    else
      for (std::size_t k = i; k <= j; ++k) parts.push_back(fmt::format("{}", ranks[k]));
    i = j + 1;
  }
  return fmt::format("{}", fmt::join(parts, ","));
}

// The first line of a message, cut to a summary's width.
std::string excerpt_of(const std::vector<std::string>& message) {
  for (const auto& line : message)
    if (!line.empty()) return bounded_message(line, 400, 1);
  return "";
}

}  // namespace

const ExitRecord* AttemptResult::final_failure() const {
  for (const ExitRecord& r : records)
    if (r.final()) return &r;
  return nullptr;
}

std::string AttemptResult::last_words() const {
  std::vector<std::pair<std::vector<std::string>, std::vector<int>>> texts;
  for (const ExitRecord& r : records) {
    if (r.message.empty()) continue;
    auto it = std::find_if(texts.begin(), texts.end(),
                           [&](const auto& t) { return t.first == r.message; });
    if (it == texts.end())
      texts.push_back({r.message, {r.rank}});
    else
      it->second.push_back(r.rank);
  }
  std::string out;
  for (const auto& [lines, ranks] : texts) {
    const std::string prefix = fmt::format("[{}] ", rank_list(ranks));
    for (const auto& line : lines)
      out += fmt::format("{}{}\n", prefix, bounded_message(line, 1024, 1));
  }
  return out;
}

std::string AttemptResult::failure(bool excerpt) const {
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
  if (excerpt)
    if (const std::string e = excerpt_of(first->message); !e.empty()) s += ": " + e;
  for (std::size_t i = 0; i < others.size() && i < 2; ++i) s += "; then " + others[i]->describe();
  if (others.size() > 2) s += fmt::format("; and {} more ranks", others.size() - 2);
  return s;
}

std::string AttemptResult::outcome(bool excerpt) const {
  if (ok() && grow_to)
    return fmt::format("saved and stopped after {:.1f} s to grow to {} ({})", seconds,
                       host_names(*grow_to), grow_reason);
  if (ok()) return fmt::format("completed in {:.1f} s", seconds);
  return fmt::format("failed after {:.1f} s: {}", seconds, failure(excerpt));
}

std::string summary(const std::vector<AttemptResult>& attempts) {
  std::string s;
  for (const AttemptResult& a : attempts)
    s += fmt::format("  attempt {}: {}\n", a.number, a.outcome(true));
  return s;
}

}  // namespace strata::launcher::run
